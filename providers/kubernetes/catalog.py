"""The `kubernetes` catalog: a cluster's nodes and pods as supply, allocated and allocatable.

Regions are the kubeconfig's contexts (one cluster each; `--region` or `--context` picks
one, the current context otherwise). `resources` lists nodes and the pods that hold
resources (paged, never all in one answer; each page read by type, `lists`, past a small
cluster's first 0.75 MB, the next one fetched meanwhile when fetching is mostly waiting)
and sums them (capacity.py);
nodes that are NotReady or cordoned are left out of supply and reported on stderr.
Nodes whose pods hold more than they offer are named on stderr too (and in `pricing`'s
notes). `types` reads each node's `status.capacity` (the machine's shape, whatever is
degraded or reserved now) and gives each instance type the value most of its nodes
report. `pricing` joins each node's instance type to the cloud catalog's cached prices
(the node's `spec.providerID` names the cloud, its `topology.kubernetes.io/region` label
the region), for the hourly cost of each pool, split into used and idle nodes.

Config (`[kubernetes]`): `context`, `pool_label`, `breakdown_labels` (list),
`spot_labels` (a table: label = [values meaning spot]). The driver's namespace is its
instance's (`[drivers."kubernetes/NAME"] namespace`).
"""

from __future__ import annotations

import gc
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from providers import gpus as gpu_names
from providers.core.errors import UsageError
from providers.core.settings import Settings, config_model
from providers.core.timeutil import utcnow
from providers.kubernetes.capacity import (
    INSTANCE_TYPE_LABELS,
    UNKNOWN,
    Overcommit,
    PoolRules,
    Summary,
    compute,
    node_reason,
    overcommit_message,
    predictions,
)
from providers.models import (
    InstanceTypeSpec,
    KubernetesRegion,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricing,
)

if TYPE_CHECKING:
    from providers.kubernetes.client import KubeClient
    from providers.kubernetes.connection import Connection

PROVIDER = "kubernetes"
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
# Pods that hold nothing are not worth downloading (the API filters them server-side).
HOLDING_PODS = {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
ARCH = {"amd64": "x86_64", "arm64": "arm64"}
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB per GPU, from GPU feature discovery
V = TypeVar("V", int, float, str)


# Until this many bytes of a view's pages have come, and unless the typed readers (`lists`)
# are loaded already, a page is read the standard way (json.loads): reading by type needs
# msgspec and the readers' structs, ~8 ms to import here, more than json.loads spends on a
# small cluster's lists (10 nodes and 100 pods, 0.5 MB: 5 ms, against 13 ms typed with the
# import). Both ways give the same answers (tests/providers/kubernetes/test_lists.py); the
# tests of the catalog set 0, so that their clusters are read by type.
TYPED_AFTER = 768 << 10


class _Readers:
    """The page readers of one view, its nodes' and its pods': the standard reading for
    its first TYPED_AFTER bytes, then by type (`lists`)."""

    def __init__(self) -> None:
        self.standard = 0  # bytes read the standard way so far

    def _typed(self, body: bytes) -> bool:
        if "providers.kubernetes.lists" in sys.modules:
            return True  # its import is paid
        if self.standard + len(body) > TYPED_AFTER:
            return True
        self.standard += len(body)
        return False

    def nodes(self, body: bytes) -> tuple[str, str, Sequence[dict[str, Any]]] | None:
        if not self._typed(body):
            return None
        from providers.kubernetes.lists import node_page

        return node_page(body)

    def pods(self, body: bytes) -> tuple[str, str, Sequence[Any]] | None:
        if not self._typed(body):
            return None
        from providers.kubernetes.lists import pod_page

        return pod_page(body)


@contextmanager
def _no_gc() -> Iterator[None]:
    """Rare cycle collection while a cluster's lists are decoded and summed: 100,000 pods
    allocate millions of container objects, and the collector's default passes over them
    cost a third of the time. Not off entirely: the HTTP stack leaves cycles per page."""
    thresholds = gc.get_threshold()
    gc.set_threshold(50_000, 20, 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def rules_from_config(settings: Settings) -> PoolRules:
    defaults = PoolRules()
    if PROVIDER not in settings.config:
        return defaults
    from providers.sections import KubernetesSection

    section = config_model(settings, KubernetesSection, PROVIDER)
    breakdown, spot = section.breakdown_labels, section.spot_labels
    return PoolRules(
        pool_label=section.pool_label or defaults.pool_label,
        breakdown_labels=defaults.breakdown_labels if breakdown is None else tuple(breakdown),
        spot_rules=defaults.spot_rules if spot is None else {k: tuple(v) for k, v in spot.items()},
    )


class KubernetesCatalog:
    def __init__(
        self,
        settings: Settings,
        context: str | None,
        rules: PoolRules,
        client_for: Callable[[Connection], KubeClient] | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.settings = settings
        self.context = context
        self.rules = rules
        self._client_for = client_for
        self._clock = clock
        self._clients: dict[str, KubeClient] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> KubernetesCatalog:
        from providers.config import setting
        from providers.core.env import ENV_KUBE_CONTEXT

        context = setting(settings, PROVIDER, "context", ENV_KUBE_CONTEXT) or None
        return cls(settings, context, rules_from_config(settings))

    def provider(self) -> str:
        return PROVIDER

    # -- connections ---------------------------------------------------------------------

    def _context(self, region: RegionSpec | None) -> str | None:
        if region is not None and region.name:
            return region.name
        return self.context

    def client(self, region: RegionSpec | None) -> KubeClient:
        from providers.kubernetes.kubeconfig import load_connection

        connection = load_connection(self.settings.env, self._context(region))
        key = connection.context
        if key not in self._clients:
            if self._client_for is not None:
                self._clients[key] = self._client_for(connection)
            else:
                from providers.kubernetes.client import KubeClient

                self._clients[key] = KubeClient(connection)
        return self._clients[key]

    def _region_name(self, region: RegionSpec | None) -> str:
        return self.client(region).connection.context

    def _nodes(
        self, client: KubeClient, *, whole: bool = True, readers: _Readers | None = None
    ) -> list[dict[str, Any]]:
        """The nodes; only the fields the arithmetic reads unless `whole`."""
        if whole:
            return client.collect(NODES, list, prefetch=True)
        page = (readers or _Readers()).nodes
        return client.collect(NODES, list, page=page, prefetch=True)

    def _report_excluded(self, excluded: list[tuple[str, str]]) -> None:
        if excluded:
            shown = ", ".join(f"{name} ({why})" for name, why in excluded[:10])
            more = f" and {len(excluded) - 10} more" if len(excluded) > 10 else ""
            self.settings.warn(
                f"kubernetes: {len(excluded)} node(s) left out of supply: {shown}{more}"
            )

    def _report_overcommitted(self, overcommitted: list[Overcommit]) -> None:
        if overcommitted:
            self.settings.warn(f"kubernetes: {overcommit_message(overcommitted)}")

    # -- the Catalog interface -----------------------------------------------------------

    def list_regions(self) -> list[RegionSpec]:
        from providers.kubernetes.kubeconfig import context_targets

        targets, current = context_targets(self.settings.env)
        return [
            RegionSpec(
                name=name,
                location="current" if name == current else "",
                kubernetes=KubernetesRegion(context=name, cluster=cluster, namespace=namespace),
            )
            for name, (cluster, namespace) in targets.items()
        ]

    def list_instance_types(self, region: RegionSpec | None) -> list[InstanceTypeSpec]:
        client = self.client(region)
        return self._type_specs(self._nodes(client), client.connection.context)

    def _type_specs(self, nodes: list[dict[str, Any]], context: str) -> list[InstanceTypeSpec]:
        by_type: dict[str, list[_Shape]] = {}
        for node in nodes:
            if node_reason(node) is None:
                shape = _shape(node, self.rules)
                by_type.setdefault(shape.instance_type, []).append(shape)
        return [_type_spec(name, shapes, context) for name, shapes in sorted(by_type.items())]

    def _summary(
        self, opts: ResourceListOptions, *, warn: bool = True, whole: bool = False
    ) -> tuple[list[dict[str, Any]], Summary]:
        """The view now, and the nodes (whole ones, for pricing, with `whole`)."""
        if opts.filter and opts.filter.resource_selectors:
            raise UsageError("kubernetes takes no --select; use --region or --context")
        client = self.client(opts.region)
        now = self._clock()
        readers = _Readers()
        with _no_gc():
            nodes = self._nodes(client, whole=whole, readers=readers)
            summary = client.collect(
                PODS,
                lambda pods: compute(
                    nodes, pods, self.rules, region_name=client.connection.context, now=now
                ),
                params=HOLDING_PODS,
                page=readers.pods,
                prefetch=True,
            )
        _upstream_region(summary.resource.region, client.connection)
        self._report_excluded(summary.excluded)
        if warn:  # pricing says it in its notes instead, which a table prints once
            self._report_overcommitted(summary.overcommitted)
        return nodes, summary

    def list_resources(self, opts: ResourceListOptions) -> list[Resource]:
        return [self._summary(opts)[1].resource]

    def list_resource_predictions(self, opts: ResourceListOptions) -> dict[str, Resource]:
        if opts.start_time is None:
            raise UsageError("a window needs --start")
        if opts.filter and opts.filter.resource_selectors:
            raise UsageError("kubernetes takes no --select; use --region or --context")
        client = self.client(opts.region)
        start, end = opts.start_time, opts.end_time or opts.start_time
        now = self._clock()
        readers = _Readers()
        with _no_gc():
            nodes = self._nodes(client, whole=False, readers=readers)
            window = client.collect(
                PODS,
                lambda pods: predictions(
                    nodes,
                    pods,
                    self.rules,
                    region_name=client.connection.context,
                    start=start,
                    end=end,
                    now=now,
                ),
                params=HOLDING_PODS,
                page=readers.pods,
                prefetch=True,
            )
        for point in window.points.values():
            _upstream_region(point.region, client.connection)
        self._report_excluded(window.excluded)
        self._report_overcommitted(window.overcommitted)
        return window.points

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]:
        from providers.kubernetes.pricing import price_pools

        nodes, summary = self._summary(opts, warn=False, whole=True)
        pricing = price_pools(summary.resource, nodes, self.settings)
        context = summary.resource.region.name if summary.resource.region else ""
        pricing.shapes = {
            spec.name: spec
            for spec in self._type_specs(nodes, context)
            if spec.name in pricing.items
        }
        if summary.overcommitted:
            pricing.notes.append(overcommit_message(summary.overcommitted))
        return [pricing]

    def pool_capacity(
        self, opts: ResourceListOptions
    ) -> tuple[Resource, ResourcePricing, dict[str, str]]:
        """`resources` and `pricing` from one listing of the cluster: the pools down to each
        node with what it has free, each node type's shape and cached cloud price, and each
        node's zone (its `topology.kubernetes.io/zone` label; `shoal offers` places requests
        on the nodes with all three)."""
        from providers.kubernetes.nodes import meta_name, node_zone
        from providers.kubernetes.pricing import price_pools

        nodes, summary = self._summary(opts, whole=True)
        pricing = price_pools(summary.resource, nodes, self.settings)
        context = summary.resource.region.name if summary.resource.region else ""
        pricing.region = summary.resource.region or pricing.region
        pricing.shapes = {spec.name: spec for spec in self._type_specs(nodes, context)}
        zones = {meta_name(node): node_zone(node) for node in nodes}
        return summary.resource, pricing, zones

    def list_pricing_predictions(self, opts: ResourceListOptions) -> dict[str, ResourcePricing]:
        raise UsageError(
            "kubernetes pricing has no window: prices come from the cloud catalogs "
            "(`shoal pricing -p aws --start ...`)"
        )


def _upstream_region(region: RegionSpec | None, connection: Connection) -> None:
    """The upstream Go `kubernetes` member of a region this catalog answers with: the
    context asked, its cluster and the namespace it works in (the cluster's figures are
    cluster-wide; the namespace is the context's, where a workload would go)."""
    if region is not None:
        region.kubernetes = KubernetesRegion(
            context=connection.context, cluster=connection.cluster, namespace=connection.namespace
        )


# -- instance types --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Shape:
    """One node's machine, as `types` shows it."""

    instance_type: str
    vcpus: float
    memory_gib: float
    gpu_count: int
    gpu: str
    gpu_memory_gib: float
    arch: str


def _machine(status: Mapping[str, Any], resource: str) -> tuple[str, Any]:
    """(field path, value) of a resource in the node's capacity, else its allocatable.

    Capacity is the machine (allocatable is capacity minus reservations, and minus a GPU the
    device plugin marked unhealthy); allocatable only stands in where capacity lacks the
    resource."""
    capacity = status.get("capacity") or {}
    if resource in capacity:
        return "status.capacity", capacity[resource]
    return "status.allocatable", (status.get("allocatable") or {}).get(resource)


def _shape(node: Mapping[str, Any], rules: PoolRules) -> _Shape:
    from providers.kubernetes.quantity import bytes_, count, cpu_cores

    meta = node.get("metadata") or {}
    name, labels = meta.get("name", "?"), meta.get("labels") or {}
    status = node.get("status") or {}

    def read(resource: str) -> tuple[Any, str]:
        path, value = _machine(status, resource)
        return ("0" if value is None else value), f"node {name} {path}.{resource}"

    gpus = sum(count(*read(r)) for r in rules.gpu_resources)
    product = next((labels[k] for k in rules.gpu_product_labels if k in labels), UNKNOWN)
    # One name per model across providers (`NVIDIA-A100-SXM4-80GB` -> A100, 80 GiB); the
    # memory from the name, else from GPU feature discovery's label (MiB).
    model, gpu_gib = gpu_names.canonical(product) if product != UNKNOWN else (UNKNOWN, None)
    if gpu_gib is None:
        try:
            gpu_gib = round(float(labels.get(GPU_MEMORY_LABEL, "")) / 1024, 1)
        except ValueError:
            gpu_gib = 0.0
    arch = labels.get("kubernetes.io/arch", "")
    return _Shape(
        instance_type=next((labels[k] for k in INSTANCE_TYPE_LABELS if k in labels), UNKNOWN),
        vcpus=float(cpu_cores(*read("cpu"))),
        memory_gib=round(bytes_(*read("memory")) / 2**30, 2),
        gpu_count=gpus,
        gpu=model if gpus else "",
        gpu_memory_gib=gpu_gib if gpus and gpu_gib > 0 else 0.0,
        arch=ARCH.get(arch, arch),
    )


def _mode(values: Iterable[V]) -> V:
    """The value most nodes report; a tie goes to the larger one, so neither name order nor
    one degraded node decides a type's shape."""
    counts = Counter(values)
    return max(counts, key=lambda v: (counts[v], v))


def _type_spec(name: str, shapes: list[_Shape], region: str) -> InstanceTypeSpec:
    # A vote per field: a node that differs in one (a lost GPU, a few KiB of memory) still
    # agrees with the others on the rest.
    gpu_count = _mode(s.gpu_count for s in shapes)
    with_gpus = [s for s in shapes if s.gpu_count == gpu_count]
    return InstanceTypeSpec(
        name=name,
        vcpus=_mode(s.vcpus for s in shapes),
        memory_gib=_mode(s.memory_gib for s in shapes),
        arch=_mode(s.arch for s in shapes),
        gpu=_mode(s.gpu for s in with_gpus),
        gpu_count=gpu_count,
        gpu_memory_gib=_mode(s.gpu_memory_gib for s in with_gpus),
        region=region,
        source=f"the shape most of its {len(shapes)} node(s) report in status.capacity "
        f"(context {region})",
    )
