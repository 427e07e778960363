"""The one JSON-over-HTTP client: cloud prices, Kubernetes, image pulls, the container engine.

Retries follow the RetryPolicy (a request that is not idempotent only when it cannot have
been processed: a refused connection, 429, or an answer the ErrorMap reads as throttled
whatever its status). Redirects are followed by hand, or not at all:
each hop gets the httpx client of its scheme, credentials go only to the origin first asked,
an https -> http hop, an unusable Location and more than MAX_REDIRECTS are refused. Every
failure becomes what the API's ErrorMap says, every string a server sent (reason phrase,
body, Location, a protocol error quoting its bytes) scrubbed first of the secrets: those
given, and every credential a request carried, learned as it is sent.
"""

from __future__ import annotations

import functools
import json
import random
import re
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from providers.core import urls
from providers.core.errors import ShoalError, one_line
from providers.core.http.policy import ErrorMap, Failure, Kind, RetryPolicy
from providers.core.numbers import reject_constant

if TYPE_CHECKING:
    import ssl

    import httpx

MAX_REDIRECTS = 10
MAX_BYTES = 64 << 20  # a JSON answer past this is a broken or hostile server
_PEEK_BYTES = 64 << 10  # of an error's body, for the API's own message
_LEARNED_MIN = 4  # a shorter value would scrub ordinary words out of every message
_LIMITS = {"reason": 80, "message": 300, "error": 200, "location": 300}  # scrubbed texts
# Sent only to the origin they were given for; their values (and their tokens) are secrets.
CREDENTIAL_HEADERS = frozenset({
    "authorization", "proxy-authorization", "cookie", "x-api-key", "x-goog-api-key",
    "x-amz-security-token", "x-amz-date",
})  # fmt: skip
# Query parameters that carry credentials (GCP's `key`, SAS and presigned URLs' signatures).
_SECRET_PARAMS = frozenset({
    "key", "api_key", "apikey", "access_token", "token", "sig", "signature", "x-amz-signature",
    "x-amz-credential", "x-amz-security-token",
})  # fmt: skip
_SIGV4_SECRETS = re.compile(r"Credential=([^/,\s]+)|Signature=([0-9a-fA-F]+)")

Headers = Mapping[str, str]


@dataclass(frozen=True)
class Request:
    """One page's request, for `HttpClient.pages`."""

    target: str
    params: Headers | None = None
    headers: Headers | None = None

    def with_params(self, **params: str) -> Request:
        return replace(self, params={**(self.params or {}), **params})


@dataclass(frozen=True, eq=False, repr=False)  # no repr: a body may quote anything
class Body:
    """A JSON answer's bytes, and `decode()`: its JSON as `get_json` reads it (malformed JSON
    is the map's JSON error)."""

    raw: bytes
    decode: Callable[[], Any]


@dataclass(eq=False, repr=False)  # no repr: it would show the credentials
class HttpClient:
    """One API's client, for URLs or for paths under `base_url`. Not thread-safe.

    `credentials`: headers sent only to the origin asked (a function: asked again at each
    attempt, for a token that changes); `refresh()`: new credentials after a 401, once (true
    when there are); `verify()`: the TLS context for https (else the system's CAs);
    `transport`: one httpx transport for every scheme (tests, a unix socket); `fatal(exc)`: a
    connection failure no retry can fix (TLS), as its error, or None."""

    base_url: str = ""
    _: KW_ONLY
    errors: ErrorMap = field(default_factory=ErrorMap)
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    credentials: Headers | Callable[[], Headers] | None = None
    refresh: Callable[[], bool] | None = None
    secrets: list[str] = field(default_factory=list)
    headers: Headers = field(default_factory=dict)
    transport: httpx.BaseTransport | None = None
    verify: Callable[[], ssl.SSLContext] | None = None
    extensions: Mapping[str, Any] | None = None
    follow_redirects: bool = True
    fatal: Callable[[Exception], ShoalError | None] | None = None
    sleep: Callable[[float], None] = time.sleep
    draw: Callable[[], float] = random.random
    max_bytes: int = MAX_BYTES
    _clients: dict[bool, httpx.Client] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self.base_url, self.secrets = self.base_url.rstrip("/"), [s for s in self.secrets if s]

    def _url(self, target: str) -> str:
        return self.base_url + "/" + target.lstrip("/") if self.base_url else target

    def _client(self, url: str) -> httpx.Client:
        """One httpx client for https, one for http: a CA bundle costs ~40 ms to load and
        only https needs it. After `close()` they are built again (with a new certificate)."""
        from providers.core.http import httpx

        https = urls.origin(url)[0] == "https" and self.transport is None
        if https not in self._clients:
            self._clients[https] = httpx.Client(
                transport=self.transport,
                verify=self.verify() if https and self.verify else https,
                timeout=httpx.Timeout(
                    self.policy.read_timeout_seconds, connect=self.policy.connect_timeout_seconds
                ),
                headers={"User-Agent": "shoal", **self.headers},
                event_hooks={"response": [urls.check_location]},
            )
        return self._clients[https]

    def close(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    def scrub(self, text: str) -> str:
        """`text` without the client's secrets, on one line."""
        return one_line(text, self.secrets)

    def pause(self, attempt: int, retry_after: str = "") -> None:
        """Sleep before retry number `attempt` (0 first)."""
        self.sleep(self.policy.delay(attempt, retry_after, self.draw(), time.time()))

    def fail(
        self, kind: int | str, method: str, target: str, url: str = "", **fields: Any
    ) -> ShoalError:
        """The error the map gives this failure; every text in it scrubbed and cut short.
        With a `response`: its status, the API's own reason and message, where it points."""
        response: httpx.Response | None = fields.pop("response", None)
        if response is not None:
            reason, message = self.errors.explain(_peek(response), response.reason_phrase)
            fields.update(code=response.status_code, reason=reason or response.reason_phrase)
            fields.update(message=message, location=_location(response))
        for name, limit in _LIMITS.items():
            if name in fields:
                fields[name] = self.scrub(str(fields[name]))[:limit]
        shown = self.scrub(urls.display(url or self._url(target)))
        failure = Failure(kind, method, self.scrub(urls.display(target)), shown, **fields)
        return self.errors.error(failure)

    # -- one request ---------------------------------------------------------------------

    def open(
        self,
        method: str,
        target: str,
        *,
        params: Headers | None = None,
        headers: Headers | None = None,
        content: Any = None,
        body: Any = None,
        ok: Collection[int] | None = None,
        timeout: float | None = None,
        idempotent: bool = True,
        read: bool = False,
    ) -> httpx.Response:
        """An answer with an `ok` status (any 2xx by default), after retries; the caller
        closes it. With `read` its body is read, at most max_bytes of it. `body` is sent as
        JSON, `content` as it is (bytes, or an iterator of them: never sent twice then)."""
        from providers.core.http import httpx

        try:
            urls.parse(self._url(target), userinfo=True, spaces=True)
        except urls.UrlError as exc:
            raise self.fail(Kind.INVALID_URL, method, target, reason=exc) from None
        sent = dict(headers or {})
        if body is not None:
            content = json.dumps(body, separators=(",", ":")).encode()
            sent.setdefault("Content-Type", "application/json")
        retried = (*(getattr(httpx, name) for name in self.policy.errors), OSError)
        wait = httpx.USE_CLIENT_DEFAULT if timeout is None else timeout
        options = {"content": content, "extensions": self.extensions, "timeout": wait}
        refreshed, attempt = False, 0
        while True:
            attempt, reading = attempt + 1, False
            try:
                response, url, elsewhere = self._follow(method, target, params, sent, **options)
                code = response.status_code
                accepted = code in ok if ok is not None else 200 <= code < 300
                if accepted and read:
                    reading = True
                    self._read(response, method, target, url)
            except httpx.InvalidURL as exc:  # one that parse() let through and httpx did not
                raise self.fail(Kind.INVALID_URL, method, target, reason=exc) from None
            except retried as exc:
                kind = Kind.DROPPED if reading else self._kind(exc)
                safe = idempotent or isinstance(exc, httpx.ConnectError)
                if kind != Kind.DENIED and safe and attempt < self.policy.attempts:
                    self.pause(attempt - 1)
                    continue
                name = type(exc).__name__
                error = f"{name}: {exc}" if str(exc) else name
                if name == "LocalProtocolError":  # h11 quotes the header it refused
                    error = f"{name}: the request could not be sent as given (a header value?)"
                raise self.fail(
                    kind, method, target, error=error, error_name=name, attempts=attempt
                ) from None
            if accepted:
                return response
            if code == 401 and not refreshed and self.refresh is not None and self.refresh():
                response.close()
                refreshed, attempt = True, attempt - 1
                continue
            retry = code in self.policy.statuses and (idempotent or code == 429)
            retry = retry or (code >= 400 and self._throttled(response))
            if retry and attempt < self.policy.attempts:
                response.close()
                self.pause(attempt - 1, response.headers.get("retry-after", ""))
                continue
            raise self.fail(
                code, method, target, url, response=response, attempts=attempt, elsewhere=elsewhere
            )

    def request(self, method: str, target: str, **options: Any) -> httpx.Response:
        """`open` with the body read: `.content`, `.json()` and `.text` work."""
        return self.open(method, target, read=True, **options)

    def _follow(
        self, method: str, target: str, params: Headers | None, headers: Headers, **options: Any
    ) -> tuple[httpx.Response, str, bool]:
        """One request, redirects followed by hand: (the answer, its URL, whether an origin
        other than the one asked gave it, which was then sent no credentials)."""
        url = self._url(target)
        first = urls.origin(url)
        credentials = self.credentials() if callable(self.credentials) else self.credentials
        own = {**headers, **(credentials or {})}
        public = {k: v for k, v in headers.items() if k.lower() not in CREDENTIAL_HEADERS}
        self._learn(url, params, own)
        for _ in range(MAX_REDIRECTS + 1):
            home = urls.origin(url) == first
            client = self._client(url)
            request = client.build_request(
                method, url, params=params, headers=own if home else public, **options
            )
            try:
                response = client.send(request, stream=True)
            except urls.UnusableLocation as exc:
                raise self.fail(
                    Kind.LOCATION, method, target, url, code=exc.status, reason=exc
                ) from None
            location = response.headers.get("location")
            if not (self.follow_redirects and response.status_code in urls.REDIRECTS and location):
                return response, url, not home
            response.close()
            hop = urls.resolve(str(request.url), location)  # checked by the response hook
            if urls.origin(url)[0] == "https" and hop.scheme != "https":
                refused = f"redirect from https to {urls.display(hop.text)} refused"
                raise self.fail(Kind.BROKEN, method, target, url, error=refused)
            url, params = hop.text, None
        loop = f"more than {MAX_REDIRECTS} redirects"
        raise self.fail(Kind.BROKEN, method, target, url, error=loop)

    def _learn(self, url: str, params: Headers | None, headers: Headers) -> None:
        """Remember every credential a request carries, so that no answer can echo one."""
        for secret in request_secrets(url, params, headers):
            if len(secret) >= _LEARNED_MIN and secret not in self.secrets:
                self.secrets.append(secret)

    def _kind(self, exc: Exception) -> str:
        """What a connection failure was; one that no retry can fix is raised at once."""
        from providers.core.http import httpx

        fatal = self.fatal(exc) if self.fatal is not None else None
        if fatal is not None:
            raise fatal from None
        if isinstance(exc, httpx.TimeoutException):
            return Kind.TIMEOUT
        denied = isinstance(exc, PermissionError) or isinstance(exc.__cause__, PermissionError)
        return Kind.DENIED if denied or "Permission denied" in str(exc) else Kind.UNREACHABLE

    def _throttled(self, response: httpx.Response) -> bool:
        """Whether an error answer's body says, in the API's own words, "slow down" (the
        map's `throttled`). The body read is kept for the error's message."""
        if not self.errors.throttled:
            return False
        response._content = _peek(response)  # where Response.read() puts it
        reason, _ = self.errors.explain(response._content, response.reason_phrase)
        return reason in self.errors.throttled

    def _read(self, response: httpx.Response, method: str, target: str, url: str) -> None:
        body, whole = _body(response, self.max_bytes)
        if not whole:
            error = f"the answer is larger than {self.max_bytes} bytes; stopped"
            raise self.fail(Kind.BROKEN, method, target, url, error=error)
        response._content = body  # where Response.read() puts it

    # -- what callers read ---------------------------------------------------------------

    def decode(self, response: httpx.Response, method: str = "GET", target: str = "") -> Any:
        """A read answer's JSON; malformed or too deeply nested JSON is the map's JSON error."""
        try:
            return json.loads(response.content, parse_constant=reject_constant)
        except (ValueError, RecursionError) as exc:
            where = target or str(response.url)
            raise self.fail(
                Kind.JSON, method, where, code=response.status_code, error=exc
            ) from None

    def get_json(self, target: str, **options: Any) -> Any:
        """GET `target` (`params`, `headers`: as `open` takes them) and decode its JSON."""
        return self.get_body(target, **options).decode()

    def get_body(self, target: str, **options: Any) -> Body:
        """GET `target` as `get_json` does, its JSON left as bytes for a reader that parses
        them itself (providers/core/payload.py)."""
        response = self.request("GET", target, **options)
        return Body(response.content, functools.partial(self.decode, response, "GET", target))

    def pages(
        self,
        first: Request,
        next_of: Callable[[Any, Request], Request | None],
        *,
        limit: int = 10_000,
        read: Callable[[Request], Any] | None = None,
    ) -> Iterator[Any]:
        """Every page of a paged list: `first`, then what `next_of(page, its request)` says
        (a next link, a page token, a continue token) until it says None. A request that
        repeats one already made, or more than `limit` pages, is an error. A page is its
        GET's JSON, or what `read(request)` makes of it."""
        request, seen = first, [first]
        for _ in range(limit):
            if read is not None:
                page = read(request)
            else:
                page = self.get_json(request.target, params=request.params, headers=request.headers)
            yield page
            following = next_of(page, request)
            if following is None:
                return
            if following in seen:
                error = "the next page repeats one already read; stopped"
                raise self.fail(Kind.BROKEN, "GET", following.target, error=error)
            seen.append(following)
            request = following
        error = f"more than {limit} pages; stopped"
        raise self.fail(Kind.BROKEN, "GET", request.target, error=error)

    def stream(
        self,
        target: str,
        *,
        headers: Headers | None = None,
        progress: Callable[[int, int | None, str], None] | None = None,
        what: str = "",
        chunk_bytes: int = 1 << 20,
    ) -> Iterator[bytes]:
        """A GET's body in chunks. A drop mid-body resumes from the last byte handed out
        with Range, guarded by If-Range on a strong validator; a server that cannot resume,
        too many drops and a body short of its Content-Length are errors."""
        from providers.core.http import httpx

        asked = {"Accept-Encoding": "identity", **(headers or {})}
        received, total, validator, drops = 0, None, "", 0
        while True:
            cut = f"the connection dropped at byte {received} and the server cannot resume it"
            if received and not validator:
                raise self.fail(Kind.CUT, "GET", target, error=cut + "; try again")
            ask = {**asked, **resume_headers(received, validator)}
            response = self.open("GET", target, headers=ask)
            try:
                if not received:
                    validator = strong_validator(response.headers)
                    total = content_length(response.headers)
                elif response.status_code != 206 or resumed_at(response.headers) != received:
                    raise self.fail(Kind.CUT, "GET", target, error=cut + "; try again")
                try:
                    for chunk in response.iter_raw(chunk_bytes):
                        received += len(chunk)
                        if progress is not None:
                            progress(received, total, what or urls.display(target))
                        yield chunk
                except httpx.TransportError as exc:
                    drops += 1
                    if drops >= self.policy.attempts:
                        name = type(exc).__name__
                        raise self.fail(
                            Kind.DROPPED, "GET", target, attempts=drops, error_name=name
                        ) from None
                    self.pause(drops - 1)
                    continue
            finally:
                response.close()
            if total is not None and received < total:
                ended = f"the body ended at byte {received} of {total}; try again"
                raise self.fail(Kind.CUT, "GET", target, error=ended)
            return


def _body(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body, decoded (a bomb counts at its size), up to `limit` bytes; whether that was
    all of it. The response is closed."""
    chunks: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                return b"".join(chunks)[:limit], False
    finally:
        response.close()
    return b"".join(chunks), True


def release(response: httpx.Response) -> None:
    """Let a read answer's body go now; `content` is empty afterwards. An httpx response and
    its stream refer to each other, so the response is freed by the cycle collector, not
    when its last name goes: a reader of large pages that allocates little between them (a
    typed decoder) would otherwise keep pages until the collector runs."""
    response._content = b""  # where Response.read() puts it


def _peek(response: httpx.Response) -> bytes:
    """The first 64 KiB of an error's body, for the API's own message; b"" if it breaks off."""
    from providers.core.http import httpx

    try:
        return _body(response, _PEEK_BYTES)[0]
    except (httpx.HTTPError, httpx.StreamError, OSError):
        return b""


def _location(response: httpx.Response) -> str:
    """Where an unfollowed 3xx answer points, for a message."""
    location = response.headers.get("location")
    if not 300 <= response.status_code < 400:
        return ""
    if not location:
        return "without a Location"
    try:
        return "to " + urls.display(urls.resolve(str(response.request.url), location).text)
    except urls.UrlError as exc:
        return f"to an unusable Location ({exc})"


# -- resuming a body -----------------------------------------------------------------------


def resume_headers(received: int, validator: str) -> dict[str, str]:
    """What asks for a body from byte `received` on, if it is still the same (none at 0)."""
    return {"Range": f"bytes={received}-", "If-Range": validator} if received else {}


def strong_validator(headers: Headers) -> str:
    """What If-Range may name: a strong ETag, else a Last-Modified at least a second older
    than the answer's Date (RFC 9110 8.8.2.2: the file may change again within that second);
    "" when there is neither."""
    etag, modified = headers.get("etag", ""), headers.get("last-modified", "")
    if etag and not etag.startswith("W/"):
        return etag
    from email.utils import parsedate_to_datetime

    try:
        age = parsedate_to_datetime(headers.get("date", "")) - parsedate_to_datetime(modified)
    except (TypeError, ValueError):
        return ""
    return modified if age.total_seconds() >= 1 else ""


def resumed_at(headers: Headers) -> int | None:
    """The first byte a 206 answer carries (`Content-Range: bytes 1000-1999/2000`)."""
    unit, _, rest = headers.get("content-range", "").partition(" ")
    start = rest.partition("-")[0].strip()
    return int(start) if unit.strip().lower() == "bytes" and start.isdigit() else None


def content_length(headers: Headers) -> int | None:
    length = headers.get("content-length", "")
    return int(length) if length.isdigit() else None


# -- what a request carries ----------------------------------------------------------------


def request_secrets(url: str, params: Headers | None, headers: Headers | None) -> list[str]:
    """The credentials a request carries, as the strings a server could echo: header values
    (and their tokens), credential query parameters, and the URL's user info."""
    from urllib.parse import parse_qsl, unquote

    found: list[str] = []
    for name, value in (headers or {}).items():
        if name.lower() in ("authorization", "proxy-authorization"):
            found.extend(_authorization_secrets(value))  # the scheme's name is no secret
        elif name.lower() in CREDENTIAL_HEADERS - {"x-amz-date"}:
            found.append(value)
    try:
        parsed = urls.parse(url, userinfo=True, spaces=True)
    except urls.UrlError:
        return found
    query = [*(params or {}).items(), *parse_qsl(parsed.query, keep_blank_values=True)]
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
