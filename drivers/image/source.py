"""The network side of a pull: one forward-only byte stream over HTTP that survives drops.

`HttpSource.read(n)` hands out the body's bytes in order, hashing each one once. When the
connection drops or stalls mid-body, it asks again with `Range: bytes=N-` guarded by
`If-Range` (the ETag, or Last-Modified), and carries on feeding the same hash and the same
decompressor. A server that answers the resumed request with the whole body instead (it
cannot resume, or the file changed) raises `RestartRequired`: the caller starts over cleanly.

Credentials go only to the origin (scheme, host, port); a redirect elsewhere drops them.
Messages name URLs without user info or query string (signed URLs carry secrets there), and
whatever the server sent (reason phrase, Location, a protocol error quoting its bytes) is
scrubbed of the password and the basic-auth pair, in every form the shared scrub knows. A
Location that is malformed or carries user info ends the pull (exit 1), unfollowed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drivers.image import checksum
from providers.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    ShoalError,
    scrub,
)
from providers.retry import backoff_delay
from providers.urls import UnusableLocation, UrlError, check_location, display, origin, resolve

if TYPE_CHECKING:
    import hashlib

    import httpx

CHUNK_BYTES = 256 * 1024
MAX_REDIRECTS = 10
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


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


@dataclass
class Policy:
    attempts: int = 5  # tries per request, and restarts per pull
    backoff_seconds: float = 0.5  # doubles per retry, capped at 8 s
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
        client: httpx.Client | None = None,
    ) -> None:

        self.url = url
        self.auth = auth
        # What a server could echo: the password, and the pair the Authorization header holds.
        self.secrets = [auth[1], f"{auth[0]}:{auth[1]}"] if auth is not None else []
        self.hasher = hasher
        self.policy = policy
        self.on_bytes = on_bytes
        self.on_resume = on_resume
        self.received = 0
        self.total: int | None = None
        self.headers: dict[str, str] = {}
        self.final_url = url
        self._validator: str | None = None
        self._validator_kind = ""
        self._given_client = client
        self._clients: dict[str, httpx.Client] = {}
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._buffer = b""
        self._done = False

    # -- requests ------------------------------------------------------------------------

    def _client_for(self, url: str) -> httpx.Client:
        """One client per scheme: loading the CA bundle costs tens of ms and only https
        needs it, while a redirect from http to https still gets a verifying client."""
        if self._given_client is not None:
            return self._given_client
        from providers.http import httpx

        scheme = url.partition(":")[0].lower()
        if scheme not in self._clients:
            self._clients[scheme] = httpx.Client(
                verify=scheme == "https",
                follow_redirects=False,
                timeout=httpx.Timeout(
                    self.policy.read_timeout_seconds, connect=self.policy.connect_timeout_seconds
                ),
                headers={"Accept-Encoding": "identity", "User-Agent": "shoal"},
                event_hooks={"response": [check_location]},
            )
        return self._clients[scheme]

    def _scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def _where(self, url: str) -> str:
        """A URL for a message: after a redirect, the server chose it, and may have put a
        secret in its path."""
        return self._scrub(display(url))

    def _sleep_before_retry(self, attempt: int, response: httpx.Response | None = None) -> None:
        retry_after = response.headers.get("retry-after", "") if response is not None else ""
        time.sleep(backoff_delay(attempt, self.policy.backoff_seconds, 8.0, retry_after))

    def _send(self, extra: dict[str, str]) -> httpx.Response:
        """One logical request: redirects followed by hand (auth stays with the origin)."""
        url = self.url
        first = origin(self.url)
        for _ in range(MAX_REDIRECTS + 1):
            request_auth = self.auth if origin(url) == first else None
            client = self._client_for(url)
            request = client.build_request("GET", url, headers=extra)
            if request_auth is not None:
                request.headers["Authorization"] = _basic(*request_auth)
            try:
                response = client.send(request, stream=True)
            except UnusableLocation as exc:
                raise self._unusable(url, exc.status, str(exc)) from None
            if response.status_code in (301, 302, 303, 307, 308) and "location" in response.headers:
                response.close()
                url = self._redirect(url, response.status_code, response.headers["location"])
                continue
            self.final_url = url
            return response
        raise ShoalError(f"{display(self.url)}: more than {MAX_REDIRECTS} redirects")

    def _redirect(self, url: str, code: int, location: str) -> str:
        """Where a redirect points. One that cannot be followed is the server's fault, said
        without the Location's text, which may carry the password (as a port, say)."""
        try:
            return resolve(url, location).text
        except UrlError as exc:
            raise self._unusable(url, code, str(exc)) from None

    def _unusable(self, url: str, code: int, reason: str) -> ShoalError:
        return ShoalError(
            f"{self._where(url)}: HTTP {code} redirect refused, its Location is unusable: "
            f"{self._scrub(reason)}; the server is misconfigured, tell its operator"
        )

    def _request(self, extra: dict[str, str]) -> httpx.Response:
        """Send with retries on connection failures and retryable statuses."""
        from providers.http import httpx

        last: str = ""
        for attempt in range(self.policy.attempts):
            try:
                response = self._send(extra)
            except httpx.InvalidURL as exc:  # one that resolve() let through and httpx did not
                raise ShoalError(self._scrub(f"{display(self.url)}: {exc}")) from None
            except (httpx.TransportError, OSError) as exc:
                # h11's protocol errors quote the server's bytes.
                name = type(exc).__name__
                last = self._scrub(f"{name}: {exc}" if str(exc) else name)
                if attempt + 1 < self.policy.attempts:
                    self._sleep_before_retry(attempt)
                continue
            if response.status_code in _RETRY_STATUS:
                last = f"HTTP {response.status_code}"
                response.close()
                if attempt + 1 < self.policy.attempts:
                    self._sleep_before_retry(attempt, response)
                continue
            return response
        raise ProviderUnreachableError(
            f"{display(self.url)}: {last} after {self.policy.attempts} attempts; "
            "check the network or the server, then retry"
        )

    def _check_status(self, response: httpx.Response) -> None:
        code = response.status_code
        where = self._where(self.final_url)
        if code in (401, 403):
            response.close()
            if self.auth and origin(self.final_url) != origin(self.url):
                hint = (
                    "after a redirect to another host, which is never sent your credentials "
                    f"(they go to {display(self.url).split('/')[2]} only)"
                )
            elif self.auth:
                hint = "credentials were refused"
            else:
                hint = (
                    "it needs credentials: give --user with --password-stdin, "
                    "SHOAL_IMAGE_PASSWORD or ~/.netrc"
                )
            raise CredentialsError(f"{where}: HTTP {code}, {hint}")
        if code == 404:
            response.close()
            raise NotFoundError(f"{where}: HTTP 404, no such image; check the URL")
        if code not in (200, 206):
            response.close()
            reason = self._scrub(" ".join(response.reason_phrase.split()))[:80]
            raise ShoalError(f"{where}: HTTP {code} {reason}".rstrip())

    def open(self) -> None:
        response = self._request({})
        self._check_status(response)
        if response.status_code != 200:
            response.close()
            raise ShoalError(
                f"{self._where(self.final_url)}: HTTP {response.status_code} to a plain GET"
            )
        self._attach(response)
        self.headers = dict(response.headers)
        length = response.headers.get("content-length", "")
        self.total = int(length) if length.isdigit() else None
        etag = response.headers.get("etag", "")
        if etag and not etag.startswith("W/"):
            self._validator, self._validator_kind = etag, "etag"
        elif _strong_date(response.headers.get("last-modified"), response.headers.get("date")):
            self._validator, self._validator_kind = response.headers["last-modified"], "date"

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
        if self._validator is None:
            raise RestartRequired(f"{why}; the server gave no ETag or Last-Modified to resume by")
        headers = {"Range": f"bytes={self.received}-", "If-Range": self._validator}
        for attempt in range(self.policy.attempts):
            self._sleep_before_retry(attempt)
            response = self._request(headers)
            self._check_status(response)
            if response.status_code == 200:
                response.close()
                raise RestartRequired(f"{why}; the server cannot resume (answered 200)")
            content_range = response.headers.get("content-range", "")
            start = _content_range_start(content_range)
            total = content_range.rpartition("/")[2]
            etag = response.headers.get("etag")
            if (self.total is not None and total != str(self.total)) or (
                self._validator_kind == "etag" and etag is not None and etag != self._validator
            ):
                response.close()
                raise RestartRequired(f"{why}; the file changed on the server")
            if start != self.received:
                response.close()
                raise RestartRequired(f"{why}; the server resumed at the wrong byte ({start})")
            self._attach(response)
            return
        raise ProviderUnreachableError(f"{display(self.url)}: could not resume ({why})")

    # -- reading -------------------------------------------------------------------------

    def _next_chunk(self) -> bytes:
        from providers.http import httpx

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
                cause = (
                    "connection stalled"
                    if isinstance(exc, httpx.ReadTimeout)
                    else "connection dropped"
                )
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
        for client in self._clients.values():
            client.close()

    def __enter__(self) -> HttpSource:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _strong_date(last_modified: str | None, date: str | None) -> bool:
    """RFC 9110 8.8.2.2: Last-Modified is a strong validator only when it is at least one
    second older than the response's Date (else the file may change within that second)."""
    if not last_modified or not date:
        return False
    from email.utils import parsedate_to_datetime

    try:
        return (
            parsedate_to_datetime(date) - parsedate_to_datetime(last_modified)
        ).total_seconds() >= 1
    except (TypeError, ValueError):
        return False


def _basic(user: str, password: str) -> str:
    import base64

    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def _content_range_start(value: str) -> int | None:
    # "bytes 1000-1999/2000"
    unit, _, rest = value.partition(" ")
    if unit.strip().lower() != "bytes":
        return None
    start, _, _ = rest.partition("-")
    return int(start) if start.strip().isdigit() else None
