"""A loopback stand-in for Azure's token side, from the documented protocols: the Microsoft
identity platform's v2.0 token endpoint (the client credentials grant with a client
secret, a certificate's client assertion checked as Entra ID checks it: the signature with
the registered certificate's public key, found by its thumbprint, and aud, iss, sub, jti,
nbf and exp; or a federated token, checked against the app's federated credential: the
issuer's signature, issuer, subject and audience), the instance metadata service's
managed identity endpoint and App Service's.

https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow
https://learn.microsoft.com/entra/identity-platform/certificate-credentials
https://learn.microsoft.com/entra/workload-id/workload-identity-federation
https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token
https://learn.microsoft.com/azure/app-service/overview-managed-identity (REST endpoint)

Each grant hands out the next of `grants` (the last one again when one is left), so a test
decides which tokens the Resource Manager stand-in will take. Errors are the real shapes:
{"error": "invalid_client", "error_description": "AADSTS7000215: ...\\r\\nTrace ID: ...",
"error_codes": [...], ...}. `echo` makes every refusal quote what it was sent (a careless
server), to prove no message shows it. Only the standard library and `cryptography`, so
that Microsoft's own library can be pointed at it too.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.x509.oid import NameOID

TOKEN = "tok-very-secret-123"  # what the Resource Manager stand-ins take
RESOURCE = "https://management.azure.com/"
SCOPE = "https://management.azure.com/.default"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
FEDERATED_AUDIENCE = "api://AzureADTokenExchange"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
CLIENT_ID = "0f2c1a5e-1b7d-4f3e-9a51-3c1f8e2d7b64"
CLIENT_SECRET = "Qx8~secret.value-of-the-app_0123456789abc"
ISSUER = "https://oidc.prod-aks.azure.com/4d1a0b52-0c15-4c4e-8a41-6c7b0f3a9e21/"
SUBJECT = "system:serviceaccount:shoal:reader"
IMDS_PATH = "/metadata/identity/oauth2/token"
APP_SERVICE_PATH = "/msi/token"
IDENTITY_HEADER = "b2a3c4d5-e6f7-identity-header-secret"


def token_path(tenant: str = TENANT) -> str:
    return f"/{tenant}/oauth2/v2.0/token"


def new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def certificate(key: rsa.RSAPrivateKey, name: str = "shoal-reader") -> x509.Certificate:
    """A self-signed certificate, as `az ad sp create-for-rbac --create-cert` makes one."""
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=365))
        .sign(key, hashes.SHA256())
    )


def pem_file(key: rsa.RSAPrivateKey, cert: x509.Certificate, password: str = "") -> bytes:
    """The PEM azure-identity reads: the private key (PKCS#8, encrypted with a password)
    and the certificate, in one file."""
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    )
    return private + cert.public_bytes(serialization.Encoding.PEM)


def pfx_file(key: rsa.RSAPrivateKey, cert: x509.Certificate, password: str) -> bytes:
    from cryptography.hazmat.primitives.serialization import pkcs12

    return pkcs12.serialize_key_and_certificates(
        b"shoal", key, cert, None, serialization.BestAvailableEncryption(password.encode())
    )


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(segment: str) -> bytes:
    return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))


def federated_token(
    issuer_key: rsa.RSAPrivateKey, *, subject: str = SUBJECT, audience: str = FEDERATED_AUDIENCE
) -> str:
    """A Kubernetes service account token as AKS projects it for workload identity (RS256,
    signed by the cluster's OIDC issuer)."""
    now = int(time.time())
    header = {"alg": "RS256", "kid": "aks-issuer-key", "typ": "JWT"}
    claims = {"aud": [audience], "iss": ISSUER, "sub": subject, "iat": now, "nbf": now,
              "exp": now + 3600, "jti": str(uuid.uuid4())}  # fmt: skip
    signing = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
    signature = issuer_key.sign(signing.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing}.{b64url(signature)}"


@dataclass
class Seen:
    path: str
    method: str
    headers: dict[str, str]
    form: dict[str, str]
    query: dict[str, str]


@dataclass
class EntraServer:
    """The app CLIENT_ID in TENANT, with `secrets`, `certificates` (by SHA-256 and SHA-1
    thumbprint) and a federated credential (ISSUER, SUBJECT) whose issuer signs with
    `issuer_key`; a VM identity (`identity`: None for a VM without one) and App Service's."""

    grants: list[str] = field(default_factory=lambda: [TOKEN])
    expires_in: Any = 3599
    echo: bool = False
    secrets: set[str] = field(default_factory=lambda: {CLIENT_SECRET})
    certificates: dict[str, rsa.RSAPublicKey] = field(default_factory=dict)
    issuer_key: rsa.RSAPublicKey | None = None
    identity: str | None = "system"  # "system", a user-assigned client id, or None
    seen: list[Seen] = field(default_factory=list)
    issued: list[str] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)  # accepted client assertions
    headers: list[dict[str, Any]] = field(default_factory=list)  # ... and their headers
    jtis: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> EntraServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def to(self, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.path == path]

    def register(self, cert: x509.Certificate) -> None:
        """The certificate as uploaded to the app (az ad app credential reset --cert)."""
        der = cert.public_bytes(serialization.Encoding.DER)
        public = cert.public_key()
        assert isinstance(public, rsa.RSAPublicKey)
        for algorithm in (hashes.SHA256(), hashes.SHA1()):
            digest = hashes.Hash(algorithm)
            digest.update(der)
            self.certificates[b64url(digest.finalize())] = public

    # -- the token endpoint -----------------------------------------------------------

    def _grant(self) -> str:
        with self._lock:
            token = self.grants.pop(0) if len(self.grants) > 1 else self.grants[0]
            self.issued.append(token)
            return token

    def _refused(self, status: int, error: str, code: int, said: str, sent: str) -> tuple[int, Any]:
        text = f"{said} (sent: {sent})" if self.echo else said
        trace = str(uuid.uuid4())
        return status, {
            "error": error,
            "error_description": f"AADSTS{code}: {text}\r\nTrace ID: {trace}\r\n"
            f"Correlation ID: {uuid.uuid4()}\r\nTimestamp: 2026-01-01 00:00:00Z",
            "error_codes": [code],
            "timestamp": "2026-01-01 00:00:00Z",
            "trace_id": trace,
            "correlation_id": str(uuid.uuid4()),
            "error_uri": "https://login.microsoftonline.com/error?code=" + str(code),
        }

    def token(self, path: str, form: dict[str, str]) -> tuple[int, Any]:
        if form.get("grant_type") != "client_credentials":
            return self._refused(400, "unsupported_grant_type", 70003, "grant", "")
        if path != token_path():
            return self._refused(400, "invalid_request", 90002, "Tenant not found.", path)
        if form.get("client_id") != CLIENT_ID:
            said = f"Application with identifier '{form.get('client_id')}' was not found"
            return self._refused(400, "unauthorized_client", 700016, said, "")
        if form.get("scope") != SCOPE:
            return self._refused(400, "invalid_scope", 1002012, "The scope is not valid.", "")
        if "client_secret" in form:
            secret = form["client_secret"]
            if secret not in self.secrets:
                said = "Invalid client secret provided."
                return self._refused(401, "invalid_client", 7000215, said, secret)
        elif form.get("client_assertion_type") == ASSERTION_TYPE:
            assertion = form.get("client_assertion", "")
            why = self._check_assertion(assertion, self.url(path))
            if why:
                code = 700211 if "federated" in why.lower() else 700027
                return self._refused(401, "invalid_client", code, why, assertion)
        else:
            said = "The request body must contain client_secret or client_assertion."
            return self._refused(401, "invalid_client", 7000218, said, "")
        answer = {"token_type": "Bearer", "access_token": self._grant()}
        if self.expires_in is not None:
            answer["expires_in"] = self.expires_in
            answer["ext_expires_in"] = self.expires_in
        return 200, answer

    def _check_assertion(self, assertion: str, endpoint: str) -> str:
        """Why Entra ID would refuse the client assertion ("" when it would not)."""
        try:
            head, body, signature = assertion.split(".")
            header, claims = json.loads(_unb64(head)), json.loads(_unb64(body))
        except ValueError:
            return "Client assertion failed signature validation: malformed JWT."
        signed = f"{head}.{body}".encode()
        if claims.get("iss") == ISSUER:
            return self._check_federated(header, claims, signed, _unb64(signature))
        thumbprint = header.get("x5t#S256") or header.get("x5t") or ""
        # MSAL writes the thumbprint with base64's padding; Entra ID takes it either way.
        key = self.certificates.get(str(thumbprint).rstrip("="))
        if key is None:
            return f"Client assertion contains an invalid signature. [Key was not found., Thumbprint of key used by client: '{thumbprint}']"  # noqa: E501
        scheme: padding.AsymmetricPadding
        if header.get("alg") == "PS256":
            scheme = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=32)
        elif header.get("alg") == "RS256":
            scheme = padding.PKCS1v15()
        else:
            return "Client assertion failed signature validation: alg."
        try:
            key.verify(_unb64(signature), signed, scheme, hashes.SHA256())
        except Exception:
            return "Client assertion contains an invalid signature (certificate)."
        now = time.time()
        nbf, exp, jti = claims.get("nbf", claims.get("iat")), claims.get("exp"), claims.get("jti")
        if claims.get("aud") != endpoint:
            return "The audience claim in the client assertion is not the token endpoint."
        if claims.get("iss") != CLIENT_ID or claims.get("sub") != CLIENT_ID:
            return "The issuer and subject of the client assertion must be the client id."
        if not isinstance(nbf, int | float) or not isinstance(exp, int | float):
            return "The client assertion has no nbf or exp."
        if nbf > now + 300 or exp <= now or exp - nbf > 3600:
            return "The client assertion is not within its valid time range."
        with self._lock:
            if not isinstance(jti, str) or not jti or jti in self.jtis:
                return "The client assertion's jti was used before."
            self.jtis.add(jti)
            self.claims.append(claims)
            self.headers.append(header)
        return ""

    def _check_federated(
        self, header: dict[str, Any], claims: dict[str, Any], signed: bytes, signature: bytes
    ) -> str:
        if self.issuer_key is None or header.get("alg") != "RS256":
            return "No matching federated identity record found for presented assertion issuer."
        try:
            self.issuer_key.verify(signature, signed, padding.PKCS1v15(), hashes.SHA256())
        except Exception:
            return "The federated token's signature could not be verified."
        audience = claims.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if claims.get("sub") != SUBJECT or FEDERATED_AUDIENCE not in audiences:
            return (
                "No matching federated identity record found for presented assertion subject "
                f"'{claims.get('sub')}'."
            )
        if not isinstance(claims.get("exp"), int) or claims["exp"] <= time.time():
            return "The federated token has expired."
        with self._lock:
            self.claims.append(claims)
        return ""

    # -- managed identities ------------------------------------------------------------

    def imds(self, query: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        if headers.get("metadata") != "true":
            return 400, {"error": "invalid_request", "error_description": "Required metadata "
                         "header not specified"}  # fmt: skip
        if query.get("api-version") != "2018-02-01" or query.get("resource") != RESOURCE:
            return 400, {"error": "invalid_request", "error_description": "bad request"}
        asked = query.get("client_id", "system")
        if self.identity is None or asked != self.identity:
            return 400, {"error": "invalid_request", "error_description": "Identity not found"}
        now = int(time.time())
        return 200, {
            "access_token": self._grant(),
            "client_id": asked,
            "expires_in": "86399",
            "expires_on": str(now + 86399),
            "ext_expires_in": "86399",
            "not_before": str(now),
            "resource": RESOURCE,
            "token_type": "Bearer",
        }

    def app_service(self, query: dict[str, str], headers: dict[str, str]) -> tuple[int, Any]:
        if headers.get("x-identity-header") != IDENTITY_HEADER:
            sent = headers.get("x-identity-header", "")
            said = "Invalid X-IDENTITY-HEADER" + (f" {sent}" if self.echo else "")
            return 401, {"statusCode": 401, "message": said}
        if query.get("api-version") != "2019-08-01" or query.get("resource") != RESOURCE:
            return 400, {"statusCode": 400, "message": "bad request"}
        return 200, {
            "access_token": self._grant(),
            "expires_on": str(int(time.time()) + 86399),
            "resource": RESOURCE,
            "token_type": "Bearer",
            "client_id": query.get("client_id", "system-assigned"),
        }

    # -- what MSAL asks first ------------------------------------------------------------

    def openid_configuration(self, tenant: str) -> tuple[int, Any]:
        base = self.base.replace("http://", "https://")
        return 200, {
            "token_endpoint": f"{base}/{tenant}/oauth2/v2.0/token",
            "authorization_endpoint": f"{base}/{tenant}/oauth2/v2.0/authorize",
            "issuer": f"{base}/{tenant}/v2.0",
        }


def _handler(server: EntraServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _answer(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _seen(self, form: dict[str, str]) -> tuple[str, dict[str, str], dict[str, str]]:
            headers = {k.lower(): v for k, v in self.headers.items()}
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
            with server._lock:
                server.seen.append(Seen(parts.path, self.command, headers, form, query))
            return parts.path, headers, query

        def do_GET(self) -> None:
            path, headers, query = self._seen({})
            if path == IMDS_PATH:
                self._answer(*server.imds(query, headers))
            elif path == APP_SERVICE_PATH:
                self._answer(*server.app_service(query, headers))
            elif path.endswith("/v2.0/.well-known/openid-configuration"):
                self._answer(*server.openid_configuration(path.split("/")[1]))
            else:
                self._answer(404, {"error": "not_found"})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length).decode()
            form = {k: v[0] for k, v in parse_qs(raw, keep_blank_values=True).items()}
            path, _, _ = self._seen(form)
            if path.endswith("/oauth2/v2.0/token"):
                self._answer(*server.token(path, form))
            else:
                self._answer(404, {"error": "not_found"})

    return Handler
