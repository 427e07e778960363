"""RS256 JSON Web Tokens (RFC 7519, signed as RFC 7515 says) for a service-account key: the
assertion Google's token endpoint exchanges for an access token (RFC 7523's jwt-bearer
grant; https://developers.google.com/identity/protocols/oauth2/service-account#httprest).

RSASSA-PKCS1-v1_5 with SHA-256 comes from `cryptography`, imported here, at the first
signature: measured on this machine, importing it, loading a 2048-bit key and signing take
45 ms, against 90 ms for google-auth's signer (which imports cryptography itself and more),
so only a command that signs pays, and it pays the least.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from providers.core.errors import ConfigError


def b64url(data: bytes) -> str:
    """Base64url without padding, as JWS segments are written."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign_rs256(claims: Mapping[str, Any], pem: str, key_id: str, where: str) -> str:
    """The compact JWT of `claims`, signed with the PEM private key `pem`; `key_id` goes in
    the header's `kid` when there is one. A key that does not load is a ConfigError naming
    `where` and the field, never the key or cryptography's text about it."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    try:
        key = serialization.load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise ConfigError(
            f"{where}: `private_key` is not an unencrypted PEM private key; download a new "
            "JSON key for the service account (IAM > Service accounts > Keys) and point at it"
        ) from None
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ConfigError(
            f"{where}: `private_key` is not an RSA key, and Google's token endpoint takes RS256 "
            "assertions only; download a new JSON key for the service account"
        )
    header = {"alg": "RS256", "typ": "JWT", **({"kid": key_id} if key_id else {})}
    signing_input = f"{_segment(header)}.{_segment(claims)}"
    signature = key.sign(signing_input.encode("ascii"), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{b64url(signature)}"


def _segment(value: Mapping[str, Any]) -> str:
    return b64url(json.dumps(dict(value), separators=(",", ":")).encode())
