"""Lifetimes and output of `container` allocations against the session's real Podman: a
supervisor stops the container at its expiry with no shoal running (the next command shows
EXPIRED), a killed supervisor leaves it to the next command, `shoal logs` prints and follows
the engine's log."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime

import pytest

from tests.conftest import wait_for
from tests.drivers.container.conftest import Podman
from tests.drivers.container.test_container_driver import (
    Shoal,
    alloc,
    exists,
    inspect,
    status,
)

pytestmark = pytest.mark.engine
CONFIG = '[drivers."container/default"]\ngrace_seconds = 1\n'  # the `shoal` fixture writes it


def due(made: dict) -> datetime:
    return datetime.strptime(made["expires"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def _gone(pid: int) -> bool:
    """Exited (a zombie of this test process, which started it through the in-process CLI)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def running(podman: Podman, cid: str) -> bool:
    return bool(inspect(podman, cid)["State"]["Running"])


def test_a_lifetime_stops_the_container_with_no_shoal_running(
    shoal: Shoal, podman_engine: Podman
) -> None:
    # A lifetime long enough that the container is still running when a loaded machine's
    # alloc returns (3 s was not: a CI run with other suites beside it took longer).
    made = alloc(shoal, podman_engine, "--lifetime", "8s")
    cid = made["resource"]["metadata"]["container"]
    assert running(podman_engine, cid)
    # Only the engine is asked (podman's CLI) until it has stopped: no shoal command runs.
    wait_for(lambda: not running(podman_engine, cid), "the container to stop", timeout=60)
    assert datetime.now(UTC) >= due(made)
    shown = status(shoal, made["id"])
    assert (shown["status"], shown["driver_status"]) == ("EXPIRED", "NONE")
    # busybox sleep as PID 1 ignores SIGTERM: killed after the grace
    assert (shown["detail"]["exit_code"], shown["detail"]["reason"]) == (137, "expired")
    assert exists(podman_engine, cid)  # stopped, kept until freed
    freed = shoal("free", made["id"])
    assert freed.exit_code == 0, freed.stderr
    assert not exists(podman_engine, cid)
    assert status(shoal, made["id"])["detail"]["exit_code"] == 137  # recorded by free


def test_a_container_started_again_outside_shoal_is_still_stopped_at_its_deadline(
    shoal: Shoal, podman_engine: Podman
) -> None:
    """The supervisor left when /wait returned on the first stop, and the container ran
    past its expiry with no shoal command run."""
    # 15 s: alloc, stop and start again must all come before the deadline, or the engine
    # stops the container at once (a loaded CI machine once took longer than 6 s).
    made = alloc(shoal, podman_engine, "--lifetime", "15s")
    cid = made["resource"]["metadata"]["container"]
    podman_engine.run("stop", "-t", "0", cid)
    wait_for(lambda: not running(podman_engine, cid), "the stop", timeout=30)
    podman_engine.run("start", cid)
    assert running(podman_engine, cid) or datetime.now(UTC) >= due(made)
    # Only the engine is asked until the deadline has passed: no shoal command runs.
    wait_for(lambda: not running(podman_engine, cid), "the container to stop", timeout=60)
    assert datetime.now(UTC) >= due(made)
    supervisor = made["resource"]["metadata"]["supervisor"]["pid"]
    wait_for(lambda: _gone(supervisor), "the supervisor to leave", 30)
    assert shoal("free", made["id"]).exit_code == 0


def test_a_killed_supervisor_leaves_the_container_to_the_next_command(
    shoal: Shoal, podman_engine: Podman
) -> None:
    made = alloc(shoal, podman_engine, "--lifetime", "6s")  # outlives a slow alloc
    cid = made["resource"]["metadata"]["container"]
    os.kill(made["resource"]["metadata"]["supervisor"]["pid"], signal.SIGKILL)
    wait_for(lambda: datetime.now(UTC) > due(made), "the expiry", timeout=30)
    time.sleep(1.0)
    assert running(podman_engine, cid)  # its supervisor is gone: nothing stopped it
    listed = shoal("status", "--json")
    assert listed.exit_code == 0, listed.stderr
    assert not running(podman_engine, cid)
    assert {r["id"]: r["status"] for r in listed.json()}[made["id"]] == "EXPIRED"


def test_logs_print_and_follow_the_engine_log(shoal: Shoal, podman_engine: Podman) -> None:
    made = alloc(shoal, podman_engine, entry='sh -c "echo one; echo two >&2; sleep 2; echo three"')
    # Followed from the start: it ends when the container does.
    follow = shoal("logs", made["id"], "--follow")
    assert follow.exit_code == 0, follow.stderr
    assert follow.stdout == "one\ntwo\nthree\n"
    assert not running(podman_engine, made["resource"]["metadata"]["container"])
    assert shoal("logs", made["id"]).stdout == "one\ntwo\nthree\n"
    assert shoal("logs", made["id"], "--tail", "1").stdout == "three\n"
    assert shoal("logs", made["id"], "-n", "0").stdout == ""
    assert shoal("free", made["id"]).exit_code == 0
    assert shoal("logs", made["id"]).exit_code == 1
