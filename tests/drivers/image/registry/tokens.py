"""A token server of the tests' own, for a registry with `auth: token:` (docker's token spec).

GET REALM?service=S&scope=repository:NAME:pull[,push] (scope may repeat), with or without
basic credentials, answers `{"token", "access_token", "expires_in", "issued_at"}`; with
`offline_token=true` and credentials also a `refresh_token`. POST REALM (OAuth2 form:
grant_type=password with username/password, or grant_type=refresh_token) answers
`{"access_token", "expires_in", "scope", "issued_at"[, "refresh_token"]}`. Wrong credentials
or an unknown refresh token: 401. The tokens are RS256 JWTs signed with a throw-away key
whose certificate rides in each token's `x5c` header (checked by the registry against its
`rootcertbundle`), with the `access` claim granting what the user may do: every requested
action for a user in `users`, only `pull` for one in `readers`, `pull` for nobody else when
`anonymous_pull`, else nothing (the registry then answers 401 insufficient_scope).

`expires_in` is what the answers say; `lifetime` how long the registry accepts a token (None:
the same; whole seconds, up to 1 s more); both may be changed while the server runs. The
registry (distribution 2.8) allows 60 s of clock skew past `exp`: tokens are dated so that
they die when `lifetime` says, not a minute later. `requests` records each
request (user name, never a password); `count` is their number. `statuses` queues answers to
give instead (a failing token server). Loopback only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import secrets
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .pki import SigningKey

HOST = "127.0.0.1"
PATH = "/token"
SERVICE = "shoal-test-registry"
ISSUER = "shoal-test-issuer"
# distribution's registry/auth/token Leeway: exp and nbf are checked with this much slack.
REGISTRY_LEEWAY = 60
ACTIONS = ("pull", "push", "delete", "*")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def decode_jwt(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A JWT's header and claims (not verified: see `TokenServer.verify`)."""
    header, claims, _ = token.split(".")
    return json.loads(b64url_decode(header)), json.loads(b64url_decode(claims))


@dataclass(frozen=True)
class Scope:
    """`repository:library/busybox:pull,push` parsed."""

    type: str
    name: str
    actions: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Scope | None:
        kind, _, rest = text.partition(":")
        name, _, actions = rest.rpartition(":")
        if not kind or not name:
            return None
        return cls(kind, name, tuple(a for a in actions.split(",") if a))


@dataclass
class TokenRequest:
    """One request as the token server saw it."""

    method: str
    path: str
    user: str | None  # the user name sent (basic auth or OAuth2 form); None: anonymous
    authenticated: bool  # the credentials (or refresh token) were right
    grant_type: str | None  # POST only
    service: str | None
    scopes: list[str]
    status: int = 0
    granted: list[dict[str, Any]] = field(default_factory=list)


class TokenServer:
    """A running token server (`start()`), stopped by `stop()`."""

    def __init__(
        self,
        users: Mapping[str, str],
        *,
        readers: Iterable[str] = (),
        anonymous_pull: bool = False,
        expires_in: int = 300,
        lifetime: float | None = None,
        service: str = SERVICE,
        issuer: str = ISSUER,
        key: SigningKey | None = None,
    ) -> None:
        self.users = dict(users)
        self.readers = set(readers)
        self.anonymous_pull = anonymous_pull
        self.expires_in = expires_in
        self.lifetime = lifetime
        self.service = service
        self.issuer = issuer
        self.key = key or SigningKey()
        self.requests: list[TokenRequest] = []
        self.statuses: list[int] = []
        self.refresh_tokens: dict[str, str] = {}  # refresh token -> user
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    # -- running ------------------------------------------------------------------------------

    def start(self) -> TokenServer:
        server = ThreadingHTTPServer((HOST, 0), _handler(self))
        server.daemon_threads = True
        self._server = server
        self.port = server.server_address[1]
        self._thread = threading.Thread(
            target=server.serve_forever, name="token-server", kwargs={"poll_interval": 0.05}
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    @property
    def realm(self) -> str:
        return f"http://{HOST}:{self.port}{PATH}"

    @property
    def count(self) -> int:
        """Token requests so far (every request to the server, answered or not)."""
        with self._lock:
            return len(self.requests)

    def reset(self) -> None:
        """Forget the requests recorded and the statuses queued."""
        with self._lock:
            self.requests.clear()
            self.statuses.clear()

    # -- tokens -------------------------------------------------------------------------------

    def mint(
        self,
        access: Iterable[Mapping[str, Any]] = (),
        *,
        subject: str = "",
        lifetime: float | None = None,
        audience: str | None = None,
        issuer: str | None = None,
    ) -> str:
        """A signed token granting `access` ([{"type", "name", "actions"}]), accepted by the
        registry for `lifetime` seconds (default: the server's; negative: already expired)."""
        now = time.time()
        if lifetime is None:
            lifetime = self.lifetime if self.lifetime is not None else self.expires_in
        header = {"typ": "JWT", "alg": "RS256", "x5c": [self.key.cert_der_b64]}
        claims = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience or self.service,
            # Whole seconds, rounded up: a token lives at least `lifetime`, at most 1 s more.
            "exp": math.ceil(now + lifetime) - REGISTRY_LEEWAY,
            "nbf": int(now - 1),
            "iat": int(now),
            "jti": secrets.token_hex(12),
            "access": [dict(a) for a in access],
        }
        signing_input = (
            b64url(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + b64url(json.dumps(claims, separators=(",", ":")).encode())
        )
        signature = self.key.sign_rs256(signing_input.encode())
        return signing_input + "." + b64url(signature)

    def verify(self, token: str) -> bool:
        """Signed by this server's key (what the registry checks first)."""
        head, claims, signature = token.split(".")
        return self.key.verify_rs256(f"{head}.{claims}".encode(), b64url_decode(signature))

    def issue_refresh_token(self, user: str) -> str:
        """An identity token for `user`, as `docker login` stores (`identitytoken`)."""
        token = "rt-" + secrets.token_urlsafe(24)
        with self._lock:
            self.refresh_tokens[token] = user
        return token

    def grant(self, user: str | None, scopes: Iterable[str]) -> list[dict[str, Any]]:
        """What `user` (None: anonymous) gets for the scopes asked."""
        granted = []
        for text in scopes:
            scope = Scope.parse(text)
            if scope is None:
                continue
            if user is not None and user in self.users and user not in self.readers:
                actions = [a for a in scope.actions if a in ACTIONS]
            elif (user is not None and user in self.readers) or (
                user is None and self.anonymous_pull
            ):
                actions = [a for a in scope.actions if a == "pull"]
            else:
                actions = []
            if actions and scope.type == "repository":
                granted.append({"type": scope.type, "name": scope.name, "actions": actions})
        return granted

    # -- requests -----------------------------------------------------------------------------

    def _answer(
        self, method: str, path: str, query: str, authorization: str | None, body: bytes
    ) -> tuple[int, dict[str, Any]]:
        params = parse_qs(query, keep_blank_values=True)
        form = parse_qs(body.decode(errors="replace"), keep_blank_values=True) if body else {}
        record = TokenRequest(method, path, None, False, None, None, [])
        with self._lock:
            self.requests.append(record)
            queued = self.statuses.pop(0) if self.statuses else None
        if path != PATH or method not in ("GET", "POST"):
            record.status = 404
            return 404, {"errors": [{"code": "NOT_FOUND"}]}
        offline = False
        refresh_for: str | None = None
        if method == "GET":
            record.service = _first(params, "service")
            record.scopes = params.get("scope", [])
            offline = (_first(params, "offline_token") or "") == "true"
            user, password = _basic(authorization)
        else:
            record.grant_type = _first(form, "grant_type")
            record.service = _first(form, "service")
            record.scopes = [s for item in form.get("scope", []) for s in item.split()]
            offline = (_first(form, "access_type") or "") == "offline"
            user = password = None
            if record.grant_type == "password":
                user = _first(form, "username")
                password = _first(form, "password") or ""
            elif record.grant_type == "refresh_token":
                given = _first(form, "refresh_token") or ""
                with self._lock:
                    refresh_for = self.refresh_tokens.get(given)
                user = refresh_for
            else:
                record.status = 400
                return 400, {"error": "unsupported_grant_type"}
        record.user = user
        if queued is not None:
            record.status = queued
            return queued, {"errors": [{"code": "UNAVAILABLE", "message": "queued status"}]}
        if refresh_for is not None:
            record.authenticated = True
        elif user is not None:
            record.authenticated = self.users.get(user) == password and password is not None
            if not record.authenticated:
                record.status = 401
                return 401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]}
        elif method == "POST":  # OAuth2 has no anonymous grant
            record.status = 401
            return 401, {"error": "invalid_grant"}
        if record.service != self.service:
            record.status = 400
            return 400, {"errors": [{"code": "DENIED", "message": "unknown service"}]}
        record.granted = self.grant(user, record.scopes)
        token = self.mint(record.granted, subject=user or "")
        answer: dict[str, Any] = {
            "expires_in": self.expires_in,
            "issued_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        if method == "GET":
            answer["token"] = answer["access_token"] = token
        else:
            answer["access_token"] = token
            answer["scope"] = " ".join(record.scopes)
        if offline and user is not None:
            answer["refresh_token"] = (
                self.issue_refresh_token(user) if refresh_for is None else _given(form)
            )
        record.status = 200
        return 200, answer


def _first(values: Mapping[str, list[str]], key: str) -> str | None:
    found = values.get(key)
    return found[0] if found else None


def _given(form: Mapping[str, list[str]]) -> str:
    return _first(form, "refresh_token") or ""


def _basic(authorization: str | None) -> tuple[str | None, str | None]:
    if not authorization or not authorization.lower().startswith("basic "):
        return None, None
    try:
        user, _, password = base64.b64decode(authorization[6:].strip()).decode().partition(":")
    except (ValueError, UnicodeDecodeError):
        return "", None
    return user, password


def _handler(owner: TokenServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # the tests read `requests`; stderr noise would only hide failures

        def _serve(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            split = urlsplit(self.path)
            status, answer = owner._answer(
                method, split.path, split.query, self.headers.get("Authorization"), body
            )
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            if status == 401:
                self.send_header("WWW-Authenticate", 'Basic realm="shoal-test-token"')
            self.end_headers()
            with contextlib.suppress(OSError):
                self.wfile.write(data)

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

    return Handler
