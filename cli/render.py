"""Flatten the spec's nested resource shapes into table rows."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from providers.core.timeutil import human_duration
from providers.models import RegionResourceItem, Resource, ResourceStatItem

if TYPE_CHECKING:
    from cli.tables import Col
    from drivers.spec.views import Summary


# The classes of a resource row, as short as kubectl's words (`-o json` has the spec's).
ON_DEMAND, SPOT, SCHEDULED = "od", "spot", "sched"


def _number(text: str | None) -> Any:
    """A quantity as the JSON has it (`23.54`, `1`), right-aligned as a number."""
    if text is None:
        return None
    try:
        float(text)
    except ValueError:
        return text
    from cli.tables import Figure

    return Figure(text)


def _stat_rows(cls: str, at: str | None, stat: ResourceStatItem) -> Iterator[list[Any]]:
    keys: dict[tuple[str, str], None] = {}
    for item in (stat.supply, stat.allocated, stat.allocatable):
        for rtype, names in item.items():
            for name in names:
                keys[(rtype, name)] = None
    for rtype, name in keys:
        yield [
            cls,
            at,
            f"{rtype}/{name}",
            _number(stat.supply.get(rtype, {}).get(name)),
            _number(stat.allocated.get(rtype, {}).get(name)),
            _number(stat.allocatable.get(rtype, {}).get(name)),
        ]


def _item_rows(item: RegionResourceItem, depth: int) -> Iterator[list[Any]]:
    label = ("  " * depth) + f"{item.key}={item.value}"
    for cls, stat in ((ON_DEMAND, item.stat.on_demand), (SPOT, item.stat.spot)):
        if stat is not None:
            for row in _stat_rows(cls, None, stat):
                yield [label, *row]
    scheduled = item.stat.scheduled
    if scheduled is not None:  # reservations: a row group per point of their schedule
        for at in sorted({*scheduled.allocated, *scheduled.supply, *scheduled.allocatable}):
            point = ResourceStatItem(
                allocated=scheduled.allocated.get(at, {}),
                supply=scheduled.supply.get(at, {}),
                allocatable=scheduled.allocatable.get(at, {}),
            )
            for row in _stat_rows(SCHEDULED, at, point):
                yield [label, *row]
    for child in item.next_level:
        yield from _item_rows(child, depth + 1)


def resource_rows(res: Resource) -> Iterator[list[Any]]:
    """[level, class, at, resource, supply, allocated, allocatable]: breakdown rows indented,
    `at` the time of a scheduled point (RFC 3339; None for now)."""
    for item in res.overview:
        yield from _item_rows(item, 0)
    for _, items in sorted(res.breakdown.items()):
        for item in items:
            yield from _item_rows(item, 1)


def starts_in(stamp: Any, now: Any) -> str | None:
    """When a time ahead comes, for people: `in 2h`, `in 5m`; `now` once it has come."""
    at = _parse(stamp)
    if at is None:
        return None
    ahead = (at - now).total_seconds()
    return f"in {human_duration(ahead)}" if ahead >= 1 else "now"


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


def allocation_columns(rows: Sequence[Summary], wide: bool) -> list[Col]:
    """`status` columns: ids and statuses never leave; on a narrow terminal the note moves
    under its row (shortened with `…`), then Age is left out. `Starts` when a row is a
    booking; `-o wide` adds the absolute times; `Host` on a team ledger (the machine each
    was made on)."""
    from cli.tables import Col

    booked, started = _booked(rows), any(r.starts for r in rows)
    return [
        Col("ID"),
        Col("Driver"),
        *([Col("Host", drop=2)] if _hosted(rows) else []),
        Col("Status"),
        Col("CPU"),
        Col("GiB"),
        Col("Age", drop=1),
        *([Col("Starts")] if booked else []),
        Col("Expires"),
        Col("Note", free=True, below=True),
        *([Col("Created (UTC)"), *([Col("Starts (UTC)")] if started else [])] if wide else []),
        *([Col("Expires (UTC)")] if wide else []),
    ]


def _hosted(rows: Sequence[Summary]) -> bool:
    return any(r.host for r in rows)


def _booked(rows: Sequence[Summary]) -> bool:
    """Whether a row is a booking still to start or be claimed (a Starts column)."""
    from drivers.ledger.rows import RESERVED

    return any(r.starts and r.status == RESERVED for r in rows)


def allocation_rows(rows: Sequence[Summary], wide: bool) -> list[list[Any]]:
    """`status` rows (allocation_columns): relative times in the table (absolute ones in
    JSON and `-o wide`). A booking's Expires is the end of its window, which counts from
    its start: Starts says when that is."""
    from drivers.ledger.rows import RESERVED
    from providers.core.timeutil import utcnow

    now = utcnow()
    booked, started = _booked(rows), any(r.starts for r in rows)
    hosted = _hosted(rows)
    return [
        [
            r.id,
            r.driver,
            *([r.host] if hosted else []),
            r.status,
            r.cpu,
            r.ram,
            age(r.created, now),
            *([starts_in(r.starts, now) if r.status == RESERVED else None] if booked else []),
            expires_in(r.expires, now),
            r.note or None,
            *([_rfc3339(r.created), *([_rfc3339(r.starts)] if started else [])] if wide else []),
            *([_rfc3339(r.expires)] if wide else []),
        ]
        for r in rows
    ]


def _rfc3339(stamp: Any) -> str | None:
    at = _parse(stamp)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ") if at is not None else None
