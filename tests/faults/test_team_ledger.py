"""The team ledger on PostgreSQL under concurrency and faults, with real shoal processes
posing as several machines (tests/faults/team.py): racing allocations count a team's
capacity over every machine and a machine's over its own; one machine sees, frees and
queues behind another's; a dead machine's queue place and half-made allocation are released
once its lease runs out; a restarted server, a cut session, an unreachable server, a wrong
password and a killed lock holder each end the way the user is told.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

import pytest

from tests.conftest import wait_for
from tests.faults.team import (
    MACHINE_DRIVER,
    SCHEMA,
    TEAM_DRIVER,
    Machine,
    Team,
    finished,
    one_line,
    past,
    request,
    when,
)
from tests.pg import Cluster, free_port

pytest.importorskip("psycopg", reason="psycopg is not installed: pip install '.[test]'")
pytestmark = pytest.mark.slow

RACERS_PER_MACHINE = 3  # 3 machines: 9 racers


class MakeTeam(Protocol):
    def __call__(self, *, team_cpu: int = 1, machine_cpu: int = 2) -> Team: ...


@pytest.fixture
def make_team(pg_cluster: Cluster, tmp_path: Path) -> Iterator[MakeTeam]:
    """Three machines on a new database: `test/team` holds `team_cpu` vCPUs for the team,
    `test/default` `machine_cpu` on each machine."""
    made: list[Team] = []

    def make(*, team_cpu: int = 1, machine_cpu: int = 2) -> Team:
        team = Team.make(pg_cluster, tmp_path, team_cpu=team_cpu, machine_cpu=machine_cpu)
        made.append(team)
        return team

    yield make
    for team in made:
        team.drop()


def race(
    team: Team, procs: list[subprocess.Popen[str]], driver: str
) -> dict[str, list[tuple[int, str, str]]]:
    """RACERS_PER_MACHINE `alloc` from each machine at once; each machine's outcomes."""
    started = [
        (machine.host, machine.spawn(procs, *request(driver)))
        for machine in team.machines.values()
        for _ in range(RACERS_PER_MACHINE)
    ]
    outcomes: dict[str, list[tuple[int, str, str]]] = {host: [] for host in team.machines}
    for host, proc in started:
        outcomes[host].append(finished(proc))
    return outcomes


def live(listed: list[dict[str, object]], driver: str) -> list[dict[str, object]]:
    return [row for row in listed if row["driver"] == driver and row["status"] == "ALLOCATED"]


# -- 1. racing allocations -------------------------------------------------------------------


def test_racers_on_three_machines_fill_a_team_capacity_exactly(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    capacity = 3
    team = make_team(team_cpu=capacity)
    team["a"].ok("status")  # the schema made once, so the race is the allocations'
    outcomes = race(team, procs, TEAM_DRIVER)

    every = [o for host in outcomes for o in outcomes[host]]
    assert sorted(code for code, _, _ in every) == [0] * capacity + [75] * (
        len(every) - capacity
    ), every
    for code, _, err in every:
        line = one_line(err)
        if code == 75:
            assert "no capacity for test/team" in line
    made = {out.strip(): host for host in outcomes for code, out, _ in outcomes[host] if code == 0}
    assert len(made) == capacity
    # Every machine sees the same K allocations, each naming the machine that made it.
    for machine in team.machines.values():
        shown = live(machine.listed(), TEAM_DRIVER)
        assert {row["id"]: row["host"] for row in shown} == made


def test_racers_on_three_machines_each_fill_their_own_machine_capacity(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    per_machine = 2
    team = make_team(machine_cpu=per_machine)
    team["a"].ok("status")
    outcomes = race(team, procs, MACHINE_DRIVER)

    for host, results in outcomes.items():
        codes = sorted(code for code, _, _ in results)
        assert codes == [0] * per_machine + [75] * (RACERS_PER_MACHINE - per_machine), (
            host,
            results,
        )
    counted = Counter(str(row["host"]) for row in live(team["b"].listed(), MACHINE_DRIVER))
    assert counted == dict.fromkeys(team.machines, per_machine)


# -- 2. one machine's view of another's allocations ------------------------------------------


def test_status_on_one_machine_lists_another_machines_allocations_with_their_host(
    make_team: MakeTeam,
) -> None:
    team = make_team()
    a, b = team["a"], team["b"]
    on_team = a.ok(*request(TEAM_DRIVER)).strip()
    on_machine = a.ok(*request(MACHINE_DRIVER)).strip()
    shown = {row["id"]: (row["driver"], row["status"], row["host"]) for row in b.listed()}
    assert shown == {
        on_team: (TEAM_DRIVER, "ALLOCATED", "machine-a"),
        on_machine: (MACHINE_DRIVER, "ALLOCATED", "machine-a"),
    }
    table = b.ok("status").splitlines()
    for alloc_id in (on_team, on_machine):
        assert any(alloc_id in line and "machine-a" in line for line in table), table
    # Looking at machine-a's machine-scoped allocation from machine-b (whose own driver has
    # no such workload) reports it as the ledger holds it: not GONE.
    assert b.run("status", on_machine).returncode == 0
    assert {r["id"]: r["status"] for r in a.listed()} == dict.fromkeys(
        (on_team, on_machine), "ALLOCATED"
    )


def test_free_on_one_machine_of_another_machines_team_allocation(
    make_team: MakeTeam,
) -> None:
    team = make_team(team_cpu=1)
    a, b = team["a"], team["b"]
    alloc_id = a.ok(*request(TEAM_DRIVER)).strip()
    assert a.run(*request(TEAM_DRIVER)).returncode == 75  # full

    freed = b.run("free", alloc_id)
    assert freed.returncode == 0, freed.stderr
    assert one_line(freed.stderr) == f"{alloc_id}: freed"
    assert [(r["id"], r["status"]) for r in a.listed("--all")] == [(alloc_id, "FREED")]
    assert not (team.shared / alloc_id).exists()  # the team's backend let it go
    assert a.run(*request(TEAM_DRIVER)).returncode == 0  # and its room is back


def test_free_on_one_machine_of_another_machines_machine_scoped_allocation_is_refused(
    make_team: MakeTeam,
) -> None:
    team = make_team()
    a, b = team["a"], team["b"]
    alloc_id = a.ok(*request(MACHINE_DRIVER)).strip()

    refused = b.run("free", alloc_id)
    # Its workload runs on machine-a: machine-b can neither reach it nor free its room, and
    # trying again (75) will not change that.
    assert refused.returncode not in (0, 75), (refused.stdout, refused.stderr)
    line = one_line(refused.stderr)
    assert alloc_id in line and "machine-a" in line, line
    assert [(r["id"], r["status"]) for r in a.listed()] == [(alloc_id, "ALLOCATED")]
    # machine-a still frees it.
    assert a.run("free", alloc_id).returncode == 0


# -- 3. the queue across machines, bookings --------------------------------------------------


def test_waiters_on_two_machines_are_served_in_order_and_rung_across_machines(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    from drivers.service.queue import FOLLOWER_TICK_SECONDS

    team = make_team(team_cpu=1)
    a, b, c = team["a"], team["b"], team["c"]
    held = a.ok(*request(TEAM_DRIVER)).strip()
    waiting_b = b.spawn(procs, *request(TEAM_DRIVER, 1, "--wait"))
    team.queued("machine-b")
    waiting_c = c.spawn(procs, *request(TEAM_DRIVER, 1, "--wait"))
    _, c_queued = team.queued("machine-c")

    # machine-c sleeps FOLLOWER_TICK_SECONDS at a time from c_queued on (it is not first),
    # and becomes first at the tick after machine-b leaves the queue, from then on looking
    # every second. Served before that tick, it can only have been rung: the NOTIFY of
    # machine-b's free. Start just after one of its ticks, for the most room.
    tick = timedelta(seconds=FOLLOWER_TICK_SECONDS)
    ticks = 0
    while datetime.now(UTC) > c_queued + ticks * tick + timedelta(seconds=1):
        ticks += 1
    start = c_queued + ticks * tick + timedelta(seconds=0.2)
    time.sleep(max(0.0, (start - datetime.now(UTC)).total_seconds()))
    next_tick = c_queued + (ticks + 1) * tick

    a.ok("free", held)
    code, out, err = finished(waiting_b, 30)
    assert code == 0, err
    served_b = out.strip()
    # machine-b first: machine-c still waits, queued (read from the server, not by a shoal
    # command: the seconds before machine-c's tick are this test's budget).
    assert waiting_c.poll() is None
    assert [w[1] for w in team.waiters()] == ["machine-c"]
    assert team.allocation(served_b)["host"] == "machine-b"

    b.ok("free", served_b)
    rang = time.monotonic()
    code, out, err = finished(waiting_c, 30)
    latency = time.monotonic() - rang
    assert code == 0, err
    served_c = team.allocation(out.strip())
    assert served_c["host"] == "machine-c"
    assert when(served_c["created"]) < next_tick, (
        f"machine-c was served {latency:.2f}s after machine-b's free, at its own tick: "
        "not rung across machines"
    )
    shown = {(r["id"], r["host"], r["status"]) for r in a.listed("--all")}
    assert shown == {
        (held, "machine-a", "FREED"),
        (served_b, "machine-b", "FREED"),
        (served_c["id"], "machine-c", "ALLOCATED"),
    }


def test_bookings_from_two_machines_on_a_team_capacity_do_not_overlap(
    make_team: MakeTeam,
) -> None:
    team = make_team(team_cpu=1)
    a, b, c = team["a"], team["b"], team["c"]
    window = ("--lifetime", "1h")
    first = a.run(*request(TEAM_DRIVER, 1, "--at", "+1h", *window))
    assert first.returncode == 0, first.stderr
    overlapping = b.run(*request(TEAM_DRIVER, 1, "--at", "+90m", *window))
    assert overlapping.returncode == 75, overlapping.stderr
    assert "no capacity for test/team" in one_line(overlapping.stderr)
    after = c.run(*request(TEAM_DRIVER, 1, "--at", "+2h", *window))  # where the first ends
    assert after.returncode == 0, after.stderr
    booked = {row["host"] for row in b.listed() if row["status"] == "RESERVED"}
    assert booked == {"machine-a", "machine-c"}


# -- 4. a machine that dies ------------------------------------------------------------------


def test_a_dead_machines_waiter_gives_way_once_its_lease_runs_out(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    team = make_team(team_cpu=1)
    a, b, c = team["a"], team["b"], team["c"]
    held = a.ok(*request(TEAM_DRIVER)).strip()
    dying = b.spawn(procs, *request(TEAM_DRIVER, 1, "--wait"))
    team.queued("machine-b")
    waiting_c = c.spawn(procs, *request(TEAM_DRIVER, 1, "--wait"))
    team.queued("machine-c")

    dying.kill()  # machine-b dies: its shoal no longer renews the lease on its place
    dying.wait(10)
    # Another machine cannot judge machine-b's pid: until the lease runs out, the place stays.
    a.ok("status")
    assert [w[1] for w in team.waiters()] == ["machine-b", "machine-c"]

    team.sql(f"UPDATE {SCHEMA}.waiters SET lease = %s WHERE host = 'machine-b'", (past(),))
    a.ok("free", held)
    code, out, err = finished(waiting_c, 30)
    assert code == 0, err
    assert team.allocation(out.strip())["host"] == "machine-c"
    assert team.waiters() == []


def kill_mid_alloc(
    team: Team, machine: Machine, procs: list[subprocess.Popen[str]], driver: str
) -> str:
    """An `alloc` on `machine` killed (-9) while its driver works: its ALLOCATING row."""
    stalled = machine.spawn(procs, *request(driver, 1, "-o", "delay_allocate=60"))
    rows = wait_for(lambda: team.in_flight(machine.host), f"{machine.host}'s allocation", 30)
    stalled.kill()
    stalled.wait(10)
    return str(rows[0])


def test_a_dead_machines_team_allocation_is_orphaned_and_cleaned_up_once_its_lease_runs_out(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    team = make_team(team_cpu=1)
    a, b = team["a"], team["b"]
    half_made = kill_mid_alloc(team, b, procs, TEAM_DRIVER)

    # Its lease still runs: machine-b may only be slow, and its row holds the room.
    assert a.run(*request(TEAM_DRIVER)).returncode == 75
    assert team.allocation(half_made)["status"] == "ALLOCATING"

    team.sql(f"UPDATE {SCHEMA}.allocations SET lease = %s WHERE id = %s", (past(), half_made))
    # Any machine sweeps it (ORPHANED) and, a team driver's, cleans it up: its room is back.
    swept = a.run("status")
    assert swept.returncode == 0, swept.stderr
    assert f"allocation {half_made} was interrupted" in swept.stderr
    row = team.allocation(half_made)
    assert row["status"] == "FAILED"
    assert "on machine-b stopped renewing its lease during allocating" in row["note"]
    assert a.run(*request(TEAM_DRIVER)).returncode == 0


def test_a_dead_machines_machine_scoped_allocation_is_orphaned_until_that_machine_cleans_it(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    team = make_team(machine_cpu=1)
    a, b = team["a"], team["b"]
    half_made = kill_mid_alloc(team, b, procs, MACHINE_DRIVER)
    team.sql(f"UPDATE {SCHEMA}.allocations SET lease = %s WHERE id = %s", (past(), half_made))

    # machine-a sweeps it but cannot reach its workload: ORPHANED, holding machine-b's room
    # (not machine-a's) until machine-b's next command cleans it up.
    shown = {row["id"]: (row["status"], row["host"]) for row in a.listed()}
    assert shown == {half_made: ("ORPHANED", "machine-b")}
    assert a.run(*request(MACHINE_DRIVER)).returncode == 0
    again = b.run(*request(MACHINE_DRIVER))
    assert again.returncode == 0, again.stderr
    assert f"allocation {half_made} was interrupted" in again.stderr
    assert team.allocation(half_made)["status"] == "FAILED"


# -- 5. faults -------------------------------------------------------------------------------


def restartable(cluster: Cluster) -> None:
    if cluster.dir is None:
        pytest.skip("SHOAL_TEST_PG_URL names an existing server, which this run cannot restart")


def test_a_server_restarted_between_two_commands(make_team: MakeTeam) -> None:
    team = make_team(team_cpu=2)
    restartable(team.cluster)
    a, b = team["a"], team["b"]
    first = a.ok(*request(TEAM_DRIVER)).strip()
    team.cluster.restart()
    second = b.ok(*request(TEAM_DRIVER)).strip()
    assert {row["id"] for row in a.listed()} == {first, second}


def test_a_waiter_outlives_a_server_restart_and_is_served(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    team = make_team(team_cpu=1)
    restartable(team.cluster)
    a, b = team["a"], team["b"]
    held = a.ok(*request(TEAM_DRIVER)).strip()
    waiting = b.spawn(procs, *request(TEAM_DRIVER, 1, "--wait"))
    team.queued("machine-b")

    team.cluster.restart()
    assert waiting.poll() is None
    a.ok("free", held)
    code, out, err = finished(waiting, 45)
    assert code == 0, err
    assert team.allocation(out.strip())["host"] == "machine-b"


def test_a_session_terminated_mid_alloc_is_made_again(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    team = make_team(team_cpu=1)
    a = team["a"]
    alloc = a.spawn(procs, *request(TEAM_DRIVER, 1, "-o", "delay_allocate=2"))
    wait_for(lambda: team.in_flight("machine-a"), "the allocation to be in flight", 30)
    sessions = team.shoal_sessions()
    assert sessions
    for backend in sessions:
        team.cluster.terminate(backend)
    code, out, err = finished(alloc, 60)
    assert code == 0, err
    assert team.allocation(out.strip())["status"] == "ALLOCATED"


def test_a_waiter_whose_sessions_are_terminated_is_still_served(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    team = make_team(team_cpu=1)
    a, b = team["a"], team["b"]
    held = a.ok(*request(TEAM_DRIVER)).strip()
    waiting = b.spawn(procs, *request(TEAM_DRIVER, 1, "--wait"))
    team.queued("machine-b")
    sessions = team.shoal_sessions()
    assert len(sessions) >= 2  # its ledger session and its doorbell's LISTEN
    for backend in sessions:
        team.cluster.terminate(backend)

    a.ok("free", held)
    code, out, err = finished(waiting, 45)
    assert code == 0, err
    assert team.allocation(out.strip())["host"] == "machine-b"


def files(home: Path) -> set[str]:
    """The files under `home` (every command makes the state dir itself)."""
    return {str(p.relative_to(home)) for p in home.rglob("*") if not p.is_dir()}


@pytest.mark.parametrize("args", [request(TEAM_DRIVER), ("status",)])
def test_an_unreachable_server_at_start(make_team: MakeTeam, args: tuple[str, ...]) -> None:
    team = make_team()
    a = team["a"]
    before = files(a.home)
    closed = f"postgresql://shoal@127.0.0.1:{free_port()}/{team.db}"
    done = a.run(*args, env={"SHOAL_LEDGER_URL": closed})
    assert done.returncode == 69, done.stderr
    line = one_line(done.stderr)
    assert "is unreachable" in line and "127.0.0.1" in line
    assert done.stdout == ""
    assert files(a.home) == before  # no SQLite ledger, no host id, no workspace


@pytest.mark.parametrize("args", [request(TEAM_DRIVER), ("status",)])
def test_a_wrong_password_is_a_credentials_error_that_never_shows_it(
    make_team: MakeTeam, tmp_path: Path, args: tuple[str, ...]
) -> None:
    team = make_team()
    wrong = f"Wr0ng-{os.urandom(6).hex()}"
    url = team.url.replace("shoal@", f"shoal:{wrong}@")
    done = team["a"].run(
        *args, env={"SHOAL_LEDGER_URL": url, "PGPASSFILE": str(tmp_path / "no-pgpass")}
    )
    assert done.returncode == 77, done.stderr
    line = one_line(done.stderr)
    assert "refused the credentials" in line
    for secret in (wrong, team.cluster.password):
        assert secret not in done.stdout + done.stderr


HOLDER = """
import sys, time, psycopg
conn = psycopg.connect(sys.argv[1], autocommit=True, application_name="lock-holder")
conn.execute("BEGIN")
conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (int(sys.argv[2]), int(sys.argv[3])))
print("locked", flush=True)
time.sleep(600)
"""


def test_a_killed_client_holding_the_write_lock_releases_it(
    make_team: MakeTeam, procs: list[subprocess.Popen[str]]
) -> None:
    from drivers.ledger.pg import LOCK_SPACE, WRITE_LOCK

    team = make_team(team_cpu=1)
    a = team["a"]
    a.ok("status")  # the schema exists: the allocation below waits only for the lock
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, team.url, str(LOCK_SPACE), str(WRITE_LOCK)],
        env={**os.environ, **team.cluster.env},
        stdout=subprocess.PIPE,
        text=True,
    )
    procs.append(holder)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"

    alloc = a.spawn(procs, *request(TEAM_DRIVER))
    wait_for(team.lock_waiters, "the allocation to wait for the write lock", 30)
    assert alloc.poll() is None
    os.kill(holder.pid, signal.SIGKILL)
    killed = time.monotonic()
    code, out, err = finished(alloc, 30)
    assert code == 0, err
    assert time.monotonic() - killed < 10  # the lock went with the session, not a timeout
    assert team.allocation(out.strip())["status"] == "ALLOCATED"
