"""An account's snapshot as the spec's Resource: quotas as supply, usage as allocated.

For every quota, supply is its limit, allocated what is used of it and allocatable the
difference (never below 0: usage above a limit, which clouds allow after a limit is
lowered, is noted). The overview has an item per family group (`family`: "Standard",
"P", "N2", "standardNCadsH100v5Family", the region-wide `regional`, GPU quotas under
`gpu`, unplaced quotas under `other`) with the `onDemand` and `spot` quotas of that group
side by side, and `nextLevel` items for the instance types running in it; project- or
account-wide quotas are one item keyed `account`. Reservations are an item keyed
`reservations` whose `scheduled` stat is the spec's timestamp -> ResourceItem map: at each
reservation's start and end, what is held then (supply), in use (allocated) and free
(allocatable), with a `nextLevel` item per reservation. `breakdown.zone` has what the APIs
give per zone.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime

from providers.accounts.model import (
    AccountSnapshot,
    InstanceUsage,
    Market,
    Quota,
    Reservation,
)
from providers.core.wire import format_time
from providers.models import (
    RegionResourceItem,
    RegionSpec,
    Resource,
    ResourceItem,
    ResourceStat,
    ResourceStatItem,
    ScheduledResourceStatItem,
    Selector,
    quantity,
)

# Group names every provider shares (a provider's family groups are its own words).
REGIONAL, GPU_GROUP, OTHER = "regional", "gpu", "other"
_GROUP_ORDER = {REGIONAL: 0, GPU_GROUP: 2, OTHER: 3}
# The selector keys an account view can judge, and what each looks at.
SELECTABLE = ("gpu", "instance_type", "name", "region", "provider")


def _add(item: ResourceItem, kind: str, name: str, amount: float) -> None:
    bucket = item.setdefault(kind, {})
    bucket[name] = quantity(float(bucket.get(name, "0")) + amount)


def _stat_item() -> ResourceStatItem:
    return ResourceStatItem(allocated={}, supply={}, allocatable={})


def _quota_stat(quotas: Iterable[Quota]) -> ResourceStat:
    """onDemand and spot stats of these quotas."""
    stat = ResourceStat()
    for quota in quotas:
        item = _market(stat, quota.market)
        kind, name = quota.resource
        _add(item.supply, kind, name, quota.limit)
        if quota.used is None:
            continue  # usage unknown: neither allocated nor allocatable can be said
        _add(item.allocated, kind, name, quota.used)
        _add(item.allocatable, kind, name, max(0.0, quota.limit - quota.used))
    return stat


def _over_limit(quotas: Iterable[Quota]) -> list[str]:
    """A note per quota used above its limit (clouds allow it once a limit is lowered)."""
    return [
        f"{q.code} ({q.name}): {quantity(q.used)} used, above its limit "
        f"{quantity(q.limit)}; nothing more can be launched under it"
        for q in quotas
        if q.used is not None and q.used > q.limit
    ]


def _market(stat: ResourceStat, market: Market) -> ResourceStatItem:
    if market == "spot":
        if stat.spot is None:
            stat.spot = _stat_item()
        return stat.spot
    if stat.on_demand is None:
        stat.on_demand = _stat_item()
    return stat.on_demand


def _usage_items(usage: Sequence[InstanceUsage], group: ResourceStat) -> list[RegionResourceItem]:
    """One item per instance type in use: what its instances hold (allocated), and how
    many more fit in what the group's vCPU quota has left (allocatable, where the type's
    vCPUs are known). The group's own allocated gains the instances and GPUs."""
    by_type: dict[str, ResourceStat] = {}
    for u in usage:
        item = _market(by_type.setdefault(u.instance_type, ResourceStat()), u.market)
        _hold(item.allocated, u.instance_type, u.count, u.vcpus, u.gpu, u.gpus)
        _hold(_market(group, u.market).allocated, u.instance_type, u.count, None, u.gpu, u.gpus)
        left = _market(group, u.market).allocatable.get("cpu", {}).get("vcpu")
        if u.vcpus and left is not None:
            fits = math.floor(float(left) / u.vcpus)
            item.allocatable["instance"] = {u.instance_type: quantity(fits)}
            if u.gpu and u.gpus:
                item.allocatable["gpu"] = {u.gpu: quantity(fits * u.gpus)}
    return [
        RegionResourceItem(key="instance", value=name, stat=stat)
        for name, stat in sorted(by_type.items())
    ]


def _hold(
    item: ResourceItem, instance_type: str, count: int, vcpus: float | None, gpu: str, gpus: int
) -> None:
    _add(item, "instance", instance_type, count)
    if vcpus is not None:
        _add(item, "cpu", "vcpu", vcpus * count)
    if gpu and gpus:
        _add(item, "gpu", gpu, gpus * count)


def _groups(snapshot: AccountSnapshot) -> list[RegionResourceItem]:
    regional = [q for q in snapshot.quotas if q.scope == "region"]
    names = sorted(
        {q.group for q in regional} | {u.group for u in snapshot.usage},
        key=lambda g: (_GROUP_ORDER.get(g, 1), g.lower()),
    )
    items: list[RegionResourceItem] = []
    for group in names:
        stat = _quota_stat(q for q in regional if q.group == group)
        children = _usage_items([u for u in snapshot.usage if u.group == group], stat)
        items.append(RegionResourceItem(next_level=children, key="family", value=group, stat=stat))
    account = [q for q in snapshot.quotas if q.scope == "global"]
    if account:
        stat = _quota_stat(account)
        items.append(RegionResourceItem(key="account", value="global", stat=stat))
    return items


def _schedule(reservations: Sequence[Reservation], now: datetime) -> ScheduledResourceStatItem:
    """At `now` (or each start, if later) and at each end: what the reservations hold."""
    points = {max(r.start, now) if r.start else now for r in reservations}
    points |= {r.end for r in reservations if r.end is not None and r.end > now}
    out = ScheduledResourceStatItem()
    for at in sorted(points):
        held = [
            r
            for r in reservations
            if (r.start is None or r.start <= at) and (r.end is None or at < r.end)
        ]
        stamp = format_time(at)
        supply: ResourceItem = {}
        allocated: ResourceItem = {}
        allocatable: ResourceItem = {}
        for r in held:
            free = max(0, min(r.available, r.total))  # never more free than held
            _hold(supply, r.instance_type, r.total, r.vcpus, r.gpu, r.gpus)
            _hold(allocated, r.instance_type, r.total - free, r.vcpus, r.gpu, r.gpus)
            _hold(allocatable, r.instance_type, free, r.vcpus, r.gpu, r.gpus)
        out.supply[stamp] = supply
        out.allocated[stamp] = allocated
        out.allocatable[stamp] = allocatable
    return out


def _reservation_items(
    reservations: Sequence[Reservation], now: datetime
) -> list[RegionResourceItem]:
    live = [r for r in reservations if r.end is None or r.end > now]
    if not live:
        return []
    children = [
        RegionResourceItem(
            key=r.kind or "reservation",
            value=r.id,
            stat=ResourceStat(scheduled=_schedule([r], now)),
        )
        for r in sorted(live, key=lambda r: (r.start or now, r.id))
    ]
    return [
        RegionResourceItem(
            next_level=children,
            key="reservations",
            value="all",
            stat=ResourceStat(scheduled=_schedule(live, now)),
        )
    ]


def _zones(snapshot: AccountSnapshot, now: datetime) -> list[RegionResourceItem]:
    zones = sorted({u.zone for u in snapshot.usage} | {r.zone for r in snapshot.reservations})
    items = []
    for zone in zones:
        if not zone:
            continue
        usage = [u for u in snapshot.usage if u.zone == zone]
        stat = ResourceStat()
        for u in usage:
            _hold(
                _market(stat, u.market).allocated, u.instance_type, u.count, u.vcpus, u.gpu, u.gpus
            )
        held = [
            r for r in snapshot.reservations if r.zone == zone and (r.end is None or r.end > now)
        ]
        if held:
            stat.scheduled = _schedule(held, now)
        items.append(RegionResourceItem(key="zone", value=zone, stat=stat))
    return items


def to_resource(snapshot: AccountSnapshot, *, now: datetime, stale: bool = False) -> Resource:
    overview = _groups(snapshot) + _reservation_items(snapshot.reservations, now)
    notes = list(snapshot.notes)
    notes.extend(n for n in _over_limit(snapshot.quotas) if n not in notes)
    zones = _zones(snapshot, now)
    return Resource(
        region=RegionSpec(name=snapshot.region, location=snapshot.location),
        overview=overview,
        breakdown={"zone": zones} if zones else {},
        provider=snapshot.provider,
        as_of=snapshot.fetched_at,
        source=", ".join(snapshot.sources),
        stale=stale,
        notes=notes,
    )


# -- selection -------------------------------------------------------------------------------


def check_selectors(provider: str, selectors: Sequence[Selector]) -> None:
    from providers.core.errors import UsageError

    for s in selectors:
        if s.key not in SELECTABLE:
            raise UsageError(
                f"--select {s.key!r}: {provider} account capacity is selected by "
                f"{', '.join(SELECTABLE)}; use `shoal pricing --select` for shapes and prices"
            )


def _covers(item: RegionResourceItem, snapshot: AccountSnapshot) -> tuple[set[str], set[str]]:
    """(GPU models, instance types) an overview item speaks for: a family's quotas' GPU
    models and the types running in it; the reservations' types and GPUs; an account-wide
    item's quotas' GPU models."""
    gpus: set[str] = set()
    types: set[str] = set()
    if item.key == "reservations":
        for r in snapshot.reservations:
            types.add(r.instance_type)
            gpus.update([r.gpu] if r.gpu else [])
        return gpus, types
    scope = "global" if item.key == "account" else "region"
    for q in snapshot.quotas:
        if q.scope == scope and (item.key == "account" or q.group == item.value):
            gpus.update(q.gpus)
    for u in snapshot.usage:
        if item.key == "family" and u.group == item.value:
            types.add(u.instance_type)
            gpus.update([u.gpu] if u.gpu else [])
    return gpus, types


def _records(
    item: RegionResourceItem, snapshot: AccountSnapshot, region: str
) -> list[dict[str, object]]:
    """What a selector may test of one overview item: one record per GPU model and
    instance type it covers (an item with none still gives one record, with no gpu)."""
    gpus, types = _covers(item, snapshot)
    base: dict[str, object] = {"region": region, "provider": snapshot.provider}
    no: list[str | None] = [None]
    return [
        {**base, "gpu": gpu, "instance_type": name, "name": name}
        for gpu in [*sorted(gpus)] or no
        for name in [*sorted(types)] or no
    ]


def select(
    resource: Resource, snapshot: AccountSnapshot, selectors: Sequence[Selector]
) -> Resource | None:
    """The overview items a selector keeps; None when nothing kept can be launched now or
    later (no allocatable quota, no free reserved capacity): the region cannot answer."""
    from providers import selectors as sel

    if not selectors:
        return resource
    region = resource.region.name if resource.region else ""
    kept = [
        item
        for item in resource.overview
        if any(
            sel.matches(selectors, record)
            for record in _records(item, snapshot, region)
        )
    ]
    if not any(_allocatable(item) for item in kept):
        return None
    resource.overview = kept
    return resource


def _allocatable(item: RegionResourceItem) -> bool:
    for market in (item.stat.on_demand, item.stat.spot):
        if market is None:
            continue
        for names in market.allocatable.values():
            if any(float(v) > 0 for v in names.values()):
                return True
    if item.stat.scheduled is not None:
        for at in item.stat.scheduled.allocatable.values():
            for names in at.values():
                if any(float(v) > 0 for v in names.values()):
                    return True
    return False


def allocatable(snapshot: AccountSnapshot, code: str) -> float | None:
    """How much of quota `code` is free (None: not known: no such quota, or usage unknown).
    A code in both scopes (a region's and the project's) is two limits a launch must fit:
    the least free of them, never their sum."""
    found = [q for q in snapshot.quotas if q.code == code]
    if not found or any(q.used is None for q in found):
        return None
    return min(max(0.0, q.limit - (q.used or 0.0)) for q in found)
