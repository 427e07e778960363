"""Node and pod arithmetic: a cluster's supply, allocated and allocatable, by pool and label,
now or at each point of a window.

Pure functions over the API's JSON for Node and Pod objects (plain dicts; pods may also be
any `pods.PodView`, such as the typed pods of `lists`); no I/O. The
parts, each with its rules and their sources: `nodes` (which nodes count, pools, capacity
class, ResourceItem keys, charging a node), `pods` (which pods count, effective requests,
instances in use, deadlines), `capacity_view` (the spec's Resource from the charged nodes,
overcommitted nodes). Here: charging each holding pod to its node, and the views over time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from providers.core.errors import UsageError
from providers.core.timeutil import utcnow
from providers.core.wire import format_time
from providers.kubernetes.capacity_view import Overcommit, overcommit_message, overcommitted, view
from providers.kubernetes.nodes import (
    INSTANCE_TYPE_LABELS,
    UNKNOWN,
    Node,
    PoolRules,
    charge,
    count_nodes,
    is_spot,
    node_reason,
)
from providers.kubernetes.pods import DictPod, PodView, pod_requests
from providers.models import Resource

# The names other modules import from here, wherever they live.
__all__ = [
    "INSTANCE_TYPE_LABELS",
    "UNKNOWN",
    "Overcommit",
    "PoolRules",
    "Summary",
    "Window",
    "compute",
    "is_spot",
    "node_reason",
    "overcommit_message",
    "pod_requests",
    "predictions",
]


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


# (when, node, requests, busy) of a pod that gives its resources back inside a window
_Ending = tuple[datetime, Node, Mapping[str, int], bool]
Pods = Iterable[dict[str, Any] | PodView]  # the API's JSON, or pods read by type


def _charge_holding(
    counted: Mapping[str, Node],
    pods: Pods,
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
    for item in pods:
        pod = DictPod(item) if isinstance(item, dict) else item
        bound = pod.node_name()
        node = counted.get(bound) if bound is not None else None
        if node is None or not pod.holds():
            continue
        returned = pod.returned_at(now) if deadlines else None
        if returned is not None and returned <= at:
            continue
        requests = pod.requests()
        busy = pod.marks_busy()
        charge(node, requests, 1)
        if busy:
            node.busy += 1
        if returned is not None and returned <= until:
            ending.append((returned, node, requests, busy))
    return ending


def _views(
    counted: dict[str, Node],
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
            charge(node, requests, -1)
            if busy:
                node.busy -= 1
            i += 1
        out[format_time(point)] = view(counted, rules, region_name)
    return out


def predictions(
    nodes: Iterable[Mapping[str, Any]],
    pods: Pods,
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
    counted, excluded = count_nodes(nodes, rules)
    start, end = start.replace(microsecond=0), end.replace(microsecond=0)
    ending = _charge_holding(counted, pods, at=start, until=end, now=now)
    over = overcommitted(counted.values())
    points = sorted({start, end, *(row[0] for row in ending)})
    views = _views(counted, ending, points, rules, region_name)
    return Window(points=views, excluded=excluded, overcommitted=over)


def compute(
    nodes: Iterable[Mapping[str, Any]],
    pods: Pods,
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
