"""A small Kubernetes API client over httpx: get, paged list, create, delete.

TLS follows the kubeconfig: only the cluster's CA is trusted when one is given, client
certificates are loaded from their files (or from `*-data` through 0600 temporary files that
are removed once loaded), `tls-server-name` is sent as SNI and checked against the server's
certificate (httpcore's `sni_hostname` request extension).

Errors come from the API's Status objects (`kind: Status`, `reason`, `message`, `code`):
401 -> CredentialsError (an exec plugin is re-run, a tokenFile re-read, once first),
403 -> CredentialsError with the API's message, 404 -> NotFoundError, 409 -> ShoalError,
400/422 -> UsageError, 410 -> RetryableError. 429 and 5xx are retried with backoff that
honours Retry-After (up to the policy's cap), then RetryableError (429) or
ProviderUnreachableError (5xx). Creates are retried only when the request cannot have been
processed (a refused connection, 429). A redirect is not followed (the API server's address
belongs in the kubeconfig) but reported with where it pointed. Messages never contain a
token or password: every string the server sent (reason phrase, Status reason and message,
Location) is scrubbed of them, in every form the shared scrub knows.

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
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from providers.cloud.http import RetryPolicy
from providers.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
    scrub,
)
from providers.kubernetes.kubeconfig import (
    Connection,
    ExecCredential,
    exec_credential,
    read_token_file,
)
from providers.retry import backoff_delay
from providers.urls import UnusableLocation, UrlError, check_location, display, resolve

if TYPE_CHECKING:
    import httpx

T = TypeVar("T")
_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
Json = dict[str, Any]


class ExpiredError(RetryableError):
    """410 Gone: a resourceVersion or continue token the server no longer has."""


class ListExpiredError(ExpiredError):
    """A list's continue token expired part-way through the list."""


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
        self.connection = connection
        self.policy = policy or RetryPolicy()
        self.last_resource_version = ""  # of the last list page read
        self._transport = transport
        self._sleep = sleep
        self._http: httpx.Client | None = None
        self._http_cert: tuple[bytes, bytes] | None = None
        self._token = connection.token
        self._exec: ExecCredential | None = None
        self._secrets: list[str] = list(connection.secrets())
        if connection.username and connection.password:
            # Basic auth sends the pair; the shared scrub finds its base64 from it.
            self._secrets.append(f"{connection.username}:{connection.password}")

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    # -- verbs -----------------------------------------------------------------------------

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Json:
        return self._json("GET", path, self._send("GET", path, params=params))

    def create(self, path: str, body: Mapping[str, Any]) -> Json:
        data = json.dumps(body, separators=(",", ":")).encode()
        return self._json("POST", path, self._send("POST", path, content=data, idempotent=False))

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
        data = json.dumps(options).encode()
        try:
            response = self._send("DELETE", path, content=data)
        except NotFoundError:
            return None
        return self._json("DELETE", path, response) if response.content else None

    def list(
        self, path: str, params: Mapping[str, str] | None = None, limit: int = 500
    ) -> Iterator[Json]:
        """Every item of a list, page by page (`limit` per page; 0 asks for all at once)."""
        query = dict(params or {})
        if limit > 0:
            query["limit"] = str(limit)
        pages = 0
        while True:
            try:
                page = self._json("GET", path, self._send("GET", path, params=query))
            except ExpiredError:
                if pages:
                    raise ListExpiredError(
                        f"kubernetes: GET {path}: the list changed too much while paging (410 "
                        "Expired continue token); run again"
                    ) from None
                raise
            pages += 1
            items = page.get("items")
            meta = page.get("metadata")
            if not isinstance(meta, dict):
                meta = {}
            if items is not None and not isinstance(items, list):
                raise ShoalError(f"kubernetes: GET {path}: the answer's items is not a list")
            self.last_resource_version = str(meta.get("resourceVersion") or "")
            yield from items or ()
            token = meta.get("continue") or ""
            if not token:
                return
            query["continue"] = str(token)

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

    def _url(self, path: str) -> str:
        return self.connection.server + "/" + path.lstrip("/")

    def _client(self) -> httpx.Client:
        from providers.http import httpx

        cert = self._exec_cert()
        if self._http is not None and cert == self._http_cert:
            return self._http
        self.close()
        self._http = httpx.Client(
            verify=ssl_context(self.connection, cert) if self._transport is None else True,
            transport=self._transport,
            timeout=httpx.Timeout(
                self.policy.read_timeout_seconds, connect=self.policy.connect_timeout_seconds
            ),
            headers={"User-Agent": "shoal", "Accept": "application/json"},
            event_hooks={"response": [check_location]},
        )
        self._http_cert = cert
        return self._http

    def _exec_cert(self) -> tuple[bytes, bytes] | None:
        cred = self._exec
        if cred is not None and cred.client_cert and cred.client_key:
            return (cred.client_cert, cred.client_key)
        return None

    def _auth_headers(self) -> dict[str, str]:
        conn = self.connection
        if conn.exec_plugin is not None:
            self._exec = exec_credential(conn)
            self._remember(self._exec.token)
            if self._exec.token:
                return {"Authorization": f"Bearer {self._exec.token}"}
            return {}
        if self._token:
            return {"Authorization": f"Bearer {self._token}"}
        if conn.username or conn.password:
            pair = f"{conn.username}:{conn.password}".encode()
            return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}
        return {}

    def _remember(self, secret: str) -> None:
        if len(secret) >= 4 and secret not in self._secrets:
            self._secrets.append(secret)

    def _refresh(self) -> bool:
        """New credentials after a 401, if there is a way to get them."""
        conn = self.connection
        if conn.exec_plugin is not None:
            self._exec = exec_credential(conn, refresh=True)
            self._remember(self._exec.token)
            return True
        if conn.token_file is not None:
            token = read_token_file(conn.token_file, f"user {conn.user!r} tokenFile")
            if token and token != self._token:
                self._token = token
                self._remember(token)
                return True
        return False

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        content: bytes | None = None,
        idempotent: bool = True,
    ) -> httpx.Response:
        """A 2xx response (body read), after retries and one credential refresh."""
        from providers.http import httpx

        headers = {"Content-Type": "application/json"} if content is not None else {}
        extensions: dict[str, Any] = {}
        if self.connection.tls_server_name:
            extensions["sni_hostname"] = self.connection.tls_server_name
        refreshed = False
        attempt = 0
        while True:
            attempt += 1
            try:
                auth = self._auth_headers()
                response = self._client().request(
                    method,
                    self._url(path),
                    params=params,
                    content=content,
                    headers={**headers, **auth},
                    extensions=extensions,
                )
            except UnusableLocation as exc:
                raise ShoalError(
                    f"kubernetes: {method} {path}: HTTP {exc.status}: the API server "
                    f"{self._where()} redirects to an unusable Location "
                    f"({self._scrub(str(exc))}), which shoal does not follow; set the cluster's "
                    f"server in {self.connection.source} to the address that answers"
                ) from None
            except httpx.InvalidURL as exc:  # a path built from a name httpx will not take
                raise ShoalError(self._scrub(f"kubernetes: {method} {path}: {exc}")) from None
            except httpx.TransportError as exc:
                tls = self._tls_failure(exc)
                if tls is not None:
                    raise tls from None
                # A refused connection never reached the server: safe to retry any verb.
                safe = idempotent or isinstance(exc, httpx.ConnectError)
                if safe and attempt < self.policy.attempts:
                    self._sleep(self._delay(attempt, None))
                    continue
                raise self._unreachable(exc, attempt) from None
            code = response.status_code
            if 200 <= code < 300:
                return response
            if code == 401 and not refreshed and self._refresh():
                refreshed = True
                attempt -= 1
                continue
            retry = code in _RETRY_STATUS and (idempotent or code == 429)
            if retry and attempt < self.policy.attempts:
                self._sleep(self._delay(attempt, response))
                continue
            raise self._status_error(method, path, response, attempt)

    def _json(self, method: str, path: str, response: httpx.Response) -> Json:
        try:
            value = json.loads(response.content)
        except ValueError:
            raise ShoalError(
                f"kubernetes: {method} {path}: the API server answered malformed JSON "
                f"(HTTP {response.status_code}); is {display(self.connection.server)} a "
                "Kubernetes API?"
            ) from None
        if not isinstance(value, dict):
            raise ShoalError(f"kubernetes: {method} {path}: expected a JSON object")
        return value

    def _delay(self, attempt: int, response: httpx.Response | None) -> float:
        """`attempt` counts from 1 here."""
        retry_after = response.headers.get("retry-after", "") if response is not None else ""
        policy = self.policy
        return backoff_delay(
            attempt - 1, policy.backoff_seconds, policy.max_delay_seconds, retry_after
        )

    def _scrub(self, text: str) -> str:
        return " ".join(scrub(text, self._secrets).split())

    # -- errors ----------------------------------------------------------------------------

    def _where(self) -> str:
        conn = self.connection
        return f"{display(conn.server)} (context {conn.context!r})"

    def _unreachable(self, exc: Exception, attempts: int) -> ShoalError:
        reason = self._scrub(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        return ProviderUnreachableError(
            f"kubernetes: cannot reach the API server {self._where()}: {reason[:200]} after "
            f"{attempts} attempts; check the network/VPN or the cluster's server in "
            f"{self.connection.source}"
        )

    def _tls_failure(self, exc: Exception) -> ShoalError | None:
        """A TLS failure, which retrying cannot fix, as a clear error; None for other faults."""
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, ssl.SSLError):
            cause = cause.__cause__ or cause.__context__
        conn = self.connection
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = cause.verify_message or "certificate verify failed"
            if "hostname" in detail.lower() or "ip address" in detail.lower():
                fix = "set tls-server-name (or the server URL) to a name the certificate has"
            else:
                fix = "check certificate-authority(-data), the CA to trust,"
            return ProviderUnreachableError(
                f"kubernetes: TLS verification of {self._where()} failed ({detail}); {fix} "
                f"of cluster {conn.cluster!r} in {conn.source}"
            )
        if cause is None:
            return None
        text = str(cause).upper()
        if "CERTIFICATE_REQUIRED" in text or "BAD_CERTIFICATE" in text or "UNKNOWN_CA" in text:
            has_cert = conn.client_cert_data or conn.client_cert_file or self._exec_cert()
            what = "refused the TLS client certificate" if has_cert else "requires a client cert"
            return CredentialsError(
                f"kubernetes: {self._where()} {what}; set a valid client-certificate and "
                f"client-key for user {conn.user!r} in {conn.source}"
            )
        return ProviderUnreachableError(
            f"kubernetes: TLS handshake with {self._where()} failed "
            f"({self._scrub(cause.reason or str(cause))[:120]}); check the server URL and CA"
        )

    def _status_error(
        self, method: str, path: str, response: httpx.Response, attempts: int
    ) -> ShoalError:
        code = response.status_code
        status = _status(response)
        reason = self._scrub(str(status.get("reason") or response.reason_phrase or ""))[:80]
        message = self._scrub(str(status.get("message") or ""))[:300]
        where = f"kubernetes: {method} {path}: HTTP {code} {reason}".rstrip()
        said = f": {message}" if message else ""
        conn = self.connection
        if 300 <= code < 400:
            return ShoalError(
                f"{where}: the API server {self._where()} redirects{self._location(response)}, "
                f"which shoal does not follow; set the cluster's server in {conn.source} to "
                "the address that answers"
            )
        if code == 401:
            return CredentialsError(
                f"{where}: token expired or invalid; refresh your kubeconfig credentials "
                f"(user {conn.user!r} in {conn.source})"
            )
        if code == 403:
            return CredentialsError(
                f"{where}{said}; ask for RBAC access or use another namespace or context"
            )
        if code == 404:
            return NotFoundError(f"{where}{said}")
        if code == 409:
            return ShoalError(f"{where}{said}")
        if code in (400, 422):
            return UsageError(f"{where}{said}")
        if code == 410:
            return ExpiredError(f"{where}{said}; run again")
        if code == 429:
            return RetryableError(
                f"{where}{said}: throttled after {attempts} attempts; try again later"
            )
        if code >= 500:
            return ProviderUnreachableError(
                f"{where}{said} after {attempts} attempts; the API server {self._where()} is "
                "failing, try again later"
            )
        return ShoalError(f"{where}{said}")

    def _location(self, response: httpx.Response) -> str:
        """Where a redirect points, scrubbed; a malformed Location said as such."""
        location = response.headers.get("location")
        if not location:
            return ""
        try:
            target = resolve(str(response.request.url), location)
        except UrlError as exc:
            return f" to an unusable Location ({self._scrub(str(exc))})"
        return f" to {self._scrub(display(target.text))}"


def _status(response: httpx.Response) -> Json:
    """The API's Status object, or {} when the body is something else (a proxy's page)."""
    try:
        body = json.loads(response.content[:65536] or b"null")
    except ValueError:
        return {}
    if isinstance(body, dict) and body.get("kind") == "Status":
        return body
    return {}


# -- TLS -----------------------------------------------------------------------------------


def ssl_context(
    connection: Connection, exec_cert: tuple[bytes, bytes] | None = None
) -> ssl.SSLContext:
    """The TLS context kubectl would use: the cluster's CA only (system roots without one)
    and the user's client certificate."""
    conn = connection
    where = f"cluster {conn.cluster!r} in {conn.source}"
    if conn.insecure_skip_tls_verify:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        try:
            if conn.ca_data is not None:
                ctx = ssl.create_default_context(cadata=conn.ca_data.decode("ascii", "replace"))
            elif conn.ca_file is not None:
                ctx = ssl.create_default_context(cafile=str(conn.ca_file))
            else:
                ctx = ssl.create_default_context()
        except (ssl.SSLError, OSError, ValueError):
            field = "certificate-authority-data" if conn.ca_data else "certificate-authority"
            raise ConfigError(
                f"kubernetes: {field} of {where} is not a readable PEM certificate"
            ) from None
    user = f"user {conn.user!r} in {conn.source}"
    if exec_cert is not None:
        _load_cert_data(ctx, exec_cert[0], exec_cert[1], f"the exec plugin's certificate of {user}")
    elif conn.client_cert_data is not None or conn.client_key_data is not None:
        cert = conn.client_cert_data or _read(conn.client_cert_file)
        key = conn.client_key_data or _read(conn.client_key_file)
        _load_cert_data(ctx, cert, key, f"client-certificate/client-key of {user}")
    elif conn.client_cert_file is not None and conn.client_key_file is not None:
        try:
            ctx.load_cert_chain(str(conn.client_cert_file), str(conn.client_key_file))
        except (ssl.SSLError, OSError):
            raise ConfigError(
                f"kubernetes: client-certificate/client-key of {user} are not a matching PEM "
                "certificate and key"
            ) from None
    return ctx


def _read(path: Path | None) -> bytes:
    if path is None:
        return b""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"kubernetes: cannot read {path} ({exc.strerror})") from None


def _load_cert_data(ctx: ssl.SSLContext, cert: bytes, key: bytes, what: str) -> None:
    """load_cert_chain only reads files: write both to a private directory (0700, files
    0600), load, and remove them at once."""
    directory = tempfile.mkdtemp(prefix="shoal-k8s-")
    try:
        paths = []
        for name, data in (("cert.pem", cert), ("key.pem", key)):
            path = os.path.join(directory, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            paths.append(path)
        try:
            ctx.load_cert_chain(paths[0], paths[1])
        except ssl.SSLError:
            raise ConfigError(
                f"kubernetes: {what} are not a matching PEM certificate and key"
            ) from None
    finally:
        shutil.rmtree(directory, ignore_errors=True)
