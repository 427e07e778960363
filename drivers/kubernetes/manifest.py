"""The Pod (or Job) a definition becomes.

Requests equal limits (cpu, memory, GPUs as their extended resource), so the scheduler
reserves what the ledger counts. The lifetime becomes `activeDeadlineSeconds`: the kubelet
ends the workload then, even when no shoal process is left to free it. Labels mark the
object as shoal's, with its allocation id, so every machine that talks to the cluster sees
the same allocations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

MANAGED_BY = "app.kubernetes.io/managed-by"
ALLOCATION_LABEL = "shoal.dev/allocation"
OWNER_ANNOTATION = "shoal.dev/owner"
CONTAINER = "main"
_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def object_name(allocation_id: str) -> str:
    """A DNS-1123 name for the allocation (lowercase, digits and '-', at most 63 chars)."""
    name = _DNS_LABEL.sub("-", f"shoal-{allocation_id}".lower()).strip("-")
    return name[:63].rstrip("-")


def _node_affinity(spot: bool | None, spot_rules: Mapping[str, tuple[str, ...]]) -> Any:
    if spot is None or not spot_rules:
        return None
    if spot:
        # Terms are ORed: any cloud's spot label will do.
        terms = [
            {"matchExpressions": [{"key": k, "operator": "In", "values": list(v)}]}
            for k, v in sorted(spot_rules.items())
        ]
    else:
        # Expressions in one term are ANDed; NotIn also matches nodes without the label.
        terms = [
            {
                "matchExpressions": [
                    {"key": k, "operator": "NotIn", "values": list(v)}
                    for k, v in sorted(spot_rules.items())
                ]
            }
        ]
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


# The taints the major clouds put on spot nodes; tolerated when spot capacity is asked for.
SPOT_TOLERATIONS = [
    {
        "key": "kubernetes.azure.com/scalesetpriority",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    },
    {
        "key": "cloud.google.com/gke-spot",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    },
    {
        "key": "karpenter.sh/capacity-type",
        "operator": "Equal",
        "value": "spot",
        "effect": "NoSchedule",
    },
]


def pod_spec(
    *,
    image: str,
    argv: list[str],
    env: Mapping[str, str],
    cpu: int,
    ram_gib: int,
    gpus: int,
    gpu_resource: str,
    node_selector: Mapping[str, str],
    spot: bool | None,
    spot_rules: Mapping[str, tuple[str, ...]],
    deadline_seconds: int | None,
) -> dict[str, Any]:
    resources: dict[str, str] = {}
    if cpu:
        resources["cpu"] = str(cpu)
    if ram_gib:
        resources["memory"] = f"{ram_gib}Gi"
    if gpus:
        resources[gpu_resource] = str(gpus)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
        "resources": {"requests": dict(resources), "limits": dict(resources)},
    }
    if argv:
        container["command"] = argv
    spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    affinity = _node_affinity(spot, spot_rules)
    if affinity is not None:
        spec["affinity"] = {"nodeAffinity": affinity}
    if spot:
        spec["tolerations"] = SPOT_TOLERATIONS
    if deadline_seconds:
        spec["activeDeadlineSeconds"] = deadline_seconds
    return spec


def manifest(
    kind: str,
    name: str,
    namespace: str,
    allocation_id: str,
    owner: str,
    spec: dict[str, Any],
) -> dict[str, Any]:
    labels = {MANAGED_BY: "shoal", ALLOCATION_LABEL: allocation_id[:63]}
    metadata = {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "annotations": {OWNER_ANNOTATION: owner},
    }
    if kind == "pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    job_spec: dict[str, Any] = {
        "backoffLimit": 0,
        "template": {"metadata": {"labels": labels}, "spec": spec},
    }
    if "activeDeadlineSeconds" in spec:
        job_spec["activeDeadlineSeconds"] = spec["activeDeadlineSeconds"]
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": metadata, "spec": job_spec}


def path(kind: str, namespace: str, name: str = "") -> str:
    base = (
        f"/api/v1/namespaces/{namespace}/pods"
        if kind == "pod"
        else f"/apis/batch/v1/namespaces/{namespace}/jobs"
    )
    return f"{base}/{name}" if name else base
