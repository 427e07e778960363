"""The `process` driver: real workloads, pinned, limited, found again and stopped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.process.driver import ProcessDriver
from drivers.spec.types import STATUS_ALLOCATED, STATUS_NONE, Resource, Resources
from providers.core.settings import Settings
from providers.core.wire import to_wire
from tests.conftest import wait_for

pytestmark = pytest.mark.usefixtures("reap_workloads", "ledger_backend")

CONFIG = '[drivers."process/default"]\ncpu_limit = 2\nram_limit = 8\ngrace_seconds = 5\n'

# Writes what it sees of its own limits into its cwd, then idles.
PROBE = """
import os, resource, time
from pathlib import Path

status = Path('/proc/self/status').read_text()
cpus = next(line.split(':', 1)[1].strip() for line in status.splitlines()
            if line.startswith('Cpus_allowed_list'))
soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
facts = {
    'cpus': cpus,
    'rlimit_data': [soft, hard],
    'greeting': os.environ.get('GREETING'),
    'alloc_id': os.environ.get('SHOAL_ALLOCATION_ID'),
    'workspace_env': os.environ.get('SHOAL_WORKSPACE'),
    'cwd': os.getcwd(),
    'pid': os.getpid(),
}
Path('facts.tmp').write_text(__import__('json').dumps(facts))
os.replace('facts.tmp', 'facts.json')
time.sleep(600)
"""


def proc_state(pid: int) -> str | None:
    """The kernel's state letter for `pid`, None when no such process exists."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()[0]


def running(pid: int) -> bool:
    return proc_state(pid) not in (None, "Z", "X")


def reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def cpu_count(cpu_list: str) -> int:
    total = 0
    for part in cpu_list.split(","):
        lo, _, hi = part.partition("-")
        total += int(hi or lo) - int(lo) + 1
    return total


@pytest.fixture
def configured(write_config: Callable[[str], Path]) -> None:
    write_config(CONFIG)


@pytest.fixture
def spawned() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Process groups a test starts itself; killed and reaped whatever happens."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


def stranger_group(
    tmp_path: Path, spawned: list[subprocess.Popen[bytes]], marker: str = "process-other"
) -> tuple[int, int]:
    """An unrelated process group (leader and child), as a reused pid would belong to."""
    child_file = tmp_path / f"stranger-child-{len(spawned)}"
    leader = subprocess.Popen(
        ["sh", "-c", f"sleep 600 & echo $! > {child_file}; wait"],
        start_new_session=True,
        env={**os.environ, "SHOAL_ALLOCATION_ID": marker},
    )
    spawned.append(leader)
    wait_for(lambda: child_file.exists() and child_file.read_text().strip(), "the stranger")
    child = int(child_file.read_text())
    assert os.getpgid(child) == leader.pid
    return leader.pid, child


def write_definition(tmp_path: Path, entry: Any, cpu: int = 1, ram: int = 1, **opts: Any) -> str:
    path = tmp_path / f"def-{time.monotonic_ns()}.json"
    path.write_text(
        json.dumps(
            {
                "driver": "process",
                "resources": {"cpu": cpu, "ram": ram},
                "options": {"entry": entry, **opts},
            }
        )
    )
    return str(path)


def start(cli, tmp_path: Path, entry: Any, *extra: str, cpu: int = 1, **opts: Any) -> dict:
    run = cli("alloc", write_definition(tmp_path, entry, cpu=cpu, **opts), "--json", *extra)
    assert run.exit_code == 0, run
    return run.json()


def workspaces(home: Path) -> list[Path]:
    root = home / "state" / "workspaces" / "process" / "default"
    return sorted(root.iterdir()) if root.exists() else []


# -- a real workload -------------------------------------------------------------------------


@pytest.mark.parametrize("cpu", [1, 2])
def test_workload_is_pinned_limited_and_given_its_metadata(
    cli, configured: None, tmp_path: Path, cpu: int
) -> None:
    if len(os.sched_getaffinity(0)) < cpu:
        pytest.skip(f"needs {cpu} usable CPUs")
    allocated = start(
        cli, tmp_path, [sys.executable, "-c", PROBE], "--meta", "GREETING=hi there", cpu=cpu
    )
    ident = allocated["id"]
    assert allocated["status"] == "ALLOCATED"

    shown = cli("status", ident, "--json")
    assert shown.exit_code == 0, shown
    meta = shown.json()["resource"]["metadata"]
    workspace = Path(meta["workspace"])
    wait_for((workspace / "facts.json").exists, "the workload to report")
    facts = json.loads((workspace / "facts.json").read_text())

    assert cpu_count(facts["cpus"]) == cpu
    assert facts["rlimit_data"] == [2**30, 2**30]  # ram = 1 GiB
    assert facts["greeting"] == "hi there"
    assert facts["alloc_id"] == ident
    assert Path(facts["workspace_env"]) == workspace
    assert Path(facts["cwd"]).resolve() == workspace.resolve()
    pid = meta["pid"]
    assert facts["pid"] == pid
    assert os.getsid(pid) == pid  # a session (and process group) of its own
    assert os.getpgid(pid) == pid
    assert shown.json()["status"] == "ALLOCATED"
    assert shown.json()["driver_status"] == "ALLOCATED"

    freed = cli("free", ident)
    assert freed.exit_code == 0, freed
    reap(pid)
    assert not running(pid)
    assert not workspace.exists()


def test_two_workloads_get_different_cpus(cli, configured: None, tmp_path: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 usable CPUs")
    first = start(cli, tmp_path, "sleep 600")
    second = start(cli, tmp_path, "sleep 600")
    cpus = [
        cli("status", a["id"], "--json").json()["resource"]["metadata"]["cpus"]
        for a in (first, second)
    ]
    assert len(cpus[0]) == len(cpus[1]) == 1
    assert cpus[0] != cpus[1]


def test_workload_cannot_use_more_than_its_ram(cli, configured: None, tmp_path: Path) -> None:
    hog = "data = bytearray(2 * 2**30); print('got it', flush=True)"
    allocated = start(cli, tmp_path, [sys.executable, "-c", hog])
    meta = allocated["resource"]["metadata"]
    log = Path(meta["log"])
    assert log.parent == Path(meta["workspace"])
    wait_for(lambda: not running(meta["pid"]), "the hog to exit")
    reap(meta["pid"])
    text = log.read_text()
    assert "MemoryError" in text
    assert "got it" not in text


def test_a_workload_within_its_ram_runs(cli, configured: None, tmp_path: Path) -> None:
    fine = "data = bytearray(256 * 2**20); print('got it', flush=True)"
    allocated = start(cli, tmp_path, [sys.executable, "-c", fine])
    log = Path(allocated["resource"]["metadata"]["log"])
    wait_for(lambda: "got it" in log.read_text(), "the workload's output")
    assert "MemoryError" not in log.read_text()


def test_workload_killed_with_its_supervisor_reads_exited_with_the_code_unknown(
    cli, configured: None, tmp_path: Path
) -> None:
    """Killed with its supervisor, so nobody recorded how it ended (killed alone, its
    supervisor records EXITED: tests/drivers/test_process_ends.py). It ended, and its
    output is there: EXITED with the exit code unknown, not GONE with a drift."""
    allocated = start(cli, tmp_path, "sleep 600")
    ident, pid = allocated["id"], allocated["resource"]["metadata"]["pid"]
    assert cli("status", ident, "--json").json()["status"] == "ALLOCATED"

    supervisor = allocated["resource"]["metadata"]["supervisor"]["pid"]
    os.kill(supervisor, signal.SIGKILL)
    wait_for(lambda: proc_state(supervisor) in (None, "Z"), "the supervisor to die")
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: proc_state(pid) in (None, "Z"), "the workload to die")

    run = cli("status", ident)
    assert run.exit_code == 0
    assert "drift" not in run.stderr and "GONE" not in run.stdout
    shown = cli("status", ident, "--json").json()
    assert shown["status"] == "EXITED" and shown["drift"] is None
    assert shown["driver_status"] == "NONE"
    assert "exit code unknown (it ended with no supervisor to record how)" in shown["note"]
    assert {r["id"]: r["status"] for r in cli("status", "--json").json()} == {ident: "EXITED"}
    # It holds nothing: the whole of cpu_limit = 2 fits again.
    fits = cli("alloc", "--driver", "process", "--cpu", "2", "--ram", "1", "-o", "entry=sleep 1",
               "--dry-run")  # fmt: skip
    assert fits.stdout == "1\n", fits.stderr
    # Freeing what is already gone cleans up and succeeds.
    assert cli("free", ident).exit_code == 0
    assert not Path(allocated["resource"]["metadata"]["workspace"]).exists()


def test_free_kills_a_workload_that_ignores_sigterm(
    cli, configured: None, tmp_path: Path, home: Path
) -> None:
    stubborn = "trap '' TERM; touch ready; exec sleep 600"
    allocated = start(cli, tmp_path, ["sh", "-c", stubborn], grace_seconds=0.5)
    ident = allocated["id"]
    meta = allocated["resource"]["metadata"]
    pid, workspace = meta["pid"], Path(meta["workspace"])
    assert meta["grace_seconds"] == 0.5
    wait_for(lambda: (workspace / "ready").exists(), "the trap to be set")
    # It really ignores SIGTERM: only SIGKILL can end it.
    os.killpg(pid, signal.SIGTERM)
    time.sleep(0.3)
    assert running(pid)

    run = cli("free", ident)
    assert run.exit_code == 0, run
    reap(pid)
    assert not running(pid)
    assert not workspace.exists()
    assert workspaces(home) == []
    assert {r["id"]: r["status"] for r in cli("status", "--all", "--json").json()} == {
        ident: "FREED"
    }


def test_free_stops_the_whole_process_group(cli, configured: None, tmp_path: Path) -> None:
    family = "sleep 600 & echo $! > child; wait"
    allocated = start(cli, tmp_path, ["sh", "-c", family], grace_seconds=0.5)
    workspace = Path(allocated["resource"]["metadata"]["workspace"])
    child_file = workspace / "child"
    wait_for(lambda: child_file.exists() and child_file.read_text().strip(), "the child pid")
    child = int(child_file.read_text())
    assert running(child)
    assert cli("free", allocated["id"]).exit_code == 0
    wait_for(lambda: not running(child), "the child to be stopped", timeout=10)


def test_free_stops_children_an_exited_leader_left_behind(
    cli, configured: None, tmp_path: Path
) -> None:
    orphaning = "sleep 600 & echo $! > child.tmp; mv child.tmp child"  # then sh exits
    allocated = start(cli, tmp_path, ["sh", "-c", orphaning], grace_seconds=0.5)
    meta = allocated["resource"]["metadata"]
    child_file = Path(meta["workspace"]) / "child"
    wait_for(child_file.exists, "the child pid")
    child = int(child_file.read_text())
    try:
        wait_for(lambda: not running(meta["pid"]), "the leader to exit")
        reap(meta["pid"])
        assert running(child)
        assert os.getpgid(child) == meta["pid"]
        # The children still work for the allocation: it is held, not gone.
        shown = cli("status", allocated["id"], "--json").json()
        assert (shown["status"], shown["driver_status"], shown["drift"]) == (
            "ALLOCATED",
            "ALLOCATED",
            None,
        )
        run = cli("free", allocated["id"])
        assert run.exit_code == 0, run
        wait_for(lambda: not running(child), "the left-behind child to be stopped", timeout=15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


# -- pid reuse -------------------------------------------------------------------------------


def make_driver(home: Path) -> ProcessDriver:
    settings = Settings.from_env({"SHOAL_HOME": str(home)})
    driver = ProcessDriver("process/default", settings)
    driver.prepare(b'{"cpu_limit": 2, "ram_limit": 8, "grace_seconds": 0.2}')
    return driver


def test_pid_reuse_is_not_mistaken_for_the_workload(
    home: Path, tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    leader, child = stranger_group(tmp_path, spawned)
    driver = make_driver(home)
    res = Resource(
        identifier="process-reused",
        metadata={"pid": leader, "start": "1", "grace_seconds": 0.2},
    )
    assert driver.status(res) == STATUS_NONE
    driver.deallocate(res)
    time.sleep(0.5)
    assert running(leader) and running(child)
    # The same pid with its real start time is ours: control that the check above can fail.
    stat = Path(f"/proc/{leader}/stat").read_text()
    own = Resource(
        identifier="process-own",
        metadata={"pid": leader, "start": stat.rsplit(")", 1)[1].split()[19]},
    )
    assert driver.status(own) == STATUS_ALLOCATED


def test_leftovers_of_a_reused_group_are_not_ours(
    home: Path, tmp_path: Path, spawned: list[subprocess.Popen[bytes]]
) -> None:
    # The group's leader is gone and its number taken by a stranger's group, whose members
    # carry another allocation's id: freeing ours must not touch them.
    leader, child = stranger_group(tmp_path, spawned, marker="process-other")
    os.kill(leader, signal.SIGKILL)
    spawned[0].wait(timeout=10)
    assert running(child)
    driver = make_driver(home)
    res = Resource(identifier="process-mine", metadata={"pid": leader, "start": "1"})
    driver.deallocate(res)
    time.sleep(0.5)
    assert running(child)


def test_pid_reuse_through_the_ledger_and_cli(
    cli,
    configured: None,
    home: Path,
    tmp_path: Path,
    spawned: list[subprocess.Popen[bytes]],
    make_ledger: Callable[..., Ledger],
) -> None:
    leader, child = stranger_group(tmp_path, spawned)
    (home / "state").mkdir(exist_ok=True)
    book = make_ledger(home / "state" / "ledger.sqlite")
    try:
        ident = book.reserve(
            driver="process/default",
            definition={"driver": "process/default", "resources": {"cpu": 1, "ram": 1}},
            resources=Resources(cpu=1, ram=1),
            metadata={},
            is_remote=False,
            expires=None,
            fits=lambda usage: 1,
        )
        state = Resource(
            identifier=ident,
            metadata={"pid": leader, "start": "1", "grace_seconds": 0.2},
        )
        book.set_status(ident, L.ALLOCATED, state=to_wire(state))
    finally:
        book.close()

    shown = cli("status", ident, "--json").json()
    assert shown["status"] == "GONE"
    assert shown["drift"] is not None
    run = cli("free", ident)
    assert run.exit_code == 0, run
    time.sleep(0.5)
    assert running(leader) and running(child)


# -- bad entries -----------------------------------------------------------------------------


def test_entry_is_required(cli, configured: None, home: Path) -> None:
    run = cli("alloc", "--driver", "process", "--cpu", "1", "--ram", "1")
    assert run.exit_code == 2
    assert "options.entry" in run.stderr
    assert cli("status", "--all", "--json").json() == []
    assert workspaces(home) == []


def test_entry_binary_not_found(cli, configured: None, home: Path) -> None:
    run = cli(
        "alloc",
        "--driver",
        "process",
        "--cpu",
        "1",
        "--ram",
        "1",
        "-o",
        "entry=/nonexistent/shoal-no-such-binary --flag",
    )
    assert run.exit_code == 2
    assert "/nonexistent/shoal-no-such-binary" in run.stderr
    assert workspaces(home) == []
    rows = cli("status", "--all", "--json").json()
    assert [r["status"] for r in rows] == ["FAILED"]
    assert cli("status", "--json").json() == []


def test_bad_env_option_is_a_usage_error(cli, configured: None, tmp_path: Path, home: Path) -> None:
    path = write_definition(tmp_path, "sleep 1", env={"not a name": "x"})
    run = cli("alloc", path)
    assert run.exit_code == 2
    assert "options.env" in run.stderr
    assert workspaces(home) == []


def test_free_stops_a_child_that_left_the_session(cli, configured: None, tmp_path: Path) -> None:
    escaping = "setsid sleep 601 & echo $! > child.tmp; mv child.tmp child; exec sleep 602"
    allocated = start(cli, tmp_path, ["sh", "-c", escaping], grace_seconds=0.5)
    child_file = Path(allocated["resource"]["metadata"]["workspace"]) / "child"
    wait_for(child_file.exists, "the child pid")
    child = int(child_file.read_text())
    try:
        wait_for(lambda: os.getsid(child) == child, "the child's own session")
        run = cli("free", allocated["id"])
        assert run.exit_code == 0, run
        wait_for(lambda: not running(child), "the escaped child to be stopped", timeout=15)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)
