"""Pricing across providers and regions as one list of rows: sorted, limited, regrouped.

`pricing --provider aws,azure,gcp --sort price --limit 10` ranks instance types of every
region of every provider together; JSON keeps the spec's per-region ResourcePricing shape,
regrouped from the rows that survived, in the order the sort gave them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from providers.core.errors import UsageError
from providers.models import ResourcePricing, ResourcePricingItem

SORT_KEYS = {
    "price": "on-demand price per hour",
    "spot_price": "spot price per hour",
    "scheduled_price": "scheduled price per hour",
    "name": "instance type name",
    "instance_type": "instance type name",
    "region": "region name",
    "provider": "provider name",
    "vcpus": "virtual CPUs",
    "memory_gib": "memory in GiB",
    "gpu": "GPU model",
    "gpu_count": "GPUs per instance",
    "gpu_memory_gib": "memory per GPU in GiB",
}
_SHAPE_KEYS = ("vcpus", "memory_gib", "gpu", "gpu_count", "gpu_memory_gib")


@dataclass(frozen=True)
class Row:
    pricing: ResourcePricing  # the region it belongs to (items not used)
    instance_type: str
    item: ResourcePricingItem


def flatten(results: Sequence[ResourcePricing]) -> list[Row]:
    return [
        Row(pricing, name, item)
        for pricing in results
        for name, item in sorted(pricing.items.items())
    ]


def _value(row: Row, key: str) -> Any:
    if key == "price":
        return row.item.on_demand_price
    if key == "spot_price":
        return row.item.spot_price
    if key == "scheduled_price":
        return row.item.scheduled_price
    if key in ("name", "instance_type"):
        return row.instance_type.lower()
    if key == "region":
        return row.pricing.region.name
    if key in _SHAPE_KEYS:
        shape = row.pricing.shapes.get(row.instance_type)
        value = getattr(shape, key) if shape is not None else None
        if key == "gpu":
            return value.lower() if value else None
        # No GPU reads as 0 GPUs; an unknown shape or size stays unknown (sorted last).
        return value if value or (key == "gpu_count" and shape is not None) else None
    return row.pricing.provider


def sort_rows(rows: list[Row], sort: str) -> list[Row]:
    """Sort by a key of SORT_KEYS ('-' first for descending); unknown prices go last."""
    key = sort.removeprefix("-")
    if key not in SORT_KEYS:
        listed = ", ".join(sorted(SORT_KEYS))
        raise UsageError(f"--sort {sort!r}: pricing sorts by one of {listed}")
    known = [r for r in rows if _value(r, key) is not None]
    unknown = [r for r in rows if _value(r, key) is None]
    known.sort(key=lambda r: _value(r, key), reverse=sort.startswith("-"))
    return known + unknown


def regroup(rows: list[Row], failed: Sequence[ResourcePricing] = ()) -> list[ResourcePricing]:
    """Rows back into per-(provider, region) ResourcePricing, in the rows' order, each with
    the shapes of its rows' types only."""
    groups: dict[int, ResourcePricing] = {}
    for row in rows:
        group = groups.get(id(row.pricing))
        if group is None:
            group = groups[id(row.pricing)] = replace(row.pricing, items={}, shapes={})
        group.items[row.instance_type] = row.item
        shape = row.pricing.shapes.get(row.instance_type)
        if shape is not None:
            group.shapes[row.instance_type] = shape
    return [*groups.values(), *failed]
