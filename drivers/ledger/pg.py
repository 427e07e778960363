"""The team's ledger on PostgreSQL: the same rows, statuses and SQL as the SQLite file
(drivers.ledger.db), shared by every machine that points at one server.

Why one advisory lock for every write: the SQLite ledger's correctness rests on
`BEGIN IMMEDIATE`, which runs one write transaction at a time; every rule of the ledger
(capacity checked and the row inserted together, the sweep, the FIFO queue, bookings on a
time axis) was built and tested on that. A transaction-scoped advisory lock taken as each
write transaction's first statement gives PostgreSQL the same order across machines, and
at READ COMMITTED every later statement of the transaction reads what the previous lock
holder committed. Row locks would not cover the inserts a capacity check must exclude (a
phantom), and SERIALIZABLE would fail racers that must then retry from the top, including
a remote driver's API call. A ledger write takes ~1 ms on a LAN, so one lock serves
hundreds of allocations a second, far more than a team's CI asks; the lock goes with its
session (kill -9 of a client releases it when the server sees the socket close).

The schema lives in its own PostgreSQL schema (`shoal`), created and migrated by shoal under
another advisory lock (two machines starting at once: one migrates, the other waits and
finds it done). Statements are written once, for SQLite (`?` placeholders); `Translated`
turns them into psycopg's (`%s`). Times stay fixed-width UTC text (`COLLATE "C"`: compared
byte by byte, as SQLite does). Each write bumps a counter (`meta.changes`) that plays
SQLite's `PRAGMA data_version` for `status --watch` and the waiters' "anything changed?",
and lets a command read a sum over every holding row once (`kept`) where it would read it
twice.

A waiter sleeps on `LISTEN` of its own channel; a free rings it with `NOTIFY` (PgBell). A
password is never part of a message: libpq's texts are scrubbed of it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from drivers.ledger.rows import ALLOCATED, GONE, HOLDING, NOT_ENDED
from providers.core.errors import (
    CredentialsError,
    LedgerCorruptError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
)

if TYPE_CHECKING:
    import psycopg

    from drivers.ledger.db import Conn, Cursor
    from drivers.ledger.url import LedgerUrl

T = TypeVar("T")

SCHEMA = "shoal"
SCHEMA_VERSION = 1
# Advisory lock keys (two int4s): 'shoa' and what it guards.
LOCK_SPACE = 0x73686F61
WRITE_LOCK = 1
MIGRATE_LOCK = 2
# A write waits this long for another machine's write (SQLite's BUSY_TIMEOUT_SECONDS).
LOCK_TIMEOUT_SECONDS = 30
CONNECT_TIMEOUT_SECONDS = 10  # libpq's connect_timeout, unless the URL sets one
# A server restarting (a failover, an upgrade) is waited for this long before a command
# gives up on it; a server down at start is tried this many times.
RECONNECT_SECONDS = 15.0
START_TRIES = 3
NOTIFY_PREFIX = "shoal_w_"  # a waiter's channel: this and its token
# The change counter: a trigger of schema 1 bumps it in the transaction of every statement that
# writes allocations or waiters, whichever shoal (or psql) sends it, except a heartbeat's.
CHANGES_SQL = "SELECT value FROM meta WHERE key='changes'"

_TEXT = 'text COLLATE "C"'
# The live and expiring rows (drivers.ledger.store's LIVE_INDEX and EXPIRY_INDEX conditions).
_NOT_ENDED = "(" + ", ".join(f"'{s}'" for s in NOT_ENDED) + ")"
_EXPIRING = f"status IN ('{ALLOCATED}', '{GONE}') AND expires IS NOT NULL"
_HOLDING = "(" + ", ".join(f"'{s}'" for s in HOLDING) + ")"
_MIGRATIONS: dict[int, list[str]] = {
    1: [
        f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.allocations (
            id {_TEXT} PRIMARY KEY,
            driver {_TEXT} NOT NULL,
            status {_TEXT} NOT NULL,
            definition text NOT NULL,
            state text,
            metadata text NOT NULL,
            created {_TEXT} NOT NULL,
            updated {_TEXT} NOT NULL,
            expires {_TEXT},
            cpu bigint NOT NULL,
            ram bigint NOT NULL,
            multitenancy integer NOT NULL,
            cpu_overbook integer NOT NULL,
            ram_overbook integer NOT NULL,
            is_remote integer NOT NULL,
            owner_pid bigint,
            owner_start {_TEXT},
            note {_TEXT},
            starts {_TEXT},
            claim_by {_TEXT},
            host {_TEXT},
            owner_host {_TEXT},
            lease {_TEXT}
        )""",
        f"CREATE INDEX IF NOT EXISTS allocations_status ON {SCHEMA}.allocations(status)",
        # `status` reads the live rows in creation order; the expiry check the due ones
        # (drivers.ledger.store's LIVE_INDEX and EXPIRY_INDEX, as PostgreSQL writes them).
        f"CREATE INDEX IF NOT EXISTS allocations_live ON {SCHEMA}.allocations(created, id) "
        f"WHERE status IN {_NOT_ENDED}",
        f"CREATE INDEX IF NOT EXISTS allocations_expiry ON {SCHEMA}.allocations(expires) "
        f"WHERE {_EXPIRING}",
        # The capacity checks' sums read this alone (store.HOLDING_INDEX).
        f"CREATE INDEX IF NOT EXISTS allocations_holding ON {SCHEMA}.allocations(is_remote, "
        "driver, host, expires, cpu, ram, multitenancy, cpu_overbook, ram_overbook, status, "
        f"note, id) WHERE status IN {_HOLDING}",
        f"""CREATE TABLE IF NOT EXISTS {SCHEMA}.waiters (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            driver {_TEXT} NOT NULL,
            definition text NOT NULL,
            cpu bigint NOT NULL,
            ram bigint NOT NULL,
            multitenancy integer NOT NULL,
            cpu_overbook integer NOT NULL,
            ram_overbook integer NOT NULL,
            life_seconds double precision,
            is_remote integer NOT NULL,
            token {_TEXT} NOT NULL,
            owner_pid bigint,
            owner_start {_TEXT},
            created {_TEXT} NOT NULL,
            host {_TEXT},
            lease {_TEXT}
        )""",
        f"INSERT INTO {SCHEMA}.meta (key, value) VALUES ('changes', 0) ON CONFLICT DO NOTHING",
        # A heartbeat (lease renewals) sets shoal.quiet: it changes nothing anyone waits for.
        f"""CREATE OR REPLACE FUNCTION {SCHEMA}.changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF coalesce(current_setting('shoal.quiet', true), '') <> 'on' THEN
                UPDATE {SCHEMA}.meta SET value = value + 1 WHERE key = 'changes';
            END IF;
            RETURN NULL;
        END $$""",
        f"DROP TRIGGER IF EXISTS allocations_changed ON {SCHEMA}.allocations",
        f"""CREATE TRIGGER allocations_changed AFTER INSERT OR UPDATE OR DELETE
            ON {SCHEMA}.allocations FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.changed()""",
        f"DROP TRIGGER IF EXISTS waiters_changed ON {SCHEMA}.waiters",
        f"""CREATE TRIGGER waiters_changed AFTER INSERT OR UPDATE OR DELETE
            ON {SCHEMA}.waiters FOR EACH STATEMENT EXECUTE FUNCTION {SCHEMA}.changed()""",
    ],
}


class Translated:
    """A psycopg connection that takes the ledger's SQLite-dialect statements."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn
        self._sql: dict[str, str] = {}

    def execute(self, sql: str, parameters: Any = (), /) -> Cursor:
        text = self._sql.get(sql)
        if text is None:
            text = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
        return self.raw.execute(text, tuple(parameters))


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return " ".join(text.split())  # libpq's messages span lines; ours are one


class PgLedgerDb:
    """The PostgreSQL backend (`SHOAL_LEDGER_URL`, `[ledger] url`)."""

    team = True
    concat = "string_agg"

    def __init__(self, url: LedgerUrl, *, application: str = "shoal") -> None:
        self.url = url
        self._params = url.params()
        self._secrets = tuple(
            v for k, v in self._params.items() if k in ("password", "sslpassword") and v
        )
        self._application = application
        self._conn: Translated | None = None
        # Reads kept with the change counter they were read at (`kept`).
        self._kept: dict[tuple[str, tuple[Any, ...]], tuple[int, list[tuple[Any, ...]]]] = {}

    # -- what the rest of the ledger asks of a backend ---------------------------------------

    @property
    def label(self) -> str:
        return f"ledger {self.url.shown}"

    @property
    def exists(self) -> bool:
        return True  # the server answers for it; the schema is made on first connect

    def indexed_by(self, name: str) -> str:
        return ""  # PostgreSQL's planner has statistics

    def has(self, name: str) -> bool:
        """No running totals: kept by PL/pgSQL triggers they would be a schema 2, which the
        shoals of schema 1 on a team refuse. A sum reads the holding rows (at 100,000 the
        planner scans the table, 25-50 ms here), once a dry run (`kept`)."""
        return False

    def close(self) -> None:
        self._kept.clear()  # the next session may be another server's (a failover)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.raw.close()
            self._conn = None

    def conn(self) -> Translated:
        if self._conn is None or self._conn.raw.closed:
            self._conn = self._open(tries=START_TRIES if self._conn is None else 1)
        return self._conn

    def data_version(self) -> int:
        """A number that changes whenever a write commits on any machine (meta.changes)."""
        rows = self.query(CHANGES_SQL)
        return int(rows[0][0]) if rows else 0

    def kept(self, conn: Conn, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """`sql`'s rows (in no set order), read with the change counter in one statement (one
        snapshot); asked again while the counter has not moved, the rows of that read, for
        one index lookup. `alloc --dry-run` sums the holding rows for the usage it shows and
        again for what fits: at 100,000 live rows each is a scan of the table (25-50 ms
        here), and with the counter unchanged no write has committed in between, so a second
        scan could only find what the first did. A heartbeat's writes do not move the counter:
        `sql` must not read the leases. Only outside a transaction: a write's reads see its
        own uncommitted rows, and its checks read afresh under the write lock."""
        from psycopg import pq

        idle = pq.TransactionStatus.IDLE
        if not isinstance(conn, Translated) or conn.raw.info.transaction_status != idle:
            return list(conn.execute(sql, params).fetchall())
        key = (sql, params)
        kept = self._kept.get(key)
        if kept is not None:
            now = conn.execute(CHANGES_SQL).fetchone()
            if now is not None and now[0] == kept[0]:
                return list(kept[1])
        # One row at least (the counter's), and `found` tells a row of `sql` from none.
        found = conn.execute(
            f"SELECT ({CHANGES_SQL}), h.* FROM (SELECT 1) AS one LEFT JOIN "
            f"(SELECT 1 AS found, q.* FROM ({sql}) AS q) AS h ON true",
            params,
        ).fetchall()
        rows = [row[2:] for row in found if row[1] is not None]
        if found[0][0] is not None:
            self._kept[key] = (found[0][0], rows)
        return rows

    def read(self, action: Callable[[Translated], T]) -> T:
        """`action` outside a write transaction; a connection that dropped (a restarted
        server) is made again and the read repeated: a read changes nothing."""
        import psycopg

        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            try:
                return action(self.conn())
            except psycopg.OperationalError as exc:
                if not self._lost(exc) or time.monotonic() >= deadline:
                    raise self.failure(exc) from None
                self.close()
                time.sleep(0.2)
            except psycopg.Error as exc:
                raise self.failure(exc) from None

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.read(lambda c: c.execute(sql, params).fetchall())

    def column(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        return self.read(lambda c: [row[0] for row in c.execute(sql, params)])

    @contextmanager
    def transaction(self) -> Iterator[Translated]:
        """A write transaction, after the ledger's write lock (the module's docstring says
        why one lock). A connection found dropped at its start is made again (nothing was
        sent yet); one that drops inside it rolls it back on the server: nothing written."""
        import psycopg

        deadline = time.monotonic() + RECONNECT_SECONDS
        while True:
            conn = self.conn()  # its errors are the user's already (connect, migrate)
            try:
                conn.raw.execute("BEGIN")
                conn.raw.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_SPACE, WRITE_LOCK))
                break
            except psycopg.OperationalError as exc:
                self._rollback(conn)
                if not self._lost(exc) or time.monotonic() >= deadline:
                    raise self.failure(exc) from None
                self.close()
                time.sleep(0.2)
            except psycopg.Error as exc:
                self._rollback(conn)
                raise self.failure(exc) from None
            except BaseException:
                self._rollback(conn)
                raise
        try:
            yield conn
        except psycopg.Error as exc:
            self._rollback(conn)
            if self._lost(exc):
                self.close()
                raise RetryableError(
                    f"{self.label}: the connection dropped during a write, which was rolled "
                    "back (nothing written); try again"
                ) from None
            raise self.failure(exc) from None
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.raw.execute("COMMIT")
        except psycopg.Error as exc:
            self._rollback(conn)
            if self._lost(exc):
                self.close()
                raise RetryableError(
                    f"{self.label}: the connection dropped while a write was committed; "
                    "`shoal status` shows whether it took effect"
                ) from None
            raise self.failure(exc) from None

    # -- waking waiters: LISTEN / NOTIFY ------------------------------------------------------

    def open_bell(self) -> PgBell:
        return PgBell(self)

    def ring(self, token: str) -> bool:
        """NOTIFY the waiter's channel; the server delivers it to whichever machine listens.
        Whether the waiter lives is its lease's to say (NOTIFY cannot tell)."""
        if not token or not token.isalnum():
            return False
        try:
            self.read(lambda c: c.execute("SELECT pg_notify(?, '')", (NOTIFY_PREFIX + token,)))
        except ShoalError:
            return False
        return True

    def forget(self, token: str) -> None:
        pass  # a channel nobody listens on is nothing to remove

    # -- connections --------------------------------------------------------------------------

    def connect(self, *, autocommit: bool = True) -> psycopg.Connection[Any]:
        """A new session on the ledger's schema (search_path), errors as the user's: the
        server unreachable (69), credentials refused (77), else the server's reason."""
        import psycopg

        _quiet_psycopg()
        params = dict(self._params)
        params.setdefault("connect_timeout", str(CONNECT_TIMEOUT_SECONDS))
        params.setdefault("application_name", self._application)
        options = params.get("options", "")
        params["options"] = (
            f"{options} -c search_path={SCHEMA} -c lock_timeout={LOCK_TIMEOUT_SECONDS}s"
        ).strip()
        try:
            conn = psycopg.connect(autocommit=autocommit, **params)  # type: ignore[arg-type]
        except psycopg.Error as exc:
            raise self.failure(exc, connecting=True) from None
        _ints_for_numeric(conn)
        return conn

    def _open(self, tries: int) -> Translated:
        delay = 0.25
        for attempt in range(tries):
            try:
                raw = self.connect()
                break
            except ProviderUnreachableError:
                if attempt == tries - 1:
                    raise
                time.sleep(delay)
                delay *= 2
        import psycopg

        try:
            migrate(raw, self.label)
        except psycopg.Error as exc:
            raw.close()
            raise self.failure(exc) from None
        except BaseException:
            raw.close()
            raise
        return Translated(raw)

    @staticmethod
    def _rollback(conn: Translated) -> None:
        from psycopg import pq

        with contextlib.suppress(Exception):
            if conn.raw.info.transaction_status != pq.TransactionStatus.IDLE:
                conn.raw.execute("ROLLBACK")

    @staticmethod
    def _lost(exc: Exception) -> bool:
        """Whether the session is gone (server restarted, connection cut, admin shutdown),
        as opposed to a statement the server refused."""
        import psycopg

        state = getattr(exc, "sqlstate", None) or ""
        return isinstance(exc, psycopg.OperationalError) and (
            not state or state.startswith(("08", "57P"))
        )

    def failure(self, exc: Exception, *, connecting: bool = False) -> ShoalError:
        """What a psycopg error means for the user, never quoting a password."""
        import psycopg

        state = getattr(exc, "sqlstate", None) or ""
        why = _scrub(str(exc), self._secrets) or type(exc).__name__
        where = self.url.where
        if (
            state in ("28P01", "28000")
            or "password authentication failed" in why
            or ("no password supplied" in why)
        ):
            return CredentialsError(
                f"{self.label}: the server refused the credentials ({why}); set the password "
                "in ~/.pgpass or PGPASSWORD, or fix the user in "
                f"{where}"
            )
        if state == "3D000":
            return ShoalError(
                f"{self.label}: the database does not exist ({why}); create it "
                "(createdb) or fix the database in " + where
            )
        if state == "42501":
            return CredentialsError(
                f"{self.label}: permission denied ({why}); the user needs CREATE on the "
                f"database (for schema {SCHEMA}) and rights on its tables"
            )
        if state in ("55P03", "57014"):  # lock_timeout, statement cancelled
            return RetryableError(
                f"{self.label} stayed locked by another shoal for {LOCK_TIMEOUT_SECONDS}s; "
                "try again"
            )
        if isinstance(exc, psycopg.OperationalError) and (connecting or self._lost(exc)):
            return ProviderUnreachableError(
                f"{self.label} is unreachable ({why}); check that the server runs and "
                f"accepts connections, or fix {where}"
            )
        if isinstance(exc, psycopg.DataError):
            return LedgerCorruptError(
                f"{self.label}: a row holds what the ledger cannot read ({why})"
            )
        return ShoalError(f"{self.label}: {why}")


def _quiet_psycopg() -> None:
    """psycopg logs what it could not do while a Ctrl-C unwinds a transaction ("error
    ignored in rollback ... another command is already in progress"): the server rolls back
    whatever a closed session held, and stderr is for shoal's one line, not psycopg's."""
    import logging

    logger = logging.getLogger("psycopg")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


def _ints_for_numeric(conn: psycopg.Connection[Any]) -> None:
    """SUM over bigint columns is numeric in PostgreSQL: read whole numbers as int, as
    SQLite gives them."""
    from psycopg.types.numeric import NumericLoader

    class IntegralNumeric(NumericLoader):
        def load(self, data: Any) -> Any:
            value = super().load(data)
            return int(value) if value == value.to_integral_value() else value

    conn.adapters.register_loader("numeric", IntegralNumeric)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The ledger schema's version on this server; 0 when shoal has never made it."""
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.meta",)).fetchone()
    if not row or not row[0]:
        return 0
    found = conn.execute(f"SELECT value FROM {SCHEMA}.meta WHERE key='schema'").fetchone()
    return int(found[0]) if found else 0


def migrate(conn: psycopg.Connection[Any], label: str) -> int:
    """Bring the schema to SCHEMA_VERSION (versioned steps, each idempotent), under the
    migration lock so two machines starting at once do it once; returns the version found
    before. A newer schema than this shoal's is refused (78 would mislead: upgrade shoal)."""
    found = schema_version(conn)
    if found == SCHEMA_VERSION:
        return found
    if found > SCHEMA_VERSION:
        raise LedgerCorruptError(
            f"{label} has schema {found}, newer than this shoal ({SCHEMA_VERSION}); upgrade shoal"
        )
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_SPACE, MIGRATE_LOCK))
        # From here the version is read under the lock: two machines starting at once, one
        # migrates, the other finds it done (and says so).
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {SCHEMA}.meta "
            "(key text PRIMARY KEY, value bigint NOT NULL)"
        )
        now = schema_version(conn)  # again under the lock: another machine may have done it
        for version in sorted(_MIGRATIONS):
            if version > now:
                for statement in _MIGRATIONS[version]:
                    conn.execute(statement)
        conn.execute(
            f"INSERT INTO {SCHEMA}.meta (key, value) VALUES ('schema', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (SCHEMA_VERSION,),
        )
    return now


class PgBell:
    """A waiter's doorbell on a team ledger: a session of its own that LISTENs on the
    waiter's channel; `wait` sleeps in the server's socket until a NOTIFY or the timeout."""

    rings = True

    def __init__(self, db: PgLedgerDb) -> None:
        import secrets

        import psycopg

        self.token = secrets.token_hex(8)
        self._conn = db.connect()
        try:
            self._conn.execute(f'LISTEN "{NOTIFY_PREFIX}{self.token}"')
        except psycopg.Error as exc:
            self._conn.close()
            raise db.failure(exc) from None

    def wait(self, timeout: float) -> bool:
        import psycopg

        try:
            for _ in self._conn.notifies(timeout=max(0.0, timeout), stop_after=1):
                return True
        except psycopg.OperationalError:
            time.sleep(max(0.0, timeout))  # the session dropped: `intact` makes a new one
        return False

    def intact(self) -> bool:
        return not self._conn.closed and not self._conn.broken

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._conn.close()
