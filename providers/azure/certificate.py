"""A service principal's certificate credential: the signed JWT (the client assertion) the
Microsoft identity platform takes in place of a client secret
(https://learn.microsoft.com/entra/identity-platform/certificate-credentials).

Header {alg: PS256, typ: JWT, x5t#S256: the base64url SHA-256 thumbprint of the
certificate's DER}; claims {aud: the token endpoint, iss = sub: the client id, jti: a new
UUID, nbf = iat: now, exp: now + 10 min}: as the page describes it and as MSAL (the
library under azure-identity) signs it for Microsoft Entra ID (RSASSA-PSS, salt the digest's
length). The file, as azure-identity reads AZURE_CLIENT_CERTIFICATE_PATH, is PEM (the
certificate and its private key, maybe encrypted) or PKCS#12; the certificate used is the
one whose public key is the private key's.

`cryptography` is imported here, at the first signature: only a command that signs pays
for it (providers/gcp/jwt.py measured ~45 ms for importing, loading a key and signing).
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from typing import TYPE_CHECKING, Any

from providers.core.env import ENV_AZURE_CLIENT_CERTIFICATE_PASSWORD
from providers.core.errors import ConfigError, CredentialsError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric import rsa

ASSERTION_SECONDS = 600  # MSAL's; Entra ID wants it short
_PEM = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----\s.*?-----END \1-----", re.S)
_FIX = "export the certificate with its private key (PEM or PKCS#12) and point at that file"


def b64url(data: bytes) -> str:
    """Base64url without padding, as JWS segments are written."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def client_assertion(raw: bytes, password: str, client_id: str, audience: str, where: str) -> str:
    """The compact JWT that stands for the client at `audience` (the token endpoint), signed
    with the private key of the certificate file `raw` (read from `where`)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import padding

    key, der = load(raw, password, where)
    thumbprint = hashes.Hash(hashes.SHA256())
    thumbprint.update(der)
    header = {"alg": "PS256", "typ": "JWT", "x5t#S256": b64url(thumbprint.finalize())}
    now = int(time.time())
    claims = {
        "aud": audience,
        "iss": client_id,
        "sub": client_id,
        "jti": str(uuid.uuid4()),
        "nbf": now,
        "iat": now,
        "exp": now + ASSERTION_SECONDS,
    }
    signing_input = f"{_segment(header)}.{_segment(claims)}".encode("ascii")
    pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=hashes.SHA256.digest_size)
    signature = key.sign(signing_input, pss, hashes.SHA256())
    return f"{signing_input.decode('ascii')}.{b64url(signature)}"


def load(raw: bytes, password: str, where: str) -> tuple[rsa.RSAPrivateKey, bytes]:
    """The RSA private key and the DER of its certificate, from PEM or PKCS#12 `raw`. What
    does not load is named by `where`, never quoted: a ConfigError (78), or a
    CredentialsError (77) when the password does not open the key."""
    from cryptography import x509
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import pkcs12

    secret = password.encode() if password else None
    if b"-----BEGIN" in raw:
        blocks = [(m.group(1).decode("ascii"), m.group(0)) for m in _PEM.finditer(raw)]
        keys = [block for label, block in blocks if label.endswith("PRIVATE KEY")]
        certificates = [block for label, block in blocks if label == "CERTIFICATE"]
        if not keys or not certificates:
            lacking = "private key" if not keys else "certificate"
            raise ConfigError(f"{where}: no {lacking} in the PEM file; {_FIX}")
        encrypted = b"ENCRYPTED" in keys[0]
        try:
            key: Any = serialization.load_pem_private_key(
                keys[0], password=secret if encrypted else None
            )
        except TypeError:
            raise CredentialsError(
                f"{where}: the private key is encrypted; set "
                f"{ENV_AZURE_CLIENT_CERTIFICATE_PASSWORD} to its password"
            ) from None
        except (ValueError, UnsupportedAlgorithm):
            if encrypted:
                raise CredentialsError(
                    f"{where}: {ENV_AZURE_CLIENT_CERTIFICATE_PASSWORD} does not open the "
                    "private key (or the key is damaged); set the right password"
                ) from None
            raise ConfigError(f"{where}: the private key does not load; {_FIX}") from None
        try:
            chain = [x509.load_pem_x509_certificate(block) for block in certificates]
        except ValueError:
            raise ConfigError(f"{where}: a certificate in it does not load; {_FIX}") from None
    else:
        try:
            key, first, more = pkcs12.load_key_and_certificates(raw, secret)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise ConfigError(
                f"{where}: neither PEM nor a PKCS#12 file that "
                f"{ENV_AZURE_CLIENT_CERTIFICATE_PASSWORD} opens; {_FIX}, or set the password"
            ) from None
        chain = [c for c in (first, *more) if c is not None]
        if key is None or not chain:
            lacking = "private key" if key is None else "certificate"
            raise ConfigError(f"{where}: no {lacking} in the PKCS#12 file; {_FIX}")
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ConfigError(
            f"{where}: the private key is not an RSA key, and Microsoft Entra ID takes "
            "certificate credentials with RSA keys only; use an RSA certificate"
        )
    public = key.public_key().public_numbers()
    for certificate in chain:
        own = certificate.public_key()
        if isinstance(own, rsa.RSAPublicKey) and own.public_numbers() == public:
            return key, certificate.public_bytes(serialization.Encoding.DER)
    raise ConfigError(f"{where}: no certificate in it is the private key's; {_FIX}")


def _segment(value: dict[str, Any]) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())
