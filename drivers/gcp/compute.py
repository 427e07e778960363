"""The Compute Engine v1 calls the `gcp` driver makes, and what their errors mean.

Every call goes through the shared HTTP client (providers/core/http) with the credentials of
providers/gcp/credentials.py: 401/403 are CredentialsError (77) naming where the credentials
came from, 429 and 5xx (rateLimitExceeded, backendError) are retried with backoff; an insert
is safe to send again because it carries a `requestId`, which Google deduplicates. A 400 or
404 answer is read here: it names the field at fault (machine type, image, zone, ...).

Long-running operations are followed to DONE: zoneOperations.wait (globalOperations or
regionOperations for theirs; it may return early, and at most after two minutes) until DONE
or a deadline, and an operation's `error.errors[]` becomes OperationError for the driver to
map (capacity, quota, usage).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from providers.cloud.http import CloudHttp
from providers.core.errors import RetryableError, ShoalError, one_line

if TYPE_CHECKING:
    import httpx

    from providers.core.http.policy import RetryPolicy
    from providers.gcp.tokens import GcpCredentials

# Answers read here rather than raised by the client: they say which field is wrong.
_READ = frozenset({*range(200, 300), 400, 404, 409, 412})


@dataclass(frozen=True)
class OpError:
    code: str
    message: str
    quota: dict[str, Any]


class OperationError(ShoalError):
    """A zone operation that ended DONE with `error.errors[]`."""

    def __init__(self, errors: list[OpError]) -> None:
        super().__init__("; ".join(f"{e.code}: {e.message}" for e in errors))
        self.errors = errors


class ApiRefused(ShoalError):
    """A 400/404/409/412 answer: `status`, Google's `reason` and message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"HTTP {status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message


class Compute:
    def __init__(
        self,
        base: str,
        project: str,
        credentials: GcpCredentials,
        *,
        auth_hint: str,
        policy: RetryPolicy,
    ) -> None:
        self.base = base.rstrip("/")
        self.project = project
        self.http = CloudHttp("gcp", auth_hint=auth_hint, policy=policy)
        credentials.wire(self.http)

    def url(self, tail: str) -> str:
        return f"{self.base}/compute/v1/projects/{quote(self.project, safe='')}/{tail}"

    def call(
        self,
        method: str,
        tail: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        timeout: float | None = None,
    ) -> Any:
        response = self.http.request(
            method, self.url(tail), params=params, body=body, ok=_READ, timeout=timeout
        )
        if response.status_code >= 300:
            raise _refused(response)
        return self.http.decode(response, method, tail)

    # -- instances ---------------------------------------------------------------------

    def insert(self, zone: str, body: dict[str, Any], request_id: str) -> dict[str, Any]:
        found: dict[str, Any] = self.call(
            "POST", f"zones/{zone}/instances", params={"requestId": request_id}, body=body
        )
        return found

    def instance(self, zone: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.call("GET", f"zones/{zone}/instances/{name}")
        except ApiRefused as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def delete(self, zone: str, name: str, request_id: str) -> dict[str, Any] | None:
        """The delete's operation, or None when the instance is gone already."""
        try:
            found: dict[str, Any] = self.call(
                "DELETE", f"zones/{zone}/instances/{name}", params={"requestId": request_id}
            )
        except ApiRefused as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def labelled(self, filter_: str) -> list[dict[str, Any]]:
        """Every instance of the project whose labels match `filter_` (aggregatedList)."""
        out: list[dict[str, Any]] = []
        token = ""
        for _ in range(1000):
            params = {"filter": filter_}
            if token:
                params["pageToken"] = token
            page = self.call("GET", "aggregated/instances", params=params)
            for scoped in (page.get("items") or {}).values():
                out.extend(scoped.get("instances") or [])
            token = str(page.get("nextPageToken") or "")
            if not token:
                break
        return out

    def region_zones(self, region: str) -> list[str]:
        found = self.call("GET", f"regions/{region}")
        zones = [str(z).rsplit("/", 1)[-1] for z in found.get("zones") or []]
        return sorted(zones)

    def machine_type(self, zone: str, name: str) -> dict[str, Any] | None:
        try:
            found: dict[str, Any] = self.call("GET", f"zones/{zone}/machineTypes/{name}")
        except ApiRefused as exc:
            if exc.status == 404:
                return None
            raise
        return found

    def operations_of(self, zone: str, kind: str) -> list[dict[str, Any]]:
        page = self.call(
            "GET", f"zones/{zone}/operations", params={"filter": f"operationType = {kind}"}
        )
        return list(page.get("items") or [])

    # -- snapshots, images, the serial console (the driver's tasks and `shoal logs`) ----------

    def create_snapshot(
        self, zone: str, disk: str, body: dict[str, Any], request_id: str
    ) -> dict[str, Any]:
        """disks.createSnapshot: its zone operation."""
        found: dict[str, Any] = self.call(
            "POST",
            f"zones/{zone}/disks/{quote(disk, safe='')}/createSnapshot",
            params={"requestId": request_id},
            body=body,
        )
        return found

    def insert_image(
        self, body: dict[str, Any], request_id: str, *, force: bool = False
    ) -> dict[str, Any]:
        """images.insert: its global operation. `force` is forceCreate, which Google needs
        to image a disk a running instance uses."""
        params = {"requestId": request_id}
        if force:
            params["forceCreate"] = "true"
        found: dict[str, Any] = self.call("POST", "global/images", params=params, body=body)
        return found

    def serial_output(self, zone: str, name: str, start: int, port: int = 1) -> dict[str, Any]:
        """instances.getSerialPortOutput from byte `start`: `contents`, the `start` Google
        answered from (later than asked when the bytes asked for are no longer kept: it keeps
        the last 1 MB) and `next`, where the next read starts. An ApiRefused 404 when the
        instance is gone."""
        found: dict[str, Any] = self.call(
            "GET",
            f"zones/{zone}/instances/{quote(name, safe='')}/serialPort",
            params={"port": str(port), "start": str(start)},
        )
        return found

    # -- operations ----------------------------------------------------------------------

    def follow(
        self,
        op: dict[str, Any],
        deadline_seconds: float,
        what: str,
        *,
        later: str = "`shoal status` tells what it became",
    ) -> dict[str, Any]:
        """The operation once DONE; OperationError when it failed, RetryableError (75)
        when it is not DONE by the deadline (it may still finish: the requestId and the
        labels let the next command find what it made; `later` says where to look). A zone,
        region or global operation, as its selfLink (else its zone or region) says."""
        scope, place = _scope(op)
        name = str(op.get("name", ""))
        limit = time.monotonic() + deadline_seconds
        while op.get("status") != "DONE":
            left = limit - time.monotonic()
            if left <= 0:
                raise RetryableError(
                    f"{what}: operation {name} {place} not done after {deadline_seconds:g} "
                    f"s; {later}"
                )
            op = self.call(
                "POST", f"{scope}/operations/{name}/wait", timeout=min(left, 120.0) + 10.0
            )
        op = self.call("GET", f"{scope}/operations/{name}")
        errors = (op.get("error") or {}).get("errors") or []
        if errors:
            raise OperationError([_op_error(e) for e in errors])
        return op


def _scope(op: dict[str, Any]) -> tuple[str, str]:
    """Where an operation lives ("zones/Z", "regions/R" or "global") and how to say it."""
    found = re.search(
        r"/projects/[^/]+/((?:zones|regions)/[^/]+|global)/operations/", str(op.get("selfLink"))
    )
    if found:
        scope = found.group(1)
    elif op.get("zone"):
        scope = "zones/" + str(op["zone"]).rsplit("/", 1)[-1]
    elif op.get("region"):
        scope = "regions/" + str(op["region"]).rsplit("/", 1)[-1]
    else:
        scope = "global"
    return scope, "(global)" if scope == "global" else "in " + scope.split("/", 1)[1]


def _op_error(raw: dict[str, Any]) -> OpError:
    quota: dict[str, Any] = {}
    for detail in raw.get("errorDetails") or []:
        if isinstance(detail, dict) and isinstance(detail.get("quotaInfo"), dict):
            quota = detail["quotaInfo"]
    return OpError(str(raw.get("code", "")), one_line(str(raw.get("message", "")), ()), quota)


def _refused(response: httpx.Response) -> ApiRefused:
    import json

    status = response.status_code
    reason, message = "", ""
    try:
        error = json.loads(response.content or b"{}").get("error") or {}
        message = str(error.get("message") or "")
        errors = error.get("errors") or [{}]
        reason = str(errors[0].get("reason") or error.get("status") or "")
    except (ValueError, AttributeError, TypeError, IndexError):
        pass
    return ApiRefused(status, reason, one_line(message or response.reason_phrase, ())[:300])
