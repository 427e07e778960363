"""Ctrl-C and kill -9 during `shoal alloc --driver aws`: never a running instance nobody
knows about, never exit 130 holding a live allocation. Real shoal processes against moto
(behind the loopback EC2, which can hold RunInstances' answer back to land a signal while
the launch is in flight)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import spawn, wait_for
from tests.drivers.aws.conftest import AL2023, instances
from tests.drivers.aws.ec2server import Ec2Server

pytestmark = pytest.mark.slow

ALLOC = (
    "alloc", "--driver", "aws", "--cpu", "1", "--ram", "1", "-o", "instance_type=t3.medium",
    "-o", f"image=ssm:{AL2023}", "--lifetime", "1h",
)  # fmt: skip


def ledger(shoal_proc, env: dict[str, str]) -> dict[str, str]:  # type: ignore[no-untyped-def]
    listing = shoal_proc("status", "--all", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    return {r["id"]: r["status"] for r in json.loads(listing.stdout)}


def unknown_instances(moto_base: str, rows: dict[str, str]) -> dict[str, str]:
    """Allocation id -> instance id of every live shoal instance the ledger does not hold
    ALLOCATED."""
    live = {
        i["tags"].get("shoal:allocation", ""): ident
        for ident, i in instances(moto_base).items()
        if i["state"] in ("pending", "running")
    }
    return {a: i for a, i in live.items() if rows.get(a) != "ALLOCATED"}


Start = Callable[[float], "subprocess.Popen[str]"]


@pytest.fixture
def mid_launch(
    home: Path, procs: list[subprocess.Popen[str]], env: dict[str, str], aws: Ec2Server
) -> Start:
    """`start(seconds)`: a `shoal alloc` whose RunInstances EC2 has carried out and answers
    `seconds` later; returned once the request arrived."""

    def start(seconds: float) -> subprocess.Popen[str]:
        aws.delay["RunInstances"] = seconds
        proc = spawn(home, procs, *ALLOC, env=env)
        assert aws.arrived.wait(60), "RunInstances never came"
        return proc

    return start


def test_ctrl_c_while_run_instances_is_in_flight_ends_what_it_launched(
    mid_launch: Start,
    env: dict[str, str],
    aws: Ec2Server,
    moto_base: str,
    shoal_proc,  # type: ignore[no-untyped-def]
) -> None:
    proc = mid_launch(1.5)
    # The cleanup may not find it by its tag: it must know the instance from the answer.
    aws.refuse[("us-east-1", "DescribeInstances")] = "UnauthorizedOperation"
    proc.send_signal(signal.SIGINT)  # EC2 has launched it; its answer is 1.5 s away
    out, err = proc.communicate(timeout=60)
    aws.refuse.clear()
    assert proc.returncode == 130, err
    assert out == ""
    (seen,) = instances(moto_base).values()
    assert seen["state"] in ("shutting-down", "terminated")  # the answer was read, then undone
    rows = ledger(shoal_proc, env)
    assert list(rows.values()) == ["FAILED"] and seen["tags"]["shoal:allocation"] in rows


def test_kill_9_mid_launch_is_cleaned_up_by_the_next_command(
    mid_launch: Start,
    env: dict[str, str],
    moto_base: str,
    shoal_proc,  # type: ignore[no-untyped-def]
) -> None:
    proc = mid_launch(1.0)
    proc.kill()
    proc.communicate(timeout=30)
    time.sleep(1.2)  # the launch completes in EC2 with nobody to read its answer
    (seen,) = instances(moto_base).values()
    assert seen["state"] == "running"
    rows = ledger(shoal_proc, env)  # the next command finds the orphan and ends it by its tag
    assert list(rows.values()) == ["FAILED"]
    assert [i["state"] for i in instances(moto_base).values()] in (
        ["shutting-down"],
        ["terminated"],
    )


def test_ctrl_c_at_any_offset_leaves_no_unknown_instance(
    home: Path, procs: list[subprocess.Popen[str]], env: dict[str, str], aws: Ec2Server,
    moto_base: str, shoal_proc,  # type: ignore[no-untyped-def]
) -> None:  # fmt: skip
    aws.delay["RunInstances"] = 0.2  # a launch that takes a moment, as EC2's does
    # The slowest of two whole runs, and offsets past its end: a single lucky fast run on a
    # loaded machine can put every offset before the end of the runs that follow.
    wholes = []
    for _ in range(2):
        started = time.monotonic()
        whole_run = shoal_proc(*ALLOC, env=env)
        wholes.append(time.monotonic() - started)
        assert whole_run.returncode == 0, whole_run.stderr
    whole = max(wholes)
    held = 2
    outcomes = {0: 0, 130: 0, -1: 0}
    offsets = [whole * (0.2 + 1.1 * i / 16) for i in range(17)]
    for delay in offsets:
        proc = spawn(home, procs, *ALLOC, env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        code = proc.returncode
        # Before Python's handler is in place the signal kills it outright (a shell says 130),
        # or startup reports it: nothing of shoal's ran, nothing was reserved.
        early = code == -signal.SIGINT or (
            code == 1 and ("init_import_site" in err or "Could not import runpy" in err)
        )
        assert code in (0, 130) or early, (delay, code, err)
        outcomes[-1 if early else code] += 1
        rows = ledger(shoal_proc, env)
        assert not unknown_instances(moto_base, rows), (delay, code, rows, err)
        if code == 0:
            assert rows[out.strip()] == "ALLOCATED", (delay, out, err)
            held += 1
        else:
            assert out == "", (delay, out)
        assert sum(1 for s in rows.values() if s == "ALLOCATED") == held, (delay, code, rows)
    assert outcomes[0] and outcomes[130], (outcomes, wholes)


HELD = 120.0  # RunInstances' answer: longer than any wait below, as a stuck EC2 holds it


def interrupted_within(proc: subprocess.Popen[str], seconds: float) -> tuple[str, str]:
    """SIGINT, then its output once it ended; failing if it is still running after
    `seconds` (the bound of the wait, not a measure of speed)."""
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"Ctrl-C still unanswered after {seconds:.0f}s") from None
    assert proc.returncode == 130, err
    assert out == ""
    return out, err


def test_ctrl_c_answers_while_run_instances_answer_is_held(
    mid_launch: Start,
    env: dict[str, str],
    moto_base: str,
    shoal_proc,  # type: ignore[no-untyped-def]
) -> None:
    # Ctrl-C was held over the whole call and its retries (4 x 60 s read timeouts); it
    # interrupts now, and the cleanup finds what EC2 launched by its tag.
    proc = mid_launch(HELD)
    interrupted_within(proc, 30)
    rows = ledger(shoal_proc, env)
    assert list(rows.values()) == ["FAILED"]
    assert not unknown_instances(moto_base, rows)
    (seen,) = instances(moto_base).values()
    assert seen["state"] in ("shutting-down", "terminated")


def test_ctrl_c_during_a_launch_ec2_does_not_list_yet_is_settled_by_the_next_command(
    mid_launch: Start,
    env: dict[str, str],
    aws: Ec2Server,
    moto_base: str,
    shoal_proc,  # type: ignore[no-untyped-def]
) -> None:
    aws.lag = True  # EC2 launched it but lists it nowhere yet
    proc = mid_launch(HELD)
    _, err = interrupted_within(proc, 30)
    assert "next shoal command" in err
    (seen,) = instances(moto_base).values()
    assert seen["state"] == "running"
    alloc_id = seen["tags"]["shoal:allocation"]
    # Not recorded as failed: the next command's recovery keeps looking while it is young.
    assert ledger(shoal_proc, env) == {alloc_id: "ORPHANED"}
    aws.lag = False
    assert ledger(shoal_proc, env) == {alloc_id: "FAILED"}
    assert [i["state"] for i in instances(moto_base).values()] in (
        ["shutting-down"],
        ["terminated"],
    )


def test_ctrl_c_after_the_launch_while_ec2_does_not_know_the_instance_yet(
    home: Path,
    procs: list[subprocess.Popen[str]],
    env: dict[str, str],
    aws: Ec2Server,
    moto_base: str,
    shoal_proc,  # type: ignore[no-untyped-def]
) -> None:
    # Its id is known from the answer, but TerminateInstances calls it NotFound for a while
    # after the launch: that is no proof it ended, and the row is not recorded as failed.
    aws.lag = True
    proc = spawn(home, procs, *ALLOC, "-o", "wait=true", env=env)
    wait_for(
        lambda: any("InstanceId.1" in r for r in aws.requests("DescribeInstances")),
        "the wait for the instance to run",
    )
    _, err = interrupted_within(proc, 30)
    assert "next shoal command" in err
    (seen,) = instances(moto_base).values()
    assert seen["state"] == "running"
    alloc_id = seen["tags"]["shoal:allocation"]
    assert ledger(shoal_proc, env) == {alloc_id: "ORPHANED"}
    aws.lag = False
    assert ledger(shoal_proc, env) == {alloc_id: "FAILED"}
    assert not unknown_instances(moto_base, {})
