"""`shoal ledger migrate` and `shoal ledger copy`: a ledger's schema brought up to date, and
this machine's SQLite ledger moved onto the team's PostgreSQL ledger.

The copy is one PostgreSQL transaction after the ledger's write lock (drivers.ledger.pg):
every row is in it or none is, whatever stops it (a conflict, a dropped connection, Ctrl-C,
kill -9: the server rolls back what its client never committed). Meanwhile the SQLite
ledger's own write lock is held (BEGIN IMMEDIATE, rolled back at the end: the file is left
as it was), so no `shoal alloc` on this machine adds a row the copy would miss. A row is
the same allocation only when every column matches, so a copy run again skips what it
copied, and a row the team ledger has changed since (a free on another machine) or an id
taken by another row is a conflict, never overwritten.

What would be lost in flight is refused: a row ALLOCATING or FREEING whose owner process
lives would be judged dead on the team ledger (its pid means nothing to a lease), and an
`alloc --wait` waiter's queue place is this machine's alone. Waiters are not copied (a
waiter that died holds nothing); rows whose owner died are, and the team ledger's sweep
settles them as this machine's SQLite ledger would have.

psycopg is imported only inside the functions that talk to PostgreSQL.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers.ledger.rows import COLUMNS, IN_FLIGHT
from providers.core.errors import LedgerCorruptError, RetryableError, ShoalError

if TYPE_CHECKING:
    import psycopg

    from drivers.ledger.db import LedgerDb
    from drivers.ledger.pg import PgLedgerDb
    from providers.core.settings import Settings

TO_OPTION = "--to"  # where a copy's URL came from, in messages
SHOWN_IDS = 5  # ids a refusal names before "and N more"
_NAMES = tuple(COLUMNS.split(", "))
# The PostgreSQL columns that are whole numbers (drivers.ledger.pg); the rest are text.
_INTEGERS = frozenset(
    {"cpu", "ram", "multitenancy", "cpu_overbook", "ram_overbook", "is_remote", "owner_pid"}
)
_ID, _STATUS, _OWNER_PID = _NAMES.index("id"), _NAMES.index("status"), _NAMES.index("owner_pid")
_START, _HOST, _OWNER_HOST = (_NAMES.index(n) for n in ("owner_start", "host", "owner_host"))

_SQLITE_READONLY = 8  # sqlite3's primary result code
Row = tuple[Any, ...]


@dataclass(frozen=True)
class Migrated:
    """A ledger's schema version before and after `ledger migrate`."""

    ledger: str  # the redacted URL, or the SQLite file's path
    found: int
    now: int
    team: bool
    absent: bool = False  # no SQLite ledger here yet: nothing was made

    def to_json(self) -> dict[str, Any]:
        return {"ledger": self.ledger, "from": self.found, "to": self.now}


@dataclass(frozen=True)
class Copied:
    """What `ledger copy` did: `total` source rows, each now on the server with its status."""

    source: str
    target: str  # redacted
    copied: int
    skipped: int
    total: int
    absent: bool = False  # no SQLite ledger here: nothing to copy

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.target,
            "copied": self.copied,
            "skipped": self.skipped,
            "total": self.total,
        }


# -- ledger migrate ----------------------------------------------------------------------------


def migrate_ledger(settings: Settings) -> Migrated:
    """Create or upgrade the configured ledger's schema: the team's on PostgreSQL (under its
    migration lock: machines migrating at once do it once), else this machine's SQLite file
    in place. A SQLite ledger that does not exist is not made (the first write makes it)."""
    from drivers.ledger.url import ledger_url
    from drivers.paths import ledger_file

    url = ledger_url(settings)
    if url is None:
        return _migrate_sqlite(ledger_file(settings.paths))
    from drivers.ledger.pg import PgLedgerDb

    db = PgLedgerDb(url, application="shoal ledger migrate")
    with _session(db) as conn:
        found, now = _migrate_pg(db, conn)
    return Migrated(url.shown, found, now, team=True)


def _migrate_pg(db: PgLedgerDb, conn: psycopg.Connection[Any]) -> tuple[int, int]:
    import psycopg

    from drivers.ledger.pg import migrate, schema_version

    try:
        found = migrate(conn, db.label)
        return found, schema_version(conn)
    except psycopg.Error as exc:
        raise db.failure(exc) from None


def _migrate_sqlite(path: Path) -> Migrated:
    from drivers.ledger.db import SCHEMA_VERSION, LedgerDb
    from drivers.ledger.store import INDEXES, OBSOLETE_INDEXES

    if not path.exists():
        return Migrated(str(path), 0, 0, team=False, absent=True)
    db = LedgerDb(path, INDEXES, OBSOLETE_INDEXES)
    try:
        found = _user_version(db)
        db.conn()  # upgrades the schema in place, under the ledger's lock
    finally:
        db.close()
    return Migrated(str(path), found, max(found, SCHEMA_VERSION), team=False)


def _user_version(db: LedgerDb) -> int:
    """The SQLite ledger's schema version, read without changing the file."""
    try:
        conn = sqlite3.connect(f"file:{db.path}?mode=ro", uri=True, isolation_level=None)
    except sqlite3.Error as exc:
        raise db.failure(exc) from None
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.Error as exc:
        raise db.failure(exc) from None
    finally:
        conn.close()


# -- ledger copy -------------------------------------------------------------------------------


def copy_ledger(settings: Settings, to: str) -> Copied:
    """Copy this machine's SQLite ledger, every row and its history, into the PostgreSQL
    ledger at `to` (a secret: only its redacted form is ever shown)."""
    from drivers.ledger.hosts import host_id
    from drivers.ledger.pg import PgLedgerDb
    from drivers.ledger.url import LedgerUrl, check
    from drivers.paths import ledger_file

    check(to, TO_OPTION)
    url = LedgerUrl(to, TO_OPTION)
    url.params()  # libpq reads it (78) before anything else is done
    source = ledger_file(settings.paths)
    if not source.exists():
        return Copied(str(source), url.shown, 0, 0, 0, absent=True)
    # Refused before the server is touched; checked again under the SQLite lock below.
    with _source(source, lock=False) as early:
        _refuse_in_flight(source, early)
    host = host_id(settings.env, settings.paths.state_dir)
    db = PgLedgerDb(url, application="shoal ledger copy")
    with _session(db) as conn:
        _migrate_pg(db, conn)
        with _source(source, lock=True) as held:
            _refuse_in_flight(source, held)
            rows = [_filled(row, host) for row in held.rows]
            copied, skipped = _write(db, conn, rows)
    return Copied(str(source), url.shown, copied, skipped, len(rows))


@dataclass
class _Snapshot:
    rows: list[Row]
    live_rows: list[str]  # ids in flight whose owner process lives
    live_waiters: int


def _refuse_in_flight(path: Path, seen: _Snapshot) -> None:
    if not seen.live_rows and not seen.live_waiters:
        return
    what = []
    if seen.live_rows:
        what.append(
            f"{len(seen.live_rows)} allocation(s) in flight (ALLOCATING/FREEING: "
            f"{_some(seen.live_rows)})"
        )
    if seen.live_waiters:
        what.append(f"{seen.live_waiters} `alloc --wait` waiter(s)")
    raise RetryableError(
        f"ledger {path} has {' and '.join(what)} whose shoal process is alive; finish or stop "
        "them first, then copy again (nothing was written)"
    )


def _some(ids: list[str]) -> str:
    more = len(ids) - SHOWN_IDS
    return ", ".join(ids[:SHOWN_IDS]) + (f" and {more} more" if more > 0 else "")


@contextlib.contextmanager
def _source(path: Path, *, lock: bool) -> Iterator[_Snapshot]:
    """The SQLite ledger's rows, one consistent read of them; with `lock` its write lock is
    held until the block ends (and rolled back: nothing is changed). The file is opened as
    it is: never created, never migrated (`ledger migrate` does that)."""
    from drivers.ledger.db import LOCK_STEP_SECONDS, LedgerDb

    db = LedgerDb(path)  # for its error messages only: it is never opened
    try:
        conn = sqlite3.connect(
            f"file:{path}?mode=rw", uri=True, timeout=LOCK_STEP_SECONDS, isolation_level=None
        )
    except sqlite3.Error as exc:
        raise db.failure(exc) from None
    try:
        try:
            _begin(conn, lock)
            snapshot = _read(conn, path)
        except sqlite3.Error as exc:
            raise db.failure(exc) from None
        yield snapshot
    finally:
        with contextlib.suppress(sqlite3.Error):
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        conn.close()


def _begin(conn: sqlite3.Connection, lock: bool) -> None:
    from drivers.ledger.db import patiently

    if not lock:
        conn.execute("BEGIN")  # deferred: the first read fixes the snapshot
        return
    try:
        patiently(lambda: conn.execute("BEGIN IMMEDIATE"))
    except sqlite3.OperationalError as exc:
        if int(getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF != _SQLITE_READONLY:
            raise
        # A ledger this user may not write: no shoal of this user writes it either.
        conn.execute("BEGIN")


def _read(conn: sqlite3.Connection, path: Path) -> _Snapshot:
    from drivers.ledger.db import SCHEMA_VERSION

    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise LedgerCorruptError(
            f"ledger {path} has schema {version}, newer than this shoal ({SCHEMA_VERSION}); "
            "upgrade shoal"
        )
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "allocations" not in tables:
        return _Snapshot([], [], 0)
    # An older ledger lacks the newer columns: they are NULL, as its upgrade would make them.
    present = {r[1] for r in conn.execute("PRAGMA table_info(allocations)")}
    chosen = ", ".join(name if name in present else "NULL" for name in _NAMES)
    rows = conn.execute(f"SELECT {chosen} FROM allocations ORDER BY created, id").fetchall()
    live = [r[_ID] for r in rows if r[_STATUS] in IN_FLIGHT and _alive(r[_OWNER_PID], r[_START])]
    waiters = 0
    if "waiters" in tables:
        waiting = conn.execute("SELECT owner_pid, owner_start FROM waiters").fetchall()
        waiters = sum(1 for pid, started in waiting if _alive(pid, started))
    return _Snapshot(rows, live, waiters)


def _alive(pid: Any, started: Any) -> bool:
    from drivers.supervisor import procinfo

    return isinstance(pid, int) and procinfo.is_alive(pid, started)


def _filled(row: Row, host: str) -> Row:
    """The row as the team ledger holds it: typed as its columns are, and with this
    machine's host id where SQLite left it out (every SQLite row is this machine's)."""
    values = [_typed(name, value, row[_ID]) for name, value in zip(_NAMES, row, strict=True)]
    if values[_HOST] is None:
        values[_HOST] = host
    if values[_OWNER_HOST] is None and values[_OWNER_PID] is not None:
        values[_OWNER_HOST] = host
    return tuple(values)


def _typed(name: str, value: Any, row_id: Any) -> Any:
    if value is None:
        return None
    if name in _INTEGERS:
        if isinstance(value, int):
            return int(value)
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise LedgerCorruptError(
            f"ledger row {row_id!r}: {name} is not a whole number; it was left untouched "
            "and nothing was copied"
        )
    if isinstance(value, bytes):
        try:
            value = value.decode()
        except UnicodeDecodeError:
            raise LedgerCorruptError(
                f"ledger row {row_id!r}: {name} is not text; it was left untouched and "
                "nothing was copied"
            ) from None
    text = str(value)
    if "\x00" in text:  # SQLite keeps it, PostgreSQL's text cannot
        raise LedgerCorruptError(
            f"ledger row {row_id!r}: {name} holds a NUL character, which PostgreSQL cannot "
            "store; it was left untouched and nothing was copied"
        )
    return text


@contextlib.contextmanager
def _session(db: PgLedgerDb) -> Iterator[psycopg.Connection[Any]]:
    """A session of its own on the server; closed whatever happens, which makes the server
    roll back a transaction it was in (nothing half-written)."""
    conn = db.connect(autocommit=True)
    try:
        yield conn
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def _write(db: PgLedgerDb, conn: psycopg.Connection[Any], rows: list[Row]) -> tuple[int, int]:
    """Insert the rows the server lacks, in one transaction after the ledger's write lock;
    (copied, skipped). A conflict, or a row not found with its status afterwards, rolls it
    all back."""
    import psycopg

    from drivers.ledger.pg import LOCK_SPACE, SCHEMA, WRITE_LOCK

    table = f"{SCHEMA}.allocations"
    ids = [row[_ID] for row in rows]
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_SPACE, WRITE_LOCK))
            there = {
                found[_ID]: tuple(found)
                for found in conn.execute(
                    f"SELECT {COLUMNS} FROM {table} WHERE id = ANY(%s)", (ids,)
                )
            }
            conflicts = [row[_ID] for row in rows if row[_ID] in there and there[row[_ID]] != row]
            if conflicts:
                raise ShoalError(
                    f"{len(conflicts)} allocation id(s) are already in {db.label} with "
                    f"different content: {_some(conflicts)}; nothing was written (a row "
                    "changed on the team ledger since an earlier copy, or another ledger's "
                    "row has the id)"
                )
            new = [row for row in rows if row[_ID] not in there]
            if new:
                marks = ", ".join(["%s"] * len(_NAMES))
                with conn.cursor() as cursor:
                    cursor.executemany(f"INSERT INTO {table} ({COLUMNS}) VALUES ({marks})", new)
            # Every source row is there, with its status, before anything is committed.
            count = conn.execute(
                f"SELECT count(*) FROM {table} AS a JOIN unnest(%s::text[], %s::text[]) "
                "AS s(id, status) ON a.id = s.id AND a.status = s.status",
                (ids, [row[_STATUS] for row in rows]),
            ).fetchone()
            if count is None or count[0] != len(rows):
                raise ShoalError(
                    f"{db.label}: {len(rows)} rows were copied but {count[0] if count else 0} "
                    "are found with their status; nothing was written"
                )
    except psycopg.Error as exc:
        raise db.failure(exc) from None
    return len(new), len(rows) - len(new)
