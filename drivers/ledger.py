"""The allocation ledger: one SQLite file under the state dir, shared by every shoal process.

This module holds the allocation queries and state transitions; the SQLite file itself is
`drivers.ledger_db`, the rows and statuses `drivers.ledger_rows`. It is the ledger's public
face: callers import `Ledger`, `Allocation` and the statuses from here.

Capacity is checked and the reservation written in one `BEGIN IMMEDIATE` transaction, which
SQLite serialises across processes, so N racing `shoal alloc` never oversubscribe. A row is
`ALLOCATING` (with its owner's pid and start time) while the driver works; a row whose owner
died (kill -9, power loss) is found by the next command and handed back for cleanup as
`ORPHANED`; it counts as usage until its driver confirms the cleanup (its workload may run).

Capacity has a time axis (drivers.timeline): a check covers the window the request would
hold, beside `RESERVED` rows (`alloc --at`) over theirs. The `waiters` table is the queue of
`alloc --wait` (arrival order = id); a write that frees capacity rings the first waiter of
each driver after it commits (drivers.doorbell).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers import procinfo
from drivers.ledger_db import LedgerDb, patiently
from drivers.ledger_rows import (
    ALL_STATUSES,
    ALLOCATED,
    ALLOCATING,
    COLUMNS,
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
    summary_row,
    unstamp,
)
from providers.core.errors import LedgerCorruptError, NotFoundError
from providers.core.usage import AllocationUsage

if TYPE_CHECKING:
    from drivers.timeline import Fit, Span, Waiter
    from drivers.types import Resources

# Decides whether a queued request fits beside a given node usage (the driver's capacity
# check for that waiter's definition): how a shoal judges the waiters ahead of it.
WaiterFits = Callable[["Waiter", "Resources"], int]

__all__ = [
    "ALLOCATED",
    "ALLOCATING",
    "ALL_STATUSES",
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
]

CANCELLED = "reservation cancelled"  # the note of a reservation `free` cancelled
# A remote capacity check runs outside the lock this many times before it is run inside.
OPTIMISTIC_TRIES = 3


def _sql_in(statuses: tuple[str, ...]) -> str:
    """`('A', 'B')` for `status IN ...`: the status sets are named once, in ledger_rows."""
    return "(" + ", ".join(f"'{s}'" for s in statuses) + ")"


_HOLDING_SQL = _sql_in(HOLDING)
_LOCAL_SETTLED_SQL = _sql_in((ALLOCATED, FREEING, ORPHANED))  # ALLOCATING is checked by owner
_NOT_ENDED_SQL = _sql_in(NOT_ENDED)


def _now() -> datetime:
    return datetime.now(UTC)


class Ledger:
    def __init__(self, path: Path, clock: Callable[[], datetime] = _now) -> None:
        """Reads of a ledger that does not exist see it empty; the first write creates it.
        `clock` tells the time for windows, reservations and rows (tests move it)."""
        self._db = LedgerDb(path)
        self.clock = clock
        self._ring_pending = False

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction; waiters are rung after it commits if it freed capacity."""
        self._ring_pending = False
        with self._db.transaction() as conn:
            yield conn
        if self._ring_pending:
            self._ring_pending = False
            self.ring_waiters()

    def data_version(self) -> int:
        return self._db.data_version()

    @property
    def path(self) -> Path:
        return self._db.path

    @property
    def exists(self) -> bool:
        return self._db.exists

    def close(self) -> None:
        self._db.close()

    # -- orphans -------------------------------------------------------------------------

    def _sweep(self, conn: sqlite3.Connection, now: str) -> None:
        lapsed = conn.execute(
            "UPDATE allocations SET status=?, updated=?, note='not claimed by ' || claim_by || "
            "'; its capacity was freed' WHERE status=? AND claim_by <= ?",
            (LAPSED, now, RESERVED, now),
        ).rowcount
        if lapsed:
            self._ring_pending = True
        rows = conn.execute(
            "SELECT id, owner_pid, owner_start, status, note FROM allocations "
            f"WHERE status IN {_sql_in(IN_FLIGHT)}"
        ).fetchall()
        for row_id, pid, started, status, note in rows:
            if pid is not None and procinfo.is_alive(pid, started):
                continue
            # An interrupted allocate may hold a workload (cleaned up as ORPHANED); an
            # interrupted free goes back to what it was before (ALLOCATED, GONE, ORPHANED,
            # EXPIRED).
            new_status = ORPHANED
            if status == FREEING:
                before = (note or "").removeprefix(FREEING_FROM)
                restorable = (ALLOCATED, GONE, ORPHANED, EXPIRED)
                new_status = before if before in restorable else ALLOCATED
            conn.execute(
                "UPDATE allocations SET status=?, updated=?, owner_pid=NULL, owner_start=NULL, "
                "note=? WHERE id=?",
                (new_status, now, f"owner process {pid} died during {status.lower()}", row_id),
            )

    def sweep(self) -> list[Allocation]:
        """Release rows whose owner died, lapse unclaimed reservations, drop dead waiters;
        returns the ORPHANED rows that need cleanup."""
        if not self.exists:
            return []
        now = stamp(self.clock())
        rows = self._db.query(
            "SELECT id, owner_pid, owner_start FROM allocations "
            f"WHERE status IN {_sql_in((*IN_FLIGHT, ORPHANED))}"
        )
        dead = [r for r in rows if r[1] is None or not procinfo.is_alive(r[1], r[2])]
        due = self._db.query(
            "SELECT 1 FROM allocations WHERE status=? AND claim_by <= ? LIMIT 1", (RESERVED, now)
        )
        self._sweep_waiters()
        if not dead and not due:
            return []
        with self._write() as conn:
            self._sweep(conn, now)
        return self.with_status(ORPHANED)

    # -- usage ---------------------------------------------------------------------------

    @staticmethod
    def _usage(conn: sqlite3.Connection, remote_driver: str | None = None) -> Resources:
        """What local drivers hold of this node; for a remote driver, what it holds itself."""
        from drivers.types import Resources

        scope = "is_remote = 0" if remote_driver is None else "is_remote = 1 AND driver = ?"
        cpu, ram, count, multi, cpu_ob, ram_ob = conn.execute(
            "SELECT COALESCE(SUM(cpu), 0), COALESCE(SUM(ram), 0), COUNT(*), "
            "COALESCE(MIN(multitenancy), 0), COALESCE(MIN(cpu_overbook), 0), "
            "COALESCE(MIN(ram_overbook), 0) FROM allocations "
            f"WHERE status IN {_HOLDING_SQL} AND {scope}",
            () if remote_driver is None else (remote_driver,),
        ).fetchone()
        if count == 0:
            return Resources()
        return Resources(
            cpu=cpu,
            ram=ram,
            multitenancy=bool(multi),
            cpu_overbook=bool(cpu_ob),
            ram_overbook=bool(ram_ob),
        )

    def node_usage(self, remote_driver: str | None = None) -> Resources:
        if not self.exists:
            from drivers.types import Resources

            return Resources()
        try:
            return patiently(lambda: self._usage(self._db.conn(), remote_driver))
        except sqlite3.Error as exc:
            raise self._db.failure(exc) from None

    def active_local_usage(self) -> list[AllocationUsage]:
        """Usage grouped by driver and expiry (SQLite sums; a big ledger stays cheap), then
        the reservations still to be claimed (`starts` set: they hold from then)."""
        settled = self._db.query(
            "SELECT driver, SUM(cpu), SUM(ram), expires FROM allocations "
            f"WHERE status IN {_LOCAL_SETTLED_SQL} AND is_remote = 0 "
            "GROUP BY driver, expires"
        )
        in_flight = self._db.query(
            "SELECT driver, cpu, ram, expires, owner_pid, owner_start FROM allocations "
            "WHERE status = 'ALLOCATING' AND is_remote = 0"
        )
        rows = [(d, c, r, e) for d, c, r, e in settled] + [
            (d, c, r, e)
            for d, c, r, e, pid, started in in_flight
            # An allocation whose shoal died mid-way holds nothing, even before cleanup.
            if pid is not None and procinfo.is_alive(pid, started)
        ]
        return [
            AllocationUsage(driver=d, cpu=c, ram_gib=r, expires=unstamp(e) if e else None)
            for d, c, r, e in rows
        ] + self.reservations()

    def reservations(self) -> list[AllocationUsage]:
        """Local reservations still to be claimed, each holding from its window's start."""
        rows = self._db.query(
            "SELECT driver, cpu, ram, expires, starts, id FROM allocations "
            "WHERE status=? AND is_remote = 0 AND claim_by > ? ORDER BY starts, id",
            (RESERVED, stamp(self.clock())),
        )
        return [
            AllocationUsage(
                driver=d, cpu=c, ram_gib=r, expires=unstamp(e), starts=unstamp(st), label=i
            )
            for d, c, r, e, st, i in rows
        ]

    # -- windows -------------------------------------------------------------------------

    def _spans(
        self, conn: sqlite3.Connection, remote_driver: str | None, now: datetime
    ) -> list[Span]:
        """What holds capacity of this scope over time: allocations from now until their
        expiry (overdue or without one: until freed), reservations over their windows."""
        from drivers.timeline import Span

        scope = "is_remote = 0" if remote_driver is None else "is_remote = 1 AND driver = ?"
        args: tuple[Any, ...] = () if remote_driver is None else (remote_driver,)
        spans: list[Span] = []
        for expires, cpu, ram, count, multi, cpu_ob, ram_ob, first in conn.execute(
            "SELECT expires, SUM(cpu), SUM(ram), COUNT(*), MIN(multitenancy), "
            "MIN(cpu_overbook), MIN(ram_overbook), MIN(id) FROM allocations "
            f"WHERE status IN {_HOLDING_SQL} AND {scope} GROUP BY expires",
            args,
        ):
            end = unstamp(expires) if expires else None
            spans.append(
                Span(
                    cpu=cpu, ram=ram, count=count, multitenancy=bool(multi),
                    cpu_overbook=bool(cpu_ob), ram_overbook=bool(ram_ob),
                    end=end if end is not None and end > now else None, label=first,
                )
            )  # fmt: skip
        for row_id, starts, expires, cpu, ram, multi, cpu_ob, ram_ob in conn.execute(
            "SELECT id, starts, expires, cpu, ram, multitenancy, cpu_overbook, ram_overbook "
            f"FROM allocations WHERE status=? AND claim_by > ? AND {scope}",
            (RESERVED, stamp(now), *args),
        ):
            spans.append(
                Span(
                    cpu=cpu, ram=ram, multitenancy=bool(multi), cpu_overbook=bool(cpu_ob),
                    ram_overbook=bool(ram_ob), start=unstamp(starts), end=unstamp(expires),
                    label=row_id, reserved=True,
                )
            )  # fmt: skip
        return spans

    def fit_window(
        self,
        fits: Callable[[Resources], int],
        *,
        remote_driver: str | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> Fit:
        """How many fit over [start, end) (default: from now, until freed), counting the
        reservations that overlap it; nothing is written."""
        from drivers.timeline import window_fit

        now = self.clock()
        begin = start or now
        if not self.exists:
            return window_fit([], begin, end, fits)
        try:
            spans = patiently(lambda: self._spans(self._db.conn(), remote_driver, now))
        except sqlite3.Error as exc:
            raise self._db.failure(exc) from None
        return window_fit(spans, begin, end, fits)

    def expected_back(
        self, fits: Callable[[Resources], int], life: timedelta | None
    ) -> tuple[datetime, str] | None:
        """When a request of this lifetime next fits as local holdings end, and what ends."""
        from drivers.timeline import next_fit

        if not self.exists:
            return None
        now = self.clock()
        try:
            spans = patiently(lambda: self._spans(self._db.conn(), None, now))
        except sqlite3.Error as exc:
            raise self._db.failure(exc) from None
        return next_fit(spans, now, life, fits)

    def next_release(self) -> datetime | None:
        """The next time capacity comes back with nobody writing: an allocation's expiry or
        a reservation's claim deadline."""
        now = stamp(self.clock())
        rows = self._db.query(
            "SELECT MIN(t) FROM (SELECT MIN(expires) AS t FROM allocations WHERE status IN "
            f"{_HOLDING_SQL} AND expires > ? UNION ALL SELECT MIN(claim_by) FROM allocations "
            "WHERE status=? AND claim_by > ?)",
            (now, RESERVED, now),
        )
        return unstamp(rows[0][0]) if rows and rows[0][0] else None

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
        holds up a local `alloc`.
        """
        scope = driver if is_remote else None
        if is_remote:
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
            if is_remote:
                count = fits(self._usage(conn, scope))
                self._check_remote(conn, count, driver, resources, queue, waiter)
            else:
                self._check_window(
                    conn, now, driver, resources, starts, expires, fits, queue, waiter
                )
            return self._insert(
                conn, driver, definition, resources, metadata, is_remote, expires,
                starts=starts, claim_by=claim_by, waiter=waiter,
            )  # fmt: skip

    def _check_remote(
        self,
        conn: sqlite3.Connection,
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
        conn: sqlite3.Connection,
        now: datetime,
        driver: str,
        resources: Resources,
        starts: datetime | None,
        expires: datetime | None,
        fits: Callable[[Resources], int],
        queue: WaiterFits | None,
        waiter: int | None,
    ) -> None:
        from drivers.timeline import refusal, serve_in_order, window_fit
        from providers.core.errors import NoCapacityError

        spans = self._spans(conn, None, now)
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

    def _holdings(self, remote_driver: str | None, conn: sqlite3.Connection | None = None) -> str:
        """Which rows hold capacity of this scope, and in what state: equal strings mean the
        usage a capacity check saw has not changed since."""
        scope = "is_remote = 0" if remote_driver is None else "is_remote = 1 AND driver = ?"
        sql = (
            "SELECT COALESCE(group_concat(id || ':' || status, ','), '') FROM (SELECT id, "
            f"status FROM allocations WHERE status IN {_HOLDING_SQL} AND {scope} ORDER BY id)"
        )
        args = () if remote_driver is None else (remote_driver,)
        if conn is not None:
            return str(conn.execute(sql, args).fetchone()[0])
        rows = self._db.query(sql, args)
        return str(rows[0][0]) if rows else ""

    def _insert(
        self,
        conn: sqlite3.Connection,
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
        import secrets

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
            alloc_id = f"{prefix}-{secrets.token_hex(4)}"
            if not conn.execute("SELECT 1 FROM allocations WHERE id=?", (alloc_id,)).fetchone():
                break
        conn.execute(
            f"INSERT INTO allocations ({COLUMNS}) VALUES "
            "(?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            ),
        )
        if waiter is not None:
            conn.execute("DELETE FROM waiters WHERE id=?", (waiter,))
        return alloc_id

    def readmit(self, alloc_id: str, fits: Callable[[Resources], int]) -> bool:
        """GONE -> ALLOCATED, only if it fits again until its expiry, beside the reservations
        (checked and written in one transaction)."""
        from drivers.timeline import window_fit

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
    ) -> bool:
        """Move a row to `status` (only from `expect`, if given); True if it moved."""
        now = stamp(self.clock())
        sets = ["status=?", "updated=?", "note=?"]
        params: list[Any] = [status, now, note]
        if state is not None:
            sets.append("state=?")
            params.append(json.dumps(state))
        pid, started = procinfo.self_identity() if owner else (None, None)
        sets += ["owner_pid=?", "owner_start=?"]
        params += [pid, started]
        sql = f"UPDATE allocations SET {', '.join(sets)} WHERE id=?"
        params.append(alloc_id)
        if expect:
            sql += f" AND status IN ({', '.join('?' * len(expect))})"
            params += list(expect)
        with self._write() as conn:
            if expect and FREEING in expect:
                self._sweep(conn, now)
            moved = conn.execute(sql, tuple(params)).rowcount
            if moved and status not in (*HOLDING, RESERVED):
                self._ring_pending = True  # capacity came back: the waiters may fit now
        return moved == 1

    # -- reservations ----------------------------------------------------------------------

    def claim(
        self, alloc_id: str, definition: dict[str, Any], metadata: dict[str, Any]
    ) -> Allocation:
        """RESERVED -> ALLOCATING for this shoal, from its window's start until it lapses; the
        definition and metadata become the claim's. Anything else is refused with what the
        row is."""
        pid, started = procinfo.self_identity()
        with self._write() as conn:
            now = stamp(self.clock())
            self._sweep(conn, now)  # a reservation past its claim deadline lapses first
            moved = conn.execute(
                "UPDATE allocations SET status=?, updated=?, definition=?, metadata=?, "
                "owner_pid=?, owner_start=?, note=? "
                "WHERE id=? AND status=? AND starts <= ? AND claim_by > ?",
                (ALLOCATING, now, json.dumps(definition), json.dumps(metadata), pid, started,
                 "claimed reservation", alloc_id, RESERVED, now, now),
            ).rowcount  # fmt: skip
        if not moved:
            raise self.unclaimable(self.get(alloc_id))
        return self.get(alloc_id)

    def unclaimable(self, row: Allocation) -> Exception:
        """Why `alloc --reservation` cannot claim this row now."""
        from drivers.timeline import duration_text
        from providers.core.errors import RetryableError, UsageError
        from providers.core.wire import format_time

        if row.status == RESERVED and row.starts:
            begins = unstamp(row.starts)
            return RetryableError(
                f"reservation {row.id} starts at {format_time(begins)} (in "
                f"{duration_text(begins - self.clock())}); claim it from then (--wait waits)"
            )
        if row.status == LAPSED:
            return UsageError(f"reservation {row.id} lapsed: {row.note}; book another")
        if row.starts and row.status == FREED and row.note == CANCELLED:
            return UsageError(f"reservation {row.id} was cancelled ({row.updated}); book another")
        if row.starts:
            return UsageError(f"reservation {row.id} was already claimed (it is {row.status})")
        return UsageError(
            f"{row.id} is an allocation ({row.status}), not a reservation; reservations are "
            "RESERVED in `shoal status`"
        )

    # -- waiters ---------------------------------------------------------------------------

    def enqueue(
        self,
        *,
        driver: str,
        definition: dict[str, Any],
        resources: Resources,
        life: timedelta | None,
        is_remote: bool,
        token: str,
    ) -> int:
        """Queue an `alloc --wait` (its arrival order is the id) with its doorbell's token."""
        pid, started = procinfo.self_identity()
        with self._write() as conn:
            cursor = conn.execute(
                "INSERT INTO waiters (driver, definition, cpu, ram, multitenancy, cpu_overbook, "
                "ram_overbook, life_seconds, is_remote, token, owner_pid, owner_start, created) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    driver, json.dumps(definition), resources.cpu, resources.ram,
                    int(resources.multitenancy), int(resources.cpu_overbook),
                    int(resources.ram_overbook), life.total_seconds() if life else None,
                    int(is_remote), token, pid, started, stamp(self.clock()),
                ),
            )  # fmt: skip
            return int(cursor.lastrowid or 0)

    def leave(self, waiter: int) -> None:
        """Leave the queue without allocating: those behind may fit now, so they are rung."""
        with self._write() as conn:
            if conn.execute("DELETE FROM waiters WHERE id=?", (waiter,)).rowcount:
                self._ring_pending = True

    _WAITER_COLUMNS = (
        "id, driver, definition, cpu, ram, multitenancy, cpu_overbook, ram_overbook, "
        "life_seconds, token, owner_pid, owner_start"
    )

    @staticmethod
    def _waiter(row: tuple[Any, ...]) -> Waiter:
        from drivers.timeline import Waiter

        return Waiter(
            id=row[0], driver=row[1], definition=json.loads(row[2]), cpu=row[3], ram=row[4],
            multitenancy=bool(row[5]), cpu_overbook=bool(row[6]), ram_overbook=bool(row[7]),
            life=timedelta(seconds=row[8]) if row[8] else None, token=row[9],
            owner_pid=row[10], owner_start=row[11],
        )  # fmt: skip

    def _waiters(
        self, conn: sqlite3.Connection, driver: str, before: int | None = None
    ) -> list[Waiter]:
        sql = f"SELECT {self._WAITER_COLUMNS} FROM waiters WHERE driver=?"
        args: tuple[Any, ...] = (driver,)
        if before is not None:
            sql += " AND id < ?"
            args += (before,)
        return [self._waiter(r) for r in conn.execute(sql + " ORDER BY id", args)]

    @staticmethod
    def _alive(waiter: Waiter) -> bool:
        return waiter.owner_pid is not None and procinfo.is_alive(
            waiter.owner_pid, waiter.owner_start
        )

    def _drop_waiters(self, conn: sqlite3.Connection, dead: list[Waiter]) -> None:
        from drivers import doorbell

        for waiter in dead:
            conn.execute("DELETE FROM waiters WHERE id=?", (waiter.id,))
            doorbell.forget(doorbell.bell_dir(self.path), waiter.token)
        if dead:
            self._ring_pending = True

    def _sweep_waiters(self) -> None:
        """Drop the queue places of shoals that died waiting (kill -9)."""
        rows = self._db.query(f"SELECT {self._WAITER_COLUMNS} FROM waiters")
        dead = [w for w in map(self._waiter, rows) if not self._alive(w)]
        if dead:
            with self._write() as conn:
                self._drop_waiters(conn, dead)

    def waiting(self, driver: str, before: int | None = None) -> list[Waiter]:
        """The queue of a driver, in arrival order (only those before `before`, if given)."""
        try:
            return patiently(lambda: self._waiters(self._db.conn(), driver, before))
        except sqlite3.Error as exc:
            raise self._db.failure(exc) from None

    def ahead(self, waiter: int, driver: str) -> int:
        """How many of its driver's waiters came before this one."""
        rows = self._db.query(
            "SELECT COUNT(*) FROM waiters WHERE driver=? AND id < ?", (driver, waiter)
        )
        return int(rows[0][0]) if rows else 0

    def leads(self, waiter: int, driver: str) -> bool:
        """Whether this waiter is first of its driver's queue, or the first is dead."""
        rows = self._db.query(
            "SELECT id, owner_pid, owner_start FROM waiters WHERE driver=? ORDER BY id LIMIT 1",
            (driver,),
        )
        if not rows or rows[0][0] == waiter:
            return True
        pid, started = rows[0][1], rows[0][2]
        return pid is None or not procinfo.is_alive(pid, started)

    def served_now(self, driver: str, queue: WaiterFits) -> list[Waiter]:
        """The waiters of a local driver that fit now, first come first served (a read)."""
        from drivers.timeline import serve_in_order

        def read() -> list[Waiter]:
            conn = self._db.conn()
            now = self.clock()
            spans = self._spans(conn, None, now)
            served, _ = serve_in_order(self._waiters(conn, driver), spans, now, queue, self._alive)
            return served

        try:
            return patiently(read)
        except sqlite3.Error as exc:
            raise self._db.failure(exc) from None

    def ring_waiters(self) -> None:
        """Wake the first live waiter of each driver; it works out who fits (and wakes them).
        A waiter whose pipe nobody holds is dead: its place is dropped and the next rung."""
        from drivers import doorbell
        from providers.core.errors import ShoalError

        directory = doorbell.bell_dir(self.path)
        rung: set[str] = set()
        try:
            rows = self._db.query("SELECT id, driver, token FROM waiters ORDER BY id")
            dead: list[tuple[int, str]] = []
            for waiter, driver, token in rows:
                if driver in rung:
                    continue
                if doorbell.ring(directory, token):
                    rung.add(driver)
                else:
                    dead.append((waiter, token))  # and on to the next one of its driver
            if dead:
                with self._db.transaction() as conn:
                    for waiter, _ in dead:
                        conn.execute("DELETE FROM waiters WHERE id=?", (waiter,))
                for _, token in dead:
                    doorbell.forget(directory, token)
        except ShoalError:
            return  # a courtesy: the waiters' own slow tick catches up

    # -- reads ---------------------------------------------------------------------------

    def get(self, alloc_id: str) -> Allocation:
        rows = self._db.query(f"SELECT {COLUMNS} FROM allocations WHERE id=?", (alloc_id,))
        if not rows:
            raise NotFoundError(f"no allocation {alloc_id!r}; `shoal status` lists them")
        return Allocation.from_row(rows[0])

    def with_status(self, *statuses: str) -> list[Allocation]:
        marks = ", ".join("?" * len(statuses))
        rows = self._db.query(
            f"SELECT {COLUMNS} FROM allocations WHERE status IN ({marks}) ORDER BY created",
            statuses,
        )
        return [Allocation.from_row(r) for r in rows]

    def expired(self, now: datetime) -> list[Allocation]:
        rows = self._db.query(
            f"SELECT {COLUMNS} FROM allocations WHERE status IN ('ALLOCATED', 'GONE') "
            "AND expires IS NOT NULL AND expires <= ? ORDER BY expires",
            (stamp(now),),
        )
        return [Allocation.from_row(r) for r in rows]

    def summaries(self, *, include_ended: bool) -> list[dict[str, Any]]:
        where = "" if include_ended else f"WHERE status IN {_NOT_ENDED_SQL}"
        rows = self._db.query(
            "SELECT id, driver, status, cpu, ram, created, expires, updated, note "
            f"FROM allocations {where} ORDER BY created"
        )
        return [summary_row(r) for r in rows]

    def summaries_json(self, *, include_ended: bool) -> list[str]:
        """The same rows as `summaries`, each already JSON text, built by SQLite itself.

        Listing 10,000 allocations then costs what SQLite costs, not a Python dict and a
        json.dumps per row; without SQLite's JSON functions it falls back to Python.
        """
        where = "" if include_ended else f"WHERE status IN {_NOT_ENDED_SQL}"
        try:
            rows = self._db.query(
                "SELECT json_object('id', id, 'driver', driver, 'status', status, 'cpu', cpu, "
                "'ram', ram, 'created', created, 'expires', expires, 'updated', updated, "
                f"'note', note) FROM allocations {where} ORDER BY created"
            )
        except LedgerCorruptError as exc:
            if "json_object" not in str(exc):
                raise
            return [json.dumps(row) for row in self.summaries(include_ended=include_ended)]
        return [r[0] for r in rows]
