"""`alloc`, `status`, `free` from the command line: definitions, errors, races and signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import stat
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import spawn, wait_for

ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
LIMIT_3 = '[drivers."test/default"]\ncpu_limit = 3\nram_limit = 10\n'
LIMIT_1 = '[drivers."test/default"]\ncpu_limit = 1\nram_limit = 10\n'

pytestmark = pytest.mark.usefixtures("ledger_backend")


@pytest.fixture
def limited(write_config: Callable[[str], Path]) -> None:
    write_config(LIMIT_3)




def rows(cli, *flags: str) -> dict[str, str]:
    run = cli("status", "--json", *flags)
    assert run.exit_code == 0, run
    return {r["id"]: r["status"] for r in run.json()}


def allocated_cpu(cli) -> str:
    run = cli("resources", "--json")
    assert run.exit_code == 0, run
    return run.json()[0]["overview"][0]["stat"]["onDemand"]["allocated"]["cpu"]["vcpu"]


def new_id(cli, *args: str) -> str:
    run = cli(*(args or ALLOC))
    assert run.exit_code == 0, run
    return run.stdout.strip()


# -- definitions -----------------------------------------------------------------------------


def test_alloc_from_json_file(cli, limited: None, tmp_path: Path) -> None:
    path = tmp_path / "def.json"
    path.write_text(json.dumps({"driver": "test", "resources": {"cpu": 2, "ram": 3}}))
    ident = new_id(cli, "alloc", str(path))
    shown = cli("status", ident, "--json").json()
    assert (shown["driver"], shown["cpu"], shown["ram"]) == ("test/default", 2, 3)
    assert shown["status"] == "ALLOCATED"


def test_alloc_from_yaml_file(cli, limited: None, tmp_path: Path) -> None:
    path = tmp_path / "def.yaml"
    path.write_text(
        "# a comment\ndriver: test\nresources:\n  cpu: 1\n  ram: 4\n  lifetime: 2h\n"
        "options:\n  delay_allocate: 0\n"
    )
    ident = new_id(cli, "alloc", str(path))
    shown = cli("status", ident, "--json").json()
    assert (shown["cpu"], shown["ram"]) == (1, 4)
    assert shown["expires"] is not None
    assert shown["definition"]["options"] == {"delay_allocate": 0}


@pytest.mark.parametrize(
    "text",
    [
        '{"driver": "test", "resources": {"cpu": 1, "ram": 2}}',
        "driver: test\nresources: {cpu: 1, ram: 2}\n",
    ],
    ids=["json", "yaml"],
)
def test_alloc_from_stdin(cli, limited: None, text: str) -> None:
    run = cli("alloc", "-", input=text)
    assert run.exit_code == 0, run
    shown = cli("status", run.stdout.strip(), "--json").json()
    assert (shown["cpu"], shown["ram"]) == (1, 2)


def test_flags_override_the_file(cli, limited: None, tmp_path: Path) -> None:
    path = tmp_path / "def.json"
    path.write_text(json.dumps({"driver": "test", "resources": {"cpu": 2, "ram": 3}}))
    ident = new_id(cli, "alloc", str(path), "--cpu", "1")
    assert cli("status", ident, "--json").json()["cpu"] == 1


def test_missing_definition_file(cli, limited: None, tmp_path: Path) -> None:
    run = cli("alloc", str(tmp_path / "nope.json"))
    assert run.exit_code == 2
    assert "nope.json" in run.stderr


def test_malformed_json_names_file_line_and_column(cli, limited: None, tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "driver": "test",\n  "resources": {"cpu": 1,, "ram": 1}\n}\n')
    run = cli("alloc", str(path))
    assert run.exit_code == 2
    assert f"{path}:3:26:" in run.stderr
    assert run.stdout == ""
    assert rows(cli, "--all") == {}


def test_malformed_yaml_names_line_and_column(cli, limited: None, tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("driver: test\nresources:\n  cpu: 1\n  ram: : 1\n")
    run = cli("alloc", str(path))
    assert run.exit_code == 2
    assert f"{path}:4:8:" in run.stderr
    assert rows(cli, "--all") == {}


def test_malformed_stdin_is_named_stdin(cli, limited: None) -> None:
    run = cli("alloc", "-", input='{"driver": "test",\n "resources": }')
    assert run.exit_code == 2
    assert "<stdin>:2:" in run.stderr


@pytest.mark.parametrize(
    ("flags", "field"),
    [
        (("--cpu", "0", "--ram", "1"), "resources.cpu"),
        (("--cpu", "-1", "--ram", "1"), "resources.cpu"),
        (("--cpu", "1", "--ram", "0"), "resources.ram"),
        (("--cpu", "1"), "resources.ram"),  # missing is zero
    ],
)
def test_bad_sizes_from_flags(cli, limited: None, flags: tuple[str, ...], field: str) -> None:
    run = cli("alloc", "--driver", "test", *flags)
    assert run.exit_code == 2
    assert field in run.stderr
    assert rows(cli, "--all") == {}


@pytest.mark.parametrize(
    ("resources", "field"),
    [
        ({"cpu": 0, "ram": 1}, "resources.cpu"),
        ({"cpu": -1, "ram": 1}, "resources.cpu"),
        ({"cpu": 1, "ram": 0}, "resources.ram"),
        ({"cpu": "two", "ram": 1}, "resources.cpu"),
        ({"cpu": 1, "ram": 1, "lifetime": "soon"}, "resources.lifetime"),
    ],
)
def test_bad_sizes_from_a_file(
    cli, limited: None, tmp_path: Path, resources: dict[str, Any], field: str
) -> None:
    path = tmp_path / "def.json"
    path.write_text(json.dumps({"driver": "test", "resources": resources}))
    run = cli("alloc", str(path))
    assert run.exit_code == 2
    assert field in run.stderr
    assert str(path) in run.stderr


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"driver": "test", "resources": {"cpu": 1, "ram": 1}, "colour": "red"}, "colour"),
        ({"driver": "test", "resources": {"cpu": 1, "ram": 1, "gpus": 2}}, "resources.gpus"),
    ],
)
def test_unknown_field_is_named(
    cli, limited: None, tmp_path: Path, document: dict[str, Any], named: str
) -> None:
    path = tmp_path / "def.json"
    path.write_text(json.dumps(document))
    run = cli("alloc", str(path))
    assert run.exit_code == 2
    assert named in run.stderr
    assert "unknown field" in run.stderr
    assert rows(cli, "--all") == {}


def test_empty_definition_is_a_usage_error(cli, limited: None) -> None:
    run = cli("alloc", "-", input="  \n")
    assert run.exit_code == 2
    assert "<stdin>" in run.stderr and "empty" in run.stderr


def test_definition_must_be_an_object(cli, limited: None) -> None:
    run = cli("alloc", "-", input="[1, 2, 3]")
    assert run.exit_code == 2
    assert "object" in run.stderr


def test_driver_is_required(cli, limited: None) -> None:
    run = cli("alloc", "--cpu", "1", "--ram", "1")
    assert run.exit_code == 2
    assert "driver" in run.stderr


# -- dry run ---------------------------------------------------------------------------------


def test_dry_run_prints_the_count_and_writes_nothing(cli, limited: None, home: Path) -> None:
    run = cli(*ALLOC, "--dry-run")
    assert run.exit_code == 0, run
    assert run.stdout == "3\n"
    assert not (home / "state" / "ledger.sqlite").exists()
    assert rows(cli, "--all") == {}

    ident = new_id(cli)
    again = cli(*ALLOC, "--dry-run")
    assert again.stdout == "2\n"
    assert rows(cli, "--all") == {ident: "ALLOCATED"}
    bigger = cli("alloc", "--driver", "test", "--cpu", "2", "--ram", "1", "--dry-run", "--json")
    assert bigger.exit_code == 0
    result = bigger.json()
    assert result["fits"] == 1
    assert result["unlimited"] is False
    assert result["node_usage"] == {"cpu": 1, "ram": 1}
    assert rows(cli, "--all") == {ident: "ALLOCATED"}


def test_dry_run_without_limits_is_unlimited(cli) -> None:
    run = cli(*ALLOC, "--dry-run")
    assert run.exit_code == 0
    assert run.stdout == "unlimited\n"
    assert cli(*ALLOC, "--dry-run", "--json").json()["fits"] is None


def test_dry_run_when_full_prints_zero(cli, limited: None) -> None:
    for _ in range(3):
        new_id(cli)
    run = cli(*ALLOC, "--dry-run")
    assert run.exit_code == 0
    assert run.stdout == "0\n"


# -- free and status -------------------------------------------------------------------------


def test_free_twice_is_harmless(cli, limited: None) -> None:
    ident = new_id(cli)
    first = cli("free", ident)
    assert first.exit_code == 0
    second = cli("free", ident)
    assert second.exit_code == 0
    assert "already freed" in second.stderr
    as_json = cli("free", ident, "--json")
    assert as_json.exit_code == 0
    (item,) = as_json.json()  # always an array, one id or several
    assert item["changed"] is False and item["error"] is None
    assert item["status"] == "FREED"


def test_free_unknown_id_exits_1(cli, limited: None) -> None:
    new_id(cli)
    run = cli("free", "test-00000000")
    assert run.exit_code == 1
    assert "test-00000000" in run.stderr


def test_free_needs_an_id_or_expired(cli, limited: None) -> None:
    assert cli("free").exit_code == 2
    assert cli("free", "test-1", "--expired").exit_code == 2


def test_free_releases_capacity(cli, write_config: Callable[[str], Path]) -> None:
    write_config(LIMIT_1)
    ident = new_id(cli)
    assert cli(*ALLOC).exit_code == 75
    assert cli("free", ident).exit_code == 0
    assert cli(*ALLOC).exit_code == 0


def test_free_expired_frees_only_expired_ones(cli, limited: None) -> None:
    short = new_id(cli, *ALLOC, "--lifetime", "1s")
    long = new_id(cli, *ALLOC, "--lifetime", "1h")
    forever = new_id(cli)
    expires = cli("status", short, "--json").json()["expires"]
    due = datetime.strptime(expires, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    wait_for(lambda: datetime.now(UTC) > due, "the short lifetime to pass", timeout=30)
    time.sleep(0.2)

    run = cli("free", "--expired")
    assert run.exit_code == 0, run
    assert short in run.stderr
    assert long not in run.stderr and forever not in run.stderr
    assert rows(cli, "--all") == {short: "FREED", long: "ALLOCATED", forever: "ALLOCATED"}
    again = cli("free", "--expired", "--json")
    assert again.exit_code == 0
    assert again.json() == []


def test_past_its_lifetime_an_allocation_is_expired_and_holds_nothing(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(LIMIT_1)
    short = new_id(cli, *ALLOC, "--lifetime", "1s")
    assert cli(*ALLOC).exit_code == 75
    expires = cli("status", short, "--json").json()["expires"]
    due = datetime.strptime(expires, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    wait_for(lambda: datetime.now(UTC) > due, "the lifetime", timeout=30)
    after = new_id(cli)  # the next command marks it EXPIRED: its capacity is free
    assert rows(cli) == {short: "EXPIRED", after: "ALLOCATED"}
    assert rows(cli, "--status", "expired") == {short: "EXPIRED"}
    shown = cli("status", short, "--json").json()
    assert shown["status"] == "EXPIRED" and shown["note"].startswith("expired at ")
    assert cli("free", short).exit_code == 0
    assert rows(cli, "--all") == {short: "FREED", after: "ALLOCATED"}


def test_free_expired_that_fails_exits_1_and_keeps_it(cli, limited: None) -> None:
    stuck = new_id(cli, *ALLOC, "--lifetime", "1s", "-o", "fail_deallocate=255")
    expires = cli("status", stuck, "--json").json()["expires"]
    due = datetime.strptime(expires, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    wait_for(lambda: datetime.now(UTC) > due, "the lifetime to pass", timeout=30)
    time.sleep(0.2)
    run = cli("free", "--expired", "--json")
    assert run.exit_code == 1
    # The failure keeps the row's real status, and says why with its exit code.
    (item,) = run.json()
    assert (item["id"], item["status"], item["changed"]) == (stuck, "EXPIRED", False)
    assert item["error"]["exit_code"] == 1 and item["error"]["message"] in run.stderr
    # Past its lifetime it holds nothing (EXPIRED), but is still there to be freed.
    assert rows(cli) == {stuck: "EXPIRED"}


def test_status_lists_live_and_all(cli, limited: None) -> None:
    kept = new_id(cli)
    gone = new_id(cli)
    cli("free", gone)
    listing = cli("status")
    assert listing.exit_code == 0
    assert kept in listing.stdout
    assert gone not in listing.stdout
    everything = cli("status", "--all")
    assert kept in everything.stdout and gone in everything.stdout
    assert "FREED" in everything.stdout
    assert rows(cli) == {kept: "ALLOCATED"}
    assert rows(cli, "--all") == {kept: "ALLOCATED", gone: "FREED"}


def test_status_of_unknown_id_exits_1(cli, limited: None) -> None:
    run = cli("status", "test-ffffffff")
    assert run.exit_code == 1
    assert "test-ffffffff" in run.stderr


def test_json_output_is_only_json_on_stdout(cli, limited: None) -> None:
    allocated = cli(*ALLOC, "--json")
    ident = allocated.json()["id"]
    outputs = [
        allocated,
        cli(*ALLOC, "--dry-run", "--json"),
        cli("status", "--json"),
        cli("status", "--all", "--json"),
        cli("status", ident, "--json"),
        cli("task", ident, "snapshot"),
        cli("free", ident, "--json"),
        cli("free", ident, "--json"),  # already freed
        cli("free", "--expired", "--json"),
        cli("drivers", "--json"),
    ]
    for run in outputs:
        assert run.exit_code == 0, run
        json.loads(run.stdout)  # the whole of stdout is one JSON document


def test_json_output_of_a_real_process(shoal_proc, write_config) -> None:
    write_config(LIMIT_3)
    done = shoal_proc(*ALLOC, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ALLOCATED"
    listed = shoal_proc("status", "--json")
    assert [r["status"] for r in json.loads(listed.stdout)] == ["ALLOCATED"]


def test_password_never_appears_in_output(cli, limited: None, tmp_path: Path) -> None:
    password, key = "pw-Zq8xV3-do-not-print", "key-material-Kf92-do-not-print"
    definition = {
        "driver": "test",
        "resources": {"cpu": 1, "ram": 1},
        "authentication": {"username": "svc", "password": password, "key": key, "port": 22},
    }
    path = tmp_path / "secret.json"
    path.write_text(json.dumps(definition))
    allocated = cli("alloc", str(path))
    ident = allocated.stdout.strip()
    runs = [
        allocated,
        cli("alloc", str(path), "--json"),
        cli("alloc", str(path), "--dry-run"),
        cli("alloc", str(path), "--dry-run", "--json"),
        cli("alloc", str(path), "-o", "fail_allocate=255"),
        cli("alloc", "-", input=json.dumps(definition)),
        cli("status"),
        cli("status", "--json"),
        cli("status", "--all", "--json"),
        cli("status", ident),
        cli("status", ident, "--json"),
        cli("task", ident, "snapshot"),
        cli("free", ident, "--json"),
        cli("status", ident, "--json"),
    ]
    assert allocated.exit_code == 0
    assert cli("status", ident, "--json").json()["status"] == "FREED"
    for run in runs:
        assert password not in run.stdout + run.stderr, run
        assert key not in run.stdout + run.stderr, run


def test_mistyped_password_is_not_echoed(cli, limited: None, tmp_path: Path) -> None:
    path = tmp_path / "secret.yaml"
    path.write_text(
        "driver: test\nresources: {cpu: 1, ram: 1}\n"
        "authentication: {username: svc, password: 918273645546372819}\n"
    )
    run = cli("alloc", str(path))
    assert run.exit_code == 2
    assert "authentication.password" in run.stderr
    assert "918273645546372819" not in run.stdout + run.stderr


# -- real processes: races and signals -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "extra",
    [(), ("-o", "delay_available_capacity=0.5")],
    ids=["plain", "slow-capacity-check"],  # a slow check widens any check-then-write race
)
def test_concurrent_allocs_never_oversubscribe(
    cli, limited: None, home: Path, procs: list[subprocess.Popen[str]], extra: tuple[str, ...]
) -> None:
    racers = [spawn(home, procs, *ALLOC, *extra) for _ in range(8)]
    outputs = [p.communicate(timeout=120) for p in racers]
    results = [(p.returncode, out, err) for p, (out, err) in zip(racers, outputs, strict=True)]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 0, 0, 75, 75, 75, 75, 75], results
    for code, out, err in results:
        if code == 75:
            assert "no capacity" in err
            assert out == ""
    winners = {out.strip() for code, out, _ in results if code == 0}
    assert rows(cli) == dict.fromkeys(winners, "ALLOCATED")
    assert allocated_cpu(cli) == "3"


def start_stalled_alloc(
    cli, home: Path, procs: list[subprocess.Popen[str]]
) -> tuple[subprocess.Popen[str], str]:
    proc = spawn(home, procs, *ALLOC, "-o", "delay_allocate=30")

    def allocating() -> str | None:
        if proc.poll() is not None:
            pytest.fail(f"alloc ended early: {proc.communicate()}")
        return next((i for i, s in rows(cli).items() if s == "ALLOCATING"), None)

    ident = wait_for(allocating, "the row to be ALLOCATING")
    assert allocated_cpu(cli) == "1"  # the reservation holds while its owner lives
    return proc, ident


@pytest.mark.slow
def test_kill_9_mid_alloc_releases_the_reservation(
    cli, write_config: Callable[[str], Path], home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    write_config(LIMIT_1)
    proc, ident = start_stalled_alloc(cli, home, procs)
    assert cli(*ALLOC).exit_code == 75  # full while it runs

    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL

    assert allocated_cpu(cli) == "0"
    listing = cli("status")
    assert listing.exit_code == 0
    assert ident not in listing.stdout  # no longer held, so no longer listed
    assert ident in listing.stderr  # the cleanup is reported once
    assert rows(cli, "--all")[ident] == "FAILED"
    shown = cli("status", ident, "--json").json()
    assert "died" in shown["note"]
    assert new_id(cli).startswith("test-")


@pytest.mark.slow
def test_ctrl_c_mid_alloc_exits_130_and_holds_nothing(
    cli, write_config: Callable[[str], Path], home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    write_config(LIMIT_1)
    proc, ident = start_stalled_alloc(cli, home, procs)

    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert out == ""

    assert allocated_cpu(cli) == "0"
    assert rows(cli, "--all") == {ident: "FAILED"}
    assert cli("status", ident, "--json").json()["note"] == "interrupted"
    assert new_id(cli).startswith("test-")


@pytest.mark.slow
def test_ctrl_c_while_waiting_for_the_ledger_lock(
    cli, limited: None, home: Path, procs: list[subprocess.Popen[str]], ledger_backend: str
) -> None:
    new_id(cli)  # the ledger exists
    holding = _hold_the_lock(home) if ledger_backend == "sqlite" else _hold_the_team_lock()
    with holding as waiting:  # another shoal holds the ledger, for a long while
        proc = spawn(home, procs, *ALLOC)
        wait_for(lambda: waiting(proc.pid), "alloc to wait for the ledger's write lock")
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        # Ctrl-C is honoured while the lock is still held (it is held far longer than this).
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, err
        assert "interrupted" in err
        assert out == ""
    assert len(rows(cli)) == 1  # nothing was reserved


@contextlib.contextmanager
def _hold_the_lock(home: Path) -> Iterator[Callable[[int], bool]]:
    """Another shoal in a write of the SQLite file; a shoal is waiting once it has the file
    open and a moment has passed (SQLite's lock wait shows nowhere else)."""
    ledger = home / "state" / "ledger.sqlite"
    holder = sqlite3.connect(ledger, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")

    def waiting(pid: int) -> bool:
        fds = Path(f"/proc/{pid}/fd")
        try:
            if not any(os.path.realpath(fd) == str(ledger) for fd in fds.iterdir()):
                return False
        except OSError:
            return False
        time.sleep(0.5)  # on to the write lock, which it cannot get
        return True

    try:
        yield waiting
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@contextlib.contextmanager
def _hold_the_team_lock() -> Iterator[Callable[[int], bool]]:
    """Another machine's shoal in a write of the team ledger (its advisory write lock); a
    shoal is waiting once the server shows a session of it blocked on that lock."""
    import psycopg

    from drivers.ledger import pg
    from tests.conftest import LEDGER_ENV

    holder = psycopg.connect(LEDGER_ENV["SHOAL_LEDGER_URL"], autocommit=True)
    holder.execute("BEGIN")
    holder.execute("SELECT pg_advisory_xact_lock(%s, %s)", (pg.LOCK_SPACE, pg.WRITE_LOCK))
    watcher = psycopg.connect(LEDGER_ENV["SHOAL_LEDGER_URL"], autocommit=True)

    def waiting(pid: int) -> bool:
        row = watcher.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
        ).fetchone()
        return bool(row and row[0])

    try:
        yield waiting
    finally:
        watcher.close()
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.sqlite_only
def test_the_ledger_is_private_to_its_owner(cli, home: Path) -> None:
    assert cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1").exit_code == 0
    ledger = home / "state" / "ledger.sqlite"
    assert stat.S_IMODE(ledger.stat().st_mode) == 0o600  # definitions may hold credentials


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (("--cpu", "99999999999999999999", "--ram", "1"), "resources.cpu"),
        (("--cpu", "1", "--ram", "1", "--lifetime", "99999999h"), "resources.lifetime"),
        (("--cpu", "1", "--ram", "1", "--lifetime", "9" * 400 + "d"), "resources.lifetime"),
    ],
)
def test_absurd_sizes_are_usage_errors(cli, args: tuple[str, ...], named: str) -> None:
    run = cli("alloc", "--driver", "test", *args, env={"SHOAL_DEBUG": ""})
    assert run.exit_code == 2, run.stderr
    assert named in run.stderr and "unexpected" not in run.stderr


def test_a_bad_credential_value_is_not_echoed(cli) -> None:
    definition = '{"driver": "test", "resources": {"cpu": 1, "ram": 1},'
    definition += ' "authentication": {"username": "ci", "port": "hunter2"}}'
    run = cli("alloc", "-", input=definition)
    assert run.exit_code == 2
    assert "authentication.port" in run.stderr
    assert "hunter2" not in run.stderr + run.stdout


def test_bad_metadata_names_are_refused_before_anything_is_reserved(cli) -> None:
    run = cli(
        "alloc",
        "--driver",
        "process",
        "--cpu",
        "1",
        "--ram",
        "1",
        "-o",
        "entry=sleep 1",
        "--meta",
        "not-a-name=1",
    )
    assert run.exit_code == 2
    assert "not-a-name" in run.stderr
    assert cli("status", "--all", "--json").json() == []


def test_an_entry_that_parses_as_json_says_how_to_quote_it(cli) -> None:
    run = cli("alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "-o", "entry=true")
    assert run.exit_code == 2
    assert "options.entry" in run.stderr and "entry=" in run.stderr
