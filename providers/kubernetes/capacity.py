"""Node and pod arithmetic: a cluster's supply, allocated and allocatable, by pool and label.

Pure functions over the API's JSON for Node and Pod objects (plain dicts); no I/O.

Which nodes count. A node counts when its `Ready` condition is `True` and it is not
cordoned (`spec.unschedulable`); the others are left out of supply (their pods too) and
reported with a reason: `NotReady`, `Ready unknown` (status `Unknown` or no condition,
for example a node whose kubelet stopped reporting) or `cordoned`.
https://kubernetes.io/docs/reference/node/node-status/#condition

Supply is the sum of the counted nodes' `status.allocatable` (capacity minus system
reservations, what the scheduler fills).
https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/

Allocatable is what each node has left, never below zero, summed per group. Pods can hold
more than a node now offers (a GPU that failed after they were scheduled: the device
plugin lowers the node's allocatable, the pods keep running); such a node's allocatable
is 0, not negative, so it takes nothing from its neighbours' sum, and `overcommitted`
names it with each resource held beyond the offer, for the caller to report.

Which pods count. Pods bound to a counted node (`spec.nodeName`) whose phase is neither
`Succeeded` nor `Failed` (those hold nothing). A pod's request for each resource is its
effective request, as the scheduler computes it
(https://kubernetes.io/docs/concepts/resource-management/effective-pod-requests-limits/,
https://kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/#resource-sharing-within-containers):
  - app containers: the sum of their requests;
  - sidecars (init containers with `restartPolicy: Always`) keep running, so they add to
    that sum, and to every init container that starts after them;
  - each regular init container runs alone beside the sidecars started before it; the
    highest of those is the effective init request;
  - the pod's request is the larger of the two, plus `spec.overhead` (the RuntimeClass's
    per-pod cost, https://kubernetes.io/docs/concepts/scheduling-eviction/pod-overhead/);
  - pod-level `spec.resources.requests` (cpu, memory), when set, replace the containers'
    aggregate (https://kubernetes.io/docs/concepts/configuration/assign-pod-level-resources/).
A container with a limit but no request for a resource requests its limit: the API
server's defaulting does that on create, so objects that did not pass through it (test
fixtures, dry-run manifests) count the same as live ones.
https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#requests-and-limits

Pools. A node's pool is the value of the first label of the chain present on it: the
configured `pool_label`, then `pool_fallbacks` (Karpenter `karpenter.sh/nodepool`, GKE
`cloud.google.com/gke-nodepool`, EKS `eks.amazonaws.com/nodegroup`, AKS
`kubernetes.azure.com/agentpool`), so a mixed fleet groups sensibly with no
configuration. A node with none of them goes to the pool `""` under the configured label.
https://karpenter.sh/docs/reference/well-known-labels/
https://cloud.google.com/kubernetes-engine/docs/how-to/node-pools
https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html
https://learn.microsoft.com/azure/aks/use-labels

Capacity class. A node is spot when any `spot_rules` label carries one of its values
(compared case-insensitively): EKS `eks.amazonaws.com/capacityType=SPOT`, GKE
`cloud.google.com/gke-spot=true` and `cloud.google.com/gke-preemptible=true`, AKS
`kubernetes.azure.com/scalesetpriority=spot`, Karpenter `karpenter.sh/capacity-type=spot`;
every other node is on-demand.
https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html#managed-node-group-capacity-types
https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms
https://learn.microsoft.com/azure/aks/spot-node-pool
https://karpenter.sh/docs/concepts/scheduling/#well-known-labels

ResourceItem keys: `cpu/vcpu` (cores), `memory/GiB`, `gpu/<product>` (the count of the
node's GPU extended resource, named by its product label: `nvidia.com/gpu.product` from
GPU feature discovery, GKE's `cloud.google.com/gke-accelerator`, EKS's
`k8s.amazonaws.com/accelerator`, else `unknown`), `instance/<instance type>` (nodes, from
`node.kubernetes.io/instance-type`) and `resource/<name>` for every other extended
resource (a name with a `/`) and `hugepages-*` (in bytes; a `resource/*` a node offers none
of, like the `hugepages-2Mi: "0"` every node lists, is left out). Every key of supply is also in
allocated and allocatable (`"0"` when nothing is used), so consumers can diff the maps.
https://kubernetes.io/docs/reference/labels-annotations-taints/#nodekubernetesioinstance-type
https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gpu-feature-discovery/README.md
https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/

Instances in use: a node is allocated when it carries an allocated pod that is not a
DaemonSet's or a static (mirror) pod, since those run on every node and would make every
node look used; their requests still count for cpu, memory and the rest.

Deadlines, now and in windows (one rule, `returned_at`): a pod with
`spec.activeDeadlineSeconds` is killed by the kubelet that long after it started
(`status.startTime`, else `metadata.creationTimestamp`), so its resources count as returned
from that instant's next whole second on. The API's word is the present, though: a pod it
still lists as holding holds its resources now, even past its deadline (the kubelet has
yet to kill it, and the scheduler still counts it), so a deadline already past means
returned from the second after now. Hence the view now and the view of a window at now
agree, and a window wholly in the future no longer shows the overdue pod.
https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from providers.core.errors import ShoalError, UsageError
from providers.core.timeutil import utcnow
from providers.core.wire import format_time
from providers.kubernetes.quantity import MILLI_CACHE, fmt_ratio, milli
from providers.models import (
    RegionResourceItem,
    RegionSpec,
    Resource,
    ResourceItem,
    ResourceStat,
    ResourceStatItem,
)

PROVIDER = "kubernetes"
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
UNKNOWN = "unknown"
_GIB_MILLI = 1000 * 2**30


def _default_spot_rules() -> dict[str, tuple[str, ...]]:
    return {
        "eks.amazonaws.com/capacityType": ("SPOT",),
        "cloud.google.com/gke-spot": ("true",),
        "cloud.google.com/gke-preemptible": ("true",),
        "kubernetes.azure.com/scalesetpriority": ("spot",),
        "karpenter.sh/capacity-type": ("spot",),
    }


@dataclass(frozen=True)
class PoolRules:
    """How nodes are grouped and classed; every field can come from configuration."""

    pool_label: str = "karpenter.sh/nodepool"
    pool_fallbacks: tuple[str, ...] = (
        "karpenter.sh/nodepool",
        "cloud.google.com/gke-nodepool",
        "eks.amazonaws.com/nodegroup",
        "kubernetes.azure.com/agentpool",
    )
    breakdown_labels: tuple[str, ...] = ("topology.kubernetes.io/zone",)
    spot_rules: Mapping[str, tuple[str, ...]] = field(
        default_factory=_default_spot_rules, hash=False
    )
    gpu_resources: tuple[str, ...] = (
        "nvidia.com/gpu",
        "amd.com/gpu",
        "gpu.intel.com/i915",
        "habana.ai/gaudi",
    )
    gpu_product_labels: tuple[str, ...] = (
        "nvidia.com/gpu.product",
        "cloud.google.com/gke-accelerator",
        "k8s.amazonaws.com/accelerator",
    )

    def pool_chain(self) -> tuple[str, ...]:
        return (self.pool_label, *(k for k in self.pool_fallbacks if k != self.pool_label))


Key = tuple[str, str]  # (resource type, resource name) of a ResourceItem


@dataclass(frozen=True)
class Overcommit:
    """A node whose pods hold more than it offers: (key, held, offered) in milli-units."""

    node: str
    excess: tuple[tuple[Key, int, int], ...]


@dataclass
class Summary:
    """The resource view, the nodes left out of it (with why) and the nodes overcommitted."""

    resource: Resource
    excluded: list[tuple[str, str]]
    overcommitted: list[Overcommit] = field(default_factory=list)


@dataclass
class Window:
    """The view at each point of a window (RFC 3339 keys), the nodes left out, and the
    nodes overcommitted at its start (later points only give resources back)."""

    points: dict[str, Resource]
    excluded: list[tuple[str, str]]
    overcommitted: list[Overcommit] = field(default_factory=list)


# -- nodes ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    name: str
    labels: dict[str, str]
    spot: bool
    pool_key: str
    pool: str
    instance_type: str
    gpu_product: str
    gpu_resources: tuple[str, ...]
    supply: dict[Key, int]  # milli-units
    # raw resource name -> ResourceItem key, for the pods' requests on this node
    keys: dict[str, Key | None]
    allocated: dict[Key, int] = field(default_factory=dict)
    busy: int = 0  # allocated pods that are neither DaemonSet nor static pods


def _meta_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("name") or "?")


def node_reason(node: Mapping[str, Any]) -> str | None:
    """Why a node is left out of supply, or None when it counts."""
    ready = None
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            ready = cond.get("status")
    if ready == "False":
        return "NotReady"
    if ready != "True":
        return "Ready unknown"
    if (node.get("spec") or {}).get("unschedulable"):
        return "cordoned"
    return None


def is_spot(labels: Mapping[str, str], rules: PoolRules) -> bool:
    for label, values in rules.spot_rules.items():
        value = labels.get(label)
        if value is not None and value.lower() in (v.lower() for v in values):
            return True
    return False


def _resource_key(name: str, gpu_product: str, gpu_resources: tuple[str, ...]) -> Key | None:
    if name == "cpu":
        return ("cpu", "vcpu")
    if name == "memory":
        return ("memory", "GiB")
    if name in gpu_resources:
        return ("gpu", gpu_product)
    if "/" in name or name.startswith("hugepages-"):
        return ("resource", name)
    return None  # pods, ephemeral-storage, attachable-volumes-*: not compute supply


def _first_label(labels: Mapping[str, str], keys: Iterable[str]) -> tuple[str, str] | None:
    for key in keys:
        value = labels.get(key)
        if value is not None:
            return key, value
    return None


def _node(obj: Mapping[str, Any], rules: PoolRules, chain: tuple[str, ...]) -> _Node:
    name = _meta_name(obj)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    pool = _first_label(labels, chain) or (rules.pool_label, "")
    product = _first_label(labels, rules.gpu_product_labels)
    itype = _first_label(labels, INSTANCE_TYPE_LABELS)
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    supply: dict[Key, int] = {("cpu", "vcpu"): 0, ("memory", "GiB"): 0}
    keys: dict[str, Key | None] = {}
    gpu_product = product[1] if product else UNKNOWN
    for res, value in allocatable.items():
        key = _resource_key(res, gpu_product, rules.gpu_resources)
        keys[res] = key
        if key is not None:
            amount = milli(value, f"node {name} status.allocatable.{res}")
            # Every node lists hugepages-1Gi/2Mi "0"; a zero GPU count is news (a failing
            # device plugin), a zero hugepage pool is not.
            if amount or key[0] != "resource":
                supply[key] = supply.get(key, 0) + amount
    return _Node(
        name=name,
        labels=labels,
        spot=is_spot(labels, rules),
        pool_key=pool[0],
        pool=pool[1],
        instance_type=itype[1] if itype else UNKNOWN,
        gpu_product=gpu_product,
        gpu_resources=rules.gpu_resources,
        supply=supply,
        keys=keys,
    )


def _nodes(
    nodes: Iterable[Mapping[str, Any]], rules: PoolRules
) -> tuple[dict[str, _Node], list[tuple[str, str]]]:
    chain = rules.pool_chain()
    counted: dict[str, _Node] = {}
    excluded: list[tuple[str, str]] = []
    for obj in nodes:
        reason = node_reason(obj)
        if reason is not None:
            excluded.append((_meta_name(obj), reason))
            continue
        node = _node(obj, rules, chain)
        counted[node.name] = node
    excluded.sort()
    return counted, excluded


# -- pods ----------------------------------------------------------------------------------


def _container_requests(
    container: Mapping[str, Any], pod: Mapping[str, Any], path: str
) -> dict[str, int]:
    resources = container.get("resources")
    if not resources:
        return {}
    cache = MILLI_CACHE
    out: dict[str, int] = {}
    requests = resources.get("requests")
    if requests:
        for res, v in requests.items():
            m = cache.get(v) if type(v) is str else None
            if m is None:
                m = milli(v, f"{_pod_where(pod)} {path}.resources.requests.{res}")
            out[res] = m
    limits = resources.get("limits")
    if limits:
        for res, v in limits.items():
            if res not in out:
                out[res] = milli(v, f"{_pod_where(pod)} {path}.resources.limits.{res}")
    return out


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for res, v in more.items():
        into[res] = into.get(res, 0) + v


def _pod_where(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"pod {meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective request per resource name, in milli-units."""
    spec = pod.get("spec") or {}
    containers = spec.get("containers") or []
    if len(containers) == 1:
        total = _container_requests(containers[0], pod, "spec.containers[0]")
    else:
        total = {}
        for i, c in enumerate(containers):
            _add(total, _container_requests(c, pod, f"spec.containers[{i}]"))
    init = spec.get("initContainers")
    if init:
        sidecars: dict[str, int] = {}
        peak: dict[str, int] = {}
        for i, c in enumerate(init):
            own = _container_requests(c, pod, f"spec.initContainers[{i}]")
            if c.get("restartPolicy") == "Always":
                _add(total, own)
                _add(sidecars, own)
                during = dict(sidecars)
            else:
                during = dict(own)
                _add(during, sidecars)
            for res, v in during.items():
                if v > peak.get(res, 0):
                    peak[res] = v
        for res, v in peak.items():
            if v > total.get(res, 0):
                total[res] = v
    pod_level = (spec.get("resources") or {}).get("requests")
    if pod_level:
        for res in ("cpu", "memory"):
            if res in pod_level:
                total[res] = milli(
                    pod_level[res], f"{_pod_where(pod)} spec.resources.requests.{res}"
                )
    overhead = spec.get("overhead")
    if overhead:
        for res, v in overhead.items():
            total[res] = total.get(res, 0) + milli(v, f"{_pod_where(pod)} spec.overhead.{res}")
    return total


def _holds(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def _marks_busy(pod: Mapping[str, Any]) -> bool:
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations")
    if annotations and "kubernetes.io/config.mirror" in annotations:
        return False
    return all(ref.get("kind") != "DaemonSet" for ref in meta.get("ownerReferences") or ())


def _charge(node: _Node, requests: Mapping[str, int], sign: int) -> None:
    keys = node.keys
    alloc = node.allocated
    for res, v in requests.items():
        key = keys.get(res)
        if key is None:
            if res in keys:
                continue  # a known non-compute resource (pods, ephemeral-storage)
            # Requested but not offered by this node (a device plugin that went away):
            # still shown as allocated, under the name it would have.
            key = _resource_key(res, node.gpu_product, node.gpu_resources)
            keys[res] = key
            if key is None:
                continue
        alloc[key] = alloc.get(key, 0) + sign * v


# -- output --------------------------------------------------------------------------------


def _value(key: Key, millis: int) -> str:
    return fmt_ratio(millis, _GIB_MILLI if key[0] == "memory" else 1000)


class _Totals:
    """Integer sums over a group of nodes of one capacity class."""

    __slots__ = ("allocated", "busy", "free", "instances", "nodes", "supply")

    def __init__(self) -> None:
        self.supply: dict[Key, int] = {}
        self.allocated: dict[Key, int] = {}
        # Clamped per node, then summed: an overcommitted node's excess is not free room
        # taken away from the other nodes of the group.
        self.free: dict[Key, int] = {}
        self.instances: dict[str, int] = {}
        self.busy: dict[str, int] = {}
        self.nodes = 0

    def add(self, node: _Node) -> None:
        self.nodes += 1
        for key, v in node.supply.items():
            self.supply[key] = self.supply.get(key, 0) + v
            left = max(0, v - node.allocated.get(key, 0))
            self.free[key] = self.free.get(key, 0) + left
        for key, v in node.allocated.items():
            self.allocated[key] = self.allocated.get(key, 0) + v
        itype = node.instance_type
        self.instances[itype] = self.instances.get(itype, 0) + 1
        self.busy[itype] = self.busy.get(itype, 0) + (1 if node.busy > 0 else 0)

    def item(self) -> ResourceStatItem:
        supply: ResourceItem = {}
        allocated: ResourceItem = {}
        allocatable: ResourceItem = {}
        for key in sorted(set(self.supply) | set(self.allocated)):
            rtype, name = key
            have = self.supply.get(key)
            used = max(0, self.allocated.get(key, 0))
            allocated.setdefault(rtype, {})[name] = _value(key, used)
            if have is not None:
                supply.setdefault(rtype, {})[name] = _value(key, have)
                allocatable.setdefault(rtype, {})[name] = _value(key, self.free[key])
        if self.instances:
            supply["instance"] = {}
            allocated["instance"] = {}
            allocatable["instance"] = {}
            for itype in sorted(self.instances):
                total, busy = self.instances[itype], self.busy[itype]
                supply["instance"][itype] = str(total)
                allocated["instance"][itype] = str(busy)
                allocatable["instance"][itype] = str(total - busy)
        return ResourceStatItem(allocated=allocated, supply=supply, allocatable=allocatable)


def _stat(nodes: Iterable[_Node]) -> ResourceStat:
    spot, on_demand = _Totals(), _Totals()
    for node in nodes:
        (spot if node.spot else on_demand).add(node)
    return ResourceStat(
        on_demand=on_demand.item() if on_demand.nodes else None,
        spot=spot.item() if spot.nodes else None,
    )


def _view(nodes: dict[str, _Node], rules: PoolRules, region_name: str) -> Resource:
    pools: dict[tuple[str, str], list[_Node]] = {}
    for node in nodes.values():
        pools.setdefault((node.pool, node.pool_key), []).append(node)
    overview = []
    for (pool, pool_key), members in sorted(pools.items()):
        members.sort(key=lambda n: n.name)
        children = [RegionResourceItem(key="node", value=n.name, stat=_stat((n,))) for n in members]
        overview.append(
            RegionResourceItem(next_level=children, key=pool_key, value=pool, stat=_stat(members))
        )
    breakdown: dict[str, list[RegionResourceItem]] = {}
    for label in rules.breakdown_labels:
        groups: dict[str, list[_Node]] = {}
        for node in nodes.values():
            groups.setdefault(node.labels.get(label, ""), []).append(node)
        breakdown[label] = [
            RegionResourceItem(key=label, value=value, stat=_stat(members))
            for value, members in sorted(groups.items())
        ]
    return Resource(
        region=RegionSpec(name=region_name),
        overview=overview,
        breakdown=breakdown,
        provider=PROVIDER,
    )


# -- overcommitted nodes -------------------------------------------------------------------


def _overcommitted(nodes: Iterable[_Node]) -> list[Overcommit]:
    found = []
    for node in sorted(nodes, key=lambda n: n.name):
        excess = tuple(
            (key, held, node.supply.get(key, 0))
            for key, held in sorted(node.allocated.items())
            if held > node.supply.get(key, 0)
        )
        if excess:
            found.append(Overcommit(node=node.name, excess=excess))
    return found


def _excess_text(over: Overcommit) -> str:
    held = (f"{k[0]}/{k[1]} {_value(k, used)}>{_value(k, have)}" for k, used, have in over.excess)
    return " ".join((over.node, *held))


def overcommit_message(found: list[Overcommit], shown: int = 10) -> str:
    """One line naming the first `shown` overcommitted nodes and what each holds too much of."""
    named = ", ".join(_excess_text(o) for o in found[:shown])
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return (
        f"{len(found)} node(s) overcommitted (pods hold more than the node offers; "
        f"allocatable shown as 0): {named}{more}"
    )


# -- deadlines -----------------------------------------------------------------------------


def _time(value: Any, where: str) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    from providers.core.timeutil import parse_time

    try:
        return parse_time(value, where)
    except UsageError as exc:
        raise ShoalError(str(exc)) from None


def _deadline(pod: Mapping[str, Any]) -> datetime | None:
    seconds = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        return None
    meta = pod.get("metadata") or {}
    where = _pod_where(pod)
    started = _time((pod.get("status") or {}).get("startTime"), f"{where} status.startTime")
    if started is None:
        created = meta.get("creationTimestamp")
        started = _time(created, f"{where} metadata.creationTimestamp")
    if started is None:
        return None
    return started + timedelta(seconds=seconds)


def _ceil_second(at: datetime) -> datetime:
    floor = at.replace(microsecond=0)
    return floor if floor == at else floor + timedelta(seconds=1)


def returned_at(pod: Mapping[str, Any], now: datetime) -> datetime | None:
    """The whole second from which a holding pod's resources count as returned; None when
    no deadline ends it. Never before the second after `now`: the API lists the pod as
    holding, so it holds now even when its deadline has passed (the module docstring)."""
    deadline = _deadline(pod)
    if deadline is None:
        return None
    return max(_ceil_second(deadline), now.replace(microsecond=0) + timedelta(seconds=1))


# -- entry points --------------------------------------------------------------------------

# (when, node, requests, busy) of a pod that gives its resources back inside a window
_Ending = tuple[datetime, _Node, dict[str, int], bool]


def _charge_holding(
    counted: Mapping[str, _Node],
    pods: Iterable[Mapping[str, Any]],
    *,
    at: datetime,
    until: datetime,
    now: datetime,
) -> list[_Ending]:
    """Charge each pod that holds at `at` to its node; return those that give their
    resources back by `until` (the rest are charged and dropped, keeping memory flat)."""
    ending: list[_Ending] = []
    # `returned_at` is never before the second after now, so a window that ends by now
    # (the present view) cannot see a pod returned: the same rule, without the parsing.
    deadlines = until > now.replace(microsecond=0)
    for pod in pods:
        spec = pod.get("spec")
        node = counted.get(spec.get("nodeName") or "") if spec else None
        if node is None or not _holds(pod):
            continue
        returned = returned_at(pod, now) if deadlines else None
        if returned is not None and returned <= at:
            continue
        requests = pod_requests(pod)
        busy = _marks_busy(pod)
        _charge(node, requests, 1)
        if busy:
            node.busy += 1
        if returned is not None and returned <= until:
            ending.append((returned, node, requests, busy))
    return ending


def _views(
    counted: dict[str, _Node],
    ending: list[_Ending],
    points: list[datetime],
    rules: PoolRules,
    region_name: str,
) -> dict[str, Resource]:
    """The view at each point, giving back what ends at or before it."""
    ending.sort(key=lambda row: row[0])
    out: dict[str, Resource] = {}
    i = 0
    for point in points:
        while i < len(ending) and ending[i][0] <= point:
            _, node, requests, busy = ending[i]
            _charge(node, requests, -1)
            if busy:
                node.busy -= 1
            i += 1
        out[format_time(point)] = _view(counted, rules, region_name)
    return out


def predictions(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    rules: PoolRules | None = None,
    *,
    region_name: str,
    start: datetime,
    end: datetime,
    now: datetime,
) -> Window:
    """The view at `start`, at each pod's `returned_at` in (start, end], and at `end`.

    Keys are RFC 3339 whole seconds; a pod returned at or before a point does not count
    there. `now` is the present, which `returned_at` needs.
    """
    if end < start:
        raise UsageError(f"--end {format_time(end)} is before --start {format_time(start)}")
    rules = rules or PoolRules()
    counted, excluded = _nodes(nodes, rules)
    start, end = start.replace(microsecond=0), end.replace(microsecond=0)
    ending = _charge_holding(counted, pods, at=start, until=end, now=now)
    overcommitted = _overcommitted(counted.values())
    points = sorted({start, end, *(row[0] for row in ending)})
    views = _views(counted, ending, points, rules, region_name)
    return Window(points=views, excluded=excluded, overcommitted=overcommitted)


def compute(
    nodes: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    rules: PoolRules | None = None,
    *,
    region_name: str,
    now: datetime | None = None,
) -> Summary:
    """Supply, allocated and allocatable now (default: the clock), by pool (down to nodes)
    and breakdown label: the window [now, now], so both follow one deadline rule."""
    at = now or utcnow()
    window = predictions(nodes, pods, rules, region_name=region_name, start=at, end=at, now=at)
    [resource] = window.points.values()
    return Summary(resource=resource, excluded=window.excluded, overcommitted=window.overcommitted)
