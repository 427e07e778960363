"""HTTP/1.1 as the engine client speaks it: one request per connection (`Connection: close`),
on a unix socket or plain TCP, its answer read as it arrives (Content-Length, chunked, or up
to the close).

This API needs no more: no TLS, redirects, proxies, cookies, compression or keep-alive.
`http.client` would do the same, but it imports `email` (its header parser) and `ssl` with it:
about 6 ms of every shoal process that speaks to the engine (an `alloc`, `status` and `free`
are three), more than any of the engine's answers but its container start and stop.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable, Mapping

_LINE_MAX = 1 << 16  # a status line, a header or a chunk size longer than this is broken
_HEADERS_MAX = 200
_BODILESS = (204, 304)


class ProtocolError(Exception):
    """An answer that is not HTTP/1.1 as it should be (the engine got something wrong)."""


def connect(address: str, timeout: float) -> socket.socket:
    """A connection to `unix:///path` or `tcp://host:port` (`[v6]:port`); OSError if none."""
    if address.startswith("unix://"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(address.removeprefix("unix://"))
        except BaseException:
            sock.close()
            raise
        return sock
    host, _, port = address.split("://", 1)[1].rpartition(":")
    return socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)


def send(
    sock: socket.socket,
    method: str,
    target: str,
    headers: Mapping[str, str],
    content: bytes | Iterable[bytes] | None,
) -> None:
    """The request; an iterable `content` goes chunked, as it is produced."""
    lines = [f"{method} {target} HTTP/1.1", "Host: engine", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if content is None:
        body = b""
        if method in ("POST", "PUT", "PATCH"):
            lines.append("Content-Length: 0")
    elif isinstance(content, bytes):
        body = content
        lines.append(f"Content-Length: {len(content)}")
    else:
        body = b""
        lines.append("Transfer-Encoding: chunked")
    sock.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + body)
    if content is not None and not isinstance(content, bytes):
        for chunk in content:
            if chunk:
                sock.sendall(b"%X\r\n%b\r\n" % (len(chunk), chunk))
        sock.sendall(b"0\r\n\r\n")


class Response:
    """An answer as it arrives on `sock`: `status`, `reason`, `headers` (names in lower case),
    and its body through `read`; `close` closes the connection."""

    def __init__(self, sock: socket.socket, method: str) -> None:
        self._sock = sock
        self._file = sock.makefile("rb")
        self.status, self.reason = self._status_line()
        self.headers = self._headers()
        while 100 <= self.status < 200:  # 100 Continue and the like: the answer follows
            self.status, self.reason = self._status_line()
            self.headers = self._headers()
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._left: int | None = 0  # bytes left (of the chunk); None: up to the close
        self._done = method == "HEAD" or self.status in _BODILESS
        if not self._done and not self._chunked:
            length = self.headers.get("content-length")
            if length is None:
                self._left = None
            elif length.strip().isdigit():
                self._left = int(length)
            else:
                raise ProtocolError(f"Content-Length {length[:40]!r}")

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def _line(self) -> bytes:
        line = self._file.readline(_LINE_MAX + 1)
        if len(line) > _LINE_MAX:
            raise ProtocolError("a line longer than 64 KiB")
        return line

    def _status_line(self) -> tuple[int, str]:
        line = self._line()
        if not line:
            raise ConnectionResetError("the engine closed the connection without an answer")
        version, _, rest = line.decode("latin-1").strip().partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/") or not (len(code) == 3 and code.isdigit()):
            raise ProtocolError(f"not an HTTP status line: {line[:60]!r}")
        return int(code), reason

    def _headers(self) -> dict[str, str]:
        found: dict[str, str] = {}
        for _ in range(_HEADERS_MAX):
            line = self._line()
            if line in (b"\r\n", b"\n"):
                return found
            if not line:
                raise ProtocolError("the answer ended in its headers")
            name, colon, value = line.decode("latin-1").partition(":")
            if not colon:
                raise ProtocolError(f"not a header: {line[:60]!r}")
            found[name.strip().lower()] = value.strip()
        raise ProtocolError(f"more than {_HEADERS_MAX} headers")

    def read(self, size: int = 1 << 16) -> bytes:
        """Up to `size` bytes of the body; b"" at its end."""
        if self._done:
            return b""
        if self._left is None:  # up to the close
            data = self._file.read1(size)
            self._done = not data
            return data
        if self._chunked and self._left == 0:
            head = self._line().split(b";", 1)[0].strip()
            try:
                self._left = int(head, 16)
            except ValueError:
                raise ProtocolError(f"not a chunk size: {head[:20]!r}") from None
            if self._left == 0:  # the last chunk, then trailers up to a blank line
                while self._line() not in (b"\r\n", b"\n", b""):
                    pass
                self._done = True
                return b""
        if self._left == 0:
            self._done = True
            return b""
        data = self._file.read(min(size, self._left))
        if not data:
            raise ProtocolError("the answer ended before its length")
        self._left -= len(data)
        if self._chunked and self._left == 0:
            self._line()  # the CRLF after the chunk
        return data

    def read_all(self, limit: int) -> bytes:
        """The whole body, or its first `limit` + 1 bytes when it is longer (a caller's cue)."""
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := self.read()):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)[: limit + 1]
