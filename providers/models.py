"""Catalog models: the types of the spec's `catalog` package, with its JSON names.

Quantities in a ResourceItem are strings, as in the spec (`"2118"`), so that cpu `"3.5"`,
memory in GiB and GPU counts share one shape: resource type -> resource name -> quantity.
Prices are USD per hour unless a `currency` says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from providers.core.wire import field

# resource type -> resource name -> quantity (a decimal string)
ResourceItem = dict[str, dict[str, str]]


def quantity(value: float) -> str:
    """A ResourceItem quantity: integers bare, fractions to two places."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.2f}".rstrip("0").rstrip(".")


# RFC 3339 timestamp -> ResourceItem
ScheduledResourceItem = dict[str, ResourceItem]


@dataclass
class AWSRegion:
    """The upstream Go `types.AWSRegion`: an aws region, optionally one zone of it."""

    region: str = field(default="")
    zone: str = field(omitempty=True, default="")


@dataclass
class KubernetesRegion:
    """The upstream Go `types.KubernetesRegion`: the kubeconfig context asked, its cluster,
    and the namespace the context works in."""

    context: str = field(omitempty=True, default="")
    cluster: str = field(omitempty=True, default="")
    namespace: str = field(omitempty=True, default="")


@dataclass
class RegionSpec:
    """A provider's region; `name` is provider-specific (`local`, `us-east-1`, a context).

    The upstream Go `types.RegionSpec` (which catalog.txt leaves open) has one member per
    provider instead (`aws`, `kubernetes`, `lambdaCloud`): a Go client decoding shoal's JSON
    reads only those, so providers that have one fill it beside `name` (aws and kubernetes;
    azure, gcp and local have no upstream member and print `name` alone)."""

    name: str = field(default="")
    zones: list[str] = field(omitempty=True, default_factory=list)
    location: str = field(omitempty=True, default="")
    aws: AWSRegion | None = field(omitempty=True, default=None)
    kubernetes: KubernetesRegion | None = field(omitempty=True, default=None)


def aws_region(spec: RegionSpec) -> RegionSpec:
    """`spec` with its upstream `aws` member (a region name; the zone only if one applies)."""
    if spec.name and spec.aws is None:
        spec.aws = AWSRegion(region=spec.name)
    return spec


@dataclass
class InstanceTypeSpec:
    """One instance type's shape. Memory in GiB; GPU memory in GiB per GPU. vCPUs and
    memory are null when the provider's data does not say them (never 0). `source` says
    where the shape came from (the provider's API, or shoal's built-in table of the
    provider's published sizes, with its date)."""

    # Also written as upstream's `types.InstanceTypeSpec` member, `instanceType`.
    name: str = field(default="", also=("instanceType",))
    vcpus: float | None = field(default=None)
    memory_gib: float | None = field(default=None)
    arch: str = field(default="")
    gpu: str = field(omitempty=True, default="")
    gpu_count: int = field(default=0)
    gpu_memory_gib: float = field(omitempty=True, default=0.0)
    region: str = field(omitempty=True, default="")
    source: str = field(omitempty=True, default="")


@dataclass
class Selector:
    """One requirement: `key operator values`, as upstream's Go `types.Selector` (`values`
    always present). Operators: upstream's In, NotIn, Exists, DoesNotExist, and shoal's
    numeric Gt, Gte, Lt, Lte (upstream has none; kubernetes names the first two alike)."""

    key: str = field(default="")
    operator: str = field(default="Exists")
    values: list[str] = field(default_factory=list)


@dataclass
class ListResourceFilter:
    resource_selectors: list[Selector] = field("resourceSelectors", default_factory=list)


@dataclass
class ResourceListOptions:
    region: RegionSpec = field(default_factory=RegionSpec)
    start_time: datetime | None = field(omitempty=True, default=None)
    end_time: datetime | None = field(omitempty=True, default=None)
    filter: ListResourceFilter | None = field(omitempty=True, default=None)


@dataclass
class ResourceStatItem:
    allocated: ResourceItem = field(default_factory=dict)
    supply: ResourceItem = field(default_factory=dict)
    allocatable: ResourceItem = field(default_factory=dict)


@dataclass
class ScheduledResourceStatItem:
    allocated: ScheduledResourceItem = field(default_factory=dict)
    supply: ScheduledResourceItem = field(default_factory=dict)
    allocatable: ScheduledResourceItem = field(default_factory=dict)


@dataclass
class ResourceStat:
    on_demand: ResourceStatItem | None = field("onDemand", omitempty=True, default=None)
    spot: ResourceStatItem | None = field(omitempty=True, default=None)
    scheduled: ScheduledResourceStatItem | None = field(omitempty=True, default=None)


@dataclass
class RegionResourceItem:
    next_level: list[RegionResourceItem] = field("nextLevel", omitempty=True, default_factory=list)
    key: str = field(default="")
    value: str = field(default="")
    stat: ResourceStat = field(default_factory=ResourceStat)


@dataclass
class RegionResource:
    region: RegionSpec | None = field(default=None)
    overview: list[RegionResourceItem] = field(default_factory=list)
    breakdown: dict[str, list[RegionResourceItem]] = field(omitempty=True, default_factory=dict)


@dataclass
class Resource:
    """RegionResource plus the provider name (Go embeds RegionResource; JSON is flat), plus
    where its figures come from (all omitempty, so the spec's own fields read the same):
    `asOf` (when fetched), `source` (the APIs asked), `stale` (older than the TTL) and
    `notes` (what is missing and why: a permission, an unknown usage, a binding quota)."""

    region: RegionSpec | None = field(default=None)
    overview: list[RegionResourceItem] = field(default_factory=list)
    breakdown: dict[str, list[RegionResourceItem]] = field(omitempty=True, default_factory=dict)
    provider: str = field(default="")
    as_of: datetime | None = field("asOf", omitempty=True, default=None)
    source: str = field(omitempty=True, default="")
    stale: bool = field(omitempty=True, default=False)
    notes: list[str] = field(omitempty=True, default_factory=list)


@dataclass
class ResourcePricingItem:
    """Hourly prices in USD (or the catalog's stated currency); None means not offered/known."""

    on_demand_price: float | None = field("onDemandPrice", omitempty=True, default=None)
    spot_price: float | None = field("spotPrice", omitempty=True, default=None)
    scheduled_price: float | None = field("scheduledPrice", omitempty=True, default=None)


@dataclass
class PoolCost:
    """What one node pool costs per hour at the cloud catalog's cached prices (USD), split
    into nodes that hold workloads (used) and nodes that hold none (idle). The sums cover
    the priced nodes (`unpricedNodes` counts the others); with no node priced they are
    null, never a made-up 0."""

    key: str = field(default="")
    value: str = field(default="")
    nodes: int = field(default=0)
    spot_nodes: int = field("spotNodes", default=0)
    hourly: float | None = field(default=None)
    used_hourly: float | None = field("usedHourly", default=None)
    idle_hourly: float | None = field("idleHourly", default=None)
    unpriced_nodes: int = field("unpricedNodes", omitempty=True, default=0)


@dataclass
class ResourcePricing:
    """The spec's ResourcePricing, plus where its numbers come from (all omitempty, so the
    spec's own fields read the same): the provider, the currency, `asOf` (when the data was
    fetched), `source`, `stale` (older than the provider's TTL), `notes` (what is missing
    and why), for predictions `kind` (observed | forecast) and `method`, `error` when a
    provider of a multi-provider query failed, `pools` (kubernetes: cost per pool), and
    `shapes`: instance type -> its InstanceTypeSpec (vCPUs, memory, GPUs, arch; the object
    `types --json` prints), for the types of `items` whose shape is known, so a script that
    picks a type by price sees what it picks. `items` stays the spec's price map."""

    region: RegionSpec = field(default_factory=RegionSpec)
    items: dict[str, ResourcePricingItem] = field(default_factory=dict)
    provider: str = field(omitempty=True, default="")
    currency: str = field(omitempty=True, default="")
    as_of: datetime | None = field("asOf", omitempty=True, default=None)
    source: str = field(omitempty=True, default="")
    stale: bool = field(omitempty=True, default=False)
    notes: list[str] = field(omitempty=True, default_factory=list)
    kind: str = field(omitempty=True, default="")
    method: str = field(omitempty=True, default="")
    error: str = field(omitempty=True, default="")
    pools: list[PoolCost] = field(omitempty=True, default_factory=list)
    # Instance type -> its shape, as the table shows beside the prices; an extra member of
    # the spec's JSON (keyed like `items`, each a `types --json` object).
    shapes: dict[str, InstanceTypeSpec] = field(omitempty=True, default_factory=dict)


def selector_record(spec: InstanceTypeSpec, **extra: Any) -> dict[str, Any]:
    """The provider-neutral keys a `--select` can test for one instance type."""
    record: dict[str, Any] = {
        "name": spec.name,
        "instance_type": spec.name,
        "vcpus": spec.vcpus,
        "memory_gib": spec.memory_gib,
        "arch": spec.arch,
        "gpu": spec.gpu or None,
        "gpu_count": spec.gpu_count,
        "gpu_memory_gib": spec.gpu_memory_gib or None,
        "region": spec.region or None,
    }
    record.update(extra)
    return record
