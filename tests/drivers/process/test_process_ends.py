"""A process workload that ends by itself gives its capacity back at once: its supervisor
records EXITED in the ledger and rings the waiters, with no shoal command asking."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.spec.types import Resources
from drivers.supervisor import supervise
from tests.conftest import HOST_ID, LEDGER_ENV, spawn, wait_for

pytestmark = pytest.mark.usefixtures("ledger_backend")

CONFIG = '[drivers."process/default"]\ncpu_limit = 2\nram_limit = 8\ngrace_seconds = 1\n'


@pytest.fixture
def configured(write_config: Callable[[str], Path], reap_workloads: None) -> None:
    write_config(CONFIG)


def ledger_of(home: Path) -> Ledger:
    if LEDGER_ENV:
        from drivers.ledger.pg import PgLedgerDb
        from drivers.ledger.url import LedgerUrl

        url = LedgerUrl(LEDGER_ENV["SHOAL_LEDGER_URL"], "SHOAL_LEDGER_URL")
        return Ledger(db=PgLedgerDb(url), host=HOST_ID)
    return Ledger(home / "state" / "ledger.sqlite")


def spec_of(ledger: Ledger, alloc_id: str) -> dict[str, Any]:
    """What the drivers hand a supervisor about its ledger (drivers.ledger.open)."""
    if ledger.team:
        return {
            "ledger_url": LEDGER_ENV["SHOAL_LEDGER_URL"],
            "ledger_host": HOST_ID,
            "ledger_env": {k: v for k, v in os.environ.items() if k.startswith("PG")},
            "allocation": alloc_id,
        }
    return {"ledger": str(ledger.path), "allocation": alloc_id}


def row_status(home: Path, alloc_id: str) -> str:
    ledger = ledger_of(home)
    try:
        return ledger.get(alloc_id).status
    finally:
        ledger.close()


def alloc(cli: Callable[..., Any], entry: str, cpu: int = 2, *extra: str) -> dict[str, Any]:
    run = cli(
        "alloc", "-d", "process", "--cpu", str(cpu), "--ram", "1", "-o", f"entry={entry}",
        "--json", *extra,
    )  # fmt: skip
    assert run.exit_code == 0, run
    return dict(run.json())


def allocatable_cpu(cli: Callable[..., Any]) -> float:
    items = cli("resources", "--json").json()
    stat = items[0]["overview"][0]["stat"]["onDemand"]
    return float(stat["allocatable"]["cpu"]["vcpu"])


def test_a_workload_that_exits_frees_its_capacity_with_no_status_call(
    cli: Callable[..., Any], configured: None, home: Path
) -> None:
    allocated = alloc(cli, "sh -c 'exit 3'")
    ident = allocated["id"]
    # Nobody asks the driver: the ledger itself says so.
    wait_for(lambda: row_status(home, ident) == L.EXITED, "the supervisor to record EXITED")
    ledger = ledger_of(home)
    try:
        row = ledger.get(ident)
        assert ledger.node_usage() == Resources()
    finally:
        ledger.close()
    assert row.note is not None and row.note.startswith("exited with code 3 at ")
    assert row.state is not None and row.state["metadata"]["outcome"]["exit_code"] == 3
    listed = {r["id"]: r["status"] for r in cli("status", "--json").json()}
    assert listed == {ident: "EXITED"}  # listed until freed: its output is still there
    # The whole capacity is back for the next one.
    again = alloc(cli, "sleep 60")
    assert cli("free", again["id"]).exit_code == 0
    shown = cli("status", ident, "--json")
    assert shown.exit_code == 0
    assert "drift" not in shown.stderr
    view = shown.json()
    assert view["status"] == "EXITED"
    assert view["detail"]["exit_code"] == 3
    assert cli("free", ident).exit_code == 0
    assert row_status(home, ident) == L.FREED


def test_a_workload_that_ends_before_it_is_recorded_still_turns_exited(
    cli: Callable[..., Any], configured: None, home: Path
) -> None:
    """`true` may end before shoal has recorded the allocation: its supervisor waits for
    the row to be ALLOCATED rather than leave it holding capacity forever."""
    ident = alloc(cli, "/bin/true")["id"]
    wait_for(lambda: row_status(home, ident) == L.EXITED, "EXITED")
    assert allocatable_cpu(cli) == 2


def test_a_waiter_gets_the_capacity_of_a_workload_that_ended(
    cli: Callable[..., Any],
    configured: None,
    home: Path,
    procs: list[subprocess.Popen[str]],
) -> None:
    """The failing case: `alloc --wait` timed out on an idle machine."""
    ident = alloc(cli, "sleep 2")["id"]
    waiter = spawn(
        home, procs, "alloc", "-d", "process", "--cpu", "2", "--ram", "1",
        "-o", "entry=sleep 60", "--wait", "--timeout", "60s", "--json",
    )  # fmt: skip
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err
    second = json.loads(out)["id"]
    assert row_status(home, ident) == L.EXITED
    assert row_status(home, second) == L.ALLOCATED
    assert cli("free", second).exit_code == 0


def test_a_plain_alloc_fits_once_the_previous_workload_ended(
    cli: Callable[..., Any], configured: None, home: Path
) -> None:
    ident = alloc(cli, "sleep 1")["id"]
    refused = cli("alloc", "-d", "process", "--cpu", "1", "--ram", "1", "-o", "entry=/bin/true")
    assert refused.exit_code == 75
    wait_for(lambda: row_status(home, ident) == L.EXITED, "EXITED", timeout=30)
    assert allocatable_cpu(cli) == 2
    run = cli("alloc", "-d", "process", "--cpu", "1", "--ram", "1", "-o", "entry=sleep 30")
    assert run.exit_code == 0, run


def _children_of(pid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                fields = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == str(pid) and fields[0] not in ("Z", "X"):
                found.append(int(name))
    return found


def test_a_child_with_a_fresh_environment_keeps_the_allocation(
    cli: Callable[..., Any], configured: None, home: Path
) -> None:
    """The entry exits leaving a child that cleared its environment (no marker finds it):
    the supervisor, its subreaper, is alive, so the allocation is too."""
    allocated = alloc(cli, "sh -c 'env -i sleep 7773 & exit 0'")
    ident, meta = allocated["id"], allocated["resource"]["metadata"]
    supervisor = meta["supervisor"]["pid"]
    wait_for(lambda: not Path(f"/proc/{meta['pid']}").exists() or _state(meta["pid"]) == "Z", "sh")
    wait_for(lambda: _children_of(supervisor), "the orphan to be the supervisor's")
    time.sleep(0.3)  # a moment in which a wrong answer would show
    shown = cli("status", ident, "--json")
    assert shown.json()["status"] == "ALLOCATED", shown
    assert shown.json()["driver_status"] == "ALLOCATED"
    assert row_status(home, ident) == L.ALLOCATED
    assert allocatable_cpu(cli) == 0
    orphans = _children_of(supervisor)
    assert cli("free", ident).exit_code == 0
    for pid in orphans:
        assert not Path(f"/proc/{pid}").exists() or _state(pid) == "Z"


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_killed_from_outside_is_an_end_recorded_at_once(
    cli: Callable[..., Any], configured: None, home: Path
) -> None:
    allocated = alloc(cli, "sleep 600")
    ident, pid = allocated["id"], allocated["resource"]["metadata"]["pid"]
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: row_status(home, ident) == L.EXITED, "EXITED")
    view = cli("status", ident, "--json").json()
    assert view["detail"]["signal"] == "SIGKILL"
    assert view["detail"]["exit_code"] == 137
    assert "signal SIGKILL" in (view["note"] or "")


def test_output_is_its_owners_alone(cli: Callable[..., Any], configured: None) -> None:
    meta = alloc(cli, "sh -c 'echo secret-ish; sleep 30'")["resource"]["metadata"]
    workspace, log = Path(meta["workspace"]), Path(meta["log"])
    wait_for(log.exists, "output.log")
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(workspace.stat().st_mode) == 0o700


# -- the supervisor's record, piece by piece ---------------------------------------------------


@pytest.fixture
def ledger(tmp_path: Path, make_ledger: Callable[..., Ledger]) -> Iterator[Ledger]:
    yield make_ledger(tmp_path / "ledger.sqlite")


def _allocated(ledger: Ledger) -> str:
    alloc_id = ledger.reserve(
        driver="process",
        definition={"driver": "process"},
        resources=Resources(cpu=2, ram=1),
        metadata={},
        is_remote=False,
        expires=None,
        fits=lambda usage: 1,
    )
    assert ledger.set_status(alloc_id, L.ALLOCATED, state={"metadata": {"pid": 1}})
    return alloc_id


def test_record_end_rings_the_first_waiter_of_each_driver(ledger: Ledger) -> None:
    alloc_id = _allocated(ledger)
    bell = ledger.open_bell()
    try:
        ledger.enqueue(
            driver="process", definition={}, resources=Resources(cpu=2, ram=1), life=None,
            is_remote=False, token=bell.token,
        )  # fmt: skip
        outcome = {"exit_code": 0, "signal": None, "ended": "2026-12-02T00:00:00.000000Z"}
        spec = spec_of(ledger, alloc_id)
        assert supervise.record_end(spec, L.EXITED, {**outcome, "reason": "exited"})
        assert bell.wait(10)  # at once when rung; a NOTIFY reaches the session a moment later
    finally:
        bell.close()
    row = ledger.get(alloc_id)
    assert row.status == L.EXITED
    assert row.note == "exited with code 0 at 2026-12-02T00:00:00.000000Z"
    assert row.state == {"metadata": {"pid": 1, "outcome": {**outcome, "reason": "exited"}}}


def test_record_end_leaves_a_row_that_is_being_freed(ledger: Ledger) -> None:
    alloc_id = _allocated(ledger)
    assert ledger.set_status(alloc_id, L.FREEING, note=L.FREEING_FROM + L.ALLOCATED, owner=True)
    spec = spec_of(ledger, alloc_id)
    assert not supervise.record_end(spec, L.EXITED, {"exit_code": 0, "reason": "stopped"})
    assert ledger.get(alloc_id).status == L.FREEING


@pytest.mark.sqlite_only
def test_record_end_never_creates_a_ledger(tmp_path: Path) -> None:
    missing = tmp_path / "none.sqlite"
    spec = {"ledger": str(missing), "allocation": "process-1"}
    assert not supervise.record_end(spec, L.EXITED, {"exit_code": 0})
    assert not missing.exists()


@pytest.mark.sqlite_only
def test_ring_never_writes_through_a_link_or_into_a_file(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_text("")
    link = tmp_path / "link"
    link.symlink_to(target)
    assert not supervise._ring(str(link))
    assert not supervise._ring(str(target))
    assert target.read_text() == ""


@pytest.mark.parametrize("before", [L.EXPIRED, L.EXITED, L.GONE])
def test_freeing_a_row_whose_workload_ended_holds_nothing(ledger: Ledger, before: str) -> None:
    """`free` of an EXPIRED row passed through FREEING, which counted as usage: a false
    "no capacity" meanwhile."""
    alloc_id = _allocated(ledger)
    assert ledger.set_status(alloc_id, before)
    assert ledger.set_status(alloc_id, L.FREEING, note=L.FREEING_FROM + before, owner=True)
    assert ledger.node_usage() == Resources()
    assert ledger.fit_window(lambda usage: 2 - usage.cpu // 1 if usage.cpu < 2 else 0).count >= 1


def test_freeing_a_live_row_still_holds_it(ledger: Ledger) -> None:
    alloc_id = _allocated(ledger)
    assert ledger.set_status(alloc_id, L.FREEING, note=L.FREEING_FROM + L.ALLOCATED, owner=True)
    assert ledger.node_usage().cpu == 2


@pytest.mark.sqlite_only
def test_the_supervisor_reads_its_spec_without_shoal(tmp_path: Path) -> None:
    """supervise.py runs as `python -I -S` by path: its ledger code must need nothing of
    shoal (a stray import would fail only there)."""
    code = (
        "import importlib.util as u; "
        f"s = u.spec_from_file_location('sv', {str(Path(supervise.__file__))!r}); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); "
        f"print(m.record_end({{'ledger': {str(tmp_path / 'l.sqlite')!r}, 'allocation': 'a'}}, "
        "'EXITED', {}))"
    )
    ran = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "False"


@pytest.mark.postgresql_only
def test_the_supervisor_records_on_a_team_ledger_without_shoal(ledger: Ledger) -> None:
    """As the drivers run it (`python -I -S`, no site-packages, no shoal): psycopg is found
    where the spec says, the credentials come over the spec, and the end is recorded."""
    import psycopg

    alloc_id = _allocated(ledger)
    spec = {
        **spec_of(ledger, alloc_id),
        "ledger_site": os.path.dirname(os.path.dirname(psycopg.__file__)),
    }
    code = (
        "import importlib.util as u, json, sys; "
        f"s = u.spec_from_file_location('sv', {str(Path(supervise.__file__))!r}); "
        "m = u.module_from_spec(s); s.loader.exec_module(m); "
        "print(m.record_end(json.loads(sys.stdin.read()), 'EXITED', {'exit_code': 3}))"
    )
    ran = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        env={"PATH": os.defpath},  # as start_detached gives it: nothing of ours
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "True"
    row = ledger.get(alloc_id)
    assert row.status == L.EXITED and "code 3" in (row.note or "")
