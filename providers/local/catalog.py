"""The `local` catalog: this host's supply, what local drivers hold of it, and config prices.

supply      = host totals - the configured reserve ([local] reserve_cpu, reserve_ram_gib)
allocated   = the live allocations of local drivers (from the ledger, wired in by the CLI),
              and the reservations (`alloc --at`) whose window holds the instant shown
allocatable = supply - allocated, never below zero (overbooking can push allocated past supply)
scheduled   = the reservations ahead: at each start and end of a reservation's window (RFC
              3339 keys), what reservations book then (`allocated`), the supply, and what
              is left after allocations and reservations (`allocatable`)
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from providers.core.errors import UsageError
from providers.core.settings import Settings, config_model
from providers.core.timeutil import utcnow
from providers.core.wire import format_time
from providers.local.host import HostShape, detect
from providers.models import (
    InstanceTypeSpec,
    RegionResourceItem,
    RegionSpec,
    Resource,
    ResourceItem,
    ResourceListOptions,
    ResourcePricing,
    ResourcePricingItem,
    ResourceStat,
    ResourceStatItem,
    ScheduledResourceStatItem,
    quantity,
    selector_record,
)
from providers.regions import check_region

if TYPE_CHECKING:
    from providers.core.usage import AllocationSource, AllocationUsage

# (key, the reservations holding then, everything holding then) per point of a schedule
Schedule = list[tuple[str, list["AllocationUsage"], list["AllocationUsage"]]]

PROVIDER = "local"
REGION = "local"
INSTANCE_TYPE = "host"
# Read from this machine at every call: CPU affinity and cgroup quota, /proc/meminfo and
# the cgroup memory limit, nvidia-smi.
SHAPE_SOURCE = "this host (/proc, cgroups, nvidia-smi)"


def _floor_second(at: datetime) -> datetime:
    return at.replace(microsecond=0)


def _ceil_second(at: datetime) -> datetime:
    floor = at.replace(microsecond=0)
    return floor if floor == at else floor + timedelta(seconds=1)


class LocalCatalog:
    def __init__(
        self,
        host: HostShape,
        reserve_cpu: float = 0.0,
        reserve_ram_gib: float = 0.0,
        prices: ResourcePricingItem | None = None,
        allocations: AllocationSource | None = None,
    ) -> None:
        self.host = host
        self.reserve_cpu = reserve_cpu
        self.reserve_ram_gib = reserve_ram_gib
        self.prices = prices or ResourcePricingItem()
        self.allocations = allocations

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalCatalog:
        catalog = cls(
            host=detect(settings.paths.cache_dir / "host.json"), allocations=settings.allocations
        )
        if PROVIDER not in settings.config:  # the defaults: no reserve, no prices
            return catalog
        from providers.sections import LocalSection

        local = config_model(settings, LocalSection, PROVIDER)
        catalog.reserve_cpu = local.reserve_cpu
        catalog.reserve_ram_gib = local.reserve_ram_gib
        catalog.prices = ResourcePricingItem(
            on_demand_price=local.pricing.on_demand,
            spot_price=local.pricing.spot,
            scheduled_price=local.pricing.scheduled,
        )
        return catalog

    # -- discovery ---------------------------------------------------------------------------

    def provider(self) -> str:
        return PROVIDER

    def _region(self) -> RegionSpec:
        return RegionSpec(name=REGION, location=self.host.hostname)

    def list_regions(self) -> list[RegionSpec]:
        return [self._region()]

    def _check_region(self, region: RegionSpec | None) -> None:
        if region is not None and region.name:
            check_region(PROVIDER, region.name, [REGION])

    def instance_type(self) -> InstanceTypeSpec:
        gpus = self.host.gpus
        return InstanceTypeSpec(
            name=INSTANCE_TYPE,
            vcpus=self.host.vcpus,
            memory_gib=self.host.memory_gib,
            arch=self.host.arch,
            gpu=gpus[0].model if gpus else "",
            gpu_count=len(gpus),
            gpu_memory_gib=gpus[0].memory_gib if gpus else 0.0,
            region=REGION,
            source=SHAPE_SOURCE,
        )

    def list_instance_types(self, region: RegionSpec | None) -> list[InstanceTypeSpec]:
        self._check_region(region)
        return [self.instance_type()]

    # -- resources ---------------------------------------------------------------------------

    def supply(self) -> ResourceItem:
        from providers.local.supply import net_supply

        cpu, ram_gib = net_supply(
            self.host.vcpus, self.host.memory_gib, self.reserve_cpu, self.reserve_ram_gib
        )
        item: ResourceItem = {
            "cpu": {"vcpu": quantity(cpu)},
            "memory": {"GiB": quantity(ram_gib)},
            "instance": {INSTANCE_TYPE: "1"},
        }
        if self.host.gpus:
            gpu: dict[str, str] = defaultdict(lambda: "0")
            for g in self.host.gpus:
                gpu[g.product] = quantity(float(gpu[g.product]) + 1)
            item["gpu"] = dict(gpu)
        return item

    @staticmethod
    def _allocated(usages: Iterable[AllocationUsage]) -> ResourceItem:
        cpu = 0
        ram = 0
        for usage in usages:
            cpu += usage.cpu
            ram += usage.ram_gib
        return {"cpu": {"vcpu": quantity(cpu)}, "memory": {"GiB": quantity(ram)}}

    @staticmethod
    def _allocatable(supply: ResourceItem, allocated: ResourceItem) -> ResourceItem:
        out: ResourceItem = {}
        for rtype, names in supply.items():
            out[rtype] = {}
            for name, qty in names.items():
                used = float(allocated.get(rtype, {}).get(name, "0"))
                out[rtype][name] = quantity(max(0.0, float(qty) - used))
        return out

    def _resource_at(
        self, usages: list[AllocationUsage], schedule: Schedule | None = None
    ) -> Resource:
        """The view of what `usages` hold, with the reservations ahead as `scheduled`."""
        supply = self.supply()
        allocated = self._allocated(usages)
        allocatable = self._allocatable(supply, allocated)
        by_driver: dict[str, list[AllocationUsage]] = defaultdict(list)
        for usage in usages:
            by_driver[usage.driver].append(usage)
        booked = sorted({r.driver for _, reserved, _ in schedule or [] for r in reserved})
        drivers = [
            RegionResourceItem(
                key="driver",
                value=name,
                stat=ResourceStat(
                    on_demand=(
                        ResourceStatItem(allocated=self._allocated(by_driver[name]))
                        if name in by_driver
                        else None
                    ),
                    scheduled=self._driver_schedule(name, schedule),
                ),
            )
            for name in sorted({*by_driver, *booked})
        ]
        node = RegionResourceItem(
            key="node",
            value=self.host.hostname,
            stat=ResourceStat(
                on_demand=ResourceStatItem(
                    allocated=allocated, supply=supply, allocatable=allocatable
                ),
                scheduled=self._node_schedule(supply, schedule),
            ),
        )
        return Resource(
            region=self._region(),
            overview=[node],
            breakdown={"driver": drivers} if drivers else {},
            provider=PROVIDER,
        )

    def _node_schedule(
        self, supply: ResourceItem, schedule: Schedule | None
    ) -> ScheduledResourceStatItem | None:
        if not schedule:
            return None
        out = ScheduledResourceStatItem()
        for key, reserved, held in schedule:
            out.allocated[key] = self._allocated(reserved)
            out.supply[key] = supply
            out.allocatable[key] = self._allocatable(supply, self._allocated(held))
        return out

    def _driver_schedule(
        self, driver: str, schedule: Schedule | None
    ) -> ScheduledResourceStatItem | None:
        mine = [
            (key, [r for r in reserved if r.driver == driver])
            for key, reserved, _ in schedule or []
        ]
        if not any(reserved for _, reserved in mine):
            return None
        return ScheduledResourceStatItem(
            allocated={key: self._allocated(reserved) for key, reserved in mine}
        )

    def _usages(self) -> list[AllocationUsage]:
        return self.allocations.active_local_usage() if self.allocations is not None else []

    @staticmethod
    def _held_at(
        usages: list[AllocationUsage], at: datetime, now: datetime
    ) -> list[AllocationUsage]:
        """What holds the host at `at`: allocations until their expiry, reservations over
        their windows. (An overdue allocation, if a usage source still gives one, counts
        throughout: nothing says when it will go. The CLI's source gives none: supervisors
        end workloads at their expiry.)"""
        return [
            u
            for u in usages
            if (u.starts is None and (u.expires is None or u.expires <= now or u.expires > at))
            or (u.starts is not None and u.starts <= at and (u.expires is None or at < u.expires))
        ]

    @classmethod
    def _schedule(
        cls, usages: list[AllocationUsage], start: datetime, end: datetime | None, now: datetime
    ) -> Schedule:
        """The reservations from `start` (to `end`): a point where one holds at `start` and at
        each whole second a window starts or ends (rounded up, so the point shows it)."""
        reservations = [u for u in usages if u.starts is not None]
        points: set[datetime] = set()
        for r in reservations:
            assert r.starts is not None
            if r.starts <= start and (r.expires is None or start < r.expires):
                points.add(start)
            points.update(
                at
                for at in (_ceil_second(r.starts), r.expires and _ceil_second(r.expires))
                if at is not None and start < at and (end is None or at <= end)
            )
        out: Schedule = []
        for at in sorted(points):
            held = cls._held_at(usages, at, now)
            out.append((format_time(at), [u for u in held if u.starts is not None], held))
        return out

    def _selected(self, opts: ResourceListOptions, price: dict[str, Any] | None = None) -> bool:
        if opts.filter is None or not opts.filter.resource_selectors:
            return True
        record = selector_record(self.instance_type(), provider=PROVIDER, **(price or {}))
        from providers import selectors

        return selectors.matches(opts.filter.resource_selectors, record)

    def list_resources(self, opts: ResourceListOptions) -> list[Resource]:
        self._check_region(opts.region)
        if not self._selected(opts):
            return []
        # Every allocation the usage source gives counts, and so does a reservation whose
        # window has begun: nobody else may take its room.
        usages = self._usages()
        now = utcnow()
        schedule = self._schedule(usages, now, None, now)
        return [self._resource_at(self._held_at(usages, now, now), schedule)]

    @staticmethod
    def _window(opts: ResourceListOptions) -> tuple[datetime, datetime]:
        start = opts.start_time or utcnow()
        end = opts.end_time or start
        if end < start:
            raise UsageError(
                f"--end {format_time(end)} is before --start {format_time(start)}; swap them"
            )
        return start, end

    def list_resource_predictions(self, opts: ResourceListOptions) -> dict[str, Resource]:
        """The resource view at the window's start, at each expiry inside it, at each start
        and end of a reservation's window inside it, and at its end."""
        self._check_region(opts.region)
        start, end = self._window(opts)
        if not self._selected(opts):
            return {}
        usages = self._usages()
        now = utcnow()
        # An allocation frees the host at its expiry; an overdue one a source still gives
        # (expiry already past) has no known end: it counts throughout.
        # Keys are whole seconds: an expiry's point is the next whole second, so it never
        # overwrites the start's key and its view already shows the capacity returned.
        # A reservation holds from its window's start to its end, which add points the same way.
        releases = [
            _ceil_second(u.expires) for u in usages if u.expires is not None and u.expires > now
        ]
        releases += [_ceil_second(u.starts) for u in usages if u.starts is not None]
        start, end = _floor_second(start), _floor_second(end)
        points = {start, end}
        points.update(at for at in releases if start < at < end)
        out: dict[str, Resource] = {}
        for at in sorted(points):
            schedule = self._schedule(usages, at, end, now)
            out[format_time(at)] = self._resource_at(self._held_at(usages, at, now), schedule)
        return out

    # -- pricing -----------------------------------------------------------------------------

    def _pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]:
        self._check_region(opts.region)
        price = {"price": self.prices.on_demand_price, "spot_price": self.prices.spot_price}
        if not self._selected(opts, price):
            return [ResourcePricing(region=self._region(), items={})]
        return [
            ResourcePricing(
                region=self._region(),
                items={INSTANCE_TYPE: self.prices},
                shapes={INSTANCE_TYPE: self.instance_type()},
            )
        ]

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]:
        return self._pricing(opts)

    def list_pricing_predictions(self, opts: ResourceListOptions) -> dict[str, ResourcePricing]:
        """Config prices do not change over time: the same figures at the window's ends."""
        start, end = self._window(opts)
        pricing = self._pricing(opts)[0]
        return {format_time(at): pricing for at in sorted({start, end})}
