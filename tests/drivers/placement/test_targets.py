"""An offers document read into targets, and the definition each driver is handed: the
user's (flags, -o, -o DRIVER.KEY) with the offer's choices over it."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from drivers.placement.document import parse
from drivers.placement.targets import Base, Target, definition, targets
from providers.core.errors import UsageError


def doc(*offers: dict[str, Any], request: dict[str, Any] | None = None) -> str:
    return json.dumps({"request": request or {}, "offers": list(offers), "rejected": []})


def aws_offer(**more: Any) -> dict[str, Any]:
    return {
        "provider": "aws",
        "driver": "aws",
        "region": {"name": "us-east-1", "aws": {"region": "us-east-1"}},
        "zones": ["us-east-1a", "us-east-1b"],
        "instanceType": "p5.48xlarge",
        "shape": {
            "vcpus": 192,
            "memoryGiB": 2048,
            "gpu": "H100",
            "gpuCount": 8,
            "gpuMemoryGiB": 80,
            "arch": "x86_64",
        },
        "market": "spot",
        "instances": 1,
        "someFieldOfALaterVersion": {"ignored": True},
        **more,
    }


def test_unknown_fields_are_ignored_and_times_read() -> None:
    block = {"id": "cr-0123456789abcdef0", "kind": "capacity-block", "available": 1,
             "zone": "us-east-1b", "start": "2026-05-01T11:30:00Z", "end": None}  # fmt: skip
    read = parse(doc(aws_offer(market="onDemand", reservation=block)), "x")
    (offer,) = read.offers
    assert offer.reservation is not None
    assert offer.reservation.start == datetime(2026, 5, 1, 11, 30, tzinfo=UTC)
    assert offer.shape.gpu_count == 8 and offer.zones == ("us-east-1a", "us-east-1b")


def test_a_time_that_is_not_one_is_named() -> None:
    block = {"id": "cr-1", "kind": "capacity-block", "start": "tomorrow"}
    with pytest.raises(UsageError, match=r"^x: offers\[0\]\.reservation\.start: 'tomorrow' is"):
        parse(doc(aws_offer(reservation=block)), "x")


def test_an_aws_offer_is_one_target_per_zone_with_the_offers_options() -> None:
    read = parse(doc(aws_offer()), "x")
    found = targets(read.offers)
    assert [t.label() for t in found] == [
        "aws us-east-1a p5.48xlarge spot",
        "aws us-east-1b p5.48xlarge spot",
    ]
    given = {"image": "ami-0123456789abcdef0", "spot": False, "zone": "x",
             "kubernetes.image": "busybox", "aws.tags": {"team": "ml"}}  # fmt: skip
    base = Base({"options": given})
    made = definition(base, found[1], read.request)
    assert made.driver == "aws"
    assert made.options == {
        "image": "ami-0123456789abcdef0",
        "tags": {"team": "ml"},
        "region": "us-east-1",
        "zone": "us-east-1b",
        "instance_type": "p5.48xlarge",
        "market": "spot",
        "fallback": "off",
    }
    # The type's own sizes where the user gave none.
    assert (made.resources.cpu, made.resources.ram) == (192, 2048)
    sized = definition(Base({"resources": {"cpu": 8, "ram": 64}}), found[0], read.request)
    assert (sized.resources.cpu, sized.resources.ram) == (8, 64)


def test_a_reservation_names_its_zone_and_is_targeted() -> None:
    reserved = {"id": "cr-0123456789abcdef0", "kind": "capacity-reservation", "available": 2,
                "zone": "us-east-1b"}  # fmt: skip
    read = parse(doc(aws_offer(market="onDemand", reservation=reserved)), "x")
    (only,) = targets(read.offers)
    assert only.zone == "us-east-1b"
    options = definition(Base({}), only, read.request).options
    assert options["reservation"] == "cr-0123456789abcdef0" and options["market"] == "on-demand"
    block = dict(reserved, kind="capacity-block")
    read = parse(doc(aws_offer(market="onDemand", reservation=block)), "x")
    options = definition(Base({}), targets(read.offers)[0], read.request).options
    assert options["market"] == "capacity-block"


def test_a_kubernetes_offer_selects_its_pool_and_takes_its_share_of_gpus() -> None:
    pool = {"key": "cloud.google.com/gke-nodepool", "value": "h100", "nodes": 2, "fitting": 1}
    offer = aws_offer(provider="kubernetes", driver="kubernetes", region={"name": "prod"},
                      zones=["us-central1-a"], pool=pool, gpusPerInstance=4)  # fmt: skip
    read = parse(doc(offer, request={"gpus": 4}), "x")
    (only,) = targets(read.offers)
    assert only.zone == "" and only.label() == "kubernetes prod p5.48xlarge spot"
    base = Base({"options": {"image": "trainer:1", "node_selector": {"team": "ml"},
                             "aws.image": "ami-0123456789abcdef0"}})  # fmt: skip
    made = definition(base, only, read.request)
    assert made.options == {
        "image": "trainer:1",
        "node_selector": {"team": "ml", "cloud.google.com/gke-nodepool": "h100"},
        "spot": True,
        "gpus": 4,
    }
    assert (made.resources.cpu, made.resources.ram) == (1, 1)
    # Without a pool: the instance type's label.
    read = parse(doc(dict(offer, pool=None, gpusPerInstance=None), request={"gpus": 16}), "x")
    made = definition(base, targets(read.offers)[0], read.request)
    assert made.options["node_selector"]["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert made.options["gpus"] == 8  # 16 asked of one instance: at most the node's


def test_a_local_offer_takes_the_users_definition_and_the_requests_sizes() -> None:
    local = {"provider": "local", "driver": "process", "region": {"name": "local"},
             "instanceType": "host", "market": "onDemand", "instances": 2}  # fmt: skip
    read = parse(doc(local, request={"cpu": 4, "ram": 8.5}), "x")
    base = Base({"options": {"entry": "sleep 60", "process.grace_seconds": 1}},
                instances={"process": "process/dev"})  # fmt: skip
    target = Target(read.offers[0])
    made = definition(base, target, read.request)
    assert made.options == {"entry": "sleep 60", "grace_seconds": 1}
    assert made.driver == "process/dev"
    assert (made.resources.cpu, made.resources.ram) == (2, 5)  # each of two, rounded up


def test_options_scoped_to_no_driver_are_refused() -> None:
    with pytest.raises(UsageError, match=r"-o gpc\.zone: .* 'gpc' is not a driver"):
        Base({"options": {"gpc.zone": "x"}}).check()
    Base({"options": {"gcp.zone": "x", "ec2.image": "ami-0123456789abcdef0"}}).check()


def test_offers_no_driver_launches_are_not_launchable() -> None:
    other = aws_offer(provider="lambda", driver="lambda", region={"name": "us-east-1"})
    ec2 = aws_offer(driver="ec2")
    read = parse(doc(other, ec2), "x")
    found = targets(read.offers)
    assert [t.launchable for t in found] == [False, True, True]
    assert found[0].skipped == "no lambda driver yet"
    # An alias is its driver: the aws options.
    assert definition(Base({}), found[1], read.request).options["region"] == "us-east-1"


def test_a_gcp_offer_launches_in_each_of_its_zones_and_not_without_one() -> None:
    zoned = aws_offer(provider="gcp", driver="gcp", region={"name": "us-central1"},
                      zones=["us-central1-a", "us-central1-c"], instanceType="a3-highgpu-8g")
    bare = aws_offer(provider="gcp", driver="gce", region={"name": "us-central1"}, zones=[],
                     instanceType="a3-highgpu-8g", market="onDemand")  # fmt: skip
    read = parse(doc(zoned, bare), "x")
    found = targets(read.offers)
    assert [(t.zone, t.launchable) for t in found] == [
        ("us-central1-a", True), ("us-central1-c", True), ("", False)
    ]
    assert "zones are unknown" in (found[2].skipped or "")
    made = definition(Base({"options": {"gcp.image": "projects/p/global/images/family/f"}}),
                      found[1], read.request)  # fmt: skip
    assert made.driver == "gcp"
    assert made.options == {
        "image": "projects/p/global/images/family/f", "zone": "us-central1-c",
        "machine_type": "a3-highgpu-8g", "spot": True, "fallback": "off",
    }  # fmt: skip


def test_an_azure_offer_names_its_location_size_and_reservation_group() -> None:
    plain = aws_offer(provider="azure", driver="azure", region={"name": "eastus"}, zones=[],
                      instanceType="Standard_ND96asr_v4", market="spot")
    reserved = aws_offer(
        provider="azure", driver="azure", region={"name": "westeurope"}, zones=[],
        instanceType="Standard_D4s_v5", market="onDemand",
        reservation={"id": "ci-group/d4", "kind": "capacity-reservation", "zone": "2",
                     "available": 3, "total": 4},
    )  # fmt: skip
    read = parse(doc(plain, reserved), "x")
    found = targets(read.offers)
    assert [(t.launchable, t.zone) for t in found] == [(True, ""), (True, "2")]
    spot = definition(Base({}), found[0], read.request)
    assert spot.options == {"location": "eastus", "size": "Standard_ND96asr_v4", "spot": True,
                            "fallback": "off"}  # fmt: skip
    into = definition(Base({"options": {"size": "mine", "entry": "true"}}), found[1],
                      read.request).options  # fmt: skip
    assert into == {"entry": "true", "location": "westeurope", "size": "Standard_D4s_v5",
                    "spot": False, "fallback": "off", "zone": "2",
                    "capacity_reservation_group": "ci-group"}  # fmt: skip
