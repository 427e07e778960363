"""The `kubernetes` catalog: a cluster's nodes and pods as supply, allocated and allocatable.

Regions are the kubeconfig's contexts (one cluster each; `--region` or `--context` picks
one, the current context otherwise). `resources` lists nodes and the pods that hold
resources (paged, never all in one answer) and sums them (providers/kubernetes/capacity.py);
nodes that are NotReady or cordoned are left out of supply and reported on stderr.
`pricing` joins each node's instance type to the cloud catalog's cached prices (the node's
`spec.providerID` names the cloud, its `topology.kubernetes.io/region` label the region),
for the hourly cost of each pool, split into used and idle nodes.

Config (`[kubernetes]`): `context`, `pool_label`, `breakdown_labels` (list),
`spot_labels` (a table: label = [values meaning spot]), `namespace` (for the driver).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from providers.errors import ConfigError, UsageError
from providers.kubernetes.capacity import (
    INSTANCE_TYPE_LABELS,
    UNKNOWN,
    PoolRules,
    Summary,
    compute,
    node_reason,
    predictions,
)
from providers.models import (
    InstanceTypeSpec,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricing,
)
from providers.settings import Settings, config_section

if TYPE_CHECKING:
    from providers.kubernetes.client import KubeClient
    from providers.kubernetes.kubeconfig import Connection

PROVIDER = "kubernetes"
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
# Pods that hold nothing are not worth downloading (the API filters them server-side).
HOLDING_PODS = {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
ARCH = {"amd64": "x86_64", "arm64": "arm64"}


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


def rules_from_config(config: Mapping[str, Any]) -> PoolRules:
    section = config_section(config, PROVIDER)
    defaults = PoolRules()
    pool_label = section.get("pool_label", defaults.pool_label)
    breakdown = section.get("breakdown_labels", list(defaults.breakdown_labels))
    spot = section.get("spot_labels")
    if not isinstance(pool_label, str) or not pool_label:
        raise ConfigError("config [kubernetes] pool_label must be a label name string")
    if not isinstance(breakdown, list) or not all(isinstance(b, str) for b in breakdown):
        raise ConfigError("config [kubernetes] breakdown_labels must be a list of label names")
    spot_rules = dict(defaults.spot_rules)
    if spot is not None:
        if not isinstance(spot, dict) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in spot.values()
        ):
            raise ConfigError(
                "config [kubernetes] spot_labels must be a table of label = [values], e.g. "
                '{"example.com/capacity" = ["spot"]}'
            )
        spot_rules = {k: tuple(v) for k, v in spot.items()}
    return PoolRules(
        pool_label=pool_label, breakdown_labels=tuple(breakdown), spot_rules=spot_rules
    )


class KubernetesCatalog:
    def __init__(
        self,
        settings: Settings,
        context: str | None,
        rules: PoolRules,
        client_for: Callable[[Connection], KubeClient] | None = None,
    ) -> None:
        self.settings = settings
        self.context = context
        self.rules = rules
        self._client_for = client_for
        self._clients: dict[str, KubeClient] = {}

    @classmethod
    def from_settings(cls, settings: Settings) -> KubernetesCatalog:
        from providers.cloud.config import setting
        from providers.env import ENV_KUBE_CONTEXT

        context = setting(settings, PROVIDER, "context", ENV_KUBE_CONTEXT) or None
        return cls(settings, context, rules_from_config(settings.config))

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

    def _nodes(self, client: KubeClient) -> list[dict[str, Any]]:
        return client.collect(NODES, list)

    def _report_excluded(self, excluded: list[tuple[str, str]]) -> None:
        if excluded:
            shown = ", ".join(f"{name} ({why})" for name, why in excluded[:10])
            more = f" and {len(excluded) - 10} more" if len(excluded) > 10 else ""
            self.settings.warn(
                f"kubernetes: {len(excluded)} node(s) left out of supply: {shown}{more}"
            )

    # -- the Catalog interface -----------------------------------------------------------

    def list_regions(self) -> list[RegionSpec]:
        from providers.kubernetes.kubeconfig import list_contexts

        names, current = list_contexts(self.settings.env)
        return [RegionSpec(name=n, location="current" if n == current else "") for n in names]

    def list_instance_types(self, region: RegionSpec | None) -> list[InstanceTypeSpec]:
        from providers.kubernetes.quantity import bytes_, count, cpu_cores

        client = self.client(region)
        found: dict[str, InstanceTypeSpec] = {}
        for node in self._nodes(client):
            if node_reason(node) is not None:
                continue
            labels = (node.get("metadata") or {}).get("labels") or {}
            itype = next((labels[k] for k in INSTANCE_TYPE_LABELS if k in labels), "unknown")
            if itype in found:
                continue
            name = (node.get("metadata") or {}).get("name", "?")
            alloc = (node.get("status") or {}).get("allocatable") or {}
            gpus = sum(
                count(alloc[r], f"node {name} status.allocatable.{r}")
                for r in self.rules.gpu_resources
                if r in alloc
            )
            product = next(
                (labels[k] for k in self.rules.gpu_product_labels if k in labels), UNKNOWN
            )
            found[itype] = InstanceTypeSpec(
                name=itype,
                vcpus=float(cpu_cores(alloc.get("cpu", "0"), f"node {name} allocatable.cpu")),
                memory_gib=round(
                    bytes_(alloc.get("memory", "0"), f"node {name} allocatable.memory") / 2**30, 2
                ),
                arch=ARCH.get(arch := labels.get("kubernetes.io/arch", ""), arch),
                gpu=product if gpus else "",
                gpu_count=gpus,
                region=client.connection.context,
            )
        return sorted(found.values(), key=lambda s: s.name)

    def _summary(self, opts: ResourceListOptions) -> tuple[list[dict[str, Any]], Summary]:
        if opts.filter and opts.filter.resource_selectors:
            raise UsageError("kubernetes takes no --select; use --region or --context")
        client = self.client(opts.region)
        with _no_gc():
            nodes = self._nodes(client)
            summary = client.collect(
                PODS,
                lambda pods: compute(
                    nodes, pods, self.rules, region_name=client.connection.context
                ),
                params=HOLDING_PODS,
            )
        self._report_excluded(summary.excluded)
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
        with _no_gc():
            nodes = self._nodes(client)
            names = (
                (str((n.get("metadata") or {}).get("name", "")), node_reason(n)) for n in nodes
            )
            self._report_excluded([(name, why) for name, why in names if why is not None])
            return client.collect(
                PODS,
                lambda pods: predictions(
                    nodes,
                    pods,
                    self.rules,
                    region_name=client.connection.context,
                    start=start,
                    end=end,
                ),
                params=HOLDING_PODS,
            )

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]:
        from providers.kubernetes.pricing import price_pools

        nodes, summary = self._summary(opts)
        return [price_pools(summary.resource, nodes, self.settings)]

    def list_pricing_predictions(self, opts: ResourceListOptions) -> dict[str, ResourcePricing]:
        raise UsageError(
            "kubernetes pricing has no window: prices come from the cloud catalogs "
            "(`shoal pricing -p aws --start ...`)"
        )
