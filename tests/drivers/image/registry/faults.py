"""A fault-injecting HTTP proxy on loopback in front of a real registry, and the "storage"
server its blob redirects point to: the faults a pull must survive or refuse, each a rule.

    proxy = FaultProxy(registry.host).start()        # plain http on 127.0.0.1:PORT
    ref = proxy.ref("app/sample", "1.0")             # "127.0.0.1:PORT/app/sample:1.0"
    proxy.add(Cut(layer_digest, after=4096))         # then pull `ref` and read proxy.seen

Requests are forwarded as they come (Authorization included: the registry's own auth, basic
or token, works through the proxy; a token realm on another host is not proxied) and every
one is recorded (`seen`: method, path, headers, status, body bytes sent, the rule that
acted). Rules act on blob GETs of one digest (or of any blob when `digest` is None), each
`times` times (None: every time):

- `Corrupt`: one byte of the body flipped: the blob's bytes no longer hash to its digest;
- `Cut`: the connection closed after `after` body bytes (the client sees a body cut short);
- `Stall`: `after` body bytes, then nothing until `release()` (or a timeout), then closed:
  a pull held mid-blob (`reached` says when), to be killed;
- `Throttle`: HTTP 429 with `Retry-After`;
- `Unauthorized`: HTTP 401 with the registry's own challenge (a token refused mid-pull);
- `Redirect`: HTTP 307 to the `Storage` server (another origin: another port), which serves
  the bytes the registry gave the proxy and records the headers it receives;
- `Delay`: `seconds` of silence before the request is forwarded (a slow registry);
- `Hold`: the request held until `release()`, then forwarded (one pull kept busy while
  others start);
- `LieSize`: every manifest naming the digest rewritten to declare `delta` more bytes for it
  (its Docker-Content-Digest recomputed, as a registry serving that manifest would send).

Loopback only; imported by tests, nothing here imports pytest.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import json
import re
import secrets
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar
from urllib.parse import urlsplit

HOST = "127.0.0.1"
CHUNK = 16 << 10  # small: a cut or a stall lands mid-blob even in a blob of a few KiB
UPSTREAM_TIMEOUT = 30.0
STALL_TIMEOUT = 60.0
BLOB_PATH = re.compile(r"^/v2/(?P<name>.+)/blobs/(?P<digest>[a-z0-9]+:[0-9a-f]+)$")
MANIFEST_PATH = re.compile(r"^/v2/(?P<name>.+)/manifests/(?P<ref>[^/]+)$")
# Per connection, not per message: never passed on (the proxy frames each answer itself).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
    }
)


@dataclass
class Seen:
    """One request as a server here saw it, and what it answered."""

    method: str
    path: str  # with the query string
    headers: dict[str, str]  # names lowercased
    at: float  # time.monotonic() on arrival
    status: int = 0
    sent: int = 0  # body bytes written back
    fault: str = ""  # the rule that acted on it
    serves: str = ""  # the storage's: the blob (digest) it served

    @property
    def route(self) -> str:
        return urlsplit(self.path).path

    @property
    def digest(self) -> str | None:
        """The blob a blob request names."""
        found = BLOB_PATH.match(self.route)
        return found["digest"] if found else None

    @property
    def is_manifest(self) -> bool:
        return MANIFEST_PATH.match(self.route) is not None

    @property
    def range_start(self) -> int | None:
        """The first byte a `Range: bytes=N-` asks for."""
        found = re.fullmatch(r"\s*bytes=(\d+)-\d*\s*", self.headers.get("range", ""))
        return int(found[1]) if found else None


# -- rules ------------------------------------------------------------------------------------


class Rule:
    """A fault for blob GETs of `digest` (any blob when None), `times` times (None: always)."""

    def __init__(self, digest: str | None = None, *, times: int | None = 1) -> None:
        self.digest = digest
        self.times = times
        self.used = 0
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return type(self).__name__

    def matches(self, seen: Seen) -> bool:
        if seen.method != "GET" or seen.digest is None:
            return False
        return self.digest is None or seen.digest == self.digest

    def take(self, seen: Seen) -> bool:
        """Whether the rule acts on this request (and counts it as one of its `times`)."""
        if not self.matches(seen):
            return False
        with self._lock:
            if self.times is not None and self.used >= self.times:
                return False
            self.used += 1
            return True


class Corrupt(Rule):
    """One byte flipped (at `at`, default the middle of the blob): the size stays, the
    digest lies."""

    def __init__(self, digest: str, *, at: int | None = None, times: int | None = None):
        super().__init__(digest, times=times)
        self.at = at


class Cut(Rule):
    """The connection closed after `after` body bytes of the answer."""

    def __init__(self, digest: str | None, *, after: int, times: int | None = 1) -> None:
        super().__init__(digest, times=times)
        self.after = after


class Stall(Rule):
    """`after` body bytes, then silence until `release()` (or STALL_TIMEOUT), then closed;
    `reached` is set once the bytes are out."""

    def __init__(self, digest: str | None, *, after: int, times: int | None = 1) -> None:
        super().__init__(digest, times=times)
        self.after = after
        self.reached = threading.Event()
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()


class Throttle(Rule):
    """HTTP 429 Too Many Requests with `Retry-After: retry_after`."""

    def __init__(
        self, digest: str | None = None, *, retry_after: int = 1, times: int | None = 1
    ) -> None:
        super().__init__(digest, times=times)
        self.retry_after = retry_after


class Unauthorized(Rule):
    """HTTP 401 with the registry's own WWW-Authenticate challenge."""


class Redirect(Rule):
    """HTTP 307 to the proxy's `Storage`, which then serves the registry's bytes."""

    def __init__(self, digest: str | None = None, *, times: int | None = None) -> None:
        super().__init__(digest, times=times)


class Delay(Rule):
    """`seconds` before the request goes on (to the registry, or to the next rule)."""

    def __init__(self, digest: str | None, *, seconds: float, times: int | None = 1) -> None:
        super().__init__(digest, times=times)
        self.seconds = seconds


class Hold(Rule):
    """The request held until `release()` (or STALL_TIMEOUT), then forwarded whole;
    `arrived` is set when it comes."""

    def __init__(self, digest: str | None, *, times: int | None = 1) -> None:
        super().__init__(digest, times=times)
        self.arrived = threading.Event()
        self.released = threading.Event()

    def release(self) -> None:
        self.released.set()


class LieSize(Rule):
    """Manifests naming `digest` say it has `delta` more bytes (negative: fewer)."""

    def __init__(self, digest: str, *, delta: int, times: int | None = None) -> None:
        super().__init__(digest, times=times)
        self.delta = delta

    def matches(self, seen: Seen) -> bool:
        return seen.method == "GET" and seen.is_manifest

    def rewrite(self, raw: bytes) -> bytes | None:
        """The manifest with the lie told, or None when it does not name the digest."""
        try:
            document = json.loads(raw)
        except ValueError:
            return None
        told = False
        for described in [document.get("config"), *(document.get("layers") or [])]:
            if isinstance(described, dict) and described.get("digest") == self.digest:
                described["size"] = int(described["size"]) + self.delta
                told = True
        return json.dumps(document, separators=(",", ":")).encode() if told else None


R = TypeVar("R", bound=Rule)


# -- the storage a redirect points to --------------------------------------------------------


class Storage:
    """Another origin (its own port) that serves what the proxy put there, with Range, and
    records every request's headers (`seen`): where a registry sends blob GETs off to."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[str, bytes]] = {}  # key -> (digest, bytes)
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    def start(self) -> Storage:
        self._server = _serve(_storage_handler(self))
        self.port = self._server.server_address[1]
        return self

    def stop(self) -> None:
        _shut(self._server)
        self._server = None

    def put(self, digest: str, data: bytes) -> str:
        """A URL that serves `data` (its path is a secret of its own, as signed URLs are)."""
        key = secrets.token_hex(12)
        with self._lock:
            self.objects[key] = (digest, data)
        return f"http://{HOST}:{self.port}/objects/{key}?expires=3600"

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)


def _storage_handler(owner: Storage) -> type[BaseHTTPRequestHandler]:
    class Handler(_Quiet):
        def do_GET(self) -> None:
            seen = _seen(self)
            owner._record(seen)
            found = owner.objects.get(seen.route.rpartition("/")[2])
            if found is None:
                _answer(self, seen, 404, b'{"error":"no such object"}')
                return
            seen.serves, data = found
            start = seen.range_start or 0
            if start >= len(data) and data:
                _answer(self, seen, 416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            headers = {"Content-Type": "application/octet-stream", "Accept-Ranges": "bytes"}
            if seen.range_start is not None:
                headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
                _answer(self, seen, 206, data[start:], headers)
            else:
                _answer(self, seen, 200, data, headers)

    return Handler


# -- the proxy ----------------------------------------------------------------------------------


class FaultProxy:
    """A started proxy (`start()`) for the registry at `upstream` ("127.0.0.1:PORT", plain
    http); `stop()` releases every stall and closes it."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self.rules: list[Rule] = []
        self.seen: list[Seen] = []
        self.storage = Storage()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

    def start(self) -> FaultProxy:
        self.storage.start()
        self._server = _serve(_proxy_handler(self))
        self.port = self._server.server_address[1]
        return self

    def stop(self) -> None:
        for rule in self.rules:
            if isinstance(rule, (Stall, Hold)):
                rule.release()
        _shut(self._server)
        self._server = None
        self.storage.stop()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def host(self) -> str:
        return f"{HOST}:{self.port}"

    def ref(self, name: str, tag: str = "latest") -> str:
        return f"{self.host}/{name}:{tag}"

    def add(self, rule: R) -> R:
        """Rules act in the order added (a Delay first, then what answers or breaks)."""
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """No more faults (stalls released); what was seen is kept."""
        with self._lock:
            for rule in self.rules:
                if isinstance(rule, (Stall, Hold)):
                    rule.release()
            self.rules.clear()

    # -- what was seen ------------------------------------------------------------------------

    def requests(self) -> list[Seen]:
        with self._lock:
            return list(self.seen)

    def blob_gets(self, digest: str | None = None) -> list[Seen]:
        """Blob GETs (of `digest`), in arrival order."""
        return [
            s
            for s in self.requests()
            if s.method == "GET" and s.digest is not None and digest in (None, s.digest)
        ]

    def manifest_gets(self) -> list[Seen]:
        return [s for s in self.requests() if s.method == "GET" and s.is_manifest]

    def bytes_sent(self, digest: str) -> int:
        """Body bytes of `digest` that left here, from the registry or from the storage."""
        own = sum(s.sent for s in self.blob_gets(digest) if s.status in (200, 206))
        return own + sum(s.sent for s in self.storage.seen if s.serves == digest)

    # -- serving ------------------------------------------------------------------------------

    def _record(self, seen: Seen) -> None:
        with self._lock:
            self.seen.append(seen)

    def _acting(self, seen: Seen) -> list[Rule]:
        with self._lock:
            rules = list(self.rules)
        return [rule for rule in rules if rule.take(seen)]

    def _upstream(
        self, method: str, path: str, headers: Iterable[tuple[str, str]], body: bytes
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=UPSTREAM_TIMEOUT)
        sent = {k: v for k, v in headers if k.lower() not in HOP_BY_HOP}
        conn.request(method, path, body=body or None, headers=sent)
        return conn, conn.getresponse()

    def challenge(self) -> str:
        """The registry's WWW-Authenticate for an anonymous /v2/ (empty: it has no auth)."""
        conn, response = self._upstream("GET", "/v2/", [], b"")
        try:
            response.read()
            return response.getheader("WWW-Authenticate") or ""
        finally:
            conn.close()


def _proxy_handler(owner: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(_Quiet):
        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            seen = _seen(self)
            owner._record(seen)
            body_rules: list[Rule] = []
            for rule in owner._acting(seen):
                if isinstance(rule, Delay):
                    time.sleep(rule.seconds)
                elif isinstance(rule, Hold):
                    seen.fault = rule.name
                    rule.arrived.set()
                    rule.released.wait(STALL_TIMEOUT)
                elif isinstance(rule, Throttle):
                    seen.fault = rule.name
                    said = b'{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}'
                    _answer(self, seen, 429, said, {"Retry-After": str(rule.retry_after)})
                    return
                elif isinstance(rule, Unauthorized):
                    seen.fault = rule.name
                    challenge = owner.challenge()
                    said = b'{"errors":[{"code":"UNAUTHORIZED","message":"token expired"}]}'
                    _answer(self, seen, 401, said, {"WWW-Authenticate": challenge})
                    return
                elif isinstance(rule, Redirect):
                    if self._redirect(seen, body):
                        return
                else:
                    body_rules.append(rule)
            self._forward(seen, body, body_rules)

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def _redirect(self, seen: Seen, body: bytes) -> bool:
            """307 to the storage with the registry's bytes; False when the registry did not
            answer 200 (its answer, a 401 say, is then passed on as it is)."""
            # The whole blob goes to the storage; a Range is for the storage to answer.
            asked = [(k, v) for k, v in self.headers.items() if k.lower() != "range"]
            conn, response = owner._upstream("GET", self.path, asked, body)
            try:
                if response.status != 200:
                    return False
                data = response.read()
            finally:
                conn.close()
            location = owner.storage.put(seen.digest or "", data)
            seen.fault = "Redirect"
            _answer(self, seen, 307, b"", {"Location": location})
            return True

        def _forward(self, seen: Seen, body: bytes, rules: list[Rule]) -> None:
            try:
                conn, response = owner._upstream(
                    self.command, self.path, self.headers.items(), body
                )
            except OSError as exc:
                _answer(self, seen, 502, f'{{"error":"{type(exc).__name__}"}}'.encode())
                return
            try:
                headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP]
                declared = response.getheader("Content-Length")
                lie = next((r for r in rules if isinstance(r, LieSize)), None)
                if lie is not None or declared is None:
                    data = response.read()
                    told = lie.rewrite(data) if lie is not None else None
                    if told is not None:
                        seen.fault = lie.name if lie is not None else ""
                        data = told
                        digest = "sha256:" + hashlib.sha256(data).hexdigest()
                        headers = [
                            (k, digest if k.lower() == "docker-content-digest" else v)
                            for k, v in headers
                        ]
                    self._head(seen, response, headers, len(data))
                    if self.command != "HEAD":
                        self._write(seen, data)
                    return
                self._head(seen, response, headers, int(declared))
                if self.command == "HEAD":
                    return
                self._body(seen, response, rules)
            finally:
                conn.close()

        def _head(
            self,
            seen: Seen,
            response: http.client.HTTPResponse,
            headers: list[tuple[str, str]],
            length: int,
        ) -> None:
            seen.status = response.status
            self.send_response_only(response.status, response.reason)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(length))
            self.end_headers()

        def _body(self, seen: Seen, response: http.client.HTTPResponse, rules: list[Rule]) -> None:
            corrupt = next((r for r in rules if isinstance(r, Corrupt)), None)
            stop = next((r for r in rules if isinstance(r, (Cut, Stall))), None)
            # The blob byte the body starts at (a 206 answers from its Range).
            position = _range_start(response.getheader("Content-Range") or "")
            flip: int | None = None
            if corrupt is not None and response.status in (200, 206):
                whole = _range_total(response.getheader("Content-Range") or "")
                size = (
                    whole if whole is not None else int(response.getheader("Content-Length") or 0)
                )
                flip = corrupt.at if corrupt.at is not None else size // 2
            while True:
                chunk = response.read(CHUNK)
                if not chunk:
                    return
                if flip is not None and position <= flip < position + len(chunk):
                    seen.fault = "Corrupt"
                    at = flip - position
                    chunk = chunk[:at] + bytes([chunk[at] ^ 0xFF]) + chunk[at + 1 :]
                if stop is not None and seen.sent + len(chunk) >= stop.after:
                    seen.fault = stop.name
                    if not self._write(seen, chunk[: stop.after - seen.sent]):
                        return
                    if isinstance(stop, Stall):
                        stop.reached.set()
                        stop.released.wait(STALL_TIMEOUT)
                    self._hang_up()
                    return
                if not self._write(seen, chunk):
                    return
                position += len(chunk)

        def _write(self, seen: Seen, data: bytes) -> bool:
            """Whether the client took it (a killed one does not)."""
            try:
                self.wfile.write(data)
            except OSError:
                self.close_connection = True
                return False
            seen.sent += len(data)
            return True

        def _hang_up(self) -> None:
            """Close after what was sent: the client reads it all, then the end of the
            connection, before its body is complete."""
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_WR)

    return Handler


# -- plumbing -----------------------------------------------------------------------------------


class _Quiet(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the tests read `seen`; stderr noise would only hide failures


def _seen(handler: BaseHTTPRequestHandler) -> Seen:
    headers = {k.lower(): v for k, v in handler.headers.items()}
    return Seen(handler.command, handler.path, headers, time.monotonic())


def _answer(
    handler: BaseHTTPRequestHandler,
    seen: Seen,
    status: int,
    body: bytes,
    headers: dict[str, str] | None = None,
) -> None:
    seen.status = status
    handler.send_response_only(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    if body and "Content-Type" not in (headers or {}):
        handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    if handler.command == "HEAD":
        return
    with contextlib.suppress(OSError):
        handler.wfile.write(body)
        seen.sent += len(body)


def _range_start(content_range: str) -> int:
    found = re.match(r"\s*bytes\s+(\d+)-", content_range)
    return int(found[1]) if found else 0


def _range_total(content_range: str) -> int | None:
    found = re.search(r"/(\d+)\s*$", content_range)
    return int(found[1]) if found else None


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((HOST, 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, name="fault-proxy", kwargs={"poll_interval": 0.05}
    )
    thread.daemon = True
    thread.start()
    return server


def _shut(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


__all__ = [
    "Corrupt",
    "Cut",
    "Delay",
    "FaultProxy",
    "Hold",
    "LieSize",
    "Redirect",
    "Rule",
    "Seen",
    "Stall",
    "Storage",
    "Throttle",
    "Unauthorized",
]
