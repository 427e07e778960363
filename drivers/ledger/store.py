"""The ledger's store: its SQLite plumbing and the allocation rows' reads.

`LedgerStore` opens `drivers.ledger.db` with a clock, runs write transactions (ringing the
waiters after one that freed capacity), and answers what the rows hold: lookups, listings,
expiries, usage of this node. It also holds the sweep step every write runs first (dead
owners' rows released, unclaimed reservations lapsed). `drivers.ledger.book.Ledger` builds on
it; callers import from `drivers.ledger.book`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers.ledger.db import Conn, LedgerDb, Totals
from drivers.ledger.rows import (
    ALLOCATED,
    COLUMNS,
    ENDED_BEFORE_FREE,
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
)
from drivers.supervisor import procinfo
from providers.core.errors import LedgerCorruptError, NotFoundError

if TYPE_CHECKING:
    from drivers.ledger.hosts import Heartbeat
    from drivers.ledger.pg import PgLedgerDb
    from drivers.spec.types import Resources


def sql_in(statuses: tuple[str, ...]) -> str:
    """`('A', 'B')` for `status IN ...`: the status sets are named once, in ledger_rows."""
    return "(" + ", ".join(f"'{s}'" for s in statuses) + ")"


HOLDING_SQL = sql_in(HOLDING)


def holds_sql(row: str = "") -> str:
    """The rows that hold capacity, as one SQL condition (of `row`'s columns: `NEW.` in a
    trigger): the holding statuses, less a FREEING row whose workload had ended before `free`
    began (its note names the status it came from), so freeing an expired or exited row
    never reads as usage meanwhile (a false "no capacity")."""
    return (
        f"({row}status IN {HOLDING_SQL} AND NOT ({row}status = '{FREEING}' AND "
        f"COALESCE({row}note, '') IN {sql_in(tuple(FREEING_FROM + s for s in ENDED_BEFORE_FREE))}))"
    )


HOLDS_SQL = holds_sql()
LOCAL_SETTLED_SQL = sql_in((ALLOCATED, FREEING, ORPHANED))  # ALLOCATING is checked by owner
NOT_ENDED_SQL = sql_in(NOT_ENDED)
EXPIRING_SQL = f"status IN {sql_in((ALLOCATED, GONE))} AND expires IS NOT NULL"

# The reads every command makes, served by indexes of their own (named in the queries with
# INDEXED BY: SQLite, with no statistics, would take the status index and then visit and sort
# every live row). `status` reads the live rows in LIVE_INDEX's order (nothing sorted),
# visiting each for the columns the index does not hold (its JSON: definition, metadata);
# the expiry check finds the due rows in EXPIRY_INDEX without visiting the others.
# The live index's name says which set of statuses it covers: a ledger indexed by an older
# shoal (without EXITED) gets the new one beside it, never a query its index cannot serve.
LIVE_INDEX = "allocations_live_2"
EXPIRY_INDEX = "allocations_expiry"
# Every capacity check sums the rows that hold capacity (`_usage`, `_spans`, `_holdings`):
# from this index alone, never the rows with their JSON (100,000 live rows: 54 -> 20 ms for
# the sum, 94 -> 57 ms for the spans).
HOLDING_INDEX = "allocations_holding"
INDEXES = {
    HOLDING_INDEX: "ON allocations(is_remote, driver, expires, cpu, ram, multitenancy, "
    f"cpu_overbook, ram_overbook, status, note, id) WHERE status IN {HOLDING_SQL}",
    LIVE_INDEX: "ON allocations(created, id, driver, status, cpu, ram, expires, updated, note) "
    f"WHERE status IN {NOT_ENDED_SQL}",
    EXPIRY_INDEX: f"ON allocations(expires) WHERE {EXPIRING_SQL}",
}


OBSOLETE_INDEXES = ("allocations_live",)  # the live index before EXITED

# The capacity checks' sums kept as running totals (SQLite): one row per pool and expiry of
# what the holding rows hold, kept by triggers in the transaction of every write to the
# allocations, so a check reads a few rows instead of summing every holding row (100,000
# live rows: the sums and the spans of `alloc --dry-run`, ~120 ms -> under 1 ms). Triggers
# are SQLite's, not shoal's: every writer keeps them (an older shoal, the sqlite3 shell), a
# rolled-back or killed transaction takes its changes to the totals with it, and they are
# made in place like the indexes (drivers.ledger.db.LedgerDb). Each flag is the count of
# rows that set it (MIN over the rows = all of them do); `first` the group's smallest id,
# the span's name in messages, found again in the index when that row leaves the group.
TOTALS = "holding_totals"
_GROUP_OF = (
    "is_remote = {r}.is_remote AND driver = {r}.driver AND expires = COALESCE({r}.expires, '')"
)
_ADD = (
    f"INSERT INTO {TOTALS} VALUES ({{r}}.is_remote, {{r}}.driver, COALESCE({{r}}.expires, ''), "
    "1, {r}.cpu, {r}.ram, {r}.multitenancy <> 0, {r}.cpu_overbook <> 0, "
    "{r}.ram_overbook <> 0, {r}.id) ON CONFLICT (is_remote, driver, expires) DO UPDATE "
    "SET n = n + 1, "
    "cpu = cpu + excluded.cpu, ram = ram + excluded.ram, shared = shared + excluded.shared, "
    "cpu_ob = cpu_ob + excluded.cpu_ob, ram_ob = ram_ob + excluded.ram_ob, "
    "first = min(first, excluded.first);"
)
_SUB = (
    f"UPDATE {TOTALS} SET n = n - 1, cpu = cpu - {{r}}.cpu, ram = ram - {{r}}.ram, "
    "shared = shared - ({r}.multitenancy <> 0), cpu_ob = cpu_ob - ({r}.cpu_overbook <> 0), "
    "ram_ob = ram_ob - ({r}.ram_overbook <> 0), first = CASE WHEN first = {r}.id THEN "
    "(SELECT min(id) FROM allocations WHERE is_remote = {r}.is_remote AND "
    f"driver = {{r}}.driver AND expires IS {{r}}.expires AND {HOLDS_SQL}) ELSE first END "
    f"WHERE {_GROUP_OF};"
    f"DELETE FROM {TOTALS} WHERE {_GROUP_OF} AND n = 0;"
)
# The columns a holding row's share depends on: an update of others leaves the totals be.
_COUNTED = (
    "status, note, is_remote, driver, expires, cpu, ram, multitenancy, cpu_overbook, "
    "ram_overbook, id"
)
TOTALS_TRIGGERS = {
    f"{TOTALS}_insert": f"AFTER INSERT ON allocations WHEN {holds_sql('NEW.')} BEGIN "
    + _ADD.format(r="NEW")
    + " END",
    f"{TOTALS}_delete": f"AFTER DELETE ON allocations WHEN {holds_sql('OLD.')} BEGIN "
    + _SUB.format(r="OLD")
    + " END",
    f"{TOTALS}_update_old": f"AFTER UPDATE OF {_COUNTED} ON allocations WHEN "
    f"{holds_sql('OLD.')} BEGIN " + _SUB.format(r="OLD") + " END",
    f"{TOTALS}_update_new": f"AFTER UPDATE OF {_COUNTED} ON allocations WHEN "
    f"{holds_sql('NEW.')} BEGIN " + _ADD.format(r="NEW") + " END",
}
TOTALS_TABLE = (
    f"CREATE TABLE {TOTALS} (is_remote INTEGER NOT NULL, driver TEXT NOT NULL, "
    "expires TEXT NOT NULL, n INTEGER NOT NULL, cpu INTEGER NOT NULL, ram INTEGER NOT NULL, "
    "shared INTEGER NOT NULL, cpu_ob INTEGER NOT NULL, ram_ob INTEGER NOT NULL, first TEXT, "
    "PRIMARY KEY (is_remote, driver, expires)) WITHOUT ROWID"
)
# The totals from the rows themselves: what the table is rebuilt from, and checked against.
TOTALS_FROM_ROWS = (
    "SELECT is_remote, driver, COALESCE(expires, '') AS e, COUNT(*), SUM(cpu), SUM(ram), "
    "SUM(multitenancy <> 0), SUM(cpu_overbook <> 0), SUM(ram_overbook <> 0), MIN(id) "
    f"FROM allocations WHERE {HOLDS_SQL} GROUP BY is_remote, driver, e"
)

# The columns of a `status` list row (drivers.ledger.rows.summary_row reads them in order).
SUMMARY_COLUMNS = (
    "id, driver, status, cpu, ram, created, expires, updated, note, starts, claim_by, host"
)


def _json_of(column: str, drop: str | None = None) -> str:
    """A JSON column as JSON (not text) inside json_object, `drop` left out; null when the
    column does not hold JSON (a hand-edited row), so one bad row cannot fail a listing."""
    value = f"json_remove({column}, '$.{drop}')" if drop else f"json({column})"
    return f"CASE WHEN json_valid({column}) THEN {value} END"


# A listed row as the allocation object (drivers.spec.views.ALLOCATION_KEYS, in order), by
# SQLite: the definition and the state (`resource`) without their credentials, and null for
# what only reconciling with the driver tells (`status ID`).
LISTED_JSON = (
    "json_object('id', id, 'driver', driver, 'status', status, 'cpu', cpu, 'ram', ram, "
    "'created', created, 'expires', expires, 'updated', updated, 'starts', starts, "
    "'claim_by', claim_by, 'host', host, 'note', note, "
    f"'metadata', {_json_of('metadata')}, "
    f"'definition', {_json_of('definition', 'authentication')}, "
    f"'resource', {_json_of('state', 'authentication')}, "
    "'driver_status', NULL, 'drift', NULL, 'detail', NULL)"
)
_NO_JSON = "no such function: json"  # an SQLite built without its JSON functions


def _decoded(text: str | None) -> dict[str, Any]:
    """A metadata column; one that is not a JSON object (a hand-edited row) reads as none."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


# The columns `_listed_json` reads, in its order: a listing fetches these, not every column
# (100,000 rows on PostgreSQL: 15 columns of each, not 23).
LISTED_COLUMNS = (
    "id, driver, status, cpu, ram, created, expires, updated, starts, claim_by, host, note, "
    "metadata, definition, state"
)
# json.dumps with separators builds an encoder per call; one encoder of the same options
# writes the same bytes (100,000 rows: ~0.3 s less).
_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_DECODE = json.JSONDecoder().decode  # json.loads of a str, without its per-call checks


def _json_or_none(text: str | None) -> Any:
    """A JSON column's value; null when it does not hold JSON (a hand-edited row), as
    SQLite's json_valid makes it."""
    if text is None:
        return None
    try:
        # A hand-edited SQLite row may hold bytes, which json.loads decodes: so do they here.
        return _DECODE(text) if type(text) is str else json.loads(text)
    except (ValueError, RecursionError):
        return None


# A listing this long decodes its JSON columns with msgspec (a dependency already): ~5 us a
# row less than json.loads (100,000 rows: 0.55-0.73x of the Python JSON work), more than its
# import (10-25 ms here) costs a short one.
MSGSPEC_ROWS = 5_000


def _json_decoder(count: int) -> Callable[[str | None], Any]:
    """`_json_or_none` for a listing of `count` rows. msgspec only decodes: where it returns
    a value json.loads returns the same one (300,000 generated texts, numbers, strings and
    objects, compared by type and repr), and whatever it refuses (NaN, a lone surrogate, an
    exponent past a float's range) json.loads decides; the text is then encoded by json as
    always, so a listing reads byte for byte the same."""
    if count < MSGSPEC_ROWS:
        return _json_or_none
    import msgspec

    fast = msgspec.json.Decoder().decode

    def decode(text: str | None) -> Any:
        if text is None:
            return None
        try:
            return fast(text)
        except Exception:  # msgspec's refusal is not the answer: json.loads's is
            return _json_or_none(text)

    return decode


def _public(value: Any) -> Any:
    """A definition or state as listed: an object without its credentials, else null."""
    if not isinstance(value, dict):
        return None
    if "authentication" in value:
        return {k: v for k, v in value.items() if k != "authentication"}
    return value


def _listed_json(row: tuple[Any, ...], decode: Callable[[str | None], Any] = _json_or_none) -> str:
    """LISTED_JSON in Python (a row of LISTED_COLUMNS): for an SQLite without its JSON
    functions, and for PostgreSQL, whose json_build_object writes other spacing and whose
    jsonb reorders keys (the same text on both backends). A column that is not JSON is null:
    one bad row never fails a listing. Compact, as SQLite's json_object writes it: one
    listing reads the same on both backends (and `grep '"status":"ALLOCATED"'` finds it on
    either)."""
    return _COMPACT(
        {
            "id": row[0],
            "driver": row[1],
            "status": row[2],
            "cpu": row[3],
            "ram": row[4],
            "created": row[5],
            "expires": row[6],
            "updated": row[7],
            "starts": row[8],
            "claim_by": row[9],
            "host": row[10],
            "note": row[11],
            "metadata": decode(row[12]),
            "definition": _public(decode(row[13])),
            "resource": _public(decode(row[14])),
            "driver_status": None,
            "drift": None,
            "detail": None,
        }
    )


def _listed_texts(rows: list[tuple[Any, ...]], skip: int = 0) -> list[str]:
    """Each row's `_listed_json`, its LISTED_COLUMNS after the first `skip` columns."""
    decode = _json_decoder(len(rows))
    if not skip:
        return [_listed_json(row, decode) for row in rows]
    return [_listed_json(row[skip:], decode) for row in rows]


def _now() -> datetime:
    return datetime.now(UTC)


class LedgerStore:
    def __init__(
        self,
        path: Path | None = None,
        clock: Callable[[], datetime] = _now,
        *,
        db: PgLedgerDb | None = None,
        host: str | None = None,
    ) -> None:
        """The SQLite file at `path`, or the team's ledger `db` (drivers.ledger.pg).
        Reads of a ledger that does not exist see it empty; the first write creates it.
        `clock` tells the time for windows, reservations and rows (tests move it). `host`:
        this machine's id, recorded in the rows it writes (drivers.ledger.hosts)."""
        if db is None:
            if path is None:
                raise TypeError("a ledger needs a path or a db")
            totals = Totals(TOTALS, TOTALS_TABLE, TOTALS_FROM_ROWS, TOTALS_TRIGGERS)
            self._db: LedgerDb | PgLedgerDb = LedgerDb(path, INDEXES, OBSOLETE_INDEXES, totals)
        else:
            self._db = db
        self.clock = clock
        self.host = host
        self.team = self._db.team
        if self.team and not host:
            raise TypeError("a team ledger needs this machine's host id")
        # The rows that hold this machine's capacity (process, a local container engine):
        # on a team ledger only this machine's. A host id is letters, digits and . _ -.
        self._local = "is_remote = 0" + (f" AND host = '{host}'" if self.team else "")
        # The waiters a driver's queue holds: a machine-scoped driver's are this machine's.
        self._queue_scope = f" AND (is_remote = 1 OR host = '{host}')" if self.team else ""
        self._heartbeat: Heartbeat | None = None
        self._ring_pending = False

    def alive(
        self, host: str | None, pid: int | None, started: str | None, lease: str | None
    ) -> bool:
        """Whether the owner of a row or a queue place lives: its pid on this machine, its
        lease on another machine of the team (drivers.ledger.hosts)."""
        if pid is None:
            return False
        if self.team and host is not None and host != self.host:
            from drivers.ledger.hosts import lease_alive

            return lease_alive(lease)
        return procinfo.is_alive(pid, started)

    def owner_alive(self, row: Allocation) -> bool:
        return self.alive(row.owner_host, row.owner_pid, row.owner_start, row.lease)

    def mine(self, row: Allocation) -> bool:
        """Whether a row was made on this machine (every row of a SQLite ledger is)."""
        return not self.team or row.host is None or row.host == self.host

    def _lease(self) -> str | None:
        """The lease a row or place this process owns starts with; on a team ledger the
        heartbeat renews it while the process lives."""
        if not self.team:
            return None
        from drivers.ledger.hosts import Heartbeat, lease_stamp

        if self._heartbeat is None:
            import os
            import weakref

            assert self.host is not None
            self._heartbeat = Heartbeat(self._db, self.host, os.getpid())  # type: ignore[arg-type]
            self._heartbeat.start()
            # A ledger dropped unclosed (a command run in-process) ends its heartbeat too.
            weakref.finalize(self, self._heartbeat.stop)
        return lease_stamp()

    @property
    def label(self) -> str:
        return self._db.label

    def ring(self, token: str) -> bool:
        return self._db.ring(token)

    def open_bell(self) -> Any:
        return self._db.open_bell()

    @contextmanager
    def _write(self) -> Iterator[Conn]:
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
        if isinstance(self._db, LedgerDb):
            return self._db.path
        raise TypeError("a team ledger has no file")

    @property
    def exists(self) -> bool:
        return self._db.exists

    def close(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop()
        self._db.close()

    def ring_waiters(self) -> None:
        """Wake the waiters after a write freed capacity (drivers.ledger.waiters serves them)."""
        raise NotImplementedError

    # -- orphans -------------------------------------------------------------------------

    def _sweep(self, conn: Conn, now: str) -> None:
        lapsed = conn.execute(
            "UPDATE allocations SET status=?, updated=?, note='not claimed by ' || claim_by || "
            "'; its capacity was freed' WHERE status=? AND claim_by <= ?",
            (LAPSED, now, RESERVED, now),
        ).rowcount
        if lapsed:
            self._ring_pending = True
        rows = conn.execute(
            "SELECT id, owner_pid, owner_start, status, note, owner_host, lease FROM allocations "
            f"WHERE status IN {sql_in(IN_FLIGHT)}"
        ).fetchall()
        for row_id, pid, started, status, note, host, lease in rows:
            if self.alive(host, pid, started, lease):
                continue
            # An interrupted allocate may hold a workload (cleaned up as ORPHANED); an
            # interrupted free goes back to what its note says it was (ALLOCATED, ORPHANED,
            # GONE, EXPIRED, EXITED), or what its workload's supervisor found meanwhile: an
            # end (drivers.supervisor.supervise.record_end), never an ALLOCATED that nothing uses.
            new_status = ORPHANED
            if status == FREEING:
                before = (note or "").removeprefix(FREEING_FROM)
                restorable = (ALLOCATED, ORPHANED, *ENDED_BEFORE_FREE)
                new_status = before if before in restorable else ALLOCATED
            conn.execute(
                "UPDATE allocations SET status=?, updated=?, owner_pid=NULL, owner_start=NULL, "
                "owner_host=NULL, note=? WHERE id=?",
                (new_status, now, self._death(host, pid, status), row_id),
            )

    def _death(self, host: str | None, pid: int | None, status: str) -> str:
        if self.team and host is not None and host != self.host:
            return (
                f"owner process {pid} on {host} stopped renewing its lease during {status.lower()}"
            )
        return f"owner process {pid} died during {status.lower()}"

    # -- usage ---------------------------------------------------------------------------

    def _scope(self, remote_driver: str | None) -> str:
        """A capacity pool's rows: this machine's local drivers', or one team driver's (on
        every machine)."""
        return self._local if remote_driver is None else "is_remote = 1 AND driver = ?"

    def _usage(self, conn: Conn, remote_driver: str | None = None) -> Resources:
        """What local drivers hold of this node; for a remote driver, what it holds itself."""
        from drivers.spec.types import Resources

        scope = self._scope(remote_driver)
        sql = (
            "SELECT COALESCE(SUM(cpu), 0), COALESCE(SUM(ram), 0), COUNT(*), "
            "COALESCE(MIN(multitenancy), 0), COALESCE(MIN(cpu_overbook), 0), "
            "COALESCE(MIN(ram_overbook), 0) FROM allocations "
            f"WHERE {HOLDS_SQL} AND {scope}"
        )
        if self._db.has(TOTALS):
            sql = (
                "SELECT COALESCE(SUM(cpu), 0), COALESCE(SUM(ram), 0), COALESCE(SUM(n), 0), "
                "COALESCE(MIN(shared = n), 0), COALESCE(MIN(cpu_ob = n), 0), "
                f"COALESCE(MIN(ram_ob = n), 0) FROM {TOTALS} WHERE {scope}"
            )
        cpu, ram, count, multi, cpu_ob, ram_ob = conn.execute(
            sql, () if remote_driver is None else (remote_driver,)
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
            from drivers.spec.types import Resources

            return Resources()
        return self._db.read(lambda conn: self._usage(conn, remote_driver))

    def totals_drift(self, *, repair: bool = False) -> list[str]:
        """Where the running totals (TOTALS) differ from the rows they sum, one line per
        pool and expiry; none on a ledger without them. `repair`: made again from the rows."""
        if not self.exists or not isinstance(self._db, LedgerDb):
            return []
        self._db.conn()
        if not self._db.has(TOTALS):
            return []
        order = " ORDER BY 1, 2, 3"
        kept = {r[:3]: r[3:] for r in self._db.query(f"SELECT * FROM {TOTALS}{order}")}
        counted = {r[:3]: r[3:] for r in self._db.query(TOTALS_FROM_ROWS + order)}
        drift = [
            f"is_remote={key[0]} driver={key[1]} expires={key[2] or None}: "
            f"kept {kept.get(key)}, rows {counted.get(key)}"
            for key in sorted({*kept, *counted})
            if kept.get(key) != counted.get(key)
        ]
        if drift and repair:
            self._db.rebuild_totals()
        return drift

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
            f"SELECT {COLUMNS} FROM allocations {self._db.indexed_by(EXPIRY_INDEX)} "
            f"WHERE {EXPIRING_SQL} AND expires <= ? ORDER BY expires",
            (stamp(now),),
        )
        return [Allocation.from_row(r) for r in rows]

    def _listed(self, include_ended: bool) -> str:
        """FROM and WHERE of the `status` list: every row, or the live ones (their index)."""
        if include_ended:
            return "FROM allocations"
        return f"FROM allocations {self._db.indexed_by(LIVE_INDEX)} WHERE status IN {NOT_ENDED_SQL}"

    def summaries(
        self, *, include_ended: bool, encoded: bool = False, metadata: bool = False
    ) -> list[dict[str, Any]]:
        """The `status` list's rows, the fields it filters and sorts by; `metadata` adds each
        row's metadata (decoded: `-l` selects by it), `encoded` its allocation object as JSON
        text (`"json"`), built as `summaries_json` builds it."""
        listed = f"{self._listed(include_ended)} ORDER BY created"
        width = SUMMARY_COLUMNS.count(",") + 1
        head = width + (1 if metadata else 0)

        def in_python() -> list[tuple[Any, ...]]:
            chosen = f"{SUMMARY_COLUMNS}{', metadata' if metadata else ''}, {LISTED_COLUMNS}"
            found = self._db.query(f"SELECT {chosen} {listed}")
            texts = _listed_texts(found, skip=head)
            return [(*r[:head], text) for r, text in zip(found, texts, strict=True)]

        extra = (", metadata" if metadata else "") + (f", {LISTED_JSON}" if encoded else "")
        if encoded and self.team:
            rows = in_python()
        else:
            try:
                rows = self._db.query(f"SELECT {SUMMARY_COLUMNS}{extra} {listed}")
            except LedgerCorruptError as exc:
                if not encoded or _NO_JSON not in str(exc):
                    raise
                rows = in_python()  # no JSON functions in this SQLite: the same, in Python
        out = []
        for r in rows:
            row = summary_row(r)
            if metadata:
                row["metadata"] = _decoded(r[width])
            if encoded:
                row["json"] = r[-1]
            out.append(row)
        return out

    def summaries_json(self, *, include_ended: bool) -> list[str]:
        """Every listed row's allocation object, as JSON text built by SQLite itself.

        Listing 10,000 allocations then costs what SQLite costs, not a Python dict and a
        json.dumps per row; without SQLite's JSON functions it falls back to Python, as a
        team ledger always does (_listed_json says why).
        """
        listed = f"{self._listed(include_ended)} ORDER BY created"
        if not self.team:
            try:
                return self._db.column(f"SELECT {LISTED_JSON} {listed}")
            except LedgerCorruptError as exc:
                if _NO_JSON not in str(exc):
                    raise
        return _listed_texts(self._db.query(f"SELECT {LISTED_COLUMNS} {listed}"))
