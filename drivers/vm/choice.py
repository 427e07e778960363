"""Which instance type an allocation gets: the one `-o instance_type` names (checked against
the definition), or the cheapest type in the region's price catalog that fits it.

Fits means: at least `cpu` vCPUs and `ram` GiB, the GPUs asked (count, model, memory per
GPU with `gpu=A100-80GB`) and none when none are asked (an accelerator type is not a
cheap CPU box), the image's architecture, the `allowed_types` patterns, and for spot with
`max_price` a catalog spot price within it. Candidates are ordered by their price in the
market asked (on-demand or spot), then by on-demand price and name; the first that fits
is the choice, the next ones are what `-o fallback=types` tries, and every cheaper type
is listed with the reason it was skipped (`alloc --dry-run`).
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from providers.core.errors import UsageError

if TYPE_CHECKING:
    from providers.models import ResourcePricing

SHOWN_SKIPPED = 20  # in the JSON; the counts cover them all
SHOWN_NEXT = 5


class Shape(Protocol):
    """An instance type's shape: the price catalog's InstanceTypeSpec or EC2's TypeShape."""

    @property
    def name(self) -> str: ...
    @property
    def vcpus(self) -> float | None: ...
    @property
    def memory_gib(self) -> float | None: ...
    @property
    def arch(self) -> str: ...
    @property
    def gpu(self) -> str: ...
    @property
    def gpu_count(self) -> int: ...
    @property
    def gpu_memory_gib(self) -> float: ...


@dataclass(frozen=True)
class Want:
    """What the definition asks of a type."""

    cpu: int
    ram: int
    gpus: int = 0
    gpu: str = ""  # a model, maybe with memory: L4, A100-80GB
    spot: bool = False
    max_price: float | None = None
    arch: str = ""  # the image's: x86_64 | arm64 | "" (not known)
    allowed: tuple[str, ...] = ()

    @property
    def market(self) -> str:
        return "spot" if self.spot else "on-demand"

    def asked(self) -> str:
        parts = [f"cpu={self.cpu}"] if self.cpu else []  # 0: left to the named type
        parts += [f"ram={self.ram}GiB"] if self.ram else []
        if self.gpus:
            parts.append(f"gpus={self.gpus}" + (f" gpu={self.gpu}" if self.gpu else ""))
        return " ".join(parts) or "its own shape"


@dataclass(frozen=True)
class Candidate:
    name: str
    price: float | None  # USD per hour in the market asked (None: not in the catalog)
    vcpus: float | None = None
    memory_gib: float | None = None
    arch: str = ""
    gpu: str = ""
    gpu_count: int = 0
    on_demand: float | None = None
    spot: float | None = None

    @classmethod
    def of(
        cls, name: str, shape: Shape | None, spot: bool, prices: tuple[float | None, float | None]
    ) -> Candidate:
        """`name` at its (on-demand, spot) prices; `price` is the market's asked."""
        on_demand, spot_price = prices
        return cls(
            name=name,
            price=spot_price if spot else on_demand,
            vcpus=shape.vcpus if shape else None,
            memory_gib=shape.memory_gib if shape else None,
            arch=shape.arch if shape else "",
            gpu=shape.gpu if shape else "",
            gpu_count=shape.gpu_count if shape else 0,
            on_demand=on_demand,
            spot=spot_price,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"instance_type": self.name, "price": self.price}
        out.update(vcpus=self.vcpus, memory_gib=self.memory_gib, arch=self.arch)
        if self.gpu_count:
            out.update(gpu=self.gpu, gpu_count=self.gpu_count)
        return out


@dataclass(frozen=True)
class Skipped:
    candidate: Candidate
    reason: str
    kind: str  # what failed: vcpus, memory, gpu, accelerator, arch, allowed, max_price


@dataclass
class Choice:
    """The types to try, cheapest first (`fitting[0]` is the choice), and how they came."""

    region: str
    want: Want
    fitting: list[Candidate]
    explicit: bool
    skipped: list[Skipped] = field(default_factory=list)
    priced: int = 0  # types with a price in the market asked
    as_of: str = ""
    stale: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def first(self) -> Candidate:
        return self.fitting[0]

    def why(self) -> str:
        if self.explicit:
            return "named by -o instance_type"
        return (
            f"the cheapest {self.want.market} type of {self.priced} priced in the {self.region} "
            f"price catalog that fits {self.want.asked()}"
        )

    def to_json(self) -> dict[str, Any]:
        first = self.first
        out: dict[str, Any] = {
            "region": self.region,
            "market": self.want.market,
            **first.to_json(),
            "currency": "USD",
            "why": self.why(),
            "next": [c.to_json() for c in self.fitting[1 : 1 + SHOWN_NEXT]],
        }
        if not self.explicit:
            kinds = Counter(s.kind for s in self.skipped)
            out["skipped_count"] = len(self.skipped)
            out["skipped_by_reason"] = dict(sorted(kinds.items()))
            # The nearest cheaper ones first: what the choice was measured against.
            out["skipped"] = [
                {**s.candidate.to_json(), "reason": s.reason}
                for s in reversed(self.skipped[-SHOWN_SKIPPED:])
            ]
            out["catalog"] = {"asOf": self.as_of, "stale": self.stale}
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def verdict(shape: Shape | None, want: Want, *, choosing: bool) -> tuple[str, str] | None:
    """(why `shape` does not fit, which check failed), or None when it fits. `choosing`:
    judged as a catalog candidate (accelerators and `allowed` patterns count)."""
    from providers import gpus

    if shape is None:
        return "its shape is unknown", "shape"
    if choosing and want.allowed and not any(fnmatch.fnmatch(shape.name, p) for p in want.allowed):
        return f"not in allowed_types {list(want.allowed)}", "allowed"
    if want.arch and shape.arch and shape.arch != want.arch:
        return f"is {shape.arch}; the image is {want.arch}", "arch"
    if shape.vcpus is None:
        return "its vCPUs are unknown", "vcpus"
    if shape.vcpus < want.cpu:
        return f"{shape.vcpus:g} vCPUs < {want.cpu}", "vcpus"
    if shape.memory_gib is None:
        return "its memory is unknown", "memory"
    if shape.memory_gib < want.ram:
        return f"{shape.memory_gib:g} GiB < {want.ram}", "memory"
    if want.gpus:
        if not shape.gpu_count:
            return "has no GPU", "gpu"
        if shape.gpu_count < want.gpus:
            return f"{shape.gpu_count} GPUs < {want.gpus}", "gpu"
        if want.gpu:
            model, memory = gpus.canonical(want.gpu)
            if gpus.model(shape.gpu).lower() != model.lower():
                return f"has {shape.gpu or 'unknown'} GPUs, not {model}", "gpu"
            if memory is not None and abs(shape.gpu_memory_gib - memory) >= 0.5:
                return f"has {shape.gpu_memory_gib:g} GiB per GPU, not {memory:g}", "gpu"
    elif choosing and shape.gpu_count:
        return f"has {shape.gpu_count} {shape.gpu or 'accelerator'}; none asked", "accelerator"
    return None


def from_catalog(pricing: ResourcePricing, want: Want) -> Choice:
    """The fitting types of the region's catalog, cheapest first; UsageError when none fits."""
    from providers.core.wire import format_time

    rows: list[tuple[Candidate, tuple[str, str] | None]] = []
    for name, item in pricing.items.items():
        price = item.spot_price if want.spot else item.on_demand_price
        if price is None:
            continue
        spec = pricing.shapes.get(name)
        candidate = Candidate.of(name, spec, want.spot, (item.on_demand_price, item.spot_price))
        failed = verdict(spec, want, choosing=True)
        if failed is None and want.spot and want.max_price is not None and price > want.max_price:
            failed = (f"spot {price:g} USD/h > max_price {want.max_price:g}", "max_price")
        rows.append((candidate, failed))
    # Equal prices (a spot price shared by many types) go to the cheaper on-demand one.
    rows.sort(key=lambda row: (row[0].price or 0.0, row[0].on_demand or 0.0, row[0].name))
    region = pricing.region.name
    fitting = [c for c, failed in rows if failed is None]
    if not fitting:
        kinds = Counter(failed[1] for _, failed in rows if failed is not None)
        summary = ", ".join(f"{n} by {kind}" for kind, n in kinds.most_common())
        raise UsageError(
            f"no {want.market} instance type in the {region} price catalog fits "
            f"{want.asked()} ({len(rows)} priced; ruled out {summary or 'none'}); ask for less, "
            "or name one with -o instance_type"
        )
    cheapest = fitting[0]
    skipped = []
    for candidate, failed in rows:
        if candidate is cheapest:
            break
        if failed is not None:
            skipped.append(Skipped(candidate, failed[0], failed[1]))
    return Choice(
        region=region,
        want=want,
        fitting=fitting,
        explicit=False,
        skipped=skipped,
        priced=len(rows),
        as_of=format_time(pricing.as_of) if pricing.as_of else "",
        stale=pricing.stale,
    )


def named(
    region: str,
    names: Sequence[str],
    shapes: dict[str, Shape],
    prices: dict[str, tuple[float | None, float | None]],
    want: Want,
) -> Choice:
    """The types `-o instance_type` names, each checked against the definition (a type that
    does not fit is a UsageError saying why; one of another architecture than the image
    names both). cpu and ram left out of the definition (0) ask nothing of it."""
    fitting = []
    for name in names:
        shape = shapes.get(name)
        failed = verdict(shape, want, choosing=False)
        if failed is not None and failed[1] == "arch" and shape is not None:
            raise UsageError(
                f"options.instance_type: {name} is {shape.arch} and the image is {want.arch}: "
                f"it cannot boot there; name a {want.arch} type, or an image built for "
                f"{shape.arch} (-o image=...)"
            )
        if failed is not None:
            raise UsageError(
                f"options.instance_type: {name} does not fit the definition ({want.asked()}): "
                f"{name} {failed[0]}"
            )
        fitting.append(Candidate.of(name, shape, want.spot, prices.get(name, (None, None))))
    return Choice(region=region, want=want, fitting=fitting, explicit=True)
