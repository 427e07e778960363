"""A small Kubernetes API client over httpx: get, paged list, create, delete.

TLS follows the kubeconfig (`tls`): the cluster's CA, the user's client certificate, and
`tls-server-name` sent as SNI and checked against the server's certificate (httpcore's
`sni_hostname` request extension); a TLS failure is said as the kubeconfig's to fix. A
plain-HTTP server (`http://`, no proxy) is reached through `plain`'s transport instead of
httpx's: no SSL context, no httpcore.

Requests go through the shared client (providers.core.http): its retries (creates only when the
request cannot have been processed: a refused connection, 429), its scrub of every string
the server sent (reason phrase, Status reason and message, Location), and ERRORS, this
API's own, from its Status objects (`kind: Status`, `reason`, `message`, `code`). A 401
re-runs an exec plugin or re-reads a tokenFile, once, first. A redirect is not followed
(the API server's address belongs in the kubeconfig) but reported with where it pointed.

Paging: `list` follows `metadata.continue`. A continue token that expired (410 Gone, reason
Expired) cannot be resumed, and items already yielded cannot be taken back, so `list` raises
ListExpiredError; `collect` runs a consumer over a list and restarts it once from the
beginning on that error, as the docs tell clients to do. A list can read its pages with a
`PageReader` (a typed decoder of the few fields its caller reads; a page it cannot read
goes the standard way, `json.loads`, with the standard errors), and with `prefetch` fetch
the next page on a thread while the caller works through this one, when fetching a page is
mostly waiting for the server and the link (`_Prefetcher` says when): the continue token is
guessed from the page's head (`metadata` comes before `items`) and the guess is checked
against the page once it is read; a wrong guess is fetched again, as asked.

Docs:
- https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks
- https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/
- https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions
- https://kubernetes.io/docs/reference/kubernetes-api/common-parameters/common-parameters/
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from providers.core.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.http.client import HttpClient, Request, release
from providers.core.http.policy import ErrorMap, Kind, RetryPolicy, Rule
from providers.core.urls import display
from providers.kubernetes.connection import Connection
from providers.kubernetes.credentials import read_token_file

if TYPE_CHECKING:
    import ssl

    import httpx

    from providers.kubernetes.exec_plugin import ExecCredential

T = TypeVar("T")
I_co = TypeVar("I_co", covariant=True)
Json = dict[str, Any]


class PageReader(Protocol[I_co]):
    """A list page's bytes -> (continue token, resourceVersion, items), or None for a page
    it does not read (then the standard decoding reads it, and says what is wrong with it).
    Items are what the caller iterates: the reader's own, or the JSON objects of pages it
    left to the standard decoding."""

    def __call__(self, body: bytes) -> tuple[str, str, Sequence[I_co]] | None: ...


class ExpiredError(RetryableError):
    """410 Gone: a resourceVersion or continue token the server no longer has."""


class ListExpiredError(ExpiredError):
    """A list's continue token expired part-way through the list."""


def status_of(body: bytes, reason: str) -> tuple[str, str]:
    """The reason and message of the API's Status object; nothing from another body (a
    proxy's page)."""
    try:
        value = json.loads(body or b"null")
    except (ValueError, RecursionError):
        return "", ""
    if isinstance(value, dict) and value.get("kind") == "Status":
        return str(value.get("reason") or ""), str(value.get("message") or "")
    return "", ""


_SERVER = "set the cluster's server in {source} to the address that answers"
ERRORS = ErrorMap(where="kubernetes: {method} {target}", explain=status_of, rules=(
    Rule(range(300, 400), ShoalError, "{where}: {status}: the API server {server} redirects "
         "{location}, which shoal does not follow; " + _SERVER),
    Rule(401, CredentialsError, "{where}: {status}: token expired or invalid; refresh your "
         "kubeconfig credentials (user {user} in {source})"),
    Rule(403, CredentialsError, "{where}: {status}{said}; ask for RBAC access or use another "
         "namespace or context"),
    Rule(404, NotFoundError, "{where}: {status}{said}"),
    Rule((400, 422), UsageError, "{where}: {status}{said}"),
    Rule(410, ExpiredError, "{where}: {status}{said}; run again"),
    Rule(429, RetryableError, "{where}: {status}{said}: throttled after {attempts} attempts; try "
         "again later"),
    Rule(range(500, 600), ProviderUnreachableError, "{where}: {status}{said} after {attempts} "
         "attempts; the API server {server} is failing, try again later"),
    Rule(Kind.LOCATION, ShoalError, "{where}: HTTP {code}: the API server {server} redirects to "
         "an unusable Location ({reason}), which shoal does not follow; " + _SERVER),
    Rule(Kind.UNREACHABLE, ProviderUnreachableError, "kubernetes: cannot reach the API server "
         "{server}: {error} after {attempts} attempts; check the network/VPN or the cluster's "
         "server in {source}"),
    Rule(Kind.JSON, ShoalError, "{where}: the API server answered malformed JSON (HTTP {code}); "
         "is {server} a Kubernetes API?"),
))  # fmt: skip


class KubeClient:
    """One cluster, one user. Not thread-safe; make one per thread."""

    def __init__(
        self,
        connection: Connection,
        *,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        conn = self.connection = connection
        self.policy = policy or RetryPolicy()
        self.last_resource_version = ""  # of the last list page read
        self._token = connection.token
        self._exec: ExecCredential | None = None
        self._cert: tuple[bytes, bytes] | None = None  # the exec plugin's, in the TLS context
        if transport is None:
            from providers.kubernetes import plain

            if plain.usable(conn.server):
                transport = plain.PlainTransport()
        self.http = HttpClient(
            conn.server,
            errors=ERRORS.extended(server=self._where(), source=conn.source, user=repr(conn.user)),
            policy=self.policy,
            credentials=self._auth_headers,
            refresh=self._refresh,
            secrets=list(conn.secrets()),  # and what the requests carry: the client learns it
            headers={"Accept": "application/json"},
            transport=transport,
            verify=self._ssl_context,
            extensions={"sni_hostname": conn.tls_server_name} if conn.tls_server_name else None,
            follow_redirects=False,
            fatal=self._tls_failure,
            sleep=sleep,
        )

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    # -- verbs -----------------------------------------------------------------------------

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Json:
        return self._object("GET", path, self.http.request("GET", path, params=params))

    def create(self, path: str, body: Mapping[str, Any]) -> Json:
        response = self.http.request("POST", path, body=body, idempotent=False)
        return self._object("POST", path, response)

    def delete(
        self, path: str, grace_seconds: int | None = None, *, propagation: str = "Background"
    ) -> Json | None:
        """The deleted (or terminating) object, or the API's Status; None when already gone.
        `propagation` Background deletes a Job's pods too (the API's default orphans them)."""
        options: Json = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            options["propagationPolicy"] = propagation
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        try:
            response = self.http.request("DELETE", path, body=options)
        except NotFoundError:
            return None
        return self._object("DELETE", path, response) if response.content else None

    def list(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        limit: int = 500,
        *,
        page: PageReader[T] | None = None,
        prefetch: bool = False,
    ) -> Generator[Json | T, None, None]:
        """Every item of a list, page by page (`limit` per page; 0 asks for all at once);
        `page` and `prefetch` as the module docstring says."""
        query = dict(params or {})
        if limit > 0:
            query["limit"] = str(limit)
        read = 0
        fetcher = _Prefetcher(self._fetch, _guess_next if prefetch else None)

        def read_page(request: Request) -> tuple[str, Sequence[Json | T]]:
            nonlocal read
            response = fetcher.get(request)
            read += 1
            return self._page(response, path, page)

        try:
            for _, items in self.http.pages(Request(path, query), _next, read=read_page):
                yield from items
        except ExpiredError:
            if read:
                raise ListExpiredError(
                    f"kubernetes: GET {path}: the list changed too much while paging (410 "
                    "Expired continue token); run again"
                ) from None
            raise
        finally:
            fetcher.close()

    def collect(
        self,
        path: str,
        consume: Callable[[Iterator[Any]], T],
        params: Mapping[str, str] | None = None,
        limit: int = 500,
        *,
        page: PageReader[Any] | None = None,
        prefetch: bool = False,
    ) -> T:
        """`consume(items)` over a whole list; restarted once from the first page when the
        continue token expires mid-way (consume must start from scratch each call)."""
        try:
            return self._consume(path, consume, params, limit, page, prefetch)
        except ListExpiredError:
            return self._consume(path, consume, params, limit, page, prefetch)

    def _consume(
        self,
        path: str,
        consume: Callable[[Iterator[Any]], T],
        params: Mapping[str, str] | None,
        limit: int,
        page: PageReader[Any] | None,
        prefetch: bool,
    ) -> T:
        items = self.list(path, params, limit, page=page, prefetch=prefetch)
        try:
            return consume(items)
        finally:
            items.close()  # now, not when collected: a page fetched ahead is waited for

    def _fetch(self, request: Request) -> httpx.Response:
        return self.http.request(
            "GET", request.target, params=request.params, headers=request.headers
        )

    def _page(
        self, response: httpx.Response, path: str, page: PageReader[T] | None
    ) -> tuple[str, Sequence[Json | T]]:
        """(continue token, items) of a list page, by the reader when it reads the page."""
        body = response.content
        read = page(body) if page is not None and _utf8(body) else None
        if read is not None:
            release(response)
            self.last_resource_version = read[1]
            return read[0], read[2]
        value = self.http.decode(response, "GET", path)
        release(response)
        if not isinstance(value, dict):
            raise ShoalError(f"kubernetes: GET {path}: expected a JSON object")
        found = value.get("items")
        if found is not None and not isinstance(found, list):
            raise ShoalError(f"kubernetes: GET {path}: the answer's items is not a list")
        meta = _meta(value)
        self.last_resource_version = str(meta.get("resourceVersion") or "")
        token = meta.get("continue")
        return (str(token) if token else ""), found or []

    # -- plumbing --------------------------------------------------------------------------

    def _object(self, method: str, path: str, response: httpx.Response) -> Json:
        value = self.http.decode(response, method, path)
        if not isinstance(value, dict):
            raise ShoalError(f"kubernetes: {method} {path}: expected a JSON object")
        return value

    def _ssl_context(self) -> ssl.SSLContext:
        from providers.kubernetes.tls import ssl_context

        return ssl_context(self.connection, self._exec_cert())

    def _exec_cert(self) -> tuple[bytes, bytes] | None:
        cred = self._exec
        if cred is not None and cred.client_cert and cred.client_key:
            return (cred.client_cert, cred.client_key)
        return None

    def _auth_headers(self) -> dict[str, str]:
        """The user's credentials, asked again at each attempt (an exec plugin's expire); a
        new client certificate from the plugin makes the next connection use it."""
        conn = self.connection
        if conn.exec_plugin is not None:
            from providers.kubernetes.exec_plugin import exec_credential

            self._exec = exec_credential(conn)
            if self._exec_cert() != self._cert:
                self._cert = self._exec_cert()
                self.http.close()
            return {"Authorization": f"Bearer {self._exec.token}"} if self._exec.token else {}
        if self._token:
            return {"Authorization": f"Bearer {self._token}"}
        if conn.username or conn.password:
            pair = f"{conn.username}:{conn.password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        return {}

    def _refresh(self) -> bool:
        """New credentials after a 401, if there is a way to get them."""
        conn = self.connection
        if conn.exec_plugin is not None:
            from providers.kubernetes.exec_plugin import exec_credential

            self._exec = exec_credential(conn, refresh=True)
            return True
        if conn.token_file is not None:
            token = read_token_file(conn.token_file, f"user {conn.user!r} tokenFile")
            if token and token != self._token:
                self._token = token
                return True
        return False

    def _where(self) -> str:
        conn = self.connection
        return f"{display(conn.server)} (context {conn.context!r})"

    def _tls_failure(self, exc: Exception) -> ShoalError | None:
        from providers.kubernetes.tls import tls_failure

        has_exec_cert = self._exec_cert() is not None
        return tls_failure(exc, self.connection, self._where(), has_exec_cert, self.http.scrub)


def _meta(page: Json) -> Json:
    meta = page.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _next(page: tuple[str, Any], request: Request) -> Request | None:
    """The next page of a list: its `metadata.continue` token, if it has one."""
    return request.with_params(**{"continue": page[0]}) if page[0] else None


# The head of a list page as the API server writes it (kind, apiVersion, then metadata, a
# flat object, before the items): enough to guess the next page's request.
_HEAD = re.compile(
    rb'\s*\{\s*(?:"(?:kind|apiVersion)"\s*:\s*"[^"\\]*"\s*,\s*)*"metadata"\s*:\s*(\{[^{}]*\})'
)


def _utf8(body: bytes) -> bool:
    """Whether the body is UTF-8 (what json.loads asks of it, and a typed reader does not
    check in the fields it skips)."""
    if body.isascii():
        return True
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def _guess_next(body: bytes, request: Request) -> Request | None:
    """The next page's request from the page's head, without reading the page; None when the
    head does not tell (the page is read first then)."""
    head = _HEAD.match(body, 0, 4096)
    if head is None:
        return None
    try:
        meta = json.loads(head.group(1))
    except ValueError:
        return None
    token = meta.get("continue") if isinstance(meta, dict) else None
    return request.with_params(**{"continue": str(token)}) if token else None


class _Prefetcher:
    """Fetches a list's pages: the asked one, and, with a `guess`, the one after it on a
    thread while the caller reads this one, when fetching is mostly waiting: a page fetched
    in turn spent twice as long waiting for the server and the link as working (its wall
    time against this thread's CPU time; a busy machine's preemptions rarely make that
    much). Every PROBE-th page is fetched in turn, to time that again. When answers come as
    fast as they are parsed (loopback, a server's cache), fetching is work, not waiting:
    httpx parses each 64 KB of a body in Python, holding the interpreter's lock, so a
    thread would only contend with the caller for it; then every page is fetched in turn.
    Only one request is in flight at a time (the HTTP client is not thread-safe): asking
    for another page, or closing, waits for it."""

    PROBE = 16
    MIN_WAIT = 0.001  # seconds of waiting per page below which a thread cannot pay

    def __init__(
        self,
        fetch: Callable[[Request], httpx.Response],
        guess: Callable[[bytes, Request], Request | None] | None,
        clocks: tuple[Callable[[], float], Callable[[], float]] = (
            time.perf_counter,
            time.thread_time,
        ),
    ) -> None:
        self._fetch, self._guess, self._clocks = fetch, guess, clocks
        self._ahead: tuple[threading.Thread, Request, list[Any]] | None = None
        self._waiting = False  # whether the last page fetched in turn was mostly waiting
        self._pages = 0

    def get(self, request: Request) -> httpx.Response:
        ahead, self._ahead = self._ahead, None
        result: Any = None
        if ahead is not None:
            thread, asked, box = ahead
            thread.join()
            if asked == request:
                result = box[0]
                if isinstance(result, BaseException):
                    raise result
            else:  # a wrong guess: fetched for nothing
                _close(box[0])
        if result is None:
            wall, cpu = (clock() for clock in self._clocks)
            result = self._fetch(request)
            wall, cpu = self._clocks[0]() - wall, self._clocks[1]() - cpu
            self._waiting = wall - cpu > max(2 * cpu, self.MIN_WAIT)
        self._pages += 1
        if self._guess is not None and self._waiting and self._pages % self.PROBE:
            following = self._guess(result.content, request)
            if following is not None:
                box = [None]
                thread = threading.Thread(
                    target=self._run, args=(following, box), name="shoal-page", daemon=True
                )
                thread.start()
                self._ahead = (thread, following, box)
        return result  # type: ignore[no-any-return]

    def _run(self, request: Request, box: list[Any]) -> None:
        try:
            box[0] = self._fetch(request)
        except BaseException as exc:  # handed to the reader, raised there
            box[0] = exc

    def close(self) -> None:
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead[0].join()
            _close(ahead[2][0])


def _close(result: Any) -> None:
    """Let a page fetched for nothing go (its answer, or the error fetching it)."""
    if result is not None and not isinstance(result, BaseException):
        release(result)
