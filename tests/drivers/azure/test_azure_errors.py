"""The `azure` driver's errors through the CLI, as users meet them: Azure's refusals mapped to
exit codes (no capacity and quotas 75, credentials 77, a wrong field 2 naming the option),
429 retried after its Retry-After, fallback to other zones then sizes with every attempt
named, nothing left behind by a failed create, and operation URLs on another origin not
followed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.drivers.azure.runs import (
    Cli,
    alloc,
    allocated,
    left,
    nothing_left,
    ok,
    one_line,
)
from tests.drivers.azure.standin import RESOURCE_GROUP, SUBSCRIPTION, ArmStandin
from tests.providers.apiserver import ApiServer

SMALL = ("--cpu", "2", "--ram", "8")
SKU_NOT_AVAILABLE = (
    "The requested size for resource '{rid}' is currently not available in location 'eastus' "
    "zones '' for subscription '{sub}'. Please try another size or deploy to a different "
    "location or zones. See https://aka.ms/azureskunotavailable for details."
)


def vm_puts(azure_arm: ArmStandin) -> int:
    return len(azure_arm.calls("VirtualMachines_CreateOrUpdate"))


def zoned(azure_arm: ArmStandin, write_config: Callable[[str], object], extra: str = "") -> None:
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
        f"zones = [1, 2, 3]\n{extra}"  # numbers, as TOML users write them
    )


# -- no capacity ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "code",
    [
        "AllocationFailed",
        "ZonalAllocationFailed",
        "OverconstrainedAllocationRequest",
        "OverconstrainedZonalAllocationRequest",
    ],
)
def test_an_allocation_failure_is_75_naming_it_and_leaves_nothing(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, code: str
) -> None:
    azure_arm.compute.fail_create(code)
    run = alloc(cli, env, *SMALL, "--lifetime", "1h", "-o", "public_ip=true")
    assert run.exit_code == 75, run.stderr
    said = one_line(run)
    assert f"eastus: {code}: Allocation failed" in said, said
    nothing_left(azure_arm)  # the failed VM, its NIC, public IP and disk: all deleted
    assert azure_arm.authz.assignments == {}
    status = ok(cli("status", "--json", "--all", env=env)).json()
    assert [row["status"] for row in status] == ["FAILED"]


def test_sku_not_available_at_the_put_is_75_and_leaves_nothing(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    # Resource SKUs said it was offered; the PUT says otherwise (it changed meanwhile).
    azure_arm.fail_http(
        409,
        operation="VirtualMachines_CreateOrUpdate",
        code="SkuNotAvailable",
        message=SKU_NOT_AVAILABLE.format(rid="shoal-vm", sub=SUBSCRIPTION),
    )
    run = alloc(cli, env, *SMALL)
    assert run.exit_code == 75, run.stderr
    assert "SkuNotAvailable" in one_line(run)
    nothing_left(azure_arm)  # the NIC made first is deleted


def test_a_quota_refused_at_the_put_is_75_naming_the_quota_and_its_numbers(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, write_config: Callable[[str], object]
) -> None:
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
        "check_quotas = false\n"  # shoal does not count: Azure's own check refuses
    )
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 6
    ok(alloc(cli, env, "-o", "size=Standard_D4s_v5"))
    run = alloc(cli, env, "-o", "size=Standard_D4s_v5")
    assert run.exit_code == 75, run.stderr
    said = one_line(run)
    assert (
        "quota standardDSv5Family Cores: limit 6, 4 in use, Standard_D4s_v5 needs 4 more "
        "(a limit of 8)" in said
    ), said
    assert left(azure_arm)["networkInterfaces"] == [left(azure_arm)["virtualMachines"][0] + "-nic"]


def test_the_regional_and_spot_quotas_refused_at_the_put_are_named(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, write_config: Callable[[str], object]
) -> None:
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
        "check_quotas = false\n"
    )
    azure_arm.compute.quotas["eastus"]["cores"] = 1
    azure_arm.compute.quotas["eastus"]["lowPriorityCores"] = 1
    regional = alloc(cli, env, *SMALL)
    assert regional.exit_code == 75 and "quota Total Regional Cores: limit 1" in one_line(regional)
    spot = alloc(cli, env, *SMALL, "-o", "spot=true")
    assert spot.exit_code == 75 and "quota Low Priority Cores: limit 1" in one_line(spot)
    nothing_left(azure_arm)


# -- credentials ---------------------------------------------------------------------------


def test_a_refused_token_is_77_without_the_token(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    bad = "eyJ0eXAiOiJKV1QifQ.not-the-one"
    run = alloc(cli, {**env, "SHOAL_AZURE_TOKEN": bad}, *SMALL)
    assert run.exit_code == 77, run.stderr
    assert bad not in run.stderr + run.stdout
    assert "SHOAL_AZURE_TOKEN" in one_line(run)
    assert vm_puts(azure_arm) == 0


def test_a_refused_vm_write_is_77_and_the_nic_made_first_is_deleted(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.deny = {"Microsoft.Compute/virtualMachines/write"}
    run = alloc(cli, env, *SMALL)
    assert run.exit_code == 77, run.stderr
    said = one_line(run)
    assert "Microsoft.Compute/virtualMachines/write" in said
    assert "Virtual Machine Contributor" in said
    assert env["SHOAL_AZURE_TOKEN"] not in said
    nothing_left(azure_arm)
    azure_arm.take_violations()


# -- a wrong field -------------------------------------------------------------------------


def test_a_subnet_or_resource_group_that_is_not_there_is_2_naming_the_option(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    subnet = (
        f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/"
        "Microsoft.Network/virtualNetworks/nope/subnets/default"
    )
    run = alloc(cli, env, *SMALL, "-o", f"subnet={subnet}")
    assert run.exit_code == 2, run.stderr
    assert one_line(run).startswith("shoal: error: options.subnet: InvalidResourceReference")
    run = alloc(cli, env, *SMALL, "-o", "resource_group=nope-rg")
    assert run.exit_code == 2, run.stderr
    assert one_line(run).startswith("shoal: error: options.resource_group: ResourceGroupNotFound")
    nothing_left(azure_arm)


def test_an_invalid_parameter_is_2_naming_the_option_from_its_target(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.fail_http(
        400,
        operation="VirtualMachines_CreateOrUpdate",
        code="InvalidParameter",
        message="The value of parameter vmSize is invalid.",
    )
    # The stand-in's fault answers carry no target: one with it is ARM's own.
    run = alloc(cli, env, *SMALL)
    assert run.exit_code == 2 and "InvalidParameter" in one_line(run), run.stderr
    from drivers.azure.arm import ArmError
    from drivers.azure.driver import Plan, _mapped

    plan = Plan.__new__(Plan)
    plan.location, plan.group = "eastus", RESOURCE_GROUP
    for target, option in [
        ("vmSize", "options.size"),
        ("zones", "options.zone"),
        ("customData", "options.entry"),
        ("billingProfile.maxPrice", "options.max_price"),
    ]:
        error = _mapped(ArmError(400, "InvalidParameter", "bad", target), plan, "S", "here")
        assert str(error).startswith(f"{option}: InvalidParameter: bad"), error
    nothing_left(azure_arm)


# -- 429 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "operation", ["VirtualMachines_CreateOrUpdate", "NetworkInterfaces_CreateOrUpdate"]
)
def test_429_is_retried_after_its_retry_after(
    cli: Cli,
    env: dict[str, str],
    azure_arm: ArmStandin,
    monkeypatch: pytest.MonkeyPatch,
    operation: str,
) -> None:
    from drivers.azure import driver
    from providers.cloud.http import RetryPolicy

    # The default backoff, so that the wait is the server's (the stand-in's clock ignores it).
    monkeypatch.setattr(driver, "RETRY_POLICY", RetryPolicy(attempts=3, read_timeout_seconds=10))
    azure_arm.fail_http(429, operation=operation, retry_after=1)
    made = allocated(cli, env, *SMALL)
    calls = azure_arm.calls(operation)
    assert [c.status for c in calls] == [429, 201]
    assert left(azure_arm)["virtualMachines"] == [made["resource"]["metadata"]["vm"]]


# -- fallback ------------------------------------------------------------------------------


def test_fallback_zones_takes_the_next_zone_of_the_config(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, write_config: Callable[[str], object]
) -> None:
    zoned(azure_arm, write_config)
    azure_arm.compute.fail_create("ZonalAllocationFailed", zone="1", times=None)
    off = alloc(cli, env, *SMALL)
    assert off.exit_code == 75 and "ZonalAllocationFailed" in one_line(off)
    made = allocated(cli, env, *SMALL, "-o", "fallback=zones")
    assert made["resource"]["metadata"]["zone"] == "2"
    zones = [c.body.get("zones") for c in azure_arm.calls("VirtualMachines_CreateOrUpdate")]
    assert zones == [["1"], ["1"], ["2"]]
    assert left(azure_arm)["virtualMachines"] == [made["resource"]["metadata"]["vm"]]


def test_fallback_types_tries_the_zones_then_the_next_size_naming_every_attempt(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, write_config: Callable[[str], object]
) -> None:
    zoned(azure_arm, write_config, 'fallback = "types"\n')
    azure_arm.compute.fail_create("ZonalAllocationFailed", size="Standard_D2s_v5", times=None)
    made = allocated(cli, env, *SMALL)
    meta = made["resource"]["metadata"]
    assert (meta["size"], meta["zone"]) == ("Standard_D2s_v6", "1")
    assert vm_puts(azure_arm) == 4
    azure_arm.compute.fail_create("ZonalAllocationFailed", times=None)
    run = alloc(cli, env, *SMALL, "-o", 'allowed_types=["Standard_D2s_*"]')
    assert run.exit_code == 75, run.stderr
    said = one_line(run)
    for size in ("Standard_D2s_v5", "Standard_D2s_v6"):
        for zone in ("1", "2", "3"):
            assert f"{size} in zone {zone} (ZonalAllocationFailed)" in said, said
    assert said.count("Allocation failed.") == 1  # Azure's words once, not six times
    assert left(azure_arm)["virtualMachines"] == [meta["vm"]]


# -- where operations are followed -------------------------------------------------------------


def test_an_operation_url_on_another_origin_is_not_followed_nor_sent_the_token(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    with ApiServer() as elsewhere:
        azure_arm.operations_base = elsewhere.base
        run = alloc(cli, env, *SMALL)
        assert run.exit_code == 1, run.stderr
        said = run.stderr.strip().splitlines()[-1]
        assert f"Azure named an operation at {elsewhere.base}" in said, said
        assert "not followed" in said and env["SHOAL_AZURE_TOKEN"] not in run.stderr
        assert elsewhere.seen == []  # not asked at all, so no token went there
    azure_arm.operations_base = None
    azure_arm.advance(60)
    # What was sent was deleted (the deletes went out; their operations were not followed).
    nothing_left(azure_arm)
    assert vm_puts(azure_arm) == 0
