"""HTTP for the cloud fetchers: JSON GETs and long streams, with bounded retries.

Failures become the typed errors the CLI maps to exit codes: a host that cannot be reached
or keeps answering 5xx is ProviderUnreachableError (69), throttling that outlasts the retries
RetryableError (75), 401/403 CredentialsError (77, with the variable to set). A stream that
drops mid-body resumes with `Range` (guarded by `If-Range`) when the server allows it.
Messages show URLs without query strings and never contain a credential the requests
carried: the secrets given, and whatever credential a request's headers, query or URL held
(an API key, a bearer token, the AWS access key id and signature), in any form the shared
scrub knows. A redirect to a malformed Location, or to one carrying user info, is refused.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from providers.cloud.offers import Progress, no_progress
from providers.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    scrub,
)
from providers.retry import backoff_delay
from providers.urls import (
    UnusableLocation,
    Url,
    UrlError,
    check_location,
    display,
    origin,
    parse,
    resolve,
)

if TYPE_CHECKING:
    import httpx

_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
MAX_REDIRECTS = 10
_CREDENTIAL_HEADERS = {"authorization", "x-amz-security-token", "x-amz-date", "cookie"}
_SECRET_HEADERS = {"authorization", "x-amz-security-token", "cookie", "x-api-key", "x-goog-api-key"}
# Query parameters that carry credentials (GCP's `key`, SAS and presigned URLs' signatures).
_SECRET_PARAMS = {
    "key",
    "api_key",
    "apikey",
    "access_token",
    "token",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
}
_SIGV4_SECRETS = re.compile(r"Credential=([^/,\s]+)|Signature=([0-9a-fA-F]+)")
_LEARNED_MIN = 4  # a shorter value would scrub ordinary words out of every message


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
                event_hooks={"response": [check_location]},
            )
        return self._clients[scheme]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def scrub(self, text: str) -> str:
        return scrub(text, self.secrets)

    def _learn(
        self, url: str, params: Mapping[str, str] | None, headers: Mapping[str, str] | None
    ) -> None:
        """Remember every credential this request carries, so no answer can echo one."""
        for secret in request_secrets(url, params, headers):
            if len(secret) >= _LEARNED_MIN and secret not in self.secrets:
                self.secrets.append(secret)

    def _where(self, url: str) -> str:
        # A redirect's path is the server's to choose, and may echo a secret.
        return self.scrub(f"{self.provider}: {display(url)}")

    def _check_url(self, url: str) -> None:
        """A malformed base URL is a setting to fix, not an unexpected crash in httpx."""
        try:
            parse(url, userinfo=True, spaces=True)
        except UrlError as exc:
            raise ConfigError(
                self.scrub(
                    f"{self.provider}: {display(url)} is not a usable URL: {exc}; fix the "
                    "provider's base URL setting (environment variable or config file)"
                )
            ) from None

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
        sent = dict(headers or {})
        first = origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            client = self.client(url)
            request = client.build_request("GET", url, params=params, headers=sent)
            try:
                response = client.send(request, stream=True)
            except UnusableLocation as exc:
                raise self._unusable(url, exc.status, str(exc)) from None
            location = response.headers.get("location")
            if response.status_code not in (301, 302, 303, 307, 308) or not location:
                return response
            response.close()
            target = self._redirect(url, str(request.url), response.status_code, location)
            if url.startswith("https:") and target.scheme != "https":
                raise ShoalError(
                    f"{self._where(url)}: redirect from https to "
                    f"{self.scrub(display(target.text))} refused"
                )
            if target.origin != first:
                sent = {k: v for k, v in sent.items() if k.lower() not in _CREDENTIAL_HEADERS}
            url, params = target.text, None
        raise ShoalError(f"{self._where(url)}: more than {MAX_REDIRECTS} redirects")

    def _redirect(self, url: str, sent_to: str, code: int, location: str) -> Url:
        """Where a redirect points; a Location that cannot be followed is the server's fault
        (exit 1), said without the Location's text, which may carry a secret."""
        try:
            return resolve(sent_to, location)
        except UrlError as exc:
            raise self._unusable(url, code, str(exc)) from None

    def _unusable(self, url: str, code: int, reason: str) -> ShoalError:
        return ShoalError(
            f"{self._where(url)}: HTTP {code} redirect refused, its Location is unusable: "
            f"{self.scrub(reason)}; the server (or mirror) is misconfigured"
        )

    def _send(
        self, url: str, params: Mapping[str, str] | None, headers: Mapping[str, str] | None
    ) -> httpx.Response:
        """A response with a 2xx status, after retries; the body is not read yet."""
        from providers.http import httpx

        self._check_url(url)
        self._learn(url, params, headers)
        last = ""
        for attempt in range(self.policy.attempts):
            try:
                response = self._follow(url, params, headers)
            except httpx.InvalidURL as exc:  # one that parse() let through and httpx did not
                raise ShoalError(self.scrub(f"{self._where(url)}: {exc}")) from None
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


def request_secrets(
    url: str, params: Mapping[str, str] | None, headers: Mapping[str, str] | None
) -> list[str]:
    """The credentials a request carries, as the strings a server could echo: header values
    (and their tokens), credential query parameters, and the URL's user info."""
    from urllib.parse import parse_qsl, unquote

    found: list[str] = []
    for name, value in (headers or {}).items():
        if name.lower() in _SECRET_HEADERS:
            found.append(value)
            if name.lower() == "authorization":
                found.extend(_authorization_secrets(value))
    query = list((params or {}).items())
    try:
        parsed = parse(url, userinfo=True, spaces=True)
    except UrlError:
        return found
    query += parse_qsl(parsed.query, keep_blank_values=True)
    found.extend(value for name, value in query if name.lower() in _SECRET_PARAMS)
    if parsed.userinfo:
        found += [parsed.userinfo, unquote(parsed.userinfo.partition(":")[2])]
    return found


def _authorization_secrets(value: str) -> list[str]:
    """`Bearer T` -> T; `Basic B` -> B, user:password, password; AWS SigV4 -> the access key
    id and the signature (the key id is not secret alone, but it names the account)."""
    import base64
    import binascii

    scheme, _, token = value.strip().partition(" ")
    token = token.strip()
    if scheme.upper().startswith("AWS4-"):
        return [part for pair in _SIGV4_SECRETS.findall(token) for part in pair if part]
    if scheme.lower() != "basic":
        return [token]
    try:
        pair = base64.b64decode(token, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return [token]
    return [token, pair, pair.partition(":")[2]]
