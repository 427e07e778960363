"""The allocation ledger on real SQLite files and a real PostgreSQL (ledger_backend)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.spec.types import Resources
from providers.core.errors import LedgerCorruptError, NoCapacityError, NotFoundError

pytestmark = pytest.mark.usefixtures("ledger_backend")


@pytest.fixture
def ledger(tmp_path: Path, make_ledger: Callable[..., Ledger]) -> Iterator[Ledger]:
    (tmp_path / "state").mkdir()
    yield make_ledger(tmp_path / "state" / "ledger.sqlite")


def reserve(
    book: Ledger,
    cpu: int = 1,
    ram: int = 1,
    *,
    driver: str = "test/default",
    expires: datetime | None = None,
    is_remote: bool = False,
    fits: Callable[[Resources], int] = lambda usage: 1,
) -> str:
    return book.reserve(
        driver=driver,
        definition={"driver": driver, "resources": {"cpu": cpu, "ram": ram}},
        resources=Resources(cpu=cpu, ram=ram),
        metadata={"who": "test"},
        is_remote=is_remote,
        expires=expires,
        fits=fits,
    )


def dead_pid() -> int:
    """The pid of a real process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def raw(where: Path | Ledger, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Touch the ledger behind its back, as another process (or a crash) would: its SQLite
    file, or its PostgreSQL tables on a session of their own."""
    if isinstance(where, Ledger) and where.team:
        conn = where._db.connect()  # type: ignore[union-attr]
        try:
            cursor = conn.execute(sql.replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description else []
        finally:
            conn.close()
    path = where.path if isinstance(where, Ledger) else where
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


# -- reserve, set_status, get, summaries -----------------------------------------------------


def test_reserve_writes_an_allocating_row_owned_by_this_process(ledger: Ledger) -> None:
    alloc_id = reserve(ledger, 2, 3)
    assert alloc_id.startswith("test-")
    row = ledger.get(alloc_id)
    assert row.status == L.ALLOCATING
    assert (row.cpu, row.ram) == (2, 3)
    assert row.driver == "test/default"
    assert row.definition == {"driver": "test/default", "resources": {"cpu": 2, "ram": 3}}
    assert row.metadata == {"who": "test"}
    assert row.owner_pid == os.getpid()
    assert ledger.owner_alive(row)
    assert row.state is None


def test_reserve_ids_are_unique(ledger: Ledger) -> None:
    ids = {reserve(ledger) for _ in range(20)}
    assert len(ids) == 20


def test_reserve_hands_current_node_usage_to_fits(ledger: Ledger) -> None:
    seen: list[Resources] = []

    def fits(usage: Resources) -> int:
        seen.append(usage)
        return 1

    reserve(ledger, 2, 5, fits=fits)
    reserve(ledger, 1, 1, fits=fits)
    reserve(ledger, 1, 1, is_remote=True, fits=fits)  # a remote driver sees its own usage
    reserve(ledger, 1, 1, is_remote=True, fits=fits)
    reserve(ledger, 1, 1, fits=fits)  # remote rows hold nothing locally
    assert seen[0] == Resources()
    assert (seen[1].cpu, seen[1].ram) == (2, 5)
    assert (seen[2].cpu, seen[2].ram) == (0, 0)
    assert (seen[3].cpu, seen[3].ram) == (1, 1)
    assert (seen[4].cpu, seen[4].ram) == (3, 6)


@pytest.mark.parametrize("answer", [0, -1])
def test_reserve_refuses_without_capacity_and_writes_nothing(ledger: Ledger, answer: int) -> None:
    kept = reserve(ledger)
    with pytest.raises(NoCapacityError, match="no capacity for test/default"):
        reserve(ledger, 4, 4, fits=lambda usage: answer)
    assert [r["id"] for r in ledger.summaries(include_ended=True)] == [kept]
    assert raw(ledger, "SELECT COUNT(*) FROM allocations") == [(1,)]


def test_reserve_on_a_fresh_file_refusing_leaves_no_row(ledger: Ledger) -> None:
    with pytest.raises(NoCapacityError):
        reserve(ledger, fits=lambda usage: 0)
    assert ledger.summaries(include_ended=True) == []


def test_set_status_moves_only_from_expected(ledger: Ledger) -> None:
    alloc_id = reserve(ledger)
    state = {"identifier": alloc_id, "metadata": {"k": "v"}}
    assert ledger.set_status(alloc_id, L.ALLOCATED, state=state, expect=(L.ALLOCATING,))
    row = ledger.get(alloc_id)
    assert row.status == L.ALLOCATED
    assert row.state == state
    assert row.owner_pid is None  # an allocated row has no owner process
    # Not from ALLOCATING any more: refused, and nothing changes.
    assert not ledger.set_status(alloc_id, L.FAILED, note="late", expect=(L.ALLOCATING,))
    again = ledger.get(alloc_id)
    assert again.status == L.ALLOCATED
    assert again.note is None
    assert again.state == state
    # Unconditional moves always happen; the state is kept when not given.
    assert ledger.set_status(alloc_id, L.FREED, note="bye")
    assert ledger.get(alloc_id).status == L.FREED
    assert ledger.get(alloc_id).note == "bye"
    assert ledger.get(alloc_id).state == state


def test_set_status_owner_records_this_process(ledger: Ledger) -> None:
    alloc_id = reserve(ledger)
    ledger.set_status(alloc_id, L.ALLOCATED)
    assert ledger.set_status(alloc_id, L.FREEING, expect=(L.ALLOCATED,), owner=True)
    assert ledger.get(alloc_id).owner_pid == os.getpid()


def test_set_status_of_unknown_id_is_false(ledger: Ledger) -> None:
    reserve(ledger)
    assert not ledger.set_status("test-nope", L.FREED)


def test_get_unknown_raises_not_found(ledger: Ledger) -> None:
    reserve(ledger)
    with pytest.raises(NotFoundError, match="test-missing"):
        ledger.get("test-missing")


def test_summaries_hide_ended_rows_unless_asked(ledger: Ledger) -> None:
    ids = [reserve(ledger) for _ in range(4)]
    ledger.set_status(ids[0], L.ALLOCATED)
    ledger.set_status(ids[1], L.FREED)
    ledger.set_status(ids[2], L.FAILED)
    ledger.set_status(ids[3], L.GONE)
    live = ledger.summaries(include_ended=False)
    assert {r["id"]: r["status"] for r in live} == {ids[0]: L.ALLOCATED, ids[3]: L.GONE}
    every = ledger.summaries(include_ended=True)
    assert [r["id"] for r in every] == ids  # in creation order
    assert set(every[0]) == {
        "id",
        "driver",
        "status",
        "cpu",
        "ram",
        "created",
        "expires",
        "updated",
        "note",
        "starts",
        "claim_by",
        "host",
    }
    # Each with its allocation object built by SQLite, when asked.
    encoded = ledger.summaries(include_ended=True, encoded=True)
    assert [json.loads(r["json"])["id"] for r in encoded] == ids


def test_expired_lists_allocated_and_gone_rows_past_their_time(ledger: Ledger) -> None:
    now = datetime.now(UTC)
    past = now - timedelta(minutes=5)
    older = now - timedelta(hours=1)
    future = now + timedelta(hours=1)
    due = reserve(ledger, expires=past)
    due_gone = reserve(ledger, expires=older)
    not_yet = reserve(ledger, expires=future)
    forever = reserve(ledger)
    freed = reserve(ledger, expires=past)
    allocating = reserve(ledger, expires=past)
    for alloc_id in (due, not_yet, forever):
        ledger.set_status(alloc_id, L.ALLOCATED)
    ledger.set_status(due_gone, L.GONE)
    ledger.set_status(freed, L.FREED)
    expired = ledger.expired(now)
    assert [r.id for r in expired] == [due_gone, due]  # oldest expiry first
    assert allocating not in [r.id for r in expired]
    assert [r.id for r in ledger.expired(now + timedelta(hours=2))] == [due_gone, due, not_yet]


@pytest.mark.sqlite_only
def test_the_live_list_and_the_expiry_check_read_their_indexes(ledger: Ledger) -> None:
    from drivers.ledger import store as S

    ids = [reserve(ledger) for _ in range(3)]
    ledger.set_status(ids[1], L.FREED)
    listed = ledger.summaries_json(include_ended=False)
    assert [row.split('"id":"')[1].split('"')[0] for row in listed] == [ids[0], ids[2]]
    conn = ledger._db.conn()
    live = conn.execute(
        "EXPLAIN QUERY PLAN SELECT json_object('id', id) "
        f"{ledger._listed(include_ended=False)} ORDER BY created"
    ).fetchall()
    # the summaries come from the index alone, in its order: no row visited, nothing sorted
    assert [step[-1] for step in live] == [f"SCAN allocations USING COVERING INDEX {S.LIVE_INDEX}"]
    expiring = conn.execute(
        f"EXPLAIN QUERY PLAN SELECT id FROM allocations {ledger._db.indexed_by(S.EXPIRY_INDEX)} "
        f"WHERE {S.EXPIRING_SQL} AND expires <= ? ORDER BY expires",
        ("x",),
    ).fetchall()
    assert S.EXPIRY_INDEX in expiring[0][-1] and len(expiring) == 1


@pytest.mark.sqlite_only
def test_a_ledger_without_the_indexes_gets_them_and_one_that_cannot_is_read_without(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.ledger import store as S

    path = tmp_path / "ledger.sqlite"
    older = Ledger(path)
    made = reserve(older)
    older.set_status(made, L.ALLOCATED)
    older.close()
    names = "SELECT name FROM sqlite_master WHERE type='index'"
    for name in S.INDEXES:  # as a shoal from before them left it
        raw(path, f"DROP INDEX {name}")
    # One that cannot be made (as on a read-only or full disk; root writes through modes):
    # none is made, and the reads go on without naming them.
    broken = {**S.INDEXES, "allocations_broken": "ON allocations(no_such_column)"}
    monkeypatch.setattr(S, "INDEXES", broken)
    reader = Ledger(path)
    assert [r["id"] for r in reader.summaries(include_ended=False)] == [made]
    assert reader.summaries_json(include_ended=False)[0].startswith(f'{{"id":"{made}"')
    assert reader.expired(datetime.now(UTC)) == []
    reader.close()
    assert not {row[0] for row in raw(path, names)} & set(broken)
    monkeypatch.undo()
    writer = Ledger(path)
    assert [r["id"] for r in writer.summaries(include_ended=False)] == [made]
    writer.close()
    assert set(S.INDEXES) <= {row[0] for row in raw(path, names)}


def test_node_usage_sums_holding_local_rows(ledger: Ledger) -> None:
    assert ledger.node_usage() == Resources()
    a = reserve(ledger, 2, 4)
    b = reserve(ledger, 1, 1)
    reserve(ledger, 8, 8, is_remote=True)
    ledger.set_status(a, L.ALLOCATED)
    usage = ledger.node_usage()
    assert (usage.cpu, usage.ram) == (3, 5)
    ledger.set_status(b, L.FAILED)
    ledger.set_status(a, L.FREED)
    assert ledger.node_usage() == Resources()


def test_node_usage_flags_are_those_every_tenant_allows(ledger: Ledger) -> None:
    sharing = Resources(cpu=1, ram=1, multitenancy=True, cpu_overbook=True, ram_overbook=False)
    for _ in range(2):
        ledger.reserve(
            driver="test/default",
            definition={},
            resources=sharing,
            metadata={},
            is_remote=False,
            expires=None,
            fits=lambda usage: 1,
        )
    usage = ledger.node_usage()
    assert usage.multitenancy and usage.cpu_overbook and not usage.ram_overbook
    reserve(ledger)  # a tenant that tolerates no one
    usage = ledger.node_usage()
    assert not (usage.multitenancy or usage.cpu_overbook or usage.ram_overbook)


@pytest.mark.sqlite_only
def test_reads_of_a_missing_ledger_are_empty_and_create_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    book = Ledger(path)
    assert book.summaries(include_ended=True) == []
    assert book.active_local_usage() == []
    assert book.node_usage() == Resources()
    assert book.sweep() == []
    assert book.summaries_json(include_ended=False) == []
    assert not path.exists()


# -- corruption ------------------------------------------------------------------------------

GARBAGE = [
    b"this is not a database, it is a shopping list\n" * 200,
    bytes(range(256)) * 64,
    b"SQLite format 3\x00" + b"\xff" * 4080,
]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("garbage", GARBAGE, ids=["text", "binary", "bad-header"])
@pytest.mark.parametrize(
    "use",
    [
        lambda b: b.summaries(include_ended=True),
        lambda b: b.get("test-1"),
        lambda b: b.node_usage(),
        lambda b: b.sweep(),
        lambda b: b.active_local_usage(),
        lambda b: reserve(b),
        lambda b: b.set_status("test-1", L.FREED),
    ],
    ids=["summaries", "get", "node_usage", "sweep", "active_local_usage", "reserve", "set_status"],
)
def test_corrupt_ledger_is_reported_and_left_untouched(
    tmp_path: Path, garbage: bytes, use: Callable[[Ledger], Any]
) -> None:
    path = tmp_path / "ledger.sqlite"
    path.write_bytes(garbage)
    book = Ledger(path)
    try:
        with pytest.raises(LedgerCorruptError) as caught:
            use(book)
    finally:
        book.close()
    assert str(path) in str(caught.value)
    assert path.read_bytes() == garbage


@pytest.mark.sqlite_only
def test_newer_schema_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    raw(path, "PRAGMA user_version=99")
    before = path.read_bytes()
    book = Ledger(path)
    with pytest.raises(LedgerCorruptError, match="newer"):
        reserve(book)
    book.close()
    assert path.read_bytes() == before


@pytest.mark.sqlite_only
def test_corrupt_ledger_through_the_cli(cli, home: Path) -> None:
    state = home / "state"
    state.mkdir()
    path = state / "ledger.sqlite"
    garbage = b"\x00garbage\x01" * 500
    path.write_bytes(garbage)
    for args in (("status",), ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")):
        run = cli(*args)
        assert run.exit_code == 1, run
        assert str(path) in run.stderr
        assert run.stdout == ""
    assert path.read_bytes() == garbage


# -- orphans ---------------------------------------------------------------------------------


def test_sweep_orphans_an_allocating_row_whose_owner_died(ledger: Ledger) -> None:
    alloc_id = reserve(ledger, 2, 3)
    kept = reserve(ledger, 1, 1)
    pid = dead_pid()
    raw(ledger, "UPDATE allocations SET owner_pid=? WHERE id=?", (pid, alloc_id))
    # Even before cleanup, a dead owner's reservation is no longer shown as usage.
    assert [u.cpu for u in ledger.active_local_usage()] == [1]

    orphans = ledger.sweep()

    assert [r.id for r in orphans] == [alloc_id]
    row = ledger.get(alloc_id)
    assert row.status == L.ORPHANED
    assert str(pid) in (row.note or "")
    assert row.owner_pid is None
    # Swept, it counts again until its driver confirms the cleanup: the workload the dead
    # owner may have started could still run (recover() cleans it at once, see service).
    usage = ledger.node_usage()
    assert (usage.cpu, usage.ram) == (3, 4)
    assert sorted((u.cpu, u.ram_gib) for u in ledger.active_local_usage()) == [(1, 1), (2, 3)]
    assert ledger.get(kept).status == L.ALLOCATING  # our own (live) reservation stays
    ledger.set_status(alloc_id, L.FAILED, expect=(L.ORPHANED,))  # cleaned up
    usage = ledger.node_usage()
    assert (usage.cpu, usage.ram) == (1, 1)


def test_sweep_orphans_a_row_whose_pid_was_reused(ledger: Ledger) -> None:
    # Our own pid, but a start time that is not ours: another process once had this pid.
    alloc_id = reserve(ledger)
    raw(ledger, "UPDATE allocations SET owner_start='1' WHERE id=?", (alloc_id,))
    assert [r.id for r in ledger.sweep()] == [alloc_id]
    ledger.set_status(alloc_id, L.FAILED, expect=(L.ORPHANED,))  # cleaned up
    assert ledger.node_usage() == Resources()
    assert ledger.active_local_usage() == []


def test_sweep_leaves_live_owners_alone(ledger: Ledger) -> None:
    alloc_id = reserve(ledger)
    assert ledger.sweep() == []
    assert ledger.get(alloc_id).status == L.ALLOCATING
    assert ledger.node_usage().cpu == 1


def test_sweep_returns_an_interrupted_free_to_allocated(ledger: Ledger) -> None:
    alloc_id = reserve(ledger, 2, 2)
    ledger.set_status(alloc_id, L.ALLOCATED)
    ledger.set_status(alloc_id, L.FREEING, owner=True)
    raw(ledger, "UPDATE allocations SET owner_pid=? WHERE id=?", (dead_pid(), alloc_id))
    assert ledger.sweep() == []
    assert ledger.get(alloc_id).status == L.ALLOCATED  # still held: nobody freed it
    assert ledger.node_usage().cpu == 2


def test_reserve_sweeps_dead_owners_before_counting(ledger: Ledger) -> None:
    alloc_id = reserve(ledger, 3, 3)
    raw(ledger, "UPDATE allocations SET owner_pid=? WHERE id=?", (dead_pid(), alloc_id))
    seen: list[Resources] = []
    reserve(ledger, fits=lambda usage: seen.append(usage) or 1)
    # Swept into ORPHANED first; it still counts until its driver cleans it up (the service
    # runs that cleanup before reserving, so a plain kill -9 leaves nothing behind).
    assert [(u.cpu, u.ram) for u in seen] == [(3, 3)]
    assert ledger.get(alloc_id).status == L.ORPHANED


@pytest.mark.sqlite_only
def test_a_held_lock_is_waited_for(ledger: Ledger) -> None:
    alloc_id = reserve(ledger)  # the file exists
    holder = sqlite3.connect(ledger.path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")  # another shoal in the middle of a write
    release = threading.Timer(1.0, lambda: holder.execute("ROLLBACK"))
    release.start()
    try:
        second = reserve(ledger)  # waits for the lock instead of failing
        assert ledger.set_status(alloc_id, L.ALLOCATED)
    finally:
        release.join()
        holder.close()
    assert ledger.get(second).status == L.ALLOCATING
    assert ledger.get(alloc_id).status == L.ALLOCATED


def test_two_ledgers_on_one_file_see_each_other(
    tmp_path: Path, make_ledger: Callable[..., Ledger]
) -> None:
    path = tmp_path / "ledger.sqlite"
    one, two = make_ledger(path), make_ledger(path)
    try:
        alloc_id = reserve(one, 2, 2)
        assert two.get(alloc_id).status == L.ALLOCATING
        assert two.node_usage().cpu == 2
        two.set_status(alloc_id, L.ALLOCATED)
        assert one.get(alloc_id).status == L.ALLOCATED
    finally:
        one.close()
        two.close()


# -- a team ledger's session cut -----------------------------------------------------------


@pytest.mark.postgresql_only
def test_a_session_cut_inside_a_write_rolls_it_back_and_the_next_write_reconnects(
    ledger: Ledger,
) -> None:
    from providers.core.errors import RetryableError

    kept = reserve(ledger)
    admin = ledger._db.connect()  # type: ignore[union-attr]
    try:
        with (
            pytest.raises(RetryableError, match=r"rolled back \(nothing written\)"),
            ledger._write() as conn,
        ):
            conn.execute("UPDATE allocations SET note='half' WHERE id=?", (kept,))
            backend = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
            conn.execute("UPDATE allocations SET note='done' WHERE id=?", (kept,))
    finally:
        admin.close()
    assert ledger.get(kept).note is None  # the server rolled it back: nothing half-written
    second = reserve(ledger)  # a new session, the same ledger
    assert {r["id"] for r in ledger.summaries(include_ended=False)} == {kept, second}


def test_the_listing_is_the_same_text_on_both_backends(ledger: Ledger) -> None:
    alloc_id = reserve(ledger, 2, 3)
    (row,) = ledger.summaries_json(include_ended=False)
    # Compact, keys in the allocation object's order: greppable the same way everywhere.
    assert row.startswith(f'{{"id":"{alloc_id}","driver":"test/default","status":"ALLOCATING",')
    assert '"definition":{"driver":"test/default","resources":{"cpu":2,"ram":3}}' in row
    assert json.loads(row)["host"] == (None if not ledger.team else "host-a")


@pytest.mark.sqlite_only  # a check of the code, once
def test_the_team_ledgers_indexes_cover_the_same_rows_as_sqlites() -> None:
    from drivers.ledger import pg
    from drivers.ledger import store as S

    assert (pg._NOT_ENDED, pg._EXPIRING, pg._HOLDING) == (
        S.NOT_ENDED_SQL,
        S.EXPIRING_SQL,
        S.HOLDING_SQL,
    )


@pytest.mark.sqlite_only  # SQLite's query plan
def test_the_capacity_sum_reads_the_holding_index_alone(ledger: Ledger) -> None:
    from drivers.ledger import store as S

    reserve(ledger)
    plan = (
        ledger._db.conn()
        .execute(
            "EXPLAIN QUERY PLAN SELECT COALESCE(SUM(cpu), 0), COUNT(*), MIN(multitenancy) "
            f"FROM allocations WHERE {S.HOLDS_SQL} AND is_remote = 0"
        )
        .fetchall()
    )
    assert [step[-1] for step in plan] == [
        f"SEARCH allocations USING COVERING INDEX {S.HOLDING_INDEX} (is_remote=?)"
    ]


# -- running totals of the holding rows (SQLite) ----------------------------------------------


def _statements(ledger: Ledger, action: Callable[[], object]) -> list[str]:
    """The SQL `action` runs on the ledger's connection."""
    seen: list[str] = []
    conn = ledger._db.conn()
    conn.set_trace_callback(seen.append)  # type: ignore[union-attr]
    try:
        action()
    finally:
        conn.set_trace_callback(None)  # type: ignore[union-attr]
    return seen


@pytest.mark.sqlite_only  # the totals are SQLite's (the team ledger sums its holding index)
def test_capacity_checks_read_the_running_totals_not_every_holding_row(ledger: Ledger) -> None:
    a = reserve(ledger, 2, 4)
    ledger.set_status(a, L.ALLOCATED)
    reserve(ledger, 1, 1, expires=datetime.now(UTC) + timedelta(hours=1))

    def check() -> object:
        usage = ledger.node_usage()
        assert (usage.cpu, usage.ram) == (3, 5)
        return ledger.fit_window(lambda usage: 1)

    sums = [s for s in _statements(ledger, check) if "SUM(" in s]
    assert sums and all("FROM holding_totals" in s for s in sums), sums


@pytest.mark.sqlite_only
def test_running_totals_follow_every_move_of_a_row(ledger: Ledger) -> None:
    soon = datetime.now(UTC) + timedelta(hours=1)
    sharing = Resources(cpu=3, ram=2, multitenancy=True, cpu_overbook=True)
    rows = [
        reserve(ledger, 2, 4),
        reserve(ledger, 1, 1, expires=soon),
        reserve(ledger, 1, 1, expires=soon),
        reserve(ledger, 8, 8, is_remote=True, driver="aws/default"),
        ledger.reserve(
            driver="test/default", definition={}, resources=sharing, metadata={},
            is_remote=False, expires=None, fits=lambda usage: 1,
        ),
    ]  # fmt: skip

    def same() -> None:
        assert ledger.totals_drift() == []
        usage = ledger.node_usage()
        rows_sum = raw(
            ledger,
            "SELECT COALESCE(SUM(cpu), 0), COALESCE(SUM(ram), 0) FROM allocations "
            "WHERE status IN ('ALLOCATING', 'ALLOCATED', 'ORPHANED') AND is_remote = 0 "
            "OR (status = 'FREEING' AND note NOT LIKE 'freeing from E%' AND is_remote = 0)",
        )[0]
        assert (usage.cpu, usage.ram) == rows_sum

    same()
    for alloc_id in rows:
        ledger.set_status(alloc_id, L.ALLOCATED)
    same()
    assert ledger.node_usage(remote_driver="aws/default").cpu == 8
    # The smallest id of a span leaves it: the span is named by the next one.
    first = min(rows[1], rows[2])
    ledger.set_status(first, L.FREED)
    same()
    spans = ledger._db.read(lambda conn: ledger._spans(conn, None, datetime.now(UTC)))
    assert {s.label for s in spans if s.end is not None} == {max(rows[1], rows[2])}
    # A free of an ended row holds nothing meanwhile; an interrupted one is put back.
    ledger.set_status(rows[0], L.EXPIRED)
    ledger.set_status(rows[0], L.FREEING, note=f"{L.FREEING_FROM}{L.EXPIRED}")
    same()
    ledger.set_status(rows[4], L.FREEING, note=f"{L.FREEING_FROM}{L.ALLOCATED}")
    same()
    assert ledger.undo_free(rows[4], L.ALLOCATED, None)
    same()
    assert ledger.node_usage().multitenancy is False  # rows[2] tolerates no one
    ledger.set_status(max(rows[1], rows[2]), L.FAILED)
    same()
    usage = ledger.node_usage()
    assert (usage.cpu, usage.multitenancy, usage.cpu_overbook) == (3, True, True)
    # Another writer (an older shoal, the sqlite3 shell) keeps them too.
    raw(
        ledger,
        "UPDATE allocations SET cpu = 5, expires = ? WHERE id = ?",
        (stamp_in(soon), rows[4]),
    )
    raw(ledger, "DELETE FROM allocations WHERE id = ?", (rows[3],))
    same()
    assert ledger.node_usage().cpu == 5
    assert ledger.node_usage(remote_driver="aws/default") == Resources()
    ledger.set_status(rows[4], L.FREED)
    same()
    assert ledger.node_usage() == Resources()
    assert raw(ledger, "SELECT COUNT(*) FROM holding_totals") == [(0,)]


def stamp_in(when: datetime) -> str:
    from drivers.ledger.rows import stamp

    return stamp(when)


@pytest.mark.sqlite_only
def test_totals_are_made_on_an_older_ledger_and_remade_when_a_part_is_missing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ledger.sqlite"
    first = Ledger(path)
    made = reserve(first, 2, 2)
    first.set_status(made, L.ALLOCATED)
    first.close()
    # A ledger from before the totals, where writes went on without them.
    raw(path, "DROP TABLE holding_totals")
    for name in ("insert", "delete", "update_old", "update_new"):
        raw(path, f"DROP TRIGGER IF EXISTS holding_totals_{name}")
    raw(path, "UPDATE allocations SET cpu = 6 WHERE id = ?", (made,))
    older = Ledger(path)
    assert older.node_usage().cpu == 6
    assert older.totals_drift() == []
    older.close()
    # One trigger dropped by hand: writes since then are not counted, so all is made again.
    raw(path, "DROP TRIGGER holding_totals_update_new")
    raw(path, "UPDATE allocations SET cpu = 7 WHERE id = ?", (made,))
    again = Ledger(path)
    assert again.node_usage().cpu == 7
    assert again.totals_drift() == []
    again.close()
    # A total edited by hand is found, and made again from the rows.
    raw(path, "UPDATE holding_totals SET cpu = 99")
    checked = Ledger(path)
    drift = checked.totals_drift(repair=True)
    assert len(drift) == 1 and "kept (1, 99," in drift[0] and "rows (1, 7," in drift[0]
    assert checked.totals_drift() == [] and checked.node_usage().cpu == 7
    checked.close()


@pytest.mark.sqlite_only
def test_a_ledger_that_cannot_take_the_totals_is_summed_from_its_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.ledger import store as S

    path = tmp_path / "ledger.sqlite"
    first = Ledger(path)
    made = reserve(first, 3, 1)
    first.set_status(made, L.ALLOCATED)
    first.close()
    raw(path, "DROP TRIGGER holding_totals_insert")
    raw(path, f"DROP INDEX {S.EXPIRY_INDEX}")
    raw(path, "UPDATE allocations SET cpu = 4 WHERE id = ?", (made,))
    # As on a read-only or full disk (root writes through modes): nothing can be made, and
    # the totals left in part are never read.
    broken = {**S.TOTALS_TRIGGERS, "holding_totals_broken": "AFTER INSERT ON no_such_table "
              "BEGIN SELECT 1; END"}  # fmt: skip
    monkeypatch.setattr(S, "TOTALS_TRIGGERS", broken)
    reader = Ledger(path)
    assert reader.node_usage().cpu == 4
    assert reader.fit_window(lambda usage: 1).count == 1
    sums = [s for s in _statements(reader, reader.node_usage) if "SUM(" in s]
    assert sums and all("FROM allocations" in s for s in sums)
    reader.close()
    assert raw(path, "SELECT name FROM sqlite_master WHERE name = 'holding_totals_insert'") == []
    # The indexes are made all the same (an SQLite too old for the triggers' upsert).
    assert raw(path, f"SELECT name FROM sqlite_master WHERE name = '{S.EXPIRY_INDEX}'") != []
