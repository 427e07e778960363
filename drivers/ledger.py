"""The allocation ledger: one SQLite file under the state dir, shared by every shoal process.

This module holds the allocation queries and state transitions; the SQLite file itself is
`drivers.ledger_db`, the rows and statuses `drivers.ledger_rows`. It is the ledger's public
face: callers import `Ledger`, `Allocation` and the statuses from here.

Capacity is checked and the reservation written in one `BEGIN IMMEDIATE` transaction, which
SQLite serialises across processes, so N racing `shoal alloc` never oversubscribe. A row is
`ALLOCATING` (with its owner's pid and start time) while the driver works; a row whose owner
died (kill -9, power loss) is found by the next command and handed back for cleanup as
`ORPHANED`; it counts as usage until its driver confirms the cleanup (its workload may run).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers import procinfo
from drivers.ledger_db import LedgerDb, patiently
from drivers.ledger_rows import (
    ALL_STATUSES,
    ALLOCATED,
    ALLOCATING,
    COLUMNS,
    FAILED,
    FREED,
    FREEING,
    FREEING_FROM,
    GONE,
    HOLDING,
    IN_FLIGHT,
    NOT_ENDED,
    ORPHANED,
    Allocation,
    stamp,
    summary_row,
    unstamp,
)
from providers.errors import LedgerCorruptError, NotFoundError
from providers.usage import AllocationUsage

if TYPE_CHECKING:
    from drivers.types import Resources

__all__ = [
    "ALLOCATED",
    "ALLOCATING",
    "ALL_STATUSES",
    "FAILED",
    "FREED",
    "FREEING",
    "FREEING_FROM",
    "GONE",
    "HOLDING",
    "IN_FLIGHT",
    "NOT_ENDED",
    "ORPHANED",
    "Allocation",
    "Ledger",
]

# A remote capacity check runs outside the lock this many times before it is run inside.
OPTIMISTIC_TRIES = 3


def _sql_in(statuses: tuple[str, ...]) -> str:
    """`('A', 'B')` for `status IN ...`: the status sets are named once, in ledger_rows."""
    return "(" + ", ".join(f"'{s}'" for s in statuses) + ")"


_HOLDING_SQL = _sql_in(HOLDING)
_LOCAL_SETTLED_SQL = _sql_in((ALLOCATED, FREEING, ORPHANED))  # ALLOCATING is checked by owner
_NOT_ENDED_SQL = _sql_in(NOT_ENDED)


class Ledger:
    def __init__(self, path: Path) -> None:
        """Reads of a ledger that does not exist see it empty; the first write creates it."""
        self._db = LedgerDb(path)

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
        rows = conn.execute(
            "SELECT id, owner_pid, owner_start, status, note FROM allocations "
            f"WHERE status IN {_sql_in(IN_FLIGHT)}"
        ).fetchall()
        for row_id, pid, started, status, note in rows:
            if pid is not None and procinfo.is_alive(pid, started):
                continue
            # An interrupted allocate may hold a workload (cleaned up as ORPHANED); an
            # interrupted free goes back to what it was before (ALLOCATED, GONE, ORPHANED).
            new_status = ORPHANED
            if status == FREEING:
                before = (note or "").removeprefix(FREEING_FROM)
                new_status = before if before in (ALLOCATED, GONE, ORPHANED) else ALLOCATED
            conn.execute(
                "UPDATE allocations SET status=?, updated=?, owner_pid=NULL, owner_start=NULL, "
                "note=? WHERE id=?",
                (new_status, now, f"owner process {pid} died during {status.lower()}", row_id),
            )

    def sweep(self) -> list[Allocation]:
        """Release rows whose owner died; returns the ORPHANED ones that need cleanup."""
        if not self.exists:
            return []
        rows = self._db.query(
            "SELECT id, owner_pid, owner_start FROM allocations "
            f"WHERE status IN {_sql_in((*IN_FLIGHT, ORPHANED))}"
        )
        dead = [r for r in rows if r[1] is None or not procinfo.is_alive(r[1], r[2])]
        if not dead:
            return []
        with self._db.transaction() as conn:
            self._sweep(conn, stamp(datetime.now(UTC)))
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
        """Usage grouped by driver and expiry (SQLite sums; a big ledger stays cheap)."""
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
        ]

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
    ) -> str:
        """Check capacity against node usage and insert an ALLOCATING row, atomically.

        `fits(node_usage)` returns how many such definitions fit; below 1 nothing is written.
        A local driver's check is arithmetic and runs inside the write lock. A remote
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
                with self._db.transaction() as conn:
                    self._sweep(conn, stamp(datetime.now(UTC)))
                    if self._holdings(scope, conn) == seen:
                        return self._insert_checked(
                            conn, count, driver, definition, resources, metadata, is_remote,
                            expires,
                        )  # fmt: skip
        # Local, or a remote driver whose holdings kept changing: check under the lock.
        with self._db.transaction() as conn:
            self._sweep(conn, stamp(datetime.now(UTC)))
            count = fits(self._usage(conn, scope))
            return self._insert_checked(
                conn, count, driver, definition, resources, metadata, is_remote, expires
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

    def _insert_checked(
        self,
        conn: sqlite3.Connection,
        count: int,
        driver: str,
        definition: dict[str, Any],
        resources: Resources,
        metadata: dict[str, Any],
        is_remote: bool,
        expires: datetime | None,
    ) -> str:
        import secrets

        if count < 1:
            from providers.errors import NoCapacityError

            raise NoCapacityError(
                f"no capacity for {driver}: cpu={resources.cpu} ram={resources.ram}GiB "
                f"does not fit now; free something or retry later"
            )
        pid, started = procinfo.self_identity()
        now = stamp(datetime.now(UTC))
        prefix = driver.split("/", 1)[0]
        for _ in range(8):
            alloc_id = f"{prefix}-{secrets.token_hex(4)}"
            if not conn.execute("SELECT 1 FROM allocations WHERE id=?", (alloc_id,)).fetchone():
                break
        conn.execute(
            f"INSERT INTO allocations ({COLUMNS}) VALUES "
            "(?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
            (
                alloc_id,
                driver,
                ALLOCATING,
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
            ),
        )
        return alloc_id

    def readmit(self, alloc_id: str, fits: Callable[[Resources], int]) -> bool:
        """GONE -> ALLOCATED, only if it fits again (checked and written in one transaction)."""
        with self._db.transaction() as conn:
            row = conn.execute(
                "SELECT driver, is_remote FROM allocations WHERE id=? AND status='GONE'",
                (alloc_id,),
            ).fetchone()
            if row is None or fits(self._usage(conn, row[0] if row[1] else None)) < 1:
                return False
            conn.execute(
                "UPDATE allocations SET status='ALLOCATED', updated=?, note=? WHERE id=?",
                (stamp(datetime.now(UTC)), "driver reports it again", alloc_id),
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
        now = stamp(datetime.now(UTC))
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
        with self._db.transaction() as conn:
            if expect and FREEING in expect:
                self._sweep(conn, now)
            moved = conn.execute(sql, tuple(params)).rowcount
        return moved == 1

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
