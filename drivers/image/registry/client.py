"""The distribution protocol (OCI distribution spec v1.1, Docker registry API v2) for pulls.

    ping      GET /v2/: 200 (open), or 401 with the challenge to answer
    auth      Bearer: a token from the challenge's realm for repository:NAME:pull (GET with
              basic credentials, or POST grant_type=refresh_token for an identity token),
              cached until it expires; Basic: the user and password, to the registry only
    manifest  GET /v2/NAME/manifests/TAG|DIGEST with Accept for the OCI index and manifest
              and the Docker list and v2 schema 2; its bytes hash to the digest asked for
    resolve   an index narrowed to one platform, then its manifest and image config
    blob      GET /v2/NAME/blobs/DIGEST, from a byte offset (Range) for a caller resuming

Requests go through the shared client (providers.core.http): its retries (Retry-After on
429 honoured, capped by the policy), its redirects (credentials only to the origin asked: a
blob redirected to storage gets no Authorization), its scrub of what servers send. A 401
from the registry is answered once per request: the first asks for a token (or sends the
basic credentials), the second is the credentials' refusal (exit 77). A token server on
another host gets the token request and nothing else; the registry never sees the password
when it uses tokens.

Plain http goes only to loopback hosts and to those listed in `[image] insecure_registries`
(which also skip certificate checks); they are tried with https first, as docker does. An
http URL to any other host (a token realm, a redirect) is refused before it is sent.

The caller verifies blobs: open_blob hands out bytes from an offset (earlier bytes are the
caller's), and cache.py hashes the whole. Not thread-safe: one client per thread (tokens
are shared between clients through the cache here).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from drivers.image.registry.reference import (
    Reference,
    check_digest,
    is_digest,
    split_host_port,
)
from drivers.image.source import Policy
from providers.core import urls
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
    shown,
    usable_credential,
)
from providers.core.http.client import HttpClient, content_length, resumed_at
from providers.core.http.policy import RETRY_STATUSES, ErrorMap, Failure, Kind, RetryPolicy, Rule

if TYPE_CHECKING:
    import ssl

    import httpx

    from drivers.image.registry.credentials import Credential

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
ACCEPT = ", ".join((OCI_INDEX, DOCKER_LIST, OCI_MANIFEST, DOCKER_MANIFEST))
SCHEMA1_TYPES = frozenset({
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
})  # fmt: skip
CONFIG_TYPES = frozenset({
    "application/vnd.oci.image.config.v1+json",
    "application/vnd.docker.container.image.v1+json",
})  # fmt: skip
MAX_MANIFEST_BYTES = 4 << 20  # what registries accept (the OCI spec's suggested limit)
MAX_CONFIG_BYTES = 8 << 20
MAX_TOKEN_BYTES = 1 << 20
MAX_INDEX_DEPTH = 3  # an index may name indexes; deeper is a loop or a hostile registry
MIN_TOKEN_SECONDS = 60  # the token spec's default and least lifetime
TOKEN_MARGIN_SECONDS = 10  # a token this close to its end is renewed before a request
CLIENT_ID = "shoal"
_CHECK = "; check the network and the registry's name, then retry"
_NOT_TLS = ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE", "HTTP_REQUEST", "UNKNOWN_PROTOCOL")
_INSECURE_FIX = "[image] insecure_registries"


class Manifest(NamedTuple):
    media_type: str
    raw: bytes
    digest: str


@dataclass(frozen=True)
class Layer:
    digest: str
    size: int
    media_type: str


@dataclass(frozen=True)
class Resolved:
    """One image for one platform. `digest` is what the reference names (an index's digest
    for a multi-platform image), `manifest_digest` the platform's own manifest; the config
    is fetched and verified (`config_raw`), `platform` is the one chosen (OS/ARCH[/VARIANT])."""

    manifest_digest: str
    manifest: dict[str, Any] = field(repr=False)
    config_digest: str
    layers: list[Layer]
    platform: str
    digest: str = ""
    media_type: str = OCI_MANIFEST
    manifest_raw: bytes = field(default=b"", repr=False)
    config_size: int = 0
    config_raw: bytes = field(default=b"", repr=False)


class ManifestError(ShoalError):
    """A manifest or index that is not what it says (digest, size, media type, shape)."""


class RangeNotSatisfiable(ShoalError):
    """The registry cannot serve a blob from the offset asked (416): the partial is longer
    than the blob; start it again from 0."""


# -- platforms ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Platform:
    os: str
    architecture: str
    variant: str = ""

    def __str__(self) -> str:
        tail = f"/{self.variant}" if self.variant else ""
        return f"{self.os}/{self.architecture}{tail}"

    def normalized(self) -> Platform:
        """As containerd compares platforms: GOARCH names, each architecture's default
        variant written as none (arm64/v8 is arm64, amd64/v1 is amd64, arm is arm/v7)."""
        os_name = self.os.lower()
        os_name = "darwin" if os_name == "macos" else os_name
        arch, variant = self.architecture.lower(), self.variant.lower()
        if arch == "i386":
            arch, variant = "386", ""
        elif arch in ("x86_64", "x86-64", "amd64"):
            arch, variant = "amd64", "" if variant == "v1" else variant
        elif arch in ("aarch64", "arm64"):
            arch, variant = "arm64", "" if variant in ("8", "v8") else variant
        elif arch == "armhf":
            arch, variant = "arm", "v7"
        elif arch == "armel":
            arch, variant = "arm", "v6"
        elif arch == "arm":
            variant = "v7" if variant in ("", "7") else variant
            variant = f"v{variant}" if variant in ("5", "6", "8") else variant
        return Platform(os_name, arch, variant)

    def candidates(self) -> list[Platform]:
        """What may run here, best first: this platform, then the older variants of its
        architecture (amd64/v3 runs v2 and v1, arm/v7 runs v6 and v5)."""
        own = self.normalized()
        found = [own]
        number = own.variant[1:] if own.variant.startswith("v") else ""
        if own.architecture in ("amd64", "arm") and number.isdigit():
            least = 1 if own.architecture == "amd64" else 5
            for older in range(int(number) - 1, least - 1, -1):
                plain = own.architecture == "amd64" and older == 1
                found.append(replace(own, variant="" if plain else f"v{older}"))
        return found


_MACHINES = {
    "x86_64": ("amd64", ""),
    "amd64": ("amd64", ""),
    "aarch64": ("arm64", ""),
    "arm64": ("arm64", ""),
    "armv8l": ("arm", "v8"),
    "armv7l": ("arm", "v7"),
    "armv7": ("arm", "v7"),
    "armv6l": ("arm", "v6"),
    "armv5tel": ("arm", "v5"),
    "i386": ("386", ""),
    "i486": ("386", ""),
    "i586": ("386", ""),
    "i686": ("386", ""),
    "ppc64le": ("ppc64le", ""),
    "ppc64": ("ppc64", ""),
    "s390x": ("s390x", ""),
    "riscv64": ("riscv64", ""),
    "loongarch64": ("loong64", ""),
    "mips64": ("mips64", ""),
}


def default_platform(machine: str | None = None) -> Platform:
    """This machine's platform as images name it: linux, and platform.machine() as a GOARCH
    name (x86_64 -> amd64, aarch64 -> arm64, armv7l -> arm/v7)."""
    if machine is None:
        import platform

        machine = platform.machine()
    arch, variant = _MACHINES.get(machine.lower(), (machine.lower(), ""))
    return Platform("linux", arch, variant)


def parse_platform(text: str) -> Platform:
    """`--platform OS/ARCH[/VARIANT]` (linux/amd64, linux/arm64/v8), or a UsageError."""
    parts = text.split("/")
    allowed = set("abcdefghijklmnopqrstuvwxyz0123456789._-")
    if not 2 <= len(parts) <= 3 or not all(p and set(p.lower()) <= allowed for p in parts):
        raise UsageError(
            f"--platform {shown(text)}: write OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64/v8"
        )
    return Platform(parts[0], parts[1], parts[2] if len(parts) == 3 else "")


def _entry_platform(entry: Mapping[str, Any]) -> Platform | None:
    found = entry.get("platform")
    if not isinstance(found, dict):
        return None
    os_name, arch = found.get("os"), found.get("architecture")
    variant = found.get("variant") or ""
    if not (isinstance(os_name, str) and isinstance(arch, str) and isinstance(variant, str)):
        return None
    return Platform(os_name, arch, variant)


# -- challenges ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Challenge:
    scheme: str  # lowercased: "bearer", "basic"
    params: dict[str, str]


_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
# An unquoted value is read leniently (realm=https://... is common) but never starts with
# "=": `abc==` is a token68, not a parameter.
_PARAM = re.compile(
    rf"({_TOKEN})[ \t]*=[ \t]*(\"(?:[^\"\\]|\\.)*\"|[^\s\",=][^\s\",]*)[ \t]*", re.S
)
_SCHEME = re.compile(rf"({_TOKEN})(?:[ \t]+(.*))?", re.S)


def parse_challenges(values: Collection[str]) -> list[Challenge]:
    """The challenges in WWW-Authenticate header values (RFC 9110 11.6.1): several per
    header, comma-separated, each `scheme param=value, param="quoted \\" value"`; a
    token68 challenge (`Negotiate abc==`) is kept without parameters, what cannot be read
    is skipped."""
    found: list[Challenge] = []
    for value in values:
        current: Challenge | None = None
        for item in _items(value):
            param = _PARAM.fullmatch(item)
            if param is not None and current is not None:
                current.params.setdefault(param[1].lower(), _unquote(param[2]))
                continue
            head = _SCHEME.fullmatch(item)
            if head is None:
                current = None  # what follows cannot be told apart from it
                continue
            current = Challenge(head[1].lower(), {})
            found.append(current)
            param = _PARAM.fullmatch(head[2] or "")
            if param is not None:
                current.params[param[1].lower()] = _unquote(param[2])
    return found


def _items(value: str) -> list[str]:
    """`value` split at the commas outside quoted strings, each item stripped."""
    items, start, quoted, escaped = [], 0, False, False
    for at, char in enumerate(value):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            items.append(value[start:at].strip(" \t"))
            start = at + 1
    items.append(value[start:].strip(" \t"))
    return [item for item in items if item]


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1], flags=re.S)
    return value


# -- tokens -------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Token:
    value: str
    expires_at: float  # time.time()


_TOKENS: dict[tuple[str, ...], _Token] = {}
_TOKENS_LOCK = threading.Lock()


def clear_token_cache() -> None:
    with _TOKENS_LOCK:
        _TOKENS.clear()


def _expiry(answer: Mapping[str, Any], now: float) -> float:
    """When a token answer's token ends: issued_at + expires_in (at least 60 s), measured
    from now when issued_at is absent, unreadable or off by more than the lifetime (a
    registry whose clock is off would otherwise have every token renewed at once)."""
    lifetime = answer.get("expires_in")
    seconds = lifetime if isinstance(lifetime, int) and not isinstance(lifetime, bool) else 0
    seconds = max(seconds, MIN_TOKEN_SECONDS)
    issued = answer.get("issued_at")
    if isinstance(issued, str):
        from datetime import datetime

        try:
            at = datetime.fromisoformat(issued).timestamp()
        except ValueError:
            at = now
        if 0 <= now - at <= seconds:
            return at + seconds
    return now + seconds


# -- errors -------------------------------------------------------------------------------


def explain(body: bytes, reason: str) -> tuple[str, str]:
    """The registry's own (code, message): {"errors": [{"code", "message", "detail"}]}."""
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested past any error's need
        return "", ""
    errors = document.get("errors") if isinstance(document, dict) else None
    if not isinstance(errors, list) or not errors or not isinstance(errors[0], dict):
        return "", ""
    code, message = errors[0].get("code"), errors[0].get("message")
    return (code if isinstance(code, str) else "", message if isinstance(message, str) else "")


def _is_blob(failure: Failure) -> bool:
    return "/blobs/" in failure.target


def _errors(ref: Reference, credential: Credential | None) -> ErrorMap:
    if credential is None:
        refused = (
            "it needs credentials (or the repository does not exist): log in with docker "
            "or podman login, or give --user with --password-stdin"
        )
    else:
        refused = (
            "the credentials were refused (or the repository does not exist, or they do not "
            "allow pulling it); check them, or log in again"
        )
    return ErrorMap(
        explain=explain,
        fields={"shown": ref.shown, "host": ref.api_host, "refused": refused},
        rules=(
            Rule((401, 403), CredentialsError, "{url}: HTTP {code} {reason}{said}, after a "
                 "redirect to another host, which is never sent your credentials",
                 when=lambda failure: failure.elsewhere),
            Rule((401, 403), CredentialsError, "{shown}: HTTP {code} {reason} from {host}{said}; "
                 "{refused}"),
            Rule(404, NotFoundError, "{shown}: {url}: HTTP 404 {reason}{said}; the registry lost "
                 "a blob its manifest names", when=_is_blob),
            Rule(404, NotFoundError, "{shown}: not found (HTTP 404 {reason}{said}); check the "
                 "repository name and the tag or digest"),
            Rule(429, RetryableError, "{url}: HTTP 429 {reason}{said} after {attempts} attempts: "
                 "the registry limits requests; try again later (Docker Hub allows more to "
                 "logged-in users)"),
            Rule(RETRY_STATUSES, ProviderUnreachableError, "{url}: HTTP {code} {reason}{said} "
                 "after {attempts} attempts; the registry is failing, try again later"),
            Rule(Kind.UNREACHABLE, ProviderUnreachableError, "{url}: {error} after {attempts} "
                 "attempts" + _CHECK),
        ),
    )  # fmt: skip


def _token_errors(ref: Reference, credential: Credential | None) -> ErrorMap:
    if credential is None:
        refused = (
            "{shown} needs credentials: log in with docker or podman login, or give --user "
            "with --password-stdin"
        )
    elif credential.identity_token:
        refused = "it refused the identity token for {shown}; log in again"
    else:
        refused = f"it refused user {credential.username!r} for {{shown}}; check the password"
    return ErrorMap(
        explain=_token_explain,
        fields={"shown": ref.shown},
        rules=(
            Rule((401, 403), CredentialsError, "{url}: the token service answered HTTP {code} "
                 "{reason}{said}: " + refused),
            Rule(400, CredentialsError, "{url}: the token service answered HTTP 400 "
                 "{reason}{said}: " + refused, when=lambda f: f.reason == "invalid_grant"),
            Rule(429, RetryableError, "{url}: HTTP 429 {reason}{said} after {attempts} attempts: "
                 "the token service limits requests; try again later"),
            Rule(RETRY_STATUSES, ProviderUnreachableError, "{url}: HTTP {code} {reason}{said} "
                 "after {attempts} attempts; the token service is failing, try again later"),
            Rule(Kind.UNREACHABLE, ProviderUnreachableError, "{url}: {error} after {attempts} "
                 "attempts" + _CHECK),
            Rule(range(400, 600), ShoalError, "{url}: the token service answered HTTP {code} "
                 "{reason}{said}"),
        ),
    )  # fmt: skip


def _token_explain(body: bytes, reason: str) -> tuple[str, str]:
    """A token service's error: a registry's, OAuth's {"error", "error_description"}, or
    Docker Hub's {"details"}."""
    code, message = explain(body, reason)
    if code or message:
        return code, message
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested past any error's need
        return "", ""
    if not isinstance(document, dict):
        return "", ""
    error = document.get("error")
    # OAuth's error_description; Docker Hub's token service says {"details": "..."}.
    said = [document.get(key) for key in ("error_description", "details", "message")]
    message = next((text for text in said if isinstance(text, str) and text), "")
    return error if isinstance(error, str) else "", message


class _Guarded(HttpClient):
    """The shared client with one more check on every request it sends, redirects
    included: `guard` refuses what may not be sent (plain http to another host)."""

    guard: Callable[[httpx.Request], None] | None = None

    def _client(self, url: str) -> httpx.Client:
        client = super()._client(url)
        hooks = client.event_hooks
        if self.guard is not None and self.guard not in hooks["request"]:
            client.event_hooks = {**hooks, "request": [*hooks["request"], self.guard]}
        return client


class _Untrusted(ConfigError):
    """An https certificate shoal cannot trust: never a reason to try plain http."""


# -- the client ---------------------------------------------------------------------------


class RegistryClient:
    """One repository's registry, for pulls: `manifest`, `resolve`, `open_blob`."""

    def __init__(
        self,
        ref: Reference,
        credential: Credential | None,
        *,
        insecure: Collection[str] = (),
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        verify: Callable[[], ssl.SSLContext] | None = None,
        on_retry: Callable[[float], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        scheme: str | None = None,
    ) -> None:
        """`insecure`: registries ("host", "host:port", a CIDR) that may speak plain http
        and whose certificates are not checked; `verify`: the TLS context for the others
        (else SSL_CERT_FILE, else certifi's CAs); `on_retry(seconds)`: told before each
        pause between attempts (a progress line); `scheme`: "http" or "https" as `scheme`
        found on an earlier run, to skip trying https first; `transport`: tests."""
        self.ref = ref
        self.credential = credential
        self.insecure = frozenset(entry.strip().lower() for entry in insecure if entry.strip())
        self.policy = policy if policy is not None else Policy()
        self.transport = transport
        self.verify = verify
        self.on_retry = on_retry
        self._sleep_for = sleep
        self._secrets = _credential_secrets(credential)
        self._clients: list[HttpClient] = []
        self._http: HttpClient | None = None
        self._token_http: dict[tuple[str, str, int | None], HttpClient] = {}
        self._challenge: Challenge | None = None
        self._authorization = ""  # the registry's Authorization header value, once known
        self._expires_at = float("inf")
        self._hint = scheme

    # -- plumbing -------------------------------------------------------------------------

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for client in self._clients:
            client.close()

    def _sleep(self, seconds: float) -> None:
        if self.on_retry is not None:
            self.on_retry(seconds)
        self._sleep_for(seconds)

    def _base_url(self) -> str:
        return self._http.base_url if self._http is not None else f"https://{self.ref.api_host}"

    def _pause(self, attempt: int) -> None:
        http = self._http
        if http is not None:
            http.pause(attempt)

    def _remember(self, secret: str) -> None:
        if secret and secret not in self._secrets:
            self._secrets.append(secret)
            for client in self._clients:
                if secret not in client.secrets:
                    client.secrets.append(secret)

    def scrub(self, text: str) -> str:
        from providers.core.errors import one_line

        return one_line(text, self._secrets)

    def _plain_allowed(self, host: str, port: int | None) -> bool:
        return _is_loopback(host) or self._listed(host, port)

    def _listed(self, host: str, port: int | None) -> bool:
        host = host.lower()
        for entry in self.insecure:
            entry = entry.removeprefix("http://").removeprefix("https://").rstrip("/")
            if "/" in entry:
                if _in_network(host, entry):
                    return True
                continue
            listed_host, listed_port = split_host_port(entry)
            if listed_host == host and (listed_port is None or listed_port == port):
                return True
        return False

    def _guard(self, request: httpx.Request) -> None:
        url = request.url
        if url.scheme == "http" and not self._plain_allowed(url.host, url.port):
            where = urls.display(str(url))
            raise ConfigError(
                f"{where}: plain http refused: only loopback hosts and the registries listed "
                f"in {_INSECURE_FIX} are reached without TLS; use https, or list "
                f"{_hostport(url.host, url.port)} there if you trust the network to it"
            )

    def _fatal(self, exc: Exception) -> ShoalError | None:
        """A TLS failure no retry mends, as the error that says what to do."""
        problem = _tls_problem(exc)
        if problem is None:
            return None
        kind, detail = problem
        try:
            url = exc.request.url  # type: ignore[attr-defined]
            where, hostport = urls.display(str(url)), _hostport(url.host, url.port)
        except (AttributeError, RuntimeError):
            where = hostport = self.ref.api_host
        if kind == "certificate":
            return _Untrusted(
                f"{where}: its TLS certificate is not trusted ({self.scrub(detail)[:120]}); "
                f"give shoal its CA (SSL_CERT_FILE=/path/to/ca.pem), or list {hostport} in "
                f"{_INSECURE_FIX} to skip the check"
            )
        return ConfigError(
            f"{where}: the server answered https in plain http; shoal speaks plain http only "
            f"to loopback hosts and the registries in {_INSECURE_FIX}: list {hostport} there "
            "if it has no TLS"
        )

    def _new_client(
        self,
        base_url: str,
        errors: ErrorMap,
        max_bytes: int,
        *,
        tls_for: str = "",
        credentials: Callable[[], dict[str, str]] | None = None,
    ) -> HttpClient:
        """A shared client for the registry (`base_url`) or a token service (`tls_for`, its
        realm): a registry listed as insecure is not asked for a trusted certificate."""
        parsed = urls.parse(base_url or tls_for)
        listed = self._listed(parsed.host, parsed.port)
        client = _Guarded(
            base_url,
            errors=errors,
            policy=self.policy,
            credentials=credentials,
            secrets=list(self._secrets),
            headers={"Accept-Encoding": "identity"},
            transport=self.transport,
            verify=_unverified if listed else (self.verify or _trusted),
            fatal=self._fatal,
            sleep=self._sleep,
            max_bytes=max_bytes,
        )
        client.guard = self._guard
        self._clients.append(client)
        return client

    def _credentials(self) -> dict[str, str]:
        return {"Authorization": self._authorization} if self._authorization else {}

    # -- connecting -----------------------------------------------------------------------

    def ping(self) -> None:
        """Find how to speak to the registry (https, or http where allowed), and answer its
        challenge if it has one; once per client."""
        if self._http is not None:
            return
        host, port = split_host_port(self.ref.api_host)
        errors = _errors(self.ref, self.credential)
        own = self._credentials
        plain = self._plain_allowed(host, port)
        if plain and self._hint == "http":
            http = self._new_client(
                f"http://{self.ref.api_host}", errors, MAX_MANIFEST_BYTES, credentials=own
            )
            http.policy = replace(self.policy, attempts=1)
            try:  # as it was last time; if it changed since (now TLS), found again below
                hinted = http.request("GET", "/v2/", ok=(200, 401, 404))
            except ShoalError:
                hinted = None
            finally:
                http.policy = self.policy
            if hinted is not None:
                self._found(http, hinted)
                return
        http = self._new_client(
            f"https://{self.ref.api_host}", errors, MAX_MANIFEST_BYTES, credentials=own
        )
        response: httpx.Response | None = None
        first: ShoalError | None = None
        if plain and self._hint != "https":
            # One attempt: a registry without TLS fails the handshake at once, and then
            # plain http is asked (with the policy's retries).
            http.policy = replace(self.policy, attempts=1)
            try:
                response = http.request("GET", "/v2/", ok=range(100, 600))
            except _Untrusted:
                raise
            except ShoalError as exc:
                first = exc
            finally:
                http.policy = self.policy
            if response is not None and response.status_code not in (200, 401, 404):
                response = None  # an error answer: asked again below, with retries
        if first is not None:
            http = self._new_client(
                f"http://{self.ref.api_host}", errors, MAX_MANIFEST_BYTES, credentials=own
            )
        if response is None:
            try:
                response = http.request("GET", "/v2/", ok=(200, 401, 404))
            except ShoalError as exc:
                if first is None:
                    raise
                raise type(exc)(f"{exc} (https before it: {first})") from None
        self._found(http, response)

    @property
    def scheme(self) -> str:
        """How the registry is reached, "https" or "http" (a ping first, if none was made);
        worth keeping for the next client's `scheme`."""
        self.ping()
        assert self._http is not None
        return urls.origin(self._http.base_url)[0]

    def _found(self, http: HttpClient, response: httpx.Response) -> None:
        self._http = http
        if response.status_code == 404:
            raise ShoalError(
                f"{urls.display(str(response.url))}: HTTP 404: {self.ref.api_host} serves no "
                "registry API (OCI distribution, Docker registry v2); check the registry name"
            )
        if response.status_code == 401:
            self._answer(response, renew=False)

    def _answer(self, response: httpx.Response, renew: bool = True) -> None:
        """Take up the challenge of a 401: a token for a Bearer one (a cached one unless
        `renew`: after a refusal it is the one refused), the user and password for a Basic
        one (kept back when there are none: the request then fails as refused)."""
        challenges = parse_challenges(response.headers.get_list("www-authenticate"))
        bearer = next((c for c in challenges if c.scheme == "bearer" and "realm" in c.params), None)
        if bearer is not None:
            self._challenge = bearer
            self._token(renew)
            return
        basic = any(c.scheme == "basic" for c in challenges)
        credential = self.credential
        if basic and credential is not None and credential.username and credential.password:
            pair = f"{credential.username}:{credential.password}".encode()
            self._authorization = "Basic " + base64.b64encode(pair).decode("ascii")
            self._remember(self._authorization.partition(" ")[2])

    def _scopes(self) -> list[str]:
        scopes = [f"repository:{self.ref.repository}:pull"]
        asked = self._challenge.params.get("scope", "") if self._challenge else ""
        scopes += [scope for scope in asked.split() if scope not in scopes]
        return scopes

    def _token(self, renew: bool) -> None:
        """The registry's Authorization from a token for the current challenge: the cached
        one while it lasts, unless `renew` (after a 401, the cached one is the one refused)."""
        challenge = self._challenge
        assert challenge is not None
        realm, service = challenge.params["realm"], challenge.params.get("service", "")
        scopes = self._scopes()
        key = (realm, service, " ".join(scopes), _identity(self.credential))
        now = time.time()
        with _TOKENS_LOCK:
            cached = _TOKENS.get(key)
        if cached is None or renew or cached.expires_at - TOKEN_MARGIN_SECONDS <= now:
            cached = self._fetch_token(realm, service, scopes)
            with _TOKENS_LOCK:
                _TOKENS[key] = cached
        self._remember(cached.value)
        self._authorization = f"Bearer {cached.value}"
        self._expires_at = cached.expires_at

    def _fetch_token(self, realm: str, service: str, scopes: list[str]) -> _Token:
        try:
            parsed = urls.parse(realm)
        except urls.UrlError as exc:
            raise ShoalError(
                f"{self.ref.api_host}: the registry's token realm is not a usable URL: {exc}"
            ) from None
        origin = parsed.origin
        http = self._token_http.get(origin)
        if http is None:  # without credentials of its own: only what a request carries
            errors = _token_errors(self.ref, self.credential)
            http = self._new_client("", errors, MAX_TOKEN_BYTES, tls_for=realm)
            self._token_http[origin] = http
        credential = self.credential
        if credential is not None and credential.identity_token:
            from urllib.parse import urlencode

            form = urlencode({
                "grant_type": "refresh_token",
                "refresh_token": credential.identity_token,
                "service": service,
                "client_id": CLIENT_ID,
                "scope": " ".join(scopes),
            })  # fmt: skip
            response = http.request(
                "POST",
                realm,
                content=form.encode(),
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
        else:
            response = http.request("GET", _token_url(realm, service, scopes, credential),
                                    headers=_basic(credential))  # fmt: skip
        answer = http.decode(response, "GET", realm)
        if not isinstance(answer, dict):
            raise ShoalError(f"{urls.display(realm)}: the token service answered no JSON object")
        token = answer.get("access_token") or answer.get("token")
        if not isinstance(token, str) or not token:
            raise ShoalError(f"{urls.display(realm)}: the token service's answer has no token")
        self._remember(token)
        usable_credential(token, f"the token from {urls.display(realm)}")
        refresh = answer.get("refresh_token")
        if isinstance(refresh, str):
            self._remember(refresh)
        return _Token(token, _expiry(answer, time.time()))

    # -- requests -------------------------------------------------------------------------

    def _send(
        self,
        method: str,
        target: str,
        *,
        headers: Mapping[str, str] | None = None,
        ok: Collection[int] = (200,),
        read: bool = False,
    ) -> httpx.Response:
        """One request to the registry, its 401 answered once (a first token, or a new one
        for an expired token) and asked again; a second 401 is the credentials' refusal."""
        self.ping()
        http = self._http
        assert http is not None
        if self._challenge is not None and self._expires_at - TOKEN_MARGIN_SECONDS <= time.time():
            self._token(renew=False)
        answered = False
        while True:
            response = http.open(method, target, headers=headers, ok={*ok, 401}, read=read)
            if response.status_code != 401:
                return response
            elsewhere = urls.origin(str(response.url)) != urls.origin(http.base_url)
            if answered or elsewhere:
                raise http.fail(
                    401, method, target, str(response.url), response=response, elsewhere=elsewhere
                )
            before = self._authorization
            self._answer(response)
            if self._authorization == before and not self._authorization.startswith("Bearer"):
                raise http.fail(401, method, target, str(response.url), response=response)
            response.close()
            answered = True

    def manifest(self, reference: str | None = None) -> Manifest:
        """The manifest or index a tag or digest names (the client's reference's by
        default): its media type, its bytes as sent, and their digest, verified against
        the digest asked for (and against Docker-Content-Digest when sent)."""
        target = reference or self.ref.target
        path = f"/v2/{self.ref.repository}/manifests/{target}"
        response = self._send("GET", path, headers={"Accept": ACCEPT}, read=True)
        raw = response.content
        where = f"{self.ref.name}@{target}" if is_digest(target) else f"{self.ref.name}:{target}"
        algorithm = target.partition(":")[0] if is_digest(target) else "sha256"
        digest = f"{algorithm}:{hashlib.new(algorithm, raw).hexdigest()}"
        if is_digest(target) and digest != target:
            raise ManifestError(
                f"{where}: the registry sent a manifest whose digest is {digest}, not the one "
                "asked for; nothing of it was used"
            )
        announced = response.headers.get("docker-content-digest", "").strip()
        if announced and is_digest(announced):
            own = announced.partition(":")[0]
            if f"{own}:{hashlib.new(own, raw).hexdigest()}" != announced:
                raise ManifestError(
                    f"{where}: the registry's Docker-Content-Digest ({announced}) is not the "
                    "digest of the manifest it sent; nothing of it was used"
                )
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        document = _document(raw, where)
        return Manifest(_media_type(content_type, document, where), raw, digest)

    def resolve(
        self,
        ref: Reference | None = None,
        platform: str | None = None,
        *,
        load_config: Callable[[str, int], bytes] | None = None,
    ) -> Resolved:
        """The image `ref` (the client's by default) names for `platform` (OS/ARCH[/VARIANT],
        default this machine's): an index narrowed to its best match, the manifest's config
        and layers, the config fetched and verified (through `load_config(digest, size)`
        when given: a blob store that fetches it once for every pull). An image for another
        platform than the one asked is a NotFoundError naming those it has."""
        ref = ref if ref is not None else self.ref
        if (ref.registry, ref.repository) != (self.ref.registry, self.ref.repository):
            raise ValueError(f"this client is for {self.ref.name}, not {ref.name}")
        want = parse_platform(platform) if platform is not None else default_platform()
        top = self.manifest(ref.target)
        media_type, raw, digest = top
        where = ref.shown
        document = _document(raw, where)
        chosen = ""
        for _ in range(MAX_INDEX_DEPTH + 1):
            if media_type not in INDEX_TYPES:
                break
            entry = self._pick(document, want, where)
            child = self.manifest(entry["digest"])
            if entry["size"] != len(child.raw):
                raise ManifestError(
                    f"{where}: the index says manifest {entry['digest']} has {entry['size']} "
                    f"bytes, the registry sent {len(child.raw)}; nothing of it was used"
                )
            chosen = str(_entry_platform(entry) or "")
            media_type, raw, digest = child
            document = _document(raw, where)
        else:
            raise ManifestError(f"{where}: indexes nested more than {MAX_INDEX_DEPTH} deep")
        config = _descriptor(document.get("config"), f"{where}: the manifest's config")
        if config["mediaType"] not in CONFIG_TYPES:
            raise ManifestError(
                f"{where}: not a container image (its config is {shown(config['mediaType'])}, "
                "not an OCI or Docker image config)"
            )
        listed = document.get("layers")
        if not isinstance(listed, list):
            raise ManifestError(f"{where}: the manifest has no list of layers")
        layers = [
            Layer(d["digest"], d["size"], d["mediaType"])
            for n, item in enumerate(listed)
            for d in [_descriptor(item, f"{where}: the manifest's layers[{n}]")]
        ]
        if config["size"] > MAX_CONFIG_BYTES:
            raise ManifestError(
                f"{where}: its config is {config['size']} bytes; more than the "
                f"{MAX_CONFIG_BYTES} a config may have"
            )
        if load_config is not None:
            config_raw = load_config(config["digest"], config["size"])
        else:
            config_raw = self.blob_bytes(config["digest"], config["size"])
        image = _document(config_raw, f"{where}: its config")
        actual = Platform(
            str(image.get("os") or ""),
            str(image.get("architecture") or ""),
            str(image.get("variant") or ""),
        )
        if not chosen:
            chosen = str(actual)
            if platform is not None and actual.normalized() not in want.candidates():
                raise NotFoundError(
                    f"{where}: the image is for {actual}, not {want}; drop --platform or ask "
                    f"for {actual}"
                )
        return Resolved(
            manifest_digest=digest,
            manifest=document,
            config_digest=config["digest"],
            layers=layers,
            platform=chosen,
            digest=top.digest,
            media_type=media_type,
            manifest_raw=raw,
            config_size=config["size"],
            config_raw=config_raw,
        )

    def _pick(self, index: dict[str, Any], want: Platform, where: str) -> dict[str, Any]:
        listed = index.get("manifests")
        if not isinstance(listed, list):
            raise ManifestError(f"{where}: the index has no list of manifests")
        entries = [
            _descriptor(item, f"{where}: the index's manifests[{n}]")
            for n, item in enumerate(listed)
        ]
        usable = [e for e in entries if e["mediaType"] in MANIFEST_TYPES | INDEX_TYPES]
        placed = [(e, p) for e in usable if (p := _entry_platform(e)) is not None]
        for candidate in want.candidates():
            for entry, found in placed:
                if found.normalized() == candidate:
                    return entry
        if not placed and len(usable) == 1:
            return usable[0]
        offered = sorted({str(p) for _, p in placed if p.os.lower() != "unknown"})
        raise NotFoundError(
            f"{where}: no image for {want}; it has {', '.join(offered) or 'none named'}: pick "
            "one with --platform"
        )

    # -- blobs ----------------------------------------------------------------------------

    def open_blob(self, digest: str, offset: int = 0, *, size: int | None = None) -> BlobStream:
        """The blob's bytes from `offset` on, in chunks as they arrive; the first request is
        made here (a refusal or a 404 is raised at once). A connection cut mid-way is
        resumed with Range (policy.attempts times in a row). `size`, the manifest's: a body
        past it, or a registry announcing another size, is an error. The caller hashes."""
        problem = check_digest(digest)
        if problem:
            raise ManifestError(f"{self.ref.shown}: blob digest {shown(digest)}: {problem}")
        return BlobStream(self, digest, offset, size)

    def blob_bytes(self, digest: str, size: int, *, limit: int = MAX_CONFIG_BYTES) -> bytes:
        """A small blob (an image config) whole, verified against its digest and size."""
        if size > limit:
            raise ManifestError(
                f"{self.ref.shown}: blob {digest} is {size} bytes; more than the {limit} a "
                "config may have"
            )
        with self.open_blob(digest, size=size) as stream:
            data = b"".join(stream)
        algorithm, _, hexpart = digest.partition(":")
        if len(data) != size or hashlib.new(algorithm, data).hexdigest() != hexpart:
            raise ManifestError(
                f"{self.ref.shown}: blob {digest}: the registry sent {len(data)} bytes that do "
                "not hash to it; nothing of it was used"
            )
        return data


class BlobStream(Iterator[bytes]):
    """A blob's body from `offset`: iterate for chunks; `received` counts bytes from the
    blob's start, `total` is its size when the registry said it."""

    def __init__(self, client: RegistryClient, digest: str, offset: int, size: int | None):
        self.client = client
        self.digest = digest
        self.size = size
        self.received = offset
        self.total = size
        self._path = f"/v2/{client.ref.repository}/blobs/{digest}"
        self._response: httpx.Response | None = None
        self._chunks: Iterator[bytes] | None = None
        self._position = 0  # the blob byte the response's next chunk starts at
        self._drops = 0
        if size is None or offset < size:
            self._open()

    def __enter__(self) -> BlobStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._response is not None:
            self._response.close()
        self._chunks = None

    def _open(self) -> None:
        headers = {"Range": f"bytes={self.received}-"} if self.received else {}
        try:
            response = self.client._send("GET", self._path, headers=headers, ok=(200, 206, 416))
        except ShoalError:
            self._chunks = None
            raise
        where = f"{self.client.ref.name}@{self.digest}"
        if response.status_code == 416:
            response.close()
            raise RangeNotSatisfiable(
                f"{where}: the registry cannot send it from byte {self.received} (HTTP 416); "
                "start it again from the beginning"
            )
        announced = response.headers.get("docker-content-digest", "").strip()
        if announced and is_digest(announced) and announced != self.digest:
            response.close()
            raise ManifestError(
                f"{where}: the registry answered with blob {announced}; nothing of it was used"
            )
        if response.status_code == 206:
            start = resumed_at(response.headers)
            whole = response.headers.get("content-range", "").rpartition("/")[2]
            if start != self.received:
                response.close()
                raise ShoalError(
                    f"{where}: asked from byte {self.received}, the registry sent from "
                    f"{start}; start it again from the beginning"
                )
            total = int(whole) if whole.isdigit() else None
        else:  # the whole body although a range was asked: the bytes before it are skipped
            start, total = 0, content_length(response.headers)
        if self.size is not None and total is not None and total != self.size:
            response.close()
            raise ManifestError(
                f"{where}: the registry says the blob has {total} bytes, the manifest "
                f"{self.size}; nothing of it was used"
            )
        self.total = total if total is not None else self.size
        self._response, self._position = response, start
        # No chunk size: httpx would hold bytes back until a whole chunk arrived, and a
        # connection cut would lose them (a resume would ask again for bytes it had).
        self._chunks = response.iter_raw()

    def __next__(self) -> bytes:
        from providers.core.http import httpx

        while True:
            if self._chunks is None:
                raise StopIteration
            try:
                chunk = next(self._chunks)
            except StopIteration:
                if self.total is not None and self.received < self.total:
                    self._resume(f"the body ended at byte {self.received} of {self.total}")
                    continue
                self.close()
                raise
            except (httpx.TransportError, OSError) as exc:
                self._resume(f"the connection dropped at byte {self.received} "
                             f"({type(exc).__name__})")  # fmt: skip
                continue
            skip = self.received - self._position
            self._position += len(chunk)
            if skip > 0:
                chunk = chunk[skip:]
            if not chunk:
                continue
            if self.size is not None and self.received + len(chunk) > self.size:
                self.close()
                raise ManifestError(
                    f"{self.client.ref.name}@{self.digest}: the registry sent more than the "
                    f"{self.size} bytes the manifest declares; nothing of it was used"
                )
            self.received += len(chunk)
            self._drops = 0
            return chunk

    def _resume(self, why: str) -> None:
        self.close()
        self._drops += 1
        attempts = self.client.policy.attempts
        if self._drops >= attempts:
            where = urls.display(self.client._base_url() + self._path)
            raise ProviderUnreachableError(
                f"{where}: {why}; gave up after {attempts} attempts" + _CHECK
            )
        self.client._pause(self._drops - 1)
        self._open()


# -- helpers ------------------------------------------------------------------------------


def _credential_secrets(credential: Credential | None) -> list[str]:
    if credential is None:
        return []
    found = [credential.password, f"{credential.username}:{credential.password}"]
    found.append(credential.identity_token or "")
    return [s for s in found if s and s != ":"]


def _identity(credential: Credential | None) -> str:
    """Who a cached token belongs to, as a hash: the cache holds no password."""
    if credential is None:
        return ""
    text = "\0".join((credential.username, credential.password, credential.identity_token or ""))
    return hashlib.sha256(text.encode()).hexdigest()


def _basic(credential: Credential | None) -> dict[str, str]:
    if credential is None or not (credential.username and credential.password):
        return {}
    pair = f"{credential.username}:{credential.password}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}


def _token_url(realm: str, service: str, scopes: list[str], credential: Credential | None) -> str:
    from urllib.parse import urlencode

    query: list[tuple[str, str]] = [("service", service)] if service else []
    query += [("scope", scope) for scope in scopes]
    if credential is not None and credential.username and credential.password:
        query.append(("account", credential.username))
    joiner = "&" if "?" in realm else "?"
    return f"{realm}{joiner}{urlencode(query)}" if query else realm


def _document(raw: bytes, where: str) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        raise ManifestError(f"{where}: the registry sent malformed JSON") from None
    if not isinstance(document, dict):
        raise ManifestError(f"{where}: the registry sent JSON that is not an object")
    return document


def _media_type(content_type: str, document: Mapping[str, Any], where: str) -> str:
    """The manifest's media type: the Content-Type, which its own mediaType must not
    contradict; guessed from its fields when the registry sent a generic type."""
    declared = document.get("mediaType")
    declared = declared if isinstance(declared, str) else ""
    if (
        content_type in SCHEMA1_TYPES
        or declared in SCHEMA1_TYPES
        or (document.get("schemaVersion") == 1)
    ):
        raise ManifestError(
            f"{where}: a Docker schema 1 manifest, which registries stopped serving in 2019 "
            "and shoal does not read; push the image again with a current tool"
        )
    known = INDEX_TYPES | MANIFEST_TYPES
    if content_type in known:
        if declared and declared != content_type:
            raise ManifestError(
                f"{where}: the registry says {content_type}, the manifest says {declared}; "
                "nothing of it was used"
            )
        return content_type
    if declared in known:
        return declared
    if not declared and isinstance(document.get("manifests"), list):
        return OCI_INDEX
    if not declared and "config" in document and isinstance(document.get("layers"), list):
        return OCI_MANIFEST
    raise ManifestError(
        f"{where}: not a container image manifest (type {shown(declared or content_type)})"
    )


def _descriptor(value: object, where: str) -> dict[str, Any]:
    """A content descriptor with a usable digest, size and media type."""
    if not isinstance(value, dict):
        raise ManifestError(f"{where} is not a descriptor object")
    digest, size, media_type = value.get("digest"), value.get("size"), value.get("mediaType")
    problem = check_digest(digest) if isinstance(digest, str) else "it is missing"
    if problem:
        raise ManifestError(f"{where}: its digest {shown(digest)} is unusable: {problem}")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ManifestError(f"{where}: its size {shown(size)} is not a byte count")
    if not isinstance(media_type, str):
        raise ManifestError(f"{where}: it has no mediaType")
    return value


def _is_loopback(host: str) -> bool:
    import ipaddress

    host = host.lower().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _in_network(host: str, network: str) -> bool:
    import ipaddress

    try:
        return ipaddress.ip_address(host.strip("[]")) in ipaddress.ip_network(network, strict=False)
    except ValueError:
        return False


def _hostport(host: str, port: int | None) -> str:
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{port}" if port is not None else host


def _trusted() -> ssl.SSLContext:
    """The CAs httpx would load (SSL_CERT_FILE, SSL_CERT_DIR, else certifi's), loaded once
    per process: each load costs 40-60 ms, and a pull has a client for the registry and one
    for its token service."""
    import os

    return _context_for(os.environ.get("SSL_CERT_FILE", ""), os.environ.get("SSL_CERT_DIR", ""))


@functools.lru_cache(maxsize=4)
def _context_for(cafile: str, capath: str) -> ssl.SSLContext:
    import ssl

    if cafile:
        return ssl.create_default_context(cafile=cafile)
    if capath:
        return ssl.create_default_context(capath=capath)
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _unverified() -> ssl.SSLContext:
    import ssl

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def _tls_problem(exc: BaseException) -> tuple[str, str] | None:
    """("certificate", why) for a certificate not trusted, ("plain", "") for a server that
    answered a TLS handshake in plain http, else None."""
    import ssl

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLCertVerificationError):
            return "certificate", current.verify_message or str(current)
        if isinstance(current, ssl.SSLError) and (current.reason or "") in _NOT_TLS:
            return "plain", ""
        current = current.__cause__ or current.__context__
    text = str(exc)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        return "certificate", text.partition("CERTIFICATE_VERIFY_FAILED]")[2].strip()
    if any(reason in text for reason in _NOT_TLS):
        return "plain", ""
    return None
