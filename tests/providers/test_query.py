"""The catalog query service: typed answers, failures as data, checks before requests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from providers import query
from providers.core.errors import CredentialsError, ShoalError, UsageError
from providers.models import (
    InstanceTypeSpec,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricing,
    ResourcePricingItem,
)
from providers.query import Query
from providers.selectors import parse

T0 = datetime(2026, 12, 1, tzinfo=UTC)


class FakeCatalog:
    """Answers from memory and records what it was asked."""

    def __init__(self, name: str, prices: dict[str, float], fail: ShoalError | None = None):
        self.name = name
        self.prices = prices
        self.fail = fail
        self.asked: list[str] = []

    def provider(self) -> str:
        return self.name

    def list_regions(self) -> list[RegionSpec]:
        self.asked.append("regions")
        return [RegionSpec(name="r1"), RegionSpec(name="r2")]

    def list_instance_types(self, region: RegionSpec | None) -> list[InstanceTypeSpec]:
        self.asked.append(f"types {region.name if region else '-'}")
        return [
            InstanceTypeSpec(name="big", vcpus=64, memory_gib=256, region="r1"),
            InstanceTypeSpec(name="small", vcpus=2, memory_gib=None, region="r1"),
        ]

    def list_resources(self, opts: ResourceListOptions) -> list[Resource]:
        self.asked.append(f"resources {opts.region.name}")
        return [Resource(region=opts.region, provider=self.name)]

    def list_resource_predictions(self, opts: ResourceListOptions) -> dict[str, Resource]:
        self.asked.append("predictions")
        return {"2026-12-01T00:00:00Z": Resource(region=opts.region)}

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]:
        if self.fail:
            raise self.fail
        items = {n: ResourcePricingItem(on_demand_price=p) for n, p in self.prices.items()}
        return [ResourcePricing(region=opts.region, items=items)]

    def list_pricing_predictions(self, opts: ResourceListOptions) -> dict[str, Any]:
        return {"2026-12-01T00:00:00Z": ResourcePricing(region=opts.region)}


def test_types_select_sort_limit_and_say_what_they_could_not_judge() -> None:
    catalog = FakeCatalog("c", {})
    wanted = Query(selectors=parse(["memory_gib>=1"]), sort="-vcpus", limit=5)
    answer = query.types(catalog, "c", wanted)  # type: ignore[arg-type]
    assert [t.name for t in answer.types] == ["big"]
    assert answer.notes == [
        "c: --select could not judge 1 row(s) with no known memory_gib (left out; "
        "`--select '!memory_gib'` lists them)"
    ]


def test_region_all_asks_every_region_and_a_window_is_for_one() -> None:
    catalog = FakeCatalog("c", {})
    answer = query.resources(catalog, Query(regions=["all"]))  # type: ignore[arg-type]
    assert [r.region.name for r in answer.now if r.region] == ["r1", "r2"]
    with pytest.raises(UsageError, match="one region"):
        query.resources(catalog, Query(regions=["all"], start=T0))  # type: ignore[arg-type]
    windowed = query.resources(catalog, Query(regions=["r1"], start=T0))  # type: ignore[arg-type]
    assert windowed.window is not None and not windowed.now


def test_window_errors_come_before_any_request() -> None:
    catalog = FakeCatalog("c", {})
    with pytest.raises(UsageError, match="is before --start"):
        query.resources(
            catalog,  # type: ignore[arg-type]
            Query(start=T0, end=T0.replace(year=2025)),
        )
    with pytest.raises(UsageError, match="pricing sorts by"):
        query.pricing(["c"], lambda name: catalog, Query(sort="colour"))  # type: ignore[arg-type,return-value]
    assert catalog.asked == []


def test_one_failing_provider_is_data_the_others_answer() -> None:
    catalogs = {
        "up": FakeCatalog("up", {"a": 2.0, "b": 1.0}),
        "down": FakeCatalog("down", {}, CredentialsError("down: set DOWN_KEY")),
    }
    answer = query.pricing(["up", "down"], catalogs.__getitem__, Query(sort="price", limit=1))  # type: ignore[arg-type]
    assert [f.message for f in answer.failures] == ["down: set DOWN_KEY"]
    assert [(p.provider, list(p.items)) for p in answer.now] == [("up", ["b"])]
    assert [r.instance_type for r in answer.rows] == ["b"]


def test_when_all_fail_the_error_is_the_last_with_the_others_before_it() -> None:
    catalogs = {
        "a": FakeCatalog("a", {}, CredentialsError("set A_KEY")),
        "b": FakeCatalog("b", {}, ShoalError("b: unreachable")),
    }
    answer = query.pricing(["a", "b"], catalogs.__getitem__, Query())  # type: ignore[arg-type]
    # Both are failures to print (the JSON's error entries); the error is the command's.
    assert [f.message for f in answer.failures] == ["a: set A_KEY", "b: unreachable"]
    assert answer.error is not None and str(answer.error) == "b: unreachable"
    assert answer.error.earlier == ("a: set A_KEY",)
