"""What a cluster's pools cost: each node's instance type at the cloud catalog's cached price.

A node's cloud comes from `spec.providerID` (`aws://`, `gce://`, `azure://`), its region
from `topology.kubernetes.io/region`. Prices are read from the catalog cache only (no
network: `shoal pricing -p aws -r REGION` fills it). A spot node costs the spot price when
the cache has one, else the on-demand price (said in a note). A node is used when it holds
a workload pod (the `instance` counts of the resource view), idle otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from providers.cloud.offers import Offer
from providers.models import (
    PoolCost,
    RegionResourceItem,
    RegionSpec,
    Resource,
    ResourcePricing,
    ResourcePricingItem,
)
from providers.settings import Settings

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


def price_pools(
    resource: Resource, nodes: Iterable[Mapping[str, Any]], settings: Settings
) -> ResourcePricing:
    where = {str((n.get("metadata") or {}).get("name", "")): _cloud(n) for n in nodes}
    offers: dict[tuple[str, str], dict[str, Offer]] = {}
    notes: list[str] = []
    missing: set[tuple[str, str]] = set()
    items: dict[str, ResourcePricingItem] = {}
    pools: list[PoolCost] = []
    cache = None
    for pool in resource.overview:
        cost = PoolCost(key=pool.key, value=pool.value)
        for child in pool.next_level:
            itype, spot, used = _node_state(child)
            cloud, region = where.get(child.value, ("", ""))
            cost.nodes += 1
            cost.spot_nodes += spot
            if not cloud or not region:
                cost.unpriced_nodes += 1
                continue
            if (cloud, region) not in offers:
                if cache is None:
                    from providers.cloud.catalog import open_cache

                    cache = open_cache(settings)
                offers[(cloud, region)] = {o.instance_type: o for o in cache.offers(cloud, region)}
            offer = offers[(cloud, region)].get(itype)
            price = None
            if offer is not None:
                price = offer.spot if spot and offer.spot is not None else offer.on_demand
            if offer is None or price is None:
                cost.unpriced_nodes += 1
                missing.add((cloud, region))
                continue
            items[itype] = ResourcePricingItem(
                on_demand_price=offer.on_demand, spot_price=offer.spot
            )
            if spot and offer.spot is None:
                notes.append(
                    f"no spot price cached for {itype} in {cloud} {region}: on-demand used"
                )
            cost.hourly += price
            if used:
                cost.used_hourly += price
            else:
                cost.idle_hourly += price
        cost.hourly = round(cost.hourly, 6)
        cost.used_hourly = round(cost.used_hourly, 6)
        cost.idle_hourly = round(cost.idle_hourly, 6)
        pools.append(cost)
    for cloud, region in sorted(missing):
        notes.append(
            f"some {cloud} {region} instance types have no cached price: run "
            f"`shoal pricing -p {cloud} -r {region}` to fill the catalog"
        )
    pooled = {child.value for pool in resource.overview for child in pool.next_level}
    if any(not c or not r for name, (c, r) in where.items() if name in pooled):
        notes.append(
            "nodes without a cloud providerID or a topology.kubernetes.io/region label are "
            "left unpriced"
        )
    return ResourcePricing(
        region=resource.region or RegionSpec(),
        items=items,
        provider="kubernetes",
        currency="USD",
        notes=list(dict.fromkeys(notes)),
        pools=pools,
    )
