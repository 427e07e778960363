"""The `azure` driver placing VMs on capacity reservation groups (`-o
capacity_reservation_group=`), and `alloc --offers` launching an azure offer covered by a
reservation into its group, against the ARM stand-in."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.conftest import Run
from tests.drivers.azure.runs import DRIVER, alloc, allocated, nothing_left, one_line, vm_name
from tests.drivers.azure.standin import RESOURCE_GROUP, ArmStandin

Cli = Callable[..., Run]
SIZE = ("--cpu", "2", "--ram", "8", "-o", "size=Standard_D2s_v5")


def test_a_vm_goes_on_the_group_named_and_frees_its_unit(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    group = azure_arm.compute.reservation_group("ci-group")
    reservation = azure_arm.compute.reserve("ci-group", "d2", "Standard_D2s_v5", 2)
    dry = alloc(cli, env, *SIZE, "-o", "capacity_reservation_group=ci-group", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    choice = dry.json()["choice"]
    assert choice["capacity_reservation_group"] == group
    assert "holds the quota" in choice["capacity"]["note"]
    made = allocated(cli, env, *SIZE, "-o", "capacity_reservation_group=ci-group")
    vm = azure_arm.compute.vm(RESOURCE_GROUP, vm_name(made))
    assert vm is not None
    assert vm["properties"]["capacityReservation"]["capacityReservationGroup"]["id"] == group
    assert azure_arm.compute.utilization(reservation)[1] == [vm["id"]]
    assert cli("free", made["id"], env=env).exit_code == 0
    assert azure_arm.compute.utilization(reservation)[1] == []
    nothing_left(azure_arm)


def test_a_group_by_resource_id_spot_and_unknown_names_are_checked(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    group = azure_arm.compute.reservation_group("ci-group")
    azure_arm.compute.reserve("ci-group", "d2", "Standard_D2s_v5", 1)
    made = allocated(cli, env, *SIZE, "-o", f"capacity_reservation_group={group}")
    assert azure_arm.compute.vm(RESOURCE_GROUP, vm_name(made)) is not None
    spot = alloc(cli, env, *SIZE, "-o", "capacity_reservation_group=ci-group", "-o", "spot=true")
    assert spot.exit_code == 2 and "options.capacity_reservation_group" in one_line(spot)
    unknown = alloc(cli, env, *SIZE, "-o", "capacity_reservation_group=nope")
    assert unknown.exit_code == 2, unknown.stderr
    assert "no group named nope in eastus" in one_line(unknown)
    bad = alloc(cli, env, *SIZE, "-o", "capacity_reservation_group=../x")
    assert bad.exit_code == 2 and "capacity_reservation_group" in bad.stderr


def azure_offer(reservation: dict[str, Any] | None) -> dict[str, Any]:
    offer: dict[str, Any] = {
        "provider": "azure",
        "driver": "azure",
        "region": {"name": "eastus"},
        "zones": [],
        "instanceType": "Standard_D2s_v5",
        "shape": {"vcpus": 2, "memoryGiB": 8, "gpu": "", "gpuCount": 0, "arch": "x86_64"},
        "market": "onDemand",
        "instances": 1,
        "pricePerHour": 0.096,
        "totalPerHour": 0.096,
        "currency": "USD",
        "fitsNow": None,
    }
    if reservation is not None:
        offer["reservation"] = reservation
    return offer


def document(*offers: dict[str, Any]) -> str:
    request = {"gpus": 0, "gpu": "", "cpu": 2, "ram": 8, "market": "on-demand"}
    return json.dumps({"request": request, "offers": list(offers), "rejected": [], "failures": []})


def test_an_azure_offer_covered_by_a_reservation_launches_into_its_group(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    group = azure_arm.compute.reservation_group("ci-group")
    azure_arm.compute.reserve("ci-group", "d2", "Standard_D2s_v5", 1)
    reservation = {"id": "ci-group/d2", "kind": "capacity-reservation", "zone": "",
                   "available": 1, "total": 1}  # fmt: skip
    doc = document(azure_offer(reservation))
    run = cli("alloc", "--offers", "-", "--driver", DRIVER, "--lifetime", "1h", "--json",
              input=doc, env=env)  # fmt: skip
    assert run.exit_code == 0, run.stderr
    [made] = run.json()
    assert made["driver"] == DRIVER and made["status"] == "ALLOCATED"
    vm = azure_arm.compute.vm(RESOURCE_GROUP, vm_name(made))
    assert vm is not None
    assert vm["properties"]["capacityReservation"]["capacityReservationGroup"]["id"] == group
    assert vm["properties"]["hardwareProfile"]["vmSize"] == "Standard_D2s_v5"
    # A plain azure offer launches through the driver too, on no group.
    plain = cli("alloc", "--offers", "-", "--driver", DRIVER, "--lifetime", "1h", "--json",
                input=document(azure_offer(None)), env=env)  # fmt: skip
    assert plain.exit_code == 0, plain.stderr
    [other] = plain.json()
    vm = azure_arm.compute.vm(RESOURCE_GROUP, vm_name(other))
    assert vm is not None and "capacityReservation" not in vm["properties"]


def test_offers_name_the_reservation_and_alloc_acts_on_them(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    group = azure_arm.compute.reservation_group("ci-group")
    azure_arm.compute.reserve("ci-group", "d2", "Standard_D2s_v5", 2)
    found = cli("offers", "-p", "azure", "-r", "eastus", "--cpu", "2", "--ram", "8",
                "--market", "on-demand", "--json", env=env)  # fmt: skip
    assert found.exit_code == 0, found.stderr
    first = found.json()["offers"][0]
    assert first["instanceType"] == "Standard_D2s_v5"  # marginal price 0 while it lasts
    assert first["reservation"]["id"] == "ci-group/d2" and first["marginalPerHour"] == 0
    run = cli("alloc", "--offers", "-", "--driver", DRIVER, "--lifetime", "1h", "--json",
              input=found.stdout, env=env)  # fmt: skip
    assert run.exit_code == 0, run.stderr
    [made] = run.json()
    vm = azure_arm.compute.vm(RESOURCE_GROUP, vm_name(made))
    assert vm is not None
    assert vm["properties"]["capacityReservation"]["capacityReservationGroup"]["id"] == group
