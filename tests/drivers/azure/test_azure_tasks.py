"""The `azure` driver's tasks (`shoal task ID snapshot|image|console`) and `shoal logs` (the
serial log boot diagnostics keeps) through the CLI, as users run them, against the loopback
Resource Manager (standin.py)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import Run
from tests.drivers.azure.runs import (
    GROUP_PATH,
    VM_PATH,
    Cli,
    allocated,
    left,
    ok,
    one_line,
    vm_name,
)
from tests.drivers.azure.standin import RESOURCE_GROUP, ArmStandin, Client

SMALL = ("--cpu", "2", "--ram", "8")
NAME = re.compile(r"[A-Za-z0-9](?:[-\w.]{0,78}\w)?")
COMPUTE = f"{GROUP_PATH}/providers/Microsoft.Compute"


def task(cli: Cli, env: dict[str, str], ident: str, name: str, options: str = "") -> Run:
    extra = ("--options", options) if options else ()
    return cli("task", ident, name, *extra, env=env)


def made_vm(cli: Cli, env: dict[str, str], *args: str) -> dict[str, Any]:
    return allocated(cli, env, *SMALL, "--lifetime", "1h", *args)


def disk_of(azure_arm: ArmStandin, made: dict[str, Any]) -> str:
    vm = azure_arm.compute.vm(RESOURCE_GROUP, vm_name(made))
    assert vm is not None
    return str(vm["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"])


# -- snapshot ---------------------------------------------------------------------------------


def test_snapshot_of_the_os_disk_is_tagged_incremental_and_waited_for(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = made_vm(cli, env)
    snap = ok(task(cli, env, made["id"], "snapshot", '{"name": "ci-cache"}')).json()
    assert snap == {
        "snapshot": f"{COMPUTE}/snapshots/ci-cache",
        "name": "ci-cache",
        "vm": vm_name(made),
        "resource_group": RESOURCE_GROUP,
        "disk": disk_of(azure_arm, made),
    }
    found = azure_arm.resource(snap["snapshot"])
    assert found is not None
    props = found["properties"]
    assert props["provisioningState"] == "Succeeded"  # its operation was followed to its end
    assert props["creationData"]["sourceResourceId"] == snap["disk"]
    assert props["incremental"] is True
    assert found["tags"] == {"shoal-allocation": made["id"], "shoal-managed-by": "shoal"}
    full = ok(task(cli, env, made["id"], "snapshot", '{"full": true}')).json()
    assert NAME.fullmatch(full["name"]) and full["name"].startswith(f"shoal-{made['id']}-")
    found = azure_arm.resource(full["snapshot"])
    assert found is not None and found["properties"]["incremental"] is False


def test_a_snapshot_or_image_name_taken_already_is_2_and_not_overwritten(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = made_vm(cli, env)
    other = made_vm(cli, env)
    ok(task(cli, env, made["id"], "snapshot", '{"name": "twice"}'))
    again = task(cli, env, other["id"], "snapshot", '{"name": "twice"}')
    assert again.exit_code == 2, again.stderr
    said = one_line(again)
    assert "options.name: twice exists already" in said and "another name" in said
    found = azure_arm.resource(f"{COMPUTE}/snapshots/twice")
    assert found is not None
    assert found["properties"]["creationData"]["sourceResourceId"] == disk_of(azure_arm, made)
    ok(task(cli, env, made["id"], "image", '{"name": "base"}'))
    image = task(cli, env, other["id"], "image", '{"name": "base"}')
    assert image.exit_code == 2 and "options.name: base exists already" in one_line(image)
    assert len(azure_arm.calls("Snapshots_CreateOrUpdate")) == 1
    assert len(azure_arm.calls("Images_CreateOrUpdate")) == 1


def test_task_options_azure_refuses_are_2_naming_them(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = made_vm(cli, env)
    bad = task(cli, env, made["id"], "snapshot", '{"name": "ends-with-dot."}')
    assert bad.exit_code == 2 and "name" in one_line(bad) and "Azure resource name" in bad.stderr
    bad = task(cli, env, made["id"], "snapshot", '{"force": true}')
    assert bad.exit_code == 2 and "force" in one_line(bad)
    bad = task(cli, env, made["id"], "nonesuch")
    assert bad.exit_code == 2 and "nonesuch" in one_line(bad)
    bad = task(cli, env, made["id"], "console", '{"lines": 0}')
    assert bad.exit_code == 2 and "lines" in one_line(bad)
    assert azure_arm.calls("Snapshots_CreateOrUpdate") == []


# -- image ------------------------------------------------------------------------------------


def test_an_image_of_the_os_disk_boots_a_new_vm(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = made_vm(cli, env)
    image = ok(task(cli, env, made["id"], "image", '{"name": "ci-base"}')).json()
    assert image == {
        "image": f"{COMPUTE}/images/ci-base",
        "name": "ci-base",
        "vm": vm_name(made),
        "resource_group": RESOURCE_GROUP,
        "hyperVGeneration": "V2",  # the disk's, not the Images API's default V1
    }
    found = azure_arm.resource(image["image"])
    assert found is not None and found["properties"]["provisioningState"] == "Succeeded"
    assert found["tags"] == {"shoal-allocation": made["id"], "shoal-managed-by": "shoal"}
    assert found["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"] == disk_of(
        azure_arm, made
    )
    # What the task names, -o image= takes back: a managed image is x64, so no Arm64 size
    # (the cheapest in the catalog) is chosen for it.
    again = made_vm(cli, env, "-o", f"image={image['image']}")
    assert again["resource"]["metadata"]["size"] == "Standard_D2s_v5"
    vm = azure_arm.compute.vm(RESOURCE_GROUP, vm_name(again))
    assert vm is not None
    assert vm["properties"]["storageProfile"]["imageReference"]["id"] == image["image"]


def test_an_image_of_an_arm64_vm_is_refused_as_azure_refuses_it(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = made_vm(cli, env, "-o", "image=Canonical:ubuntu-24_04-lts:server-arm64:latest")
    run = task(cli, env, made["id"], "image")
    assert run.exit_code == 2, run.stderr
    assert "Arm64" in one_line(run)


# -- console and logs -------------------------------------------------------------------------


def test_console_task_and_logs_read_the_serial_log(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = made_vm(cli, env)
    azure_arm.compute.console(RESOURCE_GROUP, vm_name(made), "ci: step 1\nci: step 2\n")
    console = ok(task(cli, env, made["id"], "console", '{"lines": 2}')).json()
    assert console == {
        "vm": vm_name(made),
        "resource_group": RESOURCE_GROUP,
        "output": "ci: step 1\nci: step 2",
    }
    whole = ok(cli("logs", made["id"], env=env)).stdout
    assert "cloud-init" in whole and whole.endswith("ci: step 1\nci: step 2\n")
    assert ok(cli("logs", made["id"], "--tail", "1", env=env)).stdout == "ci: step 2\n"
    assert ok(cli("logs", made["id"], "--tail", "0", env=env)).stdout == ""
    (seen, *_) = azure_arm.calls("VirtualMachines_RetrieveBootDiagnosticsData")
    assert seen.query["sasUriExpirationTimeInMinutes"] == ["5"]
    assert azure_arm.calls("BootDiagnostics_Blob")


def stepped(monkeypatch: pytest.MonkeyPatch, *steps: Callable[[], None]) -> list[float]:
    """`shoal logs -f`'s pauses run `steps` in turn instead of sleeping."""
    from drivers.azure import tasks

    left_ = list(steps)
    paused: list[float] = []

    def pause(seconds: float) -> None:
        paused.append(seconds)
        left_.pop(0)()

    monkeypatch.setattr(tasks, "_pause", pause)
    return paused


def test_logs_follow_prints_what_is_new_until_the_vm_stops(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = made_vm(cli, env)
    name = vm_name(made)
    boot = ok(cli("logs", made["id"], env=env)).stdout

    def stop() -> None:
        azure_arm.compute.console(RESOURCE_GROUP, name, "two\n")
        azure_arm.compute.shutdown(RESOURCE_GROUP, name)  # what it wrote before is still read

    paused = stepped(monkeypatch, lambda: azure_arm.compute.console(RESOURCE_GROUP, name, "one\n"),
                     stop)  # fmt: skip
    run = ok(cli("logs", made["id"], "-f", env=env))
    assert run.stdout == boot + "one\ntwo\n"
    assert len(paused) == 2


def test_tasks_and_logs_of_a_vm_deleted_outside_shoal_say_it_is_gone(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, arm: Client
) -> None:
    made = made_vm(cli, env)
    arm.act("DELETE", VM_PATH + vm_name(made))
    for name in ("snapshot", "image", "console"):
        run = task(cli, env, made["id"], name)
        assert run.exit_code == 1, run.stderr
        said = one_line(run)
        assert "is gone" in said and f"shoal status {made['id']}" in said, said
    run = cli("logs", made["id"], env=env)
    assert run.exit_code == 1 and "is gone" in one_line(run)
    assert (
        azure_arm.calls("Snapshots_CreateOrUpdate")
        == azure_arm.calls("Images_CreateOrUpdate")
        == []
    )
    assert left(azure_arm)["disks"] == []


@pytest.mark.parametrize(
    ("action", "args"),
    [
        ("Microsoft.Compute/snapshots/write", ("task", "snapshot")),
        ("Microsoft.Compute/images/write", ("task", "image")),
        ("Microsoft.Compute/virtualMachines/retrieveBootDiagnosticsData/action", ("logs",)),
    ],
)
def test_a_refused_permission_is_77_naming_it(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, action: str, args: tuple[str, ...]
) -> None:
    made = made_vm(cli, env)
    azure_arm.deny = {action}
    command, *rest = args
    run = cli(command, made["id"], *rest, env=env)
    assert run.exit_code == 77, run.stderr
    assert action in one_line(run), run.stderr
    assert env["SHOAL_AZURE_TOKEN"] not in run.stderr + run.stdout
    azure_arm.take_violations()


def test_default_names_keep_the_time_and_azures_rule() -> None:
    from drivers.azure.tasks import default_name

    assert default_name("azure-4b113fb1", "20261202-072332") == (
        "shoal-azure-4b113fb1-20261202-072332"
    )
    long = default_name("Team A." + "x" * 90, "20261202-072332")
    assert NAME.fullmatch(long) and long.endswith("-20261202-072332") and len(long) <= 80
