"""CloudHttp, the cloud APIs' error map on the shared client, against a real loopback server.

What every client shares (retries, Retry-After, redirects, credentials kept to their origin,
the scrub, streams) is tested once, in tests/providers/test_http.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from providers.cloud.http import CloudHttp, RetryPolicy
from providers.core.errors import (
    ConfigError,
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


def test_throttled_past_the_retries_is_retryable(api: ApiServer) -> None:
    api.route("/p", lambda q, h: Reply.json({}))
    api.fault("/p", "status", status=429, times=3)
    with pytest.raises(RetryableError, match=r"HTTP 429 \(throttled\) after 3 attempts.*--offline"):
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


def test_an_api_may_refuse_credentials_with_another_status(api: ApiServer) -> None:
    # GCP answers an unknown API key with 400 INVALID_ARGUMENT, not 401/403.
    def refused(status: int, message: str) -> bool:
        return status == 400 and "API key" in message

    api.route("/key", lambda q, h: Reply.json({"error": {"message": "API key not valid"}}, 400))
    api.route("/page", lambda q, h: Reply.json({"error": {"message": "bad page size"}}, 400))
    client = http(auth_hint="set SHOAL_X_KEY", refused=refused)
    with pytest.raises(CredentialsError, match=r"HTTP 400 \(API key not valid\); set SHOAL_X_KEY"):
        client.get_json(api.url("/key"))
    with pytest.raises(ShoalError) as caught:
        client.get_json(api.url("/page"))
    assert type(caught.value) is ShoalError
    assert str(caught.value).endswith("/page: HTTP 400 (bad page size)")


def test_not_found_and_malformed_json(api: ApiServer) -> None:
    with pytest.raises(NotFoundError, match=r"HTTP 404 \(not found\); check the URL"):
        http().get_json(api.url("/missing"))
    api.route("/bad", lambda q, h: Reply(200, b'{"items": [1, 2'))
    with pytest.raises(ShoalError, match=r"malformed JSON .*; nothing was cached from it"):
        http().get_json(api.url("/bad"))


@pytest.mark.parametrize("base", ["http://127.0.0.1:99999", "http://[::1", "https://h:port/x"])
def test_a_malformed_base_url_is_a_config_error(base: str) -> None:
    with pytest.raises(ConfigError, match="base URL setting"):
        http().get_json(base + "/p")
