"""Node and pod list pages read by type: only the fields the arithmetic reads, decoded by
msgspec, which skips the rest (managed fields, env, volumes, statuses: most of a pod's
5-20 KB) without building it; 5-25x faster than `json.loads` of the whole page, and the
pages' objects never exist in memory.

The arithmetic itself stays in `nodes`, `pods` and `capacity`, over the API's JSON:
- a node page's items are small dicts of the fields `nodes.count_nodes` reads;
- a pod page's items are `Pod` structs that answer what `capacity` asks of a pod through
  the functions of `pods`, given a dict of the fields each reads. A container's
  `resources` is kept as its raw JSON: a cluster has few distinct ones, so a pod's
  effective requests are computed once per distinct combination and then looked up.

Same answers as `json.loads`: a page is read here only when it is UTF-8 and msgspec
decodes it into these types; any other page (malformed JSON, a field of an unexpected type,
NaN, a lone surrogate, a BOM) goes the standard way (`PageReader` in client.py), with its
standard errors. Fields are typed `Any` where the arithmetic reads them through `.get` and
truthiness, so that every value it accepts is accepted here too, unchanged.

Imported only by the kubernetes catalog's resources views (msgspec is not imported by
any other command).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import msgspec
from msgspec import Raw, Struct, field

from providers.core.errors import ShoalError
from providers.kubernetes.pods import pod_requests, returned_at

_NONE = Raw(b"")  # a field that is absent
_REQUESTS: dict[Any, dict[str, int]] = {}  # effective requests by the containers' resources
_CACHE_LIMIT = 65536


class _ListMeta(Struct, gc=False):
    resourceVersion: Any = None
    continue_: Any = field(default=None, name="continue")


def _page_meta(meta: _ListMeta | None) -> tuple[str, str]:
    """(continue token, resourceVersion), as the standard reading takes them."""
    if meta is None:
        return "", ""
    token = meta.continue_
    return (str(token) if token else ""), str(meta.resourceVersion or "")


# -- nodes -----------------------------------------------------------------------------------


class _Condition(Struct, gc=False):
    type: Any = None
    status: Any = None


class _NodeMeta(Struct, gc=False):
    name: Any = None
    labels: Any = None


class _NodeSpec(Struct, gc=False):
    unschedulable: Any = None


class _NodeStatus(Struct, gc=False):
    conditions: list[_Condition] | None = None
    allocatable: Any = None


class _Node(Struct, gc=False):
    metadata: _NodeMeta | None = None
    spec: _NodeSpec | None = None
    status: _NodeStatus | None = None

    def as_dict(self) -> dict[str, Any]:
        """The fields `nodes.count_nodes` reads, as the API's JSON has them."""
        meta, spec, status = self.metadata, self.spec, self.status
        obj: dict[str, Any] = {}
        if meta is not None:
            obj["metadata"] = {"name": meta.name, "labels": meta.labels}
        if spec is not None:
            obj["spec"] = {"unschedulable": spec.unschedulable}
        if status is not None:
            conditions = status.conditions
            obj["status"] = {
                "conditions": None
                if conditions is None
                else [{"type": c.type, "status": c.status} for c in conditions],
                "allocatable": status.allocatable,
            }
        return obj


class _NodeList(Struct, gc=False):
    metadata: _ListMeta | None = None
    items: list[_Node] | None = None


_NODE_LIST = msgspec.json.Decoder(_NodeList)


def node_page(body: bytes) -> tuple[str, str, Sequence[dict[str, Any]]] | None:
    """A node list page: (continue token, resourceVersion, the nodes as small dicts)."""
    try:
        page = _NODE_LIST.decode(body)
    except (msgspec.MsgspecError, RecursionError):
        return None
    return (*_page_meta(page.metadata), [node.as_dict() for node in page.items or ()])


# -- pods ------------------------------------------------------------------------------------


class _Owner(Struct, gc=False):
    kind: Any = None


_MIRROR = "kubernetes.io/config.mirror"


class _Annotations(Struct, gc=False):
    """A pod's annotations, of which `pods.marks_busy` asks one thing: whether the mirror
    key is there, with any value (null too: UNSET is its absence). The other keys are
    skipped unbuilt: building every pod's annotations (a dozen strings each) was half the
    decoding of a small pod, and keeping them as raw JSON to search cost a copy and two
    scans of each pod's ~350 bytes (~2 us a pod). Keys are matched unescaped (`\\/`,
    `\\u002f`), as `json.loads` reads them."""

    mirror: Any = field(default=msgspec.UNSET, name=_MIRROR)


class _PodMeta(Struct, gc=False):
    name: Any = None
    namespace: Any = None
    creationTimestamp: Any = None
    # An object as above; any other value as it comes, which `marks_busy` asks as the dict
    # code does (`in` of a string or a list).
    annotations: _Annotations | list[Any] | str | int | float | bool | None = None
    ownerReferences: list[_Owner] | None = None


class _Container(Struct, gc=False):
    resources: Raw = _NONE
    restartPolicy: Any = None

    def as_dict(self) -> dict[str, Any]:
        obj: dict[str, Any] = {"restartPolicy": self.restartPolicy}
        if self.resources:
            try:
                obj["resources"] = json.loads(bytes(self.resources))
            except (ValueError, RecursionError) as exc:  # what msgspec lets by: 4300+ digits
                raise ShoalError(f"kubernetes: a container's resources: {exc}") from None
        return obj


class _PodSpec(Struct, gc=False):
    nodeName: Any = None
    containers: list[_Container] | None = None
    initContainers: list[_Container] | None = None
    overhead: Any = None
    resources: Any = None
    activeDeadlineSeconds: Any = None


class _PodStatus(Struct, gc=False):
    phase: Any = None
    startTime: Any = None


class Pod(Struct, gc=False):
    """A pod of a page read here; `pods.PodView` is the same questions of a dict."""

    metadata: _PodMeta | None = None
    spec: _PodSpec | None = None
    status: _PodStatus | None = None

    def node_name(self) -> Any:
        """The node it is bound to (`""` for none); None when it has no spec at all."""
        spec = self.spec
        return None if spec is None else (spec.nodeName or "")

    def holds(self) -> bool:
        status = self.status
        return (status.phase if status is not None else None) not in ("Succeeded", "Failed")

    def marks_busy(self) -> bool:
        meta = self.metadata
        if meta is None:
            return True
        annotations = meta.annotations
        if type(annotations) is _Annotations:
            if annotations.mirror is not msgspec.UNSET:
                return False
        elif annotations and _MIRROR in annotations:  # type: ignore[operator]
            return False
        return "DaemonSet" not in [ref.kind for ref in meta.ownerReferences or ()]

    def requests(self) -> Mapping[str, int]:
        """The effective requests (`pods.pod_requests`), once per distinct combination of
        the containers' resources (pod-level requests and overhead are not cached)."""
        spec = self.spec
        if spec is None:
            return pod_requests(self._as_dict())
        if spec.overhead or spec.resources:
            return pod_requests(self._as_dict())
        key: Any
        containers, init = spec.containers or (), spec.initContainers
        if not init and len(containers) == 1:
            key = bytes(containers[0].resources)
        else:
            key = (
                tuple(bytes(c.resources) for c in containers),
                tuple((bytes(c.resources), c.restartPolicy == "Always") for c in init or ()),
            )
        found = _REQUESTS.get(key)
        if found is None:
            found = pod_requests(self._as_dict())
            if len(_REQUESTS) < _CACHE_LIMIT:
                _REQUESTS[key] = found
        return found

    def returned_at(self, now: datetime) -> datetime | None:
        spec = self.spec
        if spec is None or spec.activeDeadlineSeconds is None:
            return None  # as `pods.returned_at` finds without a deadline
        return returned_at(self._as_dict(), now)

    def _as_dict(self) -> dict[str, Any]:
        """The fields the functions of `pods` read, as the API's JSON has them."""
        meta, spec, status = self.metadata, self.spec, self.status
        obj: dict[str, Any] = {}
        if meta is not None:
            obj["metadata"] = {
                "name": meta.name,
                "namespace": meta.namespace,
                "creationTimestamp": meta.creationTimestamp,
            }
        if spec is not None:
            obj["spec"] = {
                "containers": [c.as_dict() for c in spec.containers or ()],
                "initContainers": [c.as_dict() for c in spec.initContainers or ()],
                "overhead": spec.overhead,
                "resources": spec.resources,
                "activeDeadlineSeconds": spec.activeDeadlineSeconds,
            }
        if status is not None:
            obj["status"] = {"phase": status.phase, "startTime": status.startTime}
        return obj


class _PodList(Struct, gc=False):
    metadata: _ListMeta | None = None
    items: list[Pod] | None = None


_POD_LIST = msgspec.json.Decoder(_PodList)


def pod_page(body: bytes) -> tuple[str, str, Sequence[Pod]] | None:
    """A pod list page: (continue token, resourceVersion, its pods)."""
    try:
        page = _POD_LIST.decode(body)
    except (msgspec.MsgspecError, RecursionError):
        return None
    return (*_page_meta(page.metadata), page.items or [])
