"""A real threaded HTTP/1.1 file server on loopback for `shoal image pull` tests.

Files are registered with `ImageServer.add`; the server answers GET/HEAD with ETag,
Accept-Ranges and single-range 206 responses (honouring If-Range), optional basic auth,
redirects (also to the second loopback name `localhost`) and faults injected on demand
(`drop`, `stall`, `truncate`, `status`, `wrong_checksum`, `corrupt`, `delay`, `raw`); a
`status` fault may carry a reason phrase and a body of the test's choosing (hostile servers).
Every request is recorded in `ImageServer.requests`.

Only loopback is ever used: the server binds 127.0.0.1 and `url()` refuses other hosts.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import hashlib
import os
import re
import socket
import struct
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

CHUNK = 64 * 1024
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
FAULT_KINDS = ("drop", "stall", "truncate", "status", "wrong_checksum", "corrupt", "delay", "raw")
# Faults that shape the body: only a GET for a registered file can consume them.
BODY_FAULTS = ("drop", "stall", "truncate", "corrupt")
CHECKSUM_HEADERS = (
    "X-Checksum-Sha256",
    "X-Checksum-Sha1",
    "X-Checksum-Md5",
    "Digest",
    "Repr-Digest",
)
REALM = "shoal-test"


def checksum_headers(data: bytes, *names: str) -> dict[str, str]:
    """Correct checksum headers for `data`; `names` picks from CHECKSUM_HEADERS (default all).

    Digest is `sha-256=BASE64` (RFC 3230), Repr-Digest is `sha-256=:BASE64:` (RFC 9530).
    """
    sha256 = hashlib.sha256(data)
    values = {
        "X-Checksum-Sha256": sha256.hexdigest(),
        "X-Checksum-Sha1": hashlib.sha1(data).hexdigest(),
        "X-Checksum-Md5": hashlib.md5(data).hexdigest(),
        "Digest": "sha-256=" + base64.b64encode(sha256.digest()).decode(),
        "Repr-Digest": "sha-256=:" + base64.b64encode(sha256.digest()).decode() + ":",
    }
    wanted = names or CHECKSUM_HEADERS
    unknown = set(wanted) - set(values)
    if unknown:
        raise ValueError(f"unknown checksum headers: {sorted(unknown)}")
    return {name: values[name] for name in wanted}


def wrong_sha256(data: bytes) -> str:
    """A deterministic sha256 hex digest that is not the digest of `data`."""
    return hashlib.sha256(b"not:" + data).hexdigest()


@dataclass
class Request:
    """One request as the server saw it (header names lowercased, repeated ones comma-joined)."""

    method: str
    path: str  # without the query string
    target: str  # the raw request target
    host: str | None  # the Host header, e.g. "localhost:41234"
    headers: dict[str, str]
    range: str | None
    connection: int  # same number = same TCP connection (keep-alive reuse)
    status: int | None = None  # the status the server answered with (None until sent)

    @property
    def hostname(self) -> str | None:
        """The Host header without its port."""
        if self.host is None:
            return None
        return urlsplit("//" + self.host).hostname


@dataclass
class Fault:
    """A fault for one path, consumed by up to `times` matching requests (None = forever)."""

    kind: str
    at: int = 0
    times: int | None = 1
    seconds: float = 30.0
    status: int = 503
    headers: dict[str, str] = field(default_factory=dict)
    method: str | None = None
    reason: str | None = None  # `status`: the reason phrase (None: the standard one)
    body: bytes | None = None  # `status`: the body; `raw`: the whole answer, bytes as given
    hits: int = 0

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.hits >= self.times


@dataclass
class Served:
    """A registered file."""

    data: bytes | None
    file: Path | None
    size: int
    etag: str | None
    headers: dict[str, str]
    auth: tuple[str, str] | None
    ranges: bool
    forbidden: bool
    content_type: str
    last_modified: str | None

    def chunks(self, start: int, end: int) -> Iterator[bytes]:
        """Body bytes [start, end) in CHUNK-sized pieces."""
        if self.data is not None:
            view = memoryview(self.data)
            for offset in range(start, end, CHUNK):
                yield bytes(view[offset : min(offset + CHUNK, end)])
            return
        assert self.file is not None
        with self.file.open("rb") as handle:
            handle.seek(start)
            remaining = end - start
            while remaining > 0:
                piece = handle.read(min(CHUNK, remaining))
                if not piece:
                    return
                remaining -= len(piece)
                yield piece


@dataclass
class Redirect:
    to_url: str
    status: int
    only_host: str | None


def _sha1_file(path: Path) -> str:
    digest = hashlib.sha1()
    with path.open("rb") as handle:
        while piece := handle.read(1 << 20):
            digest.update(piece)
    return digest.hexdigest()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # ImageServer.stop joins the handler threads itself
    owner: ImageServer

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self.process_request_thread,
            args=(request, client_address),
            daemon=True,
            name=f"image-server-handler-{client_address[1]}",
        )
        with self.owner._lock:
            self.owner._threads = [t for t in self.owner._threads if t.is_alive()]
            self.owner._threads.append(thread)
        thread.start()

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients hanging up mid-body is expected (faults, timeouts, cancelled downloads).
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class ImageServer:
    """State and control of the loopback server; use through the `http_server` fixture."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, Served] = {}
        self._redirects: dict[str, list[Redirect]] = {}
        self._faults: dict[str, list[Fault]] = {}
        self._threads: list[threading.Thread] = []
        self._connections: set[socket.socket] = set()
        self._connection_ids = 0
        self.requests: list[Request] = []
        self.stop_event = threading.Event()
        self._httpd: _Server | None = None
        self._serve_thread: threading.Thread | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ImageServer:
        handler = type("Handler", (_Handler,), {"owner": self})
        httpd = _Server(("127.0.0.1", 0), handler)
        httpd.owner = self
        self._httpd = httpd
        self._serve_thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="image-server",
        )
        self._serve_thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, end stalled/idle handlers, close sockets, join every thread.

        Raises AssertionError if a thread is still alive after `timeout` seconds.
        """
        if self._httpd is None:
            return
        self.stop_event.set()
        self._httpd.shutdown()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        self._httpd.server_close()
        assert self._serve_thread is not None
        self._serve_thread.join(timeout)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(timeout)
        alive = [t.name for t in [self._serve_thread, *threads] if t.is_alive()]
        self._httpd = None
        if alive:
            raise AssertionError(f"image server threads still alive after stop: {alive}")

    def __enter__(self) -> ImageServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return int(self._httpd.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        """`http://HOST:PORT/path`; HOST must be 127.0.0.1 or localhost (both loopback)."""
        if host not in LOOPBACK_HOSTS:
            raise ValueError(f"only loopback hosts {LOOPBACK_HOSTS} are allowed, not {host!r}")
        return f"http://{host}:{self.port}{_norm(path)}"

    # -- registration ------------------------------------------------------------------------

    def add(
        self,
        path: str,
        data: bytes | os.PathLike[str],
        *,
        etag: str | None = "auto",
        headers: dict[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        ranges: bool = True,
        forbidden: bool = False,
        content_type: str = "application/octet-stream",
        last_modified: str | None = None,
    ) -> str:
        """Serve `data` (bytes, or a file path streamed from disk) at `path`; returns its URL.

        etag: "auto" = strong `"<sha1 hex>"` of the body, None = no ETag, else sent verbatim
        (give the quotes, e.g. '"v1"' or 'W/"v1"'). Re-adding a path replaces the body (and the
        auto ETag) but keeps its pending faults. `ranges=False` ignores Range and If-Range.
        """
        if isinstance(data, bytes | bytearray | memoryview):
            in_memory = bytes(data)
            body: bytes | None = in_memory
            file = None
            size = len(in_memory)
            sha1 = hashlib.sha1(in_memory).hexdigest() if etag == "auto" else ""
        else:
            body = None
            file = Path(data)
            size = file.stat().st_size
            sha1 = _sha1_file(file) if etag == "auto" else ""
        served = Served(
            data=body,
            file=file,
            size=size,
            etag=f'"{sha1}"' if etag == "auto" else etag,
            headers=dict(headers or {}),
            auth=auth,
            ranges=ranges,
            forbidden=forbidden,
            content_type=content_type,
            last_modified=last_modified,
        )
        with self._lock:
            self._files[_norm(path)] = served
        return self.url(path) if self._httpd is not None else _norm(path)

    def remove(self, path: str) -> None:
        with self._lock:
            self._files.pop(_norm(path), None)

    def etag(self, path: str) -> str | None:
        with self._lock:
            return self._files[_norm(path)].etag

    def redirect(
        self, path: str, to_url: str, status: int = 302, *, only_host: str | None = None
    ) -> str:
        """Answer `path` with `status` and `Location: to_url`; returns the URL of `path`.

        only_host: apply only when the Host header names this host (e.g. "127.0.0.1"), so the
        same path can redirect from one loopback name to the other without looping. Several
        redirects per path are allowed (first matching wins); redirects win over files.
        """
        with self._lock:
            self._redirects.setdefault(_norm(path), []).append(
                Redirect(to_url=to_url, status=status, only_host=only_host)
            )
        return self.url(path) if self._httpd is not None else _norm(path)

    def fault(
        self,
        path: str,
        kind: str,
        *,
        at: int = 0,
        times: int | None = 1,
        seconds: float = 30.0,
        status: int = 503,
        headers: dict[str, str] | None = None,
        method: str | None = None,
        reason: str | None = None,
        body: bytes | None = None,
    ) -> Fault:
        """Inject a fault into the next `times` matching requests for `path` (None = forever).

        Faults of a path are consumed in the order added, one per request. `at` counts bytes of
        the response body being sent (not file offsets). Kinds:
          drop           send headers (full Content-Length) and `at` body bytes, then reset (RST)
          stall          send `at` body bytes, wait `seconds` (or until stop), then send the rest
          truncate       send headers (full Content-Length) and `at` body bytes, then close (FIN)
          status         answer `status` (e.g. 500/503/429/404) with `headers` (e.g. Retry-After)
          wrong_checksum serve normally but with a wrong X-Checksum-Sha256 header
          corrupt        serve normally but flip the body byte at offset `at` (same length/ETag)
          delay          wait `seconds` (or until stop) before sending the response headers
          raw            send `body` as the whole answer (status line included), then close
        A `status` fault sends `reason` as its reason phrase and `body` as its body when given.
        drop/stall/truncate/corrupt are only consumed by GETs of a registered file; the others
        by any request past auth. `method` restricts a fault to one method (e.g. "HEAD").
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}; expected one of {FAULT_KINDS}")
        new = Fault(
            kind=kind,
            at=at,
            times=times,
            seconds=seconds,
            status=status,
            headers=dict(headers or {}),
            method=method.upper() if method else None,
            reason=reason,
            body=body,
        )
        with self._lock:
            self._faults.setdefault(_norm(path), []).append(new)
        return new

    def clear_faults(self, path: str | None = None) -> None:
        with self._lock:
            if path is None:
                self._faults.clear()
            else:
                self._faults.pop(_norm(path), None)

    # -- request log -------------------------------------------------------------------------

    def requests_for(self, path: str, method: str | None = None) -> list[Request]:
        """Logged requests for `path` (optionally of one method), oldest first."""
        wanted = _norm(path)
        with self._lock:
            return [
                r
                for r in self.requests
                if r.path == wanted and (method is None or r.method == method.upper())
            ]

    def clear_requests(self) -> None:
        with self._lock:
            self.requests.clear()

    # -- internals used by the handler -------------------------------------------------------

    def _take_fault(self, path: str, method: str, has_file: bool) -> Fault | None:
        with self._lock:
            for candidate in self._faults.get(path, []):
                if candidate.exhausted:
                    continue
                if candidate.method is not None and candidate.method != method:
                    continue
                if candidate.kind in BODY_FAULTS and not (has_file and method == "GET"):
                    continue
                candidate.hits += 1
                return candidate
        return None


def _norm(path: str) -> str:
    path = urlsplit(path).path if "://" in path else path
    return path if path.startswith("/") else "/" + path


_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$", re.IGNORECASE)


def _parse_range(value: str, size: int) -> tuple[int, int] | str | None:
    """(start, end_exclusive), None to ignore the header, or "unsatisfiable"."""
    match = _RANGE.match(value)
    if not match:
        return None  # malformed or multi-range: ignoring Range is allowed (RFC 9110 14.2)
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":  # suffix: bytes=-N
        length = int(last)
        if length == 0:
            return "unsatisfiable"
        return (max(0, size - length), size)
    start = int(first)
    if last and int(last) < start:
        return None
    if start >= size:
        return "unsatisfiable"
    end = size if last == "" else min(int(last) + 1, size)
    return (start, end)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "shoal-image-test/1"
    sys_version = ""
    timeout = 30  # idle keep-alive connections end on their own too
    owner: ImageServer

    def setup(self) -> None:
        super().setup()
        with self.owner._lock:
            self.owner._connections.add(self.connection)
            self.owner._connection_ids += 1
            self.connection_id = self.owner._connection_ids
        if self.owner.stop_event.is_set():  # accepted while stopping: end it now
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        with self.owner._lock:
            self.owner._connections.discard(self.connection)

    def handle(self) -> None:
        with contextlib.suppress(OSError):  # client went away, or stop() shut the socket
            super().handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._respond()

    def do_HEAD(self) -> None:
        self._respond()

    # -- plumbing ------------------------------------------------------------------------------

    def _record(self) -> Request:
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        record = Request(
            method=self.command,
            path=urlsplit(self.path).path or "/",
            target=self.path,
            host=headers.get("host"),
            headers=headers,
            range=headers.get("range"),
            connection=self.connection_id,
        )
        with self.owner._lock:
            self.owner.requests.append(record)
        return record

    def _start(
        self, record: Request, status: int, headers: dict[str, str], reason: str | None = None
    ) -> None:
        record.status = status
        self.send_response(status, reason)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()

    def _simple(
        self,
        record: Request,
        status: int,
        headers: dict[str, str] | None = None,
        reason: str | None = None,
        body: bytes | None = None,
    ) -> None:
        if body is None:
            body = f"{status} {self.responses.get(status, ('',))[0]}\n".encode()
        all_headers = {
            "Content-Type": "text/plain",
            "Content-Length": str(len(body)),
            **(headers or {}),
        }
        self._start(record, status, all_headers, reason)
        if self.command != "HEAD":
            self.wfile.write(body)

    def _wait(self, seconds: float) -> None:
        self.owner.stop_event.wait(seconds)

    def _respond(self) -> None:
        owner = self.owner
        record = self._record()
        path = record.path
        with owner._lock:
            served = owner._files.get(path)
            redirect = next(
                (
                    r
                    for r in owner._redirects.get(path, [])
                    if r.only_host is None or r.only_host == record.hostname
                ),
                None,
            )
        if redirect is None and served is not None:
            if served.forbidden:
                self._simple(record, 403)
                return
            if served.auth is not None and not self._authorized(served.auth):
                self._simple(record, 401, {"WWW-Authenticate": f'Basic realm="{REALM}"'})
                return
        fault = owner._take_fault(path, self.command, redirect is None and served is not None)
        if fault is not None and fault.kind == "delay":
            self._wait(fault.seconds)
            if owner.stop_event.is_set():
                self.close_connection = True
                return
        if fault is not None and fault.kind == "status":
            self._simple(record, fault.status, fault.headers, fault.reason, fault.body)
            return
        if fault is not None and fault.kind == "raw":
            self.wfile.write(fault.body or b"")
            self.wfile.flush()
            self.close_connection = True
            return
        if redirect is not None:
            self._simple(record, redirect.status, {"Location": redirect.to_url})
            return
        if served is None:
            self._simple(record, 404)
            return
        self._serve(record, served, fault)

    def _authorized(self, auth: tuple[str, str]) -> bool:
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            decoded = base64.b64decode(token.strip(), validate=True).decode()
        except ValueError:
            return False
        user, _, password = decoded.partition(":")
        return (user, password) == auth

    def _serve(self, record: Request, served: Served, fault: Fault | None) -> None:
        size = served.size
        headers: dict[str, str] = {"Content-Type": served.content_type}
        if served.ranges:
            headers["Accept-Ranges"] = "bytes"
        if served.etag is not None:
            headers["ETag"] = served.etag
        if served.last_modified is not None:
            headers["Last-Modified"] = served.last_modified
        headers.update(served.headers)
        if fault is not None and fault.kind == "wrong_checksum":
            wrong = wrong_sha256(served.data) if served.data is not None else "0" * 64
            headers = {k: v for k, v in headers.items() if k.lower() != "x-checksum-sha256"}
            headers["X-Checksum-Sha256"] = wrong

        inm = self.headers.get("If-None-Match")
        if inm is not None and served.etag is not None and _etag_listed(served.etag, inm):
            self._start(record, 304, {k: v for k, v in headers.items() if k != "Content-Type"})
            return

        status, start, end = 200, 0, size
        range_header = self.headers.get("Range")
        if served.ranges and range_header is not None and self._if_range_ok(served):
            parsed = _parse_range(range_header, size)
            if parsed == "unsatisfiable":
                self._simple(record, 416, {"Content-Range": f"bytes */{size}"})
                return
            if isinstance(parsed, tuple):
                status, (start, end) = 206, parsed
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
        headers["Content-Length"] = str(end - start)
        self._start(record, status, headers)
        if self.command == "HEAD":
            return
        self._send_body(served, start, end, fault)

    def _if_range_ok(self, served: Served) -> bool:
        """True when Range applies: no If-Range, or it matches the current validator."""
        value = self.headers.get("If-Range")
        if value is None:
            return True
        value = value.strip()
        if value.startswith(('"', "W/")):
            # Strong comparison only: weak tags never match (RFC 9110 13.1.5).
            strong = served.etag is not None and not served.etag.startswith("W/")
            return strong and value == served.etag
        if served.last_modified is None:
            return False
        try:
            return email.utils.parsedate_to_datetime(value) == email.utils.parsedate_to_datetime(
                served.last_modified
            )
        except (TypeError, ValueError):
            return False

    def _send_body(self, served: Served, start: int, end: int, fault: Fault | None) -> None:
        kind = fault.kind if fault is not None else None
        cut = fault.at if fault is not None and kind in ("drop", "stall", "truncate") else None
        sent = 0
        for piece in served.chunks(start, end):
            if kind == "corrupt" and fault is not None and sent <= fault.at < sent + len(piece):
                flipped = bytearray(piece)
                flipped[fault.at - sent] ^= 0xFF
                piece = bytes(flipped)
            if cut is not None and sent + len(piece) >= cut:
                head = piece[: cut - sent]
                if head:
                    self.wfile.write(head)
                    sent += len(head)
                piece = piece[len(head) :]
                self._cut(fault)
                if kind != "stall" or self.owner.stop_event.is_set():
                    return
                cut = None
            if piece:
                self.wfile.write(piece)
                sent += len(piece)
            if self.owner.stop_event.is_set():
                self.close_connection = True
                return
        if cut is not None:  # `at` at or past the end: the fault happens after the last byte
            self._cut(fault)

    def _cut(self, fault: Fault | None) -> None:
        assert fault is not None
        self.wfile.flush()
        if fault.kind == "stall":
            self._wait(fault.seconds)
            if self.owner.stop_event.is_set():
                self.close_connection = True
            return
        self.close_connection = True
        if fault.kind == "drop":
            # Abortive close: SO_LINGER 0 makes close() send RST instead of FIN.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
        else:  # truncate: a clean FIN before the announced length
            self.connection.shutdown(socket.SHUT_WR)


def _etag_listed(etag: str, header: str) -> bool:
    """If-None-Match uses weak comparison."""
    if header.strip() == "*":
        return True
    bare = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == bare for tag in header.split(","))
