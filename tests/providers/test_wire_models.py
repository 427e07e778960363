"""The catalog models on the wire: the spec's JSON names, Go omitempty, and decode errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from drivers.spec.types import LabelDefinition
from providers.core.errors import UsageError
from providers.core.wire import WireError, from_wire, to_wire
from providers.models import (
    AWSRegion,
    InstanceTypeSpec,
    KubernetesRegion,
    ListResourceFilter,
    RegionResource,
    RegionResourceItem,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricing,
    ResourcePricingItem,
    ResourceStat,
    ResourceStatItem,
    Selector,
    aws_region,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "fixtures" / "overview_example.json"


@pytest.fixture
def example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text())
    return data


# -- the spec's example ------------------------------------------------------------------------


def test_example_overview_items_round_trip_exactly(example: dict[str, Any]) -> None:
    items = example["overview"]
    assert items, "the fixture must hold the spec's overview list"
    for raw in items:
        parsed = from_wire(RegionResourceItem, raw)
        assert to_wire(parsed) == raw


def test_example_item_is_parsed_into_the_models(example: dict[str, Any]) -> None:
    item = from_wire(RegionResourceItem, example["overview"][0])
    assert item.key == "xxx.kubernetes.io/minipod"
    assert item.value == "abc-fcten9xi29f9dxas9e21"
    assert item.next_level == []
    assert item.stat.on_demand is None
    assert item.stat.scheduled is None
    spot = item.stat.spot
    assert spot is not None
    assert spot.allocated["gpu"] == {"NVIDIA-H20": "2118"}
    assert spot.allocated["instance"]["are7.2xl-nvidia.h20.96g.8x"] == "228"
    assert spot.allocatable == {"gpu": {"NVIDIA-H20": "898"}}
    assert spot.supply == {"gpu": {"NVIDIA-H20": "3016"}}


def test_example_document_round_trips_as_region_resource(example: dict[str, Any]) -> None:
    parsed = from_wire(RegionResource, example)
    assert parsed.region == RegionSpec(name="cn-x")
    assert parsed.breakdown == {}
    wire = to_wire(parsed)
    assert wire == example
    assert "breakdown" not in wire
    # And through JSON text, as a client would read it.
    assert json.loads(json.dumps(wire)) == example


def test_resource_is_flat_region_resource_plus_provider(example: dict[str, Any]) -> None:
    doc = {**example, "provider": "kube"}
    parsed = from_wire(Resource, doc)
    assert parsed.provider == "kube"
    assert to_wire(parsed) == doc


def test_breakdown_and_next_level_round_trip(example: dict[str, Any]) -> None:
    child = {"key": "zone", "value": "a", "stat": {"onDemand": _stat_item("1")}}
    parent = {**example["overview"][0], "nextLevel": [child]}
    doc = {"region": None, "overview": [parent], "breakdown": {"driver": [child]}}
    assert to_wire(from_wire(RegionResource, doc)) == doc


def _stat_item(qty: str) -> dict[str, Any]:
    return {
        "allocated": {"cpu": {"vcpu": qty}},
        "supply": {"cpu": {"vcpu": qty}},
        "allocatable": {"cpu": {"vcpu": "0"}},
    }


# -- omitempty and exact names ----------------------------------------------------------------


def test_stat_with_only_spot_has_no_on_demand_or_scheduled_key() -> None:
    wire = to_wire(ResourceStat(spot=ResourceStatItem(supply={"gpu": {"NVIDIA-H20": "1"}})))
    assert wire == {
        "spot": {"allocated": {}, "supply": {"gpu": {"NVIDIA-H20": "1"}}, "allocatable": {}}
    }
    assert to_wire(ResourceStat()) == {}


def test_stat_on_demand_is_named_on_demand_in_camel_case() -> None:
    wire = to_wire(ResourceStat(on_demand=ResourceStatItem()))
    assert list(wire) == ["onDemand"]


def test_item_without_next_level_has_no_next_level_key() -> None:
    wire = to_wire(RegionResourceItem(key="node", value="h1"))
    assert wire == {"key": "node", "value": "h1", "stat": {}}
    nested = to_wire(RegionResourceItem(key="a", next_level=[RegionResourceItem(key="b")]))
    assert nested["nextLevel"] == [{"key": "b", "value": "", "stat": {}}]


def test_pricing_item_omits_unknown_prices_and_uses_spec_names() -> None:
    assert to_wire(ResourcePricingItem()) == {}
    assert to_wire(ResourcePricingItem(spot_price=0.12)) == {"spotPrice": 0.12}
    full = ResourcePricingItem(on_demand_price=1.5, spot_price=0.5, scheduled_price=1.0)
    assert to_wire(full) == {"onDemandPrice": 1.5, "spotPrice": 0.5, "scheduledPrice": 1.0}


def test_pricing_item_keeps_a_zero_price() -> None:
    # A Go *float64 with omitempty drops only nil: a free (0) price is a known price.
    assert to_wire(ResourcePricingItem(on_demand_price=0.0)) == {"onDemandPrice": 0.0}


def test_pricing_document_shape() -> None:
    pricing = ResourcePricing(
        region=RegionSpec(name="local"), items={"host": ResourcePricingItem(spot_price=2.0)}
    )
    assert to_wire(pricing) == {"region": {"name": "local"}, "items": {"host": {"spotPrice": 2.0}}}


def test_list_options_wire_names() -> None:
    opts = ResourceListOptions(
        region=RegionSpec(name="r1", zones=["a", "b"]),
        start_time=datetime(2026, 3, 7, 3, 29, tzinfo=UTC),
        end_time=datetime(2026, 3, 7, 5, 0, tzinfo=UTC),
        filter=ListResourceFilter(
            resource_selectors=[Selector(key="vcpus", operator="Gte", values=["4"])]
        ),
    )
    assert to_wire(opts) == {
        "region": {"name": "r1", "zones": ["a", "b"]},
        "start_time": "2026-03-07T03:29:00Z",
        "end_time": "2026-03-07T05:00:00Z",
        "filter": {"resourceSelectors": [{"key": "vcpus", "operator": "Gte", "values": ["4"]}]},
    }
    assert to_wire(ResourceListOptions()) == {"region": {"name": ""}}


def test_exists_selector_prints_empty_values_as_upstream_does() -> None:
    # The upstream Go types.Selector has `values` without omitempty.
    wire = to_wire(Selector(key="gpu", operator="Exists"))
    assert wire == {"key": "gpu", "operator": "Exists", "values": []}


def test_instance_type_omits_empty_gpu_fields_but_keeps_gpu_count() -> None:
    wire = to_wire(InstanceTypeSpec(name="host", vcpus=2, memory_gib=4.5, arch="arm64"))
    assert wire == {
        "name": "host",
        "instanceType": "host",  # the upstream Go types.InstanceTypeSpec's member
        "vcpus": 2,
        "memory_gib": 4.5,
        "arch": "arm64",
        "gpu_count": 0,
    }


def test_an_also_name_reads_back_and_must_agree_with_the_field() -> None:
    assert from_wire(InstanceTypeSpec, {"instanceType": "m5.large"}).name == "m5.large"
    both = {"name": "m5.large", "instanceType": "m5.large"}
    assert from_wire(InstanceTypeSpec, both).name == "m5.large"
    with pytest.raises(WireError, match=r"^instanceType: differs from name"):
        from_wire(InstanceTypeSpec, {"name": "a", "instanceType": "b"})


def test_upstream_region_members() -> None:
    aws = aws_region(RegionSpec(name="us-east-1", location="US East (N. Virginia)"))
    assert to_wire(aws) == {
        "name": "us-east-1",
        "location": "US East (N. Virginia)",
        "aws": {"region": "us-east-1"},
    }
    assert to_wire(AWSRegion(region="us-east-1", zone="us-east-1a"))["zone"] == "us-east-1a"
    kube = RegionSpec(name="prod", kubernetes=KubernetesRegion("prod", "loop", "default"))
    assert to_wire(kube)["kubernetes"] == {
        "context": "prod",
        "cluster": "loop",
        "namespace": "default",
    }
    assert from_wire(RegionSpec, to_wire(kube)) == kube
    assert to_wire(aws_region(RegionSpec())) == {"name": ""}  # no region, no member


def test_datetimes_serialise_as_utc_with_z() -> None:
    plus_two = timezone(timedelta(hours=2))
    opts = ResourceListOptions(start_time=datetime(2026, 3, 7, 5, 29, 0, 999, tzinfo=plus_two))
    assert to_wire(opts)["start_time"] == "2026-03-07T03:29:00Z"


def test_datetimes_decode_from_offsets_and_encode_back_in_utc() -> None:
    doc = {"region": {"name": ""}, "start_time": "2026-03-07T05:29:00+02:00"}
    opts = from_wire(ResourceListOptions, doc)
    assert opts.start_time == datetime(2026, 3, 7, 3, 29, tzinfo=UTC)
    assert to_wire(opts)["start_time"] == "2026-03-07T03:29:00Z"


# -- decode errors name the dotted path ---------------------------------------------------------


def _error(cls: type, data: Any) -> WireError:
    with pytest.raises(WireError) as info:
        from_wire(cls, data)
    return info.value


def test_wrong_scalar_type_names_the_dotted_path() -> None:
    err = _error(LabelDefinition, {"driver": "test", "resources": {"cpu": "four"}})
    assert err.path == "resources.cpu"
    assert str(err).startswith("resources.cpu: expected an integer")
    assert isinstance(err, UsageError)


def test_fractional_integer_is_rejected() -> None:
    err = _error(InstanceTypeSpec, {"name": "x", "gpu_count": 1.5})
    assert "gpu_count: expected an integer" in str(err)


def test_boolean_is_not_a_number() -> None:
    assert "vcpus: expected a number" in str(_error(InstanceTypeSpec, {"vcpus": True}))


def test_quantity_must_be_a_string_with_its_path(example: dict[str, Any]) -> None:
    example["overview"][0]["stat"]["spot"]["allocated"]["gpu"]["NVIDIA-H20"] = 2118
    err = _error(RegionResource, example)
    assert err.path == "overview[0].stat.spot.allocated.gpu.NVIDIA-H20"
    assert "expected a string" in str(err)


def test_unknown_field_is_rejected_with_its_path_and_the_known_fields(
    example: dict[str, Any],
) -> None:
    example["overview"][0]["stat"]["spotty"] = {}
    err = _error(RegionResource, example)
    assert err.path == "overview[0].stat.spotty"
    assert "unknown field" in str(err)
    assert "onDemand" in str(err) and "spot" in str(err)


def test_unknown_top_level_field_is_rejected() -> None:
    err = _error(ResourcePricingItem, {"onDemandPrice": 1.0, "on_demand_price": 2.0})
    assert str(err).startswith("on_demand_price: unknown field")


def test_unknown_fields_are_ignored_when_not_strict() -> None:
    item = from_wire(ResourcePricingItem, {"spotPrice": 1, "extra": True}, strict=False)
    assert item == ResourcePricingItem(spot_price=1.0)


def test_container_type_mismatch_names_the_path() -> None:
    err = _error(RegionResource, {"overview": {"key": "x"}})
    assert str(err) == "overview: expected an array, got object"
    err = _error(RegionResource, {"overview": [{"nextLevel": [{"stat": []}]}]})
    assert err.path == "overview[0].nextLevel[0].stat"


def test_bad_time_names_the_field() -> None:
    err = _error(ResourceListOptions, {"start_time": "yesterday"})
    assert err.path == "start_time"
    assert "RFC 3339" in str(err)
    err = _error(ResourceListOptions, {"end_time": "2026-03-07T03:29:00"})
    assert err.path == "end_time"


def test_top_level_non_object_is_reported() -> None:
    err = _error(RegionResource, ["not", "an", "object"])
    assert "expected an object, got array" in str(err)
