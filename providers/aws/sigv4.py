"""AWS Signature Version 4 for GET requests, with hmac/hashlib only (no botocore).

https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
Verified against the published SigV4 test suite (get-vanilla, get-vanilla-query-order-key-case)
in tests/providers/aws/test_sigv4.py.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

ALGORITHM = "AWS4-HMAC-SHA256"
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()


@dataclass(frozen=True)
class Credentials:
    access_key_id: str
    secret_access_key: str = field(repr=False)
    session_token: str = field(default="", repr=False)


def uri_encode(text: str) -> str:
    """RFC 3986 percent-encoding as SigV4 wants it: only A-Z a-z 0-9 - _ . ~ unescaped."""
    return quote(text, safe="-_.~")


def canonical_query(params: Mapping[str, str]) -> str:
    pairs = sorted((uri_encode(k), uri_encode(v)) for k, v in params.items())
    return "&".join(f"{k}={v}" for k, v in pairs)


def _hmac(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def sign_get(
    credentials: Credentials,
    *,
    host: str,
    path: str,
    params: Mapping[str, str],
    region: str,
    service: str,
    now: datetime,
) -> dict[str, str]:
    """The headers to send with `GET https://{host}{path}?{canonical_query(params)}`:
    X-Amz-Date, Authorization and, for temporary credentials, X-Amz-Security-Token."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    headers = {"host": host, "x-amz-date": stamp}
    if credentials.session_token:
        headers["x-amz-security-token"] = credentials.session_token
    names = sorted(headers)
    canonical_headers = "".join(f"{n}:{' '.join(headers[n].split())}\n" for n in names)
    signed_headers = ";".join(names)
    canonical_uri = quote(path or "/", safe="/-_.~")
    request = "\n".join(
        [
            "GET",
            canonical_uri,
            canonical_query(params),
            canonical_headers,
            signed_headers,
            EMPTY_SHA256,
        ]
    )
    scope = f"{day}/{region}/{service}/aws4_request"
    to_sign = "\n".join([ALGORITHM, stamp, scope, hashlib.sha256(request.encode()).hexdigest()])
    key = _hmac(("AWS4" + credentials.secret_access_key).encode(), day)
    for part in (region, service, "aws4_request"):
        key = _hmac(key, part)
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    out = {
        "X-Amz-Date": stamp,
        "Authorization": (
            f"{ALGORITHM} Credential={credentials.access_key_id}/{scope}, "
            f"SignedHeaders={signed_headers}, Signature={signature}"
        ),
    }
    if credentials.session_token:
        out["X-Amz-Security-Token"] = credentials.session_token
    return out
