"""The `azure` driver's capacity from the subscription's usages (Usage - List of the stand-in,
live), through the CLI: the count and the quota that binds (the family's vCPUs, the regional
`cores`, `lowPriorityCores` for spot), the refusal (75) before any PUT, the count after our
own creates and deletes, and quotas not counted."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import Run
from tests.drivers.azure.runs import DRIVER, Cli, ok
from tests.drivers.azure.standin import RESOURCE_GROUP, ArmStandin

D4 = ("-o", "size=Standard_D4s_v5")


def alloc(cli: Cli, env: dict[str, str], *args: str) -> Run:
    return cli("alloc", "--driver", DRIVER, *args, env=env)


def dry(cli: Cli, env: dict[str, str], *args: str) -> dict[str, Any]:
    found: dict[str, Any] = ok(alloc(cli, env, *args, "--dry-run", "--json")).json()
    return found


def quotas(found: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {q["quota"]: q for q in found["choice"]["capacity"]["quotas"]}


def vm_puts(azure_arm: ArmStandin) -> int:
    return len(azure_arm.calls("VirtualMachines_CreateOrUpdate"))


def test_the_family_quota_binds_refuses_before_any_put_and_follows_our_own_vms(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 12  # 3 of 4 vCPUs
    found = dry(cli, env, *D4)
    assert found["fits"] == 3
    family = quotas(found)["standardDSv5Family"]
    assert family["name"] == "Standard DSv5 Family vCPUs"
    assert (family["needs"], family["free"], family["fits"]) == (4.0, 12.0, 3)
    assert quotas(found)["cores"]["fits"] == 25  # the regional 100
    made = ok(alloc(cli, env, *D4, "--json")).json()
    # Our create made the cached usage stale: the next count asks Azure again.
    assert ok(alloc(cli, env, *D4, "--dry-run")).stdout == "2\n"
    ok(alloc(cli, env, *D4))
    ok(alloc(cli, env, *D4))
    full = alloc(cli, env, *D4)
    assert full.exit_code == 75, full.stderr
    assert "standardDSv5Family (Standard DSv5 Family vCPUs) has 0 free in eastus" in full.stderr
    assert "Standard_D4s_v5 needs 4" in full.stderr
    assert vm_puts(azure_arm) == 3  # refused before any PUT
    ok(cli("free", made["id"], env=env))
    assert ok(alloc(cli, env, *D4, "--dry-run")).stdout == "1\n"  # the delete is counted


def test_the_regional_cores_bind_when_they_leave_less(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.compute.quotas["eastus"]["cores"] = 7
    found = dry(cli, env, *D4)
    assert found["fits"] == 1
    assert quotas(found)["cores"]["fits"] == 1 and quotas(found)["standardDSv5Family"]["fits"] == 25
    ok(alloc(cli, env, *D4))
    refused = alloc(cli, env, *D4)
    assert refused.exit_code == 75, refused.stderr
    assert "cores (Total Regional vCPUs) has 3 free in eastus" in refused.stderr
    assert vm_puts(azure_arm) == 1


def test_spot_counts_against_the_low_priority_cores_only(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.compute.quotas["eastus"]["lowPriorityCores"] = 8
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 0  # not spot's
    spot = dry(cli, env, *D4, "-o", "spot=true")
    assert spot["fits"] == 2
    assert set(quotas(spot)) == {"lowPriorityCores"}
    on_demand = alloc(cli, env, *D4, "--dry-run")
    assert on_demand.stdout == "0\n" and "standardDSv5Family" in on_demand.stderr
    ok(alloc(cli, env, *D4, "-o", "spot=true"))
    ok(alloc(cli, env, *D4, "-o", "spot=true"))
    full = alloc(cli, env, *D4, "-o", "spot=true")
    assert full.exit_code == 75 and "lowPriorityCores" in full.stderr, full.stderr
    assert vm_puts(azure_arm) == 2


def test_a_gpu_size_counts_against_its_family(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.compute.quotas["eastus"]["Standard NCASv3_T4 Family"] = 4
    found = dry(cli, env, "--cpu", "4", "--ram", "16", "-o", "gpus=1", "-o", "gpu=T4")
    assert found["choice"]["instance_type"] == "Standard_NC4as_T4_v3"
    assert found["fits"] == 1
    assert quotas(found)["Standard NCASv3_T4 Family"]["fits"] == 1


def test_quotas_that_cannot_be_read_do_not_refuse_and_are_noted_once(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.deny = {"Microsoft.Compute/locations/usages/read"}
    first = alloc(cli, env, *D4, "--dry-run")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "unlimited\n"
    assert first.stderr.count("capacity not checked") == 1, first.stderr
    asked = len(azure_arm.calls("Usage_List"))
    again = alloc(cli, env, *D4, "--dry-run")
    assert "noted earlier" in again.stderr
    assert len(azure_arm.calls("Usage_List")) == asked  # remembered: not asked again
    azure_arm.deny = set()
    azure_arm.take_violations()


def test_check_quotas_off_reads_no_quota(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, write_config: Callable[[str], object]
) -> None:
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
        "check_quotas = false\n"
    )
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 0
    found = dry(cli, env, *D4)
    assert found["choice"]["capacity"] == {"checked": False, "note": "check_quotas is off"}
    assert azure_arm.calls("Usage_List") == []
