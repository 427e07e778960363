"""The local host's offer: the machine shoal runs on, as one instance type `host`, with what
local drivers leave free of it now (the local provider's resources: its vCPUs, GiB and
GPUs, less what live allocations and started bookings hold).

Each instance is a process taking `--cpu` vCPUs (one when nothing is asked), `--ram` GiB
and its part of the GPUs (as a pod on a node); `fitsNow` is how many fit in what is free.
Its price is `[local.pricing]` (null, the offer kept, when the config file sets none: the
machine is already there); on demand only, unless `[local.pricing] spot` is set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from providers import gpus as gpu_names
from providers.accounts.fit import Binding
from providers.core.timeutil import utcnow
from providers.models import (
    InstanceTypeSpec,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricingItem,
)
from providers.offers.judge import Verdicts, candidate, priced, settle
from providers.offers.model import DRIVERS, Offer
from providers.offers.request import gpu_matches

PROVIDER = "local"
NAMES = {"cpu/vcpu": "free vCPUs on this host", "memory/GiB": "free GiB on this host"}


@runtime_checkable
class Host(Protocol):
    """The local catalog (providers/local/catalog.py) as offers use it."""

    prices: ResourcePricingItem

    def instance_type(self) -> InstanceTypeSpec: ...

    def list_resources(self, opts: ResourceListOptions) -> list[Resource]: ...


def host_offers(catalog: Host, asked: Sequence[str], verdicts: Verdicts) -> None:
    request = verdicts.request
    spec = catalog.instance_type()
    (resource,) = catalog.list_resources(ResourceListOptions())
    region = resource.region or RegionSpec(name=PROVIDER)
    if not gpu_matches(request, spec):
        has = f"{spec.gpu_count} x {spec.gpu}" if spec.gpu_count else "no GPUs"
        what = request.gpu or "GPU"
        verdicts.reject(PROVIDER, region, spec.name, None, "not-offered", f"no {what} here ({has})")
        return
    sized = candidate(verdicts, PROVIDER, region, spec, share=True)
    if sized is None:
        return
    item = resource.overview[0].stat.on_demand if resource.overview else None
    supply = item.supply if item is not None else {}
    allocated = item.allocated if item is not None else {}
    free = item.allocatable if item is not None else {}
    model = request.gpu_model or spec.gpu
    needs: dict[tuple[str, str], float] = {("cpu", "vcpu"): request.cpu or 1.0}
    if request.ram is not None:
        needs[("memory", "GiB")] = request.ram
    if sized.gpus:
        needs[("gpu", model)] = sized.gpus
    best: tuple[int, Binding] | None = None
    for (kind, name), amount in needs.items():
        names = [name] if kind != "gpu" else _gpu_names(supply.get("gpu", {}), model)
        have = [sum(float(part.get(kind, {}).get(n, "0")) for n in names) for part in (
            supply, allocated, free)]  # fmt: skip
        count = math.floor(have[2] / amount + 1e-9)
        if best is None or count < best[0]:
            label = NAMES.get(f"{kind}/{name}", f"free {name} GPUs on this host")
            binding = Binding(f"{kind}/{name}", label, have[0], have[1], have[2], amount, "host")
            best = (count, binding)
    assert best is not None
    now = utcnow()
    prices = catalog.prices
    for market in request.markets:
        price = prices.on_demand_price if market == "onDemand" else prices.spot_price
        offer = Offer(
            provider=PROVIDER,
            driver=DRIVERS[PROVIDER],
            region=region,
            instance_type=spec.name,
            shape=spec,
            market=market,
            instances=sized.instances,
            price_per_hour=price,
            fits_now=best[0],
            binding=best[1],
            as_of=now,
            gpus_each=sized.gpus,
        )
        if market == "spot" and price is None:
            if request.market == "spot":
                priced(verdicts, offer, not_offered="the local host has no spot price configured")
            continue
        if price is None:
            offer.notes.append("no price: set [local.pricing] on_demand in the config file")
        if priced(verdicts, offer, known_price_needed=False):
            settle(verdicts, offer, limit="capacity")


def _gpu_names(products: dict[str, str], model: str) -> list[str]:
    return [p for p in products if not model or gpu_names.model(p).lower() == model.lower()]
