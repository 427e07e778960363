"""Ctrl-C and kill -9 at any instant of `shoal alloc --driver azure/lab` and `shoal free`:
never a VM, NIC, public IP, disk or role assignment that shoal does not know about, never
exit 130 holding a live allocation, never a row FREED while its VM lives. Real shoal
processes against the loopback Resource Manager (standin.py), whose PUTs are carried out a
moment after they came (`delay`: ARM takes a request whose client died mid-way all the
same) and whose creates and deletes last a moment in each state (`timing`).

After each signal the next commands (whose recovery settles what a dead shoal left) must
bring the ledger and the subscription to agree once ARM's operations have ended: every
VM, NIC, public IP and disk tagged with or named for a `shoal-` allocation, and every role
assignment named for one, belongs to an ALLOCATED row, and every ALLOCATED row has its VM.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from drivers.azure.driver import role_assignment_name
from drivers.azure.driver import vm_name as name_of
from tests.conftest import spawn, wait_for
from tests.drivers.azure.runs import DRIVER, PARTS, Cli
from tests.drivers.azure.standin import RESOURCE_GROUP, ArmStandin, Timing

pytestmark = pytest.mark.slow

ALLOC = ("alloc", "--driver", DRIVER, "--cpu", "2", "--ram", "8", "--lifetime", "1h")
PUBLIC = (*ALLOC, "-o", "public_ip=true")  # the VM makes its NIC and public IP itself
NIC_PUT = "NetworkInterfaces_CreateOrUpdate"
VM_PUT = "VirtualMachines_CreateOrUpdate"
ROLE_PUT = "RoleAssignments_Create"
VM_DELETE = "VirtualMachines_Delete"
ROLE_DELETE = "RoleAssignments_Delete"
POLL = "AsyncOperation_Get"
TAGS = "Disks_Update"
HELD_CALLS = (NIC_PUT, VM_PUT, TAGS, ROLE_PUT, VM_DELETE)
INTERRUPTED = "shoal: error: interrupted"
# Each state of a create (and a delete) lasts a moment, so that offsets land in each (the
# driver asks an operation again 0.25 s after it last did, at the soonest).
SLOW = Timing(vm_create=0.4, vm_delete=0.4, network=0.1, disk=0.05)
# The PUTs, the disk's tags and the VM's DELETE: ARM carries them out this long after they
# came (and answers then).
HELD = 0.15
NOTES = "azure-creates"


@pytest.fixture
def slow(azure_arm: ArmStandin) -> ArmStandin:
    azure_arm.timing = SLOW
    for operation in (NIC_PUT, VM_PUT, TAGS, ROLE_PUT):
        azure_arm.delay[operation] = HELD
    return azure_arm


# --- what the ledger and the subscription hold ------------------------------------------------


def ledger(cli: Cli, env: dict[str, str]) -> dict[str, str]:
    """id -> status, as the next command sees it (its recovery runs first)."""
    listing = cli("status", "--all", "--json", env=env)
    assert listing.exit_code == 0, listing.stderr
    return {r["id"]: r["status"] for r in listing.json()}


def held(azure_arm: ArmStandin, ids: set[str]) -> dict[str, set[str]]:
    """Allocation id ("?" for a `shoal-` name no row has) -> what the subscription holds for
    it: VMs, NICs, public IPs and disks by their tag or name, role assignments by name."""
    by_name = {name_of(i): i for i in ids}
    by_role = {role_assignment_name(i): i for i in ids}
    out: dict[str, set[str]] = {}
    for kind in PARTS:
        for res in azure_arm.resources(kind):
            name = str(res["name"])
            tagged = (res.get("tags") or {}).get("shoal-allocation")
            stem = name.removesuffix("-nic").removesuffix("-ip").removesuffix("-os")
            if tagged or name.startswith("shoal-"):
                owner = tagged or by_name.get(stem, "?")
                out.setdefault(owner, set()).add(f"{kind.rsplit('/', 1)[-1]}/{name}")
    with azure_arm.lock:
        assignments = [str(a["name"]) for a in azure_arm.authz.assignments.values()]
    for name in assignments:
        if name in by_role:
            out.setdefault(by_role[name], set()).add(f"roleAssignments/{name}")
    return out


def finish_operations(azure_arm: ArmStandin) -> None:
    """Every request the stand-in holds is carried out (a PUT whose caller is gone), and
    every operation reaches its end: what a cleanup missed shows now."""
    wait_for(
        lambda: all(s.status for op in HELD_CALLS for s in azure_arm.calls(op)),
        "the stand-in's held requests",
    )
    azure_arm.advance(5)


def sent_ids(azure_arm: ArmStandin) -> set[str]:
    """The allocation ids of every VM PUT sent (what a role assignment may be named for)."""
    return {s.path.rsplit("/", 1)[-1].removeprefix("shoal-") for s in azure_arm.calls(VM_PUT)}


def check(azure_arm: ArmStandin, rows: dict[str, str], what: object) -> None:
    """The invariant, once ARM's operations have ended."""
    finish_operations(azure_arm)
    agree(azure_arm, rows, what)


def agree(azure_arm: ArmStandin, rows: dict[str, str], what: object) -> None:
    """What the subscription holds for shoal is what the ALLOCATED rows hold."""
    found = held(azure_arm, set(rows) | sent_ids(azure_arm))
    unknown = {a: parts for a, parts in found.items() if rows.get(a) != "ALLOCATED"}
    assert not unknown, ("unknown resources", what, rows, unknown)
    for alloc_id, status in rows.items():
        if status == "ALLOCATED":
            vm = azure_arm.compute.vm(RESOURCE_GROUP, name_of(alloc_id))
            assert vm is not None, ("an ALLOCATED row without its VM", what, rows)


def age_note(home: Path, alloc_id: str, seconds: float) -> None:
    note = home / "state" / NOTES / f"{alloc_id}.json"
    kept = json.loads(note.read_text())
    note.write_text(json.dumps({**kept, "sent": time.time() - seconds}))


def settle(home: Path, azure_arm: ArmStandin, cli: Cli, env: dict[str, str]) -> dict[str, str]:
    """The next commands, until no row is left ORPHANED; ARM's operations end between them.
    A row kept ORPHANED by a create note in doubt (a PUT sent and never answered, which ARM
    may still carry out) waits out the doubt window: once every held request is carried
    out its note is aged, as time would."""
    rows = ledger(cli, env)
    for _ in range(5):
        orphans = [a for a, s in rows.items() if s == "ORPHANED"]
        if not orphans:
            return rows
        finish_operations(azure_arm)
        for alloc_id in orphans:
            if (home / "state" / NOTES / f"{alloc_id}.json").exists():
                age_note(home, alloc_id, 3600)
        rows = ledger(cli, env)
    raise AssertionError(f"rows never settled: {rows}")


def before_shoal(code: int, err: str) -> bool:
    """SIGINT before Python's handler was in place kills it outright (a shell says 130),
    or startup reports it: nothing of shoal's ran."""
    return code == -signal.SIGINT or (
        code == 1 and ("init_import_site" in err or "Could not import runpy" in err)
    )


# --- signals at an instant ------------------------------------------------------------------

# So long after the next call of this operation (None: the start; STDOUT: the outcome printed).
Spot = tuple[str | None, float]
STDOUT = "stdout"


def signalled(
    home: Path,
    procs: list[subprocess.Popen[str]],
    azure_arm: ArmStandin,
    env: dict[str, str],
    args: tuple[str, ...],
    spot: Spot,
    sig: signal.Signals,
) -> tuple[int, str, str]:
    """A real `shoal ARGS` given `sig` at `spot`: its exit code, stdout and stderr."""
    method, after = spot
    before = len(azure_arm.calls(method)) if method else 0
    proc = spawn(home, procs, *args, env=env)
    said = ""
    if method == STDOUT:
        assert proc.stdout is not None
        said = proc.stdout.readline()
    elif method:
        wait_for(
            lambda: len(azure_arm.calls(method)) > before or proc.poll() is not None,
            method,
            60,
            0.002,
        )
    time.sleep(after)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, said + out, err


# The start; planning (the Resource SKUs); the NIC's PUT in flight (ARM carries it out
# HELD s after it came) and followed; the VM's PUT in flight and followed (Creating); the
# disk's tags (in the middle of their PATCH: not at the edge of the role assignment's PUT,
# where the signal may land before its request is on the wire, which no cleanup can tell
# from one ARM takes later); the role assignment's PUT in flight and done; the outcome
# printed. The same with a public IP, which the VM's PUT makes.
ALLOC_SPOTS: list[tuple[tuple[str, ...], Spot]] = [
    (ALLOC, (None, 0.2)),
    (ALLOC, ("ResourceSkus_List", 0.0)),
    (ALLOC, (NIC_PUT, 0.0)),
    (ALLOC, (NIC_PUT, HELD * 0.6)),
    (ALLOC, (NIC_PUT, HELD + 0.1)),
    (ALLOC, (VM_PUT, 0.0)),
    (ALLOC, (VM_PUT, HELD * 0.6)),
    (ALLOC, (VM_PUT, HELD + 0.1)),
    (ALLOC, (VM_PUT, HELD + 0.35)),
    (ALLOC, (TAGS, HELD * 0.5)),
    (ALLOC, (ROLE_PUT, 0.0)),
    (ALLOC, (ROLE_PUT, HELD * 0.6)),
    (ALLOC, (ROLE_PUT, HELD + 0.05)),
    (PUBLIC, (VM_PUT, HELD * 0.6)),
    (PUBLIC, (VM_PUT, HELD + 0.2)),
    (ALLOC, (STDOUT, 0.0)),
]


def test_ctrl_c_at_any_instant_of_alloc_leaves_nothing_unknown(
    home: Path,
    procs: list[subprocess.Popen[str]],
    slow: ArmStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    outcomes = {0: 0, 130: 0, -1: 0}
    allocated = 0
    for args, spot in ALLOC_SPOTS:
        what = (args[-1], spot)
        code, out, err = signalled(home, procs, slow, env, args, spot, signal.SIGINT)
        early = before_shoal(code, err)
        assert code in (0, 130) or early, (what, code, err)
        outcomes[-1 if early else code] += 1
        if code == 130:
            assert out == "" and err.strip() == INTERRUPTED, (what, out, err)
            # Its cleanup settled it: nothing left to the next command.
            assert "ORPHANED" not in ledger(cli, env).values(), (what, err)
        rows = settle(home, slow, cli, env)
        check(slow, rows, (what, code, err))
        if code == 0:
            assert rows[out.strip()] == "ALLOCATED", (what, out, err)
            allocated += 1
        # Never 130 holding a live allocation.
        assert sum(1 for s in rows.values() if s == "ALLOCATED") == allocated, (what, rows)
    assert outcomes[0] and outcomes[130], outcomes
    # Some were interrupted with their VM made: their cleanup deleted it.
    assert any(e[0] == "deleted" and "virtualMachines" in e[1] for e in slow.events)


def test_kill_9_at_any_instant_of_alloc_is_settled_by_the_next_command(
    home: Path,
    procs: list[subprocess.Popen[str]],
    slow: ArmStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    for args, spot in ALLOC_SPOTS[1:-1]:
        what = (args[-1], spot)
        code, out, err = signalled(home, procs, slow, env, args, spot, signal.SIGKILL)
        assert code in (-signal.SIGKILL, 0), (what, code, err)
        rows = settle(home, slow, cli, env)
        check(slow, rows, (what, code, err))
        if code == 0:
            assert rows[out.strip()] == "ALLOCATED", (what, out, err)
    assert any(e[0] == "deleted" and "virtualMachines" in e[1] for e in slow.events)


# --- free -----------------------------------------------------------------------------------

# The VM's DELETE in flight (ARM carries it out HELD s after it came); Deleting; about done;
# the role assignment's DELETE (after the VM's).
FREE_SPOTS: list[Spot] = [
    (VM_DELETE, 0.0),
    (VM_DELETE, HELD + 0.1),
    (VM_DELETE, HELD + 0.45),
    (ROLE_DELETE, 0.0),
]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_a_signal_at_any_instant_of_free_never_leaves_freed_with_its_vm_alive(
    home: Path,
    procs: list[subprocess.Popen[str]],
    azure_arm: ArmStandin,
    env: dict[str, str],
    cli: Cli,
    sig: signal.Signals,
) -> None:
    made = []
    for _ in FREE_SPOTS:
        run = cli(*ALLOC, env=env)
        assert run.exit_code == 0, run.stderr
        made.append(run.stdout.strip())
    azure_arm.timing = SLOW
    azure_arm.delay[VM_DELETE] = HELD
    outcomes: dict[int, int] = {}
    for spot, alloc_id in zip(FREE_SPOTS, made, strict=True):
        code, _, err = signalled(home, procs, azure_arm, env, ("free", alloc_id), spot, sig)
        early = sig == signal.SIGINT and before_shoal(code, err)
        assert code in (0, 130, -signal.SIGKILL) or early, (spot, code, err)
        outcomes[code] = outcomes.get(code, 0) + 1
        if code == 130:
            assert err.strip() == INTERRUPTED, (spot, err)
        rows = ledger(cli, env)
        name = name_of(alloc_id)
        if code == 0 or rows[alloc_id] == "FREED":  # said freed, or interrupted once it was
            # Its delete ended: the VM is gone, not merely on its way.
            assert azure_arm.compute.vm(RESOURCE_GROUP, name) is None, (spot, err)
        # Freeing again ends it, whatever the signal left.
        again = cli("free", alloc_id, env=env)
        assert again.exit_code == 0, (spot, again.stderr)
        assert azure_arm.compute.vm(RESOURCE_GROUP, name) is None, (spot, code, err)
        rows = ledger(cli, env)
        assert rows[alloc_id] == "FREED", (spot, rows)
        check(azure_arm, rows, (spot, code, err))
        assert cli("free", alloc_id, env=env).exit_code == 0  # and again: nothing to do
    assert outcomes.get(130 if sig == signal.SIGINT else -signal.SIGKILL), outcomes


# --- a PUT ARM carries out later than the cleanup waits ----------------------------------------

STUCK = 12.0  # longer than the cleanup waits for a PUT on the wire to show (GRACE_SECONDS)


def test_a_vm_put_arm_carries_out_after_the_cleanup_is_left_to_the_next_command(
    home: Path,
    procs: list[subprocess.Popen[str]],
    azure_arm: ArmStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    # Two allocs whose VM's PUT ARM holds for STUCK s, then carries out (with a public IP:
    # the VM makes its NIC and IP, so it is made whatever the cleanup deleted meanwhile).
    # Both are given Ctrl-C; the second is killed while its cleanup looks for the VM.
    azure_arm.delay[VM_PUT] = STUCK
    waited = spawn(home, procs, *PUBLIC, env=env)
    wait_for(lambda: azure_arm.calls(VM_PUT), "the first VM's PUT")
    waited.send_signal(signal.SIGINT)
    # A second apart: the stand-in checks their bodies one at a time (contract.py fills a
    # model's schema the first time it is used, unguarded by any lock).
    time.sleep(1.0)
    killed = spawn(home, procs, *PUBLIC, env=env)
    wait_for(lambda: len(azure_arm.calls(VM_PUT)) == 2, "the second VM's PUT")
    second = azure_arm.calls(VM_PUT)[1].path
    killed.send_signal(signal.SIGINT)  # its cleanup looks for the VM, Ctrl-C held
    wait_for(
        lambda: any(s.path == second for s in azure_arm.calls("VirtualMachines_Get")),
        "its cleanup",
    )
    killed.kill()
    killed.communicate(timeout=30)
    ids = {s.path.rsplit("/", 1)[-1].removeprefix("shoal-") for s in azure_arm.calls(VM_PUT)}
    try:
        out, err = waited.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        raise AssertionError("Ctrl-C still unanswered after 30 s") from None
    assert waited.returncode == 130, err
    assert out == "" and err.strip().splitlines()[-1] == INTERRUPTED
    assert "the next shoal command deletes what it made" in err, err
    # Neither recorded FAILED: the next command's recovery keeps looking.
    assert ledger(cli, env) == dict.fromkeys(ids, "ORPHANED")
    finish_operations(azure_arm)  # ARM carries the PUTs out at last: the VMs are made
    made = held(azure_arm, ids)
    assert [len(made[i]) for i in ids] == [4, 4], made  # VM, NIC, IP, disk
    rows = settle(home, azure_arm, cli, env)  # the next command deletes them
    assert rows == dict.fromkeys(ids, "FAILED")
    check(azure_arm, rows, "held")
    assert not list((home / "state" / NOTES).glob("*.json"))


def test_kill_9_while_arm_holds_the_role_assignment_keeps_the_row_until_it_is_deleted(
    home: Path,
    procs: list[subprocess.Popen[str]],
    azure_arm: ArmStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    # The VM is made; its role assignment's PUT is on the wire when shoal dies, and ARM
    # carries it out after the next command's recovery: that recovery must not call the
    # allocation settled (an assignment nobody knows would stay behind).
    azure_arm.delay[ROLE_PUT] = 2.0
    code, _, err = signalled(home, procs, azure_arm, env, ALLOC, (ROLE_PUT, 0.0), signal.SIGKILL)
    assert code == -signal.SIGKILL, err
    (alloc_id,) = ledger(cli, env)
    assert ledger(cli, env) == {alloc_id: "ORPHANED"}
    rows = settle(home, azure_arm, cli, env)
    assert rows == {alloc_id: "FAILED"}
    check(azure_arm, rows, "role assignment held")


# --- a cleanup whose deletes fail -----------------------------------------------------------


def test_ctrl_c_whose_cleanup_cannot_delete_the_vm_leaves_it_to_the_next_command(
    home: Path,
    procs: list[subprocess.Popen[str]],
    slow: ArmStandin,
    env: dict[str, str],
    cli: Cli,
) -> None:
    # ARM refuses the cleanup's deletes of the VM (another operation holds it): the row is
    # not recorded FAILED with the VM alive, but left to the next command, which ends it.
    slow.fail_http(409, operation=VM_DELETE, times=2, code="Conflict", message="busy")
    code, out, err = signalled(home, procs, slow, env, ALLOC, (VM_PUT, HELD + 0.1), signal.SIGINT)
    assert code == 130 and out == "", err
    assert err.strip().splitlines()[-1] == INTERRUPTED
    assert "could not delete" in err and "the next shoal command" in err, err
    (alloc_id,) = ledger(cli, env)
    rows = settle(home, slow, cli, env)
    assert rows == {alloc_id: "FAILED"}
    check(slow, rows, "refused deletes")


def test_free_of_a_failed_allocation_ends_what_its_cleanup_could_not(
    home: Path, cli: Cli, azure_arm: ArmStandin, env: dict[str, str]
) -> None:
    # The VM's create fails in Azure and every delete of the VM is refused: the alloc fails,
    # and its warning names `shoal free ID`. An hour later another alloc has pruned old
    # notes; `free ID` still finds what was left, in the resource group the alloc named.
    azure_arm.add_resource_group("other-rg")
    azure_arm.compute.fail_create("AllocationFailed")
    azure_arm.fail_http(409, operation=VM_DELETE, times=3, code="Conflict", message="busy")
    run = cli(*ALLOC, "-o", "resource_group=other-rg", env=env)
    assert run.exit_code == 75, run.stderr
    (alloc_id,) = ledger(cli, env)
    assert f"shoal free {alloc_id}" in run.stderr, run.stderr
    assert ledger(cli, env) == {alloc_id: "FAILED"}
    assert held(azure_arm, {alloc_id})[alloc_id]
    age_note(home, alloc_id, 3600)
    other = cli(*ALLOC, env=env)
    assert other.exit_code == 0, other.stderr
    freed = cli("free", alloc_id, env=env)
    assert freed.exit_code == 0, freed.stderr
    assert "allocation had failed, but left" in freed.stderr + freed.stdout, freed
    rows = ledger(cli, env)
    assert rows[alloc_id] == "FAILED"
    check(azure_arm, rows, "leftovers")
    again = cli("free", alloc_id, env=env)
    assert again.exit_code == 0 and "nothing held" in again.stderr + again.stdout, again


# --- retries ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("operation", "status"),
    [
        (NIC_PUT, 503),
        (VM_PUT, 0),
        (ROLE_PUT, 0),
        (TAGS, 503),
        (VM_DELETE, 0),
        (ROLE_DELETE, 503),
    ],
)
def test_a_call_carried_out_whose_answer_was_lost_is_the_same_when_retried(
    cli: Cli, azure_arm: ArmStandin, env: dict[str, str], operation: str, status: int
) -> None:
    # ARM carries the call out and its answer is lost (0: the connection drops): the retry
    # names the same resource, so alloc makes one of each, and free ends them all.
    azure_arm.fail_http(status, operation=operation, apply=True)
    run = cli(*ALLOC, env=env)
    assert run.exit_code == 0, run.stderr
    alloc_id = run.stdout.strip()
    assert len(azure_arm.calls(operation)) == (0 if "Delete" in operation else 2)
    made = held(azure_arm, {alloc_id})[alloc_id]
    assert len(made) == 4 and len(azure_arm.authz.assignments) == 1, made  # VM NIC disk role
    freed = cli("free", alloc_id, env=env)
    assert freed.exit_code == 0, freed.stderr
    assert len(azure_arm.calls(operation)) == 2
    rows = ledger(cli, env)
    assert rows == {alloc_id: "FREED"}
    azure_arm.advance(5)  # (a dropped answer's call never says its status: not waited for)
    agree(azure_arm, rows, operation)
    assert cli("free", alloc_id, env=env).exit_code == 0
