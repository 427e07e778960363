"""A `free` that does not finish (killed with SIGKILL, interrupted by Ctrl-C) after the
workload's supervisor has ended the workload: the row went back to ALLOCATED, holding capacity
that nothing used, and every alloc was refused (75) until someone ran `status ID` or `free`.
The supervisor now says, in the FREEING row's note, that the workload ended; a free that dies
or is interrupted leaves the row as that end (EXITED), and a free of an EXITED row killed
mid-way leaves it EXITED (it came back ALLOCATED). Real processes and a real ledger."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.spec.types import Resources
from tests.conftest import REPO, shoal_env, spawn, wait_for

CONFIG = '[drivers."process/default"]\ncpu_limit = 1\nram_limit = 4\ngrace_seconds = 2\n'


@pytest.fixture
def configured(write_config: Callable[[str], Path], reap_workloads: None) -> None:
    write_config(CONFIG)


def ledger_path(home: Path) -> Path:
    return home / "state" / "ledger.sqlite"


def row(home: Path, alloc_id: str) -> L.Allocation:
    ledger = Ledger(ledger_path(home))
    try:
        return ledger.get(alloc_id)
    finally:
        ledger.close()


def alloc(cli: Callable[..., Any], entry: str) -> dict[str, Any]:
    run = cli(
        "alloc", "-d", "process", "--cpu", "1", "--ram", "1", "-o", f"entry={entry}", "--json"
    )
    assert run.exit_code == 0, run
    return dict(run.json())


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in ("Z", "X")


def assert_capacity_back(cli: Callable[..., Any], home: Path, ended: str) -> None:
    """The ended workload's row holds nothing: another of capacity one fits at once (its
    clean-up puts a dead free's row back first), and the row says how it ended."""
    run = cli("alloc", "-d", "process", "--cpu", "1", "--ram", "1", "-o", "entry=sleep 30")
    assert run.exit_code == 0, run
    assert row(home, ended).status == L.EXITED, row(home, ended)
    assert cli("free", run.stdout.strip()).exit_code == 0


def test_free_killed_while_the_supervisor_ends_the_workload(
    cli: Callable[..., Any],
    configured: None,
    home: Path,
    procs: list[subprocess.Popen[str]],
) -> None:
    """kill -9 of `shoal free` in its workload's SIGTERM grace: the supervisor still ends the
    workload (it was asked), and the row must not come back ALLOCATED."""
    allocated = alloc(cli, "sh -c 'trap \"touch got-term\" TERM; while :; do sleep 0.1; done'")
    ident, meta = allocated["id"], allocated["resource"]["metadata"]
    workspace, supervisor = Path(meta["workspace"]), meta["supervisor"]["pid"]
    freeing = spawn(home, procs, "free", ident)
    # The supervisor has passed the SIGTERM on: the free's own work is under way.
    wait_for(lambda: (workspace / "got-term").exists(), "the workload to get SIGTERM")
    assert row(home, ident).status == L.FREEING
    freeing.kill()
    freeing.wait(30)
    wait_for(lambda: not alive(supervisor), "the supervisor to end the workload (grace, SIGKILL)")
    assert_capacity_back(cli, home, ident)
    assert cli("free", ident).exit_code == 0
    assert row(home, ident).status == L.FREED


def test_free_of_an_exited_row_killed_midway_leaves_it_exited(
    cli: Callable[..., Any], configured: None, home: Path
) -> None:
    """The sweep put a dead free's FREEING row back as its note said, but EXITED was not
    among the statuses it restores: the row became ALLOCATED and held the capacity."""
    ident = alloc(cli, "sh -c 'exit 4'")["id"]
    wait_for(lambda: row(home, ident).status == L.EXITED, "EXITED")
    # A `free` that took the row and died at once (kill -9): a real process owns the row.
    code = (
        "import sys, time; from pathlib import Path; from drivers.ledger.book import Ledger; "
        "from drivers.ledger import book as L; "
        f"ledger = Ledger(Path({str(ledger_path(home))!r})); "
        f"assert ledger.set_status({ident!r}, L.FREEING, expect=(L.EXITED,), owner=True, "
        "note=L.FREEING_FROM + L.EXITED); "
        "print('taken', flush=True); time.sleep(600)"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", code],
        cwd=REPO,
        env=shoal_env(home),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "taken"
    finally:
        owner.kill()
        owner.wait(30)
    assert row(home, ident).status == L.FREEING
    listed = {r["id"]: r["status"] for r in cli("status", "--json").json()}
    assert listed[ident] == L.EXITED
    assert_capacity_back(cli, home, ident)


MANY_FILES = (
    "sh -c 'mkdir d && cd d && seq 1 30000 | xargs touch && cd .. && touch ready && exec sleep 600'"
)


def test_free_interrupted_after_the_workload_ended(
    cli: Callable[..., Any],
    configured: None,
    home: Path,
    procs: list[subprocess.Popen[str]],
) -> None:
    """Ctrl-C while `free` removes what the workload left (its supervisor has ended it and
    gone): the free is undone, but the row must say the workload ended, not ALLOCATED. A
    workspace of many files gives the free a long moment between the two."""
    hit = False
    for _ in range(3):  # the moment is a few hundred ms wide: catch it once
        allocated = alloc(cli, MANY_FILES)
        ident, meta = allocated["id"], allocated["resource"]["metadata"]
        workspace, supervisor = Path(meta["workspace"]), meta["supervisor"]["pid"]
        ready = workspace / "ready"
        wait_for(ready.exists, "the workload's files", timeout=120)
        freeing = spawn(home, procs, "free", ident)
        deadline = time.monotonic() + 60
        while alive(supervisor) and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(freeing.pid, signal.SIGINT)
        _, err = freeing.communicate(timeout=60)
        if freeing.returncode == 0:  # it had finished already: nothing to check
            assert row(home, ident).status == L.FREED
            continue
        hit = True
        assert freeing.returncode == 130, err
        assert row(home, ident).status == L.EXITED, row(home, ident)
        assert_capacity_back(cli, home, ident)
        assert cli("free", ident).exit_code == 0
        break
    assert hit, "Ctrl-C never came while the free was removing the workspace"


def test_the_supervisor_marks_a_row_being_freed_as_ended(tmp_path: Path) -> None:
    """The piece: record_end on a FREEING row leaves its status to its free and changes only
    what the row goes back to; that FREEING row then holds nothing."""
    from drivers.supervisor import supervise

    ledger = Ledger(tmp_path / "ledger.sqlite")
    try:
        alloc_id = ledger.reserve(
            driver="process", definition={"driver": "process"}, resources=Resources(cpu=1, ram=1),
            metadata={}, is_remote=False, expires=None, fits=lambda usage: 1,
        )  # fmt: skip
        assert ledger.set_status(alloc_id, L.ALLOCATED, state={"metadata": {}})
        assert ledger.set_status(alloc_id, L.FREEING, note=L.FREEING_FROM + L.ALLOCATED, owner=True)
        assert ledger.node_usage().cpu == 1
        spec = {"ledger": str(ledger.path), "allocation": alloc_id}
        assert not supervise.record_end(spec, L.EXITED, {"exit_code": 0, "reason": "stopped"})
        found = ledger.get(alloc_id)
        assert (found.status, found.note) == (L.FREEING, L.FREEING_FROM + L.EXITED)
        assert ledger.node_usage() == Resources()
        # An interrupted free puts back what is true now.
        assert ledger.undo_free(alloc_id, L.ALLOCATED, None)
        assert ledger.get(alloc_id).status == L.EXITED
    finally:
        ledger.close()


def test_an_interrupted_free_of_a_live_workload_goes_back_to_allocated(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    try:
        alloc_id = ledger.reserve(
            driver="process", definition={"driver": "process"}, resources=Resources(cpu=1, ram=1),
            metadata={}, is_remote=False, expires=None, fits=lambda usage: 1,
        )  # fmt: skip
        assert ledger.set_status(alloc_id, L.ALLOCATED, state={"metadata": {}}, note="kept")
        assert ledger.set_status(alloc_id, L.FREEING, note=L.FREEING_FROM + L.ALLOCATED, owner=True)
        assert ledger.undo_free(alloc_id, L.ALLOCATED, "kept")
        found = ledger.get(alloc_id)
        assert (found.status, found.note, found.owner_pid) == (L.ALLOCATED, "kept", None)
        assert not ledger.undo_free(alloc_id, L.ALLOCATED, "kept")  # not FREEING: left alone
    finally:
        ledger.close()


def test_a_supervisor_stopped_while_its_row_is_allocating_does_not_wait_for_it(
    tmp_path: Path,
) -> None:
    """Ctrl-C of `alloc` just after the supervisor started (its answer came while Ctrl-C was
    held): the undo stops the supervisor and waits for it to exit, while the supervisor
    waited for the undoing shoal's ALLOCATING row to be recorded. Each waited for the other
    until the undo's patience ran out: the Ctrl-C answered after grace + 10 s (13 s measured
    with a grace of 3 s). Here this test is the alloc that holds the row ALLOCATING."""
    from drivers.process.spawn import supervise
    from drivers.process.stop import wait_gone
    from drivers.supervisor import procinfo

    ledger = Ledger(tmp_path / "ledger.sqlite")
    try:
        alloc_id = ledger.reserve(
            driver="process", definition={"driver": "process"}, resources=Resources(cpu=1, ram=1),
            metadata={}, is_remote=False, expires=None, fits=lambda usage: 1,
        )  # fmt: skip
        assert ledger.get(alloc_id).owner_pid == os.getpid()
        workspace = tmp_path / alloc_id
        workspace.mkdir()
        answer, (pid, started) = supervise(
            workspace,
            {
                "mode": "process", "workspace": str(workspace), "argv": ["sleep", "600"],
                "env": {"PATH": os.defpath, "SHOAL_ALLOCATION_ID": alloc_id},
                "marker": f"SHOAL_ALLOCATION_ID={alloc_id}", "deadline": None, "grace": 1,
                "ledger": str(ledger.path), "allocation": alloc_id,
            },
        )  # fmt: skip
        assert "pid" in answer, answer
        try:
            procinfo.signal_exactly(pid, started, signal.SIGTERM)  # what the undo's stop does
            assert wait_gone(pid, started, 60), "the supervisor waited for the undoing alloc"
        finally:
            procinfo.signal_exactly(pid, started, signal.SIGKILL)
            procinfo.signal_exactly(answer["pid"], answer.get("start"), signal.SIGKILL)
            wait_gone(pid, started, 10)
        assert ledger.get(alloc_id).status == L.ALLOCATING  # the alloc's undo records it
    finally:
        ledger.close()
