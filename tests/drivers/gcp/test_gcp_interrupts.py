"""Ctrl-C and kill -9 at any instant of `shoal alloc --driver gcp` and `shoal free`: never a
running VM that shoal does not know about, never exit 130 holding a live allocation, never
a row FREED while its VM lives. Real shoal processes against the loopback Compute Engine
(standin.py), whose inserts take a moment in each state: the insert call itself (`delay`:
Google carries the request out a moment after it came, whether or not anyone still waits
for the answer), PENDING (the VM in no list yet, a get or delete of it a 404), RUNNING (the
VM listed, PROVISIONING then STAGING), DONE.

After each signal the next commands (whose recovery settles what a dead shoal left) must
bring the ledger and the project to agree once Google's operations have ended: every VM
carrying a `shoal-allocation` label is ALLOCATED in the ledger, and every ALLOCATED row
has its VM.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Run, spawn, wait_for
from tests.drivers.gcp.standin import TOKEN, ComputeStandin, Timing, insert_body
from tests.providers.apiserver import ApiServer
from tests.providers.gcp import payloads as p

pytestmark = pytest.mark.slow

Cli = Callable[..., Run]
Proc = Callable[..., "subprocess.CompletedProcess[str]"]
ZONE = "us-central1-a"
ALLOC = ("alloc", "--driver", "gcp", "-o", "machine_type=e2-standard-2", "--lifetime", "1h")
INSERT = "compute.instances.insert"
DELETE = "compute.instances.delete"
INTERRUPTED = "shoal: error: interrupted"
# Each state of an insert (and a delete) lasts a moment, so that offsets land in each.
SLOW = Timing(pending=0.3, provision=0.15, stage=0.15, stop=0.15)
HELD = 0.15  # the insert and delete calls: Google carries them out this long after they came
STUCK = Timing(pending=1800, provision=0.2, stage=0.2)  # an insert PENDING for half an hour
FAST = Timing()


@pytest.fixture
def billing() -> Iterator[ApiServer]:
    with ApiServer() as server:
        server.route(p.SKUS_PATH, p.skus_handler(p.pages(p.catalog(), 50)))
        yield server


@pytest.fixture
def env(gce: ComputeStandin, billing: ApiServer) -> dict[str, str]:
    """What a user would set (real shoal processes take the driver's own retry policy)."""
    return {
        "SHOAL_GCP_TOKEN": TOKEN,
        "SHOAL_GCP_PROJECT": gce.project,
        "SHOAL_GCP_COMPUTE_URL": gce.base,
        "SHOAL_GCP_BILLING_URL": billing.base,
        "SHOAL_GCP_API_KEY": p.API_KEY,
    }


@pytest.fixture
def slow(gce: ComputeStandin) -> ComputeStandin:
    gce.timing = SLOW
    gce.delay[INSERT] = HELD
    return gce


# --- what the ledger and the project hold ---------------------------------------------------


def ledger(cli: Cli, env: dict[str, str]) -> dict[str, str]:
    """id -> status, as the next command sees it (its recovery runs first)."""
    listing = cli("status", "--all", "--json", env=env)
    assert listing.exit_code == 0, listing.stderr
    return {r["id"]: r["status"] for r in listing.json()}


def vms(gce: ComputeStandin) -> dict[str, str]:
    """Allocation id -> instance name of every VM of the project carrying shoal's label
    and not being deleted."""
    return {
        i["labels"]["shoal-allocation"]: i["name"]
        for i in gce.instances()
        if "shoal-allocation" in i.get("labels", {}) and i["status"] != "STOPPING"
    }


def finish_operations(gce: ComputeStandin) -> None:
    """Every request the stand-in holds is carried out (an insert whose caller is gone),
    and every operation reaches its end: a VM a cleanup missed shows now."""
    wait_for(lambda: all(s.status for s in gce.calls(INSERT) + gce.calls(DELETE)),
             "the stand-in's held requests")  # fmt: skip
    gce.advance(5)


def check(gce: ComputeStandin, rows: dict[str, str], what: object) -> None:
    """The invariant, once Google's operations have ended."""
    finish_operations(gce)
    live = vms(gce)
    assert not {a for a in live if rows.get(a) != "ALLOCATED"}, ("unknown VM", what, rows, live)
    assert {a for a, s in rows.items() if s == "ALLOCATED"} <= set(live), (what, rows, live)


def settle(home: Path, gce: ComputeStandin, cli: Cli, env: dict[str, str]) -> dict[str, str]:
    """The next commands, until no row is left ORPHANED; Google's operations end between
    them. A row kept ORPHANED by a launch note whose insert never reached Google (shoal
    died before the request was on the wire) waits out the doubt window: its note is
    aged, as time would."""
    rows = ledger(cli, env)
    for _ in range(5):
        orphans = [a for a, s in rows.items() if s == "ORPHANED"]
        if not orphans:
            return rows
        finish_operations(gce)
        for alloc_id in orphans:
            note = home / "state" / "gcp-inserts" / f"{alloc_id}.json"
            sent = any(
                (s.body or {}).get("labels", {}).get("shoal-allocation") == alloc_id
                for s in gce.calls(INSERT)
            )
            if note.exists() and not sent:
                age_note(home, alloc_id, 3600)
        rows = ledger(cli, env)
    raise AssertionError(f"rows never settled: {rows}")


def age_note(home: Path, alloc_id: str, seconds: float) -> None:
    note = home / "state" / "gcp-inserts" / f"{alloc_id}.json"
    kept = json.loads(note.read_text())
    note.write_text(json.dumps({**kept, "sent": time.time() - seconds}))


def before_shoal(code: int, err: str) -> bool:
    """SIGINT before Python's handler was in place kills it outright (a shell says 130),
    or startup reports it: nothing of shoal's ran."""
    return code == -signal.SIGINT or (
        code == 1 and ("init_import_site" in err or "Could not import runpy" in err)
    )


# --- signals at an instant ------------------------------------------------------------------

# So long after the next call of this method (None: the start; STDOUT: the outcome printed).
Spot = tuple[str | None, float]
STDOUT = "stdout"


def signalled(
    home: Path,
    procs: list[subprocess.Popen[str]],
    gce: ComputeStandin,
    env: dict[str, str],
    args: tuple[str, ...],
    spot: Spot,
    sig: signal.Signals,
) -> tuple[int, str, str]:
    """A real `shoal ARGS` given `sig` at `spot`: its exit code, stdout and stderr."""
    method, after = spot
    before = len(gce.calls(method)) if method else 0
    proc = spawn(home, procs, *args, env=env)
    said = ""
    if method == STDOUT:
        assert proc.stdout is not None
        said = proc.stdout.readline()
    elif method:
        wait_for(lambda: len(gce.calls(method)) > before or proc.poll() is not None,
                 method, 60, 0.002)  # fmt: skip
    time.sleep(after)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, said + out, err


# The start; planning done, the row about to be written; during the insert call (Google
# carries it out HELD s after it came); PENDING (listed nowhere); RUNNING (PROVISIONING,
# STAGING); DONE (the operation's last read); the instance read; around the record; once
# the outcome is printed.
ALLOC_SPOTS: list[Spot] = [
    (None, 0.2),
    ("compute.machineTypes.aggregatedList", 0.0),
    (INSERT, 0.0),
    (INSERT, HELD * 0.6),
    (INSERT, HELD + 0.1),
    (INSERT, HELD + 0.4),
    ("compute.zoneOperations.get", 0.0),
    ("compute.instances.get", 0.0),
    ("compute.instances.get", 0.04),
    (STDOUT, 0.0),
]


def test_ctrl_c_at_any_instant_of_alloc_leaves_no_unknown_vm(
    home: Path,
    procs: list[subprocess.Popen[str]],
    slow: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    outcomes = {0: 0, 130: 0, -1: 0}
    held = 0
    for spot in ALLOC_SPOTS:
        code, out, err = signalled(home, procs, slow, env, ALLOC, spot, signal.SIGINT)
        early = before_shoal(code, err)
        assert code in (0, 130) or early, (spot, code, err)
        outcomes[-1 if early else code] += 1
        if code == 130:
            assert out == "" and err.strip() == INTERRUPTED, (spot, out, err)
        rows = settle(home, slow, cli, env)
        check(slow, rows, (spot, code, err))
        if code == 0:
            assert rows[out.strip()] == "ALLOCATED", (spot, out, err)
            held += 1
        # Never 130 holding a live allocation.
        assert sum(1 for s in rows.values() if s == "ALLOCATED") == held, (spot, code, rows)
    assert outcomes[0] and outcomes[130], outcomes
    # Some were interrupted with their insert under way: their cleanup deleted the VM.
    assert any(e[0] == "deleted" and e[2] == "delete" for e in slow.events), slow.events


def test_kill_9_at_any_instant_of_alloc_is_settled_by_the_next_command(
    home: Path,
    procs: list[subprocess.Popen[str]],
    slow: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    for spot in ALLOC_SPOTS[1:-1]:
        code, out, err = signalled(home, procs, slow, env, ALLOC, spot, signal.SIGKILL)
        assert code in (-signal.SIGKILL, 0), (spot, code, err)
        rows = settle(home, slow, cli, env)
        check(slow, rows, (spot, code, err))
        if code == 0:
            assert rows[out.strip()] == "ALLOCATED", (spot, out, err)
    # Some were killed with their insert under way: the next command deleted the VM.
    assert any(e[0] == "deleted" and e[2] == "delete" for e in slow.events), slow.events


# --- free -----------------------------------------------------------------------------------

# During the delete call; PENDING; STOPPING; DONE; around the record.
FREE_SPOTS: list[Spot] = [
    (DELETE, 0.0),
    (DELETE, HELD + 0.1),
    (DELETE, HELD + 0.35),
    ("compute.zoneOperations.get", 0.0),
    ("compute.zoneOperations.get", 0.03),
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_a_signal_at_any_instant_of_free_never_leaves_freed_with_its_vm_alive(
    home: Path,
    procs: list[subprocess.Popen[str]],
    gce: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
    sig: signal.Signals,
) -> None:
    made = []
    for _ in FREE_SPOTS:
        run = cli(*ALLOC, env=env)
        assert run.exit_code == 0, run.stderr
        made.append(run.stdout.strip())
    gce.timing = SLOW
    gce.delay[DELETE] = HELD
    outcomes: dict[int, int] = {}
    for spot, alloc_id in zip(FREE_SPOTS, made, strict=True):
        code, _, err = signalled(home, procs, gce, env, ("free", alloc_id), spot, sig)
        early = sig == signal.SIGINT and before_shoal(code, err)
        assert code in (0, 130, -signal.SIGKILL) or early, (spot, code, err)
        outcomes[code] = outcomes.get(code, 0) + 1
        if code == 130:
            assert err.strip() == INTERRUPTED, (spot, err)
        rows = ledger(cli, env)
        name = f"shoal-{alloc_id}"
        if code == 0 or rows[alloc_id] == "FREED":  # said freed, or interrupted once it was
            # Its delete DONE: the VM is gone, not merely on its way.
            assert rows[alloc_id] == "FREED" and gce.instance(ZONE, name) is None, (spot, err)
        # Freeing again ends it, whatever the signal left.
        again = cli("free", alloc_id, env=env)
        assert again.exit_code == 0, (spot, again.stderr)
        assert gce.instance(ZONE, name) is None, (spot, code, err)
        rows = ledger(cli, env)
        assert rows[alloc_id] == "FREED", (spot, rows)
        check(gce, rows, (spot, code, err))
        assert cli("free", alloc_id, env=env).exit_code == 0  # and again: nothing to do
    assert outcomes.get(130 if sig == signal.SIGINT else -signal.SIGKILL), outcomes


# --- an insert Google took but lists nowhere yet ----------------------------------------------


def pending_insert(
    home: Path, procs: list[subprocess.Popen[str]], gce: ComputeStandin, env: dict[str, str]
) -> tuple[subprocess.Popen[str], str]:
    """A real `shoal alloc` whose insert Google answered with a PENDING operation, now
    waiting for it: the VM is in no list, and a get or a delete of it is a 404. The
    process and its allocation id."""
    inserts = len(gce.calls(INSERT))
    waits = len(gce.calls("compute.zoneOperations.wait"))
    proc = spawn(home, procs, *ALLOC, env=env)
    (seen,) = wait_for(lambda: [s for s in gce.calls(INSERT)[inserts:] if s.status], "the insert")
    assert seen.status == 200
    alloc_id = str(seen.body["labels"]["shoal-allocation"])
    wait_for(lambda: len(gce.calls("compute.zoneOperations.wait")) > waits, "the insert's wait")
    assert alloc_id not in vms(gce) and gce.instance(ZONE, seen.body["name"]) is None
    return proc, alloc_id


def test_ctrl_c_while_the_insert_is_pending_waits_for_it_then_deletes_the_vm(
    home: Path,
    procs: list[subprocess.Popen[str]],
    gce: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    gce.timing = Timing(pending=1.0, provision=0.2, stage=0.2)
    proc, alloc_id = pending_insert(home, procs, gce, env)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out == "" and err.strip() == INTERRUPTED
    # The cleanup waited for the insert to be DONE, then deleted what it made.
    assert [e[0] for e in gce.events if e[1] == f"{ZONE}/shoal-{alloc_id}"] == [
        "created", "running", "stopping", "deleted",
    ]  # fmt: skip
    assert ledger(cli, env) == {alloc_id: "FAILED"}
    assert not (home / "state" / "gcp-inserts" / f"{alloc_id}.json").exists()
    finish_operations(gce)
    assert vms(gce) == {}


def test_ctrl_c_while_the_insert_stays_pending_leaves_it_to_the_next_command(
    home: Path,
    procs: list[subprocess.Popen[str]],
    gce: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    # PENDING for longer than the cleanup may take (GRACE_SECONDS): not said ended, and the
    # row is not recorded FAILED, so that the next command's recovery keeps looking.
    gce.timing = STUCK
    proc, alloc_id = pending_insert(home, procs, gce, env)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("Ctrl-C still unanswered after 30 s") from None
    assert proc.returncode == 130, err
    assert out == "" and err.strip().splitlines()[-1] == INTERRUPTED
    assert "the next shoal command looks again and deletes it" in err, err
    listing = cli("status", "--all", "--json", env=env)
    assert {r["id"]: r["status"] for r in listing.json()} == {alloc_id: "ORPHANED"}
    assert alloc_id in listing.stderr and "not done yet" in listing.stderr, listing.stderr
    gce.timing = FAST
    gce.advance(STUCK.pending + 5)  # Google runs it at last: the VM shows; the next command ends it
    assert alloc_id in vms(gce)
    assert ledger(cli, env) == {alloc_id: "FAILED"}
    assert vms(gce) == {}


def test_kill_9_while_the_insert_is_pending_keeps_the_row_until_its_vm_is_deleted(
    home: Path,
    procs: list[subprocess.Popen[str]],
    gce: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    gce.timing = STUCK
    proc, alloc_id = pending_insert(home, procs, gce, env)
    proc.kill()
    proc.communicate(timeout=30)
    for _ in range(2):  # asked again at each command while Google has not run it
        listing = cli("status", "--all", "--json", env=env)
        assert {r["id"]: r["status"] for r in listing.json()} == {alloc_id: "ORPHANED"}
        assert alloc_id in listing.stderr, listing.stderr
    gce.timing = FAST
    gce.advance(STUCK.pending + 5)
    assert alloc_id in vms(gce)
    assert ledger(cli, env) == {alloc_id: "FAILED"}
    assert vms(gce) == {}


def test_kill_9_during_the_cleanup_of_a_ctrl_c_is_settled_by_the_next_command(
    home: Path,
    procs: list[subprocess.Popen[str]],
    gce: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    gce.timing = STUCK
    proc, alloc_id = pending_insert(home, procs, gce, env)
    lists = len(gce.calls("compute.zoneOperations.list"))
    proc.send_signal(signal.SIGINT)  # its cleanup looks at the zone's operations, Ctrl-C held
    wait_for(lambda: len(gce.calls("compute.zoneOperations.list")) > lists, "the cleanup")
    proc.kill()
    proc.communicate(timeout=30)
    assert ledger(cli, env) == {alloc_id: "ORPHANED"}
    gce.timing = FAST
    gce.advance(STUCK.pending + 5)
    assert ledger(cli, env) == {alloc_id: "FAILED"}
    assert vms(gce) == {}


def test_an_orphan_pending_for_long_in_a_busy_zone_is_still_found(
    home: Path,
    procs: list[subprocess.Popen[str]],
    gce: ComputeStandin,
    env: dict[str, str],
    cli: Cli,
    shoal_proc: Proc,
) -> None:
    # 500 older insert operations in the zone: the list is oldest first, 500 a page, so the
    # allocation's is on its second page.
    gce.fail_insert("ZONE_RESOURCE_POOL_EXHAUSTED", machine_type="e2-micro", times=None)
    path = f"/compute/v1/projects/{gce.project}/zones/{ZONE}/instances"
    for number in range(500):
        body = json.dumps(insert_body(f"busy-{number}", machine_type="e2-micro")).encode()
        status, _, _ = gce.serve("POST", path, {"authorization": f"Bearer {TOKEN}"}, body)
        assert status == 200
    gce.advance(5)
    gce.timing = STUCK
    proc, alloc_id = pending_insert(home, procs, gce, env)
    proc.kill()
    proc.communicate(timeout=30)
    # Its insert has been PENDING for half an hour: its note is past the doubt window, and
    # only the operation says that an insert is under way.
    age_note(home, alloc_id, STUCK.pending)
    gce.timing = FAST
    # Another alloc: its recovery looks at the orphan, and its own insert must not drop the
    # orphan's note (the zone to look in).
    other = shoal_proc(*ALLOC, env=env)
    assert other.returncode == 0, other.stderr
    assert alloc_id in other.stderr and "not done yet" in other.stderr, other.stderr
    assert ledger(cli, env) == {alloc_id: "ORPHANED", other.stdout.strip(): "ALLOCATED"}
    gce.advance(STUCK.pending + 5)  # Google runs it at last (within the other's lifetime)
    assert alloc_id in vms(gce)
    assert ledger(cli, env)[alloc_id] == "FAILED"
    assert list(vms(gce)) == [other.stdout.strip()]


def test_an_alloc_failing_while_its_insert_is_pending_deletes_the_vm(
    cli: Cli, gce: ComputeStandin, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.gcp import driver
    from providers.cloud.http import RetryPolicy

    # Google cannot be asked how the insert goes (each zoneOperations.wait a 503, retries
    # spent): the alloc fails, and its cleanup waits for the insert before deleting the VM.
    monkeypatch.setattr(driver, "RETRY_POLICY", RetryPolicy(attempts=2, backoff_seconds=0.0))
    gce.timing = Timing(pending=1.0, provision=0.2, stage=0.2)
    gce.fail_http(503, method="compute.zoneOperations.wait", times=2)
    run = cli(*ALLOC, env=env)
    assert run.exit_code not in (0, 130), run.stderr
    (alloc_id,) = ledger(cli, env)
    assert ledger(cli, env) == {alloc_id: "FAILED"}
    assert [e[0] for e in gce.events] == ["created", "running", "stopping", "deleted"]
    finish_operations(gce)
    assert vms(gce) == {}
