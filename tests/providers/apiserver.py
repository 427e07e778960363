"""A real threaded HTTP/1.1 API server on 127.0.0.1 for the cloud catalog tests.

Routes map a path to a handler `(query, headers) -> Reply`, or to static bytes served with
ETag, Content-Length and single-range 206 answers (If-Range honoured), as the providers'
pricing hosts do. Faults are queued per path and consumed one request at a time:
`status` (e.g. 429 with Retry-After, 503), `drop` (close the connection after N body bytes),
`truncate` (announce the full length, send N bytes, close) and `garbage` (a malformed body).
A Reply may carry its own reason phrase (a hostile server's). Every request is recorded. The
server binds loopback only.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    reason: str | None = None  # None: the standard reason phrase

    @classmethod
    def json(cls, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
        return cls(
            status,
            json.dumps(value).encode(),
            {"Content-Type": "application/json", **(headers or {})},
        )


@dataclass
class Seen:
    """One request as the server saw it (header names lowercased)."""

    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]


Handler = Callable[[dict[str, list[str]], dict[str, str]], Reply]


@dataclass
class _Fault:
    kind: str  # status | drop | truncate | garbage
    status: int = 0
    after: int = 0
    headers: dict[str, str] = field(default_factory=dict)


class ApiServer:
    def __init__(self) -> None:
        self.routes: dict[str, Handler | bytes] = {}
        self.faults: dict[str, list[_Fault]] = {}
        self.seen: list[Seen] = []
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), _make_handler(self))
        self._server.daemon_threads = True
        # A short poll: shutdown() waits for it, and tests start and stop many servers.
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
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def route(self, path: str, target: Handler | bytes) -> None:
        self.routes[path] = target

    def fault(
        self,
        path: str,
        kind: str,
        *,
        status: int = 0,
        after: int = 0,
        times: int = 1,
        headers: dict[str, str] | None = None,
    ) -> None:
        if kind not in ("status", "drop", "truncate", "garbage"):
            raise ValueError(f"unknown fault {kind!r}")
        with self._lock:
            queue = self.faults.setdefault(path, [])
            queue.extend(_Fault(kind, status, after, dict(headers or {})) for _ in range(times))

    def reset(self) -> None:
        """Forget routes, faults and requests: one server can serve a module's tests."""
        with self._lock:
            self.routes.clear()
            self.faults.clear()
            self.seen.clear()

    def requests_to(self, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.path == path]

    def _take(self, path: str) -> _Fault | None:
        with self._lock:
            queue = self.faults.get(path)
            return queue.pop(0) if queue else None


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients that hang up mid-body (the faults these tests inject) are expected.
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


def _make_handler(server: ApiServer) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            headers = {k.lower(): v for k, v in self.headers.items()}
            query = parse_qs(parts.query, keep_blank_values=True)
            with server._lock:
                server.seen.append(Seen(parts.path, query, headers))
            fault = server._take(parts.path)
            if fault is not None and fault.kind == "status":
                self._send(Reply(fault.status, b"{}", fault.headers))
                return
            target = server.routes.get(parts.path)
            if target is None:
                self._send(Reply.json({"error": {"message": "not found"}}, 404))
                return
            if isinstance(target, bytes):
                reply = _static(target, headers)
            else:
                reply = target(query, headers)
            if fault is not None and fault.kind == "garbage":
                reply = Reply(200, reply.body[: len(reply.body) // 2], reply.headers)
            self._send(reply, fault)

        def _send(self, reply: Reply, fault: _Fault | None = None) -> None:
            self.send_response(reply.status, reply.reason)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(reply.body)))
            if fault is not None and fault.kind in ("drop", "truncate"):
                self.send_header("Connection", "close")
            self.end_headers()
            body = reply.body
            if fault is not None and fault.kind in ("drop", "truncate"):
                self.wfile.write(body[: fault.after])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body)

    return _Handler


def _static(data: bytes, headers: dict[str, str]) -> Reply:
    etag = '"' + hashlib.sha1(data).hexdigest()[:16] + '"'
    base = {"ETag": etag, "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream"}
    wanted = headers.get("range", "")
    match = re.fullmatch(r"bytes=(\d+)-", wanted)
    if match and headers.get("if-range", etag) == etag:
        start = int(match.group(1))
        if start >= len(data):
            return Reply(416, b"", {"Content-Range": f"bytes */{len(data)}"})
        base["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        return Reply(206, data[start:], base)
    return Reply(200, data, base)
