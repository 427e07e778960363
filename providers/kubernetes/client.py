"""A small Kubernetes API client over httpx: get, paged list, create, delete.

TLS follows the kubeconfig (`tls`): the cluster's CA, the user's client certificate, and
`tls-server-name` sent as SNI and checked against the server's certificate (httpcore's
`sni_hostname` request extension); a TLS failure is said as the kubeconfig's to fix.

Requests go through the shared client (providers.core.http): its retries (creates only when the
request cannot have been processed: a refused connection, 429), its scrub of every string
the server sent (reason phrase, Status reason and message, Location), and ERRORS, this
API's own, from its Status objects (`kind: Status`, `reason`, `message`, `code`). A 401
re-runs an exec plugin or re-reads a tokenFile, once, first. A redirect is not followed
(the API server's address belongs in the kubeconfig) but reported with where it pointed.

Paging: `list` follows `metadata.continue`. A continue token that expired (410 Gone, reason
Expired) cannot be resumed, and items already yielded cannot be taken back, so `list` raises
ListExpiredError; `collect` runs a consumer over a list and restarts it once from the
beginning on that error, as the docs tell clients to do.

Docs:
- https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks
- https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/status/
- https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-versions
- https://kubernetes.io/docs/reference/kubernetes-api/common-parameters/common-parameters/
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from providers.core.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.http.client import HttpClient, Request
from providers.core.http.policy import ErrorMap, Kind, RetryPolicy, Rule
from providers.core.urls import display
from providers.kubernetes.connection import Connection
from providers.kubernetes.credentials import read_token_file
from providers.kubernetes.exec_plugin import ExecCredential, exec_credential
from providers.kubernetes.tls import ssl_context, tls_failure

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
Json = dict[str, Any]


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
        self.http = HttpClient(
            conn.server,
            errors=ERRORS.extended(server=self._where(), source=conn.source, user=repr(conn.user)),
            policy=self.policy,
            credentials=self._auth_headers,
            refresh=self._refresh,
            secrets=list(conn.secrets()),  # and what the requests carry: the client learns it
            headers={"Accept": "application/json"},
            transport=transport,
            verify=lambda: ssl_context(conn, self._exec_cert()),
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
        self, path: str, params: Mapping[str, str] | None = None, limit: int = 500
    ) -> Iterator[Json]:
        """Every item of a list, page by page (`limit` per page; 0 asks for all at once)."""
        query = dict(params or {})
        if limit > 0:
            query["limit"] = str(limit)
        read = 0
        try:
            for page in self.http.pages(Request(path, query), _next_page):
                read += 1
                if not isinstance(page, dict):
                    raise ShoalError(f"kubernetes: GET {path}: expected a JSON object")
                items = page.get("items")
                if items is not None and not isinstance(items, list):
                    raise ShoalError(f"kubernetes: GET {path}: the answer's items is not a list")
                self.last_resource_version = str(_meta(page).get("resourceVersion") or "")
                yield from items or ()
        except ExpiredError:
            if read:
                raise ListExpiredError(
                    f"kubernetes: GET {path}: the list changed too much while paging (410 "
                    "Expired continue token); run again"
                ) from None
            raise

    def collect(
        self,
        path: str,
        consume: Callable[[Iterator[Json]], T],
        params: Mapping[str, str] | None = None,
        limit: int = 500,
    ) -> T:
        """`consume(items)` over a whole list; restarted once from the first page when the
        continue token expires mid-way (consume must start from scratch each call)."""
        try:
            return consume(self.list(path, params, limit))
        except ListExpiredError:
            return consume(self.list(path, params, limit))

    # -- plumbing --------------------------------------------------------------------------

    def _object(self, method: str, path: str, response: httpx.Response) -> Json:
        value = self.http.decode(response, method, path)
        if not isinstance(value, dict):
            raise ShoalError(f"kubernetes: {method} {path}: expected a JSON object")
        return value

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
        has_exec_cert = self._exec_cert() is not None
        return tls_failure(exc, self.connection, self._where(), has_exec_cert, self.http.scrub)


def _meta(page: Json) -> Json:
    meta = page.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _next_page(page: Any, request: Request) -> Request | None:
    """The next page of a list: its `metadata.continue` token, if it has one."""
    token = _meta(page).get("continue") if isinstance(page, dict) else None
    return request.with_params(**{"continue": str(token)}) if token else None
