"""A real threaded HTTP(S) server on 127.0.0.1 that speaks the Kubernetes API's JSON for
nodes, pods and jobs, for tests and the benchmark.

- list: `limit`/`continue` paging in key order (namespace/name), `labelSelector` (=, ==, !=,
  in, notin, exists, !exists), `fieldSelector` (=, ==, != on metadata.name,
  metadata.namespace, spec.nodeName, status.phase, spec.unschedulable, status.successful;
  others are 400 like the real server), `resourceVersion` and `remainingItemCount` in the
  list metadata. Pages are not a snapshot: objects changed between pages show their new state.
- get, create (POST: 201, uid, resourceVersion, creationTimestamp filled; 409 AlreadyExists;
  422 Invalid for bad names or pods without containers), delete (pods: the object, jobs: a
  Success Status; 404 Status when missing; gracePeriodSeconds from the body or the query;
  with `graceful_pods` a pod with a grace period stays terminating until `finish_deletions`).
- pod logs (`pods/NAME/log`): what `append_log` wrote, `tailLines`; `follow=true` streams
  (chunked) what is appended until the pod is Succeeded or Failed, or deleted.
- auth: bearer tokens and/or client certificates (`client_certs` "optional" or "required"),
  401 Status otherwise; 403 Status for namespaces in `forbidden_namespaces`.
- faults, consumed one request at a time: `status` (429 with Retry-After, 503, ...), `drop`
  (close the connection without answering), `expire` (410 Expired for the next request that
  carries a continue token), `reply` (a hostile server: any status, reason phrase, headers and
  body, before authentication).

Objects are serialised once, when stored; a list answer joins pre-made bytes, and is kept
until the next change, so the same page asked again (the benchmark's runs) is sent as stored
bytes, with no work per request that a real server's watch cache would not skip either.
State is one dict per resource under one lock.
"""

from __future__ import annotations

import base64
import bisect
import itertools
import json
import re
import secrets
import ssl
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.providers.kubernetes.certs import Certs


@dataclass(frozen=True)
class Kind:
    resource: str
    kind: str
    api_version: str
    prefix: str
    namespaced: bool
    fields: tuple[str, ...]


KINDS = {
    "nodes": Kind("nodes", "Node", "v1", "/api/v1", False, ("spec.unschedulable",)),
    "pods": Kind("pods", "Pod", "v1", "/api/v1", True, ("spec.nodeName", "status.phase")),
    "jobs": Kind("jobs", "Job", "batch/v1", "/apis/batch/v1", True, ("status.successful",)),
}
_PATH = re.compile(r"^(/api/v1|/apis/batch/v1)(?:/namespaces/([^/]+))?/([a-z]+)(?:/([^/]+))?/?$")
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LOG = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/log$")


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # names lowercased
    body: bytes = b""


@dataclass
class _Fault:
    kind: str  # status | drop | expire | reply
    status: int = 0
    headers: dict[str, str] = field(default_factory=dict)
    path: str | None = None
    method: str | None = None
    body: bytes = b""  # reply
    reason: str | None = None  # reply: the reason phrase (None: the standard one)


@dataclass
class _Obj:
    raw: bytes
    labels: dict[str, str]
    fields: dict[str, str]


class Reply(Exception):
    """An answer short-circuiting the handler: a Status, or raw bytes."""

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        reason: str | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.headers = headers or {}
        self.reason = reason


def status_body(
    code: int, reason: str, message: str, details: dict[str, Any] | None = None
) -> bytes:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success" if code < 400 else "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = details
    if code < 400:
        del body["message"], body["reason"]
    return json.dumps(body).encode()


def _fail(code: int, reason: str, message: str, **details: Any) -> Reply:
    return Reply(code, status_body(code, reason, message, details or None))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dig(data: dict[str, Any], dotted: str) -> str:
    value: Any = data
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return "false" if dotted == "spec.unschedulable" else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ApiServer:
    """Use as a context manager; `base` is the URL to put in a kubeconfig."""

    def __init__(
        self,
        *,
        certs: Certs | None = None,
        client_certs: str = "none",  # none | optional | required (TLS only)
        tokens: Iterable[str] = (),
        graceful_pods: bool = False,
    ) -> None:
        if client_certs not in ("none", "optional", "required"):
            raise ValueError(client_certs)
        self.tokens = set(tokens)
        self.client_certs = client_certs if certs is not None else "none"
        self.graceful_pods = graceful_pods
        # A link slower than loopback (bytes per second; 0: as fast as loopback goes): the
        # benchmark's model of a real network, or of a server that takes time per page.
        self.link_rate = 0.0
        self.forbidden_namespaces: set[str] = set()
        self.seen: list[Seen] = []
        self.deletions: list[tuple[str, str, str, int | None]] = []  # resource, ns, name, grace
        self._faults: list[_Fault] = []
        self._lock = threading.RLock()
        self._rv = itertools.count(1000)
        self._resource_version = 1000
        self._run = str(uuid.uuid4())[:23]
        self._keys: dict[str, list[str]] = {name: [] for name in KINDS}
        self._objs: dict[str, dict[str, _Obj]] = {name: {} for name in KINDS}
        # list answers by (resource, namespace, query), until the next change of any object
        self._pages: dict[tuple[str, str, str], bytes] = {}
        self._logs: dict[str, bytearray] = {}  # namespace/name -> what the pod wrote
        context: ssl.SSLContext | None = None
        if certs is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(certs.server_cert), str(certs.server_key))
            if self.client_certs != "none":
                context.load_verify_locations(cafile=str(certs.ca))
                context.verify_mode = (
                    ssl.CERT_REQUIRED if self.client_certs == "required" else ssl.CERT_OPTIONAL
                )
        self.scheme = "https" if context is not None else "http"
        self._server = _Server(("127.0.0.1", 0), _make_handler(self), context)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> ApiServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    # -- state -----------------------------------------------------------------------------

    def _next_rv(self) -> str:
        self._resource_version = next(self._rv)
        return str(self._resource_version)

    def add(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store an object as given (metadata filled in when missing); replaces by name."""
        self.add_many(resource, [obj])
        meta = obj["metadata"]
        return self.get(resource, meta.get("namespace", ""), meta["name"]) or {}

    def add_many(self, resource: str, objs: Iterable[dict[str, Any]]) -> None:
        """Bulk load (the benchmark's 100,000 pods): one sort at the end."""
        kind = KINDS[resource]
        now = _now()
        with self._lock:
            keys, store = self._keys[resource], self._objs[resource]
            fresh: list[str] = []
            for obj in objs:
                namespace = obj.get("metadata", {}).get("namespace", "")
                obj = self._complete(kind, obj, namespace, now)
                key = self._key(kind, obj)
                if key not in store:
                    fresh.append(key)
                store[key] = self._pack(kind, obj)
            self._pages.clear()
            if fresh:
                keys.extend(fresh)
                keys.sort()

    def update(self, resource: str, namespace: str, name: str, changes: dict[str, Any]) -> None:
        """Merge `changes` (top-level sections, e.g. {"status": {...}}) into an object."""
        kind = KINDS[resource]
        with self._lock:
            key = f"{namespace}/{name}" if kind.namespaced else name
            obj = json.loads(self._objs[resource][key].raw)
            for section, value in changes.items():
                if isinstance(value, dict) and isinstance(obj.get(section), dict):
                    obj[section].update(value)
                else:
                    obj[section] = value
            obj["metadata"]["resourceVersion"] = self._next_rv()
            self._objs[resource][key] = self._pack(kind, obj)
            self._pages.clear()

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        kind = KINDS[resource]
        key = f"{namespace}/{name}" if kind.namespaced else name
        with self._lock:
            found = self._objs[resource].get(key)
            return json.loads(found.raw) if found is not None else None

    def names(self, resource: str) -> list[str]:
        with self._lock:
            return list(self._keys[resource])

    def append_log(self, namespace: str, name: str, data: bytes) -> None:
        """What the pod's container writes (its log, as the kubelet keeps it)."""
        with self._lock:
            self._logs.setdefault(f"{namespace}/{name}", bytearray()).extend(data)

    def _log(
        self, namespace: str, name: str, query: dict[str, list[str]]
    ) -> bytes | Iterator[bytes]:
        self._get(KINDS["pods"], namespace, name)  # 404 when there is no such pod
        key = f"{namespace}/{name}"
        with self._lock:
            text = bytes(self._logs.get(key, b""))
        tail = (query.get("tailLines") or [""])[0]
        if tail:
            lines = text.splitlines(keepends=True)
            text = b"".join(lines[-int(tail) :]) if int(tail) else b""
        if (query.get("follow") or [""])[0] != "true":
            return text

        def stream(sent: int) -> Iterator[bytes]:
            if text:
                yield text
            while True:
                with self._lock:
                    found = self._objs["pods"].get(key)
                    phase = found.fields.get("status.phase") if found is not None else None
                    ended = phase is None or phase in ("Succeeded", "Failed")
                    data = bytes(self._logs.get(key, b""))
                if len(data) > sent:
                    yield data[sent:]
                    sent = len(data)
                elif ended:
                    return
                else:
                    time.sleep(0.02)

        with self._lock:
            written = len(self._logs.get(key, b""))
        return stream(written)

    def finish_deletions(self) -> None:
        """What the kubelet does after the grace period: remove terminating pods."""
        with self._lock:
            for key, obj in list(self._objs["pods"].items()):
                if b'"deletionTimestamp"' in obj.raw:
                    self._remove("pods", key)

    def _remove(self, resource: str, key: str) -> None:
        keys = self._keys[resource]
        index = bisect.bisect_left(keys, key)
        if index < len(keys) and keys[index] == key:
            del keys[index]
        del self._objs[resource][key]
        self._pages.clear()

    def _complete(
        self, kind: Kind, obj: dict[str, Any], namespace: str, now: str = ""
    ) -> dict[str, Any]:
        # apiVersion and kind first, as the real server writes them.
        rest = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        obj = {"apiVersion": kind.api_version, "kind": kind.kind, **rest}
        meta = dict(obj.get("metadata") or {})
        if kind.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        rv = self._next_rv()
        # A uuid4-shaped uid from the resource version: unique here, and cheap in bulk.
        meta.setdefault("uid", f"{self._run}-{int(rv):012x}")
        meta.setdefault("creationTimestamp", now or _now())
        meta["resourceVersion"] = rv
        obj["metadata"] = meta
        if kind.kind == "Pod":
            status = dict(obj.get("status") or {})
            status.setdefault("phase", "Pending")
            obj["status"] = status
        return obj

    def _key(self, kind: Kind, obj: dict[str, Any]) -> str:
        meta = obj["metadata"]
        return f"{meta['namespace']}/{meta['name']}" if kind.namespaced else str(meta["name"])

    def _pack(self, kind: Kind, obj: dict[str, Any]) -> _Obj:
        labels = dict(obj["metadata"].get("labels") or {})
        fields = {"metadata.name": obj["metadata"]["name"]}
        if kind.namespaced:
            fields["metadata.namespace"] = obj["metadata"]["namespace"]
        for dotted in kind.fields:
            fields[dotted] = _dig(obj, dotted)
        raw = json.dumps(obj, separators=(",", ":")).encode()
        return _Obj(raw, labels, fields)

    # -- faults ----------------------------------------------------------------------------

    def fault(
        self,
        kind: str,
        *,
        status: int = 0,
        retry_after: int | None = None,
        path: str | None = None,
        method: str | None = None,
        times: int = 1,
        headers: dict[str, str] | None = None,
        body: bytes = b"",
        reason: str | None = None,
    ) -> None:
        if kind not in ("status", "drop", "expire", "reply"):
            raise ValueError(f"unknown fault {kind!r}")
        extra = dict(headers or {})
        if retry_after is not None:
            extra["Retry-After"] = str(retry_after)
        with self._lock:
            self._faults.extend(
                _Fault(kind, status, extra, path, method, body, reason) for _ in range(times)
            )

    def _take_fault(self, method: str, path: str, query: dict[str, list[str]]) -> _Fault | None:
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.path is not None and fault.path != path:
                    continue
                if fault.method is not None and fault.method != method:
                    continue
                if fault.kind == "expire" and "continue" not in query:
                    continue
                return self._faults.pop(index)
        return None

    def requests(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [
                s
                for s in self.seen
                if (method is None or s.method == method) and (path is None or s.path == path)
            ]

    # -- the API ---------------------------------------------------------------------------

    def handle(
        self,
        method: str,
        path: str,
        query: dict[str, list[str]],
        headers: dict[str, str],
        body: bytes,
        peer_cert: bool,
    ) -> tuple[int, bytes | Iterator[bytes], dict[str, str], str | None]:
        """(status, body, headers, reason phrase or None for the standard one); a body that
        is an iterator goes out chunked, as it comes."""
        with self._lock:
            self.seen.append(Seen(method, path, query, headers, body))
        fault = self._take_fault(method, path, query)
        if fault is not None and fault.kind == "drop":
            raise ConnectionAbortedError("fault: drop")
        try:
            if fault is not None and fault.kind == "reply":
                raise Reply(fault.status, fault.body, fault.headers, fault.reason)
            self._authenticate(headers, peer_cert)
            if fault is not None and fault.kind == "status":
                reason = {429: "TooManyRequests", 503: "ServiceUnavailable"}.get(
                    fault.status, "InternalError"
                )
                raise Reply(
                    fault.status,
                    status_body(fault.status, reason, f"injected fault {fault.status}"),
                    fault.headers,
                )
            if fault is not None and fault.kind == "expire":
                raise _fail(
                    410,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list "
                    "result. You can start a new list without the continue parameter.",
                )
            code, payload, extra = self._route(method, path, query, body)
            return code, payload, extra, None
        except Reply as reply:
            return reply.status, reply.body, reply.headers, reply.reason

    def _authenticate(self, headers: dict[str, str], peer_cert: bool) -> None:
        if not self.tokens and self.client_certs == "none":
            return  # anonymous access allowed
        if peer_cert:
            return
        auth = headers.get("authorization", "")
        if auth.startswith("Bearer ") and auth[7:] in self.tokens:
            return
        raise _fail(401, "Unauthorized", "Unauthorized")

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: bytes
    ) -> tuple[int, bytes | Iterator[bytes], dict[str, str]]:
        if method == "GET" and path.rstrip("/") in _DISCOVERY:
            return 200, _discovery(path.rstrip("/"), self.port), {}
        log = _LOG.match(path)
        if log is not None and method == "GET":
            return 200, self._log(log.group(1), log.group(2), query), {"Content-Type": "text/plain"}
        match = _PATH.match(path)
        kind = KINDS.get(match.group(3)) if match else None
        if match is None or kind is None or kind.prefix != match.group(1):
            raise _fail(404, "NotFound", "the server could not find the requested resource")
        namespace, name = match.group(2) or "", match.group(4) or ""
        if namespace and not kind.namespaced:
            raise _fail(404, "NotFound", "the server could not find the requested resource")
        verb = {"GET": "get" if name else "list", "POST": "create", "DELETE": "delete"}.get(method)
        if verb is None or (verb == "create" and name) or (verb == "delete" and not name):
            raise _fail(405, "MethodNotAllowed", f"{method} is not supported on {path}")
        if namespace in self.forbidden_namespaces:
            raise _fail(
                403,
                "Forbidden",
                f'{kind.resource} is forbidden: User "system:serviceaccount:default:shoal" '
                f'cannot {verb} resource "{kind.resource}" in API group '
                f'"{kind.prefix.split("/")[2] if kind.prefix.startswith("/apis") else ""}" '
                f'in the namespace "{namespace}"',
                kind=kind.resource,
            )
        if verb == "list":
            asked = (kind.resource, namespace, repr(sorted(query.items())))
            with self._lock:
                page = self._pages.get(asked)
                if page is None:
                    page = self._pages[asked] = self._list(kind, namespace, query)
            return 200, page, {}
        if verb == "get":
            return 200, self._get(kind, namespace, name).raw, {}
        if verb == "create":
            return 201, self._create(kind, namespace, body), {}
        return 200, self._delete(kind, namespace, name, query, body), {}

    def _get(self, kind: Kind, namespace: str, name: str) -> _Obj:
        key = f"{namespace}/{name}" if kind.namespaced else name
        with self._lock:
            found = self._objs[kind.resource].get(key)
        if found is None:
            raise _fail(
                404,
                "NotFound",
                f'{kind.resource} "{name}" not found',
                name=name,
                kind=kind.resource,
            )
        return found

    def _list(self, kind: Kind, namespace: str, query: dict[str, list[str]]) -> bytes:
        limit = int((query.get("limit") or ["0"])[0] or 0)
        token = (query.get("continue") or [""])[0]
        labels = _label_selector((query.get("labelSelector") or [""])[0])
        fields = _field_selector(kind, (query.get("fieldSelector") or [""])[0])
        start_after = ""
        if token:
            try:
                start_after = json.loads(base64.urlsafe_b64decode(token))["start"]
            except (ValueError, KeyError, TypeError):
                raise _fail(400, "BadRequest", "continue key is not valid") from None
        items: list[bytes] = []
        with self._lock:
            keys = self._keys[kind.resource]
            store = self._objs[kind.resource]
            lo, hi = 0, len(keys)
            if namespace:
                lo = bisect.bisect_left(keys, namespace + "/")
                hi = bisect.bisect_left(keys, namespace + "0")  # "0" sorts right after "/"
            if start_after:
                lo = max(lo, bisect.bisect_right(keys, start_after))
            last = ""
            index = lo
            selective = bool(labels or fields)
            if not selective and limit:
                window = keys[lo : min(hi, lo + limit)]
                items = [store[k].raw for k in window]
                index = lo + len(window)
                last = window[-1] if window else ""
            else:
                while index < hi and not (limit and len(items) >= limit):
                    obj = store[keys[index]]
                    if all(test(obj.labels) for test in labels) and all(
                        test(obj.fields) for test in fields
                    ):
                        items.append(obj.raw)
                        last = keys[index]
                    index += 1
            more = limit and index < hi
            if selective and more:
                # Like the real server, a page can end early; the token resumes after the
                # last key scanned.
                last = keys[index - 1]
            meta: dict[str, Any] = {"resourceVersion": str(self._resource_version)}
            if more:
                meta["continue"] = base64.urlsafe_b64encode(
                    json.dumps({"rv": self._resource_version, "start": last}).encode()
                ).decode()
                if not selective:
                    meta["remainingItemCount"] = hi - index
        head = json.dumps(
            {"kind": kind.kind + "List", "apiVersion": kind.api_version, "metadata": meta}
        ).encode()
        return head[:-1] + b',"items":[' + b",".join(items) + b"]}"

    def _create(self, kind: Kind, namespace: str, body: bytes) -> bytes:
        try:
            obj = json.loads(body)
        except ValueError:
            raise _fail(400, "BadRequest", "the body of the request was malformed") from None
        if not isinstance(obj, dict) or obj.get("kind", kind.kind) != kind.kind:
            raise _fail(400, "BadRequest", f"the object is not a {kind.kind}")
        meta = obj.setdefault("metadata", {})
        if kind.namespaced and meta.get("namespace", namespace) != namespace:
            raise _fail(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on "
                "the request",
            )
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name") or ""
        problem = ""
        if not name:
            problem = "metadata.name: Required value: name or generateName is required"
        elif not _NAME.match(name) or len(name) > 253:
            problem = (
                f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must '
                "consist of lower case alphanumeric characters, '-' or '.'"
            )
        elif kind.kind == "Pod" and not (obj.get("spec") or {}).get("containers"):
            problem = "spec.containers: Required value"
        if problem:
            raise _fail(
                422,
                "Invalid",
                f'{kind.kind} "{name}" is invalid: {problem}',
                name=name,
                kind=kind.resource,
            )
        for server_owned in ("uid", "resourceVersion", "creationTimestamp"):
            meta.pop(server_owned, None)
        with self._lock:
            complete = self._complete(kind, obj, namespace)
            key = self._key(kind, complete)
            if key in self._objs[kind.resource]:
                raise _fail(
                    409,
                    "AlreadyExists",
                    f'{kind.resource} "{name}" already exists',
                    name=name,
                    kind=kind.resource,
                )
            packed = self._pack(kind, complete)
            self._objs[kind.resource][key] = packed
            bisect.insort(self._keys[kind.resource], key)
            self._pages.clear()
        return packed.raw

    def _delete(
        self, kind: Kind, namespace: str, name: str, query: dict[str, list[str]], body: bytes
    ) -> bytes:
        options: dict[str, Any] = {}
        if body.strip():
            try:
                options = json.loads(body)
            except ValueError:
                raise _fail(400, "BadRequest", "the body of the request was malformed") from None
        grace: int | None = options.get("gracePeriodSeconds")
        if "gracePeriodSeconds" in query:
            grace = int(query["gracePeriodSeconds"][0])
        key = f"{namespace}/{name}" if kind.namespaced else name
        with self._lock:
            found = self._get(kind, namespace, name)
            self.deletions.append((kind.resource, namespace, name, grace))
            obj = json.loads(found.raw)
            if kind.kind == "Pod":
                period = 30 if grace is None else grace
                meta = obj["metadata"]
                meta.setdefault("deletionTimestamp", _now())
                meta["deletionGracePeriodSeconds"] = period
                if self.graceful_pods and period > 0:
                    meta["resourceVersion"] = self._next_rv()
                    packed = self._pack(kind, obj)
                    self._objs[kind.resource][key] = packed
                    self._pages.clear()
                    return packed.raw
                self._remove(kind.resource, key)
                return json.dumps(obj).encode()
            self._remove(kind.resource, key)
        group = kind.prefix.split("/")[2] if kind.prefix.startswith("/apis") else ""
        details = {
            "name": name,
            "group": group,
            "kind": kind.resource,
            "uid": obj["metadata"]["uid"],
        }
        return status_body(200, "", "", details)


# -- discovery ---------------------------------------------------------------------------------
# What kubectl asks before a list (legacy discovery: a plain application/json answer to /api
# and /apis makes it read /api/v1 and each group's version), and /version, which the Google
# Cloud SDK's kubectl dispatcher asks to pick its binary.

_DISCOVERY = ("/api", "/apis", "/api/v1", "/apis/batch/v1", "/version")
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _resource(kind: Kind, short: str) -> dict[str, Any]:
    return {
        "name": kind.resource,
        "singularName": kind.kind.lower(),
        "namespaced": kind.namespaced,
        "kind": kind.kind,
        "verbs": _VERBS,
        "shortNames": [short],
    }


def _discovery(path: str, port: int) -> bytes:
    body: dict[str, Any]
    if path == "/api":
        body = {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": f"127.0.0.1:{port}"}
            ],
        }
    elif path == "/apis":
        batch = {"groupVersion": "batch/v1", "version": "v1"}
        body = {
            "kind": "APIGroupList",
            "apiVersion": "v1",
            "groups": [{"name": "batch", "versions": [batch], "preferredVersion": batch}],
        }
    elif path == "/version":
        body = {"major": "1", "minor": "31", "gitVersion": "v1.31.2", "platform": "linux/amd64"}
    else:
        group = path.removeprefix("/apis/").removeprefix("/api/")
        kinds = [(KINDS["nodes"], "no"), (KINDS["pods"], "po")] if group == "v1" else []
        kinds += [(KINDS["jobs"], "job")] if group == "batch/v1" else []
        body = {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": group,
            "resources": [_resource(kind, short) for kind, short in kinds],
        }
    return json.dumps(body).encode()


# -- selectors ---------------------------------------------------------------------------------

Test = Any  # Callable[[dict[str, str]], bool]
_SET = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*(!?)([A-Za-z0-9./_-]+)\s*(?:(==|!=|=)\s*([A-Za-z0-9._-]*))?\s*$")


def _split(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p for p in parts if p.strip()]


def _label_selector(text: str) -> list[Test]:
    tests: list[Test] = []
    for part in _split(text):
        found = _SET.match(part)
        if found:
            key, op = found.group(1), found.group(2)
            values = {v.strip() for v in found.group(3).split(",") if v.strip()}
            if op == "in":
                tests.append(lambda d, k=key, vs=values: d.get(k) in vs)
            else:
                tests.append(lambda d, k=key, vs=values: d.get(k) not in vs)
            continue
        found = _EQ.match(part)
        if not found or (found.group(1) and found.group(3)):
            raise _fail(400, "BadRequest", f"unable to parse requirement: {part.strip()!r}")
        negate, key, op, value = found.groups()
        if op is None:
            tests.append((lambda d, k=key: k not in d) if negate else (lambda d, k=key: k in d))
        elif op == "!=":
            tests.append(lambda d, k=key, v=value: d.get(k) != v)
        else:
            tests.append(lambda d, k=key, v=value: d.get(k) == v)
    return tests


def _field_selector(kind: Kind, text: str) -> list[Test]:
    tests: list[Test] = []
    allowed = {"metadata.name", "metadata.namespace", *kind.fields}
    for part in _split(text):
        found = re.match(r"^\s*([A-Za-z.]+)\s*(==|!=|=)\s*([^,]*?)\s*$", part)
        if not found:
            raise _fail(400, "BadRequest", f"invalid selector: {part.strip()!r}")
        name, op, value = found.groups()
        if name not in allowed:
            raise _fail(
                400,
                "BadRequest",
                f'Unable to find "/v1, Resource={kind.resource}" that match '
                f'label selector "", field selector "{text}": field label not supported: {name}',
            )
        if op == "!=":
            tests.append(lambda d, k=name, v=value: d.get(k, "") != v)
        else:
            tests.append(lambda d, k=name, v=value: d.get(k, "") == v)
    return tests


# -- HTTP ------------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    def __init__(self, address: Any, handler: Any, context: ssl.SSLContext | None) -> None:
        self.context = context
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        # The TLS handshake runs here, in the connection's thread: a client that fails it
        # (wrong CA, no client certificate) must not stall the accept loop.
        if self.context is None:
            super().finish_request(request, client_address)
            return
        try:
            wrapped = self.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        try:
            super().finish_request(wrapped, client_address)
        finally:
            wrapped.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, TimeoutError)):
            super().handle_error(request, client_address)


def _make_handler(api: ApiServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            parts = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            length = int(headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            peer = False
            if isinstance(self.connection, ssl.SSLSocket):
                peer = bool(self.connection.getpeercert())
            try:
                code, payload, extra, reason = api.handle(
                    self.command,
                    parts.path,
                    parse_qs(parts.query, keep_blank_values=True),
                    headers,
                    body,
                    peer,
                )
            except ConnectionAbortedError:
                self.close_connection = True
                return
            extra = dict(extra)
            self.send_response(code, reason)
            self.send_header("Content-Type", extra.pop("Content-Type", "application/json"))
            if isinstance(payload, bytes):
                self.send_header("Content-Length", str(len(payload)))
            else:
                self.send_header("Transfer-Encoding", "chunked")
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            if isinstance(payload, bytes):
                _send(self.wfile, payload, api.link_rate)
                return
            for chunk in payload:
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

        do_GET = _serve
        do_POST = _serve
        do_DELETE = _serve

    return _Handler


def _send(out: Any, payload: bytes, rate: float) -> None:
    """The payload, at `rate` bytes per second when there is one."""
    if not rate:
        out.write(payload)
        return
    start, step = time.perf_counter(), 1 << 18
    view = memoryview(payload)
    for at in range(0, len(payload), step):
        out.write(view[at : at + step])
        ahead = start + (at + step) / rate - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)


# -- object builders ---------------------------------------------------------------------------


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    allocatable: dict[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
) -> dict[str, Any]:
    resources = allocatable or {"cpu": "4", "memory": "16Gi", "pods": "110"}
    spec: dict[str, Any] = {"unschedulable": True} if unschedulable else {}
    return {
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    namespace: str = "default",
    *,
    node_name: str = "",
    phase: str = "Running",
    requests: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": dict(requests or {})}}
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"phase": phase},
    }
