"""What a cluster's pools cost: each node's instance type at the cloud catalog's cached price.

A node's cloud comes from `spec.providerID` (`aws://`, `gce://`, `azure://`), its region
from `topology.kubernetes.io/region`. Prices are read from the catalog cache only (no
network: `shoal pricing -p aws -r REGION` fills it). A spot node costs the spot price when
the cache has one, else the on-demand price (said in a note). A node is used when it holds
a workload pod (the `instance` counts of the resource view), idle otherwise.

An unknown price is absent, never 0: a pool's sums cover its priced nodes, `unpricedNodes`
counts the others, and a pool with no priced node has no sums (null). A note says how many
nodes are unpriced and which catalog regions to fetch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from providers.cloud.offers import Offer
from providers.core.settings import Settings
from providers.models import (
    PoolCost,
    RegionResourceItem,
    RegionSpec,
    Resource,
    ResourcePricing,
    ResourcePricingItem,
)

if TYPE_CHECKING:
    from providers.cloud.cache import CatalogCache

CLOUDS = {"aws": "aws", "gce": "gcp", "azure": "azure"}
REGION_LABEL = "topology.kubernetes.io/region"


def _cloud(node: Mapping[str, Any]) -> tuple[str, str]:
    provider_id = str((node.get("spec") or {}).get("providerID") or "")
    cloud = CLOUDS.get(provider_id.partition("://")[0], "")
    labels = (node.get("metadata") or {}).get("labels") or {}
    return cloud, str(labels.get(REGION_LABEL, ""))


def _node_state(child: RegionResourceItem) -> tuple[str, bool, bool]:
    """(instance type, spot, used) of a node's own stat."""
    spot = child.stat.spot is not None
    item = child.stat.spot or child.stat.on_demand
    if item is None:
        return "", spot, False
    (itype, _), *_ = item.supply.get("instance", {"unknown": "1"}).items()
    used = item.allocated.get("instance", {}).get(itype, "0") != "0"
    return itype, spot, used


class _Pricer:
    """Prices nodes from the catalog cache (read on first use), keeping the instance types
    priced, the regions lacking a price, and notes."""

    def __init__(self, nodes: Iterable[Mapping[str, Any]], settings: Settings) -> None:
        self.settings = settings
        self.where = {str((n.get("metadata") or {}).get("name", "")): _cloud(n) for n in nodes}
        self.offers: dict[tuple[str, str], dict[str, Offer]] = {}
        self._cache: CatalogCache | None = None
        self.missing: set[tuple[str, str]] = set()
        self.items: dict[str, ResourcePricingItem] = {}
        self.notes: list[str] = []

    def _offer(self, cloud: str, region: str, itype: str) -> Offer | None:
        if (cloud, region) not in self.offers:
            if self._cache is None:
                from providers.cloud.catalog import open_cache

                self._cache = open_cache(self.settings)
            offers = self._cache.offers(cloud, region)
            self.offers[(cloud, region)] = {o.instance_type: o for o in offers}
        return self.offers[(cloud, region)].get(itype)

    def node_price(self, node: str, itype: str, spot: bool) -> float | None:
        cloud, region = self.where.get(node, ("", ""))
        if not cloud or not region:
            return None
        offer = self._offer(cloud, region, itype)
        price = _price(offer, spot)
        if offer is None or price is None:
            self.missing.add((cloud, region))
            return None
        self.items[itype] = ResourcePricingItem(
            on_demand_price=offer.on_demand, spot_price=offer.spot
        )
        if spot and offer.spot is None:
            self.notes.append(
                f"no spot price cached for {itype} in {cloud} {region}: on-demand used"
            )
        return price

    def pool(self, pool: RegionResourceItem) -> PoolCost:
        cost = PoolCost(key=pool.key, value=pool.value)
        for child in pool.next_level:
            itype, spot, used = _node_state(child)
            cost.nodes += 1
            cost.spot_nodes += spot
            price = self.node_price(child.value, itype, spot)
            if price is None:
                cost.unpriced_nodes += 1
            else:
                _add(cost, price, used)
        cost.hourly = _rounded(cost.hourly)
        cost.used_hourly = _rounded(cost.used_hourly)
        cost.idle_hourly = _rounded(cost.idle_hourly)
        return cost


def _price(offer: Offer | None, spot: bool) -> float | None:
    if offer is None:
        return None
    return offer.spot if spot and offer.spot is not None else offer.on_demand


def _add(cost: PoolCost, price: float, used: bool) -> None:
    # The first priced node turns the unknown sums (None) into known ones.
    cost.hourly = (cost.hourly or 0.0) + price
    cost.used_hourly = (cost.used_hourly or 0.0) + (price if used else 0.0)
    cost.idle_hourly = (cost.idle_hourly or 0.0) + (0.0 if used else price)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


def _unpriced_note(pools: list[PoolCost], missing: set[tuple[str, str]]) -> str | None:
    unpriced, nodes = sum(p.unpriced_nodes for p in pools), sum(p.nodes for p in pools)
    if not unpriced:
        return None
    fetch = " and ".join(f"`shoal pricing -p {c} --region {r}`" for c, r in sorted(missing))
    hint = f" (run {fetch} to fetch)" if fetch else ""
    if unpriced == nodes:
        return f"no node has a cached cloud price{hint}"
    verb = "has" if unpriced == 1 else "have"
    return f"{unpriced} of {nodes} nodes {verb} no cached cloud price{hint}"


def price_pools(
    resource: Resource, nodes: Iterable[Mapping[str, Any]], settings: Settings
) -> ResourcePricing:
    pricer = _Pricer(nodes, settings)
    pools = [pricer.pool(pool) for pool in resource.overview]
    notes = pricer.notes
    unpriced = _unpriced_note(pools, pricer.missing)
    if unpriced:
        notes.append(unpriced)
    pooled = {child.value for pool in resource.overview for child in pool.next_level}
    if any(not c or not r for name, (c, r) in pricer.where.items() if name in pooled):
        notes.append(
            "nodes without a cloud providerID or a topology.kubernetes.io/region label are "
            "left unpriced"
        )
    return ResourcePricing(
        region=resource.region or RegionSpec(),
        items=pricer.items,
        provider="kubernetes",
        currency="USD",
        notes=list(dict.fromkeys(notes)),
        pools=pools,
    )
