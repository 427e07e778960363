"""HTTP/1.1 as the engine client speaks it: one request per connection (`Connection: close`),
on a unix socket or plain TCP, its answer read as it arrives (Content-Length, chunked, or up
to the close).

This API needs no more: no TLS, redirects, proxies, cookies, compression or keep-alive.
`http.client` would do the same, but it imports `email` (its header parser) and `ssl` with it:
about 6 ms of every shoal process that speaks to the engine (an `alloc`, `status` and `free`
are three), more than any of the engine's answers but its container start and stop. For the
same reason a unix socket is the C module's (`_socket`) and its answer is read through a
buffer of our own: the `socket` module turns its constants into enums as it is imported, ~3 ms
of every `status` and `free` (a tcp:// engine, rarer, imports it for `create_connection`).
"""

from __future__ import annotations

import _socket
import io
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

_LINE_MAX = 1 << 16  # a status line or a header longer than this is broken
_HEADERS_MAX = 200
_HEAD_MAX = 1 << 20  # all the lines before the body (interim answers too), in bytes
_INTERIM_MAX = 5  # 1xx answers before the real one (as many as Go's net/http takes)
# A chunk's size line: at most 16 hex digits (a 64-bit size, as Go's net/http reads it), and
# with its extensions (ignored) at most 4 KiB. Framing that outweighs the data it frames (tiny
# chunks under long extensions) may exceed it by 16 KiB at most, as in Go's net/http: else an
# engine could keep us reading without end while the data stays under the caller's cap.
_SIZE_LINE_MAX = 4096
_SIZE_DIGITS_MAX = 16
# A Content-Length: a 64-bit size at most (int() refuses more than 4,300 digits outright).
_LENGTH_DIGITS_MAX = 19
_HEX_DIGITS = frozenset(b"0123456789abcdefABCDEF")
_OVERHEAD_MAX = 16 << 10
_BODILESS = (204, 304)


class ProtocolError(Exception):
    """An answer that is not HTTP/1.1 as it should be (the engine got something wrong)."""


class Cut(ProtocolError):
    """A body that ended before its framing said it would: the engine (or the connection to
    it) went away mid-answer. A followed log tells it from a body framed wrong."""


def connect(address: str, timeout: float) -> _socket.socket:
    """A connection to `unix:///path` or `tcp://host:port` (`[v6]:port`); OSError if none."""
    if address.startswith("unix://"):
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        sock.settimeout(timeout)
        try:
            sock.connect(address.removeprefix("unix://"))
        except BaseException:
            sock.close()
            raise
        return sock
    import socket

    host, _, port = address.split("://", 1)[1].rpartition(":")
    return socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)


def send(
    sock: _socket.socket,
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


class _Received(io.RawIOBase):
    """What arrives on a socket, for a BufferedReader: `socket.makefile("rb")` without the
    `socket` module. A timeout or a reset is the socket's own error, as there."""

    def __init__(self, sock: _socket.socket) -> None:
        super().__init__()
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        return self._sock.recv_into(buffer)


class Response:
    """An answer as it arrives on `sock`: `status`, `reason`, `headers` (names in lower case),
    and its body through `read`; `close` closes the connection."""

    def __init__(self, sock: _socket.socket, method: str) -> None:
        self._sock = sock
        self._file = io.BufferedReader(_Received(sock))
        try:
            self._begin(method)
        except BaseException:
            self._file.close()
            raise

    def _begin(self, method: str) -> None:
        self._head_left = _HEAD_MAX
        self.status, self.reason = self._status_line()
        self.headers = self._headers()
        interim = 0
        while 100 <= self.status < 200:  # 100 Continue and the like: the answer follows
            interim += 1
            if interim > _INTERIM_MAX:
                raise ProtocolError(f"more than {_INTERIM_MAX} interim (1xx) answers")
            self.status, self.reason = self._status_line()
            self.headers = self._headers()
        self._chunked = "chunked" in self.headers.get("transfer-encoding", "").lower()
        self._left: int | None = 0  # bytes left (of the chunk); None: up to the close
        self._overhead = 0  # chunk framing not yet paid for by chunk data, in bytes
        self._done = method == "HEAD" or self.status in _BODILESS
        if not self._done and not self._chunked:
            length = self.headers.get("content-length")
            if length is None:
                self._left = None
            elif (
                length.strip().isascii()
                and length.strip().isdigit()
                and len(length.strip()) <= _LENGTH_DIGITS_MAX
            ):
                self._left = int(length)
            else:
                raise ProtocolError(f"Content-Length {length[:40]!r}")

    def close(self) -> None:
        self._file.close()
        self._sock.close()

    def _line(self) -> bytes:
        """A line of the head: no longer than 64 KiB, and all of them at most 1 MiB."""
        line = self._file.readline(min(_LINE_MAX, self._head_left) + 1)
        if len(line) > _LINE_MAX:
            raise ProtocolError("a line longer than 64 KiB")
        self._head_left -= len(line)
        if self._head_left < 0:
            raise ProtocolError(f"an answer's head longer than {_HEAD_MAX} bytes")
        return line

    def _status_line(self) -> tuple[int, str]:
        line = self._line()
        if not line:
            raise ConnectionResetError("the engine closed the connection without an answer")
        version, _, rest = line.decode("latin-1").strip().partition(" ")
        code, _, reason = rest.partition(" ")
        # ASCII digits only: latin-1 has digits int() refuses ("\xb2" is a superscript two).
        if not version.startswith("HTTP/") or not (
            len(code) == 3 and code.isascii() and code.isdigit()
        ):
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
            self._left = self._chunk_size()
            if self._left == 0:  # the last chunk, then trailers up to a blank line
                self._trailers()
                self._done = True
                return b""
        if self._left == 0:
            self._done = True
            return b""
        data = self._file.read(min(size, self._left))
        if not data:
            raise Cut("the answer ended before its length")
        self._left -= len(data)
        if self._chunked and self._left == 0:
            end = self._file.readline(2)
            if end in (b"", b"\r"):
                raise Cut("the answer ended after a chunk's data")
            if end not in (b"\r\n", b"\n"):
                raise ProtocolError(f"a chunk not followed by CRLF: {end!r}")
        return data

    def _chunk_size(self) -> int:
        """The next chunk's size: hex digits only. int(_, 16) alone would take "-1" (then
        read(-1) reads to the end of the stream, past any cap), "+1", "0x1", "1_0" and
        spaces."""
        line = self._file.readline(_SIZE_LINE_MAX + 1)
        if len(line) > _SIZE_LINE_MAX:
            raise ProtocolError(f"a chunk size line longer than {_SIZE_LINE_MAX} bytes")
        if not line.endswith(b"\n"):
            raise Cut("the answer ended before its last chunk")
        digits = line.split(b";", 1)[0].rstrip(b"\r\n").rstrip(b" \t")  # spaces before a ";"
        if not 0 < len(digits) <= _SIZE_DIGITS_MAX or not _HEX_DIGITS.issuperset(digits):
            raise ProtocolError(f"not a chunk size: {digits[:20]!r}")
        size = int(digits, 16)
        self._overhead = max(0, self._overhead + len(line) + 2 - 16 - 2 * size)
        if self._overhead > _OVERHEAD_MAX:
            raise ProtocolError("chunk framing far larger than the data it carries")
        return size

    def _trailers(self) -> None:
        for _ in range(_HEADERS_MAX):
            if self._line() in (b"\r\n", b"\n", b""):
                return
        raise ProtocolError(f"more than {_HEADERS_MAX} trailers")

    def read_all(self, limit: int) -> bytes:
        """The whole body, or its first `limit` + 1 bytes when it is longer (a caller's cue)."""
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := self.read()):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)[: limit + 1]
