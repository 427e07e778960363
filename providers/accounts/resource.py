"""An account's snapshot as the spec's Resource: quotas as supply, usage as allocated.

For every quota, supply is its limit, allocated what is used of it and allocatable what a
launch could still take: the difference (never below 0: usage above a limit, which clouds
allow after a limit is lowered, is noted), capped by what every broader quota it counts
against leaves (GCP's project-wide GPUS_ALL_REGIONS over a region's NVIDIA_H100_GPUS; the
note names the quota that binds). Quotas of different codes are never added up: each code
is a line of its own. The overview has an item per family group (`family`: "Standard",
"P", "N2", "standardNCadsH100v5Family", the region-wide `regional`, GPU quotas under
`gpu`, unplaced quotas under `other`) with the `onDemand` and `spot` quotas of that group
side by side, and `nextLevel` items for the instance types running in it; project- or
account-wide quotas are one item keyed `account`. Reservations are an item keyed
`reservations` whose `scheduled` stat is the spec's timestamp -> ResourceItem map: at each
reservation's start and end, what is held then (supply), in use (allocated) and free
(allocatable), with a `nextLevel` item per reservation. `breakdown.zone` has what the APIs
give per zone. A region whose quotas the provider could not read leads with an item
`quotas=unknown` and a note.
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
# The overview item of a region whose quotas could not be read.
UNKNOWN_KEY, UNKNOWN_VALUE = "quotas", "unknown"
_GROUP_ORDER = {REGIONAL: 0, GPU_GROUP: 2, OTHER: 3}
# The selector keys an account view can judge, and what each looks at.
SELECTABLE = ("gpu", "instance_type", "name", "region", "provider")


def _add(item: ResourceItem, kind: str, name: str, amount: float) -> None:
    bucket = item.setdefault(kind, {})
    bucket[name] = quantity(float(bucket.get(name, "0")) + amount)


def _stat_item() -> ResourceStatItem:
    return ResourceStatItem(allocated={}, supply={}, allocatable={})


def _quota_stat(quotas: Iterable[Quota], snapshot: AccountSnapshot) -> ResourceStat:
    """onDemand and spot stats of these quotas (one per market and resource: _pools). What
    is allocatable is what a launch could take: the quota's own room, capped by what each
    broader quota it is `within` leaves."""
    stat = ResourceStat()
    for quota in quotas:
        item = _market(stat, quota.market)
        kind, name = quota.resource
        _add(item.supply, kind, name, quota.limit)
        if quota.used is None:
            continue  # usage unknown: neither allocated nor allocatable can be said
        _add(item.allocated, kind, name, quota.used)
        _add(item.allocatable, kind, name, free_of(quota, snapshot)[0])
    return stat


def free_of(quota: Quota, snapshot: AccountSnapshot) -> tuple[float, Quota | None]:
    """(What can still be launched under `quota`, the broader quota that caps it below its
    own room or None). A broader quota whose usage is unknown caps nothing."""
    left = max(0.0, quota.limit - (quota.used or 0.0))
    binder = None
    for code in quota.within:
        for broader in snapshot.quotas:
            if broader.code != code or broader is quota or broader.used is None:
                continue
            room = max(0.0, broader.limit - broader.used)
            if room < left:
                left, binder = room, broader
    return left, binder


def _binding_notes(snapshot: AccountSnapshot) -> list[str]:
    """A note per quota a broader one binds before: `GPUS_ALL_REGIONS (account-wide: 8, 6
    used) binds before NVIDIA_H100_GPUS in us-central1 (16, 0 used): gpu/H100 on demand
    allocatable 2, not 16`."""
    notes = []
    for quota in snapshot.quotas:
        if quota.used is None or quota.scope != "region":
            continue
        left, binder = free_of(quota, snapshot)
        if binder is None:
            continue
        kind, name = quota.resource
        where = "account-wide" if binder.scope == "global" else snapshot.region
        market = "on demand" if quota.market == "onDemand" else "spot"
        notes.append(
            f"{binder.code} ({where}: {quantity(binder.limit)}, {quantity(binder.used or 0)} "
            f"used) binds before {quota.code} in {snapshot.region} ({quantity(quota.limit)}, "
            f"{quantity(quota.used)} used): {kind}/{name} {market} allocatable "
            f"{quantity(left)}, not {quantity(max(0.0, quota.limit - quota.used))}"
        )
    return notes


def _pools(quotas: Sequence[Quota]) -> tuple[list[Quota], list[Quota]]:
    """(The quotas of one overview line, those that must have lines of their own). Two
    codes of one market and resource are two pools, never one sum (a cached answer written
    before a cloud gave a split quota its own group): the first code by name keeps the
    line, each other gets its own."""
    first: dict[tuple[str, tuple[str, str]], str] = {}
    kept: list[Quota] = []
    apart: list[Quota] = []
    for quota in sorted(quotas, key=lambda q: q.code):
        holder = first.setdefault((quota.market, quota.resource), quota.code)
        (kept if holder == quota.code else apart).append(quota)
    return kept, apart


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
        kept, apart = _pools([q for q in regional if q.group == group])
        stat = _quota_stat(kept, snapshot)
        children = _usage_items([u for u in snapshot.usage if u.group == group], stat)
        items.append(RegionResourceItem(next_level=children, key="family", value=group, stat=stat))
        for quota in apart:
            stat = _quota_stat([quota], snapshot)
            items.append(RegionResourceItem(key="family", value=quota.name, stat=stat))
    kept, apart = _pools([q for q in snapshot.quotas if q.scope == "global"])
    if kept:
        stat = _quota_stat(kept, snapshot)
        items.append(RegionResourceItem(key="account", value="global", stat=stat))
    for quota in apart:
        items.append(
            RegionResourceItem(key="account", value=quota.name, stat=_quota_stat([quota], snapshot))
        )
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
    """The spec's Resource of one region's snapshot. A region whose quotas are unknown
    leads with an item `quotas=unknown` (no figures: neither zero nor full) and a note
    saying why."""
    overview = _groups(snapshot) + _reservation_items(snapshot.reservations, now)
    notes = []
    if snapshot.quotas_unknown:
        overview.insert(0, RegionResourceItem(key=UNKNOWN_KEY, value=UNKNOWN_VALUE))
        notes.append(unknown_note(snapshot))
    notes.extend(n for n in snapshot.notes if n not in notes)
    notes.extend(n for n in _over_limit(snapshot.quotas) if n not in notes)
    notes.extend(n for n in _binding_notes(snapshot) if n not in notes)
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


def unknown_note(snapshot: AccountSnapshot) -> str:
    return (
        f"quotas unknown in {snapshot.region}: {snapshot.quotas_unknown}; not zero, not full: "
        "nothing is refused for them, and the next call asks again"
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
        if q.scope != scope:
            continue
        if (item.key == "account" and item.value in ("global", q.name)) or item.value in (
            q.group,
            q.name,
        ):
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
    later (no allocatable quota, no free reserved capacity): the region cannot answer. A
    region whose quotas are unknown is kept, its `quotas=unknown` item first: unknown is
    not none (fail-open)."""
    from providers import selectors as sel

    if not selectors:
        return resource
    region = resource.region.name if resource.region else ""
    unknown = [i for i in resource.overview if (i.key, i.value) == (UNKNOWN_KEY, UNKNOWN_VALUE)]
    kept = [
        item
        for item in resource.overview
        if item not in unknown
        and any(
            sel.matches(selectors, record)
            for record in _records(item, snapshot, region)
        )
    ]
    if not unknown and not any(_allocatable(item) for item in kept):
        return None
    kept = unknown + kept
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
