"""The supervisor's HTTP to a container engine (unix:// or tcp://), over the standard
library's http.client: its own module so that a `process` supervisor, which never talks to an
engine, does not import http.client (and with it email, ssl and socket: ~35 ms of every
process allocation's start). Run by path beside supervise.py, like procinfo.py."""

from __future__ import annotations

import http.client
import json
import socket

HTTPException = http.client.HTTPException


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float | None) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def engine_open(
    address: str, method: str, target: str, timeout: float | None
) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """A request to the engine at `address` (unix:///path or tcp://host:port); the caller
    reads the answer, then closes the connection. OSError when the engine cannot be reached."""
    conn: http.client.HTTPConnection
    if address.startswith("unix://"):
        conn = _UnixConnection(address.removeprefix("unix://"), timeout)
    else:
        conn = http.client.HTTPConnection(address.split("://", 1)[-1], timeout=timeout)
    try:
        conn.request(method, target)
        return conn, conn.getresponse()
    except BaseException:
        conn.close()
        raise


def engine_call(address: str, method: str, target: str, timeout: float | None) -> int:
    """The status of a request whose answer is dropped (its first 64 KiB read)."""
    conn, response = engine_open(address, method, target, timeout)
    try:
        read_capped(response, 1 << 16)
        return response.status
    finally:
        conn.close()


def read_capped(response: http.client.HTTPResponse, limit: int) -> bytes:
    """At most `limit` bytes of an answer's body, however it is framed. `read(limit)` is no
    cap: http.client takes a chunk size of -1 (a hostile engine's) for "to the end of the
    stream" and reads all of it into memory; `read1` reads one buffer at a time."""
    got = bytearray()
    while len(got) < limit:
        piece = response.read1(limit - len(got))
        if not piece:
            break
        got += piece
    return bytes(got[:limit])


def engine_answer(
    address: str, method: str, target: str, timeout: float | None, limit: int = 1 << 16
) -> tuple[int, bytes]:
    """The status and (at most `limit` bytes of) the body of a request."""
    conn, response = engine_open(address, method, target, timeout)
    try:
        return response.status, read_capped(response, limit)
    finally:
        conn.close()


def exit_code(body: bytes) -> int | None:
    """`{"StatusCode": N}`, the answer of /containers/ID/wait."""
    try:
        code = json.loads(body).get("StatusCode")
    except (ValueError, AttributeError, RecursionError):  # not its answer: no code known
        return None
    return code if isinstance(code, int) and not isinstance(code, bool) else None
