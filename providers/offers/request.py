"""What `shoal offers` is asked, checked before any provider is, and how many instances of
an instance type the request needs.

`--gpus N` is N GPUs in total: a type with G GPUs is offered as ceil(N / G) instances (one
instance when G >= N); with `--count K` too, K instances of at least ceil(N / K) GPUs each.
`--count K` alone is K instances; nothing is one instance. `--cpu` and `--ram` are each
instance's least vCPUs and GiB. `--gpu MODEL` or `MODEL-MEM` names the GPU as
providers/gpus.py does (`A100-80GB`: an A100 with 80 GiB per GPU).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from providers.accounts.model import Market
from providers.core.errors import UsageError
from providers.models import InstanceTypeSpec

MARKETS: dict[str, tuple[Market, ...]] = {
    "on-demand": ("onDemand",),
    "spot": ("spot",),
    "any": ("onDemand", "spot"),
}
ARCHES = {"x86_64": "x86_64", "amd64": "x86_64", "arm64": "arm64", "aarch64": "arm64"}
SORTS = ("total", "gpu-hour", "fit")
GROUPS = ("gpu",)


@dataclass(frozen=True)
class OfferRequest:
    """A request, as the flags give it (`providers` empty: every configured one; `regions`
    empty: each provider's default set, "all": every region)."""

    gpus: int | None = None
    gpu: str | None = None
    cpu: float | None = None
    ram: float | None = None
    count: int | None = None
    market: str = "any"
    arch: str | None = None
    max_price: float | None = None
    providers: tuple[str, ...] = ()
    regions: tuple[str, ...] = ()
    sort: str | None = None  # None: total, or gpu-hour with --group-by gpu
    group_by: str | None = None
    limit: int | None = None
    gpu_model: str = field(default="", compare=False)
    gpu_memory: float | None = field(default=None, compare=False)

    @property
    def markets(self) -> tuple[Market, ...]:
        return MARKETS[self.market]

    @property
    def order(self) -> str:
        """The sort in effect: --sort, else total (gpu-hour for --group-by gpu)."""
        return self.sort or ("gpu-hour" if self.group_by == "gpu" else "total")

    @property
    def wants_gpus(self) -> bool:
        return self.gpus is not None or self.gpu is not None

    @property
    def all_regions(self) -> bool:
        return "all" in self.regions

    @property
    def named_regions(self) -> list[str]:
        """The region names given (none with "all": every region of every provider)."""
        return [] if self.all_regions else list(dict.fromkeys(self.regions))

    def wire(self) -> dict[str, object]:
        return {
            "gpus": self.gpus,
            "gpu": self.gpu,
            "cpu": self.cpu,
            "ram": self.ram,
            "count": self.count,
            "market": self.market,
            "arch": self.arch,
            "maxPrice": self.max_price,
            "providers": list(self.providers),
            "regions": list(self.regions),
            "sort": self.order,
            "groupBy": self.group_by,
            "limit": self.limit,
        }


def _positive(value: float | None, flag: str, example: str) -> None:
    if value is not None and not (math.isfinite(value) and value > 0):
        raise UsageError(f"{flag} {value:g}: give a number above 0, e.g. {flag} {example}")


def checked(request: OfferRequest) -> OfferRequest:
    """`request` with its names made canonical, or the usage error of its first fault."""
    from dataclasses import replace

    from providers import gpus as gpu_names

    if request.gpus is not None and request.gpus < 1:
        raise UsageError(f"--gpus {request.gpus}: give a count of 1 or more, e.g. --gpus 8")
    if request.count is not None and request.count < 1:
        raise UsageError(f"--count {request.count}: give a count of 1 or more, e.g. --count 2")
    _positive(request.cpu, "--cpu", "8")
    _positive(request.ram, "--ram", "64")
    _positive(request.max_price, "--max-price", "40")
    model, memory = "", None
    if request.gpu is not None:
        model, memory = gpu_names.canonical(request.gpu)
        if not model:
            raise UsageError(
                f"--gpu {request.gpu!r}: give a GPU model such as H100 or A100-80GB "
                "(README: GPU names)"
            )
    market = request.market.strip().lower()
    if market not in MARKETS:
        raise UsageError(f"--market {request.market!r}: use one of {', '.join(MARKETS)}")
    arch = None
    if request.arch is not None:
        arch = ARCHES.get(request.arch.strip().lower())
        if arch is None:
            raise UsageError(f"--arch {request.arch!r}: use x86_64 or arm64")
    if request.sort is not None and request.sort not in SORTS:
        raise UsageError(f"--sort {request.sort!r}: use one of {', '.join(SORTS)}")
    if request.group_by is not None and request.group_by not in GROUPS:
        raise UsageError(f"--group-by {request.group_by!r}: use gpu")
    if request.limit is not None and request.limit < 1:
        raise UsageError(f"--limit {request.limit}: give 1 or more")
    for name in request.regions:
        if not name.strip():
            raise UsageError("--region: empty value; give a region name or all")
    return replace(request, market=market, arch=arch, gpu_model=model, gpu_memory=memory)


# -- what one instance type can do for the request ---------------------------------------------


@dataclass(frozen=True)
class Sizing:
    """How a type serves the request: `instances` of it, each bringing `gpus` GPUs to it."""

    instances: int
    gpus: int


def sizing(request: OfferRequest, gpu_count: int, *, share: bool = False) -> Sizing | str:
    """How many instances of a type with `gpu_count` GPUs the request needs, or why the type
    cannot serve it. `share`: an instance may take part of a machine's GPUs (a pod on a
    node, a process on the host), so a machine with more GPUs than asked gives only those."""
    if request.gpus is None:
        return Sizing(request.count or 1, gpu_count if not share else 0)
    total = request.gpus
    if gpu_count < 1:
        return f"no GPUs ({total} asked)"
    if request.count is not None:
        each = math.ceil(total / request.count)
        if gpu_count < each:
            return (
                f"{request.count} x {gpu_count} GPUs < {total} asked ({each} per instance needed)"
            )
        return Sizing(request.count, each if share else gpu_count)
    each = min(gpu_count, total) if share else gpu_count
    return Sizing(math.ceil(total / each), each)


def gpu_matches(request: OfferRequest, spec: InstanceTypeSpec) -> bool:
    """Whether a type carries the GPU asked: `--gpu` by canonical model (and memory, when
    the name gives it); `--gpus` alone, any GPU; nothing asked, any type."""
    from providers import gpus as gpu_names

    if request.gpu_model:
        if not spec.gpu_count or gpu_names.model(spec.gpu).lower() != request.gpu_model.lower():
            return False
        if request.gpu_memory is not None:
            return abs(spec.gpu_memory_gib - request.gpu_memory) < 0.5
        return True
    if request.gpus is not None:
        return spec.gpu_count > 0
    return True


def shape_misfit(request: OfferRequest, spec: InstanceTypeSpec) -> tuple[str, str] | None:
    """(code, reason) when the type's shape cannot serve one instance of the request:
    `arch` (another architecture, or one not known when --arch is given) or `too-small`
    (fewer vCPUs or GiB than asked, or not known)."""
    if request.arch is not None and spec.arch != request.arch:
        shown = spec.arch or "not known"
        return "arch", f"arch {shown}, {request.arch} asked"
    if request.cpu is not None:
        if spec.vcpus is None:
            return "too-small", f"vCPUs not known, {_n(request.cpu)} asked"
        if spec.vcpus < request.cpu:
            return "too-small", f"{_n(spec.vcpus)} vCPUs < {_n(request.cpu)} asked"
    if request.ram is not None:
        if spec.memory_gib is None:
            return "too-small", f"memory not known, {_n(request.ram)} GiB asked"
        if spec.memory_gib < request.ram:
            return "too-small", f"{_n(spec.memory_gib)} GiB < {_n(request.ram)} GiB asked"
    return None


def _n(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
