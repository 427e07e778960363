"""A loopback stand-in for Google's token side, from the documented protocols: the OAuth
token endpoint (RFC 7523's jwt-bearer grant for a service-account key, checked as Google
checks it: the RS256 signature with the key's public half, iss, scope, aud, iat and exp;
RFC 6749's refresh_token grant for a user), the STS token exchange of workload identity
federation (RFC 8693), IAM Credentials generateAccessToken (impersonation) and the GCE
metadata server's token and project id.

https://developers.google.com/identity/protocols/oauth2/service-account#httprest
https://google.aip.dev/auth/4117, https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token
https://cloud.google.com/iam/docs/reference/credentials/rest/v1/projects.serviceAccounts/generateAccessToken
https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys

Each grant hands out the next of `grants` (the last one again when one is left), so a test
decides which tokens the Compute Engine stand-in will take. Errors are the real shapes:
{"error": "invalid_grant", "error_description": ...} for OAuth, {"error": {"code",
"message", "status"}} for Google APIs. `echo` makes every refusal quote what it was sent
(a careless server), to prove no message shows it.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

SCOPE = "https://www.googleapis.com/auth/cloud-platform"
SCOPE_PREFIX = "https://www.googleapis.com/auth/"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"  # a jwt-bearer assertion's aud
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
JWT_TYPE = "urn:ietf:params:oauth:token-type:jwt"
TOKEN_PATH = "/token"
STS_PATH = "/v1/token"
SA_EMAIL = "shoal-reader@proj-1.iam.gserviceaccount.com"
IMPERSONATE_PATH = f"/v1/projects/-/serviceAccounts/{SA_EMAIL}:generateAccessToken"
METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
METADATA_PROJECT_PATH = "/computeMetadata/v1/project/project-id"
SUBJECT_PATH = "/subject-token"
AUDIENCE = (
    "//iam.googleapis.com/projects/123456/locations/global/workloadIdentityPools/ci/providers/gh"
)


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


@dataclass
class Seen:
    path: str
    method: str
    headers: dict[str, str]
    form: dict[str, str]
    body: Any = None


@dataclass
class OAuthServer:
    grants: list[str] = field(default_factory=lambda: ["ya29.test-token-456"])
    expires_in: Any = 3599
    echo: bool = False
    keys: dict[str, rsa.RSAPublicKey] = field(default_factory=dict)  # client_email -> key
    key_ids: dict[str, str] = field(default_factory=dict)  # client_email -> private_key_id
    users: dict[str, tuple[str, str]] = field(default_factory=dict)  # refresh -> (id, secret)
    subjects: set[str] = field(default_factory=set)  # subject tokens the STS takes
    subject: str = ""  # what SUBJECT_PATH answers
    vm_project: str = "vm-project"
    seen: list[Seen] = field(default_factory=list)
    issued: list[str] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)  # of each accepted assertion

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> OAuthServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def to(self, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.path == path]

    # -- credentials files this server answers for -----------------------------------

    def service_account(self, key: rsa.RSAPrivateKey, **more: Any) -> dict[str, Any]:
        """A service-account key file as the console downloads it, its token_uri here."""
        self.keys[SA_EMAIL] = key.public_key()
        self.key_ids[SA_EMAIL] = "0123456789abcdef0123456789abcdef01234567"
        return {
            "type": "service_account",
            "project_id": "key-project",
            "private_key_id": self.key_ids[SA_EMAIL],
            "private_key": pem(key),
            "client_email": SA_EMAIL,
            "client_id": "112233445566778899000",
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": self.url(TOKEN_PATH),
            "auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
            "client_x509_cert_url": "https://www.googleapis.com/robot/v1/metadata/x509/x",
            "universe_domain": "googleapis.com",
            **more,
        }

    def authorized_user(self, **more: Any) -> dict[str, Any]:
        """gcloud's ADC file after `gcloud auth application-default login`."""
        refresh = "1//0g-refresh-token-of-a-user-XYZ"
        self.users[refresh] = ("764086051850-6qr4p6gpi6hn506pt8ejuq83di341hur.apps", "d-FL95Q19q7")
        return {
            "account": "",
            "client_id": self.users[refresh][0],
            "client_secret": self.users[refresh][1],
            "quota_project_id": "quota-project",
            "refresh_token": refresh,
            "type": "authorized_user",
            "universe_domain": "googleapis.com",
            "token_uri": self.url(TOKEN_PATH),
            **more,
        }

    def external_account(self, source: dict[str, Any], **more: Any) -> dict[str, Any]:
        """A credential configuration (gcloud iam workload-identity-pools create-cred-config)."""
        return {
            "type": "external_account",
            "audience": AUDIENCE,
            "subject_token_type": JWT_TYPE,
            "token_url": self.url(STS_PATH),
            "credential_source": source,
            **more,
        }

    # -- the endpoints ----------------------------------------------------------------

    def _grant(self) -> str:
        with self._lock:
            token = self.grants.pop(0) if len(self.grants) > 1 else self.grants[0]
            self.issued.append(token)
            return token

    def _refused(self, status: int, error: str, said: str, sent: str) -> tuple[int, Any]:
        text = f"{said} (sent: {sent})" if self.echo else said
        return status, {"error": error, "error_description": text}

    def token(self, form: dict[str, str]) -> tuple[int, Any]:
        grant = form.get("grant_type", "")
        if grant == JWT_BEARER:
            assertion = form.get("assertion", "")
            why = self._check_assertion(assertion)
            if why:
                return self._refused(400, "invalid_grant", why, assertion)
            if "target_audience" in self.claims[-1]:  # an ID token asked for (gcloud does)
                return 200, {"id_token": self._id_token(self.claims[-1])}
        elif grant == "refresh_token":
            refresh = form.get("refresh_token", "")
            pair = self.users.get(refresh)
            if pair is None or pair != (form.get("client_id"), form.get("client_secret")):
                said = "Token has been expired or revoked."
                return self._refused(400, "invalid_grant", said, json.dumps(form))
        else:
            return 400, {"error": "unsupported_grant_type", "error_description": grant}
        answer = {"access_token": self._grant(), "token_type": "Bearer"}
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
        return 200, answer

    def _id_token(self, asked: dict[str, Any]) -> str:
        """An OpenID Connect ID token's shape (its signature is no real one: nothing here
        checks it against Google's keys)."""
        now = int(time.time())
        claims = {
            "iss": "https://accounts.google.com",
            "aud": asked["target_audience"],
            "sub": "112233445566778899000",
            "email": asked["iss"],
            "iat": now,
            "exp": now + 3600,
        }
        parts = [{"alg": "RS256", "typ": "JWT"}, claims]
        encoded = [
            base64.urlsafe_b64encode(json.dumps(x).encode()).decode().rstrip("=") for x in parts
        ]
        return ".".join([*encoded, "c2lnbmF0dXJl"])

    def _check_assertion(self, assertion: str) -> str:
        """Why Google would refuse the jwt-bearer assertion ("" when it would not)."""
        try:
            head, body, signature = assertion.split(".")
            header, claims = json.loads(_unb64(head)), json.loads(_unb64(body))
        except ValueError:
            return "Invalid JWT: malformed"
        if header.get("alg") != "RS256" or header.get("typ") != "JWT":
            return "Invalid JWT: alg"
        key = self.keys.get(claims.get("iss", ""))
        if key is None:
            return "Invalid JWT: iss"
        if header.get("kid") != self.key_ids.get(claims["iss"]):
            return "Invalid JWT: kid"
        try:
            key.verify(
                _unb64(signature), f"{head}.{body}".encode(), padding.PKCS1v15(), hashes.SHA256()
            )
        except Exception:
            return "Invalid JWT Signature."
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        scopes = str(claims.get("scope", "")).split()
        if "target_audience" not in claims and not scopes:
            return "Invalid JWT: scope"  # an access token needs scopes, an ID token an audience
        if not all(s.startswith(SCOPE_PREFIX) or s in ("openid", "email") for s in scopes):
            return "Invalid JWT: scope"
        if claims.get("aud") != GOOGLE_TOKEN_URI:  # whatever URL the request went to
            return "Invalid JWT: aud"
        if not isinstance(iat, int) or not isinstance(exp, int):
            return "Invalid JWT: iat/exp"
        if abs(iat - now) > 60 or exp <= now or exp - iat > 3600:
            return "Invalid JWT: Token must be a short-lived token (60 minutes) and in a "
        with self._lock:
            self.claims.append(claims)
        return ""

    def sts(self, form: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        expected = {
            "grant_type": TOKEN_EXCHANGE,
            "audience": AUDIENCE,
            "scope": SCOPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "subject_token_type": JWT_TYPE,
        }
        wrong = [k for k, v in expected.items() if form.get(k) != v]
        if wrong or form.get("subject_token") not in self.subjects:
            said = f"The subject token could not be verified ({', '.join(wrong) or 'token'})."
            return self._refused(400, "invalid_grant", said, form.get("subject_token", ""))
        return 200, {
            "access_token": self._grant(),
            "issued_token_type": ACCESS_TOKEN_TYPE,
            "token_type": "Bearer",
            "expires_in": 3600,
        }

    def impersonate(self, body: Any, headers: dict[str, str]) -> tuple[int, Any]:
        bearer = headers.get("authorization", "").removeprefix("Bearer ")
        if bearer not in self.issued or body.get("scope") != [SCOPE]:
            message = "Permission 'iam.serviceAccounts.getAccessToken' denied"
            if self.echo:
                message += f" for {bearer}"
            return 403, {"error": {"code": 403, "message": message, "status": "PERMISSION_DENIED"}}
        lifetime = int(str(body.get("lifetime", "3600s")).removesuffix("s"))
        expires = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lifetime)
        return 200, {
            "accessToken": self._grant(),
            "expireTime": expires.isoformat().replace("+00:00", "Z"),
        }

    def metadata(self, path: str, headers: dict[str, str]) -> tuple[int, Any]:
        if headers.get("metadata-flavor") != "Google":
            return 403, "Missing Metadata-Flavor:Google header."
        if path == METADATA_PROJECT_PATH:
            return 200, self.vm_project
        return 200, {"access_token": self._grant(), "expires_in": 3599, "token_type": "Bearer"}


def _handler(server: OAuthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, value: Any) -> None:
            text = isinstance(value, str)
            data = value.encode() if text else json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain" if text else "application/json")
            self.send_header("Metadata-Flavor", "Google")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _seen(self, form: dict[str, str], body: Any = None) -> dict[str, str]:
            headers = {k.lower(): v for k, v in self.headers.items()}
            path = urlsplit(self.path).path
            with server._lock:
                server.seen.append(Seen(path, self.command, headers, form, body))
            return headers

        def do_GET(self) -> None:
            headers = self._seen({})
            path = urlsplit(self.path).path
            if path in (METADATA_TOKEN_PATH, METADATA_PROJECT_PATH):
                self._answer(*server.metadata(path, headers))
            elif path == SUBJECT_PATH:
                self._answer(200, {"id_token": server.subject})
            else:
                self._answer(404, {"error": {"code": 404, "message": "not found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            path = urlsplit(self.path).path
            if self.headers.get("Content-Type", "").startswith("application/json"):
                body = json.loads(raw)
                headers = self._seen({}, body)
                if path == IMPERSONATE_PATH:
                    self._answer(*server.impersonate(body, headers))
                    return
                self._answer(404, {"error": {"code": 404, "message": "not found"}})
                return
            form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            headers = self._seen(form)
            if path == TOKEN_PATH:
                self._answer(*server.token(form))
            elif path == STS_PATH:
                self._answer(*server.sts(form, headers))
            else:
                self._answer(404, {"error": "not_found"})

    return Handler
