"""SigV4 against the published AWS Signature Version 4 test suite vectors.

https://docs.aws.amazon.com/general/latest/gr/signature-v4-test-suite.html (get-vanilla,
get-vanilla-query-order-key-case, post-vanilla, post-x-www-form-urlencoded: AKIDEXAMPLE,
20150830T123600Z, us-east-1, service).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from providers.aws.sigv4 import Credentials, canonical_query, sign, sign_get, uri_encode

SUITE = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
WHEN = datetime(2015, 8, 30, 12, 36, tzinfo=UTC)


@pytest.mark.parametrize(
    "params, signature",
    [
        ({}, "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"),
        (
            {"Param2": "value2", "Param1": "value1"},
            "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
        ),
    ],
)
def test_published_vectors(params: dict[str, str], signature: str) -> None:
    headers = sign_get(
        SUITE,
        host="example.amazonaws.com",
        path="/",
        params=params,
        region="us-east-1",
        service="service",
        now=WHEN,
    )
    assert headers == {
        "X-Amz-Date": "20150830T123600Z",
        "Authorization": (
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
            f"SignedHeaders=host;x-amz-date, Signature={signature}"
        ),
    }


def test_session_token_is_signed_and_sent_and_secrets_stay_out_of_repr() -> None:
    creds = Credentials("AKID", "sekrit", "tok/en")
    headers = sign_get(creds, host="h", path="/", params={}, region="r", service="ec2", now=WHEN)
    assert headers["X-Amz-Security-Token"] == "tok/en"
    assert "SignedHeaders=host;x-amz-date;x-amz-security-token," in headers["Authorization"]
    assert "sekrit" not in repr(creds) and "tok/en" not in repr(creds)
    assert "sekrit" not in str(headers)


def test_query_encoding_is_rfc3986() -> None:
    assert uri_encode("Linux/UNIX a+b~") == "Linux%2FUNIX%20a%2Bb~"
    assert canonical_query({"b": "2", "a": "x y", "A": "1"}) == "A=1&a=x%20y&b=2"


@pytest.mark.parametrize(
    "headers, body, signed, signature",
    [
        (
            {},
            b"",
            "host;x-amz-date",
            "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
        ),
        (
            {"Content-Type": "application/x-www-form-urlencoded"},
            b"Param1=value1",
            "content-type;host;x-amz-date",
            "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
        ),
    ],
)
def test_published_post_vectors(
    headers: dict[str, str], body: bytes, signed: str, signature: str
) -> None:
    out = sign(
        SUITE,
        method="POST",
        host="example.amazonaws.com",
        path="/",
        params={},
        region="us-east-1",
        service="service",
        now=WHEN,
        headers=headers,
        body=body,
    )
    assert out["Authorization"] == (
        "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
        f"SignedHeaders={signed}, Signature={signature}"
    )
