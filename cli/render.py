"""Flatten the spec's nested resource shapes into table rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from providers.core.timeutil import human_duration
from providers.models import RegionResourceItem, Resource, ResourceStatItem

if TYPE_CHECKING:
    from drivers.spec.views import Summary

ALLOCATION_COLUMNS = ["ID", "Driver", "Status", "CPU", "GiB", "Age", "Expires", "Note"]
WIDE_COLUMNS = ["Created (UTC)", "Expires (UTC)"]


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
    scheduled = item.stat.scheduled
    if scheduled is not None:  # reservations: a row group per point of their schedule
        for at in sorted({*scheduled.allocated, *scheduled.supply, *scheduled.allocatable}):
            point = ResourceStatItem(
                allocated=scheduled.allocated.get(at, {}),
                supply=scheduled.supply.get(at, {}),
                allocatable=scheduled.allocatable.get(at, {}),
            )
            for row in _stat_rows(f"scheduled {at}", point):
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


def _parse(stamp: Any) -> Any:
    from datetime import UTC, datetime

    if not isinstance(stamp, str) or not stamp:
        return None
    try:
        at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo else at.replace(tzinfo=UTC)


def age(stamp: Any, now: Any) -> str | None:
    at = _parse(stamp)
    return human_duration(now - at) if at is not None else None


def expires_in(stamp: Any, now: Any) -> str | None:
    at = _parse(stamp)
    if at is None:
        return None
    left = (at - now).total_seconds()
    return human_duration(left) if left > 0 else "expired"


def allocation_rows(rows: Sequence[Summary], wide: bool) -> list[list[Any]]:
    """`status` rows: relative times in the table (absolute ones in JSON and `-o wide`)."""
    from providers.core.timeutil import utcnow

    now = utcnow()
    return [
        [
            r.id,
            r.driver,
            r.status,
            r.cpu,
            r.ram,
            age(r.created, now),
            expires_in(r.expires, now),
            r.note or None,
            *([_rfc3339(r.created), _rfc3339(r.expires)] if wide else []),
        ]
        for r in rows
    ]


def _rfc3339(stamp: Any) -> str | None:
    at = _parse(stamp)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ") if at is not None else None
