"""Flatten the spec's nested resource shapes into table rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from providers.models import RegionResourceItem, Resource, ResourceStatItem


def _number(text: str | None) -> Any:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        return text
    return int(value) if value.is_integer() else value


def _stat_rows(cls: str, stat: ResourceStatItem) -> Iterator[list[Any]]:
    keys: dict[tuple[str, str], None] = {}
    for item in (stat.supply, stat.allocated, stat.allocatable):
        for rtype, names in item.items():
            for name in names:
                keys[(rtype, name)] = None
    for rtype, name in keys:
        yield [
            cls,
            f"{rtype}/{name}",
            _number(stat.supply.get(rtype, {}).get(name)),
            _number(stat.allocated.get(rtype, {}).get(name)),
            _number(stat.allocatable.get(rtype, {}).get(name)),
        ]


def _item_rows(item: RegionResourceItem, depth: int) -> Iterator[list[Any]]:
    label = ("  " * depth) + f"{item.key}={item.value}"
    for cls, stat in (("on-demand", item.stat.on_demand), ("spot", item.stat.spot)):
        if stat is not None:
            for row in _stat_rows(cls, stat):
                yield [label, *row]
    for child in item.next_level:
        yield from _item_rows(child, depth + 1)


def resource_rows(res: Resource) -> Iterator[list[Any]]:
    """[level, class, resource, supply, allocated, allocatable]; breakdown rows indented."""
    for item in res.overview:
        yield from _item_rows(item, 0)
    for _, items in sorted(res.breakdown.items()):
        for item in items:
            yield from _item_rows(item, 1)
