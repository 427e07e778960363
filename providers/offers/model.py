"""Offers, rejected candidates and the answer, with their JSON (README "shoal offers": the
field names are a contract `alloc --offers` reads).

Prices are per hour in USD: `pricePerHour` one instance, `totalPerHour` every instance
the request needs, `pricePerGpuHour` one GPU of the type (null without GPUs), and
`marginalPerHour` what starting them adds (an open reservation's instances add nothing
while it lasts). A price that is not known is null, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from providers.accounts.fit import Binding
from providers.accounts.model import Market
from providers.core.errors import ShoalError
from providers.models import InstanceTypeSpec, RegionSpec

# The shoal driver that launches each provider's offers (`alloc --offers`).
DRIVERS = {
    "aws": "aws",
    "gcp": "gcp",
    "azure": "azure",
    "kubernetes": "kubernetes",
    "local": "process",
}
CODES = (
    "no-quota",
    "quota-binds",
    "not-offered",
    "price-unknown",
    "arch",
    "over-max-price",
    "no-capacity",
    "too-small",
)


@dataclass(frozen=True)
class ReservationRef:
    """An open reservation that covers the offer: `available` instances held and unused."""

    id: str
    kind: str
    available: int
    zone: str = ""
    start: datetime | None = None
    end: datetime | None = None

    def wire(self) -> dict[str, Any]:
        from providers.core.wire import format_time

        return {
            "id": self.id,
            "kind": self.kind,
            "available": self.available,
            "zone": self.zone or None,
            "start": format_time(self.start) if self.start else None,
            "end": format_time(self.end) if self.end else None,
        }


@dataclass(frozen=True)
class PoolRef:
    """A Kubernetes node pool: its label, its nodes of the offer's type and market, and how
    many of them have room for one instance now."""

    key: str
    value: str
    nodes: int
    fitting: int

    def wire(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "nodes": self.nodes, "fitting": self.fitting}


@dataclass
class Offer:
    provider: str
    driver: str
    region: RegionSpec
    instance_type: str
    shape: InstanceTypeSpec
    market: Market
    instances: int
    price_per_hour: float | None
    fits_now: int | None
    zones: list[str] = field(default_factory=list)
    binding: Binding | None = None
    reservation: ReservationRef | None = None
    pool: PoolRef | None = None
    as_of: datetime | None = None
    stale: bool = False
    notes: list[str] = field(default_factory=list)
    gpus_each: int = 0  # GPUs each instance brings (a pod or process may take part of one)

    @property
    def total_per_hour(self) -> float | None:
        if self.price_per_hour is None:
            return None
        return round(self.price_per_hour * self.instances, 6)

    @property
    def price_per_gpu_hour(self) -> float | None:
        gpus = self.gpus_each
        if self.price_per_hour is None or not gpus:
            return None
        return round(self.price_per_hour / gpus, 6)

    @property
    def marginal_per_hour(self) -> float | None:
        """What starting the instances adds: a reservation's free instances add nothing."""
        if self.price_per_hour is None:
            return None
        held = min(self.reservation.available, self.instances) if self.reservation else 0
        return round(self.price_per_hour * (self.instances - held), 6)

    @property
    def fits(self) -> bool | None:
        """Whether every instance the request needs can launch now (None: not known)."""
        if self.fits_now is None:
            return None
        return self.fits_now >= self.instances

    def wire(self) -> dict[str, Any]:
        from providers.core.wire import format_time, to_wire

        spec = self.shape
        return {
            "provider": self.provider,
            "driver": self.driver,
            "region": to_wire(self.region),
            "zones": list(self.zones),
            "instanceType": self.instance_type,
            "shape": {
                "vcpus": spec.vcpus,
                "memoryGiB": spec.memory_gib,
                "gpu": spec.gpu or None,
                "gpuCount": spec.gpu_count,
                "gpuMemoryGiB": spec.gpu_memory_gib or None,
                "arch": spec.arch or None,
            },
            "market": self.market,
            "instances": self.instances,
            "gpusPerInstance": self.gpus_each,
            "pricePerHour": _price(self.price_per_hour),
            "totalPerHour": self.total_per_hour,
            "pricePerGpuHour": self.price_per_gpu_hour,
            "marginalPerHour": self.marginal_per_hour,
            "currency": "USD",
            "fitsNow": self.fits_now,
            "binding": self.binding.wire() if self.binding else None,
            "reservation": self.reservation.wire() if self.reservation else None,
            "pool": self.pool.wire() if self.pool else None,
            "asOf": format_time(self.as_of) if self.as_of else None,
            "stale": self.stale,
            "notes": list(self.notes),
        }


@dataclass
class Rejected:
    provider: str
    region: RegionSpec
    instance_type: str
    market: Market | None
    code: str
    reason: str

    def wire(self) -> dict[str, Any]:
        from providers.core.wire import to_wire

        return {
            "provider": self.provider,
            "region": to_wire(self.region),
            "instanceType": self.instance_type,
            "market": self.market,
            "reason": self.reason,
            "code": self.code,
        }


@dataclass(frozen=True)
class Failure:
    """A provider (or one region of it) that could not answer."""

    provider: str
    message: str
    region: str = ""

    def wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "error": self.message}
        if self.region:
            out["region"] = self.region
        return out


@dataclass
class OffersAnswer:
    """The ranked offers, the candidates left out with why, the providers (or regions) that
    failed, and notes (what is missing and why: unknown quotas, candidates counted rather
    than listed)."""

    request: dict[str, Any]
    offers: list[Offer] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Every provider failed: the command's error (the last failure, the others in its
    # `earlier`), raised once the answer is shown. Not part of the JSON.
    error: ShoalError | None = None

    def wire(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "offers": [o.wire() for o in self.offers],
            "rejected": [r.wire() for r in self.rejected],
            "failures": [f.wire() for f in self.failures],
            "notes": list(self.notes),
        }


def _price(value: float | None) -> float | None:
    return None if value is None else round(value, 6)

