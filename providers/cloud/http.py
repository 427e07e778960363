"""HTTP for the cloud fetchers: the shared client (providers.core.http) with the cloud APIs' errors.

A host that cannot be reached or keeps answering 5xx is ProviderUnreachableError (69),
throttling that outlasts the retries RetryableError (75), 401/403 CredentialsError (77, with
the variable to set), a malformed base URL ConfigError (78). Messages name the URL asked for,
without its query string, and carry the API's own error message (GCP and Azure send JSON
ones). `get_json` reads JSON; `stream` a long body, resumed with Range when the connection
drops (the AWS offer file).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
)
from providers.core.http.client import HttpClient
from providers.core.http.policy import RETRY_STATUSES, ErrorMap, Failure, Kind, RetryPolicy, Rule

if TYPE_CHECKING:
    import httpx

__all__ = ["CloudHttp", "RetryPolicy"]
_LATER = "try again later, or use --offline for cached data"
_REFUSED = "{where}: HTTP {code}{said}; {hint}"


def api_message(body: bytes, reason: str) -> tuple[str, str]:
    """("", the API's own error message) from a JSON error body: `error.message` and kin."""
    try:
        value = json.loads(body or b"null")
    except (ValueError, RecursionError):
        return "", ""
    message: Any = None
    if isinstance(value, dict):
        error = value.get("error") or value.get("Error")
        if isinstance(error, dict):
            message = error.get("message") or error.get("Message")
        elif isinstance(error, str):
            message = error
        message = message or value.get("message") or value.get("Message")
    return "", message if isinstance(message, str) else ""


ERRORS = ErrorMap(where="{provider}: {target}", said=" ({})", explain=api_message, rules=(
    # (Refused credentials come first, from CloudHttp: with the provider's hint.)
    Rule(404, NotFoundError, "{where}: HTTP 404{said}; check the URL (or its base URL setting)"),
    Rule(429, RetryableError, "{where}: HTTP 429{said} (throttled) after {attempts} attempts; "
         + _LATER),
    Rule(RETRY_STATUSES, ProviderUnreachableError, "{where}: HTTP {code}{said} after {attempts} "
         "attempts; " + _LATER),
    Rule(range(100, 600), ShoalError, "{where}: HTTP {code}{said}"),
    Rule(Kind.UNREACHABLE, ProviderUnreachableError, "{where}: {error} after {attempts} attempts; "
         "check the network or the base URL, or use --offline for cached data"),
    Rule(Kind.INVALID_URL, ConfigError, "{where} is not a usable URL: {reason}; fix the "
         "provider's base URL setting (environment variable or config file)"),
    Rule(Kind.JSON, ShoalError, "{where}: malformed JSON ({error}); nothing was cached from it"),
))  # fmt: skip


class CloudHttp(HttpClient):
    """One provider's HTTP client. `auth_hint` says how to fix a 401/403 (which variable);
    `refused(status, api_message)` marks other answers as refused credentials (GCP answers
    an unknown API key with 400 INVALID_ARGUMENT, not 401/403)."""

    def __init__(
        self,
        provider: str,
        *,
        auth_hint: str = "",
        secrets: Sequence[str] = (),
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        refused: Callable[[int, str], bool] | None = None,
    ) -> None:
        def credentials_refused(failure: Failure) -> bool:
            code, said = failure.code, failure.message
            return code in (401, 403) or (refused is not None and refused(code, said))

        hint = auth_hint or "credentials were refused"
        first = Rule(range(400, 500), CredentialsError, _REFUSED, when=credentials_refused)
        super().__init__(
            errors=ERRORS.extended(first, provider=provider, hint=hint),
            policy=policy or RetryPolicy(),
            secrets=list(secrets),
            transport=transport,
            sleep=sleep,
        )
        self.provider = provider
