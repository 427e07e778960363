"""The allocation ledger: one SQLite file under the state dir, shared by every shoal process.

This module holds the allocation rows' state transitions: reserving capacity (checked and
written atomically), the sweep, readmission and status moves. It is the ledger's public
face: callers import `Ledger`, `Allocation`, the statuses and `WaiterFits` from here.
`Ledger` builds on `drivers.ledger.store` (plumbing, reads, usage), `drivers.ledger.windows`
(reservations, capacity over time) and `drivers.ledger.waiters` (the `alloc --wait` queue);
the SQLite file itself is `drivers.ledger.db`, the rows and statuses `drivers.ledger.rows`.

Capacity is checked and the reservation written in one `BEGIN IMMEDIATE` transaction, which
SQLite serialises across processes, so N racing `shoal alloc` never oversubscribe. A row is
`ALLOCATING` (with its owner's pid and start time) while the driver works; a row whose owner
died (kill -9, power loss) is found by the next command and handed back for cleanup as
`ORPHANED`; it counts as usage until its driver confirms the cleanup (its workload may run).

Capacity has a time axis (drivers.ledger.timeline): a check covers the window the request would
hold, beside `RESERVED` rows (`alloc --at`) over theirs. The `waiters` table is the queue of
`alloc --wait` (arrival order = id); a write that frees capacity rings the first waiter of
each driver after it commits (drivers.ledger.doorbell).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from drivers.ledger.rows import (
    ALL_STATUSES,
    ALLOCATED,
    ALLOCATING,
    COLUMNS,
    ENDED_BEFORE_FREE,
    EXITED,
    EXPIRED,
    FAILED,
    FREED,
    FREEING,
    FREEING_FROM,
    GONE,
    HOLDING,
    IN_FLIGHT,
    LAPSED,
    NOT_ENDED,
    ORPHANED,
    RESERVED,
    Allocation,
    stamp,
    unstamp,
)
from drivers.ledger.store import HOLDS_SQL, sql_in
from drivers.ledger.waiters import LedgerWaiters, WaiterFits
from drivers.ledger.windows import CANCELLED
from drivers.supervisor import procinfo

if TYPE_CHECKING:
    from drivers.ledger.db import Conn
    from drivers.ledger.timeline import Span, Waiter
    from drivers.spec.types import Resources

__all__ = [
    "ALLOCATED",
    "ALLOCATING",
    "ALL_STATUSES",
    "CANCELLED",
    "EXITED",
    "EXPIRED",
    "FAILED",
    "FREED",
    "FREEING",
    "FREEING_FROM",
    "GONE",
    "HOLDING",
    "IN_FLIGHT",
    "LAPSED",
    "NOT_ENDED",
    "ORPHANED",
    "RESERVED",
    "Allocation",
    "Ledger",
    "WaiterFits",
]

# A remote capacity check runs outside the lock this many times before it is run inside.
OPTIMISTIC_TRIES = 3


class Ledger(LedgerWaiters):
    """The allocation ledger; `Ledger(path, clock)` (see LedgerStore) reads and writes it."""

    def sweep(self) -> list[Allocation]:
        """Release rows whose owner died, lapse unclaimed reservations, drop dead waiters;
        returns the ORPHANED rows that need cleanup."""
        if not self.exists:
            return []
        now = stamp(self.clock())
        rows = self._db.query(
            "SELECT id, owner_pid, owner_start, owner_host, lease, status FROM allocations "
            f"WHERE status IN {sql_in((*IN_FLIGHT, ORPHANED))}"
        )
        dead = [
            r for r in rows
            if r[5] != ORPHANED and not self.alive(r[3], r[1], r[2], r[4])
        ]  # fmt: skip
        # An ORPHANED row is cleaned up by a machine that can reach its workload: any for a
        # team driver's, only its own for a machine's (process, a local container engine).
        orphans = [r for r in rows if r[5] == ORPHANED]
        due = self._db.query(
            "SELECT 1 FROM allocations WHERE status=? AND claim_by <= ? LIMIT 1", (RESERVED, now)
        )
        self._sweep_waiters()
        if not dead and not due and not orphans:
            return []
        if dead or due:
            with self._write() as conn:
                self._sweep(conn, now)
        return [row for row in self.with_status(ORPHANED) if row.is_remote or self.mine(row)]

    # -- writes --------------------------------------------------------------------------

    def reserve(
        self,
        *,
        driver: str,
        definition: dict[str, Any],
        resources: Resources,
        metadata: dict[str, Any],
        is_remote: bool,
        expires: datetime | None,
        fits: Callable[[Resources], int],
        starts: datetime | None = None,
        claim_by: datetime | None = None,
        queue: WaiterFits | None = None,
        waiter: int | None = None,
        windowed: bool | None = None,
    ) -> str:
        """Check capacity and insert an ALLOCATING row (with `starts`: a RESERVED row for
        [starts, expires)), atomically.

        `fits(node_usage)` returns how many such definitions fit; below 1 nothing is written.
        A local check covers the request's whole window: [now, expires) for an allocation
        (until freed without a lifetime), at its start and at every reservation starting
        inside it. With `queue` (the capacity check for another waiter's definition) an
        allocation also gives way to the `alloc --wait` waiters that came before it
        (`waiter`: its own place in the queue, whose row it leaves on success; None: it came
        last). A local driver's check is arithmetic and runs inside the write lock. A remote
        driver's asks an API, which may take seconds: it runs outside the lock, and the row is
        written only if the driver's holdings are still the ones the check saw (else the
        check runs again), so racing shoals still never oversubscribe, and a slow cloud never
        holds up a local `alloc`. `windowed` (default: not `is_remote`): shoal's own
        arithmetic decides what fits, over time, with bookings; a team-scoped driver whose
        capacity shoal counts (`scope = "team"` on a local kind) is checked so, over every
        machine's rows of that driver, under the lock.
        """
        scope = driver if is_remote else None
        windowed = not is_remote if windowed is None else windowed
        if is_remote and not windowed:
            for _ in range(OPTIMISTIC_TRIES):
                seen = self._holdings(scope)
                count = fits(self.node_usage(scope))  # no lock held during the remote call
                with self._write() as conn:
                    self._sweep(conn, stamp(self.clock()))
                    if self._holdings(scope, conn) == seen:
                        self._check_remote(conn, count, driver, resources, queue, waiter)
                        return self._insert(
                            conn, driver, definition, resources, metadata, is_remote, expires,
                            waiter=waiter,
                        )  # fmt: skip
        # Local, or a remote driver whose holdings kept changing: check under the lock.
        with self._write() as conn:
            now = self.clock()
            self._sweep(conn, stamp(now))
            if not windowed:
                count = fits(self._usage(conn, scope))
                self._check_remote(conn, count, driver, resources, queue, waiter)
            else:
                self._check_window(
                    conn, now, driver, resources, starts, expires, fits, queue, waiter, scope
                )
            return self._insert(
                conn, driver, definition, resources, metadata, is_remote, expires,
                starts=starts, claim_by=claim_by, waiter=waiter,
            )  # fmt: skip

    def _check_remote(
        self,
        conn: Conn,
        count: int,
        driver: str,
        resources: Resources,
        queue: WaiterFits | None,
        waiter: int | None,
    ) -> None:
        """A remote driver's backend decides what fits; its waiters are served strictly in
        arrival order (judging another waiter's fit would mean another API call)."""
        from providers.core.errors import NoCapacityError

        what = f"cpu={resources.cpu} ram={resources.ram}GiB"
        if count < 1:
            raise NoCapacityError(
                f"no capacity for {driver}: {what} does not fit now; free something, retry "
                "later or wait for it with --wait"
            )
        if queue is not None:
            ahead = [w for w in self._waiters(conn, driver, before=waiter) if self._alive(w)]
            if ahead:
                raise NoCapacityError(
                    f"no capacity for {driver}: {what} fits now, but {len(ahead)} earlier "
                    "waiter(s) come first; `shoal alloc --wait` queues behind them"
                )

    def _check_window(
        self,
        conn: Conn,
        now: datetime,
        driver: str,
        resources: Resources,
        starts: datetime | None,
        expires: datetime | None,
        fits: Callable[[Resources], int],
        queue: WaiterFits | None,
        waiter: int | None,
        scope: str | None = None,
    ) -> None:
        from drivers.ledger.timeline import refusal, serve_in_order, window_fit
        from providers.core.errors import NoCapacityError

        spans = self._spans(conn, scope, now)
        begin = starts or now
        ahead: list[Span] = []
        if queue is not None:
            dead: list[Waiter] = []

            def alive(w: Waiter) -> bool:
                if self._alive(w):
                    return True
                dead.append(w)
                return False

            earlier = self._waiters(conn, driver, before=waiter)
            _, ahead = serve_in_order(earlier, spans, now, queue, alive)
            self._drop_waiters(conn, dead)
        if window_fit([*spans, *ahead], begin, expires, fits).count >= 1:
            return
        plain = window_fit(spans, begin, expires, fits)
        raise NoCapacityError(
            refusal(
                driver=driver,
                cpu=resources.cpu,
                ram=resources.ram,
                life=expires - begin if expires else None,
                start=begin,
                now=now,
                fit=plain,
                spans=spans,
                fits=fits,
                ahead=len(ahead) if plain.count >= 1 else 0,
                booking=starts is not None,
            )
        )

    def _holdings(self, remote_driver: str | None, conn: Conn | None = None) -> str:
        """Which rows hold capacity of this scope, and in what state: equal strings mean the
        usage a capacity check saw has not changed since."""
        scope = self._scope(remote_driver)
        sql = (
            f"SELECT COALESCE({self._db.concat}(id || ':' || status, ','), '') FROM (SELECT id, "
            f"status FROM allocations WHERE {HOLDS_SQL} AND {scope} ORDER BY id) AS held"
        )
        args = () if remote_driver is None else (remote_driver,)
        if conn is not None:
            return str(conn.execute(sql, args).fetchone()[0])
        rows = self._db.query(sql, args)
        return str(rows[0][0]) if rows else ""

    def _insert(
        self,
        conn: Conn,
        driver: str,
        definition: dict[str, Any],
        resources: Resources,
        metadata: dict[str, Any],
        is_remote: bool,
        expires: datetime | None,
        *,
        starts: datetime | None = None,
        claim_by: datetime | None = None,
        waiter: int | None = None,
    ) -> str:
        from providers.core.wire import format_time

        booking = starts is not None
        pid, started = (None, None) if booking else procinfo.self_identity()
        now = stamp(self.clock())
        note = None
        if starts is not None and expires is not None and claim_by is not None:
            note = (
                f"reserved from {format_time(starts)} to {format_time(expires)}; "
                f"claim by {format_time(claim_by)}"
            )
        prefix = driver.split("/", 1)[0]
        for _ in range(8):
            # os.urandom: what secrets.token_hex reads, without its import of hmac (~10 ms).
            alloc_id = f"{prefix}-{os.urandom(4).hex()}"
            if not conn.execute("SELECT 1 FROM allocations WHERE id=?", (alloc_id,)).fetchone():
                break
        conn.execute(
            f"INSERT INTO allocations ({COLUMNS}) VALUES "
            "(?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                alloc_id,
                driver,
                RESERVED if booking else ALLOCATING,
                json.dumps(definition),
                json.dumps(metadata),
                now,
                now,
                stamp(expires) if expires else None,
                resources.cpu,
                resources.ram,
                int(resources.multitenancy),
                int(resources.cpu_overbook),
                int(resources.ram_overbook),
                int(is_remote),
                pid,
                started,
                note,
                stamp(starts) if starts else None,
                stamp(claim_by) if claim_by else None,
                self.host,
                None if booking else self.host,
                None if booking else self._lease(),
            ),
        )
        if waiter is not None:
            conn.execute("DELETE FROM waiters WHERE id=?", (waiter,))
        return alloc_id

    def readmit(self, alloc_id: str, fits: Callable[[Resources], int]) -> bool:
        """GONE -> ALLOCATED, only if it fits again until its expiry, beside the reservations
        (checked and written in one transaction)."""
        from drivers.ledger.timeline import window_fit

        with self._write() as conn:
            row = conn.execute(
                "SELECT driver, is_remote, expires FROM allocations WHERE id=? AND status='GONE'",
                (alloc_id,),
            ).fetchone()
            if row is None:
                return False
            now = self.clock()
            if row[1]:
                count = fits(self._usage(conn, row[0]))
            else:
                end = unstamp(row[2]) if row[2] else None
                spans = self._spans(conn, None, now)
                count = window_fit(spans, now, end if end and end > now else None, fits).count
            if count < 1:
                return False
            conn.execute(
                "UPDATE allocations SET status='ALLOCATED', updated=?, note=? WHERE id=?",
                (stamp(now), "driver reports it again", alloc_id),
            )
        return True

    def set_status(
        self,
        alloc_id: str,
        status: str,
        *,
        state: dict[str, Any] | None = None,
        note: str | None = None,
        expect: tuple[str, ...] | None = None,
        owner: bool = False,
        held_by_me: bool = False,
    ) -> bool:
        """Move a row to `status` (only from `expect`, if given; with `held_by_me`, only a
        row this process owns); True if it moved."""
        now = stamp(self.clock())
        sets = ["status=?", "updated=?", "note=?"]
        params: list[Any] = [status, now, note]
        if state is not None:
            sets.append("state=?")
            params.append(json.dumps(state))
        pid, started = procinfo.self_identity() if owner else (None, None)
        sets += ["owner_pid=?", "owner_start=?", "owner_host=?", "lease=?"]
        params += [pid, started, self.host if owner else None, self._lease() if owner else None]
        sql = f"UPDATE allocations SET {', '.join(sets)} WHERE id=?"
        params.append(alloc_id)
        if expect:
            sql += f" AND status IN ({', '.join('?' * len(expect))})"
            params += list(expect)
        if held_by_me:
            sql += " AND owner_pid=? AND owner_start=?"
            params += list(procinfo.self_identity())
            if self.team:
                sql += " AND owner_host=?"
                params.append(self.host)
        with self._write() as conn:
            if expect and FREEING in expect:
                self._sweep(conn, now)
            moved = conn.execute(sql, tuple(params)).rowcount
            if moved and status not in (*HOLDING, RESERVED):
                self._ring_pending = True  # capacity came back: the waiters may fit now
        return moved == 1

    def undo_free(self, alloc_id: str, previous: str, note: str | None) -> bool:
        """Put back a row a `free` could not finish (interrupted, or its driver failed): as it
        was (`previous`, `note`), unless its workload ended meanwhile. Its supervisor then
        said so in the FREEING row's note (`freeing from EXITED`: drivers.supervisor.supervise),
        and the row becomes that end: an ALLOCATED row would hold capacity nothing uses. True if it
        moved."""
        now = stamp(self.clock())
        with self._write() as conn:
            found = conn.execute(
                "SELECT note FROM allocations WHERE id=? AND status=?", (alloc_id, FREEING)
            ).fetchone()
            if found is None:
                return False
            ended = (found[0] or "").removeprefix(FREEING_FROM)
            if previous in (ALLOCATED, GONE) and ended in ENDED_BEFORE_FREE and ended != previous:
                previous, note = ended, f"{ended.lower()} while it was being freed; free it again"
            moved = conn.execute(
                "UPDATE allocations SET status=?, updated=?, note=?, owner_pid=NULL, "
                "owner_start=NULL WHERE id=? AND status=?",
                (previous, now, note, alloc_id, FREEING),
            ).rowcount
            if moved and previous not in HOLDING:
                self._ring_pending = True
        return moved == 1
