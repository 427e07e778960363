"""The allocation ledger: one SQLite file under the state dir, shared by every shoal process.

Capacity is checked and the reservation written in one `BEGIN IMMEDIATE` transaction, which
SQLite serialises across processes, so N racing `shoal alloc` never oversubscribe. A row is
`ALLOCATING` (with its owner's pid and start time) while the driver works; a row whose owner
died (kill -9, power loss) is found by the next command and handed back for cleanup as
`ORPHANED`; it counts as usage until its driver confirms the cleanup (its workload may run).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from drivers import procinfo
from providers.errors import (
    LedgerCorruptError,
    LedgerWriteError,
    NotFoundError,
    RetryableError,
    ShoalError,
)
from providers.usage import AllocationUsage

if TYPE_CHECKING:
    from drivers.types import Resources

SCHEMA_VERSION = 1
BUSY_TIMEOUT_SECONDS = 30.0
# SQLite waits for a lock inside C, where Ctrl-C cannot reach; it is asked to wait only this
# long per try, and shoal retries from Python until BUSY_TIMEOUT_SECONDS, so it stays
# interruptible while another shoal holds the ledger.
LOCK_STEP_SECONDS = 0.1
# A remote capacity check runs outside the lock this many times before it is run inside.
OPTIMISTIC_TRIES = 3

T = TypeVar("T")

ALLOCATING = "ALLOCATING"
ALLOCATED = "ALLOCATED"
FREEING = "FREEING"
FREED = "FREED"
FAILED = "FAILED"
ORPHANED = "ORPHANED"
GONE = "GONE"  # the driver no longer has it, though nobody freed it
# Statuses that hold node resources. ORPHANED does: its workload may still run until a
# later command's cleanup succeeds.
HOLDING = (ALLOCATING, ALLOCATED, FREEING, ORPHANED)
FREEING_FROM = "freeing from "  # the note of a FREEING row: the status to restore
IN_FLIGHT = (ALLOCATING, FREEING)
NOT_ENDED = (*HOLDING, GONE)  # what `status` lists without --all
ALL_STATUSES = (ALLOCATING, ALLOCATED, FREEING, FREED, FAILED, ORPHANED, GONE)


def _sql_in(statuses: tuple[str, ...]) -> str:
    """`('A', 'B')` for `status IN ...`: the status sets are named once, here."""
    return "(" + ", ".join(f"'{s}'" for s in statuses) + ")"


_HOLDING_SQL = _sql_in(HOLDING)
_LOCAL_SETTLED_SQL = _sql_in((ALLOCATED, FREEING, ORPHANED))  # ALLOCATING is checked by owner
_NOT_ENDED_SQL = _sql_in(NOT_ENDED)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS allocations (
    id TEXT PRIMARY KEY,
    driver TEXT NOT NULL,
    status TEXT NOT NULL,
    definition TEXT NOT NULL,
    state TEXT,
    metadata TEXT NOT NULL,
    created TEXT NOT NULL,
    updated TEXT NOT NULL,
    expires TEXT,
    cpu INTEGER NOT NULL,
    ram INTEGER NOT NULL,
    multitenancy INTEGER NOT NULL,
    cpu_overbook INTEGER NOT NULL,
    ram_overbook INTEGER NOT NULL,
    is_remote INTEGER NOT NULL,
    owner_pid INTEGER,
    owner_start TEXT,
    note TEXT
);
CREATE INDEX IF NOT EXISTS allocations_status ON allocations(status);
"""
_COLUMNS = (
    "id, driver, status, definition, state, metadata, created, updated, expires, cpu, ram, "
    "multitenancy, cpu_overbook, ram_overbook, is_remote, owner_pid, owner_start, note"
)


# SQLite's primary result codes (the low byte of sqlite_errorcode).
_SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 8, 10, 13, 14
_LOW_SPACE_BYTES = 256 * 1024


def _code(exc: sqlite3.Error) -> int:
    return int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF


def _low_space(directory: Path) -> bool:
    try:
        vfs = os.statvfs(directory)
    except OSError:
        return False
    return vfs.f_bavail * vfs.f_frsize < _LOW_SPACE_BYTES


def _is_busy(exc: sqlite3.Error) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and (
        "locked" in str(exc) or "busy" in str(exc)
    )


def _patiently(action: Callable[[], T]) -> T:
    """Run `action`, retrying while the ledger is locked, for up to BUSY_TIMEOUT_SECONDS."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(LOCK_STEP_SECONDS / 2)


def stamp(value: datetime) -> str:
    """Fixed-width UTC text, so SQL compares times as strings."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unstamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


@dataclass
class Allocation:
    id: str
    driver: str
    status: str
    definition: dict[str, Any]
    state: dict[str, Any] | None
    metadata: dict[str, Any]
    created: str
    updated: str
    expires: str | None
    cpu: int
    ram: int
    is_remote: bool
    owner_pid: int | None
    owner_start: str | None
    note: str | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Allocation:
        try:
            return cls._from_row(row)
        except ValueError as exc:
            raise LedgerCorruptError(
                f"ledger row {row[0]!r} holds malformed JSON ({exc}); it was left untouched"
            ) from None

    @classmethod
    def _from_row(cls, row: tuple[Any, ...]) -> Allocation:
        return cls(
            id=row[0],
            driver=row[1],
            status=row[2],
            definition=json.loads(row[3]),
            state=json.loads(row[4]) if row[4] else None,
            metadata=json.loads(row[5]),
            created=row[6],
            updated=row[7],
            expires=row[8],
            cpu=row[9],
            ram=row[10],
            is_remote=bool(row[14]),
            owner_pid=row[15],
            owner_start=row[16],
            note=row[17],
        )

    def owner_alive(self) -> bool:
        return self.owner_pid is not None and procinfo.is_alive(self.owner_pid, self.owner_start)


def summary_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """The `status` list's JSON for one row, built without decoding the JSON columns."""
    return {
        "id": row[0],
        "driver": row[1],
        "status": row[2],
        "cpu": row[3],
        "ram": row[4],
        "created": row[5],
        "expires": row[6],
        "updated": row[7],
        "note": row[8],
    }


class Ledger:
    def __init__(self, path: Path) -> None:
        """Reads of a ledger that does not exist see it empty; the first write creates it."""
        self.path = path
        self._conn: sqlite3.Connection | None = None

    # -- connection ----------------------------------------------------------------------

    def _corrupt(self, exc: Exception) -> LedgerCorruptError:
        return LedgerCorruptError(
            f"ledger {self.path} is unreadable ({exc}); it was left untouched: move it aside "
            f"with its -wal and -shm files, which may hold its latest changes "
            f"(mv {self.path} {self.path}.broken, likewise {self.path.name}-wal and -shm) "
            "to start a new ledger"
        )

    def _failure(self, exc: sqlite3.Error) -> ShoalError:
        """What an SQLite error means for the user: busy, a full disk, a read-only ledger,
        an I/O problem, or (only then) a damaged file. A full disk must never read as
        damage: the advice for damage is to move the ledger aside."""
        if _is_busy(exc):
            return self._busy()
        code, directory = _code(exc), self.path.parent
        if code == _SQLITE_FULL or (
            code in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and _low_space(directory)
        ):
            return LedgerWriteError(
                f"ledger {self.path}: the disk is full ({exc}); free space on {directory} "
                "and try again"
            )
        if code == _SQLITE_READONLY or (
            code in (_SQLITE_IOERR, _SQLITE_CANTOPEN) and not os.access(directory, os.W_OK)
        ):
            return LedgerWriteError(
                f"ledger {self.path} is read-only for this user ({exc}); make it and "
                f"{directory} writable (chmod u+w), or point SHOAL_HOME at a writable directory"
            )
        if code in (_SQLITE_IOERR, _SQLITE_CANTOPEN):
            return ShoalError(
                f"ledger {self.path}: {exc}; check that {directory} is on a working, "
                "writable disk with free space"
            )
        return self._corrupt(exc)

    def _read_only(self) -> sqlite3.Connection | None:
        """A connection for reading when the normal one cannot open (no room for SQLite's
        -shm file on a full disk). Only when no -wal file holds changes the main file lacks:
        `immutable` reads the main file alone."""
        wal = self.path.with_name(self.path.name + "-wal")
        try:
            if wal.exists() and wal.stat().st_size > 0:
                return None
            return sqlite3.connect(f"file:{self.path}?immutable=1", uri=True)
        except (OSError, sqlite3.Error):
            return None

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def conn(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            conn = sqlite3.connect(self.path, timeout=LOCK_STEP_SECONDS, isolation_level=None)
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        # Definitions may carry credentials: the ledger is its owner's alone, whoever made
        # the file (a zero-byte file left by a run killed at its first moment, a touch), and
        # SQLite gives its -wal and -shm files the same mode.
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_mode & 0o077:
                os.chmod(self.path, 0o600)
        try:
            version = _patiently(lambda: conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise LedgerCorruptError(
                    f"ledger {self.path} has schema {version}, newer than this shoal "
                    f"({SCHEMA_VERSION}); upgrade shoal"
                )
            if version < SCHEMA_VERSION:
                # Set whenever the schema is made, not only for a file shoal created: an
                # empty file found in place would otherwise stay in rollback-journal mode.
                _patiently(lambda: conn.execute("PRAGMA journal_mode=WAL"))

                def create() -> None:
                    if conn.in_transaction:  # a COMMIT that found the ledger busy
                        conn.execute("ROLLBACK")
                    conn.executescript(
                        f"BEGIN IMMEDIATE; {_SCHEMA} PRAGMA user_version={SCHEMA_VERSION}; COMMIT;"
                    )

                _patiently(create)
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise self._failure(exc) from None
        self._conn = conn
        return conn

    def _busy(self) -> RetryableError:
        return RetryableError(
            f"ledger {self.path} stayed locked by another shoal for "
            f"{BUSY_TIMEOUT_SECONDS:.0f}s; try again"
        )

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the ledger's lock up front (BEGIN IMMEDIATE)."""
        conn = self.conn()
        try:
            _patiently(lambda: conn.execute("BEGIN IMMEDIATE"))
        except sqlite3.Error as exc:
            raise self._failure(exc) from None
        try:
            yield conn
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise self._failure(exc) from None
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise self._failure(exc) from None

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        # SQLite may have rolled back already (a full disk does): nothing left to undo.
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if not self.exists:  # reads never create the ledger
            return []
        try:
            return _patiently(lambda: self.conn().execute(sql, params).fetchall())
        except sqlite3.Error as exc:
            failure = self._failure(exc)
        except LedgerWriteError as exc:  # conn() could not open it for writing
            failure = exc
        if isinstance(failure, LedgerWriteError):
            reader = self._read_only()
            if reader is not None:
                try:
                    return reader.execute(sql, params).fetchall()
                except sqlite3.Error:
                    pass
                finally:
                    reader.close()
        raise failure

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
        rows = self._query(
            "SELECT id, owner_pid, owner_start FROM allocations "
            f"WHERE status IN {_sql_in((*IN_FLIGHT, ORPHANED))}"
        )
        dead = [r for r in rows if r[1] is None or not procinfo.is_alive(r[1], r[2])]
        if not dead:
            return []
        with self.transaction() as conn:
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
            return _patiently(lambda: self._usage(self.conn(), remote_driver))
        except sqlite3.Error as exc:
            raise self._failure(exc) from None

    def active_local_usage(self) -> list[AllocationUsage]:
        """Usage grouped by driver and expiry (SQLite sums; a big ledger stays cheap)."""
        settled = self._query(
            "SELECT driver, SUM(cpu), SUM(ram), expires FROM allocations "
            f"WHERE status IN {_LOCAL_SETTLED_SQL} AND is_remote = 0 "
            "GROUP BY driver, expires"
        )
        in_flight = self._query(
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
                with self.transaction() as conn:
                    self._sweep(conn, stamp(datetime.now(UTC)))
                    if self._holdings(scope, conn) == seen:
                        return self._insert_checked(
                            conn, count, driver, definition, resources, metadata, is_remote,
                            expires,
                        )  # fmt: skip
        # Local, or a remote driver whose holdings kept changing: check under the lock.
        with self.transaction() as conn:
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
        rows = self._query(sql, args)
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
            f"INSERT INTO allocations ({_COLUMNS}) VALUES "
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
        with self.transaction() as conn:
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
        with self.transaction() as conn:
            if expect and FREEING in expect:
                self._sweep(conn, now)
            moved = conn.execute(sql, tuple(params)).rowcount
        return moved == 1

    # -- reads ---------------------------------------------------------------------------

    def get(self, alloc_id: str) -> Allocation:
        rows = self._query(f"SELECT {_COLUMNS} FROM allocations WHERE id=?", (alloc_id,))
        if not rows:
            raise NotFoundError(f"no allocation {alloc_id!r}; `shoal status` lists them")
        return Allocation.from_row(rows[0])

    def with_status(self, *statuses: str) -> list[Allocation]:
        marks = ", ".join("?" * len(statuses))
        rows = self._query(
            f"SELECT {_COLUMNS} FROM allocations WHERE status IN ({marks}) ORDER BY created",
            statuses,
        )
        return [Allocation.from_row(r) for r in rows]

    def expired(self, now: datetime) -> list[Allocation]:
        rows = self._query(
            f"SELECT {_COLUMNS} FROM allocations WHERE status IN ('ALLOCATED', 'GONE') "
            "AND expires IS NOT NULL AND expires <= ? ORDER BY expires",
            (stamp(now),),
        )
        return [Allocation.from_row(r) for r in rows]

    def summaries(self, *, include_ended: bool) -> list[dict[str, Any]]:
        where = "" if include_ended else f"WHERE status IN {_NOT_ENDED_SQL}"
        rows = self._query(
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
            rows = self._query(
                "SELECT json_object('id', id, 'driver', driver, 'status', status, 'cpu', cpu, "
                "'ram', ram, 'created', created, 'expires', expires, 'updated', updated, "
                f"'note', note) FROM allocations {where} ORDER BY created"
            )
        except LedgerCorruptError as exc:
            if "json_object" not in str(exc):
                raise
            return [json.dumps(row) for row in self.summaries(include_ended=include_ended)]
        return [r[0] for r in rows]
