"""Plain HTTP (an `http://` API server: `kubectl proxy`, a local test cluster) over the
standard library's http.client, as an httpx transport, so that the shared client
(providers.core.http) still does the retries, the errors, the scrubbing and the redirects.

What httpx's own transport costs such a server, and this one does not: httpcore and h11
imported (~20 ms), an SSL context built (and certifi imported) for a connection that
never uses TLS, and a body read in 64 KB pieces, each parsed by h11 in Python (a thousand
reads for a large cluster's lists). Here a body of known length is read in one call, and
one of unknown length (chunked: a log followed) as it comes.

Used only when nothing else is asked for: never for https (TLS stays with httpx and the
kubeconfig's SSL context), nor when a proxy is configured for http (httpx reads those
variables; this transport does not).

The failures are httpx's own exceptions, with the words httpcore uses, so that retries
and error messages are the same whichever transport carried the request.
"""

from __future__ import annotations

import http.client
import select
import socket
import urllib.request
from collections.abc import Iterator

from providers.core.http import httpx

_WHOLE = 64 << 20  # a body this long or shorter is read in one call (core's MAX_BYTES)
_PIECE = 1 << 20  # else at most this much at a time, as it arrives


def usable(server: str) -> bool:
    """Whether requests to `server` may go through this transport: plain HTTP, and no proxy
    for it where httpx finds one (the environment's `http_proxy`/`all_proxy`, else the
    system's settings on Windows and macOS; httpx imports urllib.request anyway)."""
    if not server.lower().startswith("http://"):
        return False
    return not {"http", "all"} & urllib.request.getproxies().keys()


class PlainTransport(httpx.BaseTransport):
    """One keep-alive connection to one plain-HTTP server. Not thread-safe (one request at
    a time, as the client makes them)."""

    def __init__(self) -> None:
        self._conn: http.client.HTTPConnection | None = None
        self._origin: tuple[str, int] | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme != "http":
            raise httpx.UnsupportedProtocol(f"plain HTTP only, not {url.scheme!r}")
        timeout = request.extensions.get("timeout") or {}
        origin = (url.raw_host.decode("ascii"), url.port or 80)
        conn = self._connection(origin, timeout.get("connect"))
        if conn.sock is not None:
            conn.sock.settimeout(timeout.get("read"))
        body = request.read()
        try:
            conn.putrequest(
                request.method,
                url.raw_path.decode("ascii"),
                skip_host=True,
                skip_accept_encoding=True,
            )
            for name, value in request.headers.raw:
                conn.putheader(name, value)
            conn.endheaders(body or None)
        except ValueError as exc:  # a header value http.client refuses (a line break)
            self.close()
            raise httpx.LocalProtocolError(str(exc)) from None
        except TimeoutError:
            self.close()
            raise httpx.WriteTimeout("timed out") from None
        except OSError as exc:
            self.close()
            raise httpx.WriteError(str(exc)) from exc
        try:
            answer = conn.getresponse()
        except http.client.RemoteDisconnected:
            self.close()
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response."
            ) from None
        except TimeoutError:
            self.close()
            raise httpx.ReadTimeout("timed out") from None
        except http.client.BadStatusLine as exc:
            self.close()
            raise httpx.RemoteProtocolError(f"illegal status line: {exc.args[0]}") from None
        except http.client.HTTPException as exc:
            self.close()
            raise httpx.RemoteProtocolError(f"malformed answer: {type(exc).__name__}") from None
        except OSError as exc:
            self.close()
            raise httpx.ReadError(str(exc)) from exc
        return httpx.Response(
            answer.status,
            headers=answer.getheaders(),
            stream=_Body(answer, self),
            extensions={
                "http_version": b"HTTP/1.1" if answer.version == 11 else b"HTTP/1.0",
                "reason_phrase": answer.reason.encode("latin-1", "replace"),
            },
        )

    def _connection(
        self, origin: tuple[str, int], connect_timeout: float | None
    ) -> http.client.HTTPConnection:
        conn = self._conn
        if conn is not None and (origin != self._origin or _stale(conn)):
            self.close()
            conn = None
        if conn is None:
            conn = http.client.HTTPConnection(origin[0], origin[1], timeout=connect_timeout)
            try:
                conn.connect()
            except TimeoutError:
                raise httpx.ConnectTimeout("timed out") from None
            except OSError as exc:  # refused, unresolvable, unreachable
                raise httpx.ConnectError(str(exc)) from exc
            conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._conn, self._origin = conn, origin
        return conn

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _stale(conn: http.client.HTTPConnection) -> bool:
    """Whether a kept connection can take no request: the server closed it (or sent what no
    request asked for), as httpcore checks before reusing one."""
    sock = conn.sock
    if sock is None:
        return True
    try:
        if hasattr(select, "poll"):  # select() refuses descriptors past 1023
            poll = select.poll()
            poll.register(sock, select.POLLIN)
            return bool(poll.poll(0))
        return bool(select.select([sock], [], [], 0)[0])
    except (OSError, ValueError):
        return True


class _Body(httpx.SyncByteStream):
    """An answer's body; the connection is kept for the next request only when the body was
    read to its end and the server keeps it open."""

    def __init__(self, answer: http.client.HTTPResponse, owner: PlainTransport) -> None:
        self._answer, self._owner = answer, owner

    def __iter__(self) -> Iterator[bytes]:
        answer = self._answer
        try:
            if answer.length is not None and answer.length <= _WHOLE:
                whole = answer.read()  # short of its length: IncompleteRead
                if whole:
                    yield whole
                return
            while piece := answer.read1(_PIECE):
                yield piece
        except TimeoutError:
            self._owner.close()
            raise httpx.ReadTimeout("timed out") from None
        except http.client.IncompleteRead:
            self._owner.close()
            raise httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body"
            ) from None
        except http.client.HTTPException as exc:
            self._owner.close()
            raise httpx.RemoteProtocolError(f"malformed body: {type(exc).__name__}") from None
        except OSError as exc:
            self._owner.close()
            raise httpx.ReadError(str(exc)) from exc

    def close(self) -> None:
        answer = self._answer
        done = answer.isclosed()
        answer.close()
        if not done or answer.will_close:
            self._owner.close()  # a body left unread would be read as the next answer
