"""How many copies of a request fit on a cluster's nodes, from its node and pod lists."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from providers.kubernetes.capacity import PoolRules, is_spot, node_reason, pod_requests
from providers.kubernetes.catalog import HOLDING_PODS, NODES, PODS
from providers.kubernetes.quantity import milli

if TYPE_CHECKING:
    from providers.kubernetes.client import KubeClient

MANAGED_BY = "app.kubernetes.io/managed-by"


def _tolerated(node: Mapping[str, Any], tolerations: list[dict[str, str]]) -> bool:
    """Every NoSchedule/NoExecute taint on the node is tolerated by the pod we would make."""
    for taint in (node.get("spec") or {}).get("taints") or ():
        if taint.get("effect") not in ("NoSchedule", "NoExecute"):
            continue
        if not any(
            t.get("key") == taint.get("key")
            and (t.get("operator") == "Exists" or t.get("value") == taint.get("value"))
            and t.get("effect") in (None, "", taint.get("effect"))
            for t in tolerations
        ):
            return False
    return True


def _eligible(
    node: Mapping[str, Any],
    rules: PoolRules,
    selector: Mapping[str, str],
    spot: bool | None,
    tolerations: list[dict[str, str]],
) -> bool:
    if node_reason(node) is not None or not _tolerated(node, tolerations):
        return False
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    return spot is None or is_spot(labels, rules) == spot


def _same_target(spec: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    """An unscheduled shoal pod competes for these nodes when it asks for the same ones."""
    return dict(spec.get("nodeSelector") or {}) == dict(selector)


def count_fits(
    client: KubeClient,
    rules: PoolRules,
    *,
    selector: Mapping[str, str],
    spot: bool | None,
    wanted: Mapping[str, int],
    tolerations: list[dict[str, str]] | None = None,
) -> int:
    """`wanted` is in milli-units per resource name (cpu cores, memory bytes, devices).

    Free = a node's allocatable minus the requests of the pods that hold resources on it.
    shoal's own pods that are not scheduled yet are taken off the total, one each, so two
    allocations in quick succession do not both count the same room.
    """
    free: dict[str, dict[str, int]] = {}
    for node in client.collect(NODES, list):
        if not _eligible(node, rules, selector, spot, tolerations or []):
            continue
        name = str((node.get("metadata") or {}).get("name", ""))
        allocatable = (node.get("status") or {}).get("allocatable") or {}
        free[name] = {
            res: milli(allocatable.get(res, "0"), f"node {name} status.allocatable.{res}")
            for res in wanted
        }

    def tally(pods: Iterator[dict[str, Any]]) -> int:
        room = {name: dict(amounts) for name, amounts in free.items()}
        pending = 0
        for pod in pods:
            spec = pod.get("spec") or {}
            node = spec.get("nodeName")
            if not node:
                labels = (pod.get("metadata") or {}).get("labels") or {}
                if labels.get(MANAGED_BY) == "shoal" and _same_target(spec, selector):
                    pending += 1
                continue
            if node not in room:
                continue
            requests = pod_requests(pod)
            for res in wanted:
                room[node][res] -= requests.get(res, 0)
        fits = 0
        for amounts in room.values():
            fits += min(max(0, amounts[res]) // need for res, need in wanted.items() if need > 0)
        return max(0, fits - pending)

    return client.collect(PODS, tally, params=HOLDING_PODS)
