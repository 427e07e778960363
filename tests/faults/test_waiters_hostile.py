"""`alloc --wait` waiters, their doorbells and reservation claims under attack: real shoal
processes killed with real signals, pipes deleted or replaced, rows of dead shoals, a
predecessor that ignores SIGTERM. No other shoal command runs while a waiter is expected to
clean up by itself (a command would do the cleanup for it)."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from drivers.ledger import doorbell
from providers.core.wire import format_time
from tests.conftest import read_ledger, spawn, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ledger_backend")]

ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
LIMIT_1 = '[drivers."test/default"]\ncpu_limit = 1\nram_limit = 10\n'
Procs = list[subprocess.Popen[str]]


def ledger_rows(home: Path, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read the ledger straight from its store: no shoal command (and so no cleanup) runs."""
    return read_ledger(home, sql, args)


def queued(home: Path) -> list[int]:
    return [int(r[0]) for r in ledger_rows(home, "SELECT owner_pid FROM waiters ORDER BY id")]


def row_status(home: Path, alloc_id: str) -> str | None:
    rows = ledger_rows(home, "SELECT status FROM allocations WHERE id=?", (alloc_id,))
    return str(rows[0][0]) if rows else None


def allocating_of(home: Path, pid: int) -> str | None:
    rows = ledger_rows(
        home, "SELECT id FROM allocations WHERE status='ALLOCATING' AND owner_pid=?", (pid,)
    )
    return str(rows[0][0]) if rows else None


def new_id(cli: Callable[..., Any], *args: str) -> str:
    run = cli(*(args or ALLOC))
    assert run.exit_code == 0, run
    return str(run.stdout.strip())


def bells(home: Path) -> Path:
    return home / "state" / "ledger.sqlite.waiters"


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


# -- 1. rows of dead shoals -----------------------------------------------------------------


def test_a_shoal_killed_mid_alloc_does_not_stall_the_waiters(
    write_config: Callable[[str], Path], home: Path, procs: Procs
) -> None:
    write_config(LIMIT_1)
    stalled = spawn(home, procs, *ALLOC, "-o", "delay_allocate=300")
    held = wait_for(lambda: allocating_of(home, stalled.pid), "the alloc to hold the room")
    waiter = spawn(home, procs, *ALLOC, "--wait", "--timeout", "40s")
    wait_for(lambda: queued(home) == [waiter.pid], "the waiter to queue")
    stalled.kill()
    stalled.communicate(timeout=30)
    # No other command runs: the waiter cleans up the dead shoal's row itself.
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err
    got = out.strip()
    assert row_status(home, got) == "ALLOCATED"
    assert row_status(home, held) == "FAILED"
    assert queued(home) == []


def test_a_waiter_killed_right_after_taking_its_turn_does_not_stall_the_next(
    cli: Callable[..., Any], write_config: Callable[[str], Path], home: Path, procs: Procs
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli)
    first = spawn(home, procs, *ALLOC, "--wait", "-o", "delay_allocate=300")
    wait_for(lambda: queued(home) == [first.pid], "the first waiter to queue")
    second = spawn(home, procs, *ALLOC, "--wait", "--timeout", "40s")
    wait_for(lambda: queued(home) == [first.pid, second.pid], "the second waiter to queue")
    assert cli("free", held).exit_code == 0
    taken = wait_for(lambda: allocating_of(home, first.pid), "the first waiter's turn")
    first.kill()
    first.communicate(timeout=30)
    out, err = second.communicate(timeout=90)
    assert second.returncode == 0, err
    assert row_status(home, out.strip()) == "ALLOCATED"
    assert row_status(home, taken) == "FAILED"


# -- 2. doorbells ---------------------------------------------------------------------------


@pytest.mark.sqlite_only
def test_a_live_waiter_whose_pipe_was_deleted_keeps_its_place_and_is_served(
    cli: Callable[..., Any], write_config: Callable[[str], Path], home: Path, procs: Procs
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli)
    waiter = spawn(home, procs, *ALLOC, "--wait", "--timeout", "40s")
    wait_for(lambda: queued(home) == [waiter.pid], "the waiter to queue")
    (pipe,) = bells(home).iterdir()
    pipe.unlink()
    assert cli("free", held).exit_code == 0  # its ring finds no pipe: the waiter lives on
    assert queued(home) in ([waiter.pid], [])
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err
    assert row_status(home, out.strip()) == "ALLOCATED"


def test_a_live_waiter_that_lost_its_place_queues_again_in_its_order(
    cli: Callable[..., Any], write_config: Callable[[str], Path], home: Path, procs: Procs
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli)
    first = spawn(home, procs, *ALLOC, "--wait", "--timeout", "2m")
    wait_for(lambda: queued(home) == [first.pid], "the first waiter to queue")
    second = spawn(home, procs, *ALLOC, "--wait", "--timeout", "2m")
    wait_for(lambda: queued(home) == [first.pid, second.pid], "the second waiter to queue")
    # Its row goes (as a shoal in another pid namespace, to which it looks dead, drops it).
    read_ledger(home, "DELETE FROM waiters WHERE owner_pid=?", (first.pid,))
    wait_for(lambda: queued(home) == [first.pid, second.pid], "the first to queue again", 60)
    assert cli("free", held).exit_code == 0
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert second.poll() is None  # not overtaken
    assert cli("free", out.strip()).exit_code == 0
    _, err = second.communicate(timeout=60)
    assert second.returncode == 0, err


@pytest.mark.sqlite_only
@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_ring_writes_into_nothing_but_a_pipe(tmp_path: Path, kind: str) -> None:
    directory = tmp_path / "bells"
    directory.mkdir(mode=0o700)
    target = tmp_path / "precious"
    target.write_text("data")
    if kind == "symlink":
        (directory / "abcd").symlink_to(target)
    else:
        (directory / "abcd").write_text("data")
    doorbell.ring(directory, "abcd")
    assert target.read_text() == "data"
    assert (directory / "abcd").read_text() == "data"


@pytest.mark.sqlite_only
def test_a_waiter_whose_pipe_was_replaced_by_a_symlink_is_served_and_nothing_written(
    cli: Callable[..., Any],
    write_config: Callable[[str], Path],
    home: Path,
    procs: Procs,
    tmp_path: Path,
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli)
    waiter = spawn(home, procs, *ALLOC, "--wait", "--timeout", "40s")
    wait_for(lambda: queued(home) == [waiter.pid], "the waiter to queue")
    target = tmp_path / "precious"
    target.write_text("data")
    (pipe,) = bells(home).iterdir()
    pipe.unlink()
    pipe.symlink_to(target)
    assert cli("free", held).exit_code == 0
    out, err = waiter.communicate(timeout=90)
    assert waiter.returncode == 0, err
    assert row_status(home, out.strip()) == "ALLOCATED"
    assert target.read_text() == "data"


# -- 3. claims killed -----------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_claim_killed_by_any_signal_leaves_the_booking_reserved(
    cli: Callable[..., Any],
    write_config: Callable[[str], Path],
    home: Path,
    procs: Procs,
    signum: int,
) -> None:
    write_config(LIMIT_1)
    booked = new_id(cli, *ALLOC, "--at", "now", "--lifetime", "10m")
    claim = spawn(home, procs, "alloc", "--reservation", booked, "-o", "delay_allocate=300")
    wait_for(lambda: allocating_of(home, claim.pid) == booked, "the claim to start")
    claim.send_signal(signum)
    _, err = claim.communicate(timeout=30)
    if signum != signal.SIGKILL:
        assert claim.returncode == 130, err
        assert "interrupted" in err
        assert row_status(home, booked) == "RESERVED"
    # After a SIGKILL, the next command (any) cleans up what the claim started.
    assert cli(*ALLOC).exit_code == 75  # the booking still holds its room
    assert row_status(home, booked) == "RESERVED"
    shown = cli("status", booked, "--json")
    assert shown.exit_code == 0, shown
    assert shown.json()["status"] == "RESERVED"
    assert "still reserved" in shown.json()["note"]
    again = cli("alloc", "--reservation", booked, "-o", "delay_allocate=0", "--json")
    assert again.exit_code == 0, again
    assert again.json()["status"] == "ALLOCATED"


# -- 5. a claim waits out its predecessor's grace ---------------------------------------------

PROCESS = '[drivers."process/default"]\ncpu_limit = 1\nram_limit = 4\ngrace_seconds = {grace}\n'
PROC_ALLOC = ("alloc", "--driver", "process", "--cpu", "1", "--ram", "1")


def stubborn(pid_file: Path) -> str:
    """A workload that ignores SIGTERM (its sleep too: an ignored signal stays ignored)."""
    return f"sh -c 'trap \"\" TERM; echo $$ > {pid_file}; while :; do sleep 0.2; done'"


def looks_for(pid_file: Path, seen: Path) -> str:
    """A workload that records whether the one before it still runs, then sleeps."""
    return (
        f"sh -c 'if kill -0 $(cat {pid_file}) 2>/dev/null; then echo together; "
        f"else echo alone; fi > {seen}; sleep 60'"
    )


def looked(seen: Path) -> str | None:
    return seen.read_text() if seen.exists() and seen.read_text().endswith("\n") else None


def book_after(shoal_proc: Callable[..., Any], tmp_path: Path, lifetime: str) -> tuple[str, str]:
    """A stubborn allocation, and a reservation of the same room from its expiry on."""
    before = shoal_proc(*PROC_ALLOC, "--lifetime", lifetime, "--json",
                        "-o", f"entry={stubborn(tmp_path / 'apid')}")  # fmt: skip
    assert before.returncode == 0, before.stderr
    shown = json.loads(before.stdout)
    wait_for(lambda: (tmp_path / "apid").exists(), "the first workload to start")
    ends = stamp(shown["expires"])
    at = ends.replace(microsecond=0) + timedelta(seconds=1)
    booked = shoal_proc(*PROC_ALLOC, "--at", format_time(at), "--lifetime", "1m",
                        "-o", "entry=sleep 1")  # fmt: skip
    assert booked.returncode == 0, booked.stderr
    return shown["id"], booked.stdout.strip()


def claim_and_look(home: Path, procs: Procs, booked: str, tmp_path: Path) -> subprocess.Popen[str]:
    return spawn(
        home, procs, "alloc", "--reservation", booked, "--wait", "--timeout", "2m",
        "-o", f"entry={looks_for(tmp_path / 'apid', tmp_path / 'seen')}",
    )  # fmt: skip


@pytest.mark.usefixtures("reap_workloads")
def test_a_waiting_claim_starts_after_its_predecessors_grace_not_during_it(
    shoal_proc: Callable[..., Any],
    write_config: Callable[[str], Path],
    home: Path,
    procs: Procs,
    tmp_path: Path,
) -> None:
    write_config(PROCESS.format(grace=4))
    before, booked = book_after(shoal_proc, tmp_path, "3s")
    claim = claim_and_look(home, procs, booked, tmp_path)
    _, err = claim.communicate(timeout=120)
    assert claim.returncode == 0, err
    seen = wait_for(lambda: looked(tmp_path / "seen"), "the second workload to look")
    assert seen.strip() == "alone"
    assert row_status(home, before) in ("EXPIRED", "EXITED")
    assert shoal_proc("free", booked).returncode == 0


@pytest.mark.usefixtures("reap_workloads")
def test_a_waiting_claim_waits_for_a_free_of_its_predecessor_to_finish(
    shoal_proc: Callable[..., Any],
    write_config: Callable[[str], Path],
    home: Path,
    procs: Procs,
    tmp_path: Path,
) -> None:
    write_config(PROCESS.format(grace=10))
    before, booked = book_after(shoal_proc, tmp_path, "4s")
    freeing = spawn(home, procs, "free", before)
    wait_for(lambda: row_status(home, before) == "FREEING", "the free to begin")
    claim = claim_and_look(home, procs, booked, tmp_path)
    _, err = claim.communicate(timeout=120)
    assert claim.returncode == 0, err
    _, err = freeing.communicate(timeout=60)
    assert freeing.returncode == 0, err
    seen = wait_for(lambda: looked(tmp_path / "seen"), "the second workload to look")
    assert seen.strip() == "alone"
    assert shoal_proc("free", booked).returncode == 0


# -- 12. a state dir without named pipes -------------------------------------------------------


@pytest.mark.sqlite_only
@pytest.mark.parametrize("code", [errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS])
def test_wait_on_a_filesystem_without_named_pipes_polls_instead(
    cli: Callable[..., Any],
    write_config: Callable[[str], Path],
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    code: int,
) -> None:
    write_config(LIMIT_1)
    held = new_id(cli, *ALLOC, "--lifetime", "2s")

    def no_fifo(path: Any, mode: int = 0o666, *args: Any, **kwargs: Any) -> None:
        raise OSError(code, os.strerror(code), str(path))

    monkeypatch.setattr(os, "mkfifo", no_fifo)
    run = cli(*ALLOC, "--wait", "--timeout", "40s")
    assert run.exit_code == 0, run
    assert row_status(home, run.stdout.strip()) == "ALLOCATED"
    assert row_status(home, held) == "EXPIRED"
    assert queued(home) == []


@pytest.mark.sqlite_only
def test_a_polling_waiter_behind_one_that_does_not_fit_is_served(
    cli: Callable[..., Any],
    write_config: Callable[[str], Path],
    home: Path,
    procs: Procs,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_config('[drivers."test/default"]\ncpu_limit = 2\nram_limit = 10\n')
    new_id(cli, *ALLOC, "--lifetime", "3s")
    new_id(cli)  # held until freed: the first waiter can never fit
    first = spawn(home, procs, "alloc", "--driver", "test", "--cpu", "2", "--ram", "1", "--wait")
    wait_for(lambda: queued(home) == [first.pid], "the first waiter to queue")

    def no_fifo(path: Any, mode: int = 0o666, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EPERM, os.strerror(errno.EPERM), str(path))

    monkeypatch.setattr(os, "mkfifo", no_fifo)
    # It cannot be rung: it sees the room the expiry gave back by asking the ledger itself.
    run = cli(*ALLOC, "--wait", "--timeout", "40s")
    assert run.exit_code == 0, run
    assert row_status(home, run.stdout.strip()) == "ALLOCATED"
    assert first.poll() is None
    assert queued(home) == [first.pid]


@pytest.mark.sqlite_only
def test_wait_where_no_pipe_may_be_made_says_why(
    cli: Callable[..., Any],
    write_config: Callable[[str], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    write_config(LIMIT_1)
    new_id(cli)

    def denied(path: Any, mode: int = 0o666, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), str(path))

    monkeypatch.setattr(os, "mkfifo", denied)
    run = cli(*ALLOC, "--wait", "--timeout", "5s")
    assert run.exit_code == 1
    assert "cannot make a named pipe" in run.stderr and "writable" in run.stderr
