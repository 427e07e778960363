"""A loopback Azure Resource Manager for the `azure` driver's tests (no Azure emulator covers
Compute), written from the REST reference (https://learn.microsoft.com/rest/api/compute,
/rest/api/virtualnetwork, /rest/api/authorization, /rest/api/resources) and held to Azure's
machine-readable contract: every route is an operation of azure-mgmt-compute /
azure-mgmt-network / azure-mgmt-authorization / azure-mgmt-resource-subscriptions
(contract.py), every request body is walked strictly with the operation's model, and so is
every body the stand-in answers (a bug here). A request that
breaks the model gets ARM's 400 and is recorded in `violations`; the `azure_arm` fixture
fails a test that leaves a violation, or a call to an operation the stand-in does not serve
(`unserved`), behind.

This module is the core: HTTP (optionally TLS), routing, auth and RBAC, api-versions, ARM's
errors, the clock, asynchronous operations, paging, resource groups, the subscription and its
locations (Subscriptions_Get / ListLocations, api-version 2022-12-01: physical regions with
their zone mappings, and a logical one, as ARM lists them), the cloud metadata document and
the knobs and observations shared by the resource modules: compute.py (virtualMachines,
disks, snapshots, images, skus, usages, capacity reservation groups and their reservations,
marketplace images), network.py
(networkInterfaces, publicIPAddresses, virtualNetworks/subnets) and authz.py
(roleAssignments, roleDefinitions, managed-identity tokens). Served operations are the
keys of `ArmStandin.handlers`, named as Azure names them (`VirtualMachines_CreateOrUpdate`).

Asynchronous operations, as ARM does them (learn.microsoft.com/azure/azure-resource-manager/
management/async-operations): a long-running PUT answers 201 (200 when the resource exists)
with the resource in a transient provisioningState and `Azure-AsyncOperation` (+
`Retry-After`); a long-running POST or DELETE answers 202 with `Location` and
`Azure-AsyncOperation`. The Azure-AsyncOperation URL answers 200 `{status: InProgress |
Succeeded | Failed | Canceled, startTime, endTime, error?}` (Compute adds `name`); the
Location URL answers 202 while in progress, then 200 / 204 when done, or the failure's
error. Every state lasts `timing` seconds on the stand-in's clock; `advance(seconds)`
moves the clock on, so a test sees a 2 h lifetime end at once.

Errors are ARM's `{"error": {"code", "message", "target"?, "details"?}}` with the codes and
texts Azure sends (texts quoted from real responses unless marked "approximated" in
the module that raises them): 400 InvalidRequestContent / InvalidRequestFormat (a body the
model refuses), InvalidParameter (with `target`), MissingApiVersionParameter,
NoRegisteredProviderFound, LocationNotAvailableForResourceType; 401 AuthenticationFailed /
InvalidAuthenticationToken (with `WWW-Authenticate`); 403 AuthorizationFailed /
LinkedAuthorizationFailed (a linked scope, e.g. a VM's capacity reservation group); 404
ResourceNotFound / ResourceGroupNotFound / SubscriptionNotFound; 409 OperationNotAllowed,
SkuNotAvailable, Conflict; 429 with `Retry-After` (Compute's OperationNotAllowed +
TooManyRequests detail, ARM's SubscriptionRequestsThrottled elsewhere); 500
InternalServerError.

Knobs (under the stand-in's lock; set them before or during a test):
  tokens = {TOKEN}                 bearer tokens of the test principal (Owner of the
                                   subscription; None: any token is the test principal)
  deny = {"Microsoft.Compute/virtualMachines/write"}   actions refused with 403 whatever
                                   the caller's roles (fnmatch patterns)
  fail_http(status, operation=, times=, retry_after=, apply=)  answer the next calls with an
                                   HTTP error (0: drop the connection); apply=True carries the
                                   call out first, so only the answer is lost
  delay[operation_id] = seconds    answer that operation late
  timing = Timing(...)             how long each transient state lasts
  retry_after = seconds            the Retry-After of long-running answers (0 by default, so
                                   a polling client does not sleep; Azure sends 10-15 at most)
  operations_base = URL            the origin the operation URLs (Azure-AsyncOperation,
                                   Location) name instead of the stand-in's own (a hostile or
                                   broken server's: a client must not follow them there)
  page_size = n                    list pages of n items with nextLink ($skiptoken)
  api_versions[family] = {...}     the api-versions accepted beside the SDK's own (families:
                                   compute, disks, skus, network, authorization, resources)
  add_resource_group(name, location), advance(seconds)
  and the resource modules' knobs: compute (fail_create, quotas, evict, shutdown, console,
  set_spot_price, restrict_sku, add_image, reservation_group, reserve), network (add_subnet),
  authz (identity_token).
Observations: `requests` (every call as `Seen`), `calls(operation_id)`, `violations`
(`take_violations()` for a test that breaks the contract on purpose), `unserved`, `events`
((what, resource id, why): created, running, stopped, deallocated, deleted, failed,
evicted, ...), `resource(id)`, `resources(type)`.
For tests of the stand-in itself: `Client` (plain HTTP).
"""

from __future__ import annotations

import copy
import datetime as dt
import fnmatch
import heapq
import ipaddress
import itertools
import json
import ssl
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

from tests.drivers.azure.contract import Contract, Operation, Violation, load

SUBSCRIPTION = "6c1f3a2e-8b4d-4e5f-9a0b-1c2d3e4f5a6b"
TENANT = "3f2e1d0c-9b8a-4765-a4b3-c2d1e0f9a8b7"
TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.shoal-arm-standin.test"  # the test principal
TEST_PRINCIPAL = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"  # its object id
RESOURCE_GROUP = "shoal-rg"
LOCATIONS: dict[str, tuple[str, ...]] = {
    "eastus": ("1", "2", "3"),
    "westeurope": ("1", "2", "3"),
}
# Beside the api-version the installed SDK sends for an operation, the ones a client may
# send, per family of operations: the versions the brief names and the GA releases since.
API_VERSIONS: dict[str, set[str]] = {
    # 2023-07-01: Usage - List as providers/azure/accounts.py asks it; 2025-04-01 its capacity
    # reservation reads.
    "compute": {
        "2023-07-01",
        "2024-07-01",
        "2024-11-01",
        "2025-04-01",
        "2025-11-01",
        "2026-04-01",
    },
    "disks": {"2024-03-02", "2025-01-02", "2026-03-02"},  # disks, snapshots
    "skus": {"2021-07-01"},  # resource skus
    "network": {"2024-05-01", "2024-07-01", "2024-10-01", "2025-05-01", "2026-03-01"},
    "authorization": {"2022-04-01"},
    "resources": set(),  # the SDK's 2022-12-01, what providers/azure/fetch.py sends
}
# What Subscriptions - List Locations says of a region shoal knows (az account list-locations):
# display name, regional display name, geography, geography group, longitude, latitude,
# physical location, paired region.
REGION_INFO: dict[str, tuple[str, str, str, str, str, str, str, str]] = {
    "eastus": (
        "East US",
        "(US) East US",
        "United States",
        "US",
        "-79.8164",
        "37.3719",
        "Virginia",
        "westus",
    ),
    "westeurope": (
        "West Europe",
        "(Europe) West Europe",
        "Netherlands",
        "Europe",
        "4.9",
        "52.3667",
        "Netherlands",
        "northeurope",
    ),
}


def api_family(op: Operation) -> str:
    if op.id.startswith(("Disks_", "Snapshots_")):
        return "disks"
    if op.id.startswith("ResourceSkus_"):
        return "skus"
    return op.sdk


ASYNC_STATUSES = ("InProgress", "Succeeded", "Failed", "Canceled")
PROVIDER_OF = {"compute": "Microsoft.Compute", "network": "Microsoft.Network"}


@dataclass
class Timing:
    """Seconds on the stand-in's clock each transient state lasts."""

    vm_create: float = 0.1  # Creating -> Succeeded (running)
    vm_start: float = 0.05
    vm_stop: float = 0.05  # powerOff
    vm_deallocate: float = 0.05
    vm_delete: float = 0.1
    network: float = 0.02  # NIC / public IP / subnet create and delete
    disk: float = 0.02
    snapshot: float = 0.05
    image: float = 0.1
    reservation: float = 0.1  # capacity reservation Creating -> Succeeded


@dataclass
class Seen:
    operation: str  # VirtualMachines_CreateOrUpdate ("" when nothing matched)
    http_method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int = 0
    principal: str = ""  # the caller's object id ("" when not authenticated)


@dataclass
class HttpFault:
    status: int  # 0: close the connection with no answer
    operation: str = "*"
    times: int = 1
    apply: bool = False
    retry_after: int | None = None
    code: str | None = None
    message: str | None = None


@dataclass
class Reply:
    status: int
    body: Any = None  # None: no body
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Res:
    """One ARM resource: `body` is what a GET answers (before any `$expand`)."""

    id: str
    type: str  # Microsoft.Compute/virtualMachines
    rg: str
    body: dict[str, Any]
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return str(self.body["name"])

    @property
    def props(self) -> dict[str, Any]:
        out: dict[str, Any] = self.body.setdefault("properties", {})
        return out


@dataclass
class AsyncOp:
    id: str
    provider: str  # Microsoft.Compute / Microsoft.Network
    location: str
    api_version: str
    start: float
    status: str = "InProgress"
    end: float | None = None
    error: dict[str, Any] | None = None
    final_status: int = 200  # what the Location URL answers when it succeeded (200 / 204)
    final_body: Any = None
    target: str = ""  # the resource it acts on


class ArmError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        target: str | None = None,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.target = target
        self.details = details
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.target is not None:
            error["target"] = self.target
        if self.details:
            error["details"] = self.details
        return {"error": error}


def not_found(type_: str, name: str, rg: str) -> ArmError:
    return ArmError(
        404,
        "ResourceNotFound",
        f"The Resource '{type_}/{name}' under resource group '{rg}' was not found. For more "
        "details please go to https://aka.ms/ARMResourceNotFoundFix",
    )


def invalid(message: str, target: str | None = None, code: str = "InvalidParameter") -> ArmError:
    return ArmError(400, code, message, target=target)


Handler = Callable[[dict[str, str], dict[str, str], Any], Reply]


class _Drop(Exception):
    """Close the connection without an answer."""


class ArmStandin:
    def __init__(
        self,
        subscription: str = SUBSCRIPTION,
        *,
        timing: Timing | None = None,
        tls: bool = False,
        contract: Contract | None = None,
    ) -> None:
        from tests.drivers.azure.authz import Authorization
        from tests.drivers.azure.compute import Compute
        from tests.drivers.azure.network import Network

        self.contract = contract or load()
        self.subscription = subscription
        self.tenant = TENANT
        self.timing = timing or Timing()
        self.tokens: set[str] | None = {TOKEN}
        self.deny: set[str] = set()
        self.delay: dict[str, float] = {}
        self.retry_after = 0
        self.operations_base: str | None = None
        self.page_size = 0  # 0: one page
        self.api_versions: dict[str, set[str]] = {k: set(v) for k, v in API_VERSIONS.items()}
        self.requests: list[Seen] = []
        self.violations: list[str] = []
        self.unserved: list[str] = []
        self.events: list[tuple[str, str, str]] = []
        self.http_faults: list[HttpFault] = []
        self.locations: dict[str, tuple[str, ...]] = dict(LOCATIONS)
        self.resource_groups: dict[str, dict[str, Any]] = {}
        # The principal of the request being handled (set under the lock): a handler checks
        # linked scopes with it (ARM's LinkedAuthorizationFailed).
        self.caller = ""
        self.lock = threading.Condition(threading.RLock())
        self._ids = itertools.count(1)
        self._wall0 = time.time()
        self._mono0 = time.monotonic()
        self._offset = 0.0
        self._events: list[tuple[float, int, Callable[[float], None]]] = []
        self._resources: dict[str, Res] = {}
        self._ops: dict[str, AsyncOp] = {}
        self._tls_dir: tempfile.TemporaryDirectory[str] | None = None
        self.ca_bundle: str | None = None
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        if tls:
            self._wrap_tls()
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.handlers: dict[str, Handler] = {
            "Subscriptions_Get": self._subscription_get,
            "Subscriptions_ListLocations": self._locations,
        }
        self.compute = Compute(self)
        self.network = Network(self)
        self.authz = Authorization(self)
        self.add_resource_group(RESOURCE_GROUP, "eastus")

    # --- life of the server

    def __enter__(self) -> ArmStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._tls_dir is not None:
            self._tls_dir.cleanup()

    @property
    def base(self) -> str:
        scheme = "https" if self.ca_bundle else "http"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}"

    def _wrap_tls(self) -> None:
        """A CA and a server certificate for 127.0.0.1 / localhost, made here: a client
        trusts the CA through `ca_bundle` (REQUESTS_CA_BUNDLE for the Azure CLI)."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        now = dt.datetime.now(dt.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "shoal ARM stand-in CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                    ]
                ),
                critical=False,
            )
            .add_extension(
                x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
            )
            .sign(ca_key, hashes.SHA256())
        )
        self._tls_dir = tempfile.TemporaryDirectory(prefix="arm-standin-tls-")
        root = Path(self._tls_dir.name)
        pem = serialization.Encoding.PEM
        (root / "ca.pem").write_bytes(ca.public_bytes(pem))
        (root / "server.pem").write_bytes(
            cert.public_bytes(pem)
            + key.private_bytes(
                pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(root / "server.pem")
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
        self.ca_bundle = str(root / "ca.pem")

    # --- the clock

    def now(self) -> float:
        return self._wall0 + (time.monotonic() - self._mono0) + self._offset

    def advance(self, seconds: float) -> None:
        """Move the stand-in's clock on: operations finish, lifetimes end, at their times."""
        with self.lock:
            self._offset += seconds
            self.tick()
            self.lock.notify_all()

    def at(self, when: float, action: Callable[[float], None]) -> None:
        heapq.heappush(self._events, (when, next(self._ids), action))

    def next_event_in(self) -> float:
        """Seconds on the clock until the next scheduled change (0.05 when none is)."""
        with self.lock:
            if not self._events:
                return 0.05
            return max(0.001, self._events[0][0] - self.now())

    def tick(self) -> None:
        now = self.now()
        ran = False
        while self._events and self._events[0][0] <= now:
            when, _, action = heapq.heappop(self._events)
            action(when)
            ran = True
        if ran:
            self.lock.notify_all()

    def stamp(self, when: float | None = None) -> str:
        """ARM's times: UTC with 7 fractional digits, as .NET writes them."""
        moment = dt.datetime.fromtimestamp(self.now() if when is None else when, dt.UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%f") + "0+00:00"

    def guid(self) -> str:
        return str(uuid.uuid4())

    # --- knobs

    def add_resource_group(self, name: str, location: str = "eastus") -> None:
        with self.lock:
            self.resource_groups[name.lower()] = {
                "id": f"/subscriptions/{self.subscription}/resourceGroups/{name}",
                "name": name,
                "type": "Microsoft.Resources/resourceGroups",
                "location": location,
                "properties": {"provisioningState": "Succeeded"},
            }

    def fail_http(
        self,
        status: int,
        *,
        operation: str = "*",
        times: int = 1,
        apply: bool = False,
        retry_after: int | None = None,
        code: str | None = None,
        message: str | None = None,
    ) -> None:
        with self.lock:
            self.http_faults.append(
                HttpFault(status, operation, times, apply, retry_after, code, message)
            )

    def calls(self, operation: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.requests if s.operation == operation]

    def take_violations(self) -> list[str]:
        """The violations so far, forgotten: for a test that sends a bad request on purpose."""
        with self.lock:
            out, self.violations = self.violations, []
            return out

    def resource(self, rid: str) -> dict[str, Any] | None:
        """The resource as a GET would answer now, or None when there is none."""
        with self.lock:
            self.tick()
            found = self._resources.get(rid.lower())
            return copy.deepcopy(found.body) if found else None

    def resources(self, type_: str) -> list[dict[str, Any]]:
        with self.lock:
            self.tick()
            return [copy.deepcopy(r.body) for r in self.of_type(type_)]

    # --- resources, for the resource modules

    def rid(self, rg: str, type_: str, name: str) -> str:
        return f"/subscriptions/{self.subscription}/resourceGroups/{rg}/providers/{type_}/{name}"

    def get(self, rid: str) -> Res | None:
        return self._resources.get(rid.lower())

    def put(self, res: Res) -> None:
        self._resources[res.id.lower()] = res

    def drop(self, rid: str) -> Res | None:
        return self._resources.pop(rid.lower(), None)

    def of_type(self, type_: str, rg: str | None = None) -> list[Res]:
        return [
            r
            for r in self._resources.values()
            if r.type.lower() == type_.lower() and (rg is None or r.rg.lower() == rg.lower())
        ]

    def find(self, rg: str, type_: str, name: str) -> Res:
        found = self.get(self.rid(rg, type_, name))
        if found is None:
            raise not_found(type_, name, rg)
        return found

    def rg_name(self, rg: str) -> str:
        """The resource group's own spelling (ARM keeps the case it was created with)."""
        self.check_rg(self.subscription, rg)
        return str(self.resource_groups[rg.lower()]["name"])

    def check_subscription(self, subscription: str) -> None:
        if subscription.lower() != self.subscription.lower():
            raise ArmError(
                404,
                "SubscriptionNotFound",
                f"The subscription '{subscription}' could not be found.",
            )

    def check_rg(self, subscription: str, rg: str) -> None:
        self.check_subscription(subscription)
        if rg.lower() not in self.resource_groups:
            raise ArmError(
                404, "ResourceGroupNotFound", f"Resource group '{rg}' could not be found."
            )

    def check_location(self, location: str, type_: str) -> str:
        """The location as ARM normalises it ("East US" -> eastus)."""
        normal = location.replace(" ", "").lower()
        if normal not in self.locations:
            raise ArmError(
                400,
                "LocationNotAvailableForResourceType",
                f"The provided location '{location}' is not available for resource type "
                f"'{type_}'. List of available regions for the resource type is "
                f"'{','.join(self.locations)}'.",
            )
        return normal

    def event(self, what: str, rid: str, why: str) -> None:
        self.events.append((what, rid, why))

    def page(self, items: list[Any], query: dict[str, str], path: str) -> dict[str, Any]:
        """An ARM list page: `value`, and `nextLink` (with `$skiptoken`) when more follow."""
        start = int(query.get("$skiptoken", "0") or 0)
        if self.page_size <= 0:
            return {"value": items[start:]}
        end = start + self.page_size
        out: dict[str, Any] = {"value": items[start:end]}
        if end < len(items):
            rest = {k: v for k, v in query.items() if k != "$skiptoken"}
            out["nextLink"] = f"{self.base}{path}?{urlencode({**rest, '$skiptoken': end})}"
        return out

    # --- asynchronous operations

    def new_op(self, sdk: str, location: str, api_version: str, target: str = "") -> AsyncOp:
        op = AsyncOp(
            self.guid(),
            PROVIDER_OF.get(sdk, "Microsoft.Compute"),
            location,
            api_version,
            self.now(),
            target=target,
        )
        self._ops[op.id] = op
        return op

    def op_url(self, op: AsyncOp, kind: str = "operations") -> str:
        path = (
            f"/subscriptions/{self.subscription}/providers/{op.provider}/locations/"
            f"{op.location}/{kind}/{op.id}"
        )
        query = {"api-version": op.api_version}
        if op.provider == "Microsoft.Compute":
            query = {"p": self.guid(), **query}
            if kind == "operationResults":
                path = path.replace("/operationResults/", "/operations/")
                query["monitor"] = "true"
        return f"{self.operations_base or self.base}{path}?{urlencode(query)}"

    def op_headers(self, op: AsyncOp, *, location: bool) -> dict[str, str]:
        headers = {"Azure-AsyncOperation": self.op_url(op)}
        if op.provider == "Microsoft.Compute":
            headers["Azure-AsyncNotification"] = "Enabled"
        if location:
            headers["Location"] = self.op_url(op, "operationResults")
        headers["Retry-After"] = str(self.retry_after)
        return headers

    def finish(
        self,
        op: AsyncOp,
        when: float,
        *,
        error: dict[str, Any] | None = None,
        canceled: bool = False,
    ) -> None:
        if op.status != "InProgress":
            return
        op.end = when
        op.status = "Canceled" if canceled else "Failed" if error else "Succeeded"
        op.error = error
        self.lock.notify_all()

    def op_body(self, op: AsyncOp) -> dict[str, Any]:
        body: dict[str, Any] = {"startTime": self.stamp(op.start), "status": op.status}
        if op.end is not None:
            body["endTime"] = self.stamp(op.end)
        if op.error is not None:
            body["error"] = op.error
        if op.provider == "Microsoft.Compute":
            body["name"] = op.id
        return body

    # --- serving

    def serve(
        self, http_method: str, raw_path: str, headers: dict[str, str], raw_body: bytes
    ) -> tuple[int, dict[str, str], Any]:
        """One request -> (status, headers, JSON body, raw bytes or None for no body);
        status 0 closes the connection without an answer."""
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query, keep_blank_values=True)
        seen = Seen("", http_method, unquote(parts.path), query, None)
        with self.lock:
            self.requests.append(seen)
        reply = self._serve(seen, headers, raw_body)
        seen.status = reply.status
        reply.headers.setdefault("x-ms-request-id", str(uuid.uuid4()))
        return reply.status, reply.headers, reply.body

    def _serve(self, seen: Seen, headers: dict[str, str], raw_body: bytes) -> Reply:
        path = seen.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in seen.query.items()}
        try:
            special = self._special(seen, path, query, headers)
            if special is not None:
                return special
        except ArmError as e:
            return self._error("compute", e)
        route = self.contract.route(seen.http_method, path)
        if route is None:
            with self.lock:
                self.violations.append(
                    f"request {seen.http_method} {path}: no operation of the SDKs has this path"
                )
            return self._error(
                "compute",
                ArmError(
                    404,
                    "InvalidResourceType",
                    f"The resource type could not be found for the path '{path}'.",
                ),
            )
        op = route.operation
        seen.operation = op.id
        try:
            seen.principal = self._principal(headers)
        except ArmError as e:
            return self._error(op.sdk, e)
        delay = self.delay.get(op.id, 0.0)
        if delay:
            time.sleep(delay)
        with self.lock:
            fault = self._take_fault(op.id)
        if fault is not None and not fault.apply:
            return self._fault_answer(op, fault)
        try:
            self._check_api_version(op, query, route.params)
            self._check_query(op, query)
            body = self._body(op, raw_body, seen)
            with self.lock:
                self.tick()
                self.authz.check(seen.principal, op, seen.http_method, path)
        except ArmError as e:
            return self._error(op.sdk, e)
        handler = self.handlers.get(op.id)
        if handler is None:
            with self.lock:
                self.unserved.append(f"{op.id} ({seen.http_method} {path})")
            return self._error(
                op.sdk,
                ArmError(501, "NotImplemented", f"{op.id} is not served by the ARM stand-in"),
            )
        params = {k: unquote(v) for k, v in route.params.items()}
        try:
            with self.lock:
                self.tick()
                self.caller = seen.principal
                reply = handler(params, query, body)
                reply = Reply(reply.status, copy.deepcopy(reply.body), dict(reply.headers))
        except ArmError as e:
            return self._error(op.sdk, e)
        if fault is not None:
            return self._fault_answer(op, fault)
        self._check_response(op, reply)
        return reply

    def _special(
        self, seen: Seen, path: str, query: dict[str, str], headers: dict[str, str]
    ) -> Reply | None:
        """What ARM serves beside the resource providers' operations."""
        from tests.drivers.azure.compute import BLOB_PREFIX

        parts = path.strip("/").split("/")
        lower = [p.lower() for p in parts]
        if lower[:2] == ["metadata", "endpoints"] and seen.http_method == "GET":
            seen.operation = "Metadata_Endpoints"
            return Reply(200, self._metadata(query.get("api-version", "")))
        if path.startswith(BLOB_PREFIX) and seen.http_method == "GET":
            seen.operation = "BootDiagnostics_Blob"
            with self.lock:
                self.tick()
                return self.compute.blob(path, query)
        if (
            len(parts) == 8
            and lower[0] == "subscriptions"
            and lower[2] == "providers"
            and (lower[4] == "locations" and lower[6] in ("operations", "operationresults"))
        ):
            seen.operation = "AsyncOperation_Get"
            seen.principal = self._principal(headers)
            self.check_subscription(parts[1])
            with self.lock:
                self.tick()
                return self._poll(parts[7], lower[6] == "operationresults" or "monitor" in query)
        if len(parts) == 4 and lower[0] == "subscriptions" and lower[2] == "resourcegroups":
            seen.operation = f"ResourceGroups_{seen.http_method.capitalize()}"
            seen.principal = self._principal(headers)
            with self.lock:
                return self._resource_group(seen, parts[1], parts[3])
        return None

    def _metadata(self, api_version: str) -> Any:
        base = self.base + "/"
        cloud = {
            "name": "ShoalArmStandin",
            "portal": base,
            "resourceManager": base,
            "authentication": {
                "loginEndpoint": base,
                "audiences": [base, "https://management.core.windows.net/"],
                "tenant": "common",
                "identityProvider": "AAD",
            },
            "media": base,
            "graphAudience": "https://graph.windows.net/",
            "graph": "https://graph.windows.net/",
            "batch": "https://batch.core.windows.net/",
            "vmImageAliasDoc": base + "aliases.json",
            "activeDirectoryDataLake": "https://datalake.azure.net/",
            "sqlManagement": "https://management.core.windows.net:8443/",
            "gallery": base,
            "microsoftGraphResourceId": "https://graph.microsoft.com/",
            "suffixes": {
                "storage": "core.windows.net",
                "keyVaultDns": "vault.azure.net",
                "acrLoginServer": "azurecr.io",
                "sqlServerHostname": "database.windows.net",
                "azureDataLakeStoreFileSystem": "azuredatalakestore.net",
                "azureDataLakeAnalyticsCatalogAndJob": "azuredatalakeanalytics.net",
            },
        }
        # 2022-09-01 answers the list of clouds; the older versions one cloud.
        return [cloud] if api_version >= "2022-09-01" else cloud

    def _poll(self, op_id: str, monitor: bool) -> Reply:
        op = self._ops.get(op_id)
        if op is None:
            raise ArmError(404, "NotFound", f"The operation '{op_id}' was not found.", target=op_id)
        retry = {"Retry-After": str(self.retry_after)}
        if not monitor:
            body = self.op_body(op)
            self._check_op_body(op, body)
            return Reply(200, body, retry if op.status == "InProgress" else {})
        if op.status == "InProgress":
            return Reply(202, None, {**retry, "Location": self.op_url(op, "operationResults")})
        if op.status == "Succeeded":
            return Reply(op.final_status if op.final_body is None else 200, op.final_body)
        error = op.error or {"code": "Canceled", "message": "The operation was canceled."}
        return Reply(409 if op.status == "Canceled" else 500, {"error": error})

    def _check_op_body(self, op: AsyncOp, body: dict[str, Any]) -> None:
        """An operation's status as ARM's async-operations contract has it: no SDK model
        holds it (azure-core polls it), so its keys are checked here and its `error` with
        the resource provider's error model."""
        problems = []
        extra = set(body) - {"id", "name", "status", "startTime", "endTime", "error", "properties"}
        if extra:
            problems.append(f"unknown keys {sorted(extra)}")
        if body.get("status") not in ASYNC_STATUSES:
            problems.append(f"status {body.get('status')!r} is not one of {ASYNC_STATUSES}")
        if "error" in body:
            sdk = "network" if op.provider == "Microsoft.Network" else "compute"
            model = self.contract.error_detail_model(sdk)
            problems += [
                str(v) for v in self.contract.validate(body["error"], model, request=False)
            ]
        if problems:
            with self.lock:
                self.violations.extend(f"response AsyncOperation_Get: {p}" for p in problems)

    def _resource_group(self, seen: Seen, subscription: str, name: str) -> Reply:
        self.check_subscription(subscription)
        if seen.http_method in ("GET", "HEAD"):
            found = self.resource_groups.get(name.lower())
            if found is None:
                if seen.http_method == "HEAD":
                    return Reply(404)
                raise ArmError(
                    404, "ResourceGroupNotFound", f"Resource group '{name}' could not be found."
                )
            return Reply(
                204 if seen.http_method == "HEAD" else 200,
                None if seen.http_method == "HEAD" else found,
            )
        if seen.http_method == "PUT":
            existed = name.lower() in self.resource_groups
            self.add_resource_group(name, "eastus")
            return Reply(200 if existed else 201, self.resource_groups[name.lower()])
        raise ArmError(
            405, "MethodNotAllowed", f"{seen.http_method} is not served for resource groups"
        )

    # --- the subscription (Microsoft.Resources)

    def _subscription_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.check_subscription(p["subscriptionId"])
        return Reply(
            200,
            {
                "id": f"/subscriptions/{self.subscription}",
                "subscriptionId": self.subscription,
                "tenantId": self.tenant,
                "displayName": "shoal ARM stand-in",
                "state": "Enabled",
                "subscriptionPolicies": {
                    "locationPlacementId": "Public_2014-09-01",
                    "quotaId": "PayAsYouGo_2014-09-01",
                    "spendingLimit": "Off",
                },
                "authorizationSource": "RoleBased",
            },
        )

    def _locations(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        """Subscriptions - List Locations: each region the stand-in serves as a physical one
        with its zones, and a logical one (`us`, no VMs) as ARM lists them too."""
        self.check_subscription(p["subscriptionId"])
        sub = f"/subscriptions/{self.subscription}"
        items: list[dict[str, Any]] = []
        for name, zones in self.locations.items():
            display, regional, geography, group, longitude, latitude, place, pair = REGION_INFO.get(
                name, (name, name, "", "", "0", "0", "", "")
            )
            metadata: dict[str, Any] = {
                "regionType": "Physical",
                "regionCategory": "Recommended",
                "geography": geography,
                "geographyGroup": group,
                "longitude": longitude,
                "latitude": latitude,
                "physicalLocation": place,
            }
            if pair:
                metadata["pairedRegion"] = [{"name": pair, "id": f"{sub}/locations/{pair}"}]
            items.append(
                {
                    "id": f"{sub}/locations/{name}",
                    "name": name,
                    "type": "Region",
                    "displayName": display,
                    "regionalDisplayName": regional,
                    "metadata": metadata,
                    # Each subscription has its own logical-to-physical zone mapping.
                    "availabilityZoneMappings": [
                        {
                            "logicalZone": zone,
                            "physicalZone": f"{name}-az{int(zone) % len(zones) + 1}",
                        }
                        for zone in zones
                    ],
                }
            )
        items.append(
            {
                "id": f"{sub}/locations/us",
                "name": "us",
                "type": "Region",
                "displayName": "United States",
                "regionalDisplayName": "United States",
                "metadata": {"regionType": "Logical", "regionCategory": "Other"},
            }
        )
        return Reply(200, self.page(items, q, f"{sub}/locations"))

    # --- checks

    def _principal(self, headers: dict[str, str]) -> str:
        challenge = {
            "WWW-Authenticate": (
                f'Bearer authorization_uri="https://login.microsoftonline.com/{self.tenant}", '
                'error="invalid_token", error_description="The authentication failed because '
                "of missing 'Authorization' header.\""
            )
        }
        auth = headers.get("authorization")
        if auth is None:
            raise ArmError(
                401,
                "AuthenticationFailed",
                "Authentication failed. The 'Authorization' header is missing.",
                headers=challenge,
            )
        token = auth[7:] if auth.lower().startswith("bearer ") else ""
        with self.lock:
            principal = self.authz.principal_of(token)
            if principal is None and token and self.tokens is None:
                principal = TEST_PRINCIPAL
            if principal is None and token and self.tokens and token in self.tokens:
                principal = TEST_PRINCIPAL
        if principal is None:
            challenge["WWW-Authenticate"] = challenge["WWW-Authenticate"].replace(
                "of missing 'Authorization' header.", "of invalid token."
            )
            raise ArmError(
                401, "InvalidAuthenticationToken", "The access token is invalid.", headers=challenge
            )
        return principal

    def _check_api_version(
        self, op: Operation, query: dict[str, str], params: dict[str, str]
    ) -> None:
        given = query.get("api-version")
        if not given:
            raise ArmError(
                400,
                "MissingApiVersionParameter",
                "The api-version query parameter (?api-version=) is required for all requests.",
            )
        accepted = {op.api_version} | self.api_versions.get(api_family(op), set())
        if given not in accepted:
            type_ = op.path.split("/providers/")[-1].split("/")
            resource_type = type_[1] if len(type_) > 1 else op.path
            raise ArmError(
                400,
                "NoRegisteredProviderFound",
                f"No registered resource provider found for location "
                f"'{params.get('location', 'eastus')}' and API version '{given}' for type "
                f"'{resource_type}'. The supported api-versions are "
                f"'{', '.join(sorted(accepted))}'. The supported locations are "
                f"'{', '.join(self.locations)}'.",
            )

    def _check_query(self, op: Operation, query: dict[str, str]) -> None:
        for name in query:
            if name not in op.query and name not in ("api-version", "$skiptoken"):
                with self.lock:
                    self.violations.append(
                        f"request {op.id}: query parameter {name!r} is not one of the "
                        f"operation's ({', '.join(op.query) or 'none'}); ARM ignores it"
                    )

    def _body(self, op: Operation, raw: bytes, seen: Seen) -> Any:
        if op.request is None:
            if raw.strip() and op.http_method in ("PUT", "PATCH"):
                seen.body = json.loads(raw)
                return seen.body
            return None
        try:
            body = json.loads(raw or b"null")
        except ValueError as e:
            with self.lock:
                self.violations.append(f"request {op.id}: the body is not JSON ({e})")
            raise self._content_error(
                op, f"Unexpected character encountered while parsing value: {e}"
            ) from None
        seen.body = body
        if not isinstance(body, dict):
            with self.lock:
                self.violations.append(f"request {op.id}: the body is not a JSON object")
            raise self._content_error(op, "Unexpected JSON token: the body must be an object.")
        found = self.contract.validate(body, op.request, request=True)
        if found:
            with self.lock:
                self.violations.extend(f"request {op.id}: {v}" for v in found)
            self._refuse(op, raw, found)
        return body

    def _refuse(self, op: Operation, raw: bytes, found: list[Violation]) -> None:
        """The first violation as the resource provider answers it; a read-only field is
        only a violation here: ARM drops it and carries on."""
        for v in found:
            if v.kind == "readonly":
                continue
            wire = _wire_path(v.where)
            if v.kind == "unknown":
                model = v.model.split(".")[0] if "." in v.model else v.model
                position = raw.find(f'"{v.key}"'.encode()) + len(v.key) + 3
                raise self._content_error(
                    op,
                    f"Could not find member '{v.key}' on object of type '{model}'. Path "
                    f"'{'.'.join([*wire, v.key]) if wire else v.key}', line 1, position "
                    f"{max(position, 1)}.",
                )
            if v.kind == "type":  # approximated: Json.NET's conversion error, shortened
                raise self._content_error(
                    op, f"Error converting value: {v.problem}. Path '{'.'.join(wire)}'."
                )
            if v.kind == "required":
                if wire == ["location"]:
                    raise invalid(
                        "The location property is required for this definition.",
                        code="LocationRequired",
                    )
                raise invalid(f"Required parameter '{wire[-1]}' is missing (null).", wire[-1])
            if v.kind == "enum":
                raise invalid(
                    f"The value of parameter {'.'.join(wire)} is invalid.", ".".join(wire)
                )

    @staticmethod
    def _content_error(op: Operation, detail: str) -> ArmError:
        if op.sdk == "network":
            return ArmError(
                400,
                "InvalidRequestFormat",
                "Cannot parse the request.",
                details=[{"code": "InvalidJson", "message": detail}],
            )
        return ArmError(
            400,
            "InvalidRequestContent",
            f"The request content was invalid and could not be deserialized: '{detail}'.",
        )

    def _check_response(self, op: Operation, reply: Reply) -> None:
        body = reply.body
        if body is None or op.response is None or reply.status >= 400:
            return
        found: list[Violation] = []
        if op.kind == "page":
            if not isinstance(body, dict) or not set(body) <= {"value", "nextLink"}:
                found.append(Violation(op.id, "a page is {value, nextLink}", "type"))
            else:
                for i, item in enumerate(body.get("value", [])):
                    for v in self.contract.validate(item, op.response, request=False):
                        found.append(Violation(f"value[{i}].{v.where}", v.problem, v.kind))
        elif op.kind == "array":
            for i, item in enumerate(body if isinstance(body, list) else [body]):
                for v in self.contract.validate(item, op.response, request=False):
                    found.append(Violation(f"[{i}].{v.where}", v.problem, v.kind))
        else:
            found = self.contract.validate(body, op.response, request=False)
        if found:
            with self.lock:
                self.violations.extend(f"response {op.id}: {v}" for v in found)

    def _error(self, sdk: str, error: ArmError) -> Reply:
        body = error.body()
        found = self.contract.validate_error(body, sdk)
        if found:
            with self.lock:
                self.violations.extend(f"response error ({sdk}): {v}" for v in found)
        return Reply(error.status, body, dict(error.headers))

    def _take_fault(self, operation: str) -> HttpFault | None:
        for fault in self.http_faults:
            if fault.times > 0 and fault.operation in ("*", operation):
                fault.times -= 1
                return fault
        return None

    def _fault_answer(self, op: Operation, fault: HttpFault) -> Reply:
        if fault.status == 0:
            return Reply(0)
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        if fault.status == 429 and op.sdk == "compute" and not fault.code:
            stamp = self.stamp()
            detail = json.dumps(
                {
                    "operationGroup": "PutVMSubscriptionMaximum",
                    "startTime": stamp,
                    "endTime": stamp,
                    "allowedRequestCount": 1500,
                    "measuredRequestCount": 1501,
                }
            )
            error = ArmError(
                429,
                "OperationNotAllowed",
                fault.message
                or "The server rejected the request because too many requests have been "
                "received for this subscription.",
                details=[
                    {
                        "code": "TooManyRequests",
                        "target": "PutVMSubscriptionMaximum",
                        "message": detail,
                    }
                ],
                headers=headers,
            )
        elif fault.status == 429:
            error = ArmError(
                429,
                fault.code or "SubscriptionRequestsThrottled",
                fault.message
                or f"Number of 'read' requests for subscription '{self.subscription}' actor "
                f"'{TEST_PRINCIPAL}' exceeded. Please try again after "
                f"'{fault.retry_after or 5}' seconds after additional "
                f"'{fault.retry_after or 5}' requests are made.",
                headers=headers,
            )
        elif fault.status >= 500:
            error = ArmError(
                fault.status,
                fault.code or "InternalServerError",
                fault.message
                or "Encountered internal server error. Diagnostic information: timestamp "
                f"'{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}', subscription id "
                f"'{self.subscription}', tracking id '{uuid.uuid4()}', request correlation id "
                f"'{uuid.uuid4()}'.",
                headers=headers,
            )
        else:
            error = ArmError(
                fault.status,
                fault.code or "BadRequest",
                fault.message or "Bad request.",
                headers=headers,
            )
        return self._error(op.sdk, error)


def _wire_path(where: str) -> list[str]:
    """`VirtualMachine.properties.osProfile.adminPassword` -> the path inside the body."""
    parts = where.replace("[", ".[").split(".")[1:]
    return [p for p in parts if p and not p.startswith("[")]


def action_of(http_method: str, path: str) -> tuple[str, str]:
    """(the ARM action a request needs, the scope it acts on): PUT .../virtualMachines/vm ->
    (Microsoft.Compute/virtualMachines/write, the VM's id); POST .../vm/powerOff ->
    (Microsoft.Compute/virtualMachines/powerOff/action, the VM's id); a list -> read at the
    parent's scope."""
    head, sep, tail = path.rpartition("/providers/")
    if not sep:
        parts = path.strip("/").split("/")
        if len(parts) == 3 and parts[2].lower() == "locations":
            return "Microsoft.Resources/subscriptions/locations/read", "/" + "/".join(parts[:2])
        if len(parts) <= 2:
            return "Microsoft.Resources/subscriptions/read", path
        return "Microsoft.Resources/subscriptions/resourceGroups/read", path
    namespace, *rest = tail.split("/")
    types, names = rest[0::2], rest[1::2]
    scope_parts = [namespace]
    for kind, name in zip(types, names, strict=False):
        scope_parts += [kind, name]
    scope = f"{head}/providers/{'/'.join(scope_parts)}"
    if len(types) > len(names):  # a collection, or an action on the resource before it
        last = types[-1]
        if http_method == "POST":
            return f"{namespace}/{'/'.join(types[:-1])}/{last}/action", scope
        if not names:
            return f"{namespace}/{last}/read", head or "/"
        return f"{namespace}/{'/'.join(types)}/read", scope
    verb = {"GET": "read", "HEAD": "read", "PUT": "write", "PATCH": "write", "DELETE": "delete"}
    return f"{namespace}/{'/'.join(types)}/{verb.get(http_method, 'action')}", scope


def denied(patterns: set[str], action: str) -> bool:
    return any(fnmatch.fnmatch(action.lower(), p.lower()) for p in patterns)


# --- for tests ----------------------------------------------------------------------------


IMAGE_URN = ("Canonical", "ubuntu-24_04-lts", "server", "latest")
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDshoalstandinkeyshoalstandinkeyshoal0 shoal"


def vm_body(
    nics: list[str] | None = None,
    *,
    size: str = "Standard_D2s_v5",
    location: str = "eastus",
    image: tuple[str, str, str, str] | str = IMAGE_URN,
    nic_delete: str | None = None,
    os_disk_delete: str | None = None,
    **properties: Any,
) -> dict[str, Any]:
    """A valid VirtualMachines_CreateOrUpdate body: the image by URN (or a custom image's
    id), an SSH key, boot diagnostics on, the NICs by id; `properties` adds or replaces
    fields of `properties` (`zones`, `tags`, `identity` go at the top)."""
    reference: dict[str, Any] = (
        {"id": image}
        if isinstance(image, str)
        else dict(zip(("publisher", "offer", "sku", "version"), image, strict=True))
    )
    os_disk: dict[str, Any] = {"createOption": "FromImage"}
    if os_disk_delete:
        os_disk["deleteOption"] = os_disk_delete
    refs = []
    for nic in nics or []:
        ref: dict[str, Any] = {"id": nic}
        if nic_delete:
            ref["properties"] = {"deleteOption": nic_delete}
        refs.append(ref)
    body: dict[str, Any] = {
        "location": location,
        "properties": {
            "hardwareProfile": {"vmSize": size},
            "storageProfile": {"imageReference": reference, "osDisk": os_disk},
            "osProfile": {
                "computerName": "shoal-vm",
                "adminUsername": "shoal",
                "linuxConfiguration": {
                    "disablePasswordAuthentication": True,
                    "ssh": {
                        "publicKeys": [
                            {"path": "/home/shoal/.ssh/authorized_keys", "keyData": SSH_KEY}
                        ]
                    },
                },
            },
            "networkProfile": {"networkInterfaces": refs},
            "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}},
        },
    }
    for key in ("zones", "tags", "identity"):
        if key in properties:
            body[key] = properties.pop(key)
    body["properties"].update(properties)
    return body


def nic_body(
    subnet: str, *, public_ip: str | None = None, location: str = "eastus"
) -> dict[str, Any]:
    config: dict[str, Any] = {"subnet": {"id": subnet}}
    if public_ip:
        config["publicIPAddress"] = {"id": public_ip}
    return {
        "location": location,
        "properties": {"ipConfigurations": [{"name": "ipconfig1", "properties": config}]},
    }


class Client:
    """A plain HTTP client of the stand-in for its own tests (the driver has its own)."""

    def __init__(self, standin: ArmStandin, token: str | None = TOKEN) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.standin = standin
        self.sub = standin.subscription
        verify: Any = True
        if standin.ca_bundle:
            verify = ssl.create_default_context(cafile=standin.ca_bundle)
        self.http = httpx.Client(base_url=standin.base, headers=headers, timeout=30, verify=verify)

    def rg_path(self, type_: str, name: str = "", rg: str = RESOURCE_GROUP) -> str:
        tail = f"/{name}" if name else ""
        return f"/subscriptions/{self.sub}/resourceGroups/{rg}/providers/{type_}{tail}"

    def vm_path(self, name: str = "", rg: str = RESOURCE_GROUP) -> str:
        return self.rg_path("Microsoft.Compute/virtualMachines", name, rg)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        api_version: str | None = None,
        **params: Any,
    ) -> Any:
        version = api_version or self._version(method, path)
        query = {"api-version": version, **params} if version else params
        return self.http.request(method, path, params=query, json=body)

    def get(self, path: str, **kw: Any) -> Any:
        return self.request("GET", path, **kw)

    def put(self, path: str, body: Any, **kw: Any) -> Any:
        return self.request("PUT", path, body, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> Any:
        return self.request("POST", path, body, **kw)

    def delete(self, path: str, **kw: Any) -> Any:
        return self.request("DELETE", path, **kw)

    def _version(self, method: str, path: str) -> str:
        route = self.standin.contract.route(method, path.split("?")[0])
        return route.operation.api_version if route else ""

    def poll(self, response: Any) -> dict[str, Any]:
        """The Azure-AsyncOperation of a long-running answer, followed until it ends."""
        url = response.headers["Azure-AsyncOperation"]
        for _ in range(400):
            got = self.http.get(url).json()
            if got["status"] != "InProgress":
                return dict(got)
            self.standin.advance(self.standin.next_event_in())
        raise AssertionError(f"operation {url} never ended")

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """PUT, then follow its operation: the resource as a GET answers it after."""
        response = self.put(path, body)
        assert response.status_code in (200, 201, 202), response.text
        done = self.poll(response)
        assert done["status"] == "Succeeded", done
        got = self.get(path)
        assert got.status_code == 200, got.text
        return dict(got.json())

    def act(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        """A long-running POST or DELETE, followed to its end: the operation's answer."""
        response = self.request(method, path, **kw)
        assert response.status_code == 202, response.text
        return self.poll(response)

    def close(self) -> None:
        self.http.close()


# --- HTTP ----------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError | _Drop | ssl.SSLError):
            super().handle_error(request, client_address)


def _handler(standin: ArmStandin) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # Headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and
        # the client's delayed ACK hold the body back ~40 ms on every answer.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _any(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload = standin.serve(self.command, self.path, headers, raw)
            if status == 0:
                self.close_connection = True
                raise _Drop()
            if isinstance(payload, bytes | str):
                data = payload.encode() if isinstance(payload, str) else payload
                kind = extra.pop("Content-Type", "application/octet-stream")
            elif payload is None:
                data, kind = b"", ""
            else:
                data = json.dumps(payload).encode()
                kind = "application/json; charset=utf-8"
            self.send_response(status)
            if kind:
                self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = do_HEAD = _any

    return _Handler


__all__ = [
    "RESOURCE_GROUP",
    "SUBSCRIPTION",
    "TOKEN",
    "ArmError",
    "ArmStandin",
    "AsyncOp",
    "Client",
    "Reply",
    "Res",
    "Seen",
    "Timing",
    "action_of",
    "nic_body",
    "vm_body",
]
