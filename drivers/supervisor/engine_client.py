"""The supervisor's HTTP to a container engine (unix:// or tcp://): the container driver's own
HTTP/1.1 (drivers/container/engine_http.py: `_socket`, one request a connection, its answer's
framing checked) rather than http.client, which imports email, ssl and socket: ~30 ms of CPU
of every container supervisor's start, while the next shoal command of the allocation (its
`status`, its `free`) runs beside it. Its own module, so that a `process` supervisor, which
never talks to an engine, imports none of it. Run by path beside supervise.py (like
procinfo.py), it loads engine_http.py by path from the same install."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING or __package__:
    from drivers.container.engine_http import ProtocolError, Response, connect, send
else:
    # Run by path (`python -I -S .../supervise.py`): no package, no shoal on sys.path. The
    # driver's file sits in the same install, ../container/ from here; a supervisor is one
    # process for one allocation, so the module is loaded once, under a name of its own.
    import importlib.util

    _path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "container", "engine_http.py"
    )
    _spec = importlib.util.spec_from_file_location("shoal_engine_http", _path)
    assert _spec is not None and _spec.loader is not None
    _http = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _http
    _spec.loader.exec_module(_http)
    ProtocolError, Response, connect, send = (
        _http.ProtocolError,
        _http.Response,
        _http.connect,
        _http.send,
    )

# An answer that is not HTTP/1.1 as it should be (a body cut short is one too): the supervisor
# takes it as it takes an engine that is away. A timeout is TimeoutError, an engine that
# cannot be reached or hangs up another OSError.
HTTPException = ProtocolError


def engine_answer(
    address: str, method: str, target: str, timeout: float, limit: int = 1 << 16
) -> tuple[int, bytes]:
    """The status and (at most `limit` bytes of) the body of a request to the engine at
    `address` (unix:///path or tcp://host:port). `timeout` bounds the connection and each
    wait for the engine's next bytes, not the whole answer."""
    sock = connect(address, timeout)
    try:
        send(sock, method, target, {}, None)
        response = Response(sock, method)
    except BaseException:
        sock.close()
        raise
    try:
        # The framing's own checks bound what is read (a chunk size of -1 is refused, not
        # read as "to the end"), and read_all stops one byte past the cap.
        return response.status, response.read_all(limit)[:limit]
    finally:
        response.close()


def engine_call(address: str, method: str, target: str, timeout: float) -> int:
    """The status of a request whose answer is dropped (its first 64 KiB read)."""
    return engine_answer(address, method, target, timeout)[0]


def exit_code(body: bytes) -> int | None:
    """The exit code in a /wait answer: `{"StatusCode": N}` (Docker's API), or the bare
    number Podman's own endpoint (/libpod/containers/ID/wait) answers."""
    try:
        value = json.loads(body)
        code = value if isinstance(value, int) else value.get("StatusCode")
    except (ValueError, AttributeError, RecursionError):  # not its answer: no code known
        return None
    return code if isinstance(code, int) and not isinstance(code, bool) else None
