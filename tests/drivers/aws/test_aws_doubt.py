"""EC2's eventual consistency against the `aws` driver: an instance just launched that
DescribeInstances does not list yet (and that a lookup or TerminateInstances by its id
calls InvalidInstanceID.NotFound) is never taken for one that does not exist, and whatever
an allocation left running is ended by `free`. The loopback EC2 (ec2server.py, `lag`)
plays the lag in front of moto, which lists everything at once."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from drivers.aws import driver as aws_driver
from tests.conftest import Run, spawn, wait_for
from tests.drivers.aws.conftest import AL2023, SMALL, US, alloc, allocated, instances, live, ok
from tests.drivers.aws.ec2server import Ec2Server

Cli = Callable[..., Run]
WAITING_ALLOC = (
    "alloc", "--driver", "aws", "--cpu", "1", "--ram", "1", "-o", "instance_type=t3.medium",
    "-o", f"image=ssm:{AL2023}", "-o", "wait=true", "--lifetime", "1h",
)  # fmt: skip


def rows(shoal_proc, env: dict[str, str]) -> tuple[dict[str, str], str]:  # type: ignore[no-untyped-def]
    """The ledger (id -> status) as the next command sees it, and what it warned."""
    listing = shoal_proc("status", "--all", "--json", env=env)
    assert listing.returncode == 0, listing.stderr
    return {r["id"]: r["status"] for r in json.loads(listing.stdout)}, listing.stderr


def killed_after_the_answer(
    home: Path, procs: list[subprocess.Popen[str]], env: dict[str, str], aws: Ec2Server
) -> str:
    """A real `shoal alloc` killed after RunInstances answered, before the ledger recorded
    it (it was waiting for the instance to run), while EC2 does not list the instance yet;
    its allocation id."""
    aws.lag = True
    proc = spawn(home, procs, *WAITING_ALLOC, env=env)
    (launched,) = wait_for(lambda: aws.requests("RunInstances"), "RunInstances", 60)
    wait_for(
        lambda: any("InstanceId.1" in r for r in aws.requests("DescribeInstances")),
        "the wait for the instance to run",
        60,
    )
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=30)
    return launched["ClientToken"]


@pytest.mark.slow
def test_an_orphan_ec2_does_not_list_yet_stays_orphaned_until_it_is_ended(
    home: Path,
    procs: list[subprocess.Popen[str]],
    env: dict[str, str],
    aws: Ec2Server,
    moto_base: str,
    shoal_proc,  # type: ignore[no-untyped-def]
) -> None:
    alloc_id = killed_after_the_answer(home, procs, env, aws)
    (instance,) = live(moto_base)
    # One empty answer is no proof while the launch is young: the row keeps holding its
    # capacity, and says why.
    seen, warned = rows(shoal_proc, env)
    assert seen == {alloc_id: "ORPHANED"}
    assert alloc_id in warned and "eventually consistent" in warned
    assert list(live(moto_base)) == [instance]
    freeing = shoal_proc("free", alloc_id, env=env)
    assert freeing.returncode == 75, freeing.stderr
    assert "next shoal command asks again" in freeing.stderr
    assert rows(shoal_proc, env)[0] == {alloc_id: "ORPHANED"}
    # EC2 catches up: the next command ends it.
    aws.lag = False
    assert rows(shoal_proc, env)[0] == {alloc_id: "FAILED"}
    assert not live(moto_base)
    assert instances(moto_base)[instance]["state"] in ("shutting-down", "terminated")


@pytest.mark.slow
def test_an_orphan_is_settled_once_its_launch_is_older_than_the_window(
    home: Path,
    procs: list[subprocess.Popen[str]],
    env: dict[str, str],
    aws: Ec2Server,
    moto_base: str,
    shoal_proc,  # type: ignore[no-untyped-def]
) -> None:
    # Past AWS's window an empty answer is believed: an orphan does not hold its capacity
    # forever (here EC2 lags for ever, which it does not: `free` then ends what shows).
    alloc_id = killed_after_the_answer(home, procs, env, aws)
    assert rows(shoal_proc, env)[0] == {alloc_id: "ORPHANED"}
    (note,) = (home / "state" / "aws-launches").glob("*.json")
    kept = json.loads(note.read_text())
    note.write_text(json.dumps({**kept, "sent": time.time() - 3600}))
    assert rows(shoal_proc, env)[0] == {alloc_id: "FAILED"}
    aws.lag = False
    freed = shoal_proc("free", alloc_id, env=env)
    assert freed.returncode == 0, freed.stderr
    assert "left i-" in freed.stderr and "ended" in freed.stderr
    assert not live(moto_base)


def failed_with_its_instance_running(
    cli: Cli, env: dict[str, str], aws: Ec2Server, line: str
) -> str:
    """An alloc whose RunInstances launched but was never answered (every retry's answer
    dropped) while EC2 would not say what carries its tag: 69, its row FAILED and its
    instance running. The allocation id."""
    aws.drop["RunInstances"] = 3  # every attempt of the test's retry policy
    aws.refuse[(US, "DescribeInstances")] = "UnauthorizedOperation"
    before = {r["ClientToken"] for r in aws.requests("RunInstances")}
    run = alloc(cli, env, line, code=69)
    aws.refuse.clear()
    (alloc_id,) = {r["ClientToken"] for r in aws.requests("RunInstances")} - before
    assert "free " + alloc_id in run.stderr  # the way out is said
    listed = {r["id"]: r["status"] for r in ok(cli("status", "--all", "--json", env=env)).json()}
    assert listed[alloc_id] == "FAILED"
    return str(alloc_id)


def test_free_ends_what_a_failed_allocation_left_running(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    by_id = failed_with_its_instance_running(cli, env, aws, SMALL)
    remotely = failed_with_its_instance_running(cli, env, aws, SMALL)
    expiring = failed_with_its_instance_running(cli, env, aws, f"{SMALL} --lifetime 1s")
    assert len(live(moto_base)) == 3

    freed = ok(cli("free", by_id, env=env))
    assert (
        "allocation had failed, but left i-" in freed.stderr and "nothing held" not in freed.stderr
    )
    freed = ok(cli("free", remotely, "--remote", "aws", env=env))
    assert "allocation had failed, but left i-" in freed.stderr
    time.sleep(2.1)  # its lifetime, and the tag's whole second
    (expired,) = ok(cli("free", "--expired", "--remote", "aws", "--json", env=env)).json()
    assert expired["id"] == expiring and expired["changed"] is True
    assert not live(moto_base)
    # Freeing again: nothing is left.
    assert "nothing held" in ok(cli("free", by_id, env=env)).stderr


def test_an_instance_ec2_does_not_list_yet_stays_allocated(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = allocated(cli, env, SMALL)
    instance = made["resource"]["metadata"]["instance_id"]
    aws.lag = True  # DescribeInstances by its id: InvalidInstanceID.NotFound
    status = ok(cli("status", made["id"], "--json", env=env)).json()
    assert status["status"] == "ALLOCATED" and status["driver_status"] == "ALLOCATED"
    assert status["drift"] is None
    assert (
        status["detail"]["state"] == "pending" and "not list it yet" in status["detail"]["message"]
    )
    # Ending it waits until EC2 knows it: TerminateInstances' NotFound proves nothing yet.
    freeing = cli("free", made["id"], env=env)
    assert freeing.exit_code == 75 and instance in freeing.stderr
    assert ok(cli("status", made["id"], "--json", env=env)).json()["status"] == "ALLOCATED"
    assert list(live(moto_base)) == [instance]
    # Past the window, an instance EC2 does not list has ended.
    monkeypatch.setattr(aws_driver, "DOUBT_WINDOW_SECONDS", 0.0)
    assert ok(cli("status", made["id"], "--json", env=env)).json()["status"] == "GONE"
    monkeypatch.undo()
    aws.lag = False
    assert ok(cli("status", made["id"], "--json", env=env)).json()["status"] == "ALLOCATED"
    assert "freed" in ok(cli("free", made["id"], env=env)).stderr
    assert not live(moto_base)


def test_an_unanswered_launch_that_shows_later_is_the_allocation(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    # Every answer lost, EC2 slow to list the instance: shoal looks for it by its tag
    # (backing off) instead of failing while it may run.
    aws.drop["RunInstances"] = 3
    aws.lag = True

    def catch_up() -> None:
        time.sleep(0.5)
        aws.lag = False

    import threading

    threading.Thread(target=catch_up, daemon=True).start()
    made = allocated(cli, env, SMALL)
    assert made["status"] == "ALLOCATED"
    assert list(live(moto_base)) == [made["resource"]["metadata"]["instance_id"]]
