"""`alloc --offers` launching gcp offers through the gcp driver, against the loopback Compute
Engine: each zone of an offer an attempt of its own, the next one taken when a zone's pool is
exhausted, the offer's machine type and market sent."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.conftest import Run
from tests.drivers.gcp.standin import ComputeStandin

Cli = Callable[..., Run]


def gcp_offer(zones: list[str], market: str = "onDemand") -> dict[str, Any]:
    return {
        "provider": "gcp",
        "driver": "gcp",
        "region": {"name": "us-central1"},
        "zones": zones,
        "instanceType": "g2-standard-4",
        "shape": {"vcpus": 4, "memoryGiB": 16, "gpu": "L4", "gpuCount": 1, "arch": "x86_64"},
        "market": market,
        "instances": 1,
        "pricePerHour": 0.7,
        "totalPerHour": 0.7,
        "currency": "USD",
        "fitsNow": None,
    }


def document(*offers: dict[str, Any]) -> str:
    request = {"gpus": 1, "gpu": "L4", "cpu": None, "ram": None, "market": "any"}
    return json.dumps({"request": request, "offers": list(offers), "rejected": [], "failures": []})


def test_a_gcp_offer_fails_over_to_its_next_zone_and_launches_there(
    cli: Cli,
    env: dict[str, str],
    gce: ComputeStandin,
) -> None:
    gce.fail_insert("ZONE_RESOURCE_POOL_EXHAUSTED", zone="us-central1-a")
    doc = document(gcp_offer(["us-central1-a", "us-central1-b"], market="spot"))
    run = cli("alloc", "--offers", "-", "--lifetime", "1h", "--json", input=doc, env=env)
    assert run.exit_code == 0, run.stderr
    tried = [line for line in run.stderr.splitlines() if line.startswith("tried ")]
    assert len(tried) == 1 and tried[0].startswith("tried gcp us-central1-a g2-standard-4 spot: ")
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in tried[0] or "exhausted" in tried[0]
    [made] = run.json()
    assert made["driver"] == "gcp/default" and made["status"] == "ALLOCATED"
    assert made["resource"]["metadata"]["zone"] == "us-central1-b"
    bodies = [c.body for c in gce.calls("compute.instances.insert")]
    assert [b["machineType"].rsplit("/", 1)[-1] for b in bodies] == ["g2-standard-4"] * 2
    assert bodies[-1]["scheduling"]["provisioningModel"] == "SPOT"
    assert cli("free", made["id"], env=env).exit_code == 0


def test_an_offer_covered_by_a_reservation_consumes_it_by_name(
    cli: Cli,
    env: dict[str, str],
    gce: ComputeStandin,
) -> None:
    covered = gcp_offer(["us-central1-b"])
    covered["reservation"] = {"id": "team-l4", "kind": "reservation", "zone": "us-central1-b",
                              "available": 2}  # fmt: skip
    run = cli("alloc", "--offers", "-", "--json", input=document(covered), env=env)
    assert run.exit_code == 0, run.stderr
    (sent,) = [c.body for c in gce.calls("compute.instances.insert")]
    assert sent["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["team-l4"],
    }
    assert cli("free", run.json()[0]["id"], env=env).exit_code == 0


def test_the_reservation_option_of_the_driver(
    cli: Cli,
    env: dict[str, str],
    gce: ComputeStandin,
) -> None:
    base = ["alloc", "--driver", "gcp", "--cpu", "2", "--ram", "8", "--json"]
    made = cli(*base, "-o", "reservation=none", env=env)
    assert made.exit_code == 0, made.stderr
    (sent,) = [c.body for c in gce.calls("compute.instances.insert")]
    assert sent["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert cli("free", made.json()["id"], env=env).exit_code == 0
    spot = cli(*base, "-o", "reservation=team-l4", "-o", "spot=true", env=env)
    assert spot.exit_code == 2 and "options.reservation: spot VMs" in spot.stderr
    bad = cli(*base, "-o", "reservation=Team_L4", env=env)
    assert bad.exit_code == 2 and "reservation" in bad.stderr and "any or none" in bad.stderr
    assert len(gce.calls("compute.instances.insert")) == 1  # neither refusal reached Google
