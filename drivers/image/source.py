"""The network side of a pull: one forward-only byte stream over HTTP that survives drops.

`HttpSource.read(n)` hands out the body's bytes in order, hashing each one once. When the
connection drops or stalls mid-body, it asks again with `Range: bytes=N-` guarded by
`If-Range` (the ETag, or Last-Modified), and carries on feeding the same hash and the same
decompressor. A server that answers the resumed request with the whole body instead (it
cannot resume, or the file changed) raises `RestartRequired`: the caller starts over cleanly.

Requests go through the shared client (providers.core.http), with its retries, its redirect
checks (credentials only to the origin: scheme, host, port) and its scrub of whatever the
server sent; ERRORS says what an image server's answers mean. Messages name URLs without
user info or query string (signed URLs carry secrets there).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drivers.image import checksum
from providers.core.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    ShoalError,
)
from providers.core.http.client import (
    HttpClient,
    content_length,
    resume_headers,
    resumed_at,
    strong_validator,
)
from providers.core.http.policy import RETRY_STATUSES, ErrorMap, Kind, RetryPolicy, Rule
from providers.core.urls import display

if TYPE_CHECKING:
    import hashlib

    import httpx

CHUNK_BYTES = 256 * 1024
_RETRY = "; check the network or the server, then retry"
ERRORS = ErrorMap(rules=(
    Rule((401, 403), CredentialsError, "{url}: HTTP {code}, {refused}"),
    Rule(404, NotFoundError, "{url}: HTTP 404, no such image; check the URL"),
    Rule(RETRY_STATUSES, ProviderUnreachableError, "{target}: HTTP {code} after {attempts} attempts"
         + _RETRY),
    Rule(Kind.UNREACHABLE, ProviderUnreachableError, "{target}: {error} after {attempts} attempts"
         + _RETRY),
))  # fmt: skip
# With credentials: a refusal by another origin is not theirs (they were never sent there).
NOT_SENT = Rule((401, 403), CredentialsError, "{url}: HTTP {code}, after a redirect to another "
                "host, which is never sent your credentials (they go to {host} only)",
                when=lambda failure: failure.elsewhere)  # fmt: skip
NO_CREDENTIALS = (
    "it needs credentials: give --user with --password-stdin, SHOAL_IMAGE_PASSWORD or ~/.netrc"
)


class RestartRequired(Exception):
    """The server cannot continue where the stream broke: start the pull over."""


@dataclass(frozen=True)
class Resume:
    """A broken body about to be asked for again from byte `at`: what a progress display
    shows at once, so a log says why the transfer paused."""

    cause: str  # "connection dropped", "connection stalled", "connection closed early"
    at: int
    total: int | None
    attempt: int  # 1 for the first resume since bytes last flowed
    attempts: int  # the most resumes tried before giving up


@dataclass(frozen=True)
class Policy(RetryPolicy):
    attempts: int = 5  # tries per request, and restarts per pull
    connect_timeout_seconds: float = 15.0
    read_timeout_seconds: float = 30.0  # a stall longer than this is a drop


class HttpSource:
    def __init__(
        self,
        url: str,
        *,
        auth: tuple[str, str] | None,
        hasher: hashlib._Hash,
        policy: Policy,
        on_bytes: Callable[[int, int | None], None] | None = None,
        on_resume: Callable[[Resume], None] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url
        errors = ERRORS.extended(NOT_SENT) if auth else ERRORS
        refused = "credentials were refused" if auth else NO_CREDENTIALS
        self.http = HttpClient(
            errors=errors.extended(host=display(url).split("/")[2], refused=refused),
            policy=policy,
            credentials={"Authorization": _basic(*auth)} if auth else None,
            # What a server could echo: the password, and the pair the Authorization holds.
            secrets=[auth[1], f"{auth[0]}:{auth[1]}"] if auth else [],
            headers={"Accept-Encoding": "identity"},
            transport=transport,
        )
        self.hasher = hasher
        self.policy = policy
        self.on_bytes = on_bytes
        self.on_resume = on_resume
        self.received = 0
        self.total: int | None = None
        self.headers: dict[str, str] = {}
        self._validator = ""
        self._by_etag = False
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._buffer = b""
        self._done = False

    # -- requests ------------------------------------------------------------------------

    def _get(self, headers: dict[str, str]) -> httpx.Response:
        return self.http.open("GET", self.url, headers=headers, ok=(200, 206))

    def open(self) -> None:
        response = self._get({})
        if response.status_code != 200:
            response.close()
            where = self.http.scrub(display(str(response.url)))
            raise ShoalError(f"{where}: HTTP {response.status_code} to a plain GET")
        self._attach(response)
        self.headers = dict(response.headers)
        self.total = content_length(response.headers)
        self._validator = strong_validator(response.headers)
        self._by_etag = self._validator == response.headers.get("etag")

    def announced(self) -> list[checksum.Sum]:
        return checksum.announced(self.headers)

    def _attach(self, response: httpx.Response) -> None:
        self._response = response
        # No chunk size: httpx would hold bytes back until a whole chunk arrived, and lose
        # them when the connection drops, so a resume would ask again for bytes it had.
        self._chunks = response.iter_raw()

    def _resume(self, why: str) -> None:
        """Ask for the rest of the body; RestartRequired if the server cannot give it."""
        if self._response is not None:
            self._response.close()
        if not self._validator:
            raise RestartRequired(f"{why}; the server gave no ETag or Last-Modified to resume by")
        self.http.pause(0)
        response = self._get(resume_headers(self.received, self._validator))
        total = response.headers.get("content-range", "").rpartition("/")[2]
        etag, start = response.headers.get("etag"), resumed_at(response.headers)
        if response.status_code == 200:
            refusal = "the server cannot resume (answered 200)"
        elif (self.total is not None and total != str(self.total)) or (
            self._by_etag and etag not in (None, self._validator)
        ):
            refusal = "the file changed on the server"
        elif start != self.received:
            refusal = f"the server resumed at the wrong byte ({start})"
        else:
            self._attach(response)
            return
        response.close()
        raise RestartRequired(f"{why}; {refusal}")

    # -- reading -------------------------------------------------------------------------

    def _next_chunk(self) -> bytes:
        from providers.core.http import httpx

        drops = 0
        while True:
            assert self._chunks is not None
            try:
                chunk = next(self._chunks)
            except StopIteration:
                if self.total is not None and self.received < self.total:
                    why = f"connection closed at byte {self.received} of {self.total}"
                    cause = "connection closed early"
                else:
                    return b""
            except (httpx.TransportError, OSError) as exc:
                why = f"connection dropped at byte {self.received} ({type(exc).__name__})"
                stalled = isinstance(exc, httpx.ReadTimeout)
                cause = "connection stalled" if stalled else "connection dropped"
            else:
                if chunk:
                    return chunk
                continue
            drops += 1
            if drops > self.policy.attempts:
                raise ProviderUnreachableError(
                    f"{display(self.url)}: {why}; gave up after {self.policy.attempts} resumes"
                )
            if self.on_resume is not None:
                self.on_resume(
                    Resume(cause, self.received, self.total, drops, self.policy.attempts)
                )
            self._resume(why)

    def read(self, size: int = -1) -> bytes:
        if self._done:
            return b""
        if not self._buffer:
            chunk = self._next_chunk()
            if not chunk:
                self._done = True
                return b""
            if self.total is not None and self.received + len(chunk) > self.total:
                raise ShoalError(f"{display(self.url)}: the server sent more than Content-Length")
            self.received += len(chunk)
            self.hasher.update(chunk)
            if self.on_bytes is not None:
                self.on_bytes(self.received, self.total)
            self._buffer = chunk
        if size < 0 or size >= len(self._buffer):
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out

    def drain(self) -> None:
        """Read to the end, so every byte is hashed and the length is checked."""
        while self.read(CHUNK_BYTES):
            pass

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
        self.http.close()

    def __enter__(self) -> HttpSource:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _basic(user: str, password: str) -> str:
    import base64

    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"
