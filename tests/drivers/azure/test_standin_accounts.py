"""The ARM stand-in serves what shoal's azure provider asks of Resource Manager
(providers/azure/accounts.py: Subscriptions - List Locations, Usage - List, capacity
reservation groups and their reservations; providers/azure/fetch.py: Resource SKUs), so
that `shoal resources -p azure` and `shoal pricing -p azure` run against it with live usage;
and capacity reservation groups behave as Azure documents them: a VM naming a group counts
against the group's reservation of its size and zone, a targeted group overallocates, a
Block reservation refuses what is past its quantity or window, and reservations take quota."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from providers.azure import parse
from providers.azure.accounts import AzureAccounts
from tests.drivers.azure.compute import GROUP, RESERVATION
from tests.drivers.azure.network import NIC
from tests.drivers.azure.standin import (
    RESOURCE_GROUP,
    SUBSCRIPTION,
    TOKEN,
    ArmStandin,
    Client,
    action_of,
    nic_body,
    vm_body,
)
from tests.providers.apiserver import ApiServer
from tests.providers.azure import payloads as prices

RG = RESOURCE_GROUP
SUB = f"/subscriptions/{SUBSCRIPTION}"
USAGES = f"{SUB}/providers/Microsoft.Compute/locations/eastus/usages"
VM_CONTRIBUTOR = "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def arm_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"} and body["error"]["code"] == code, body
    return dict(body["error"])


def make_vm(
    arm: Client, azure_arm: ArmStandin, name: str, group: str | None = None, **kw: Any
) -> httpx.Response:
    """PUT a VM (naming `group` when given); the answer, not followed."""
    subnet = azure_arm.network.add_subnet(RG, "shoal-vnet", "default")
    nic = arm.rg_path(NIC, f"{name}-nic")
    arm.create(nic, nic_body(subnet))
    if group is not None:
        kw["capacityReservation"] = {"capacityReservationGroup": {"id": group}}
    response: httpx.Response = arm.put(arm.vm_path(name), vm_body([nic], **kw))
    return response


def created(
    arm: Client, azure_arm: ArmStandin, name: str, group: str | None = None, **kw: Any
) -> str:
    """A VM made and followed to the end of its create: the operation's status."""
    response = make_vm(arm, azure_arm, name, group, **kw)
    assert response.status_code == 201, response.text
    return str(arm.poll(response)["status"])


def usages(arm: Client) -> dict[str, int]:
    return {u["name"]["value"]: u["currentValue"] for u in ok(arm.get(USAGES))["value"]}


def view(arm: Client, group: str) -> dict[str, Any]:
    """A group's instance view: reservation name -> its utilizationInfo."""
    got = ok(arm.get(group, api_version="2025-04-01", **{"$expand": "instanceView"}))
    return {
        r["name"]: r["utilizationInfo"]
        for r in got["properties"]["instanceView"]["capacityReservations"]
    }


def shoal_env(azure_arm: ArmStandin, **more: str) -> dict[str, str]:
    return {
        "SHOAL_AZURE_MANAGEMENT_URL": azure_arm.base,
        "SHOAL_AZURE_TOKEN": TOKEN,
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        **more,
    }


def quotas(region: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """A `resources --json` region's on-demand vCPU quotas: family -> (allocated, supply)."""
    out = {}
    for row in region["overview"]:
        if row.get("key") != "family" or "onDemand" not in row["stat"]:
            continue
        stat = row["stat"]["onDemand"]
        if "cpu" in stat["supply"]:
            out[row["value"]] = (
                int(stat["allocated"]["cpu"]["vcpu"]),
                int(stat["supply"]["cpu"]["vcpu"]),
            )
    return out


# --- what the azure provider asks ------------------------------------------------------------


def test_list_locations_answers_as_the_subscriptions_api(
    azure_arm: ArmStandin, arm: Client
) -> None:
    page = ok(arm.get(f"{SUB}/locations"))
    by_name = {loc["name"]: loc for loc in page["value"]}
    assert set(by_name) == {"eastus", "westeurope", "us"}
    eastus = by_name["eastus"]
    assert (eastus["displayName"], eastus["metadata"]["regionType"]) == ("East US", "Physical")
    assert [z["logicalZone"] for z in eastus["availabilityZoneMappings"]] == ["1", "2", "3"]
    assert eastus["metadata"]["pairedRegion"] == [
        {"name": "westus", "id": f"{SUB}/locations/westus"}
    ]
    assert by_name["us"]["metadata"]["regionType"] == "Logical"  # holds no VMs
    regions, link = parse.locations_page(page, "test")
    assert link is None
    assert [(r.name, r.location, r.zones) for r in regions] == [
        ("eastus", "East US", ["1", "2", "3"]),
        ("westeurope", "West Europe", ["1", "2", "3"]),
    ]
    assert ok(arm.get(SUB))["subscriptionId"] == SUBSCRIPTION
    assert azure_arm.calls("Subscriptions_ListLocations")[0].query["api-version"] == ["2022-12-01"]
    assert action_of("GET", f"{SUB}/locations") == (
        "Microsoft.Resources/subscriptions/locations/read",
        SUB,
    )
    # Only the SDK's api-version, 2022-12-01, is served.
    arm_error(
        arm.get(f"{SUB}/locations", api_version="2016-06-01"), 400, "NoRegisteredProviderFound"
    )


def test_resources_json_shows_the_quotas_with_live_usage(
    azure_arm: ArmStandin, arm: Client, cli: Callable[..., Any]
) -> None:
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 20
    env = shoal_env(azure_arm)
    before = cli("resources", "-p", "azure", "-r", "eastus", "--json", env=env)
    assert before.exit_code == 0, before.stderr
    assert quotas(before.json()[0])["standardDSv5Family"] == (0, 20)
    assert created(arm, azure_arm, "vm-1", size="Standard_D4s_v5") == "Succeeded"
    after = cli("resources", "-p", "azure", "-r", "eastus", "--refresh", "--json", env=env)
    assert after.exit_code == 0, after.stderr
    (eastus,) = after.json()
    assert quotas(eastus)["standardDSv5Family"] == (4, 20)
    assert quotas(eastus)["regional"] == (4, 100)
    assert azure_arm.calls("Usage_List")[-1].query["api-version"] == ["2023-07-01"]
    # Every region the subscription lists (Subscriptions - List Locations), logical ones not.
    every = cli("resources", "-p", "azure", "-r", "all", "--json", env=env)
    assert every.exit_code == 0, every.stderr
    assert sorted(r["region"]["name"] for r in every.json()) == ["eastus", "westeurope"]
    assert azure_arm.calls("Subscriptions_ListLocations")


def test_pricing_json_takes_its_shapes_from_the_stand_ins_resource_skus(
    azure_arm: ArmStandin, cli: Callable[..., Any]
) -> None:
    rows = [
        prices.price_item("Standard_D4s_v5", 0.192),
        prices.price_item("Standard_D4s_v5", 0.0384, variant="Spot"),
        prices.price_item("Standard_D4ps_v5", 0.154),
        prices.price_item("Standard_NC24ads_A100_v4", 3.673),
    ]
    azure_arm.compute.restrict_sku("Standard_D4ps_v5", "eastus")
    with ApiServer() as api:
        api.route(prices.PRICES_PATH, prices.PricesApi(rows, base=api.base))
        env = shoal_env(azure_arm, SHOAL_AZURE_PRICES_URL=api.base)
        run = cli("pricing", "-p", "azure", "-r", "eastus", "--json", env=env)
    assert run.exit_code == 0, run.stderr
    (eastus,) = run.json()
    items = eastus["items"]
    assert set(items) == {"Standard_D4s_v5", "Standard_NC24ads_A100_v4"}  # D4ps: restricted
    assert (items["Standard_D4s_v5"]["onDemandPrice"], items["Standard_D4s_v5"]["spotPrice"]) == (
        0.192,
        0.0384,
    )
    shapes = eastus["shapes"]
    a100 = shapes["Standard_NC24ads_A100_v4"]
    assert (a100["vcpus"], a100["memory_gib"], a100["gpu_count"]) == (24, 220, 1)
    assert shapes["Standard_D4s_v5"]["memory_gib"] == 16
    assert shapes["Standard_D4s_v5"]["source"] == (
        f"the Azure Resource SKUs API ({azure_arm.base})"
    )
    skus = azure_arm.calls("ResourceSkus_List")
    assert skus and skus[0].query["$filter"] == ["location eq 'eastus'"]
    assert any("restricted for this subscription" in note for note in eastus["notes"])


def test_the_accounts_fetcher_and_the_cli_read_quotas_and_reservations(
    azure_arm: ArmStandin, arm: Client, cli: Callable[..., Any]
) -> None:
    group = azure_arm.compute.reservation_group("crg-eastus", zones=("1", "2"))
    azure_arm.compute.reserve("crg-eastus", "cr-d4", "Standard_D4s_v5", 2, zone="1")
    azure_arm.compute.reserve("crg-eastus", "cr-d2", "Standard_D2s_v5", 3, zone="2")
    assert created(arm, azure_arm, "vm-1", group, size="Standard_D4s_v5", zones=["1"]) == (
        "Succeeded"
    )
    azure_arm.page_size = 1  # every list followed by its nextLink
    fetcher = AzureAccounts(token=TOKEN, subscription=SUBSCRIPTION, management_url=azure_arm.base)
    assert fetcher.regions() == ["eastus", "westeurope"]
    (snapshot,) = fetcher.fetch(["eastus"])
    assert snapshot.zones == ["1", "2", "3"] and snapshot.location == "East US"
    held = {r.id: (r.instance_type, r.total, r.available, r.zone) for r in snapshot.reservations}
    assert held == {
        "crg-eastus/cr-d4": ("Standard_D4s_v5", 2, 1, "1"),
        "crg-eastus/cr-d2": ("Standard_D2s_v5", 3, 3, "2"),
    }
    family = {q.code: q for q in snapshot.quotas}["standardDSv5Family"]
    # The reservations take their whole quantity (8 + 6); the VM on one takes nothing more.
    assert family.used == 14
    assert snapshot.notes == []
    assert any(
        "$skiptoken" in seen.query
        for seen in azure_arm.calls("CapacityReservations_ListByCapacityReservationGroup")
    )
    azure_arm.page_size = 0
    # What `shoal resources` shows of them. (The reservations were made before the stand-in's
    # clock was moved on: their provisioningTime is not ahead of shoal's clock.)
    run = cli("resources", "-p", "azure", "-r", "eastus", "--json", env=shoal_env(azure_arm))
    assert run.exit_code == 0, run.stderr
    (eastus,) = run.json()
    (reservations,) = [row for row in eastus["overview"] if row.get("key") == "reservations"]
    left = {}
    for entry in reservations["nextLevel"]:
        (allocatable,) = entry["stat"]["scheduled"]["allocatable"].values()
        left[entry["value"]] = allocatable["instance"]
    assert left == {
        "crg-eastus/cr-d4": {"Standard_D4s_v5": "1"},
        "crg-eastus/cr-d2": {"Standard_D2s_v5": "3"},
    }
    zones = {z["value"] for z in eastus["breakdown"]["zone"]}
    assert zones == {"1", "2"}


# --- capacity reservation groups ------------------------------------------------------------


def test_groups_and_reservations_through_the_api_with_their_utilization(
    azure_arm: ArmStandin, arm: Client
) -> None:
    group = arm.rg_path(GROUP, "crg-1")
    made = ok(arm.put(group, {"location": "eastus", "zones": ["1"], "tags": {"t": "1"}}), 201)
    assert made["properties"] == {"capacityReservations": [], "virtualMachinesAssociated": []}
    reservation = f"{group}/capacityReservations/cr-d2"
    response = arm.put(
        reservation,
        {"location": "eastus", "sku": {"name": "Standard_D2s_v5", "capacity": 2}, "zones": ["1"]},
    )
    assert ok(response, 201)["properties"]["provisioningState"] == "Creating"
    assert view(arm, group)["cr-d2"]["currentCapacity"] == 0  # nothing reserved yet
    assert arm.poll(response)["status"] == "Succeeded"
    got = ok(arm.get(reservation, **{"$expand": "instanceView"}))
    assert got["type"] == RESERVATION and got["sku"] == {"name": "Standard_D2s_v5", "capacity": 2}
    assert got["properties"]["provisioningState"] == "Succeeded"
    assert got["properties"]["instanceView"]["utilizationInfo"] == {
        "currentCapacity": 2,
        "virtualMachinesAllocated": [],
    }
    made_group = ok(arm.get(group))
    # As the REST reference's samples give it: the names upper-cased.
    assert made_group["properties"]["capacityReservations"] == [
        {"id": arm.rg_path(GROUP, "CRG-1") + "/capacityReservations/CR-D2"}
    ]
    assert "instanceView" not in made_group["properties"]
    assert created(arm, azure_arm, "vm-1", group, zones=["1"]) == "Succeeded"
    vm = arm.vm_path("vm-1")
    assert view(arm, group)["cr-d2"] == {
        "currentCapacity": 2,
        "virtualMachinesAllocated": [{"id": vm}],
    }
    assert ok(arm.get(vm))["properties"]["capacityReservation"] == {
        "capacityReservationGroup": {"id": group}
    }
    listed = ok(arm.get(f"{SUB}/providers/{GROUP}"))["value"]
    assert [g["name"] for g in listed] == ["crg-1"]
    assert "virtualMachinesAssociated" not in listed[0]["properties"]  # only with $expand
    expanded = ok(arm.get(arm.rg_path(GROUP), **{"$expand": "virtualMachines/$ref"}))["value"]
    assert expanded[0]["properties"]["virtualMachinesAssociated"] == [{"id": vm}]
    assert [r["name"] for r in ok(arm.get(f"{group}/capacityReservations"))["value"]] == ["cr-d2"]
    arm_error(arm.get(group, **{"$expand": "userData"}), 400, "InvalidParameter")
    # A deallocated VM holds no hardware: associated, not allocated. Deleting it frees all.
    arm.act("POST", vm + "/deallocate")
    assert view(arm, group)["cr-d2"]["virtualMachinesAllocated"] == []
    assert ok(arm.get(reservation))["properties"]["virtualMachinesAssociated"] == [{"id": vm}]
    arm_error(arm.delete(reservation), 409, "OperationNotAllowed")  # a VM is associated
    arm.act("DELETE", vm)
    assert ok(arm.get(reservation))["properties"]["virtualMachinesAssociated"] == []
    arm_error(arm.delete(group), 409, "OperationNotAllowed")  # it holds a reservation
    assert arm.act("DELETE", reservation)["status"] == "Succeeded"
    assert arm.act("DELETE", group)["status"] == "Succeeded"
    assert azure_arm.resources(GROUP) == []


def test_a_targeted_group_overallocates_as_azure_does(azure_arm: ArmStandin, arm: Client) -> None:
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 4
    group = azure_arm.compute.reservation_group("crg")
    cr = azure_arm.compute.reserve("crg", "cr-d2", "Standard_D2s_v5", 1)
    assert usages(arm)["standardDSv5Family"] == 2  # the reservation takes its quota
    assert created(arm, azure_arm, "vm-1", group) == "Succeeded"
    assert usages(arm)["standardDSv5Family"] == 2  # ... and the VM on it nothing more
    # Past its quantity the group still takes VMs ("Azure won't stop allocations just because
    # a Capacity Reservation is fully consumed"), each taking quota of its own.
    assert created(arm, azure_arm, "vm-2", group) == "Succeeded"
    current, allocated = azure_arm.compute.utilization(cr)
    assert (current, [a.rsplit("/", 1)[-1] for a in allocated]) == (1, ["vm-1", "vm-2"])
    assert usages(arm)["standardDSv5Family"] == 4
    error = arm_error(make_vm(arm, azure_arm, "vm-3", group), 409, "OperationNotAllowed")
    assert "exceeding approved standardDSv5Family Cores quota" in error["message"]
    assert "Current Usage: 4, Additional Required: 2" in error["message"]


def test_a_vm_past_a_full_block_reservation_fails_to_allocate(
    azure_arm: ArmStandin, arm: Client
) -> None:
    now = datetime.now(UTC)
    window = ((now - timedelta(hours=1)).isoformat(), (now + timedelta(days=7)).isoformat())
    group = azure_arm.compute.reservation_group("crg-block", zones=("1",), block=True)
    assert ok(arm.get(group))["properties"]["reservationType"] == "Block"
    cr = azure_arm.compute.reserve(
        "crg-block", "cr-a100", "Standard_NC24ads_A100_v4", 1, zone="1", window=window
    )
    a100 = {"size": "Standard_NC24ads_A100_v4", "zones": ["1"]}
    assert created(arm, azure_arm, "vm-1", group, **a100) == "Succeeded"
    response = make_vm(arm, azure_arm, "vm-2", group, **a100)
    assert response.status_code == 201, response.text
    failed = arm.poll(response)
    assert failed["status"] == "Failed"
    assert failed["error"]["code"] == "ZonalAllocationFailed"
    assert failed["error"]["message"].startswith("Allocation failed. We do not have sufficient")
    assert len(azure_arm.compute.utilization(cr)[1]) == 1
    arm.act("DELETE", arm.vm_path("vm-2"))
    arm.act("DELETE", arm.vm_path("vm-1"))  # the unit is free again
    assert created(arm, azure_arm, "vm-3", group, **a100) == "Succeeded"
    # Before its window a Block reservation holds nothing.
    later = (
        (now + timedelta(days=30)).date().isoformat(),
        (now + timedelta(days=37)).date().isoformat(),
    )
    ahead = azure_arm.compute.reserve(
        "crg-block", "cr-a100-later", "Standard_NC24ads_A100_v4", 2, zone="1", window=later
    )
    assert azure_arm.compute.utilization(ahead) == (0, [])


def test_a_vm_is_refused_a_group_that_does_not_fit_it(azure_arm: ArmStandin, arm: Client) -> None:
    group = azure_arm.compute.reservation_group("crg", zones=("1",))
    azure_arm.compute.reserve("crg", "cr-d2", "Standard_D2s_v5", 2, zone="1")
    # No reservation of its size, or of its zone (a regional VM too).
    for name, kw in (
        ("vm-size", {"size": "Standard_D4s_v5", "zones": ["1"]}),
        ("vm-zone", {"zones": ["2"]}),
        ("vm-regional", {}),
    ):
        error = arm_error(make_vm(arm, azure_arm, name, group, **kw), 400, "InvalidParameter")
        assert error["target"] == "capacityReservation.capacityReservationGroup.id"
        assert "has no capacity reservation for VM size" in error["message"]
    error = arm_error(
        make_vm(arm, azure_arm, "vm-spot", group, zones=["1"], priority="Spot"),
        400,
        "InvalidParameter",
    )
    assert "Spot" in error["message"]
    arm_error(
        make_vm(arm, azure_arm, "vm-lost", arm.rg_path(GROUP, "nope"), zones=["1"]), 404, "NotFound"
    )
    # Deploying into a group is an action of its own, checked on the group (a linked scope).
    azure_arm.deny.add("Microsoft.Compute/capacityReservationGroups/deploy/action")
    error = arm_error(
        make_vm(arm, azure_arm, "vm-denied", group, zones=["1"]), 403, "LinkedAuthorizationFailed"
    )
    assert f"on the linked scope(s) '{group}'" in error["message"]
    azure_arm.deny.clear()
    # A VM in the group may not be resized to a size the group has no reservation of.
    assert created(arm, azure_arm, "vm-1", group, zones=["1"]) == "Succeeded"
    nic = arm.rg_path(NIC, "vm-1-nic")
    resized = vm_body([nic], size="Standard_D4s_v5", zones=["1"])
    resized["properties"]["capacityReservation"] = {"capacityReservationGroup": {"id": group}}
    arm_error(arm.put(arm.vm_path("vm-1"), resized), 400, "InvalidParameter")
    assert azure_arm.resources("Microsoft.Compute/virtualMachines")[0]["name"] == "vm-1"


def test_reservations_follow_the_rest_references_rules(azure_arm: ArmStandin, arm: Client) -> None:
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 10
    group = arm.rg_path(GROUP, "crg")
    ok(arm.put(group, {"location": "eastus", "zones": ["1"]}), 201)

    def reserve(name: str, size: str, quantity: int, **extra: Any) -> httpx.Response:
        body = {"location": "eastus", "sku": {"name": size, "capacity": quantity}, **extra}
        response: httpx.Response = arm.put(f"{group}/capacityReservations/{name}", body)
        return response

    # The quota for the whole quantity, as a VM's.
    error = arm_error(
        reserve("cr-d4", "Standard_D4s_v5", 3, zones=["1"]), 409, "OperationNotAllowed"
    )
    assert "Current Limit: 10, Current Usage: 0, Additional Required: 12" in error["message"]
    assert arm.poll(reserve("cr-d4", "Standard_D4s_v5", 2, zones=["1"]))["status"] == "Succeeded"
    assert usages(arm)["standardDSv5Family"] == 8
    # One reservation per size and zone in a group; a zone of the group's; its location.
    arm_error(reserve("cr-twin", "Standard_D4s_v5", 1, zones=["1"]), 409, "Conflict")
    arm_error(reserve("cr-z2", "Standard_D2s_v5", 1, zones=["2"]), 400, "InvalidParameter")
    arm_error(reserve("cr-none", "Standard_D2s_v5", 1), 400, "InvalidParameter")
    arm_error(
        arm.put(
            f"{group}/capacityReservations/cr-west",
            {"location": "westeurope", "sku": {"name": "Standard_D2s_v5", "capacity": 1}},
        ),
        400,
        "InvalidParameter",
    )
    # A size capacity reservations do not take (Azure's own text), and a restricted one.
    compute = azure_arm.compute
    compute.skus["standard_b2s"] = dataclasses.replace(
        compute.skus["standard_b2s"], reservable=False
    )
    error = arm_error(reserve("cr-b2", "Standard_B2s", 1, zones=["1"]), 400, "NotSupported")
    assert error["message"] == "Capacity Reservation is not supported for VM size Standard_B2s."
    compute.restrict_sku("Standard_E4s_v5", "eastus", ("1",))
    arm_error(reserve("cr-e4", "Standard_E4s_v5", 1, zones=["1"]), 409, "SkuNotAvailable")
    # A window only in a Block group, and always there.
    window = {"scheduleProfile": {"start": "2030-01-01", "end": "2030-01-08"}}
    arm_error(
        reserve("cr-w", "Standard_D2s_v5", 1, zones=["1"], properties=window),
        400,
        "InvalidParameter",
    )
    block = arm.rg_path(GROUP, "crg-block")
    ok(arm.put(block, {"location": "eastus", "properties": {"reservationType": "Block"}}), 201)
    arm_error(
        arm.put(
            f"{block}/capacityReservations/cr",
            {"location": "eastus", "sku": {"name": "Standard_D2s_v5", "capacity": 1}},
        ),
        400,
        "InvalidParameter",
    )
    # A re-PUT changes the quantity (quota checked again), never the size.
    resized = reserve("cr-d4", "Standard_D4s_v5", 1, zones=["1"])
    assert ok(resized)["properties"]["provisioningState"] == "Updating"
    assert arm.poll(resized)["status"] == "Succeeded"
    assert usages(arm)["standardDSv5Family"] == 4
    arm_error(reserve("cr-d4", "Standard_D2s_v5", 1, zones=["1"]), 409, "PropertyChangeNotAllowed")
    arm_error(
        arm.put(group, {"location": "eastus", "zones": ["2"]}), 409, "PropertyChangeNotAllowed"
    )
    assert ok(arm.put(group, {"location": "eastus", "zones": ["1"], "tags": {"a": "b"}}))[
        "tags"
    ] == {"a": "b"}
