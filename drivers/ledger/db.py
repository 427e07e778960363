"""The ledger's SQLite file: opening it (owner-only mode, WAL, the schema and its version),
waiting out another shoal's lock without blocking Ctrl-C, write transactions, reads that
survive a full disk, and what each SQLite error means for the user.

Reads of a ledger that does not exist see it empty; the first write creates it.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from providers.core.errors import (
    LedgerCorruptError,
    LedgerWriteError,
    RetryableError,
    ShoalError,
)

SCHEMA_VERSION = 3
BUSY_TIMEOUT_SECONDS = 30.0
# SQLite waits for a lock inside C, where Ctrl-C cannot reach; it is asked to wait only this
# long per try, and shoal retries from Python until BUSY_TIMEOUT_SECONDS, so it stays
# interruptible while another shoal holds the ledger.
LOCK_STEP_SECONDS = 0.1

T = TypeVar("T")

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

# Version 2: reservations (a window start and a claim deadline per row) and the queue of
# `alloc --wait` (arrival order is the id). Applied to a version-1 ledger in place.
_SCHEMA_2 = """
ALTER TABLE allocations ADD COLUMN starts TEXT;
ALTER TABLE allocations ADD COLUMN claim_by TEXT;
CREATE TABLE IF NOT EXISTS waiters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    driver TEXT NOT NULL,
    definition TEXT NOT NULL,
    cpu INTEGER NOT NULL,
    ram INTEGER NOT NULL,
    multitenancy INTEGER NOT NULL,
    cpu_overbook INTEGER NOT NULL,
    ram_overbook INTEGER NOT NULL,
    life_seconds REAL,
    is_remote INTEGER NOT NULL,
    token TEXT NOT NULL,
    owner_pid INTEGER,
    owner_start TEXT,
    created TEXT NOT NULL
);
"""

# Version 3: the machine each row and waiter was made on (`host`, drivers.ledger.hosts) and,
# on a team ledger, the lease that tells other machines its owner still lives.
_SCHEMA_3 = """
ALTER TABLE allocations ADD COLUMN host TEXT;
ALTER TABLE allocations ADD COLUMN owner_host TEXT;
ALTER TABLE allocations ADD COLUMN lease TEXT;
ALTER TABLE waiters ADD COLUMN host TEXT;
ALTER TABLE waiters ADD COLUMN lease TEXT;
"""


class Cursor(Protocol):
    """What the ledger's SQL reads of a statement's result (sqlite3's and psycopg's)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Conn(Protocol):
    """A connection the ledger's SQL runs on: `?` placeholders, SQLite's dialect; the
    PostgreSQL backend translates (drivers.ledger.pg)."""

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor: ...


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


def patiently(action: Callable[[], T]) -> T:
    """Run `action`, retrying while the ledger is locked, for up to BUSY_TIMEOUT_SECONDS."""
    deadline = time.monotonic() + BUSY_TIMEOUT_SECONDS
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            if not _is_busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(LOCK_STEP_SECONDS / 2)


@dataclass(frozen=True)
class Totals:
    """A table of running totals kept by triggers on the allocations (drivers.ledger.store's
    TOTALS): `create` makes the table, `rows` is the SELECT of its rows from the allocations
    (a rebuild, and the check), `triggers` name -> what follows `CREATE TRIGGER name`."""

    table: str
    create: str
    rows: str
    triggers: Mapping[str, str]

    @property
    def names(self) -> tuple[str, ...]:
        return (self.table, *self.triggers)

    def rebuild(self, conn: sqlite3.Connection) -> None:
        """Drop and make the table and its triggers, filled from the rows: inside the
        caller's write transaction, so no write falls between the fill and the triggers."""
        for name in self.triggers:
            conn.execute(f"DROP TRIGGER IF EXISTS {name}")
        conn.execute(f"DROP TABLE IF EXISTS {self.table}")
        conn.execute(self.create)
        conn.execute(f"INSERT INTO {self.table} {self.rows}")
        for name, body in self.triggers.items():
            conn.execute(f"CREATE TRIGGER {name} {body}")


class _Connection(sqlite3.Connection):
    """sqlite3's connection, which a weak reference may name (the C type cannot)."""


_OPEN: weakref.WeakSet[sqlite3.Connection] | None = None


def _close_at_exit(conn: sqlite3.Connection) -> None:
    """The console script leaves without the interpreter's teardown (cli.main.run), which is
    what closed a connection left open: closed at exit, the last connection checkpoints the
    WAL into the file and removes the -wal and -shm files. Held weakly: a process that opens
    many ledgers (the tests) must not keep them all, and their files, open; the connection,
    not its LedgerDb, which may be gone while the connection waits in a reference cycle."""
    global _OPEN
    if _OPEN is None:
        import atexit

        _OPEN = weakref.WeakSet()
        atexit.register(_close_all)
    _OPEN.add(conn)


def _close_all() -> None:
    for conn in list(_OPEN or ()):
        with contextlib.suppress(sqlite3.Error):
            conn.close()


class LedgerDb:
    """The SQLite backend: one file, one machine (drivers.ledger.pg is the team's)."""

    team = False  # every row is this machine's: an owner's liveness is its pid's
    # The ids of the rows a capacity check saw, as one text (drivers.ledger.book._holdings).
    concat = "group_concat"

    def __init__(
        self,
        path: Path,
        indexes: Mapping[str, str] | None = None,
        obsolete: tuple[str, ...] = (),
        totals: Totals | None = None,
    ) -> None:
        """`indexes`: name -> `ON table(...) [WHERE ...]`, made on a ledger that lacks them;
        `totals` likewise (all of its table and triggers, or none: then all made again).
        Not a schema version: an index or a trigger changes nothing an older shoal reads or
        writes (SQLite keeps it for every writer), so a ledger gets them in place and stays
        shareable."""
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._indexes = dict(indexes or {})
        self._totals = totals
        self._obsolete = obsolete  # indexes a newer one replaced: dropped when it is made
        self._present: set[str] = set()

    def _corrupt(self, exc: Exception) -> LedgerCorruptError:
        return LedgerCorruptError(
            f"ledger {self.path} is unreadable ({exc}); it was left untouched: move it aside "
            f"with its -wal and -shm files, which may hold its latest changes "
            f"(mv {self.path} {self.path}.broken, likewise {self.path.name}-wal and -shm) "
            "to start a new ledger"
        )

    def failure(self, exc: sqlite3.Error) -> ShoalError:
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

    @property
    def label(self) -> str:
        """The ledger as messages name it."""
        return str(self.path)

    def read(self, action: Callable[[Conn], T]) -> T:
        """`action` on the connection, waiting out another shoal's lock, errors as the user's."""
        try:
            return patiently(lambda: action(self.conn()))
        except sqlite3.Error as exc:
            raise self.failure(exc) from None

    # -- waking waiters: named pipes beside the file (drivers.ledger.doorbell) ---------------

    def open_bell(self) -> Any:
        from drivers.ledger import doorbell

        return doorbell.open_bell(doorbell.bell_dir(self.path))

    def ring(self, token: str) -> bool:
        from drivers.ledger import doorbell

        return doorbell.ring(doorbell.bell_dir(self.path), token)

    def forget(self, token: str) -> None:
        from drivers.ledger import doorbell

        doorbell.forget(doorbell.bell_dir(self.path), token)

    def conn(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        try:
            conn = sqlite3.connect(
                self.path, timeout=LOCK_STEP_SECONDS, isolation_level=None, factory=_Connection
            )
        except sqlite3.Error as exc:
            raise self.failure(exc) from None
        # Definitions may carry credentials: the ledger is its owner's alone, whoever made
        # the file (a zero-byte file left by a run killed at its first moment, a touch), and
        # SQLite gives its -wal and -shm files the same mode.
        with contextlib.suppress(OSError):
            if os.stat(self.path).st_mode & 0o077:
                os.chmod(self.path, 0o600)
        try:
            version = patiently(lambda: conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise LedgerCorruptError(
                    f"ledger {self.path} has schema {version}, newer than this shoal "
                    f"({SCHEMA_VERSION}); upgrade shoal"
                )
            if version < SCHEMA_VERSION:
                # Set whenever the schema is made, not only for a file shoal created: an
                # empty file found in place would otherwise stay in rollback-journal mode.
                patiently(lambda: conn.execute("PRAGMA journal_mode=WAL"))

                def create() -> None:
                    if conn.in_transaction:  # a COMMIT that found the ledger busy
                        conn.execute("ROLLBACK")
                    conn.execute("BEGIN IMMEDIATE")
                    # Read again under the lock: another shoal may have upgraded it meanwhile.
                    found = conn.execute("PRAGMA user_version").fetchone()[0]
                    steps = [
                        script
                        for version, script in ((1, _SCHEMA), (2, _SCHEMA_2), (3, _SCHEMA_3))
                        if found < version
                    ]
                    for script in steps:
                        for statement in script.split(";"):
                            if statement.strip():
                                conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
                    conn.execute("COMMIT")

                patiently(create)
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.Error as exc:
            conn.close()
            raise self.failure(exc) from None
        self._present = self._make_indexes(conn)
        self._conn = conn
        _close_at_exit(conn)
        return conn

    def _make_indexes(self, conn: sqlite3.Connection) -> set[str]:
        """The wanted indexes and totals the ledger has, made first where missing (once per
        ledger). A ledger that cannot take them (read-only, a full disk, an SQLite too old
        for the totals' triggers) is read without them."""
        totals = self._totals.names if self._totals else ()
        names = (*self._indexes, *totals)
        if not names:
            return set()
        marks = ", ".join("?" * len(names))
        found = f"SELECT name FROM sqlite_master WHERE name IN ({marks})"

        def present() -> set[str]:
            return {row[0] for row in conn.execute(found, names).fetchall()}

        def make(step: Callable[[set[str]], None]) -> None:
            if conn.in_transaction:  # a COMMIT that found the ledger busy
                conn.execute("ROLLBACK")
            conn.execute("BEGIN IMMEDIATE")
            step(present())  # read again under the lock: another shoal may have made them
            conn.execute("COMMIT")

        def indexes(there: set[str]) -> None:
            for name in self._indexes:
                if name not in there:
                    conn.execute(f"CREATE INDEX IF NOT EXISTS {name} {self._indexes[name]}")
            for name in self._obsolete:
                conn.execute(f"DROP INDEX IF EXISTS {name}")

        def totals_made(there: set[str]) -> None:
            if self._totals is not None and not there.issuperset(totals):
                self._totals.rebuild(conn)

        have: set[str] = set()
        try:
            have = patiently(present)
            if any(name not in have for name in self._indexes):
                patiently(lambda: make(indexes))
                have.update(self._indexes)
            if totals and not have.issuperset(totals):
                patiently(lambda: make(totals_made))
                have.update(totals)
        except sqlite3.Error:
            self._rollback(conn)
        # Totals in part (a trigger dropped by hand) are never read: they may be stale.
        return have if have.issuperset(totals) else have - set(totals)

    def has(self, name: str) -> bool:
        """Whether the open ledger has this index or these totals (conn() first)."""
        return name in self._present

    def rebuild_totals(self) -> None:
        """The totals made again from the rows, in one write transaction."""
        if self._totals is None:
            return
        with self.transaction() as conn:
            self._totals.rebuild(conn)
        self._present.update(self._totals.names)

    def indexed_by(self, name: str) -> str:
        """`INDEXED BY name` for a query that the index serves, when the ledger has it (else
        nothing: SQLite's own choice). A ledger that does not exist has no index to name."""
        if not self.exists:
            return ""
        try:
            self.conn()
        except ShoalError:
            return ""  # the query says what is wrong
        return f"INDEXED BY {name}" if name in self._present else ""

    def data_version(self) -> int:
        """A number that changes whenever another connection commits to the ledger: a cheap
        "has anything changed?" (no table is read)."""
        return int(patiently(lambda: self.conn().execute("PRAGMA data_version").fetchone()[0]))

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
            patiently(lambda: conn.execute("BEGIN IMMEDIATE"))
        except sqlite3.Error as exc:
            raise self.failure(exc) from None
        try:
            yield conn
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise self.failure(exc) from None
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._rollback(conn)
            raise self.failure(exc) from None

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        # SQLite may have rolled back already (a full disk does): nothing left to undo.
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of a read; a full or read-only disk falls back to reading the main file."""
        return self._read(sql, params, _rows)

    def column(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        """The first column of a read's rows, taken as they come: no row tuples are kept
        (10,000 of them would wake the cycle collector on the way)."""
        return self._read(sql, params, _first)

    def _read(
        self, sql: str, params: tuple[Any, ...], take: Callable[[sqlite3.Cursor], list[Any]]
    ) -> list[Any]:
        if not self.exists:  # reads never create the ledger
            return []
        try:
            return patiently(lambda: take(self.conn().execute(sql, params)))
        except sqlite3.Error as exc:
            failure = self.failure(exc)
        except LedgerWriteError as exc:  # conn() could not open it for writing
            failure = exc
        if isinstance(failure, LedgerWriteError):
            reader = self._read_only()
            if reader is not None:
                try:
                    return take(reader.execute(sql, params))
                except sqlite3.Error:
                    pass
                finally:
                    reader.close()
        raise failure


def _rows(cursor: sqlite3.Cursor) -> list[Any]:
    return cursor.fetchall()


def _first(cursor: sqlite3.Cursor) -> list[Any]:
    return [row[0] for row in cursor]
