"""The Azure Resource Manager calls the `azure` driver makes, and what their errors mean.

Every call goes through the shared HTTP client (providers/core/http) with the credentials of
providers/azure/credentials.py: 401 and 403 are CredentialsError (77) naming where the
credentials came from, 429 (with its Retry-After) and 5xx are retried with backoff; a PUT is
safe to send again (the resource's name is the allocation's, so a retried PUT is the same
resource). An answer 400/404/409 is read here: ARM's `{"error": {"code", "message",
"target", "details"}}` says which field is wrong or what is missing.

Long-running operations (https://learn.microsoft.com/azure/azure-resource-manager/management/
async-operations) are followed to their end: the `Azure-AsyncOperation` URL answers
`{"status": InProgress|Succeeded|Failed|Canceled, "error"}`, else the `Location` URL answers
202 until done; each is asked again after its `Retry-After` (bounded). Such URLs come from
the server: they are followed only on the origin of the management URL, so a server cannot
send shoal's token anywhere else.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from providers.cloud.http import CloudHttp
from providers.core.errors import RetryableError, ShoalError, one_line

if TYPE_CHECKING:
    import httpx

    from providers.core.http.policy import RetryPolicy

COMPUTE_API = "2024-07-01"
DISKS_API = "2024-03-02"  # disks and snapshots have versions of their own
SKUS_API = "2021-07-01"  # Resource SKUs: its newest
NETWORK_API = "2024-05-01"
AUTHORIZATION_API = "2022-04-01"
# Answers read here rather than raised by the client: they say which field is wrong.
_READ = frozenset({*range(200, 300), 400, 404, 409, 412})
POLL_DEFAULT_SECONDS = 2.0  # without a Retry-After
POLL_MIN_SECONDS = 0.25  # a Retry-After of 0 is no reason to ask without pause
POLL_MAX_SECONDS = 30.0


class ArmError(ShoalError):
    """ARM refused (a 4xx answer read here) or an operation ended Failed/Canceled: `code`
    is ARM's (SkuNotAvailable, AllocationFailed, OperationNotAllowed, ...)."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        target: str = "",
        details: tuple[tuple[str, str], ...] = (),
    ) -> None:
        where = f" ({target})" if target else ""
        super().__init__(f"{code}{where}: {message}")
        self.status, self.code, self.message = status, code, message
        self.target, self.details = target, details

    def all_codes(self) -> list[str]:
        return [self.code, *(code for code, _ in self.details)]


def arm_error(status: int, body: Any) -> ArmError:
    """ARM's error body, whatever shape it came in (a bare `{"code", "message"}` too)."""
    error = body.get("error", body) if isinstance(body, dict) else {}
    if not isinstance(error, dict):
        error = {}
    details: list[tuple[str, str]] = []
    for one in error.get("details") or []:
        if isinstance(one, dict):
            details.append((str(one.get("code") or ""), _said(one.get("message"))))
    return ArmError(
        status,
        str(error.get("code") or f"HTTP{status}"),
        _said(error.get("message")) or f"HTTP {status}",
        str(error.get("target") or ""),
        tuple(details),
    )


def _said(value: Any) -> str:
    return one_line(str(value or ""), ())[:400]


class Arm:
    def __init__(
        self,
        base: str,
        subscription: str,
        *,
        auth_hint: str,
        policy: RetryPolicy,
        transport: httpx.BaseTransport | None = None,
        sleep: Any = time.sleep,
    ) -> None:
        self.base = base.rstrip("/")
        self.subscription = subscription
        self.http = CloudHttp("azure", auth_hint=auth_hint, policy=policy, transport=transport)
        self._origin = _origin(self.base)
        self._sleep = sleep

    def sub(self, tail: str) -> str:
        """A path under the subscription."""
        return f"/subscriptions/{quote(self.subscription, safe='')}/{tail.lstrip('/')}"

    def call(
        self,
        method: str,
        path: str,
        api: str,
        *,
        body: Any = None,
        params: dict[str, str] | None = None,
    ) -> tuple[int, dict[str, str], Any]:
        """(status, headers, decoded body or None); a 4xx read here is an ArmError."""
        url = path if path.startswith("http") else self.base + path
        response = self.http.request(
            method, url, params={"api-version": api, **(params or {})}, body=body, ok=_READ
        )
        decoded: Any = None
        if response.content:
            try:
                decoded = response.json()
            except ValueError:
                decoded = None
        if response.status_code >= 300:
            raise arm_error(response.status_code, decoded)
        headers = {k.lower(): v for k, v in response.headers.items()}
        return response.status_code, headers, decoded

    def get(self, path: str, api: str, **params: str) -> dict[str, Any] | None:
        """The resource, or None when ARM says it does not exist (404)."""
        try:
            _, _, found = self.call("GET", path, api, params=params or None)
        except ArmError as exc:
            if exc.status == 404:
                return None
            raise
        return found if isinstance(found, dict) else {}

    def put(
        self, path: str, api: str, body: dict[str, Any], *, deadline: float, what: str
    ) -> dict[str, Any]:
        """PUT, followed to the end of its operation: the resource as it is then."""
        _, headers, found = self.call("PUT", path, api, body=body)
        if not _pending(headers, found):
            return found if isinstance(found, dict) else {}
        limit = time.monotonic() + deadline
        self.follow(headers, deadline, what)
        while True:  # no operation to ask (or it ended): the resource's own state says
            again = self.get(path, api)
            if again is None:
                raise ShoalError(f"{what}: the operation succeeded but {path} is not there")
            state = str((again.get("properties") or {}).get("provisioningState") or "")
            if state.lower() in ("", "succeeded"):
                return again
            if state.lower() in ("failed", "canceled"):
                raise ArmError(200, f"Provisioning{state.title()}", f"{path} is {state}")
            if time.monotonic() >= limit:
                raise RetryableError(
                    f"{what}: {path} is still {state} after {deadline:g} s; `shoal status` "
                    "tells what it became"
                )
            self._sleep(POLL_DEFAULT_SECONDS)

    def patch(
        self, path: str, api: str, body: dict[str, Any], *, deadline: float, what: str
    ) -> dict[str, Any]:
        """PATCH (a resource's tags), followed to the end of its operation when it has one."""
        _, headers, found = self.call("PATCH", path, api, body=body)
        if headers.get("azure-asyncoperation") or headers.get("location"):
            self.follow(headers, deadline, what)
        return found if isinstance(found, dict) else {}

    def delete(self, path: str, api: str, *, deadline: float, what: str, **params: str) -> bool:
        """DELETE, followed to its end: False when it was gone already."""
        try:
            status, headers, _ = self.call("DELETE", path, api, params=params or None)
        except ArmError as exc:
            if exc.status == 404:
                return False
            raise
        if status == 204:
            return False
        if status == 202 or _pending(headers, None):
            self.follow(headers, deadline, what)
        return True

    def post(self, path: str, api: str, *, deadline: float, what: str, **params: str) -> Any:
        status, headers, found = self.call("POST", path, api, params=params or None)
        if status == 202:
            return self.follow(headers, deadline, what)
        return found

    def follow(self, headers: dict[str, str], seconds: float, what: str) -> Any:
        """An operation to its end (see the module): its final body (None when it has
        none); ArmError when it Failed or was Canceled, RetryableError (75) when it has not
        ended by the deadline."""
        limit = time.monotonic() + seconds
        asynchronous = headers.get("azure-asyncoperation", "")
        location = headers.get("location", "")
        target = asynchronous or location
        if not target:
            return None
        self._check_origin(target, what)
        wait = _after(headers)
        while True:
            left = limit - time.monotonic()
            if left <= 0:
                raise RetryableError(
                    f"{what}: Azure's operation has not ended after {seconds:g} s; `shoal "
                    "status` tells what it became"
                )
            self._sleep(min(wait, left))
            response = self.http.request("GET", target, ok=_READ)
            body: Any = None
            if response.content:
                try:
                    body = response.json()
                except ValueError:
                    body = None
            if response.status_code >= 300:
                raise arm_error(response.status_code, body)
            wait = _after({k.lower(): v for k, v in response.headers.items()})
            if asynchronous:
                state = str((body or {}).get("status") or "") if isinstance(body, dict) else ""
                if state.lower() == "succeeded":
                    return body
                if state.lower() in ("failed", "canceled"):
                    error = arm_error(200, body)
                    if not (body or {}).get("error"):
                        error = ArmError(200, state, f"the operation ended {state}")
                    raise error
                continue
            if response.status_code != 202:
                return body

    def _check_origin(self, url: str, what: str) -> None:
        if _origin(url) != self._origin:
            raise ShoalError(
                f"{what}: Azure named an operation at {_origin(url) or 'an unusable URL'}, not "
                f"{self._origin}; not followed (the token goes only to the management URL)"
            )


def _pending(headers: dict[str, str], body: Any) -> bool:
    if headers.get("azure-asyncoperation") or headers.get("location"):
        return True
    state = ""
    if isinstance(body, dict):
        state = str((body.get("properties") or {}).get("provisioningState") or "")
    return state.lower() not in ("", "succeeded")


def _after(headers: dict[str, str]) -> float:
    value = headers.get("retry-after", "")
    try:
        seconds = float(value)
    except ValueError:
        return POLL_DEFAULT_SECONDS
    if seconds != seconds or seconds < 0:  # NaN or negative: a server's lie
        return POLL_DEFAULT_SECONDS
    return min(max(seconds, POLL_MIN_SECONDS), POLL_MAX_SECONDS)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower() if parts.scheme and parts.netloc else ""
