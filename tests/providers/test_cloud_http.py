"""CloudHttp against a real loopback server: retries, throttling, drops, typed errors."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from providers.cloud.http import CloudHttp, RetryPolicy
from providers.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
)
from tests.providers.apiserver import ApiServer, Reply

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=5.0)


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer() as server:
        yield server


def http(**kwargs: object) -> CloudHttp:
    return CloudHttp("testcloud", policy=FAST, **kwargs)  # type: ignore[arg-type]


def test_json_after_throttling_and_a_server_error(api: ApiServer) -> None:
    api.route("/p", lambda q, h: Reply.json({"ok": q.get("x")}))
    api.fault("/p", "status", status=429, headers={"Retry-After": "0"})
    api.fault("/p", "status", status=503)
    assert http().get_json(api.url("/p"), params={"x": "1"}) == {"ok": ["1"]}
    assert len(api.requests_to("/p")) == 3


def test_throttled_past_the_retries_is_retryable(api: ApiServer) -> None:
    api.route("/p", lambda q, h: Reply.json({}))
    api.fault("/p", "status", status=429, times=3)
    with pytest.raises(RetryableError, match="HTTP 429"):
        http().get_json(api.url("/p"))


def test_5xx_past_the_retries_is_unreachable(api: ApiServer) -> None:
    api.route("/p", lambda q, h: Reply.json({}))
    api.fault("/p", "status", status=502, times=3)
    with pytest.raises(ProviderUnreachableError, match="HTTP 502 after 3 attempts"):
        http().get_json(api.url("/p"))


def test_refused_connection_is_unreachable() -> None:
    with ApiServer() as server:
        url = server.url("/p")
    with pytest.raises(ProviderUnreachableError, match=r"testcloud: http://127\.0\.0\.1:\d+/p"):
        http().get_json(url)


def test_credentials_refused_names_the_fix_and_hides_the_key(api: ApiServer) -> None:
    api.route(
        "/p",
        lambda q, h: Reply.json({"error": {"message": "API key sekrit-123 not valid"}}, 403),
    )
    with pytest.raises(CredentialsError) as caught:
        http(auth_hint="set SHOAL_X_KEY", secrets=["sekrit-123"]).get_json(
            api.url("/p"), params={"key": "sekrit-123"}
        )
    message = str(caught.value)
    assert "SHOAL_X_KEY" in message and "not valid" in message
    assert "sekrit-123" not in message


def test_not_found_and_malformed_json(api: ApiServer) -> None:
    with pytest.raises(NotFoundError, match="HTTP 404"):
        http().get_json(api.url("/missing"))
    api.route("/bad", lambda q, h: Reply(200, b'{"items": [1, 2'))
    with pytest.raises(ShoalError, match="malformed JSON"):
        http().get_json(api.url("/bad"))


def test_a_json_body_cut_short_is_fetched_again(api: ApiServer) -> None:
    api.route("/p", lambda q, h: Reply.json({"items": list(range(1000))}))
    api.fault("/p", "truncate", after=100)
    assert http().get_json(api.url("/p"))["items"][-1] == 999


def test_stream_resumes_after_a_drop_with_range(api: ApiServer) -> None:
    data = bytes(range(256)) * 4096
    api.route("/big", data)
    api.fault("/big", "drop", after=300_000)
    seen: list[int] = []
    got = b"".join(
        http().stream(api.url("/big"), progress=lambda d, t, w: seen.append(d), chunk_bytes=65536)
    )
    assert got == data
    # Resumed from the last byte handed out (a partial chunk in flight is asked again).
    second = api.requests_to("/big")[1]
    resumed_at = int(second.headers["range"].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= 300_000
    assert second.headers["if-range"].startswith('"')
    assert seen[-1] == len(data)


def test_stream_dropped_before_any_byte_starts_over(api: ApiServer) -> None:
    data = b"y" * 200_000
    api.route("/big", lambda q, h: Reply(200, data))
    api.fault("/big", "drop", after=1000)
    assert b"".join(http().stream(api.url("/big"))) == data
    assert "range" not in api.requests_to("/big")[1].headers


def test_stream_that_cannot_resume_fails_clearly(api: ApiServer) -> None:
    data = b"x" * 200_000
    api.route("/big", lambda q, h: Reply(200, data))  # no ETag, no ranges
    api.fault("/big", "drop", after=1000)
    with pytest.raises(ProviderUnreachableError, match="cannot resume"):
        b"".join(http().stream(api.url("/big"), chunk_bytes=256))


def test_redirects_are_followed_with_the_query_they_carry(api: ApiServer) -> None:
    api.route("/old", lambda q, h: Reply(302, b"", {"Location": "/new?page=2"}))
    api.route("/new", lambda q, h: Reply.json({"page": q.get("page")}))
    assert http().get_json(api.url("/old"), params={"page": "1"}) == {"page": ["2"]}


def test_a_redirect_loop_ends_with_a_clear_error(api: ApiServer) -> None:
    api.route("/loop", lambda q, h: Reply(301, b"", {"Location": "/loop"}))
    with pytest.raises(ShoalError, match="more than 10 redirects"):
        http().get_json(api.url("/loop"))


def test_credentials_stay_with_their_origin_across_redirects(api: ApiServer) -> None:
    with ApiServer() as other:
        other.route("/elsewhere", lambda q, h: Reply.json({"auth": h.get("authorization")}))
        api.route("/start", lambda q, h: Reply(302, b"", {"Location": other.url("/elsewhere")}))
        got = http().get_json(api.url("/start"), headers={"Authorization": "Bearer s3cret"})
    assert got == {"auth": None}
    assert api.requests_to("/start")[0].headers["authorization"] == "Bearer s3cret"


def test_deeply_nested_json_is_a_clear_error(api: ApiServer) -> None:
    api.route("/deep", lambda q, h: Reply(200, b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(ShoalError, match="malformed JSON"):
        http().get_json(api.url("/deep"))


# -- hostile servers: nothing a request carried comes back in a message ------------------------

KEY_ID = "AKIAEXAMPLEKEYID0001"
SIGNATURE = "9f" * 32
TOKEN = "ya29.tok+en/NEVER=SHOWN"


def echo(*secrets: str) -> str:
    """Each secret as sent, percent-encoded and in base64: how a server could echo it."""
    import base64
    from urllib.parse import quote

    return " ".join(
        f"{s} {quote(s, safe='')} {base64.b64encode(s.encode()).decode()}" for s in secrets
    )


def assert_clean(text: str, *secrets: str) -> None:
    import base64
    from urllib.parse import quote

    for secret in secrets:
        for form in (secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode()):
            assert form not in text, f"{form!r} leaked: {text!r}"


def test_sigv4_key_id_and_signature_are_scrubbed_from_an_echoing_error(api: ApiServer) -> None:
    auth = (
        f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20260101/us-east-1/ec2/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={SIGNATURE}"
    )
    message = f"AuthFailure: {echo(KEY_ID, SIGNATURE, TOKEN)}"
    api.route("/p", lambda q, h: Reply.json({"Error": {"Message": message}}, 403))
    with pytest.raises(CredentialsError) as caught:
        http().get_json(
            api.url("/p"), headers={"Authorization": auth, "X-Amz-Security-Token": TOKEN}
        )
    assert "AuthFailure" in str(caught.value)
    assert_clean(str(caught.value), KEY_ID, SIGNATURE, TOKEN)


def test_a_bearer_token_and_a_query_key_are_scrubbed_without_being_declared(
    api: ApiServer,
) -> None:
    key = "AIza+key/NEVER=SHOWN"
    message = f"refused {echo(TOKEN, key)}"
    api.route("/p", lambda q, h: Reply.json({"error": {"message": message}}, 401))
    from urllib.parse import quote

    with pytest.raises(CredentialsError) as caught:
        http().get_json(
            api.url(f"/p?key={quote(key, safe='')}"), headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert "refused" in str(caught.value)
    assert_clean(str(caught.value), TOKEN, key)


def test_a_location_with_user_info_is_refused_unfollowed(api: ApiServer) -> None:
    location = f"http://u:{TOKEN}@127.0.0.1:{api.base.rsplit(':', 1)[1]}/next"
    api.route("/p", lambda q, h: Reply(302, b"", {"Location": location}, reason=TOKEN))
    api.route("/next", lambda q, h: Reply.json({"followed": True}))
    with pytest.raises(ShoalError, match="HTTP 302 redirect refused") as caught:
        http(secrets=[TOKEN]).get_json(api.url("/p"))
    assert_clean(str(caught.value), TOKEN)
    assert api.requests_to("/next") == []


@pytest.mark.parametrize(
    "location", ["http://127.0.0.1:99999/next", "http://[::1/next", "http://h:port/", "ftp://h/"]
)
def test_a_malformed_location_is_a_clear_error_not_a_retried_network_failure(
    api: ApiServer, location: str
) -> None:
    api.route("/p", lambda q, h: Reply(302, b"", {"Location": location}))
    with pytest.raises(ShoalError, match="HTTP 302 redirect refused, its Location is unusable"):
        http().get_json(api.url("/p"))
    assert len(api.requests_to("/p")) == 1


@pytest.mark.parametrize("base", ["http://127.0.0.1:99999", "http://[::1", "https://h:port/x"])
def test_a_malformed_base_url_is_a_config_error(base: str) -> None:
    from providers.errors import ConfigError

    with pytest.raises(ConfigError, match="base URL setting"):
        http().get_json(base + "/p")
