"""Lifetimes, outcomes and output of `process` workloads: real shoal processes, real
supervisors, real workloads. A lifetime ends with no shoal command running; the next command
shows EXPIRED; a killed supervisor leaves the workload to the next command; an ended
workload keeps its exit code and output until `free`; `shoal logs` prints and follows it."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shoal_argv, shoal_env, wait_for

pytestmark = pytest.mark.usefixtures("reap_workloads", "ledger_backend")

CONFIG = '[drivers."process/default"]\ncpu_limit = 1\nram_limit = 4\ngrace_seconds = 1\n'
Shoal = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def shoal(shoal_proc: Shoal, write_config: Callable[[str], Path]) -> Shoal:
    write_config(CONFIG)
    return shoal_proc


def alloc(shoal: Shoal, entry: str, *extra: str) -> dict[str, Any]:
    done = shoal(
        "alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "-o", f"entry={entry}",
        "--json", *extra,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def status(shoal: Shoal, alloc_id: str) -> dict[str, Any]:
    done = shoal("status", alloc_id, "--json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] not in ("Z", "X")


def due(shown: dict[str, Any]) -> datetime:
    return datetime.strptime(shown["expires"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


# -- lifetimes -------------------------------------------------------------------------------


def test_a_lifetime_ends_the_workload_with_no_shoal_running(shoal: Shoal) -> None:
    made = alloc(shoal, "sh -c 'echo started; exec sleep 600'", "--lifetime", "2s")
    meta = made["resource"]["metadata"]
    pid, supervisor = meta["pid"], meta["supervisor"]["pid"]
    assert running(pid) and running(supervisor)
    # Nothing of shoal runs now but the supervisor: it ends the workload at the expiry.
    wait_for(lambda: not running(pid), "the workload to be stopped at its expiry", timeout=30)
    assert datetime.now(UTC) >= due(made)
    wait_for(lambda: not running(supervisor), "the supervisor to finish", timeout=30)
    outcome = json.loads((Path(meta["workspace"]) / ".shoal-outcome.json").read_text())
    assert (outcome["reason"], outcome["signal"], outcome["exit_code"]) == (
        "expired",
        "SIGTERM",
        143,
    )

    listed = json.loads(shoal("status", "--json").stdout)
    assert [(r["id"], r["status"]) for r in listed] == [(made["id"], "EXPIRED")]
    shown = status(shoal, made["id"])
    assert (shown["status"], shown["driver_status"], shown["drift"]) == ("EXPIRED", "NONE", None)
    detail = shown["detail"]
    assert (detail["state"], detail["reason"], detail["exit_code"]) == ("exited", "expired", 143)
    assert (detail["log_tail"], detail["by"]) == ("started", "supervisor")
    table = shoal("status")
    row = next(line for line in table.stdout.splitlines() if made["id"] in line)
    assert "EXPIRED" in row and "expired" in row.split("EXPIRED", 1)[1]


def test_a_workload_that_ignores_sigterm_is_killed_after_the_grace(shoal: Shoal) -> None:
    made = alloc(shoal, "sh -c \"trap '' TERM; sleep 600; echo after\"", "--lifetime", "1s")
    meta = made["resource"]["metadata"]
    wait_for(lambda: not running(meta["pid"]), "SIGKILL after the grace", timeout=30)
    detail = status(shoal, made["id"])["detail"]
    assert (detail["signal"], detail["exit_code"], detail["reason"]) == ("SIGKILL", 137, "expired")


def test_what_the_workload_left_behind_is_stopped_at_expiry_too(shoal: Shoal) -> None:
    escaping = "sh -c 'setsid sleep 601 & echo $! > child.tmp; mv child.tmp child'"
    made = alloc(shoal, escaping, "--lifetime", "2s")
    meta = made["resource"]["metadata"]
    child_file = Path(meta["workspace"]) / "child"
    wait_for(child_file.exists, "the child pid")
    child = int(child_file.read_text())
    try:
        wait_for(lambda: not running(meta["pid"]), "the leader to exit")
        assert running(child)  # in a session of its own, still at work for the allocation
        wait_for(lambda: not running(child), "the left-behind child to be stopped", timeout=30)
        detail = status(shoal, made["id"])["detail"]
        assert (detail["exit_code"], detail["reason"]) == (0, "expired")  # the leader's code
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_capacity_is_free_from_the_moment_of_expiry(shoal: Shoal) -> None:
    # Long enough for the next command to start on a loaded CI machine before it ends.
    made = alloc(shoal, "sleep 600", "--lifetime", "5s")
    full = shoal("alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "-o", "entry=sleep 1")
    assert full.returncode == 75, full.stderr
    wait_for(lambda: datetime.now(UTC) > due(made), "the expiry", timeout=30)
    # Nobody freed it: the next alloc finds it expired, and the CPU free.
    again = alloc(shoal, "sleep 600")
    rows = {r["id"]: r["status"] for r in json.loads(shoal("status", "--json").stdout)}
    assert rows == {made["id"]: "EXPIRED", again["id"]: "ALLOCATED"}
    assert not running(made["resource"]["metadata"]["pid"])
    resources = json.loads(shoal("resources", "--json").stdout)
    assert resources[0]["overview"][0]["stat"]["onDemand"]["allocated"]["cpu"]["vcpu"] == "1"


def test_a_killed_supervisor_leaves_the_workload_to_the_next_command(shoal: Shoal) -> None:
    made = alloc(shoal, "sleep 600", "--lifetime", "2s")
    meta = made["resource"]["metadata"]
    os.kill(meta["supervisor"]["pid"], signal.SIGKILL)
    wait_for(lambda: datetime.now(UTC) > due(made), "the expiry", timeout=30)
    time.sleep(1.0)
    assert running(meta["pid"])  # nothing enforced the lifetime: its supervisor is gone
    listed = shoal("status", "--json")  # any command: it stops what is overdue
    assert listed.returncode == 0, listed.stderr
    assert not running(meta["pid"])
    assert [r["status"] for r in json.loads(listed.stdout)] == ["EXPIRED"]
    detail = status(shoal, made["id"])["detail"]
    assert (detail["state"], detail["reason"], detail["by"]) == ("exited", "expired", "shoal")


def test_free_expired_frees_an_expired_workload_and_its_workspace(shoal: Shoal) -> None:
    made = alloc(shoal, "sleep 600", "--lifetime", "1s")
    workspace = Path(made["resource"]["metadata"]["workspace"])
    wait_for(lambda: not running(made["resource"]["metadata"]["pid"]), "the expiry", timeout=30)
    assert workspace.is_dir()  # kept, with what it left, until it is freed
    freed = shoal("free", "--expired", "--json")
    assert freed.returncode == 0, freed.stderr
    assert [(r["id"], r["status"]) for r in json.loads(freed.stdout)] == [(made["id"], "FREED")]
    assert not workspace.exists()
    shown = status(shoal, made["id"])
    assert shown["status"] == "FREED"
    assert shown["detail"]["reason"] == "expired"  # recorded by free


# -- outcomes --------------------------------------------------------------------------------


def test_an_ended_workload_keeps_its_exit_code_and_log_until_free(shoal: Shoal) -> None:
    made = alloc(shoal, "sh -c 'echo to out; echo to err >&2; exit 3'")
    workspace = Path(made["resource"]["metadata"]["workspace"])
    shown = wait_for(
        lambda: (s := status(shoal, made["id"]))["status"] == "EXITED" and s, "EXITED", timeout=30
    )
    detail = shown["detail"]
    assert (detail["state"], detail["exit_code"], detail["signal"], detail["reason"]) == (
        "exited",
        3,
        None,
        "exited",
    )
    assert detail["log_tail"] == "to out\nto err"
    assert detail["finished"]
    assert status(shoal, made["id"])["detail"] == detail  # kept, look after look
    freed = shoal("free", made["id"])
    assert freed.returncode == 0, freed.stderr
    assert not workspace.exists()
    # What free recorded before it removed the workspace.
    after = status(shoal, made["id"])
    assert after["status"] == "FREED"
    assert after["detail"]["exit_code"] == 3 and after["detail"]["log_tail"] == detail["log_tail"]
    assert after["resource"]["metadata"]["outcome"]["exit_code"] == 3


def test_free_of_a_running_workload_records_that_it_was_stopped(shoal: Shoal) -> None:
    made = alloc(shoal, "sleep 600")
    assert shoal("free", made["id"]).returncode == 0
    detail = status(shoal, made["id"])["detail"]
    assert (detail["reason"], detail["signal"]) == ("stopped", "SIGTERM")


# -- shoal logs ------------------------------------------------------------------------------


def test_logs_prints_the_output_and_its_last_lines(shoal: Shoal) -> None:
    made = alloc(shoal, "sh -c 'for i in 1 2 3 4 5; do echo line $i; done; printf partial'")
    pid = made["resource"]["metadata"]["pid"]
    wait_for(lambda: not running(pid), "the workload to end", timeout=30)
    whole = shoal("logs", made["id"])
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout == "line 1\nline 2\nline 3\nline 4\nline 5\npartial"
    assert shoal("logs", made["id"], "--tail", "2").stdout == "line 5\npartial"
    assert shoal("logs", made["id"], "-n", "0").stdout == ""
    assert shoal("logs", made["id"], "--tail", "99").stdout == whole.stdout
    assert shoal("logs", made["id"], "-f").stdout == whole.stdout  # ended: follow ends too
    assert shoal("free", made["id"]).returncode == 0
    gone = shoal("logs", made["id"])
    assert gone.returncode == 1 and "FREED" in gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1


def test_logs_follow_ends_when_the_workload_ends(shoal: Shoal, home: Path) -> None:
    made = alloc(shoal, "sh -c 'echo first; sleep 2; echo second'")
    follow = subprocess.run(
        shoal_argv("logs", made["id"], "--follow"),
        env=shoal_env(home),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert follow.returncode == 0, follow.stderr
    assert follow.stdout == b"first\nsecond\n"
    assert not running(made["resource"]["metadata"]["pid"])


def test_logs_follow_ends_at_ctrl_c_with_exit_0(
    shoal: Shoal, home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    made = alloc(shoal, "sh -c 'echo ready; exec sleep 600'")
    follow = subprocess.Popen(
        shoal_argv("logs", made["id"], "-f"),
        env=shoal_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    procs.append(follow)
    assert follow.stdout is not None
    ready, _, _ = select.select([follow.stdout], [], [], 30)
    assert ready, "no output from logs --follow"
    assert follow.stdout.readline() == "ready\n"
    follow.send_signal(signal.SIGINT)
    _, err = follow.communicate(timeout=30)
    assert follow.returncode == 0, err
    assert err == ""


def test_logs_of_what_keeps_no_output(shoal: Shoal) -> None:
    assert shoal("logs", "process-00000000").returncode == 1
    made = shoal("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert made.returncode == 0, made.stderr
    run = shoal("logs", made.stdout.strip())
    assert run.returncode == 2
    assert "keeps no workload output" in run.stderr
    bad = shoal("logs", made.stdout.strip(), "--tail", "-1")
    assert bad.returncode == 2
