"""Which nodes count, and how each is grouped, classed and charged: a node's supply and
what the pods bound to it request, in milli-units under ResourceItem keys.

Pure functions over the API's JSON for Node objects (plain dicts); no I/O.

Which nodes count. A node counts when its `Ready` condition is `True` and it is not
cordoned (`spec.unschedulable`); the others are left out of supply (their pods too) and
reported with a reason: `NotReady`, `Ready unknown` (status `Unknown` or no condition,
for example a node whose kubelet stopped reporting) or `cordoned`.
https://kubernetes.io/docs/reference/node/node-status/#condition

Supply is the sum of the counted nodes' `status.allocatable` (capacity minus system
reservations, what the scheduler fills).
https://kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources/

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
of, like the `hugepages-2Mi: "0"` every node lists, is left out).
https://kubernetes.io/docs/reference/labels-annotations-taints/#nodekubernetesioinstance-type
https://github.com/NVIDIA/k8s-device-plugin/blob/main/docs/gpu-feature-discovery/README.md
https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from providers.kubernetes.quantity import milli

INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")
# A node's zone: the well-known label, then the one it replaced (still set by older clusters).
# https://kubernetes.io/docs/reference/labels-annotations-taints/#topologykubernetesiozone
ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
UNKNOWN = "unknown"


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


@dataclass(slots=True)
class Node:
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


def meta_name(obj: Mapping[str, Any]) -> str:
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


def resource_key(name: str, gpu_product: str, gpu_resources: tuple[str, ...]) -> Key | None:
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


def node_zone(obj: Mapping[str, Any]) -> str:
    """The zone a node's labels name ("" when none does)."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    found = _first_label(labels, ZONE_LABELS)
    return found[1] if found and isinstance(found[1], str) else ""


def _node(obj: Mapping[str, Any], rules: PoolRules, chain: tuple[str, ...]) -> Node:
    name = meta_name(obj)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    pool = _first_label(labels, chain) or (rules.pool_label, "")
    product = _first_label(labels, rules.gpu_product_labels)
    itype = _first_label(labels, INSTANCE_TYPE_LABELS)
    allocatable = (obj.get("status") or {}).get("allocatable") or {}
    supply: dict[Key, int] = {("cpu", "vcpu"): 0, ("memory", "GiB"): 0}
    keys: dict[str, Key | None] = {}
    gpu_product = product[1] if product else UNKNOWN
    for res, value in allocatable.items():
        key = resource_key(res, gpu_product, rules.gpu_resources)
        keys[res] = key
        if key is not None:
            amount = milli(value, f"node {name} status.allocatable.{res}")
            # Every node lists hugepages-1Gi/2Mi "0"; a zero GPU count is news (a failing
            # device plugin), a zero hugepage pool is not.
            if amount or key[0] != "resource":
                supply[key] = supply.get(key, 0) + amount
    return Node(
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


def count_nodes(
    nodes: Iterable[Mapping[str, Any]], rules: PoolRules
) -> tuple[dict[str, Node], list[tuple[str, str]]]:
    """The counted nodes by name, and the others with why they are left out (sorted)."""
    chain = rules.pool_chain()
    counted: dict[str, Node] = {}
    excluded: list[tuple[str, str]] = []
    for obj in nodes:
        reason = node_reason(obj)
        if reason is not None:
            excluded.append((meta_name(obj), reason))
            continue
        node = _node(obj, rules, chain)
        counted[node.name] = node
    excluded.sort()
    return counted, excluded


def charge(node: Node, requests: Mapping[str, int], sign: int) -> None:
    """Add (`sign` 1) or give back (-1) a pod's requests, by resource name, to its node's
    allocated sums."""
    keys = node.keys
    alloc = node.allocated
    for res, v in requests.items():
        key = keys.get(res)
        if key is None:
            if res in keys:
                continue  # a known non-compute resource (pods, ephemeral-storage)
            # Requested but not offered by this node (a device plugin that went away):
            # still shown as allocated, under the name it would have.
            key = resource_key(res, node.gpu_product, node.gpu_resources)
            keys[res] = key
            if key is None:
                continue
        alloc[key] = alloc.get(key, 0) + sign * v

