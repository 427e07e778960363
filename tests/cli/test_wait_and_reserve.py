"""`alloc --wait`, `--at`, `--reservation` from the command line: real shoal processes on a
real ledger for the waiting (order, Ctrl-C, kill -9, timeouts, the terminal line), the
in-process runner for reservations, their errors and the `scheduled` stat."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from providers.core.wire import format_time
from tests.conftest import read_ledger, spawn, wait_for

ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
LIMIT_1 = '[drivers."test/default"]\ncpu_limit = 1\nram_limit = 10\n'
LIMIT_2 = '[drivers."test/default"]\ncpu_limit = 2\nram_limit = 10\n'



pytestmark = pytest.mark.usefixtures("ledger_backend")


def ledger_rows(home: Path, sql: str) -> list[tuple[object, ...]]:
    return read_ledger(home, sql)


def queued(home: Path) -> list[int]:
    """The waiting shoals' pids, in arrival order."""
    return [int(r[0]) for r in ledger_rows(home, "SELECT owner_pid FROM waiters ORDER BY id")]


def new_id(cli, *args: str) -> str:
    run = cli(*(args or ALLOC))
    assert run.exit_code == 0, run
    return run.stdout.strip()


def statuses(cli) -> dict[str, str]:
    run = cli("status", "--all", "--json")
    assert run.exit_code == 0, run
    return {r["id"]: r["status"] for r in run.json()}


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def ceil_second(at: datetime) -> datetime:
    return at.replace(microsecond=0) + timedelta(seconds=1 if at.microsecond else 0)


# -- waiting ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_twenty_waiters_are_served_in_arrival_order_as_room_is_freed(
    cli, write_config: Callable[[str], Path], home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    write_config(LIMIT_2)
    held = [new_id(cli), new_id(cli)]
    waiters = []
    for i in range(20):
        waiters.append(spawn(home, procs, *ALLOC, "--wait", "--timeout", "10m"))
        wait_for(lambda n=i + 1: len(queued(home)) == n, f"waiter {i} to queue", timeout=120)
    assert queued(home) == [p.pid for p in waiters]
    for i, proc in enumerate(waiters):
        # One slot at a time: every waiter behind fits it too, and must not take it.
        freed = held.pop(0)
        assert cli("free", freed).exit_code == 0
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert all(later.poll() is None for later in waiters[i + 1 :]), f"overtaken at {i}"
        got = out.strip()
        held.append(got)
        # Woken by the free, not by a poll: the room was taken well within a second.
        free_at = stamp(cli("status", freed, "--json").json()["updated"])
        taken_at = stamp(cli("status", got, "--json").json()["created"])
        assert timedelta(0) <= taken_at - free_at < timedelta(seconds=1), (free_at, taken_at)
    assert queued(home) == []
    assert list(ledger_rows(home, "SELECT COUNT(*) FROM allocations WHERE status='ALLOCATED'")) == [
        (2,)
    ]


@pytest.mark.slow
def test_ctrl_c_of_a_waiter_exits_130_and_holds_nothing(
    cli, write_config: Callable[[str], Path], home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli)
    proc = spawn(home, procs, *ALLOC, "--wait")
    wait_for(lambda: queued(home) == [proc.pid], "the waiter to queue")
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert out == ""
    assert queued(home) == []
    assert statuses(cli) == {held: "ALLOCATED"}
    pipes = home / "state" / "ledger.sqlite.waiters"
    assert not pipes.exists() or list(pipes.iterdir()) == []  # no pipe left
    assert cli("free", held).exit_code == 0
    assert new_id(cli)  # nothing else holds the room


@pytest.mark.slow
def test_a_waiter_killed_with_sigkill_loses_its_place(
    cli, write_config: Callable[[str], Path], home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli)
    first = spawn(home, procs, *ALLOC, "--wait")
    wait_for(lambda: queued(home) == [first.pid], "the first waiter to queue")
    second = spawn(home, procs, *ALLOC, "--wait")
    wait_for(lambda: len(queued(home)) == 2, "the second waiter to queue")
    first.kill()
    first.communicate(timeout=30)
    assert cli("free", held).exit_code == 0
    out, err = second.communicate(timeout=30)
    assert second.returncode == 0, err
    assert statuses(cli)[out.strip()] == "ALLOCATED"
    assert queued(home) == []


@pytest.mark.slow
def test_a_wait_that_times_out_exits_75_saying_when_room_comes_back(
    cli, write_config: Callable[[str], Path], shoal_proc, home: Path
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli, *ALLOC, "--lifetime", "1h")
    expires = stamp(cli("status", held, "--json").json()["expires"])
    began = time.monotonic()
    run = shoal_proc(*ALLOC, "--wait", "--timeout", "1s")
    assert run.returncode == 75, run.stderr
    assert time.monotonic() - began < 15
    assert "timed out after 1s waiting for cpu=1 ram=1GiB on test/default" in run.stderr
    assert f"capacity is expected back at {format_time(expires)}" in run.stderr
    assert run.stdout == ""
    assert queued(home) == []


@pytest.mark.slow
def test_a_waiter_on_a_terminal_shows_what_it_waits_for_and_how_long(
    cli, write_config: Callable[[str], Path], home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    write_config(LIMIT_1)
    new_id(cli)
    leader, follower = os.openpty()
    try:
        proc = spawn(home, procs, *ALLOC, "--wait", "--timeout", "1m", stderr=follower)
        wait_for(lambda: queued(home) == [proc.pid], "the waiter to queue")
        time.sleep(1.5)  # a tick or two: the line is redrawn
        os.set_blocking(leader, False)
        shown = os.read(leader, 65536).decode(errors="replace")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    finally:
        os.close(leader)
        os.close(follower)
    assert "waiting for cpu=1 ram=1GiB on test/default" in shown
    assert "so far" in shown and "gives up in" in shown and "Ctrl-C" in shown
    assert "\r" in shown  # redrawn in place


def test_without_wait_the_refusal_says_when_capacity_is_expected_back(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli, *ALLOC, "--lifetime", "1h")
    expires = stamp(cli("status", held, "--json").json()["expires"])
    run = cli(*ALLOC)
    assert run.exit_code == 75
    assert (
        f"capacity is expected back at {format_time(expires)} (in 59m, when {held} expires)"
        in run.stderr
    )
    forever = cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert forever.exit_code == 75
    write_config(LIMIT_2)
    new_id(cli)  # no lifetime: it may never come back
    run = cli("alloc", "--driver", "test", "--cpu", "2", "--ram", "1")
    assert run.exit_code == 75
    assert "nothing holding it has a lifetime" in run.stderr


# -- reservations ----------------------------------------------------------------------------


def test_a_reservation_holds_its_window_against_longer_allocations(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(LIMIT_1)
    booked = cli(*ALLOC, "--at", "+1h", "--lifetime", "1h", "--json")
    assert booked.exit_code == 0, booked
    shown = booked.json()
    reservation = shown["id"]
    assert shown["status"] == "RESERVED"
    assert stamp(shown["expires"]) - stamp(shown["starts"]) == timedelta(hours=1)
    assert stamp(shown["claim_by"]) - stamp(shown["starts"]) == timedelta(minutes=15)
    too_long = cli(*ALLOC, "--lifetime", "2h")
    assert too_long.exit_code == 75
    assert f"reservation {reservation} starts at" in too_long.stderr
    assert "a lifetime up to 59m fits now" in too_long.stderr  # rounded down
    assert cli(*ALLOC, "--dry-run", "--lifetime", "2h").stdout == "0\n"
    assert cli(*ALLOC, "--dry-run", "--lifetime", "30m").stdout == "1\n"
    overlap = cli(*ALLOC, "--at", "+90m", "--lifetime", "1h")
    assert overlap.exit_code == 75
    assert f"reservation {reservation} holds it then" in overlap.stderr
    short = new_id(cli, *ALLOC, "--lifetime", "30m")
    assert statuses(cli) == {reservation: "RESERVED", short: "ALLOCATED"}
    listed = cli("status")
    assert reservation in listed.stdout and "claim by" in listed.stdout


def test_a_reservation_is_claimed_with_the_room_it_booked(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(LIMIT_1)
    reservation = new_id(cli, *ALLOC, "--at", "now", "--lifetime", "1h")
    assert cli(*ALLOC, "--lifetime", "1m").exit_code == 75  # its window has begun
    claimed = cli("alloc", "--reservation", reservation, "-o", "delay_allocate=0", "--json")
    assert claimed.exit_code == 0, claimed
    shown = claimed.json()
    assert (shown["id"], shown["status"], shown["cpu"]) == (reservation, "ALLOCATED", 1)
    assert shown["definition"]["options"] == {"delay_allocate": 0}
    assert abs(stamp(shown["expires"]) - stamp(shown["starts"]) - timedelta(hours=1)) < timedelta(
        seconds=1
    )
    again = cli("alloc", "--reservation", reservation)
    assert again.exit_code == 2
    assert "already claimed" in again.stderr


def test_an_unclaimed_reservation_lapses_after_its_grace(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(LIMIT_1 + "[alloc]\nreservation_grace_minutes = 0.01\n")
    reservation = new_id(cli, *ALLOC, "--at", "now", "--lifetime", "1h")
    assert cli(*ALLOC).exit_code == 75
    time.sleep(1.0)
    late = cli("alloc", "--reservation", reservation)
    assert late.exit_code == 2
    assert "lapsed" in late.stderr
    assert statuses(cli) == {reservation: "LAPSED"}
    assert new_id(cli)  # its room is free again


def test_free_cancels_a_reservation(cli, write_config: Callable[[str], Path]) -> None:
    write_config(LIMIT_1)
    reservation = new_id(cli, *ALLOC, "--at", "+5m", "--lifetime", "1h")
    assert cli(*ALLOC).exit_code == 75
    cancelled = cli("free", reservation, "--json")
    assert cancelled.exit_code == 0
    (item,) = cancelled.json()
    assert item["status"] == "FREED" and item["note"] == "reservation cancelled"
    assert item["changed"] is True
    assert new_id(cli)
    claim = cli("alloc", "--reservation", reservation)
    assert claim.exit_code == 2 and "was cancelled" in claim.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--timeout", "5s"), "--timeout limits --wait"),
        (("--at", "-1h", "--lifetime", "1h"), "is in the past"),
        (("--at", "+1h"), "give --lifetime"),
        (("--at", "tomorrow", "--lifetime", "1h"), "--at: 'tomorrow' is not a time"),
        (("--at", "+1h", "--lifetime", "1h", "--wait"), "--at books ahead"),
        (("--wait", "--dry-run"), "--dry-run allocates nothing"),
        (("--cpu", "5", "--at", "+1h", "--lifetime", "1h"), "--at: test/default: cpu=5"),
        (("--cpu", "5", "--wait"), "--wait: test/default: cpu=5 ram=1GiB can never fit"),
        (("--wait", "--timeout", "soon"), "--timeout: 'soon' is not a duration"),
    ],
)
def test_bad_waits_and_bookings_are_usage_errors(
    cli, write_config: Callable[[str], Path], args: tuple[str, ...], said: str
) -> None:
    write_config(LIMIT_2)
    run = cli(*ALLOC, *args)
    assert run.exit_code == 2, run
    assert said in run.stderr
    assert statuses(cli) == {}


def test_claims_of_what_is_not_a_claimable_reservation_are_refused(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(LIMIT_2 + '[drivers."test/other"]\ncpu_limit = 2\nram_limit = 10\n')
    plain = new_id(cli)
    assert "not a reservation" in cli("alloc", "--reservation", plain).stderr
    ahead = new_id(cli, *ALLOC, "--at", "+1h", "--lifetime", "1h")
    early = cli("alloc", "--reservation", ahead)
    assert early.exit_code == 75 and "starts at" in early.stderr
    other = cli("alloc", "--reservation", ahead, "--driver", "test/other")
    assert other.exit_code == 2 and "test/default's, not test/other's" in other.stderr
    bigger = cli("alloc", "--reservation", ahead, "--cpu", "2")
    assert bigger.exit_code == 2 and "booked cpu=1" in bigger.stderr
    missing = cli("alloc", "--reservation", "test-00000000")
    assert missing.exit_code == 1 and "test-00000000" in missing.stderr


def test_resources_shows_reservations_in_the_scheduled_stat(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(LIMIT_2)
    reservation = cli(*ALLOC, "--at", "+1h", "--lifetime", "2h", "--ram", "3", "--json").json()
    starts, ends = stamp(reservation["starts"]), stamp(reservation["expires"])
    keys = [format_time(ceil_second(starts)), format_time(ceil_second(ends))]
    run = cli("resources", "--json")
    assert run.exit_code == 0, run
    (res,) = run.json()
    (node,) = res["overview"]
    scheduled = node["stat"]["scheduled"]
    assert set(scheduled) == {"allocated", "supply", "allocatable"}
    assert list(scheduled["allocated"]) == keys
    assert scheduled["allocated"][keys[0]] == {"cpu": {"vcpu": "1"}, "memory": {"GiB": "3"}}
    assert scheduled["allocated"][keys[1]] == {"cpu": {"vcpu": "0"}, "memory": {"GiB": "0"}}
    assert scheduled["supply"][keys[0]] == node["stat"]["onDemand"]["supply"]
    assert scheduled["allocatable"][keys[0]]["cpu"] == {"vcpu": str(
        int(node["stat"]["onDemand"]["supply"]["cpu"]["vcpu"]) - 1
    )}  # fmt: skip
    # Nothing is held now; the driver's breakdown carries its schedule.
    assert node["stat"]["onDemand"]["allocated"]["cpu"] == {"vcpu": "0"}
    (driver,) = res["breakdown"]["driver"]
    assert driver["value"] == "test/default" and "onDemand" not in driver["stat"]
    assert list(driver["stat"]["scheduled"]["allocated"]) == keys
    table = cli("resources")  # the point's class, and when it comes (its time in -o wide)
    assert " sched " in table.stdout
    assert any(f" in {minutes}m " in table.stdout for minutes in (59, 60))
    assert keys[0] in cli("resources", "--output", "wide").stdout
    # Predictions count it over its window.
    window = cli("resources", "--start", "now", "--end", "+4h", "--json").json()
    assert keys[0] in window and keys[1] in window
    held = {at: v["overview"][0]["stat"]["onDemand"]["allocated"]["cpu"]["vcpu"]
            for at, v in window.items()}  # fmt: skip
    assert held[keys[0]] == "1" and held[keys[1]] == "0"
    assert next(iter(held.values())) == "0"  # nothing held at the window's start


REMOTE_1 = '[drivers."test/cloud"]\nis_remote = true\ncpu_limit = 1\nram_limit = 10\n'
REMOTE_ALLOC = ("alloc", "--driver", "test/cloud", "--cpu", "1", "--ram", "1")


@pytest.mark.slow
def test_a_remote_drivers_waiters_go_in_arrival_order(
    cli, write_config: Callable[[str], Path], home: Path, procs: list[subprocess.Popen[str]]
) -> None:
    write_config(REMOTE_1)
    held = new_id(cli, *REMOTE_ALLOC)
    first = spawn(home, procs, *REMOTE_ALLOC, "--wait", "--timeout", "1m")
    wait_for(lambda: queued(home) == [first.pid], "the first waiter to queue")
    second = spawn(home, procs, *REMOTE_ALLOC, "--wait", "--timeout", "1m")
    wait_for(lambda: len(queued(home)) == 2, "the second waiter to queue")
    late = cli(*REMOTE_ALLOC)
    assert late.exit_code == 75
    assert cli("free", held).exit_code == 0
    out, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert second.poll() is None
    assert cli("free", out.strip()).exit_code == 0
    _, err = second.communicate(timeout=30)
    assert second.returncode == 0, err


def test_reservations_are_for_local_drivers(cli, write_config: Callable[[str], Path]) -> None:
    write_config(REMOTE_1)
    run = cli(*REMOTE_ALLOC, "--at", "+1h", "--lifetime", "1h")
    assert run.exit_code == 2
    assert "test/cloud is remote" in run.stderr
