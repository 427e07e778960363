"""AWS Signature Version 4, with hmac/hashlib only (no botocore): GET requests of the Query
APIs (EC2) and POST requests with a body (the JSON APIs: Service Quotas).

https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_sigv-create-signed-request.html
Verified against the published SigV4 test suite (get-vanilla, get-vanilla-query-order-key-case,
post-vanilla, post-x-www-form-urlencoded) in tests/providers/aws/test_sigv4.py.
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
    return sign(
        credentials,
        method="GET",
        host=host,
        path=path,
        params=params,
        region=region,
        service=service,
        now=now,
    )


def sign(
    credentials: Credentials,
    *,
    method: str,
    host: str,
    path: str,
    params: Mapping[str, str],
    region: str,
    service: str,
    now: datetime,
    headers: Mapping[str, str] | None = None,
    body: bytes = b"",
) -> dict[str, str]:
    """The headers that sign `METHOD https://{host}{path}?{canonical_query(params)}` with
    `body` (its SHA-256 is the payload hash) and `headers` (sent as given, and signed:
    e.g. Content-Type and X-Amz-Target of a JSON API): X-Amz-Date, Authorization and, for
    temporary credentials, X-Amz-Security-Token."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    day = stamp[:8]
    signed = {name.lower(): value for name, value in (headers or {}).items()}
    signed.update({"host": host, "x-amz-date": stamp})
    if credentials.session_token:
        signed["x-amz-security-token"] = credentials.session_token
    names = sorted(signed)
    canonical_headers = "".join(f"{n}:{' '.join(signed[n].split())}\n" for n in names)
    signed_headers = ";".join(names)
    canonical_uri = quote(path or "/", safe="/-_.~")
    request = "\n".join(
        [
            method.upper(),
            canonical_uri,
            canonical_query(params),
            canonical_headers,
            signed_headers,
            hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256,
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
