"""`shoal ledger migrate` and `shoal ledger copy --to URL`: a real PostgreSQL (a database of
each test's own on the session's throw-away cluster) and real SQLite ledgers made by real
`shoal alloc` and `shoal free` commands, history and all."""

from __future__ import annotations

import json
import signal
import socket
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_json_schema import check
from tests.conftest import Run, spawn, wait_for
from tests.pg import Cluster

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install '.[test]'")

ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
LIMIT_1 = '[drivers."test/default"]\ncpu_limit = 1\nram_limit = 10\n'


@pytest.fixture
def db(pg_cluster: Cluster) -> Iterator[str]:
    name = pg_cluster.new_database()
    yield name
    pg_cluster.drop_database(name)


@pytest.fixture
def url(pg_cluster: Cluster, db: str) -> str:
    return pg_cluster.url(db)


@pytest.fixture
def pg_env(pg_cluster: Cluster) -> dict[str, str]:
    """What every shoal run needs to log in (PGPASSFILE), and no team ledger of its own."""
    return {**pg_cluster.env, "SHOAL_LEDGER_URL": ""}


def ledger_file(home: Path) -> Path:
    return home / "state" / "ledger.sqlite"


def new_id(cli: Callable[..., Run], *args: str) -> str:
    run = cli(*(args or ALLOC))
    assert run.exit_code == 0, run
    return run.stdout.strip()


def history(cli: Callable[..., Run]) -> dict[str, str]:
    """A SQLite ledger with live rows and history: ALLOCATED (with metadata and a lifetime),
    FREED twice, FAILED, RESERVED. Returns id -> status."""
    kept = new_id(cli, *ALLOC, "-m", "team=blue", "--lifetime", "2h")
    other = new_id(cli, "alloc", "--driver", "test", "--cpu", "2", "--ram", "3")
    freed = [new_id(cli), new_id(cli)]
    for alloc_id in freed:
        assert cli("free", alloc_id).exit_code == 0
    failed = cli(*ALLOC, "-o", "fail_allocate=255")
    assert failed.exit_code == 1, failed
    booked = new_id(cli, *ALLOC, "--at", "+2h", "--lifetime", "1h")
    rows = listed(cli)
    assert sorted(rows.values()) == sorted(
        ["ALLOCATED", "ALLOCATED", "FREED", "FREED", "FAILED", "RESERVED"]
    )
    assert rows[kept] == rows[other] == "ALLOCATED" and rows[booked] == "RESERVED"
    return rows


def status_json(cli: Callable[..., Run], env: dict[str, str] | None = None) -> list[Any]:
    run = cli("status", "--all", "--json", env=env)
    assert run.exit_code == 0, run
    rows: list[Any] = run.json()
    return rows


def listed(cli: Callable[..., Run], env: dict[str, str] | None = None) -> dict[str, str]:
    return {row["id"]: row["status"] for row in status_json(cli, env)}


def team(pg_cluster: Cluster, url: str) -> dict[str, str]:
    return {**pg_cluster.env, "SHOAL_LEDGER_URL": url}


def copy(cli: Callable[..., Run], url: str, env: dict[str, str], *extra: str) -> Run:
    return cli("ledger", "copy", "--to", url, *extra, env=env)


def server_rows(pg_cluster: Cluster, db: str) -> dict[str, str]:
    """id -> status on the server; empty when shoal never made its schema there."""
    with pg_cluster.connect(db) as conn:
        made = conn.execute("SELECT to_regclass('shoal.allocations')").fetchone()
        if not made or made[0] is None:
            return {}
        return dict(conn.execute("SELECT id, status FROM shoal.allocations").fetchall())


def sqlite_dump(home: Path) -> list[str]:
    """The SQLite ledger's content, read without changing it."""
    conn = sqlite3.connect(f"file:{ledger_file(home)}?mode=ro", uri=True)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # bound a moment ago, listened on by nobody


# -- copy --------------------------------------------------------------------------------------


def test_copy_moves_every_row_with_its_status_and_definition(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, pg_env: dict
) -> None:
    before = history(cli)
    local = status_json(cli)
    dump = sqlite_dump(home)

    run = copy(cli, url, pg_env)
    assert run.exit_code == 0, run
    assert run.stdout == (
        f"copied 6 allocation(s) from {ledger_file(home)} to {url} (0 already there, 6 in all)\n"
    )
    assert "SHOAL_LEDGER_URL" in run.stderr and "left as it was" in run.stderr
    assert server_rows(pg_cluster, db) == before
    assert sqlite_dump(home) == dump  # the SQLite ledger is left as it was

    # The team ledger (the lead's backend) lists them: the same rows, made on this machine.
    remote = status_json(cli, team(pg_cluster, url))
    host = (home / "state" / "host-id").read_text().strip()
    assert [r["host"] for r in remote] == [host] * len(local)
    assert [r["host"] for r in local] == [None] * len(local)
    for row in remote:
        row["host"] = None
    assert remote == local


def test_copy_json_and_a_second_copy_skips_everything(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, pg_env: dict
) -> None:
    before = history(cli)
    first = copy(cli, url, pg_env, "--json")
    assert first.exit_code == 0, first
    source = str(ledger_file(home))
    assert first.json() == {"from": source, "to": url, "copied": 6, "skipped": 0, "total": 6}
    check(first.json(), "ledger-copy")
    again = copy(cli, url, pg_env, "--json")
    assert again.exit_code == 0, again
    assert again.json() == {"from": source, "to": url, "copied": 0, "skipped": 6, "total": 6}
    assert server_rows(pg_cluster, db) == before
    # One new allocation here: only it is copied.
    added = new_id(cli)
    third = copy(cli, url, pg_env, "--json")
    assert third.json() == {"from": source, "to": url, "copied": 1, "skipped": 6, "total": 7}
    assert server_rows(pg_cluster, db) == {**before, added: "ALLOCATED"}


def test_a_row_changed_on_the_team_ledger_is_a_conflict_and_nothing_is_written(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, pg_env: dict
) -> None:
    before = history(cli)
    assert copy(cli, url, pg_env).exit_code == 0
    kept = next(i for i, s in before.items() if s == "ALLOCATED")
    # Freed on the team ledger: the SQLite ledger still says ALLOCATED.
    freed = cli("free", kept, env=team(pg_cluster, url))
    assert freed.exit_code == 0, freed
    added = new_id(cli)  # here only: a copy would add it

    run = copy(cli, url, pg_env)
    assert run.exit_code == 1, run
    assert run.stdout == ""
    assert f"1 allocation id(s) are already in ledger {url} with different content: {kept};" in (
        run.stderr
    )
    assert "nothing was written" in run.stderr
    assert len(run.stderr.splitlines()) == 1
    on_server = server_rows(pg_cluster, db)
    assert added not in on_server
    assert on_server == {**before, kept: "FREED"}


def test_conflicts_are_counted_and_the_first_few_named(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, pg_env: dict
) -> None:
    ids = [new_id(cli) for _ in range(7)]
    assert copy(cli, url, pg_env).exit_code == 0
    with pg_cluster.connect(db) as conn:
        conn.execute("UPDATE shoal.allocations SET note = 'changed elsewhere'")
    run = copy(cli, url, pg_env)
    assert run.exit_code == 1, run
    named = run.stderr.partition("different content: ")[2].partition(";")[0]
    assert run.stderr.startswith("shoal: error: 7 allocation id(s) are already in ledger ")
    assert named.endswith(" and 2 more")
    assert set(named.removesuffix(" and 2 more").split(", ")) < set(ids)


def test_a_row_the_server_refuses_midway_takes_the_rows_before_it_back(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, pg_env: dict
) -> None:
    """One transaction: the reservation, copied last (rows go in order of creation), is
    refused by a rule of this server's, and the five rows before it are not left behind."""
    before = history(cli)
    assert cli("ledger", "migrate", env=team(pg_cluster, url)).exit_code == 0
    with pg_cluster.connect(db, autocommit=True) as conn:
        conn.execute(
            "ALTER TABLE shoal.allocations ADD CONSTRAINT no_bookings CHECK (status <> 'RESERVED')"
        )
    run = copy(cli, url, pg_env)
    assert run.exit_code == 1, run
    assert "no_bookings" in run.stderr and len(run.stderr.splitlines()) == 1
    assert server_rows(pg_cluster, db) == {}
    with pg_cluster.connect(db, autocommit=True) as conn:
        conn.execute("ALTER TABLE shoal.allocations DROP CONSTRAINT no_bookings")
    assert copy(cli, url, pg_env).exit_code == 0
    assert server_rows(pg_cluster, db) == before


def test_an_allocation_in_flight_refuses_the_copy_until_its_process_is_gone(
    cli: Callable[..., Run],
    home: Path,
    pg_cluster: Cluster,
    db: str,
    url: str,
    pg_env: dict,
    procs: list[subprocess.Popen[str]],
) -> None:
    done = new_id(cli)
    slow = spawn(home, procs, *ALLOC, "-o", "delay_allocate=120", env=pg_env)
    allocating = wait_for(
        lambda: [i for i, s in listed(cli).items() if s == "ALLOCATING"], "the alloc in flight"
    )
    run = copy(cli, url, pg_env)
    assert run.exit_code == 75, run
    assert f"1 allocation(s) in flight (ALLOCATING/FREEING: {allocating[0]})" in run.stderr
    assert "finish or stop them first" in run.stderr
    assert len(run.stderr.splitlines()) == 1
    assert server_rows(pg_cluster, db) == {}  # the server was not even touched

    # Its process died (kill -9): the row goes as it is, and the team ledger's sweep on this
    # machine settles it as the SQLite ledger's would have (ORPHANED, then cleaned up).
    slow.kill()
    slow.wait(timeout=30)
    run = copy(cli, url, pg_env)
    assert run.exit_code == 0, run
    assert server_rows(pg_cluster, db) == {done: "ALLOCATED", allocating[0]: "ALLOCATING"}
    host = (home / "state" / "host-id").read_text().strip()
    with pg_cluster.connect(db) as conn:
        owners = conn.execute(
            "SELECT id, host, owner_pid, owner_host FROM shoal.allocations ORDER BY created"
        ).fetchall()
    assert owners == [(done, host, None, None), (allocating[0], host, slow.pid, host)]
    settled = listed(cli, team(pg_cluster, url))
    assert settled == {done: "ALLOCATED", allocating[0]: "FAILED"}, settled


def test_a_live_waiter_refuses_the_copy(
    cli: Callable[..., Run],
    home: Path,
    write_config: Callable[[str], Path],
    pg_cluster: Cluster,
    db: str,
    url: str,
    pg_env: dict,
    procs: list[subprocess.Popen[str]],
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli)
    waiter = spawn(home, procs, *ALLOC, "--wait", "--timeout", "5m", env=pg_env)

    def queued() -> list[Any]:
        conn = sqlite3.connect(ledger_file(home), timeout=5)
        try:
            return conn.execute("SELECT owner_pid FROM waiters").fetchall()
        finally:
            conn.close()

    wait_for(lambda: queued() == [(waiter.pid,)], "the waiter to queue")
    run = copy(cli, url, pg_env)
    assert run.exit_code == 75, run
    assert "1 `alloc --wait` waiter(s) whose shoal process is alive" in run.stderr
    assert server_rows(pg_cluster, db) == {}
    waiter.send_signal(signal.SIGINT)
    assert waiter.wait(timeout=30) == 130
    run = copy(cli, url, pg_env, "--json")
    assert run.exit_code == 0, run
    assert server_rows(pg_cluster, db) == {held: "ALLOCATED"}


def test_no_sqlite_ledger_is_nothing_to_copy(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, pg_env: dict
) -> None:
    run = copy(cli, url, pg_env)
    assert run.exit_code == 0, run
    assert run.stdout == f"nothing to copy: no SQLite ledger at {ledger_file(home)}\n"
    run = copy(cli, url, pg_env, "--json")
    assert run.json() == {
        "from": str(ledger_file(home)), "to": url, "copied": 0, "skipped": 0, "total": 0,
    }  # fmt: skip
    assert not ledger_file(home).exists()


def test_a_password_in_the_url_is_never_shown(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, tmp_path: Path
) -> None:
    history(cli)
    password = pg_cluster.password
    # No password file: the URL's own password logs in (or, wrong, is refused).
    env = {"PGPASSFILE": str(tmp_path / "none"), "SHOAL_LEDGER_URL": ""}
    given = url.replace("shoal@", f"shoal:{password}@")
    in_query = f"{url}?password={password}&sslmode=disable"
    wrong = url.replace("shoal@", f"shoal:{password}-wrong@")
    runs = [
        copy(cli, given, env),
        copy(cli, given, env, "--json"),
        copy(cli, in_query, env, "--json"),
        copy(cli, wrong, env),
        cli("ledger", "migrate", env={**env, "SHOAL_LEDGER_URL": given}),
        cli("ledger", "migrate", "--json", env={**env, "SHOAL_LEDGER_URL": wrong}),
    ]
    assert [r.exit_code for r in runs] == [0, 0, 0, 77, 0, 77]
    for run in runs:
        assert password not in run.stdout + run.stderr
    assert url in runs[0].stdout
    assert runs[1].json()["to"] == url
    assert runs[2].json()["to"] == f"{url}?sslmode=disable"
    assert runs[4].stdout == f"ledger {url}: schema 1, up to date\n"


def test_a_wrong_password_exits_77_in_one_line(
    cli: Callable[..., Run], pg_cluster: Cluster, db: str, url: str, tmp_path: Path
) -> None:
    history(cli)
    env = {"PGPASSFILE": str(tmp_path / "none"), "SHOAL_LEDGER_URL": ""}
    wrong = url.replace("shoal@", "shoal:not-the-password@")
    for run in (
        copy(cli, wrong, env),
        cli("ledger", "migrate", env={**env, "SHOAL_LEDGER_URL": wrong}),
    ):
        assert run.exit_code == 77, run
        assert run.stdout == ""
        assert len(run.stderr.splitlines()) == 1
        assert "refused the credentials" in run.stderr and "not-the-password" not in run.stderr
    assert server_rows(pg_cluster, db) == {}


def test_an_unreachable_server_exits_69_in_one_line(
    cli: Callable[..., Run], pg_cluster: Cluster
) -> None:
    history(cli)
    gone = f"postgresql://shoal:hunter2@127.0.0.1:{closed_port()}/shoal"
    runs = (
        copy(cli, gone, pg_cluster.env),
        cli("ledger", "migrate", env={**pg_cluster.env, "SHOAL_LEDGER_URL": gone}),
    )
    for run in runs:
        assert run.exit_code == 69, run
        assert run.stdout == ""
        assert len(run.stderr.splitlines()) == 1
        assert "is unreachable" in run.stderr and "hunter2" not in run.stderr


def test_a_url_libpq_cannot_read_exits_78_without_quoting_it(cli: Callable[..., Run]) -> None:
    history(cli)
    for bad in (
        "mysql://root:hunter2@db/x",
        "postgresql://u:hun@ter2@db/x",
        "postgresql://h/d?pasword=hunter2",
    ):
        run = copy(cli, bad, {})
        assert run.exit_code == 78, (bad, run)
        assert run.stderr.startswith("shoal: error: --to: ") and "hunter2" not in run.stderr
        assert len(run.stderr.splitlines()) == 1 and run.stdout == ""
        run = cli("ledger", "migrate", env={"SHOAL_LEDGER_URL": bad})
        assert run.exit_code == 78, (bad, run)
        assert run.stderr.startswith("shoal: error: SHOAL_LEDGER_URL: ")
        assert "hunter2" not in run.stderr and run.stdout == ""


def test_ctrl_c_while_the_copy_waits_for_the_ledger_leaves_nothing_written(
    home: Path,
    cli: Callable[..., Run],
    pg_cluster: Cluster,
    db: str,
    url: str,
    pg_env: dict,
    procs: list[subprocess.Popen[str]],
) -> None:
    """Another machine's write holds the team ledger: the copy waits inside its transaction
    (the schema migrated, the SQLite lock held); Ctrl-C then ends it with nothing written,
    and this machine's SQLite ledger is free again at once."""
    from drivers.ledger.pg import LOCK_SPACE, WRITE_LOCK

    before = history(cli)
    assert cli("ledger", "migrate", env=team(pg_cluster, url)).exit_code == 0
    with pg_cluster.connect(db, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_SPACE, WRITE_LOCK))
        proc = spawn(home, procs, "ledger", "copy", "--to", url, env=pg_env)

        def waiting() -> bool:
            row = other.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND classid = %s AND objid = %s",
                (LOCK_SPACE, WRITE_LOCK),
            ).fetchone()
            return bool(row and row[0] == 1)

        wait_for(waiting, "the copy to wait for the write lock")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert out == "" and err == "shoal: error: interrupted\n"
    assert server_rows(pg_cluster, db) == {}
    assert new_id(cli)  # the SQLite ledger's lock went with the process
    assert copy(cli, url, pg_env).exit_code == 0
    assert set(server_rows(pg_cluster, db)) > set(before)


def test_ctrl_c_at_any_instant_leaves_all_or_nothing(
    home: Path,
    cli: Callable[..., Run],
    pg_cluster: Cluster,
    pg_env: dict,
    procs: list[subprocess.Popen[str]],
) -> None:
    """SIGINT at offsets spread over a whole copy (timed first, uninterrupted): exit 130
    with every row or none on the server, or exit 0 with all of them."""
    import time

    before = history(cli)

    def run(delay: float | None) -> tuple[int, str, dict[str, str], float]:
        name = pg_cluster.new_database()
        try:
            began = time.monotonic()
            proc = spawn(home, procs, "ledger", "copy", "--to", pg_cluster.url(name), env=pg_env)
            if delay is not None:
                time.sleep(delay)
                proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            took = time.monotonic() - began
            return proc.returncode, err, server_rows(pg_cluster, name), took
        finally:
            pg_cluster.drop_database(name)

    code, err, rows, whole = run(None)
    assert (code, rows) == (0, before), err
    outcomes = set()
    for share in (0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
        code, err, rows, _ = run(whole * share)
        assert (code, rows) in ((130, {}), (0, before)), (share, err, rows)
        if code == 130:
            assert err == "shoal: error: interrupted\n", err
        outcomes.add(code)
    assert 130 in outcomes


# -- migrate -----------------------------------------------------------------------------------


def test_migrate_makes_the_schema_once(
    cli: Callable[..., Run], pg_cluster: Cluster, db: str, url: str
) -> None:
    from drivers.ledger.pg import SCHEMA_VERSION

    env = team(pg_cluster, url)
    first = cli("ledger", "migrate", "--json", env=env)
    assert first.exit_code == 0, first
    assert first.json() == {"ledger": url, "from": 0, "to": SCHEMA_VERSION}
    check(first.json(), "ledger-migrate")
    again = cli("ledger", "migrate", env=env)
    assert again.exit_code == 0, again
    assert again.stdout == f"ledger {url}: schema {SCHEMA_VERSION}, up to date\n"
    assert again.stderr == ""
    assert cli("ledger", "migrate", "--json", env=env).json()["from"] == SCHEMA_VERSION
    assert status_json(cli, env) == []


def test_two_machines_migrating_at_once_both_succeed(
    home: Path, pg_cluster: Cluster, db: str, url: str, procs: list[subprocess.Popen[str]]
) -> None:
    """Both start on an empty database and meet at the migration lock (held here until both
    wait for it): one makes the schema, the other finds it made."""
    from drivers.ledger.pg import LOCK_SPACE, MIGRATE_LOCK, SCHEMA_VERSION

    env = team(pg_cluster, url)
    with pg_cluster.connect(db, autocommit=True) as other:
        other.execute("SELECT pg_advisory_lock(%s, %s)", (LOCK_SPACE, MIGRATE_LOCK))
        both = [spawn(home, procs, "ledger", "migrate", "--json", env=env) for _ in range(2)]

        def waiting() -> bool:
            row = other.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
                "AND classid = %s AND objid = %s",
                (LOCK_SPACE, MIGRATE_LOCK),
            ).fetchone()
            return bool(row and row[0] == 2)

        wait_for(waiting, "both migrations to wait for the lock")
        other.execute("SELECT pg_advisory_unlock(%s, %s)", (LOCK_SPACE, MIGRATE_LOCK))
        said = [proc.communicate(timeout=60) for proc in both]
    assert [proc.returncode for proc in both] == [0, 0], said
    for out, err in said:
        assert json.loads(out)["to"] == SCHEMA_VERSION and err == ""
    with pg_cluster.connect(db) as conn:
        assert conn.execute("SELECT value FROM shoal.meta WHERE key = 'schema'").fetchone() == (
            SCHEMA_VERSION,
        )


def test_migrate_without_a_team_ledger_upgrades_the_sqlite_file_in_place(
    cli: Callable[..., Run], home: Path
) -> None:
    from drivers.ledger import db as sqlite_ledger

    absent = cli("ledger", "migrate", "--json")
    assert absent.exit_code == 0, absent
    assert absent.json() == {"ledger": str(ledger_file(home)), "from": 0, "to": 0}
    assert "no team ledger is configured" in absent.stderr
    assert not ledger_file(home).exists()  # nothing made: the first alloc makes it

    # A version-2 ledger (before hosts), as an older shoal left it, with a row.
    ledger_file(home).parent.mkdir(parents=True)
    conn = sqlite3.connect(ledger_file(home))
    conn.executescript(sqlite_ledger._SCHEMA + sqlite_ledger._SCHEMA_2)
    conn.execute(
        "INSERT INTO allocations (id, driver, status, definition, metadata, created, updated, "
        "cpu, ram, multitenancy, cpu_overbook, ram_overbook, is_remote) VALUES ('test-0000aaaa', "
        "'test/default', 'FREED', '{}', '{}', '2026-01-01T00:00:00.000000Z', "
        "'2026-01-01T00:00:01.000000Z', 1, 1, 0, 0, 0, 0)"
    )
    conn.execute("PRAGMA user_version=2")
    conn.commit()
    conn.close()
    run = cli("ledger", "migrate")
    assert run.exit_code == 0, run
    assert run.stdout == f"SQLite ledger {ledger_file(home)}: schema 2 -> 3\n"
    assert "no team ledger is configured" in run.stderr
    assert listed(cli) == {"test-0000aaaa": "FREED"}
    again = cli("ledger", "migrate", "--json")
    assert again.json() == {"ledger": str(ledger_file(home)), "from": 3, "to": 3}


def test_an_old_sqlite_ledger_is_copied_without_upgrading_it(
    cli: Callable[..., Run], home: Path, pg_cluster: Cluster, db: str, url: str, pg_env: dict
) -> None:
    from drivers.ledger import db as sqlite_ledger

    ledger_file(home).parent.mkdir(parents=True)
    conn = sqlite3.connect(ledger_file(home))
    conn.executescript(sqlite_ledger._SCHEMA)
    conn.execute(
        "INSERT INTO allocations (id, driver, status, definition, metadata, created, updated, "
        "cpu, ram, multitenancy, cpu_overbook, ram_overbook, is_remote) VALUES ('test-0000bbbb', "
        "'test/default', 'FAILED', '{}', '{}', '2026-01-01T00:00:00.000000Z', "
        "'2026-01-01T00:00:01.000000Z', 1, 1, 0, 0, 0, 0)"
    )
    conn.execute("PRAGMA user_version=1")
    conn.commit()
    conn.close()
    dump = sqlite_dump(home)
    run = copy(cli, url, pg_env, "--json")
    assert run.exit_code == 0, run
    assert run.json()["copied"] == 1
    assert sqlite_dump(home) == dump
    assert server_rows(pg_cluster, db) == {"test-0000bbbb": "FAILED"}


def test_ledger_commands_import_psycopg_only_for_postgresql(home: Path) -> None:
    from tests.cli.test_imports import _probe

    for args in (["ledger", "--help"], ["ledger", "migrate", "--json"]):
        loaded, _ = _probe(home, *args)
        tops = {m.split(".")[0] for m in loaded}
        assert not tops & {"psycopg", "pydantic", "httpx", "rich"}, args
