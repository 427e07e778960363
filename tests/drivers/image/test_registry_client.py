"""The registry client against a fake registry of the tests' own on 127.0.0.1 that speaks
the wire format of the OCI distribution spec v1.1 and distribution's token spec: /v2/ ping,
`WWW-Authenticate: Basic realm=...` or `Bearer realm,service,scope` with a token service on
another origin (GET with basic credentials and `account`, POST grant_type=refresh_token),
manifests negotiated by Accept with Content-Type and Docker-Content-Digest, blobs with
Range/206/416 and 307 redirects to a storage server on another origin, JSON error bodies
{"errors": [{"code", "message", "detail"}]}, 429 with Retry-After. Faults are switched on
per test. Nothing leaves loopback: hosts that must not be loopback (to test the plain-http
rule) are mapped back to 127.0.0.1 by a transport that refuses any other destination.

Tests assert what a user sees: the error class (the exit code) and its message."""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import secrets
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from cli.exit_codes import ExitCode, exit_code_for
from drivers.image.registry import client as registry_client
from drivers.image.registry.client import (
    ACCEPT,
    DOCKER_LIST,
    DOCKER_MANIFEST,
    OCI_INDEX,
    OCI_MANIFEST,
    ManifestError,
    Platform,
    RangeNotSatisfiable,
    RegistryClient,
    default_platform,
    parse_challenges,
    parse_platform,
)
from drivers.image.registry.credentials import Credential
from drivers.image.registry.reference import parse_reference
from drivers.image.source import Policy
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.http import httpx

SERVICE = "fake-registry"
USER, PASSWORD = "alice", "s3cret-Pa55word"
Connect = Callable[..., RegistryClient]
FAST = Policy(attempts=3, backoff_seconds=0.01, jitter=0.0, read_timeout_seconds=5.0)
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# -- the fake registry ---------------------------------------------------------------------


@dataclass
class Seen:
    """One request as a server saw it (header names lowercased)."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes = b""


@dataclass
class Grant:
    user: str | None
    scopes: list[str]
    revoked: bool = False


@dataclass
class FakeRegistry:
    auth: str = "none"  # "none" | "basic" | "bearer"
    private: set[str] = field(default_factory=set)  # repositories only USER may pull
    denied: set[str] = field(default_factory=set)  # repositories answered 403 DENIED
    echo_auth: bool = False  # error bodies quote the Authorization header they got
    throttle: int = 0  # this many 429s before manifests and blobs are served again
    retry_after: str = "3"
    redirect_blobs: bool = False  # 307 to the storage server
    redirect_host: str = ""  # the host:port (or scheme://host:port) the redirect names
    cut_at: int | None = None  # the next blob body stops after this many bytes
    ignore_range: bool = False
    lie_content_digest: bool = False
    content_type: str | None = None  # instead of the manifest's own media type
    reject_tokens: bool = False  # every token is refused (a token service out of step)
    token_lifetime: int = 300
    realm_host: str = ""  # the host:port the challenge's realm names, if not the real one
    blobs: dict[str, bytes] = field(default_factory=dict)
    manifests: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    token_requests: list[Seen] = field(default_factory=list)
    storage_requests: list[Seen] = field(default_factory=list)
    tokens: dict[str, Grant] = field(default_factory=dict)
    refresh_tokens: dict[str, str] = field(default_factory=dict)  # token -> user
    servers: list[ThreadingHTTPServer] = field(default_factory=list)
    tls: ssl.SSLContext | None = None

    # -- lifecycle

    def start(self) -> FakeRegistry:
        self.registry = self._serve(self.handle_registry, self.tls)
        self.token_server = self._serve(self.handle_token)
        self.storage = self._serve(self.handle_storage)
        return self

    def _serve(
        self, route: Callable[[Handler, Seen], None], tls: ssl.SSLContext | None = None
    ) -> ThreadingHTTPServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.route = route  # type: ignore[attr-defined]
        server.tls_probes = 0  # type: ignore[attr-defined]
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        self.servers.append(server)
        return server

    def stop(self) -> None:
        for server in self.servers:
            server.shutdown()
            server.server_close()

    @property
    def port(self) -> int:
        return self.registry.server_address[1]

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def realm(self) -> str:
        host = self.realm_host or f"127.0.0.1:{self.token_server.server_address[1]}"
        return f"http://{host}/token"

    def ref(self, rest: str) -> str:
        return f"{self.host}/{rest}"

    # -- content

    def add_blob(self, data: bytes) -> str:
        digest = sha256(data)
        self.blobs[digest] = data
        return digest

    def add_manifest(self, name: str, tag: str | None, media_type: str, raw: bytes) -> str:
        digest = sha256(raw)
        self.manifests[(name, digest)] = (media_type, raw)
        if tag is not None:
            self.manifests[(name, tag)] = (media_type, raw)
        return digest

    def add_image(
        self,
        name: str,
        tag: str | None,
        platform: tuple[str, str, str] = ("linux", "amd64", ""),
        layers: tuple[bytes, ...] = (b"layer one", b"layer two"),
        docker: bool = False,
    ) -> tuple[str, bytes, list[str]]:
        os_name, arch, variant = platform
        config: dict[str, Any] = {"os": os_name, "architecture": arch}
        if variant:
            config["variant"] = variant
        config["config"] = {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]}
        config_raw = json.dumps(config).encode()
        layer_type = DOCKER_LAYER if docker else OCI_LAYER
        manifest = {
            "schemaVersion": 2,
            "mediaType": DOCKER_MANIFEST if docker else OCI_MANIFEST,
            "config": {
                "mediaType": DOCKER_CONFIG if docker else OCI_CONFIG,
                "digest": self.add_blob(config_raw),
                "size": len(config_raw),
            },
            "layers": [
                {"mediaType": layer_type, "digest": self.add_blob(data), "size": len(data)}
                for data in layers
            ],
        }
        raw = json.dumps(manifest, indent=3).encode()
        media_type = DOCKER_MANIFEST if docker else OCI_MANIFEST
        digest = self.add_manifest(name, tag, media_type, raw)
        return digest, raw, [sha256(data) for data in layers]

    def add_index(
        self, name: str, tag: str, entries: list[tuple[str, bytes, dict[str, str]]], docker: bool
    ) -> str:
        media = DOCKER_LIST if docker else OCI_INDEX
        child = DOCKER_MANIFEST if docker else OCI_MANIFEST
        index = {
            "schemaVersion": 2,
            "mediaType": media,
            "manifests": [
                {"mediaType": child, "digest": digest, "size": len(raw), "platform": platform}
                for digest, raw, platform in entries
            ],
        }
        return self.add_manifest(name, tag, media, json.dumps(index).encode())

    # -- answers

    def handle_registry(self, h: Handler, seen: Seen) -> None:
        self.requests.append(seen)
        if seen.path == "/v2/":
            if self._authorized(h, seen, None):
                h.answer(200, b"{}", {"Content-Type": "application/json"})
            return
        parts = seen.path.removeprefix("/v2/").rsplit("/", 2)
        if len(parts) != 3 or parts[1] not in ("manifests", "blobs"):
            h.error(404, "NAME_UNKNOWN", "repository name not known to registry")
            return
        name, kind, ref = parts
        if self.throttle > 0:
            self.throttle -= 1
            h.error(429, "TOOMANYREQUESTS", "too many requests", {"Retry-After": self.retry_after})
            return
        if not self._authorized(h, seen, name):
            return
        if kind == "manifests":
            self._manifest(h, seen, name, ref)
        elif ref not in self.blobs:
            h.error(404, "BLOB_UNKNOWN", "blob unknown to registry")
        elif self.redirect_blobs:
            target = self.redirect_host or f"127.0.0.1:{self.storage.server_address[1]}"
            target = target if "://" in target else f"http://{target}"
            location = f"{target}/store/{ref}?X-Amz-Signature=0123456789abcdef"
            h.answer(307, b"", {"Location": location})
        else:
            self._bytes(h, seen, self.blobs[ref], ref)

    def _authorized(self, h: Handler, seen: Seen, name: str | None) -> bool:
        sent = seen.headers.get("authorization", "")
        if self.auth == "none":
            return True
        if self.auth == "basic":
            if sent == basic(USER, PASSWORD):
                return self._allowed(h, sent, name)
            self._challenge(h, sent, 'Basic realm="fake-registry"')
            return False
        scheme, _, token = sent.partition(" ")
        grant = self.tokens.get(token) if scheme == "Bearer" else None
        usable = grant is not None and not grant.revoked and not self.reject_tokens
        if usable and (name is None or f"repository:{name}:pull" in grant.scopes):  # type: ignore[union-attr]
            return self._allowed(h, sent, name)
        params = f'realm="{self.realm}",service="{SERVICE}"'
        if name is not None:
            params += f',scope="repository:{name}:pull"'
        if grant is not None:
            params += ',error="invalid_token"'
        self._challenge(h, sent, "Bearer " + params)
        return False

    def _allowed(self, h: Handler, sent: str, name: str | None) -> bool:
        if name in self.denied:
            h.error(403, "DENIED", "requested access to the resource is denied" + self._echo(sent))
            return False
        return True

    def _echo(self, sent: str) -> str:
        return f" (you sent Authorization: {sent})" if self.echo_auth and sent else ""

    def _challenge(self, h: Handler, sent: str, challenge: str) -> None:
        message = "authentication required" + self._echo(sent)
        h.error(401, "UNAUTHORIZED", message, {"WWW-Authenticate": challenge})

    def _manifest(self, h: Handler, seen: Seen, name: str, ref: str) -> None:
        found = self.manifests.get((name, ref))
        if found is None:
            h.error(404, "MANIFEST_UNKNOWN", "manifest unknown to registry")
            return
        media_type, raw = found
        accepted = [
            part.split(";")[0].strip() for part in seen.headers.get("accept", "").split(",")
        ]
        if media_type not in accepted:
            h.error(404, "MANIFEST_UNKNOWN", f"{media_type} found, but not accepted")
            return
        digest = sha256(b"not it" + raw) if self.lie_content_digest else sha256(raw)
        headers = {
            "Content-Type": self.content_type or media_type,
            "Docker-Content-Digest": digest,
            "ETag": f'"{digest}"',
        }
        h.answer(200, raw, headers)

    def _bytes(self, h: Handler, seen: Seen, data: bytes, digest: str) -> None:
        headers = {
            "Content-Type": "application/octet-stream",
            "Docker-Content-Digest": digest,
            "ETag": f'"{digest}"',
            "Accept-Ranges": "bytes",
        }
        asked = seen.headers.get("range", "")
        start = 0
        if asked.startswith("bytes=") and asked.endswith("-") and not self.ignore_range:
            start = int(asked[6:-1])
            if start >= len(data):
                h.answer(416, b"", {"Content-Range": f"bytes */{len(data)}"})
                return
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        status = 206 if "Content-Range" in headers else 200
        if self.cut_at is not None:
            cut, self.cut_at = self.cut_at, None
            h.cut(status, body, headers, cut)
            return
        h.answer(status, body, headers)

    def handle_token(self, h: Handler, seen: Seen) -> None:
        self.token_requests.append(seen)
        if seen.method == "POST":
            form = parse_qs(seen.body.decode())
            user = self.refresh_tokens.get(form.get("refresh_token", [""])[0])
            if form.get("grant_type") != ["refresh_token"] or user is None:
                said = "unknown refresh token " + form.get("refresh_token", [""])[0]
                body = {"error": "invalid_grant", "error_description": said}
                h.answer(400, json.dumps(body).encode(), {"Content-Type": "application/json"})
                return
            service = form.get("service", [""])[0]
            scopes = form.get("scope", [""])[0].split()
        else:
            sent = seen.headers.get("authorization", "")
            user = None
            if sent:
                if sent != basic(USER, PASSWORD):
                    body = {"details": "incorrect username or password" + self._echo(sent)}
                    h.answer(401, json.dumps(body).encode(), {"Content-Type": "application/json"})
                    return
                user = USER
            service = seen.query.get("service", [""])[0]
            scopes = seen.query.get("scope", [])
        if service != SERVICE:
            h.answer(400, b'{"details": "unknown service"}', {})
            return
        granted = [s for s in scopes if s.split(":")[1] not in self.private or user == USER]
        token = secrets.token_hex(20)
        self.tokens[token] = Grant(user, granted)
        issued = datetime.datetime.now(datetime.UTC).isoformat().replace("+00:00", "Z")
        answer = {"token": token, "expires_in": self.token_lifetime, "issued_at": issued}
        h.answer(200, json.dumps(answer).encode(), {"Content-Type": "application/json"})

    def handle_storage(self, h: Handler, seen: Seen) -> None:
        self.storage_requests.append(seen)
        digest = seen.path.removeprefix("/store/")
        if digest not in self.blobs:
            h.answer(404, b"<Error><Code>NoSuchKey</Code></Error>", {})
            return
        self._bytes(h, seen, self.blobs[digest], digest)

    def revoke_tokens(self) -> None:
        for grant in self.tokens.values():
            grant.revoked = True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms stall

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def handle_one_request(self) -> None:
        # A TLS handshake on the plain port is answered at once, as Go's net/http (and so
        # the distribution registry) does; http.server would wait for a line break.
        if self.rfile.peek(1)[:1] == b"\x16":  # type: ignore[attr-defined]
            self.server.tls_probes += 1  # type: ignore[attr-defined]
            self.wfile.write(b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request "
                             b"to an HTTPS server.\n")  # fmt: skip
            self.close_connection = True
            return
        super().handle_one_request()

    def _handle(self) -> None:
        split = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers: dict[str, str] = {}
        for name, value in self.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        seen = Seen(self.command, split.path, parse_qs(split.query), headers, body)
        self.server.route(self, seen)  # type: ignore[attr-defined]

    do_GET = do_HEAD = do_POST = _handle

    def answer(self, status: int, body: bytes, headers: dict[str, str]) -> None:
        self.send_response(status)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(
        self, status: int, code: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        body = json.dumps({"errors": [{"code": code, "message": message, "detail": None}]})
        self.answer(status, body.encode(), {"Content-Type": "application/json", **(headers or {})})

    def cut(self, status: int, body: bytes, headers: dict[str, str], at: int) -> None:
        """The headers and `at` bytes of the body, then the connection closed."""
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[:at])
        self.wfile.flush()
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)


class OnlyTheseHosts(httpx.BaseTransport):
    """Every request to 127.0.0.1 whatever host it names (the Host header stays as it was):
    `hosts` maps names that must look remote to loopback ports; any other name is a test
    failure, never a connection."""

    def __init__(self, hosts: dict[str, int]) -> None:
        self.hosts = hosts
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        host = request.url.host
        if host in self.hosts:
            request = httpx.Request(
                request.method,
                request.url.copy_with(host="127.0.0.1", port=self.hosts[host]),
                headers=request.headers,
                stream=request.stream,
                extensions=request.extensions,
            )
        elif host not in ("127.0.0.1", "localhost"):
            raise AssertionError(f"a request to {host}")
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


# -- fixtures ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def fresh_tokens() -> Iterator[None]:
    registry_client.clear_token_cache()
    yield
    registry_client.clear_token_cache()


@pytest.fixture
def registry() -> Iterator[FakeRegistry]:
    fake = FakeRegistry().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def connect(sleeps: list[float]) -> Iterator[Callable[..., RegistryClient]]:
    made: list[RegistryClient] = []

    def make(text: str, credential: Credential | None = None, **options: Any) -> RegistryClient:
        options.setdefault("policy", FAST)
        options.setdefault("sleep", sleeps.append)
        client = RegistryClient(parse_reference(text), credential, **options)
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()


def failure(call: Callable[[], object]) -> ShoalError:
    with pytest.raises(ShoalError) as caught:
        call()
    return caught.value


# -- anonymous, basic, bearer --------------------------------------------------------------


def test_anonymous_registry_over_plain_http_on_loopback(
    registry: FakeRegistry, connect: Connect
) -> None:
    digest, raw, _ = registry.add_image("tools/app", "v1")
    client = connect(registry.ref("tools/app:v1"))
    media_type, body, got = client.manifest()
    assert (media_type, body, got) == (OCI_MANIFEST, raw, digest)
    first, *rest = registry.requests
    assert (first.method, first.path) == ("GET", "/v2/")
    assert rest[0].path == "/v2/tools/app/manifests/v1"
    assert rest[0].headers["accept"] == ACCEPT
    for media in (OCI_INDEX, OCI_MANIFEST, DOCKER_LIST, DOCKER_MANIFEST):
        assert media in rest[0].headers["accept"]
    assert "authorization" not in rest[0].headers


def test_basic_auth_goes_to_the_registry_only(registry: FakeRegistry, connect: Connect) -> None:
    registry.auth = "basic"
    registry.add_image("tools/app", "v1")
    client = connect(registry.ref("tools/app:v1"), Credential(USER, PASSWORD))
    client.manifest()
    assert registry.requests[-1].headers["authorization"] == basic(USER, PASSWORD)
    assert registry.token_requests == []


def test_basic_auth_without_credentials_says_how_to_give_them(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "basic"
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1")).manifest)
    assert isinstance(error, CredentialsError)
    assert exit_code_for(error) == ExitCode.CREDENTIALS
    assert "HTTP 401 UNAUTHORIZED" in str(error)
    assert "--user with --password-stdin" in str(error)


def test_anonymous_bearer_token_for_the_pull_scope(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    digest, _, layers = registry.add_image("tools/app", "v1")
    client = connect(registry.ref("tools/app:v1"))
    assert client.manifest().digest == digest
    assert b"".join(client.open_blob(layers[0])) == b"layer one"
    (asked,) = registry.token_requests  # one token, cached for the next requests
    assert asked.query == {"service": [SERVICE], "scope": ["repository:tools/app:pull"]}
    assert "authorization" not in asked.headers
    token = next(iter(registry.tokens))
    assert registry.requests[-1].headers["authorization"] == f"Bearer {token}"


def test_bearer_with_credentials_sends_them_to_the_token_service_only(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.private.add("team/secret")
    registry.add_image("team/secret", "v1")
    client = connect(registry.ref("team/secret:v1"), Credential(USER, PASSWORD))
    client.manifest()
    (asked,) = registry.token_requests
    assert asked.headers["authorization"] == basic(USER, PASSWORD)
    assert asked.query["account"] == [USER]
    for seen in registry.requests:
        assert PASSWORD not in json.dumps(seen.headers)
        assert not seen.headers.get("authorization", "Bearer").startswith("Basic")


def test_private_repository_without_credentials_exits_77(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.private.add("team/secret")
    registry.add_image("team/secret", "v1")
    error = failure(connect(registry.ref("team/secret:v1")).manifest)
    assert isinstance(error, CredentialsError)
    assert f"{registry.host}/team/secret:v1: HTTP 401" in str(error)
    assert "log in with docker or podman login" in str(error)


def test_wrong_password_is_the_token_services_refusal(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1"), Credential(USER, "wrong-pass")).manifest)
    assert isinstance(error, CredentialsError)
    assert "the token service answered HTTP 401" in str(error)
    assert f"refused user {USER!r}" in str(error)


def test_identity_token_is_posted_as_a_refresh_token(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.private.add("team/secret")
    registry.refresh_tokens["idtok-0123456789"] = USER
    digest, _, _ = registry.add_image("team/secret", "v1")
    credential = Credential("", "", "idtok-0123456789")
    assert connect(registry.ref("team/secret:v1"), credential).manifest().digest == digest
    (asked,) = registry.token_requests
    assert asked.method == "POST"
    assert asked.headers["content-type"] == "application/x-www-form-urlencoded"
    assert parse_qs(asked.body.decode()) == {
        "grant_type": ["refresh_token"],
        "refresh_token": ["idtok-0123456789"],
        "service": [SERVICE],
        "client_id": ["shoal"],
        "scope": ["repository:team/secret:pull"],
    }
    assert "authorization" not in asked.headers
    assert all("idtok" not in json.dumps(seen.headers) for seen in registry.requests)


def test_a_refused_identity_token_exits_77_unquoted(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.add_image("tools/app", "v1")
    credential = Credential("", "", "idtok-expired-0123456789")
    error = failure(connect(registry.ref("tools/app:v1"), credential).manifest)
    assert isinstance(error, CredentialsError)
    assert "HTTP 400 invalid_grant: unknown refresh token ***" in str(error)
    assert "refused the identity token" in str(error)
    assert "idtok" not in str(error)


def test_tokens_are_cached_across_clients(registry: FakeRegistry, connect: Connect) -> None:
    registry.auth = "bearer"
    _, _, layers = registry.add_image("tools/app", "v1")
    for _ in range(2):
        client = connect(registry.ref("tools/app:v1"))
        client.manifest()
        b"".join(client.open_blob(layers[1]))
    assert len(registry.token_requests) == 1


def test_a_401_mid_pull_renews_the_token_once(registry: FakeRegistry, connect: Connect) -> None:
    registry.auth = "bearer"
    _, _, layers = registry.add_image("tools/app", "v1", layers=(b"a" * 5000,))
    client = connect(registry.ref("tools/app:v1"))
    client.manifest()
    registry.revoke_tokens()  # the token expired on the registry's side
    assert b"".join(client.open_blob(layers[0])) == b"a" * 5000
    assert len(registry.token_requests) == 2
    statuses = [seen.headers.get("authorization", "")[:6] for seen in registry.requests]
    assert statuses.count("Bearer") == 3  # manifest, blob refused, blob again


def test_a_token_refused_again_after_renewal_exits_77(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.reject_tokens = True
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1"), Credential(USER, PASSWORD)).manifest)
    assert isinstance(error, CredentialsError)
    assert "the credentials were refused" in str(error)
    assert len(registry.token_requests) == 2  # the first token, and one renewal
    manifest_gets = [seen for seen in registry.requests if "/manifests/" in seen.path]
    assert len(manifest_gets) == 2


def test_denied_repository_exits_77(registry: FakeRegistry, connect: Connect) -> None:
    registry.auth = "bearer"
    registry.denied.add("tools/app")
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1")).manifest)
    assert isinstance(error, CredentialsError)
    assert "HTTP 403 DENIED" in str(error)


# -- credentials never in a message --------------------------------------------------------


def secrets_in(text: str, *values: str) -> list[str]:
    return [value for value in values if value in text]


def test_an_echoed_basic_header_is_not_printed(registry: FakeRegistry, connect: Connect) -> None:
    registry.auth = "basic"
    registry.echo_auth = True
    registry.add_image("tools/app", "v1")
    wrong = "Wr0ng-Passw0rd-42"
    error = failure(connect(registry.ref("tools/app:v1"), Credential(USER, wrong)).manifest)
    assert isinstance(error, CredentialsError)
    message = str(error)
    assert "you sent Authorization: Basic ***" in message  # the echo came, scrubbed
    encoded = base64.b64encode(f"{USER}:{wrong}".encode()).decode()
    assert secrets_in(message, wrong, encoded, f"{USER}:{wrong}") == []


def test_an_echoed_token_is_not_printed(registry: FakeRegistry, connect: Connect) -> None:
    registry.auth = "bearer"
    registry.echo_auth = True
    registry.denied.add("tools/app")
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1"), Credential(USER, PASSWORD)).manifest)
    (token,) = registry.tokens
    assert "you sent Authorization: Bearer ***" in str(error)
    assert secrets_in(str(error), token, PASSWORD) == []


def test_a_token_service_echoing_the_password_is_not_printed(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.echo_auth = True
    registry.add_image("tools/app", "v1")
    wrong = "Wr0ng-Passw0rd-42"
    error = failure(connect(registry.ref("tools/app:v1"), Credential(USER, wrong)).manifest)
    assert isinstance(error, CredentialsError)
    encoded = base64.b64encode(f"{USER}:{wrong}".encode()).decode()
    assert "Basic ***" in str(error)
    assert secrets_in(str(error), wrong, encoded) == []


# -- manifests ------------------------------------------------------------------------------


def test_a_manifest_asked_by_digest_must_hash_to_it(
    registry: FakeRegistry, connect: Connect
) -> None:
    digest, _, _ = registry.add_image("tools/app", "v1")
    _, other, _ = registry.add_image("tools/app", "v2", layers=(b"other",))
    registry.manifests[("tools/app", digest)] = (OCI_MANIFEST, other)  # a lying registry
    client = connect(registry.ref(f"tools/app@{digest}"))
    error = failure(client.manifest)
    assert isinstance(error, ManifestError)
    assert exit_code_for(error) == ExitCode.ERROR
    assert "not the one asked for" in str(error)


def test_a_lying_content_digest_header_is_refused(registry: FakeRegistry, connect: Connect) -> None:
    registry.lie_content_digest = True
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1")).manifest)
    assert "Docker-Content-Digest" in str(error)


def test_content_type_and_media_type_must_agree(registry: FakeRegistry, connect: Connect) -> None:
    registry.content_type = DOCKER_MANIFEST
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1")).manifest)
    assert f"the registry says {DOCKER_MANIFEST}, the manifest says {OCI_MANIFEST}" in str(error)


def test_a_generic_content_type_falls_back_to_the_media_type(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.content_type = "application/json; charset=utf-8"
    registry.add_image("tools/app", "v1", docker=True)
    assert connect(registry.ref("tools/app:v1")).manifest().media_type == DOCKER_MANIFEST


def test_unknown_tag_names_the_reference(registry: FakeRegistry, connect: Connect) -> None:
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v9")).manifest)
    assert isinstance(error, NotFoundError)
    assert exit_code_for(error) == ExitCode.ERROR
    assert str(error).startswith(f"{registry.host}/tools/app:v9: not found (HTTP 404 ")
    assert "MANIFEST_UNKNOWN: manifest unknown to registry" in str(error)


def test_not_a_registry(registry: FakeRegistry, connect: Connect) -> None:
    registry.registry.route = lambda h, seen: h.answer(404, b"404 page not found", {})  # type: ignore[attr-defined]
    error = failure(connect(registry.ref("tools/app:v1")).manifest)
    assert "serves no registry API" in str(error)


# -- platforms ------------------------------------------------------------------------------


def multi_platform(registry: FakeRegistry, docker: bool = False) -> dict[str, str]:
    amd, amd_raw, _ = registry.add_image("tools/app", None, ("linux", "amd64", ""), docker=docker)
    arm, arm_raw, _ = registry.add_image(
        "tools/app", None, ("linux", "arm64", "v8"), layers=(b"arm layer",), docker=docker
    )
    v7, v7_raw, _ = registry.add_image("tools/app", None, ("linux", "arm", "v7"), docker=docker)
    attestation, att_raw, _ = registry.add_image("tools/app", None, ("unknown", "unknown", ""))
    entries = [
        (amd, amd_raw, {"os": "linux", "architecture": "amd64"}),
        (arm, arm_raw, {"os": "linux", "architecture": "arm64", "variant": "v8"}),
        (v7, v7_raw, {"os": "linux", "architecture": "arm", "variant": "v7"}),
        (attestation, att_raw, {"os": "unknown", "architecture": "unknown"}),
    ]
    index = registry.add_index("tools/app", "multi", entries, docker=docker)
    return {"index": index, "amd64": amd, "arm64": arm, "arm": v7}


@pytest.mark.parametrize("docker", [False, True], ids=["oci-index", "docker-list"])
@pytest.mark.parametrize(
    ("asked", "chosen", "shown"),
    [
        ("linux/amd64", "amd64", "linux/amd64"),
        ("linux/x86_64", "amd64", "linux/amd64"),
        ("linux/arm64", "arm64", "linux/arm64/v8"),
        ("linux/arm64/v8", "arm64", "linux/arm64/v8"),
        ("linux/aarch64", "arm64", "linux/arm64/v8"),
        ("linux/arm/v7", "arm", "linux/arm/v7"),
        ("linux/arm", "arm", "linux/arm/v7"),
        ("linux/arm/v8", "arm", "linux/arm/v7"),  # an older variant runs
    ],
)
def test_an_index_resolves_to_the_platform_asked(
    registry: FakeRegistry, connect: Connect, docker: bool, asked: str, chosen: str, shown: str
) -> None:
    digests = multi_platform(registry, docker)
    resolved = connect(registry.ref("tools/app:multi")).resolve(platform=asked)
    assert resolved.digest == digests["index"]
    assert resolved.manifest_digest == digests[chosen]
    assert resolved.platform == shown
    assert resolved.media_type == (DOCKER_MANIFEST if docker else OCI_MANIFEST)
    assert json.loads(resolved.config_raw)["architecture"] == chosen
    assert resolved.config_digest == sha256(resolved.config_raw)
    assert [layer.size for layer in resolved.layers] == [
        entry["size"] for entry in resolved.manifest["layers"]
    ]


def test_the_default_platform_is_this_machines(
    registry: FakeRegistry, connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    digests = multi_platform(registry)
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    resolved = connect(registry.ref("tools/app:multi")).resolve()
    assert (resolved.manifest_digest, resolved.platform) == (digests["arm64"], "linux/arm64/v8")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    resolved = connect(registry.ref("tools/app:multi")).resolve()
    assert resolved.manifest_digest == digests["amd64"]


def test_no_image_for_the_platform_lists_those_there(
    registry: FakeRegistry, connect: Connect
) -> None:
    multi_platform(registry)
    error = failure(
        lambda: connect(registry.ref("tools/app:multi")).resolve(platform="linux/s390x")
    )
    assert isinstance(error, NotFoundError)
    assert str(error) == (
        f"{registry.host}/tools/app:multi: no image for linux/s390x; it has linux/amd64, "
        "linux/arm/v7, linux/arm64/v8: pick one with --platform"
    )


def test_a_single_platform_image_is_checked_against_the_platform_asked(
    registry: FakeRegistry, connect: Connect
) -> None:
    digest, _, _ = registry.add_image("tools/app", "v1", ("linux", "arm64", "v8"))
    resolved = connect(registry.ref("tools/app:v1")).resolve(platform="linux/arm64")
    assert (resolved.manifest_digest, resolved.platform) == (digest, "linux/arm64/v8")
    assert resolved.digest == digest
    error = failure(lambda: connect(registry.ref("tools/app:v1")).resolve(platform="linux/amd64"))
    assert isinstance(error, NotFoundError)
    assert "the image is for linux/arm64/v8, not linux/amd64" in str(error)


def test_an_index_lying_about_a_manifest_size_is_refused(
    registry: FakeRegistry, connect: Connect
) -> None:
    amd, raw, _ = registry.add_image("tools/app", None)
    registry.add_index("tools/app", "v1", [(amd, raw + b"  ", {"os": "linux",
                       "architecture": "amd64"})], docker=False)  # fmt: skip
    error = failure(lambda: connect(registry.ref("tools/app:v1")).resolve(platform="linux/amd64"))
    assert isinstance(error, ManifestError)
    assert f"manifest {amd} has {len(raw) + 2} bytes, the registry sent {len(raw)}" in str(error)


def test_platforms() -> None:
    assert str(parse_platform("linux/arm64/v8")) == "linux/arm64/v8"
    assert parse_platform("linux/arm64/v8").normalized() == Platform("linux", "arm64", "")
    assert default_platform("x86_64") == Platform("linux", "amd64")
    assert default_platform("aarch64") == Platform("linux", "arm64")
    assert default_platform("armv7l") == Platform("linux", "arm", "v7")
    assert default_platform("i686") == Platform("linux", "386")
    assert default_platform("riscv64") == Platform("linux", "riscv64")
    assert [str(p) for p in Platform("linux", "amd64", "v3").candidates()] == [
        "linux/amd64/v3",
        "linux/amd64/v2",
        "linux/amd64",
    ]
    for bad in ("amd64", "linux/", "linux/arm64/v8/x", "linux amd64"):
        with pytest.raises(UsageError, match="write OS/ARCH"):
            parse_platform(bad)


def test_challenges() -> None:
    found = parse_challenges([
        'Bearer realm="https://auth.example/token",service="registry.example",'
        'scope="repository:a/b:pull,push", Basic realm="x \\"y\\""',
        "Negotiate abc==",
    ])  # fmt: skip
    assert [(c.scheme, c.params) for c in found] == [
        ("bearer", {"realm": "https://auth.example/token", "service": "registry.example",
                    "scope": "repository:a/b:pull,push"}),
        ("basic", {"realm": 'x "y"'}),
        ("negotiate", {}),
    ]  # fmt: skip


# -- blobs ----------------------------------------------------------------------------------


def test_blob_from_an_offset_asks_a_range(registry: FakeRegistry, connect: Connect) -> None:
    data = bytes(range(256)) * 100
    digest = registry.add_blob(data)
    client = connect(registry.ref("tools/app:v1"))
    stream = client.open_blob(digest, 1000, size=len(data))
    assert b"".join(stream) == data[1000:]
    assert (stream.received, stream.total) == (len(data), len(data))
    assert registry.requests[-1].headers["range"] == "bytes=1000-"


def test_a_registry_ignoring_range_still_gives_the_rest(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.ignore_range = True
    data = bytes(range(256)) * 100
    digest = registry.add_blob(data)
    stream = connect(registry.ref("tools/app:v1")).open_blob(digest, 777)
    assert b"".join(stream) == data[777:]


def test_a_cut_connection_resumes_with_range(
    registry: FakeRegistry, connect: Connect, sleeps: list[float]
) -> None:
    data = bytes(range(256)) * 400
    digest = registry.add_blob(data)
    registry.cut_at = 30_000
    stream = connect(registry.ref("tools/app:v1")).open_blob(digest, size=len(data))
    assert b"".join(stream) == data
    blob_gets = [seen for seen in registry.requests if "/blobs/" in seen.path]
    assert len(blob_gets) == 2
    assert "range" not in blob_gets[0].headers
    assert blob_gets[1].headers["range"].startswith("bytes=")
    assert int(blob_gets[1].headers["range"][6:-1]) > 0
    assert len(sleeps) == 1


def test_an_offset_past_the_end_is_416(registry: FakeRegistry, connect: Connect) -> None:
    digest = registry.add_blob(b"short")
    error = failure(lambda: connect(registry.ref("tools/app:v1")).open_blob(digest, 10))
    assert isinstance(error, RangeNotSatisfiable)


def test_a_blob_of_another_size_is_refused(registry: FakeRegistry, connect: Connect) -> None:
    digest = registry.add_blob(b"0123456789")
    error = failure(lambda: connect(registry.ref("tools/app:v1")).open_blob(digest, size=4))
    assert "the registry says the blob has 10 bytes, the manifest 4" in str(error)


def test_a_missing_blob_fails_at_open(registry: FakeRegistry, connect: Connect) -> None:
    error = failure(lambda: connect(registry.ref("tools/app:v1")).open_blob("sha256:" + "0" * 64))
    assert isinstance(error, NotFoundError)
    assert "BLOB_UNKNOWN" in str(error)


def test_blob_redirects_get_no_authorization(registry: FakeRegistry, connect: Connect) -> None:
    registry.auth = "bearer"
    registry.redirect_blobs = True
    data = b"x" * 10_000
    digest = registry.add_blob(data)
    client = connect(registry.ref("tools/app:v1"), Credential(USER, PASSWORD))
    assert b"".join(client.open_blob(digest, 4000)) == data[4000:]
    (fetched,) = registry.storage_requests
    assert fetched.path == f"/store/{digest}"
    assert fetched.query == {"X-Amz-Signature": ["0123456789abcdef"]}
    assert "authorization" not in fetched.headers
    assert fetched.headers["range"] == "bytes=4000-"
    assert registry.requests[-1].headers["authorization"].startswith("Bearer ")


def test_redirect_to_plain_http_elsewhere_is_refused(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.redirect_blobs = True
    registry.redirect_host = "storage.example:9"
    digest = registry.add_blob(b"data")
    transport = OnlyTheseHosts({"storage.example": registry.storage.server_address[1]})
    client = connect(registry.ref("tools/app:v1"), transport=transport)
    error = failure(lambda: client.open_blob(digest))
    assert isinstance(error, ConfigError)
    assert exit_code_for(error) == ExitCode.CONFIG
    assert str(error).startswith("http://storage.example:9/store/sha256:")
    assert "plain http refused" in str(error)
    assert "[image] insecure_registries" in str(error)
    assert "X-Amz-Signature" not in str(error)
    assert registry.storage_requests == []


# -- 429 and unreachable --------------------------------------------------------------------


def test_429_waits_as_long_as_retry_after_says(
    registry: FakeRegistry, connect: Connect, sleeps: list[float]
) -> None:
    registry.throttle = 2
    registry.retry_after = "3"
    registry.add_image("tools/app", "v1")
    told: list[float] = []
    connect(registry.ref("tools/app:v1"), on_retry=told.append).manifest()
    assert sleeps == [3.0, 3.0]
    assert told == [3.0, 3.0]


def test_429_waits_no_longer_than_the_policy_allows(
    registry: FakeRegistry, connect: Connect, sleeps: list[float]
) -> None:
    registry.throttle = 1
    registry.retry_after = "3600"
    registry.add_image("tools/app", "v1")
    connect(registry.ref("tools/app:v1")).manifest()
    assert sleeps == [FAST.max_delay_seconds]


def test_429_for_too_long_exits_75(
    registry: FakeRegistry, connect: Connect, sleeps: list[float]
) -> None:
    registry.throttle = 99
    registry.add_image("tools/app", "v1")
    error = failure(connect(registry.ref("tools/app:v1")).manifest)
    assert isinstance(error, RetryableError)
    assert exit_code_for(error) == ExitCode.RETRYABLE
    assert "HTTP 429 TOOMANYREQUESTS: too many requests after 3 attempts" in str(error)
    assert len(sleeps) == 2


def test_unreachable_registry_exits_69(connect: Connect) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error = failure(connect(f"127.0.0.1:{port}/tools/app:v1").manifest)
    assert isinstance(error, ProviderUnreachableError)
    assert exit_code_for(error) == ExitCode.UNREACHABLE
    assert f"http://127.0.0.1:{port}/v2/" in str(error)
    assert "https before it" in str(error)


# -- plain http and TLS ---------------------------------------------------------------------


def test_plain_http_to_another_host_needs_insecure_registries(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.add_image("tools/app", "v1")
    transport = OnlyTheseHosts({"registry.example": registry.port})
    text = f"registry.example:{registry.port}/tools/app:v1"
    error = failure(connect(text, transport=transport).manifest)
    assert isinstance(error, ConfigError)
    assert "answered https in plain http" in str(error)
    assert f"list registry.example:{registry.port} there" in str(error)
    assert "[image] insecure_registries" in str(error)
    assert registry.requests == []  # only a TLS handshake it could not read

    insecure = {f"registry.example:{registry.port}"}
    assert connect(text, transport=transport, insecure=insecure).manifest().media_type
    assert registry.requests[0].headers["host"] == f"registry.example:{registry.port}"


def test_the_scheme_found_can_be_given_to_the_next_client(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.add_image("tools/app", "v1")
    first = connect(registry.ref("tools/app:v1"))
    assert first.scheme == "http"
    assert registry.registry.tls_probes == 1  # type: ignore[attr-defined]
    connect(registry.ref("tools/app:v1"), scheme="http").manifest()
    assert registry.registry.tls_probes == 1  # type: ignore[attr-defined]
    assert len([seen for seen in registry.requests if seen.path == "/v2/"]) == 2


def test_a_plain_http_token_realm_elsewhere_is_refused(
    registry: FakeRegistry, connect: Connect
) -> None:
    registry.auth = "bearer"
    registry.realm_host = "auth.example"
    registry.add_image("tools/app", "v1")
    transport = OnlyTheseHosts({"auth.example": registry.token_server.server_address[1]})
    error = failure(connect(registry.ref("tools/app:v1"), transport=transport).manifest)
    assert isinstance(error, ConfigError)
    assert str(error).startswith("http://auth.example/token: plain http refused")
    assert "list auth.example there" in str(error)
    assert registry.token_requests == []


def make_tls(tmp: Path) -> tuple[ssl.SSLContext, Path]:
    """A throw-away CA and a certificate for 127.0.0.1 it signed: the server's context and
    the CA file a client may trust."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shoal test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False),
                       critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                       critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    ca_file, cert_file, key_file = tmp / "ca.pem", tmp / "cert.pem", tmp / "key.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_file, key_file)
    return server, ca_file


@pytest.fixture
def tls_registry(tmp_path: Path) -> Iterator[tuple[FakeRegistry, Path]]:
    context, ca_file = make_tls(tmp_path)
    fake = FakeRegistry(tls=context).start()
    try:
        yield fake, ca_file
    finally:
        fake.stop()


def test_tls_registry_on_loopback(
    tls_registry: tuple[FakeRegistry, Path], connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, ca_file = tls_registry
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    digest, _, _ = registry.add_image("tools/app", "v1")
    text = registry.ref("tools/app:v1")

    error = failure(connect(text).manifest)  # a CA nobody told shoal about
    assert isinstance(error, ConfigError)
    assert f"https://{registry.host}/v2/: its TLS certificate is not trusted" in str(error)
    assert "SSL_CERT_FILE" in str(error) and "[image] insecure_registries" in str(error)
    assert registry.requests == []  # and no plain http tried instead

    trusted = connect(text, verify=lambda: ssl.create_default_context(cafile=str(ca_file)))
    assert trusted.manifest().digest == digest
    assert connect(text, insecure={registry.host}).manifest().digest == digest
    monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
    assert connect(text).manifest().digest == digest
    hinted = connect(text, scheme="http")  # stale: the registry has TLS now
    assert (hinted.manifest().digest, hinted.scheme) == (digest, "https")


def test_what_is_not_a_container_image(registry: FakeRegistry, connect: Connect) -> None:
    artifact = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.cncf.helm.config.v1+json",
                   "digest": registry.add_blob(b"{}"), "size": 2},
        "layers": [],
    }  # fmt: skip
    registry.add_manifest("tools/chart", "1", OCI_MANIFEST, json.dumps(artifact).encode())
    error = failure(lambda: connect(registry.ref("tools/chart:1")).resolve(platform="linux/amd64"))
    assert "not a container image (its config is 'application/vnd.cncf.helm" in str(error)
    schema1 = {"schemaVersion": 1, "name": "tools/old", "tag": "1", "fsLayers": []}
    registry.add_manifest("tools/old", "1", DOCKER_MANIFEST, json.dumps(schema1).encode())
    registry.content_type = "application/vnd.docker.distribution.manifest.v1+prettyjws"
    error = failure(connect(registry.ref("tools/old:1")).manifest)
    assert "a Docker schema 1 manifest" in str(error)
