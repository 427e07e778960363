"""The `gcp` driver's tasks (`shoal task ID snapshot|image|console`) and `shoal logs` (the
serial console) through the CLI, as users run them, against the loopback Compute Engine
(standin.py, held to the discovery document)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import Run
from tests.drivers.gcp.standin import Client, ComputeStandin

Cli = Callable[..., Run]
ZONE = "us-central1-a"
NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


def allocated(cli: Cli, env: dict[str, str], *args: str) -> dict[str, Any]:
    run = ok(cli("alloc", "--driver", "gcp", "--json", "--cpu", "2", "--ram", "8", *args, env=env))
    made: dict[str, Any] = run.json()
    return made


def task(cli: Cli, env: dict[str, str], ident: str, name: str, options: str = "") -> Run:
    extra = ("--options", options) if options else ()
    return cli("task", ident, name, *extra, env=env)


def vm(made: dict[str, Any]) -> str:
    return str(made["resource"]["metadata"]["instance"])


def serial(api: Client, name: str) -> str:
    found = api.get(api.zonal(ZONE, f"instances/{name}/serialPort")).json()
    return str(found["contents"])


def one_line(run: Run) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


# -- snapshot ---------------------------------------------------------------------------------


def test_snapshot_of_the_boot_disk_is_labelled_and_waited_for(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, api: Client
) -> None:
    made = allocated(cli, env)
    snap = ok(task(cli, env, made["id"], "snapshot", '{"name": "ci-cache"}')).json()
    inst = gce.instance(ZONE, vm(made))
    assert inst is not None
    disk = inst["disks"][0]["source"].rsplit("/", 1)[-1]
    assert snap == {
        "snapshot": f"projects/{gce.project}/global/snapshots/ci-cache",
        "name": "ci-cache",
        "instance": vm(made),
        "zone": ZONE,
        "disk": disk,
        "project": gce.project,
    }
    found = api.get(f"projects/{gce.project}/global/snapshots/ci-cache").json()
    assert found["status"] == "READY"  # the zone operation was followed to DONE
    assert found["sourceDisk"].endswith(f"/zones/{ZONE}/disks/{disk}")
    assert found["labels"] == {"shoal-allocation": made["id"], "shoal-managed-by": "shoal"}
    (seen,) = gce.calls("compute.disks.createSnapshot")
    assert uuid.UUID(seen.query["requestId"][0])
    # Without a name: shoal-ID-TIME, as Google takes names.
    named = ok(task(cli, env, made["id"], "snapshot")).json()["name"]
    assert NAME.fullmatch(named) and named.startswith(f"shoal-{made['id']}-"), named


def test_a_retried_snapshot_makes_one(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, api: Client
) -> None:
    made = allocated(cli, env)
    # The first send is carried out, its answer lost: the retry carries the same requestId.
    gce.fail_http(0, method="compute.disks.createSnapshot", apply=True)
    ok(task(cli, env, made["id"], "snapshot", '{"name": "once"}'))
    sent = gce.calls("compute.disks.createSnapshot")
    assert len(sent) == 2 and sent[0].query["requestId"] == sent[1].query["requestId"]
    listed = api.get(f"projects/{gce.project}/global/snapshots").json()
    assert [s["name"] for s in listed["items"]] == ["once"]


def test_snapshot_options_and_names_google_refuses_are_2(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    made = allocated(cli, env)
    bad = task(cli, env, made["id"], "snapshot", '{"name": "Bad_Name"}')
    assert bad.exit_code == 2 and "name" in one_line(bad) and "Compute Engine name" in bad.stderr
    bad = task(cli, env, made["id"], "snapshot", '{"no_reboot": true}')
    assert bad.exit_code == 2 and "no_reboot" in one_line(bad)
    bad = task(cli, env, made["id"], "nonesuch")
    assert bad.exit_code == 2 and "nonesuch" in one_line(bad)
    assert gce.calls("compute.disks.createSnapshot") == []
    ok(task(cli, env, made["id"], "snapshot", '{"name": "twice"}'))
    again = task(cli, env, made["id"], "snapshot", '{"name": "twice"}')
    assert again.exit_code == 2, again.stderr
    assert "twice exists already" in one_line(again) and "another name" in again.stderr


# -- image ------------------------------------------------------------------------------------


def test_image_of_a_running_vm_needs_force_and_boots_a_new_vm(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, api: Client
) -> None:
    made = allocated(cli, env)
    refused = task(cli, env, made["id"], "image", '{"name": "ci-base"}')
    assert refused.exit_code == 2
    said = one_line(refused)
    assert '"force": true' in said and "poweroff" in said and vm(made) in said, said
    run = ok(
        task(cli, env, made["id"], "image", '{"name": "ci-base", "family": "ci", "force": true}')
    )
    image = run.json()
    assert image["image"] == f"projects/{gce.project}/global/images/ci-base"
    assert image["family"] == "ci" and image["instance"] == vm(made)
    (sent,) = [s for s in gce.calls("compute.images.insert") if s.status == 200]
    assert sent.query["forceCreate"] == ["true"]
    assert sent.body["sourceDisk"].endswith(f"/zones/{ZONE}/disks/{image['disk']}")
    # The global operation was followed (globalOperations, not zoneOperations) to READY.
    assert gce.calls("compute.globalOperations.get")
    found = api.get(f"projects/{gce.project}/global/images/ci-base").json()
    assert found["status"] == "READY" and found["family"] == "ci"
    assert found["labels"] == {"shoal-allocation": made["id"], "shoal-managed-by": "shoal"}
    # What the task names, -o image= takes back.
    again = allocated(cli, env, "-o", f"image={image['image']}")
    inst = gce.instance(ZONE, vm(again))
    assert inst is not None
    disk = gce.disk(ZONE, inst["disks"][0]["source"].rsplit("/", 1)[-1])
    assert disk is not None and disk["sourceImage"].endswith("/global/images/ci-base")


def test_image_of_a_vm_powered_off_from_inside_needs_no_force(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    made = allocated(cli, env)
    gce.shutdown(ZONE, vm(made))
    gce.advance(5)  # TERMINATED: the VM stays, its disk used by no running instance
    image = ok(task(cli, env, made["id"], "image")).json()
    assert NAME.fullmatch(image["name"]) and "family" not in image
    (sent,) = gce.calls("compute.images.insert")
    assert "forceCreate" not in sent.query


# -- console and logs -------------------------------------------------------------------------


def test_console_task_and_logs_read_the_serial_console(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, api: Client
) -> None:
    made = allocated(cli, env)
    gce.console(ZONE, vm(made), "ci: step 1\nci: step 2\n")
    whole = serial(api, vm(made))
    console = ok(task(cli, env, made["id"], "console", '{"lines": 2}')).json()
    assert console["output"] == "ci: step 1\nci: step 2"
    assert console["instance"] == vm(made) and console["zone"] == ZONE
    assert console["next"] == len(whole.encode())
    assert ok(cli("logs", made["id"], env=env)).stdout == whole
    assert ok(cli("logs", made["id"], "--tail", "1", env=env)).stdout == "ci: step 2\n"
    assert ok(cli("logs", made["id"], "--tail", "0", env=env)).stdout == ""
    *_, seen = gce.calls("compute.instances.getSerialPortOutput")
    assert seen.query["port"] == ["1"] and seen.query["start"] == ["0"]
    bad = task(cli, env, made["id"], "console", '{"lines": 0}')
    assert bad.exit_code == 2 and "lines" in one_line(bad)


def stepped(monkeypatch: pytest.MonkeyPatch, *steps: Callable[[], None]) -> list[float]:
    """`shoal logs -f`'s pauses run `steps` in turn instead of sleeping."""
    from drivers.gcp import tasks

    left = list(steps)
    paused: list[float] = []

    def pause(seconds: float) -> None:
        paused.append(seconds)
        left.pop(0)()

    monkeypatch.setattr(tasks, "_pause", pause)
    return paused


def test_logs_follow_reads_on_from_next_until_the_vm_stops(
    cli: Cli,
    env: dict[str, str],
    gce: ComputeStandin,
    api: Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = allocated(cli, env)
    name = vm(made)
    boot = serial(api, name)
    asked = len(gce.calls("compute.instances.getSerialPortOutput"))

    def stop() -> None:
        gce.console(ZONE, name, "two\n")
        gce.shutdown(ZONE, name)  # STOPPING: what it wrote before is still read

    paused = stepped(monkeypatch, lambda: gce.console(ZONE, name, "one\n"), stop)
    run = ok(cli("logs", made["id"], "-f", env=env))
    assert run.stdout == boot + "one\ntwo\n"
    assert len(paused) == 2
    reads = gce.calls("compute.instances.getSerialPortOutput")[asked:]
    starts = [s.query["start"][0] for s in reads]
    size = len(boot.encode())
    assert starts == ["0", str(size), str(size + 4)]  # each read from the `next` before


def test_logs_follow_says_once_that_google_dropped_bytes(
    cli: Cli,
    env: dict[str, str],
    gce: ComputeStandin,
    api: Client,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = allocated(cli, env)
    name = vm(made)
    flood = "x" * 1023 + "\n"  # 1.5 MB between two reads: Google keeps the last 1 MB

    def burst(mark: str) -> Callable[[], None]:
        return lambda: gce.console(ZONE, name, flood * 1536 + mark)

    def stop() -> None:
        burst("end\n")()
        gce.shutdown(ZONE, name)

    stepped(monkeypatch, burst("middle\n"), stop)
    run = ok(cli("logs", made["id"], "-f", env=env))
    assert run.stdout.endswith(flood + "end\n") and "middle\n" in run.stdout
    assert len(run.stdout.encode()) < 3 << 20
    lost = [line for line in run.stderr.splitlines() if "were lost" in line]
    assert len(lost) == 1 and "1 MB" in lost[0], run.stderr


def test_logs_of_all_when_the_start_is_gone_says_so(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    made = allocated(cli, env)
    gce.console(ZONE, vm(made), ("y" * 1023 + "\n") * 1100 + "last\n")
    run = ok(cli("logs", made["id"], env=env))
    assert run.stdout.endswith("last\n") and len(run.stdout.encode()) == 1 << 20
    assert "are gone" in one_line(run)
    assert ok(cli("logs", made["id"], "--tail", "1", env=env)).stderr == ""


# -- errors -----------------------------------------------------------------------------------


def test_tasks_and_logs_of_a_vm_deleted_outside_shoal_say_it_is_gone(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, api: Client
) -> None:
    made = allocated(cli, env)
    api.wait(api.delete(api.zonal(ZONE, f"instances/{vm(made)}")).json())
    for name in ("snapshot", "image", "console"):
        run = task(cli, env, made["id"], name)
        assert run.exit_code == 1, run.stderr
        said = one_line(run)
        assert "is gone" in said and f"shoal status {made['id']}" in said, said
    run = cli("logs", made["id"], env=env)
    assert run.exit_code == 1 and "is gone" in one_line(run)
    assert gce.calls("compute.disks.createSnapshot") == gce.calls("compute.images.insert") == []


@pytest.mark.parametrize(
    ("method", "args"),
    [
        ("compute.disks.createSnapshot", ("task", "snapshot")),
        ("compute.images.insert", ("task", "image")),
        ("compute.instances.getSerialPortOutput", ("task", "console")),
        ("compute.instances.getSerialPortOutput", ("logs",)),
    ],
)
def test_a_refused_permission_is_77_naming_it(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, method: str, args: tuple[str, ...]
) -> None:
    made = allocated(cli, env)
    gce.deny = {method}
    command, *rest = args
    run = cli(command, made["id"], *rest, env=env)
    assert run.exit_code == 77, run.stderr
    verb = method.rsplit(".", 1)[-1].replace("insert", "create")
    assert f"compute.{method.split('.')[1]}.{verb}" in one_line(run), run.stderr
    assert env["SHOAL_GCP_TOKEN"] not in run.stderr + run.stdout


def test_operation_errors_are_mapped() -> None:
    from drivers.gcp.compute import OperationError, OpError
    from drivers.gcp.tasks import _failed
    from providers.core.errors import NoCapacityError, NotFoundError, ShoalError, UsageError

    def fail(code: str, **quota: Any) -> ShoalError:
        error = OperationError([OpError(code, f"{code} said", quota)])
        return _failed(error, "snapshot", "s1", "gcp/default: gcp-1: snapshot s1", "vm", "p")

    quota = fail("QUOTA_EXCEEDED", metricName="compute.googleapis.com/snapshots", limit=10.0)
    assert isinstance(quota, NoCapacityError)
    assert "compute.googleapis.com/snapshots" in str(quota) and "limit 10" in str(quota)
    assert isinstance(fail("RESOURCE_IN_USE_BY_ANOTHER_RESOURCE"), UsageError)
    assert "another name" in str(fail("ALREADY_EXISTS"))
    assert isinstance(fail("RESOURCE_NOT_FOUND"), NotFoundError)
    assert isinstance(fail("INVALID_FIELD_VALUE"), UsageError)
    other = fail("INTERNAL_ERROR")
    assert type(other) is ShoalError and "INTERNAL_ERROR said" in str(other)


def test_default_names_keep_the_time_and_googles_rule() -> None:
    from drivers.gcp.tasks import default_name

    assert default_name("gcp-4b113fb1", "20261202-072332") == "shoal-gcp-4b113fb1-20261202-072332"
    long = default_name("Team_A." + "x" * 80, "20261202-072332")
    assert NAME.fullmatch(long) and long.endswith("-20261202-072332") and len(long) <= 63
