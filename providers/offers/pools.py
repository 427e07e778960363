"""A Kubernetes cluster's offers: pods of the request's shape on the node pools that have
room for them now.

One listing per context (`KubernetesCatalog.pool_capacity`) gives each pool's nodes with
what each has free (allocatable minus what bound pods request) and each node type's shape
and cached cloud price. An offer is a pool's nodes of one instance type and market: each
instance is a pod taking `gpus` GPUs (all of a node's when the request needs that many,
else the part asked), `--cpu` vCPUs and `--ram` GiB; it fits where a node has all of them
free, and `fitsNow` sums that over the nodes. A pod's price is its share of its node's
price (the largest of its GPUs', vCPUs' and GiB's fractions of the node); a node type
without a cached price leaves it null, and the offer stays (the cluster is already there).
Its `zones` are those of the group's nodes (their `topology.kubernetes.io/zone` label).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from providers import gpus as gpu_names
from providers.accounts.fit import Binding
from providers.core.errors import ShoalError
from providers.models import (
    InstanceTypeSpec,
    RegionResourceItem,
    RegionSpec,
    ResourceListOptions,
    ResourcePricing,
    ResourceStatItem,
)
from providers.offers.judge import Verdicts, candidate, priced, settle
from providers.offers.model import DRIVERS, Failure, Offer, PoolRef
from providers.offers.request import gpu_matches

if TYPE_CHECKING:
    from providers.accounts.model import Market
    from providers.models import Resource

PROVIDER = "kubernetes"


@runtime_checkable
class Pools(Protocol):
    """A cluster catalog (providers/kubernetes/catalog.py) as offers use it."""

    def list_regions(self) -> list[RegionSpec]: ...

    def pool_capacity(
        self, opts: ResourceListOptions
    ) -> tuple[Resource, ResourcePricing, dict[str, str]]: ...


@dataclass
class _Node:
    name: str
    free: dict[tuple[str, str], float]
    supply: dict[tuple[str, str], float]
    allocated: dict[tuple[str, str], float]


@dataclass
class _Group:
    """A pool's nodes of one instance type and market."""

    key: str
    value: str
    instance_type: str
    market: Market
    nodes: list[_Node] = field(default_factory=list)


def pool_offers(catalog: Pools, asked: Sequence[str], verdicts: Verdicts) -> None:
    """Every context of `asked` (none: the current one; "all": every context)."""
    from providers.core.timeutil import utcnow

    if "all" in asked:
        contexts: list[str | None] = [r.name for r in catalog.list_regions()]
    else:
        contexts = list(asked) or [None]
    failed: list[ShoalError] = []
    for context in contexts:
        opts = ResourceListOptions(region=RegionSpec(name=context or ""))
        try:
            resource, pricing, zones = catalog.pool_capacity(opts)
        except ShoalError as exc:  # one cluster of several: the others still answer
            if len(contexts) == 1:
                raise
            failed.append(exc)
            verdicts.failures.append(Failure(PROVIDER, _said(exc), context or ""))
            continue
        region = resource.region or RegionSpec(name=context or "")
        now = utcnow()
        seen = False
        for pool in resource.overview:
            for group in _groups(pool):
                seen = _offer(verdicts, region, group, pricing, zones, now) or seen
        if not seen and verdicts.request.wants_gpus:
            what = verdicts.request.gpu or "GPU"
            verdicts.reject(PROVIDER, region, "", None, "not-offered", f"no node with a {what}")
    if failed and len(failed) == len(contexts):
        verdicts.failures.clear()
        first, *others = failed
        first.earlier = tuple(_said(exc) for exc in others)
        raise first


def _said(exc: ShoalError) -> str:
    text = str(exc)
    return text if text.startswith(PROVIDER) else f"{PROVIDER}: {text}"


def _figures(item: ResourceStatItem, part: str) -> dict[tuple[str, str], float]:
    found = getattr(item, part)
    return {
        (kind, name): float(value)
        for kind, names in found.items()
        for name, value in names.items()
        if kind in ("cpu", "memory", "gpu")
    }


def _groups(pool: RegionResourceItem) -> list[_Group]:
    groups: dict[tuple[str, str], _Group] = {}
    for child in pool.next_level:
        market: Market = "spot" if child.stat.spot is not None else "onDemand"
        item = child.stat.spot or child.stat.on_demand
        if item is None:
            continue
        instance_type = next(iter(item.supply.get("instance", {})), "unknown")
        group = groups.setdefault(
            (instance_type, market), _Group(pool.key, pool.value, instance_type, market)
        )
        group.nodes.append(
            _Node(
                child.value,
                _figures(item, "allocatable"),
                _figures(item, "supply"),
                _figures(item, "allocated"),
            )
        )
    return list(groups.values())


def _gpu_key(node: _Node, model: str) -> list[tuple[str, str]]:
    """The node's GPU resources of `model` (any GPU when none is asked)."""
    return [
        key
        for key in node.supply
        if key[0] == "gpu" and (not model or gpu_names.model(key[1]).lower() == model.lower())
    ]


def _offer(
    verdicts: Verdicts,
    region: RegionSpec,
    group: _Group,
    pricing: ResourcePricing,
    zones: dict[str, str],
    now: datetime,
) -> bool:
    """Whether the group's nodes have the GPU asked (the context offers it), after making
    it an offer or a rejection."""
    request = verdicts.request
    spec = pricing.shapes.get(group.instance_type) or InstanceTypeSpec(name=group.instance_type)
    sized = candidate(verdicts, PROVIDER, region, spec, share=True)
    if sized is None:
        return gpu_matches(request, spec)
    model = request.gpu_model or spec.gpu
    needs: dict[str, float] = {}
    if sized.gpus:
        needs["gpu"] = sized.gpus
    if request.cpu is not None:
        needs["cpu/vcpu"] = request.cpu
    if request.ram is not None:
        needs["memory/GiB"] = request.ram
    if not needs:
        needs["cpu/vcpu"] = 1.0  # a pod asks for something; one vCPU, as `alloc` defaults
    per_node: list[int] = []
    totals: dict[str, list[float]] = {d: [0.0, 0.0, 0.0, 0.0] for d in needs}  # supply..fits
    for node in group.nodes:
        counts = []
        for dim, amount in needs.items():
            kind, _, name = dim.partition("/")
            keys = _gpu_key(node, model) if dim == "gpu" else [(kind, name)]
            free = sum(node.free.get(k, 0.0) for k in keys)
            count = math.floor(free / amount + 1e-9)
            figures = totals[dim]
            figures[0] += sum(node.supply.get(k, 0.0) for k in keys)
            figures[1] += sum(node.allocated.get(k, 0.0) for k in keys)
            figures[2] += free
            figures[3] += count
            counts.append(count)
        per_node.append(min(counts))
    item = pricing.items.get(group.instance_type)
    node_price = None
    if item is not None:
        spot = item.spot_price if group.market == "spot" else None
        node_price = spot if spot is not None else item.on_demand_price
    share = _share(spec, sized.gpus, needs.get("cpu/vcpu"), needs.get("memory/GiB"))
    offer = Offer(
        provider=PROVIDER,
        driver=DRIVERS[PROVIDER],
        region=region,
        instance_type=group.instance_type,
        shape=spec,
        market=group.market,
        instances=sized.instances,
        price_per_hour=None if node_price is None else round(node_price * share, 6),
        fits_now=sum(per_node),
        pool=PoolRef(group.key, group.value, len(group.nodes), sum(1 for n in per_node if n)),
        as_of=now,
        gpus_each=sized.gpus,
        zones=sorted({zones[n.name] for n in group.nodes if zones.get(n.name)}),
    )
    if not offer.zones:
        offer.notes.append(
            "zones unknown: no node of the pool has a topology.kubernetes.io/zone label"
        )
    if node_price is None:
        offer.notes.append(
            f"no cached cloud price for {group.instance_type} (`shoal pricing -p kubernetes` "
            "says which `shoal pricing -p CLOUD -r REGION` fills it)"
        )
    elif share < 1:
        offer.notes.append(f"a pod's share ({share:.0%}) of its node's price")
    dim = min(totals, key=lambda d: totals[d][3])
    supply, used, free, _ = totals[dim]
    label = f"gpu/{model or 'any'}" if dim == "gpu" else dim
    pool = group.value or "(no pool label)"
    offer.binding = Binding(
        label, f"free on pool {pool}'s nodes", supply, used, free, needs[dim], "pool"
    )
    if priced(verdicts, offer, known_price_needed=False):
        settle(verdicts, offer, limit="capacity")
    return True


def _share(spec: InstanceTypeSpec, gpus: int, cpu: float | None, ram: float | None) -> float:
    """The largest fraction of the node a pod takes: its GPUs', vCPUs' or GiB's."""
    parts = [0.0]
    if gpus and spec.gpu_count:
        parts.append(gpus / spec.gpu_count)
    if cpu is not None and spec.vcpus:
        parts.append(cpu / spec.vcpus)
    if ram is not None and spec.memory_gib:
        parts.append(ram / spec.memory_gib)
    taken = max(parts)
    return 1.0 if taken <= 0 else min(1.0, taken)
