"""What a pod holds and until when: its effective requests, whether it marks its node as
in use, and the second its deadline gives its resources back.

Pure functions over the API's JSON for Pod objects (plain dicts); no I/O. `PodView` is what
the arithmetic asks of a pod: `DictPod` answers it for such a dict, and `lists.Pod` for a
pod read by type from a list page (through these same functions).

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

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Protocol

from providers.core.errors import ShoalError, UsageError
from providers.kubernetes.quantity import MILLI_CACHE, milli


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


def holds(pod: Mapping[str, Any]) -> bool:
    """Whether the pod holds what it requests (it has not ended)."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed")


def marks_busy(pod: Mapping[str, Any]) -> bool:
    """Whether the pod makes its node an instance in use (not a DaemonSet's, not static)."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations")
    if annotations and "kubernetes.io/config.mirror" in annotations:
        return False
    return all(ref.get("kind") != "DaemonSet" for ref in meta.get("ownerReferences") or ())


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


class PodView(Protocol):
    """What the arithmetic asks of a pod, in the order it asks (capacity._charge_holding)."""

    def node_name(self) -> Any:
        """`spec.nodeName` (`""` for none); None when the pod has no spec."""

    def holds(self) -> bool: ...

    def returned_at(self, now: datetime) -> datetime | None: ...

    def requests(self) -> Mapping[str, int]: ...

    def marks_busy(self) -> bool: ...


class DictPod:
    """A pod's JSON as a PodView."""

    __slots__ = ("obj",)

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.obj = obj

    def node_name(self) -> Any:
        spec = self.obj.get("spec")
        return (spec.get("nodeName") or "") if spec else None

    def holds(self) -> bool:
        return holds(self.obj)

    def returned_at(self, now: datetime) -> datetime | None:
        return returned_at(self.obj, now)

    def requests(self) -> Mapping[str, int]:
        return pod_requests(self.obj)

    def marks_busy(self) -> bool:
        return marks_busy(self.obj)
