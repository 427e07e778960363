"""HTTP for the cloud fetchers: JSON GETs and long streams, with bounded retries.

Failures become the typed errors the CLI maps to exit codes: a host that cannot be reached
or keeps answering 5xx is ProviderUnreachableError (69), throttling that outlasts the retries
RetryableError (75), 401/403 CredentialsError (77, with the variable to set). A stream that
drops mid-body resumes with `Range` (guarded by `If-Range`) when the server allows it.
Messages show URLs without query strings and never contain the secrets given.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from providers.cloud.offers import Progress, no_progress
from providers.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    scrub,
)
from providers.retry import backoff_delay
from providers.urls import display, origin

if TYPE_CHECKING:
    import httpx

_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
MAX_REDIRECTS = 10
_CREDENTIAL_HEADERS = {"authorization", "x-amz-security-token", "x-amz-date", "cookie"}


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    backoff_seconds: float = 0.5
    max_delay_seconds: float = 8.0
    connect_timeout_seconds: float = 10.0
    read_timeout_seconds: float = 60.0


class CloudHttp:
    """One provider's HTTP client. `auth_hint` says how to fix a 401/403 (which variable)."""

    def __init__(
        self,
        provider: str,
        *,
        auth_hint: str = "",
        secrets: Sequence[str] = (),
        policy: RetryPolicy | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        refused: Callable[[int, str], bool] | None = None,
    ) -> None:
        """`refused(status, api_message)` marks other answers as refused credentials (GCP
        answers an unknown API key with 400 INVALID_ARGUMENT, not 401/403)."""
        self.provider = provider
        self.refused = refused
        self.auth_hint = auth_hint
        self.secrets = [s for s in secrets if s]
        self.policy = policy or RetryPolicy()
        self._client = client  # given (tests): used for every scheme
        self._clients: dict[str, httpx.Client] = {}
        self._sleep = sleep

    # -- plumbing ------------------------------------------------------------------------

    def client(self, url: str = "https://") -> httpx.Client:
        """One client per scheme: loading the CA bundle costs ~40 ms and only https needs it
        (a plain-http mirror or test server does not pay it)."""
        if self._client is not None:
            return self._client
        from providers.http import httpx

        scheme = "https" if url.startswith("https:") else "http"
        if scheme not in self._clients:
            self._clients[scheme] = httpx.Client(
                verify=scheme == "https",
                follow_redirects=False,  # by hand, in _follow
                timeout=httpx.Timeout(
                    self.policy.read_timeout_seconds, connect=self.policy.connect_timeout_seconds
                ),
                headers={"User-Agent": "shoal"},
            )
        return self._clients[scheme]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def _where(self, url: str) -> str:
        return f"{self.provider}: {display(url)}"

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        retry_after = response.headers.get("retry-after", "") if response is not None else ""
        policy = self.policy
        return backoff_delay(attempt, policy.backoff_seconds, policy.max_delay_seconds, retry_after)

    def _fail_status(self, url: str, response: httpx.Response) -> ShoalError:
        code = response.status_code
        detail = self._error_detail(response)
        where = f"{self._where(url)}: HTTP {code}{detail}"
        if code in (401, 403) or (self.refused is not None and self.refused(code, detail)):
            return CredentialsError(f"{where}; {self.auth_hint or 'credentials were refused'}")
        if code == 404:
            return NotFoundError(f"{where}; check the URL (or its base URL setting)")
        if code == 429:
            return RetryableError(
                f"{where} (throttled) after {self.policy.attempts} attempts; try again later, "
                "or use --offline for cached data"
            )
        if code in _RETRY_STATUS:
            return ProviderUnreachableError(
                f"{where} after {self.policy.attempts} attempts; try again later, or use "
                "--offline for cached data"
            )
        return ShoalError(where)

    def _error_detail(self, response: httpx.Response) -> str:
        """The API's own error message (GCP and Azure send JSON ones), scrubbed, short."""
        try:
            response.read()
            body = json.loads(response.content[:65536] or b"null")
        except Exception:
            return ""
        message: Any = None
        if isinstance(body, dict):
            error = body.get("error") or body.get("Error")
            if isinstance(error, dict):
                message = error.get("message") or error.get("Message")
            elif isinstance(error, str):
                message = error
            message = message or body.get("message") or body.get("Message")
        if not isinstance(message, str) or not message.strip():
            return ""
        return f" ({self.scrub(' '.join(message.split()))[:200]})"

    def _follow(
        self, url: str, params: Mapping[str, str] | None, headers: Mapping[str, str] | None
    ) -> httpx.Response:
        """One request, redirects followed by hand: each hop gets the client of its own
        scheme, so a plain-http mirror redirecting to https is still verified, and
        credentials (Authorization, AWS signature headers) stay with the origin they were
        meant for. An https -> http hop is refused."""
        from urllib.parse import urljoin

        sent = dict(headers or {})
        first = origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            client = self.client(url)
            request = client.build_request("GET", url, params=params, headers=sent)
            response = client.send(request, stream=True)
            location = response.headers.get("location")
            if response.status_code not in (301, 302, 303, 307, 308) or not location:
                return response
            response.close()
            target = urljoin(str(request.url), location)
            if url.startswith("https:") and not target.startswith("https:"):
                raise ShoalError(
                    f"{self._where(url)}: redirect from https to {display(target)} refused"
                )
            if origin(target) != first:
                sent = {k: v for k, v in sent.items() if k.lower() not in _CREDENTIAL_HEADERS}
            url, params = target, None
        raise ShoalError(f"{self._where(url)}: more than {MAX_REDIRECTS} redirects")

    def _send(
        self, url: str, params: Mapping[str, str] | None, headers: Mapping[str, str] | None
    ) -> httpx.Response:
        """A response with a 2xx status, after retries; the body is not read yet."""
        from providers.http import httpx

        last = ""
        for attempt in range(self.policy.attempts):
            try:
                response = self._follow(url, params, headers)
            except httpx.TransportError as exc:
                name = type(exc).__name__
                last = self.scrub(f"{name}: {exc}" if str(exc) else name)
                if attempt + 1 < self.policy.attempts:
                    self._sleep(self._delay(attempt, None))
                continue
            if 200 <= response.status_code < 300:
                return response
            if response.status_code in _RETRY_STATUS and attempt + 1 < self.policy.attempts:
                delay = self._delay(attempt, response)
                response.close()
                self._sleep(delay)
                continue
            error = self._fail_status(url, response)
            response.close()
            raise error
        raise ProviderUnreachableError(
            f"{self._where(url)}: {last} after {self.policy.attempts} attempts; check the "
            "network or the base URL, or use --offline for cached data"
        )

    # -- the two ways to read ------------------------------------------------------------

    def get_json(
        self,
        url: str,
        *,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Any:
        """GET and decode JSON; a body cut short is retried like a dropped connection."""
        from providers.http import httpx

        for attempt in range(self.policy.attempts):
            response = self._send(url, params, headers)
            try:
                body = response.read()
            except httpx.TransportError as exc:
                response.close()
                if attempt + 1 < self.policy.attempts:
                    self._sleep(self._delay(attempt, None))
                    continue
                raise ProviderUnreachableError(
                    f"{self._where(url)}: the connection dropped mid-body ({type(exc).__name__}) "
                    f"{self.policy.attempts} times; try again later"
                ) from None
            finally:
                response.close()
            try:
                return json.loads(body)
            except (ValueError, RecursionError) as exc:
                raise ShoalError(
                    f"{self._where(url)}: malformed JSON ({self.scrub(str(exc))[:120]}); "
                    "nothing was cached from it"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def stream(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        progress: Progress = no_progress,
        what: str = "",
        chunk_bytes: int = 1 << 20,
    ) -> Iterator[bytes]:
        """The body in chunks. A drop mid-body resumes from the last byte with `Range`
        (and `If-Range` on the ETag); a server that cannot resume is a clear failure."""
        from providers.http import httpx

        base = {"Accept-Encoding": "identity", **dict(headers or {})}
        received = 0
        total: int | None = None
        validator = ""
        drops = 0
        label = what or display(url)
        while True:
            extra = dict(base)
            if received:
                extra["Range"] = f"bytes={received}-"
                if validator:
                    extra["If-Range"] = validator
            response = self._send(url, None, extra)
            try:
                if received:
                    if response.status_code != 206 or not validator:
                        raise ProviderUnreachableError(
                            f"{self._where(url)}: the connection dropped at byte {received} "
                            "and the server cannot resume it; try again"
                        )
                else:
                    validator = response.headers.get("etag", "")
                    length = response.headers.get("content-length", "")
                    total = int(length) if length.isdigit() else None
                try:
                    for chunk in response.iter_raw(chunk_bytes):
                        received += len(chunk)
                        progress(received, total, label)
                        yield chunk
                except httpx.TransportError as exc:
                    drops += 1
                    if drops >= self.policy.attempts:
                        raise ProviderUnreachableError(
                            f"{self._where(url)}: the connection dropped {drops} times "
                            f"({type(exc).__name__}); try again later"
                        ) from None
                    self._sleep(self._delay(drops - 1, None))
                    continue
            finally:
                response.close()
            if total is not None and received < total:
                raise ProviderUnreachableError(
                    f"{self._where(url)}: the body ended at byte {received} of {total}; try again"
                )
            return
