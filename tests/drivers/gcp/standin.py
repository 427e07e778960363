"""A loopback Compute Engine v1 for the `gcp` driver's tests (there is no emulator), written
from the REST reference (https://cloud.google.com/compute/docs/reference/rest/v1) and held
to Google's machine-readable contract: every request it receives (path and query
parameters, body) and every response it sends is checked against the Compute Engine v1
discovery document (discovery.py). A request that breaks it gets Google's 400 and is
recorded in `violations`; so is a response of the stand-in's that breaks it (a bug here).
The `gce` fixture fails a test that leaves either, or a call to a method the stand-in
does not serve (`unserved`), behind.

Served (paths as the real API, under /compute/v1/):
  instances insert / get / list / aggregatedList / delete / getSerialPortOutput;
  zoneOperations get / wait / list, globalOperations get / wait;
  disks get / list / aggregatedList / createSnapshot, snapshots get / list;
  images insert / get / getFromFamily / list, imageFamilyViews get;
  machineTypes get / list / aggregatedList, acceleratorTypes get / list / aggregatedList;
  zones get / list, regions get / list (quotas with live usage), projects get;
  reservations / futureReservations aggregatedList (what the test put there).
Lists take `filter` (Compute's syntax: `labels.k = v`, `name != x`, `k:*`, `eq`/`ne`
regular expressions, AND / OR / NOT, parentheses), `orderBy` (name, creationTimestamp desc),
`maxResults` and `pageToken`; an empty list has no `items`, as Google's. Any request takes
`fields` (partial responses).

Operations are asynchronous on the stand-in's clock (`timing`, short by default): an insert
answers an Operation PENDING, RUNNING once the instance exists (PROVISIONING, then STAGING
with its external IP), DONE when it is RUNNING; a delete answers PENDING, the instance goes
STOPPING, then is gone (its auto-delete disks with it) and the operation DONE.
zoneOperations.wait blocks until DONE or `wait_cap` seconds (Google: 2 minutes, and it may
return early: `wait_early`). `scheduling.maxRunDuration` (counted from RUNNING) and
`terminationTime` are honoured at their deadline by `instanceTerminationAction` (DELETE:
the instance is deleted; STOP: TERMINATED); `advance(seconds)` moves the clock on, so a
test sees a 2 h lifetime end at once. A `requestId` seen within `request_window` seconds
gets the first operation back, whatever the body; nothing is done twice.

Errors are Google's: HTTP `{"error": {"code", "message", "errors": [{"domain", "reason",
"message"}], "status"}}` (400 invalid / invalidParameter / resourceNotReady, 401 authError,
403 forbidden, 404 notFound, 409 alreadyExists, 429 rateLimitExceeded, 503 backendError);
operation errors in `Operation.error.errors[]` with `errorDetails` (quotaInfo, errorInfo,
help, localizedMessage), `httpErrorStatusCode` and `httpErrorMessage`, as the reference
and the operations users have quoted show them:
  ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS] "The zone 'projects/P/zones/Z' does not have
  enough resources available to fulfill the request. ..." (503 SERVICE UNAVAILABLE);
  QUOTA_EXCEEDED "Quota 'CPUS' exceeded.  Limit: 8.0 in region us-central1." with
  quotaInfo {metricName compute.googleapis.com/cpus, limitName CPUS-per-project-region,
  dimensions {region}, limit} (403 FORBIDDEN), from the regional and project quotas the
  stand-in keeps (`quotas`, `project_quotas`), or scripted.
Which answer a bad reference gets follows what Google answers: an unknown zone is 400
"Invalid value for field 'zone': 'Z'. Unknown zone.", an unknown machine type in an insert
400 "Invalid value for field 'resource.machineType': ... Machine type with name 'T' does
not exist in zone 'Z'.", an unknown image or accelerator type 404 "The resource '...' was
not found" (machineTypes.get of an unknown type too). Also Google's: GPUs (an N1's
guestAccelerators or an accelerator-optimized type's own) need onHostMaintenance TERMINATE
(400 "Instances with guest accelerators do not support live migration."); spot defaults to
TERMINATE, automaticRestart false and instanceTerminationAction STOP; maxRunDuration or
terminationTime need an instanceTerminationAction; a delete while an operation runs on the
instance is 400 resourceNotReady; an image from the disk of a running instance needs
forceCreate=true (400 resourceInUseByAnotherResource); labels follow Google's rules.
Int64 fields are JSON strings both ways (the document's `format: int64`): a body with a
number there is a violation, although Google's parser would take it.

Knobs for tests (all under the stand-in's lock; set them before or during a test):
  fail_insert(code, zone=, machine_type=, times=)    the next matching inserts' operations
                                                     fail with that error (QUOTA_EXCEEDED:
                                                     metric=, limit=)
  fail_http(status, method=, times=, apply=)         answer the next calls with an HTTP error
                                                     (status 0: close the connection without
                                                     an answer); apply=True carries the call
                                                     out first, so only the answer is lost
  delay[method_id] = seconds                         answer that method late
  tokens = {"ya29..."}                               require `Authorization: Bearer` one of
                                                     them (401 without, 401 for another;
                                                     None: any token; require_auth=False:
                                                     none needed)
  deny = {"compute.instances.insert"}                403 "Required 'compute.instances.create'
                                                     permission for '...'"
  wait_early = N, wait_cap = seconds                 zoneOperations.wait behaviour
  timing = Timing(...)                               how long each state lasts
  quotas[region][metric] = limit, project_quotas     enforced on insert, reported with usage
  reservations[zone], future_reservations[zone]      Reservation / FutureReservation resources
                                                     the aggregated lists return (none)
  advance(seconds), preempt(zone, name), shutdown(zone, name), console(zone, name, text)
  request_window = seconds                           how long a requestId is remembered
  with_error_status = False                          errors without `status`, as older
                                                     Compute errors were sent
  networks = {"default", ...}                        networks and subnetworks that exist
  add_machine_type / add_accelerator / add_image / add_zone
Observations: `requests` (every call as `Seen`: method id, path, query, body, status,
authorized), `calls(method_id)`, `violations` (`take_violations()` for a test that breaks
the contract on purpose), `unserved`, `events` (lifecycle: created / running / stopping /
terminated / deleted / failed, with why: insert, delete, lifetime reached, preempted, guest
shutdown), `instance(zone, name)`, `instances()`, `disk(zone, name)`.
For tests of the stand-in itself: `Client` (plain HTTP) and `insert_body(name, ...)`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import fnmatch
import hashlib
import heapq
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.drivers.gcp.discovery import Contract, Method, load

PROJECT = "shoal-test"
TOKEN = "ya29.shoal-standin-token"  # what the `gce` fixture accepts as a bearer token
PROJECT_NUMBER = "123456789012"
GOOGLE = "https://compute.googleapis.com/compute/v1/"
_ALSO_GOOGLE = ("https://www.googleapis.com/compute/v1/", GOOGLE)
PACIFIC = timezone(timedelta(hours=-8))  # Google stamps resources in its own time zone
WAIT_LIMIT = 120.0  # zoneOperations.wait: "no more than the 2 minutes"
NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
HELP = "https://cloud.google.com/compute/docs/resource-error"
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
}
REASONS = {
    400: ("global", "invalid", "Invalid request."),
    401: ("global", "authError", "Invalid Credentials"),
    403: ("global", "forbidden", "Forbidden"),
    404: ("global", "notFound", "Not Found"),
    409: ("global", "alreadyExists", "Already Exists"),
    429: (
        "usageLimits",
        "rateLimitExceeded",
        "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute' of service "
        f"'compute.googleapis.com' for consumer 'project_number:{PROJECT_NUMBER}'.",
    ),
    500: ("global", "backendError", "Internal error. Please try again or contact Google."),
    503: ("global", "backendError", "The service is currently unavailable."),
}
HTTP_PHRASES = {403: "FORBIDDEN", 503: "SERVICE UNAVAILABLE", 400: "BAD REQUEST"}
POOL_CODES = ("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
# Accelerator type -> its quota metric (Quota.metric as regions.get reports it).
GPU_METRICS = {
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
    "nvidia-tesla-p4": "NVIDIA_P4_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
}
SHARED_CPU_SERIES = frozenset({"N1", "E2", "F1", "G1"})


# --- the catalog ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineTypeSpec:
    name: str
    cpus: int
    memory_mb: int
    accelerators: tuple[tuple[str, int], ...] = ()  # accelerator-optimized types' GPUs
    shared_cpu: bool = False
    zones: tuple[str, ...] | None = None  # None: every zone


@dataclass(frozen=True)
class AcceleratorSpec:
    name: str
    description: str
    max_cards: int
    zones: tuple[str, ...] | None = None


def _mt(name: str, cpus: int, gib: float, gpu: tuple[str, int] | None = None) -> MachineTypeSpec:
    return MachineTypeSpec(name, cpus, int(gib * 1024), (gpu,) if gpu else ())


MACHINE_TYPES = (
    MachineTypeSpec("e2-micro", 2, 1024, shared_cpu=True),
    MachineTypeSpec("e2-medium", 2, 4096, shared_cpu=True),
    _mt("e2-standard-2", 2, 8),
    _mt("e2-standard-4", 4, 16),
    _mt("e2-standard-8", 8, 32),
    _mt("e2-highmem-4", 4, 32),
    _mt("n1-standard-1", 1, 3.75),
    _mt("n1-standard-4", 4, 15),
    _mt("n1-standard-8", 8, 30),
    _mt("n2-standard-2", 2, 8),
    _mt("n2-standard-8", 8, 32),
    _mt("n2-highmem-8", 8, 64),
    _mt("c2-standard-8", 8, 32),
    _mt("g2-standard-4", 4, 16, ("nvidia-l4", 1)),
    _mt("g2-standard-8", 8, 32, ("nvidia-l4", 1)),
    _mt("a2-highgpu-1g", 12, 85, ("nvidia-tesla-a100", 1)),
    _mt("a2-ultragpu-1g", 12, 170, ("nvidia-a100-80gb", 1)),
    _mt("a3-highgpu-8g", 208, 1872, ("nvidia-h100-80gb", 8)),
)
ACCELERATORS = (
    AcceleratorSpec("nvidia-tesla-t4", "NVIDIA T4", 4),
    AcceleratorSpec("nvidia-tesla-v100", "NVIDIA V100", 8),
    AcceleratorSpec("nvidia-l4", "NVIDIA L4", 8),
    AcceleratorSpec("nvidia-tesla-a100", "NVIDIA A100 40GB", 16),
    AcceleratorSpec("nvidia-a100-80gb", "NVIDIA A100 80GB", 8),
    AcceleratorSpec("nvidia-h100-80gb", "NVIDIA H100 80GB", 8),
)
ZONES = {
    "us-central1": ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"),
    "europe-west4": ("europe-west4-a", "europe-west4-b", "europe-west4-c"),
}
DEFAULT_QUOTAS = {
    "CPUS": 500.0,
    "PREEMPTIBLE_CPUS": 500.0,
    "N2_CPUS": 500.0,
    "C2_CPUS": 500.0,
    "A2_CPUS": 96.0,
    "NVIDIA_T4_GPUS": 8.0,
    "NVIDIA_V100_GPUS": 8.0,
    "NVIDIA_L4_GPUS": 8.0,
    "NVIDIA_A100_GPUS": 8.0,
    "NVIDIA_A100_80GB_GPUS": 8.0,
    "PREEMPTIBLE_NVIDIA_T4_GPUS": 8.0,
    "PREEMPTIBLE_NVIDIA_L4_GPUS": 8.0,
    "PREEMPTIBLE_NVIDIA_A100_GPUS": 8.0,
    "PREEMPTIBLE_NVIDIA_H100_GPUS": 16.0,
    "INSTANCES": 1000.0,
    "DISKS_TOTAL_GB": 40960.0,
}
DEFAULT_PROJECT_QUOTAS = {
    "CPUS_ALL_REGIONS": 1000.0,
    "GPUS_ALL_REGIONS": 32.0,
    "IMAGES": 1000.0,
    "SNAPSHOTS": 1000.0,
}
PUBLIC_IMAGES = (
    ("debian-cloud", "debian-12-bookworm-v20261015", "debian-12", 10),  # older first:
    ("debian-cloud", "debian-12-bookworm-v20261111", "debian-12", 10),  # a family's newest wins
    ("debian-cloud", "debian-11-bullseye-v20261111", "debian-11", 10),
    ("ubuntu-os-cloud", "ubuntu-2204-jammy-v20261105", "ubuntu-2204-lts", 10),
    ("deeplearning-platform-release", "common-cu124-v20261101-debian-11", "common-cu124", 50),
)


@dataclass
class Timing:
    """Seconds on the stand-in's clock each state lasts."""

    pending: float = 0.05  # an operation PENDING before it runs
    provision: float = 0.1  # an instance PROVISIONING
    stage: float = 0.1  # STAGING, until RUNNING (and its insert operation DONE)
    stop: float = 0.1  # STOPPING, until gone or TERMINATED
    snapshot: float = 0.1
    image: float = 0.2


@dataclass
class InsertFault:
    code: str
    zone: str | None = None
    machine_type: str | None = None
    times: int | None = 1  # None: every matching insert
    message: str | None = None
    metric: str = "CPUS"  # QUOTA_EXCEEDED
    limit: float = 0.0


@dataclass
class HttpFault:
    status: int  # 0: close the connection with no answer
    method: str = "*"
    times: int = 1
    apply: bool = False
    message: str | None = None
    retry_after: int | None = None


@dataclass
class Seen:
    method: str  # compute.instances.insert ("" when nothing matched)
    http_method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    status: int = 0
    authorized: bool = False


@dataclass
class Op:
    resource: dict[str, Any]
    project: str
    zone: str | None  # None: a global operation
    done: threading.Event = field(default_factory=threading.Event)


@dataclass
class Inst:
    project: str
    zone: str
    resource: dict[str, Any]
    machine: MachineTypeSpec
    spot: bool
    visible: bool = False
    gone: bool = False
    busy: bool = True  # an operation is under way on it (insert, delete)
    deleting: bool = False
    console: bytearray = field(default_factory=bytearray)
    console_dropped: int = 0
    disks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return str(self.resource["name"])

    @property
    def status(self) -> str:
        return str(self.resource["status"])


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        reason: str | None = None,
        *,
        domain: str = "global",
        location: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason or REASONS.get(status, ("global", "error", ""))[1]
        self.domain = domain
        self.location = location
        self.headers = headers or {}


def error_body(error: ApiError, with_status: bool = True) -> dict[str, Any]:
    item: dict[str, Any] = {
        "message": error.message,
        "domain": error.domain,
        "reason": error.reason,
    }
    if error.location:
        item["locationType"] = "header" if error.location == "Authorization" else "parameter"
        item["location"] = error.location
    out: dict[str, Any] = {"code": error.status, "message": error.message, "errors": [item]}
    if with_status and error.status in STATUS_NAMES:
        out["status"] = STATUS_NAMES[error.status]
    return {"error": out}


def not_found(path: str) -> ApiError:
    return ApiError(404, f"The resource '{path}' was not found")


def invalid_field(name: str, value: Any, why: str) -> ApiError:
    return ApiError(400, f"Invalid value for field '{name}': '{value}'. {why}")


class _Drop(Exception):
    """Close the connection without an answer."""


# --- the stand-in --------------------------------------------------------------------------


class ComputeStandin:
    def __init__(
        self,
        project: str = PROJECT,
        *,
        timing: Timing | None = None,
        contract: Contract | None = None,
    ) -> None:
        self.contract = contract or load()
        self.project = project
        self.timing = timing or Timing()
        self.wait_cap = WAIT_LIMIT
        self.wait_early = 0
        self.request_window = 3600.0
        self.require_auth = True  # Google answers 401 to a call without credentials
        self.tokens: set[str] | None = None  # None: any bearer token is accepted
        self.deny: set[str] = set()
        self.delay: dict[str, float] = {}
        self.with_error_status = True  # Google's newer errors carry `status`; older ones don't
        self.requests: list[Seen] = []
        self.violations: list[str] = []
        self.unserved: list[str] = []
        self.events: list[tuple[str, str, str]] = []  # (what, zone/name, why)
        self.insert_faults: list[InsertFault] = []
        self.http_faults: list[HttpFault] = []
        self.regions: dict[str, list[str]] = {r: list(z) for r, z in ZONES.items()}
        self.zone_status: dict[str, str] = {}
        self.machine_types: dict[str, MachineTypeSpec] = {m.name: m for m in MACHINE_TYPES}
        self.accelerators: dict[str, AcceleratorSpec] = {a.name: a for a in ACCELERATORS}
        self.quotas: dict[str, dict[str, float]] = {r: dict(DEFAULT_QUOTAS) for r in ZONES}
        self.project_quotas: dict[str, float] = dict(DEFAULT_PROJECT_QUOTAS)
        # zone -> Reservation / FutureReservation resources, listed as given (none by default)
        self.reservations: dict[str, list[dict[str, Any]]] = {}
        self.future_reservations: dict[str, list[dict[str, Any]]] = {}
        self.networks: set[str] = {"default"}
        self.lock = threading.Condition(threading.RLock())
        self._ids = itertools.count(1)
        self._wall0 = time.time()
        self._mono0 = time.monotonic()
        self._offset = 0.0
        self._events: list[tuple[float, int, Callable[[float], None]]] = []
        self._instances: list[Inst] = []
        self._disks: dict[tuple[str, str, str], dict[str, Any]] = {}  # (project, zone, name)
        self._images: dict[tuple[str, str], dict[str, Any]] = {}
        self._snapshots: dict[tuple[str, str], dict[str, Any]] = {}
        self._ops: dict[tuple[str, str | None, str], Op] = {}
        self._request_ids: dict[tuple[str, str], tuple[float, Op]] = {}
        self._server = _Server(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        for project_, name, family, size in PUBLIC_IMAGES:
            self.add_image(project_, name, family=family, disk_size_gb=size)
        self.handlers: dict[str, Callable[[dict[str, str], dict[str, str], Any], Any]] = {
            "compute.instances.insert": self._instances_insert,
            "compute.instances.get": self._instances_get,
            "compute.instances.list": self._instances_list,
            "compute.instances.aggregatedList": self._instances_aggregated,
            "compute.instances.delete": self._instances_delete,
            "compute.instances.getSerialPortOutput": self._serial,
            "compute.zoneOperations.get": self._op_get,
            "compute.zoneOperations.wait": self._op_wait,
            "compute.zoneOperations.list": self._op_list,
            "compute.globalOperations.get": self._op_get,
            "compute.globalOperations.wait": self._op_wait,
            "compute.disks.get": self._disks_get,
            "compute.disks.list": self._disks_list,
            "compute.disks.aggregatedList": self._disks_aggregated,
            "compute.disks.createSnapshot": self._create_snapshot,
            "compute.snapshots.get": self._snapshots_get,
            "compute.snapshots.list": self._snapshots_list,
            "compute.images.insert": self._images_insert,
            "compute.images.get": self._images_get,
            "compute.images.getFromFamily": self._images_family,
            "compute.images.list": self._images_list,
            "compute.imageFamilyViews.get": self._image_family_view,
            "compute.machineTypes.get": self._mt_get,
            "compute.machineTypes.list": self._mt_list,
            "compute.machineTypes.aggregatedList": self._mt_aggregated,
            "compute.acceleratorTypes.get": self._at_get,
            "compute.acceleratorTypes.list": self._at_list,
            "compute.acceleratorTypes.aggregatedList": self._at_aggregated,
            "compute.zones.get": self._zones_get,
            "compute.zones.list": self._zones_list,
            "compute.regions.get": self._regions_get,
            "compute.regions.list": self._regions_list,
            "compute.projects.get": self._projects_get,
            "compute.reservations.aggregatedList": self._reservations_aggregated,
            "compute.futureReservations.aggregatedList": self._future_aggregated,
        }

    # --- life of the server

    def __enter__(self) -> ComputeStandin:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def endpoint(self) -> str:
        """What a client sets as its Compute endpoint (gcloud's api_endpoint_overrides)."""
        return f"{self.base}/compute/v1/"

    def link(self, path: str) -> str:
        """A selfLink: on the stand-in, so a client that follows links stays on loopback."""
        return self.endpoint + path

    # --- the clock

    def now(self) -> float:
        return self._wall0 + (time.monotonic() - self._mono0) + self._offset

    def advance(self, seconds: float) -> None:
        """Move the stand-in's clock on: lifetimes end, operations finish, at their times."""
        with self.lock:
            self._offset += seconds
            self._tick()
            self.lock.notify_all()

    def _at(self, when: float, action: Callable[[float], None]) -> None:
        heapq.heappush(self._events, (when, next(self._ids), action))

    def _tick(self) -> None:
        now = self.now()
        ran = False
        while self._events and self._events[0][0] <= now:
            when, _, action = heapq.heappop(self._events)
            action(when)
            ran = True
        if ran:
            self.lock.notify_all()

    # --- knobs

    def fail_insert(
        self,
        code: str,
        *,
        zone: str | None = None,
        machine_type: str | None = None,
        times: int | None = 1,
        message: str | None = None,
        metric: str = "CPUS",
        limit: float = 0.0,
    ) -> None:
        with self.lock:
            self.insert_faults.append(
                InsertFault(code, zone, machine_type, times, message, metric, limit)
            )

    def fail_http(
        self,
        status: int,
        *,
        method: str = "*",
        times: int = 1,
        apply: bool = False,
        message: str | None = None,
        retry_after: int | None = None,
    ) -> None:
        with self.lock:
            self.http_faults.append(HttpFault(status, method, times, apply, message, retry_after))

    def add_zone(self, region: str, zone: str, status: str = "UP") -> None:
        with self.lock:
            self.regions.setdefault(region, []).append(zone)
            self.quotas.setdefault(region, dict(DEFAULT_QUOTAS))
            self.zone_status[zone] = status

    def add_machine_type(self, spec: MachineTypeSpec) -> None:
        with self.lock:
            self.machine_types[spec.name] = spec

    def add_accelerator(self, spec: AcceleratorSpec) -> None:
        with self.lock:
            self.accelerators[spec.name] = spec

    def add_image(
        self,
        project: str,
        name: str,
        *,
        family: str | None = None,
        disk_size_gb: int = 10,
        status: str = "READY",
        labels: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        with self.lock:
            image: dict[str, Any] = {
                "kind": "compute#image",
                "id": self._id(),
                "creationTimestamp": self._stamp(self.now() - 86400 + len(self._images)),
                "name": name,
                "sourceType": "RAW",
                "status": status,
                "archiveSizeBytes": str(disk_size_gb * 120_000_000),
                "diskSizeGb": str(disk_size_gb),
                "licenses": [self.link(f"projects/{project}/global/licenses/{name.split('-')[0]}")],
                "selfLink": self.link(f"projects/{project}/global/images/{name}"),
                "labelFingerprint": _fingerprint({}),
                "storageLocations": ["us"],
                "architecture": "X86_64",
            }
            if family:
                image["family"] = family
            if labels:
                image["labels"] = dict(labels)
                image["labelFingerprint"] = _fingerprint(labels)
            self._images[(project, name)] = image
            return image

    def preempt(self, zone: str, name: str) -> None:
        """Google reclaims a spot VM: a `compute.instances.preempted` system operation, then
        the instance is stopped or deleted as its instanceTerminationAction says."""
        with self.lock:
            self._tick()
            inst = self._find(self.project, zone, name)
            if not inst.spot:
                raise ValueError(f"{zone}/{name} is not a spot VM: Google preempts only those")
            action = inst.resource.get("scheduling", {}).get("instanceTerminationAction", "STOP")
            now = self.now()
            op = self._new_op(
                "compute.instances.preempted",
                self.project,
                zone,
                inst.resource["selfLink"],
                inst.resource["id"],
                user="system",
            )
            self._set_op(op, "DONE", now, status_message="Instance was preempted.")
            self._stop(inst, now, "DELETE" if action == "DELETE" else "STOP", "preempted")

    def shutdown(self, zone: str, name: str) -> None:
        """The guest powers itself off (`shutdown -h now` inside): TERMINATED."""
        with self.lock:
            self._tick()
            inst = self._find(self.project, zone, name)
            self._stop(inst, self.now(), "STOP", "guest shutdown")

    def console(self, zone: str, name: str, text: str) -> None:
        """Append to an instance's serial port 1 (what its startup script would print)."""
        with self.lock:
            self._tick()
            self._write_console(self._find(self.project, zone, name), text)

    def instance(self, zone: str, name: str) -> dict[str, Any] | None:
        """The instance as instances.get would answer now, or None when there is none."""
        with self.lock:
            self._tick()
            found = self._lookup(self.project, zone, name)
            return copy.deepcopy(found.resource) if found else None

    def instances(self) -> list[dict[str, Any]]:
        with self.lock:
            self._tick()
            return [copy.deepcopy(i.resource) for i in self._live()]

    def disk(self, zone: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            self._tick()
            found = self._disks.get((self.project, zone, name))
            return copy.deepcopy(found) if found else None

    def calls(self, method: str) -> list[Seen]:
        with self.lock:
            return [s for s in self.requests if s.method == method]

    def take_violations(self) -> list[str]:
        """The violations so far, forgotten: for a test that sends a bad request on purpose."""
        with self.lock:
            out, self.violations = self.violations, []
            return out

    # --- helpers

    def _id(self) -> str:
        return str(7_000_000_000_000_000_000 + next(self._ids) * 7919)

    def _stamp(self, when: float) -> str:
        return datetime.fromtimestamp(when, PACIFIC).isoformat(timespec="milliseconds")

    def _region_of(self, zone: str) -> str:
        for region, zones in self.regions.items():
            if zone in zones:
                return region
        raise invalid_field("zone", zone, "Unknown zone.")

    def _check_project(self, project: str) -> None:
        if project != self.project:
            raise not_found(f"projects/{project}")

    def _check_zone(self, project: str, zone: str) -> str:
        self._check_project(project)
        return self._region_of(zone)

    def _live(self) -> Iterator[Inst]:
        return (i for i in self._instances if i.visible and not i.gone)

    def _lookup(self, project: str, zone: str, name: str) -> Inst | None:
        for inst in self._live():
            if (inst.project, inst.zone) == (project, zone) and name in (
                inst.name,
                inst.resource["id"],
            ):
                return inst
        return None

    def _find(self, project: str, zone: str, name: str) -> Inst:
        inst = self._lookup(project, zone, name)
        if inst is None:
            raise not_found(f"projects/{project}/zones/{zone}/instances/{name}")
        return inst

    def _ref(self, value: str, project: str) -> str:
        """A full or partial URL as the API takes them -> "projects/P/...". Raises when the
        URL points at another host."""
        for prefix in (*_ALSO_GOOGLE, self.endpoint):
            if value.startswith(prefix):
                return value[len(prefix) :]
        if value.startswith(("http://", "https://")):
            raise ValueError(value)
        if value.startswith("projects/"):
            return value
        return f"projects/{project}/{value}"

    # --- operations

    def _new_op(
        self,
        op_type: str,
        project: str,
        zone: str | None,
        target: str,
        target_id: str,
        *,
        user: str = "shoal-test@shoal-test.iam.gserviceaccount.com",
    ) -> Op:
        now = self.now()
        serial = next(self._ids)
        name = (
            f"operation-{int(now * 1000)}-{serial:013x}-"
            f"{hashlib.sha1(str(serial).encode()).hexdigest()[:8]}-"
            f"{hashlib.sha1(target.encode()).hexdigest()[:8]}"
        )
        scope = f"projects/{project}/zones/{zone}" if zone else f"projects/{project}/global"
        resource: dict[str, Any] = {
            "kind": "compute#operation",
            "id": self._id(),
            "name": name,
            "operationType": op_type,
            "targetLink": target,
            "targetId": target_id,
            "status": "PENDING",
            "user": user,
            "progress": 0,
            "insertTime": self._stamp(now),
            "selfLink": self.link(f"{scope}/operations/{name}"),
        }
        if zone:
            resource["zone"] = self.link(f"projects/{project}/zones/{zone}")
        op = Op(resource, project, zone)
        self._ops[(project, zone, name)] = op
        return op

    def _set_op(
        self,
        op: Op,
        status: str,
        when: float,
        *,
        error: dict[str, Any] | None = None,
        http: int = 0,
        status_message: str | None = None,
    ) -> None:
        res = op.resource
        res["status"] = status
        if status in ("RUNNING", "DONE") and "startTime" not in res:
            res["startTime"] = self._stamp(when)
        if status == "DONE":
            res["endTime"] = self._stamp(when)
            res["progress"] = 100
            op.done.set()
        if error is not None:
            res["error"] = {"errors": [error]}
            res["httpErrorStatusCode"] = http
            res["httpErrorMessage"] = HTTP_PHRASES.get(http, "ERROR")
        if status_message:
            res["statusMessage"] = status_message

    def _dedup(self, project: str, query: dict[str, str]) -> Op | None:
        request_id = query.get("requestId")
        if request_id is None:
            return None
        try:
            parsed = uuid.UUID(request_id)
        except ValueError:
            parsed = None
        if parsed is None or parsed.int == 0:
            raise invalid_field(
                "requestId",
                request_id,
                "The request ID must be a valid UUID with the "
                "exception that zero UUID is not supported (00000000-0000-0000-0000-000000000000).",
            )
        seen = self._request_ids.get((project, request_id))
        if seen is not None and self.now() - seen[0] <= self.request_window:
            return seen[1]
        return None

    def _remember(self, project: str, query: dict[str, str], op: Op) -> None:
        if "requestId" in query:
            self._request_ids[(project, query["requestId"])] = (self.now(), op)

    # --- instances.insert

    def _instances_insert(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone = p["project"], p["zone"]
        region = self._check_zone(project, zone)
        again = self._dedup(project, q)
        if again is not None:
            return again.resource
        name = body.get("name", "")
        if not NAME.fullmatch(name):
            raise invalid_field(
                "resource.name",
                name,
                "Must be a match of regex '(?:[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?|[1-9][0-9]{0,19})'",
            )
        if any(
            i.project == project and i.zone == zone and i.name == name
            for i in self._instances
            if not i.gone
        ):
            raise ApiError(
                409,
                f"The resource 'projects/{project}/zones/{zone}/instances/{name}' already exists",
            )
        machine = self._machine_for_insert(project, zone, body.get("machineType", ""))
        labels = self._labels("resource.labels", body.get("labels", {}))
        metadata = self._metadata(body.get("metadata", {}))
        scheduling, spot = self._scheduling(body.get("scheduling", {}))
        accelerators = self._accelerators_for(project, zone, machine, body)
        if accelerators and scheduling["onHostMaintenance"] != "TERMINATE":
            raise ApiError(400, "Instances with guest accelerators do not support live migration.")
        nics = self._nics(project, region, body.get("networkInterfaces", []))
        disks_in = body.get("disks", [])
        planned = self._plan_disks(project, zone, name, disks_in)
        now = self.now()
        iid = self._id()
        link = self.link(f"projects/{project}/zones/{zone}/instances/{name}")
        resource: dict[str, Any] = {
            "kind": "compute#instance",
            "id": iid,
            "creationTimestamp": self._stamp(now),
            "name": name,
            "tags": {"fingerprint": _fingerprint(body.get("tags", {}))},
            "machineType": self.link(
                f"projects/{project}/zones/{zone}/machineTypes/{machine.name}"
            ),
            "status": "PROVISIONING",
            "zone": self.link(f"projects/{project}/zones/{zone}"),
            "canIpForward": bool(body.get("canIpForward", False)),
            "networkInterfaces": nics,
            "disks": [],
            "metadata": metadata,
            "serviceAccounts": self._service_accounts(body.get("serviceAccounts", [])),
            "selfLink": link,
            "scheduling": scheduling,
            "cpuPlatform": "Unknown CPU Platform",
            "labelFingerprint": _fingerprint(labels),
            "startRestricted": False,
            "deletionProtection": bool(body.get("deletionProtection", False)),
            "fingerprint": _fingerprint({"name": name, "t": now}),
        }
        for key in ("description", "hostname", "minCpuPlatform"):
            if key in body:
                resource[key] = body[key]
        if "items" in body.get("tags", {}):
            resource["tags"]["items"] = list(body["tags"]["items"])
        if labels:
            resource["labels"] = labels
        if accelerators:
            resource["guestAccelerators"] = accelerators
        inst = Inst(project, zone, resource, machine, spot)
        op = self._new_op("insert", project, zone, link, iid)
        self._remember(project, q, op)
        failure = self._insert_failure(inst, region)
        self._instances.append(inst)
        timing = self.timing

        def start(when: float) -> None:
            if failure is not None and failure[0]["code"] == "QUOTA_EXCEEDED":
                inst.gone = True
                self._set_op(op, "DONE", when, error=failure[0], http=failure[1])
                self.events.append(("failed", f"{zone}/{name}", failure[0]["code"]))
                return
            inst.visible = True
            self._set_op(op, "RUNNING", when)
            for attached in planned:
                attached_disk, disk = attached
                disk["status"] = "CREATING"
                self._disks[(project, zone, disk["name"])] = disk
                inst.disks.append(disk)
                resource["disks"].append(attached_disk)
            self.events.append(("created", f"{zone}/{name}", "insert"))
            self._at(when + timing.provision, staging)

        def staging(when: float) -> None:
            if inst.gone:
                return
            if failure is not None:
                self._remove(inst, when, "insert failed", all_disks=True)
                self._set_op(op, "DONE", when, error=failure[0], http=failure[1])
                self.events.append(("failed", f"{zone}/{name}", failure[0]["code"]))
                return
            resource["status"] = "STAGING"
            op.resource["progress"] = 50
            for disk in inst.disks:
                disk["status"] = "READY"
                disk["lastAttachTimestamp"] = self._stamp(when)
            for nic in resource["networkInterfaces"]:
                for access in nic.get("accessConfigs", []):
                    access["natIP"] = f"203.0.113.{next(self._ids) % 250 + 1}"
            self._at(when + timing.stage, running)

        def running(when: float) -> None:
            if inst.gone:
                return
            resource["status"] = "RUNNING"
            resource["cpuPlatform"] = "Intel Cascade Lake"
            resource["lastStartTimestamp"] = self._stamp(when)
            inst.busy = False
            self._set_op(op, "DONE", when)
            self._boot_console(inst)
            self.events.append(("running", f"{zone}/{name}", "insert"))
            deadline = self._deadline(scheduling, when)
            if deadline is not None:
                action = scheduling.get("instanceTerminationAction", "STOP")
                self._at(deadline, lambda t: self._lifetime(inst, t, action))

        self._at(now + timing.pending, start)
        return op.resource

    def _machine_for_insert(self, project: str, zone: str, value: str) -> MachineTypeSpec:
        field_ = "resource.machineType"
        if not value:
            raise invalid_field(
                field_, value, "Must be a URL to a valid Compute resource of the correct type."
            )
        try:
            ref = self._ref(value, project)
        except ValueError:
            raise invalid_field(
                field_, value, "Must be a URL to a valid Compute resource of the correct type."
            ) from None
        match = re.fullmatch(r"projects/([^/]+)/zones/([^/]+)/machineTypes/([^/]+)", ref)
        if not match or "/" not in value:
            raise invalid_field(
                field_, value, "Must be a URL to a valid Compute resource of the correct type."
            )
        if match.group(2) != zone:
            raise invalid_field(field_, value, f"Machine type must be in zone '{zone}'.")
        name = match.group(3)
        spec = self.machine_types.get(name)
        if spec is None or (spec.zones is not None and zone not in spec.zones):
            raise invalid_field(
                field_, value, f"Machine type with name '{name}' does not exist in zone '{zone}'."
            )
        return spec

    def _labels(self, where: str, labels: dict[str, str]) -> dict[str, str]:
        if len(labels) > 64:
            raise invalid_field(where, "", "Resource cannot have more than 64 labels.")
        for key, value in labels.items():
            if not LABEL_KEY.fullmatch(key):
                raise invalid_field(
                    where,
                    "",
                    f"Label key '{key}' violates format constraints. "
                    "The key must start with a lowercase character, can only "
                    "contain lowercase letters, numeric characters, underscores "
                    "and dashes. The key can be at most 63 characters long. "
                    "International characters are allowed.",
                )
            if not LABEL_VALUE.fullmatch(value):
                raise invalid_field(
                    where,
                    "",
                    f"Label value '{value}' violates format "
                    "constraints. The value can only contain lowercase letters, "
                    "numeric characters, underscores and dashes. The value can "
                    "be at most 63 characters long. International characters "
                    "are allowed.",
                )
        return dict(labels)

    def _metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        items = metadata.get("items", [])
        keys = [i["key"] for i in items]
        duplicate = next((k for k in keys if keys.count(k) > 1), None)
        if duplicate:
            raise invalid_field("resource.metadata", "", f"Duplicate metadata key '{duplicate}'.")
        for item in items:
            if len(item.get("value", "").encode()) > 262144:
                raise invalid_field(
                    f"resource.metadata.items[{keys.index(item['key'])}].value",
                    "",
                    "Metadata value exceeds 256 KiB.",
                )
        if sum(len(i["key"]) + len(i.get("value", "").encode()) for i in items) > 524288:
            raise invalid_field("resource.metadata", "", "Metadata exceeds 512 KB in total.")
        out: dict[str, Any] = {"kind": "compute#metadata", "fingerprint": _fingerprint(items)}
        if items:
            out["items"] = [dict(i) for i in items]
        return out

    def _scheduling(self, given: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        out = dict(given)
        spot = given.get("provisioningModel") == "SPOT" or bool(given.get("preemptible"))
        where = "resource.scheduling"
        if spot:
            if given.get("onHostMaintenance", "TERMINATE") != "TERMINATE":
                raise invalid_field(
                    f"{where}.onHostMaintenance",
                    given["onHostMaintenance"],
                    "Scheduling must have preemptible be false when "
                    "OnHostMaintenance isn't TERMINATE.",
                )
            if given.get("automaticRestart", False):
                raise invalid_field(
                    f"{where}.automaticRestart",
                    "true",
                    "Scheduling must have preemptible be false when AutomaticRestart is true.",
                )
            out.setdefault("onHostMaintenance", "TERMINATE")
            out.setdefault("automaticRestart", False)
            out.setdefault("instanceTerminationAction", "STOP")
        out.setdefault("onHostMaintenance", "MIGRATE")
        out.setdefault("automaticRestart", True)
        out.setdefault("preemptible", False)
        out.setdefault("provisioningModel", "STANDARD")
        duration, until = given.get("maxRunDuration"), given.get("terminationTime")
        if duration is not None and until is not None:
            raise invalid_field(
                f"{where}.terminationTime",
                until,
                "Only one of maxRunDuration and terminationTime can be specified.",
            )
        if (duration is not None or until is not None) and given.get(
            "instanceTerminationAction", "INSTANCE_TERMINATION_ACTION_UNSPECIFIED"
        ) == "INSTANCE_TERMINATION_ACTION_UNSPECIFIED":
            raise invalid_field(
                f"{where}.instanceTerminationAction",
                "",
                "An instance "
                "termination action must be specified with maxRunDuration or "
                "terminationTime.",
            )
        if duration is not None:
            seconds = int(duration.get("seconds", "0"))
            if not 30 <= seconds <= 120 * 86400:
                raise invalid_field(
                    f"{where}.maxRunDuration.seconds",
                    seconds,
                    "The max run duration must be between 30 seconds and 120 days.",
                )
        if until is not None:
            try:
                when = datetime.fromisoformat(until.replace("Z", "+00:00"))
            except ValueError:
                raise invalid_field(
                    f"{where}.terminationTime", until, "Must be RFC 3339."
                ) from None
            if when.tzinfo is None or when.timestamp() <= self.now():
                raise invalid_field(
                    f"{where}.terminationTime", until, "The termination time must be in the future."
                )
        return out, spot

    def _deadline(self, scheduling: dict[str, Any], running_at: float) -> float | None:
        if "maxRunDuration" in scheduling:
            duration = scheduling["maxRunDuration"]
            nanos: int = duration.get("nanos", 0)
            return running_at + int(duration.get("seconds", "0")) + nanos / 1e9
        if "terminationTime" in scheduling:
            text = scheduling["terminationTime"].replace("Z", "+00:00")
            return datetime.fromisoformat(text).timestamp()
        return None

    def _accelerators_for(
        self, project: str, zone: str, machine: MachineTypeSpec, body: dict[str, Any]
    ) -> list[dict[str, Any]]:
        given = body.get("guestAccelerators", [])
        if given and machine.accelerators:
            raise invalid_field(
                "resource.guestAccelerators",
                "",
                f"Machine type '{machine.name}' already has accelerators attached.",
            )
        out = []
        for i, item in enumerate(given):
            value = item.get("acceleratorType", "")
            try:
                ref = self._ref(value, project)
            except ValueError:
                ref = ""
            match = re.fullmatch(r"projects/[^/]+/zones/([^/]+)/acceleratorTypes/([^/]+)", ref)
            if not match or "/" not in value:
                raise invalid_field(
                    f"resource.guestAccelerators[{i}].acceleratorType",
                    value,
                    "Must be a URL to a valid Compute resource of the correct type.",
                )
            spec = self.accelerators.get(match.group(2))
            if (
                spec is None
                or match.group(1) != zone
                or (spec.zones is not None and zone not in spec.zones)
            ):
                raise not_found(
                    f"projects/{project}/zones/{match.group(1)}/acceleratorTypes/{match.group(2)}"
                )
            count = item.get("acceleratorCount", 0)
            if not 1 <= count <= spec.max_cards:
                raise invalid_field(
                    f"resource.guestAccelerators[{i}].acceleratorCount",
                    count,
                    f"Must be between 1 and {spec.max_cards}.",
                )
            if not machine.name.startswith("n1-"):
                raise invalid_field(
                    f"resource.guestAccelerators[{i}].acceleratorType",
                    value,
                    f"Accelerator type '{spec.name}' cannot be attached to "
                    f"machine type '{machine.name}'.",
                )
            out.append((spec.name, count))
        out += list(machine.accelerators)
        return [
            {
                "acceleratorType": self.link(
                    f"projects/{project}/zones/{zone}/acceleratorTypes/{kind}"
                ),
                "acceleratorCount": count,
            }
            for kind, count in out
        ]

    def _nics(self, project: str, region: str, given: list[dict[str, Any]]) -> list[Any]:
        if not given:
            raise invalid_field(
                "resource.networkInterfaces", "", "At least one network interface is required."
            )
        out = []
        for i, nic in enumerate(given):
            network = nic.get(
                "network", "global/networks/default" if "subnetwork" not in nic else ""
            )
            subnet = nic.get("subnetwork", "")
            net_name = network.rsplit("/", 1)[-1] if network else "default"
            if network and net_name not in self.networks:
                raise not_found(f"projects/{project}/global/networks/{net_name}")
            sub_name = subnet.rsplit("/", 1)[-1] if subnet else net_name
            if subnet and sub_name not in self.networks:
                raise not_found(f"projects/{project}/regions/{region}/subnetworks/{sub_name}")
            out_nic: dict[str, Any] = {
                "kind": "compute#networkInterface",
                "network": self.link(f"projects/{project}/global/networks/{net_name}"),
                "subnetwork": self.link(
                    f"projects/{project}/regions/{region}/subnetworks/{sub_name}"
                ),
                "networkIP": f"10.128.0.{next(self._ids) % 250 + 2}",
                "name": f"nic{i}",
                "fingerprint": _fingerprint(nic),
                "stackType": nic.get("stackType", "IPV4_ONLY"),
            }
            access = [
                {
                    "kind": "compute#accessConfig",
                    "type": a.get("type", "ONE_TO_ONE_NAT"),
                    "name": a.get("name", "External NAT"),
                    "networkTier": a.get("networkTier", "PREMIUM"),
                }
                for a in nic.get("accessConfigs", [])
            ]
            if access:
                out_nic["accessConfigs"] = access
            out.append(out_nic)
        return out

    def _service_accounts(self, given: list[dict[str, Any]]) -> list[dict[str, Any]]:
        default = f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com"
        return [
            {
                "email": default if a.get("email", "default") == "default" else a["email"],
                "scopes": list(a.get("scopes", [])),
            }
            for a in given
        ]

    def _plan_disks(
        self, project: str, zone: str, name: str, disks: list[dict[str, Any]]
    ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(attached disk, disk) for each disk of an insert. A disk's labels are its own
        (initializeParams.labels): Google copies none from the instance."""
        if not any(d.get("boot") for d in disks):
            raise invalid_field("resource.disks", "", "Boot disk must be specified.")
        out = []
        for i, given in enumerate(disks):
            where = f"resource.disks[{i}]"
            params = given.get("initializeParams")
            if params is None:
                raise invalid_field(
                    f"{where}.source",
                    given.get("source", ""),
                    "Attaching an existing disk is not supported by this stand-in.",
                )
            image = None
            if "sourceImage" in params:
                image = self._resolve_image(project, params["sourceImage"])
            elif given.get("boot"):
                raise invalid_field(
                    f"{where}.initializeParams.sourceImage",
                    "",
                    "Boot disk must have a source image or snapshot.",
                )
            disk_name = params.get("diskName", name if i == 0 else f"{name}-{i}")
            if (project, zone, disk_name) in self._disks:
                raise ApiError(
                    409,
                    f"The resource 'projects/{project}/zones/{zone}/disks/"
                    f"{disk_name}' already exists",
                )
            image_size = int(image["diskSizeGb"]) if image else 0
            size = int(params.get("diskSizeGb", str(image_size or 10)))
            if size < image_size:
                raise invalid_field(
                    f"{where}.initializeParams.diskSizeGb",
                    size,
                    f"Requested disk size cannot be smaller than the image size ({image_size} GB)",
                )
            labels = self._labels(f"{where}.initializeParams.labels", params.get("labels", {}))
            disk_type = params.get("diskType", f"zones/{zone}/diskTypes/pd-standard")
            disk_link = self.link(f"projects/{project}/zones/{zone}/disks/{disk_name}")
            disk: dict[str, Any] = {
                "kind": "compute#disk",
                "id": self._id(),
                "creationTimestamp": self._stamp(self.now()),
                "name": disk_name,
                "sizeGb": str(size),
                "zone": self.link(f"projects/{project}/zones/{zone}"),
                "status": "CREATING",
                "selfLink": disk_link,
                "type": self.link(
                    f"projects/{project}/zones/{zone}/diskTypes/{disk_type.rsplit('/', 1)[-1]}"
                ),
                "users": [self.link(f"projects/{project}/zones/{zone}/instances/{name}")],
                "labelFingerprint": _fingerprint(labels),
                "physicalBlockSizeBytes": "4096",
                "architecture": "X86_64",
            }
            if image is not None:
                disk["sourceImage"] = image["selfLink"]
                disk["sourceImageId"] = image["id"]
            if labels:
                disk["labels"] = labels
            attached: dict[str, Any] = {
                "kind": "compute#attachedDisk",
                "type": given.get("type", "PERSISTENT"),
                "mode": given.get("mode", "READ_WRITE"),
                "source": disk_link,
                "deviceName": given.get("deviceName", f"persistent-disk-{i}"),
                "index": i,
                "boot": bool(given.get("boot", False)),
                "autoDelete": bool(given.get("autoDelete", False)),
                "interface": given.get("interface", "SCSI"),
                "diskSizeGb": str(size),
                "architecture": "X86_64",
            }
            out.append((attached, disk))
        return out

    def _resolve_image(self, project: str, value: str) -> dict[str, Any]:
        try:
            ref = self._ref(value, project)
        except ValueError:
            raise invalid_field(
                "resource.disks[0].initializeParams.sourceImage",
                value,
                "Must be a URL to a valid Compute resource of the correct type.",
            ) from None
        family = re.fullmatch(
            r"projects/([^/]+)/(?:global/images/family|zones/[^/]+/imageFamilyViews)/([^/]+)", ref
        )
        if family:
            image = self._family_image(family.group(1), family.group(2))
            if image is None:
                raise not_found(ref)
            return image
        named = re.fullmatch(r"projects/([^/]+)/global/images/([^/]+)", ref)
        image = self._images.get((named.group(1), named.group(2))) if named else None
        if image is None:
            raise not_found(ref)
        if image["status"] != "READY":
            raise ApiError(400, f"The resource '{ref}' is not ready", "resourceNotReady")
        return image

    def _family_image(self, project: str, family: str) -> dict[str, Any] | None:
        found = [
            image
            for (owner, _), image in self._images.items()
            if owner == project and image.get("family") == family and image["status"] == "READY"
        ]
        return max(found, key=lambda i: i["creationTimestamp"], default=None)

    # --- quotas

    def _needs(self, inst: Inst, region: str) -> list[tuple[str, str, float]]:
        """(scope, metric, amount) an instance takes: scope a region or "global"."""
        quotas = self.quotas.get(region, {})
        series = inst.machine.name.split("-", 1)[0].upper()
        cpu = f"{series}_CPUS" if series not in SHARED_CPU_SERIES else "CPUS"
        if cpu not in quotas:
            cpu = "CPUS"
        if inst.spot and quotas.get("PREEMPTIBLE_CPUS", 0) > 0:
            cpu = "PREEMPTIBLE_CPUS"
        out = [
            (region, cpu, float(inst.machine.cpus)),
            ("global", "CPUS_ALL_REGIONS", float(inst.machine.cpus)),
        ]
        out.append((region, "INSTANCES", 1.0))
        for item in inst.resource.get("guestAccelerators", []):
            kind = item["acceleratorType"].rsplit("/", 1)[-1]
            metric = GPU_METRICS.get(kind, f"NVIDIA_{kind.upper()}_GPUS")
            if inst.spot and quotas.get("PREEMPTIBLE_" + metric, 0) > 0:
                metric = "PREEMPTIBLE_" + metric
            out.append((region, metric, float(item["acceleratorCount"])))
            out.append(("global", "GPUS_ALL_REGIONS", float(item["acceleratorCount"])))
        return out

    def _usage(self) -> dict[tuple[str, str], float]:
        used: dict[tuple[str, str], float] = {}
        for inst in self._instances:
            if inst.gone or inst.status == "TERMINATED":
                continue
            for scope, metric, amount in self._needs(inst, self._region_of(inst.zone)):
                used[(scope, metric)] = used.get((scope, metric), 0.0) + amount
        return used

    def _insert_failure(self, inst: Inst, region: str) -> tuple[dict[str, Any], int] | None:
        for fault in self.insert_faults:
            if fault.times == 0:
                continue
            if fault.zone not in (None, inst.zone):
                continue
            if fault.machine_type not in (None, inst.machine.name):
                continue
            if fault.times is not None:
                fault.times -= 1
            if fault.code == "QUOTA_EXCEEDED":
                scope = "global" if fault.metric.endswith("ALL_REGIONS") else region
                return self._quota_error(fault.metric, scope, fault.limit, fault.message)
            if fault.code in POOL_CODES:
                return self._pool_error(inst, fault.code, fault.message), 503
            return {"code": fault.code, "message": fault.message or fault.code}, 400
        used = self._usage()
        for scope, metric, amount in self._needs(inst, region):
            limits = self.project_quotas if scope == "global" else self.quotas.get(scope, {})
            limit = limits.get(metric)
            if limit is not None and used.get((scope, metric), 0.0) + amount > limit:
                return self._quota_error(metric, scope, limit, None)
        return None

    def _quota_error(
        self, metric: str, scope: str, limit: float, message: str | None
    ) -> tuple[dict[str, Any], int]:
        where = "globally" if scope == "global" else f"in region {scope}"
        info: dict[str, Any] = {
            "metricName": f"compute.googleapis.com/{metric.lower()}",
            "limitName": f"{metric.replace('_', '-')}-per-project"
            + ("" if scope == "global" else "-region"),
            "limit": float(limit),
        }
        if scope != "global":
            info["dimensions"] = {"region": scope}
        error = {
            "code": "QUOTA_EXCEEDED",
            "message": message or f"Quota '{metric}' exceeded.  Limit: {float(limit)} {where}.",
            "errorDetails": [
                {"quotaInfo": info},
                {
                    "help": {
                        "links": [
                            {
                                "description": "Request a higher quota limit.",
                                "url": "https://cloud.google.com/compute/quotas#requesting_additional_quota",
                            }
                        ]
                    }
                },
            ],
        }
        return error, 403

    def _pool_error(self, inst: Inst, code: str, message: str | None) -> dict[str, Any]:
        zone_path = f"projects/{inst.project}/zones/{inst.zone}"
        tail = (
            "'(resource type:compute)'."
            if code.endswith("_WITH_DETAILS")
            else "Try a different zone, or try again later."
        )
        attachment = ",".join(
            f"{a['acceleratorType'].rsplit('/', 1)[-1]}:{a['acceleratorCount']}"
            for a in inst.resource.get("guestAccelerators", [])
        )
        return {
            "code": code,
            "message": message
            or f"The zone '{zone_path}' does not have enough resources "
            f"available to fulfill the request.  {tail}",
            "errorDetails": [
                {
                    "help": {
                        "links": [{"description": "Troubleshooting documentation", "url": HELP}]
                    }
                },
                {
                    "localizedMessage": {
                        "locale": "en-US",
                        "message": f"A {inst.machine.name} VM "
                        f"instance is currently unavailable in the {inst.zone} "
                        "zone. Alternatively, you can try your request again with "
                        "a different VM hardware configuration or at a later "
                        "time. For more information, see the troubleshooting "
                        "documentation.",
                    }
                },
                {
                    "errorInfo": {
                        "domain": "compute.googleapis.com",
                        "reason": "resource_availability",
                        "metadatas": {
                            "vmType": inst.machine.name,
                            "zone": inst.zone,
                            "attachment": attachment,
                            "zonesAvailable": "",
                        },
                    }
                },
            ],
        }

    # --- stopping and deleting

    def _stop(self, inst: Inst, when: float, action: str, why: str) -> None:
        """STOPPING now; after `timing.stop` gone (DELETE) or TERMINATED (STOP)."""
        if inst.gone or inst.status in ("STOPPING", "TERMINATED"):
            return
        inst.resource["status"] = "STOPPING"
        inst.busy = True
        self.events.append(("stopping", f"{inst.zone}/{inst.name}", why))

        def finish(at: float) -> None:
            if inst.gone:
                return
            if action == "DELETE":
                self._remove(inst, at, why)
            else:
                inst.resource["status"] = "TERMINATED"
                inst.resource["lastStopTimestamp"] = self._stamp(at)
                inst.busy = False
                for nic in inst.resource["networkInterfaces"]:
                    for access in nic.get("accessConfigs", []):
                        access.pop("natIP", None)
                self.events.append(("terminated", f"{inst.zone}/{inst.name}", why))

        self._at(when + self.timing.stop, finish)

    def _lifetime(self, inst: Inst, when: float, action: str) -> None:
        self._stop(inst, when, action, "lifetime reached")

    def _remove(self, inst: Inst, when: float, why: str, *, all_disks: bool = False) -> None:
        inst.gone = True
        by_source = {d["source"]: d for d in inst.resource["disks"]}
        for disk in inst.disks:
            attached = by_source.get(disk["selfLink"], {})
            key = (inst.project, inst.zone, disk["name"])
            if all_disks or attached.get("autoDelete"):
                self._disks.pop(key, None)
            else:
                disk["users"] = []
                disk["lastDetachTimestamp"] = self._stamp(when)
        self.events.append(("deleted", f"{inst.zone}/{inst.name}", why))

    def _instances_delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone, name = p["project"], p["zone"], p["instance"]
        self._check_zone(project, zone)
        again = self._dedup(project, q)
        if again is not None:
            return again.resource
        inst = self._find(project, zone, name)
        if inst.busy:
            raise ApiError(
                400,
                f"The resource 'projects/{project}/zones/{zone}/instances/"
                f"{inst.name}' is not ready",
                "resourceNotReady",
            )
        if inst.resource.get("deletionProtection"):
            raise ApiError(
                400,
                "Invalid resource usage: 'Resource cannot be deleted if it's "
                "protected against deletion.'.",
                "resourceInUseByAnotherResource",
            )
        op = self._new_op("delete", project, zone, inst.resource["selfLink"], inst.resource["id"])
        self._remember(project, q, op)
        inst.busy = inst.deleting = True

        def start(when: float) -> None:
            self._set_op(op, "RUNNING", when)
            inst.resource["status"] = "STOPPING"
            self.events.append(("stopping", f"{zone}/{inst.name}", "delete"))
            self._at(when + self.timing.stop, finish)

        def finish(when: float) -> None:
            if not inst.gone:
                self._remove(inst, when, "delete")
            self._set_op(op, "DONE", when)

        self._at(self.now() + self.timing.pending, start)
        return op.resource

    # --- reads

    def _instances_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_zone(p["project"], p["zone"])
        return self._find(p["project"], p["zone"], p["instance"]).resource

    def _instances_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone = p["project"], p["zone"]
        self._check_zone(project, zone)
        items = [i.resource for i in self._live() if i.project == project and i.zone == zone]
        return self._list(
            "compute#instanceList", items, q, f"projects/{project}/zones/{zone}/instances"
        )

    def _instances_aggregated(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project = p["project"]
        self._check_project(project)
        scopes = {
            z: [i.resource for i in self._live() if i.project == project and i.zone == z]
            for z in self._zones()
        }
        return self._aggregated(
            "compute#instanceAggregatedList",
            "instances",
            scopes,
            q,
            f"projects/{project}/aggregated/instances",
        )

    def _reservations_aggregated(
        self, p: dict[str, str], q: dict[str, str], body: Any
    ) -> Any:
        project = p["project"]
        self._check_project(project)
        scopes = {z: list(self.reservations.get(z, [])) for z in self._zones()}
        return self._aggregated(
            "compute#reservationAggregatedList",
            "reservations",
            scopes,
            q,
            f"projects/{project}/aggregated/reservations",
        )

    def _future_aggregated(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project = p["project"]
        self._check_project(project)
        scopes = {z: list(self.future_reservations.get(z, [])) for z in self._zones()}
        return self._aggregated(
            "compute#futureReservationsAggregatedListResponse",
            "futureReservations",
            scopes,
            q,
            f"projects/{project}/aggregated/futureReservations",
        )

    def _serial(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_zone(p["project"], p["zone"])
        inst = self._find(p["project"], p["zone"], p["instance"])
        port = int(q.get("port", "1"))
        if not 1 <= port <= 4:
            raise invalid_field("port", port, "Must be between 1 and 4.")
        end = inst.console_dropped + len(inst.console)
        start = int(q.get("start", "0"))
        if start < inst.console_dropped:
            start = inst.console_dropped
        start = min(start, end)
        chunk = bytes(inst.console[start - inst.console_dropped :]) if port == 1 else b""
        chunk = chunk[: 1 << 20]
        return {
            "kind": "compute#serialPortOutput",
            "contents": chunk.decode("utf-8", "replace"),
            "start": str(start),
            "next": str(start + len(chunk)),
            "selfLink": inst.resource["selfLink"] + f"/serialPort?port={port}",
        }

    def _boot_console(self, inst: Inst) -> None:
        lines = [
            "SeaBIOS (version 1.8.2-google)",
            "Booting from Hard Disk 0...",
            f"[    0.000000] Linux version 6.1.0-28-cloud-amd64 ({inst.name})",
            f"{inst.name} systemd[1]: Started google-startup-scripts.service.",
        ]
        items = inst.resource["metadata"].get("items", [])
        if any(i["key"] == "startup-script" for i in items):
            lines.append(
                f"{inst.name} google_metadata_script_runner[742]: Found startup-script in metadata."
            )
        self._write_console(inst, "\n".join(lines) + "\n")

    def _write_console(self, inst: Inst, text: str) -> None:
        inst.console += text.encode()
        excess = len(inst.console) - (1 << 20)
        if excess > 0:  # Google keeps the last 1 MB
            del inst.console[:excess]
            inst.console_dropped += excess

    def _op(self, p: dict[str, str]) -> Op:
        project, zone, name = p["project"], p.get("zone"), p["operation"]
        if zone is not None:
            self._check_zone(project, zone)
        else:
            self._check_project(project)
        op = self._ops.get((project, zone, name))
        if op is None:
            scope = f"zones/{zone}" if zone else "global"
            raise not_found(f"projects/{project}/{scope}/operations/{name}")
        return op

    def _op_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        return self._op(p).resource

    def _op_wait(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        op = self._op(p)
        if self.wait_early > 0:
            self.wait_early -= 1
            return op.resource
        deadline = time.monotonic() + min(self.wait_cap, WAIT_LIMIT)
        while op.resource["status"] != "DONE":
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            upcoming = self._events[0][0] - self.now() if self._events else remaining
            self.lock.wait(max(0.001, min(remaining, upcoming, 0.05)))
            self._tick()
        return op.resource

    def _op_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone = p["project"], p["zone"]
        self._check_zone(project, zone)
        items = [o.resource for (pr, z, _), o in self._ops.items() if pr == project and z == zone]
        return self._list(
            "compute#operationList",
            items,
            q,
            f"projects/{project}/zones/{zone}/operations",
            default_order="insertTime",
        )

    def _disks_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone, name = p["project"], p["zone"], p["disk"]
        self._check_zone(project, zone)
        disk = self._disks.get((project, zone, name))
        if disk is None:
            raise not_found(f"projects/{project}/zones/{zone}/disks/{name}")
        return disk

    def _disks_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone = p["project"], p["zone"]
        self._check_zone(project, zone)
        items = [d for (pr, z, _), d in self._disks.items() if pr == project and z == zone]
        return self._list("compute#diskList", items, q, f"projects/{project}/zones/{zone}/disks")

    def _disks_aggregated(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project = p["project"]
        self._check_project(project)
        scopes = {
            z: [d for (pr, zz, _), d in self._disks.items() if pr == project and zz == z]
            for z in self._zones()
        }
        return self._aggregated(
            "compute#diskAggregatedList", "disks", scopes, q, f"projects/{project}/aggregated/disks"
        )

    def _create_snapshot(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone, disk_name = p["project"], p["zone"], p["disk"]
        self._check_zone(project, zone)
        again = self._dedup(project, q)
        if again is not None:
            return again.resource
        disk = self._disks.get((project, zone, disk_name))
        if disk is None:
            raise not_found(f"projects/{project}/zones/{zone}/disks/{disk_name}")
        name = body.get("name", "")
        if not NAME.fullmatch(name):
            raise invalid_field(
                "resource.name",
                name,
                "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'",
            )
        if (project, name) in self._snapshots:
            raise ApiError(
                409, f"The resource 'projects/{project}/global/snapshots/{name}' already exists"
            )
        labels = self._labels("resource.labels", body.get("labels", {}))
        link = self.link(f"projects/{project}/global/snapshots/{name}")
        snapshot: dict[str, Any] = {
            "kind": "compute#snapshot",
            "id": self._id(),
            "creationTimestamp": self._stamp(self.now()),
            "name": name,
            "status": "CREATING",
            "sourceDisk": disk["selfLink"],
            "sourceDiskId": disk["id"],
            "diskSizeGb": disk["sizeGb"],
            "storageBytes": "0",
            "storageBytesStatus": "UPDATING",
            "selfLink": link,
            "labelFingerprint": _fingerprint(labels),
            "storageLocations": list(body.get("storageLocations", ["us"])),
            "architecture": "X86_64",
            "autoCreated": False,
            "snapshotType": body.get("snapshotType", "STANDARD"),
        }
        for key in ("description",):
            if key in body:
                snapshot[key] = body[key]
        if labels:
            snapshot["labels"] = labels
        self._snapshots[(project, name)] = snapshot
        op = self._new_op("createSnapshot", project, zone, disk["selfLink"], disk["id"])
        self._remember(project, q, op)

        def start(when: float) -> None:
            self._set_op(op, "RUNNING", when)
            snapshot["status"] = "UPLOADING"
            self._at(when + self.timing.snapshot, finish)

        def finish(when: float) -> None:
            snapshot["status"] = "READY"
            snapshot["storageBytes"] = str(int(disk["sizeGb"]) * 1_000_000)
            snapshot["storageBytesStatus"] = "UP_TO_DATE"
            self._set_op(op, "DONE", when)

        self._at(self.now() + self.timing.pending, start)
        return op.resource

    def _snapshots_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_project(p["project"])
        found = self._snapshots.get((p["project"], p["snapshot"]))
        if found is None:
            raise not_found(f"projects/{p['project']}/global/snapshots/{p['snapshot']}")
        return found

    def _snapshots_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_project(p["project"])
        items = [s for (pr, _), s in self._snapshots.items() if pr == p["project"]]
        return self._list(
            "compute#snapshotList", items, q, f"projects/{p['project']}/global/snapshots"
        )

    def _images_insert(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project = p["project"]
        self._check_project(project)
        again = self._dedup(project, q)
        if again is not None:
            return again.resource
        name = body.get("name", "")
        if not NAME.fullmatch(name):
            raise invalid_field(
                "resource.name",
                name,
                "Must be a match of regex '[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?'",
            )
        if (project, name) in self._images:
            raise ApiError(
                409, f"The resource 'projects/{project}/global/images/{name}' already exists"
            )
        source = body.get("sourceDisk")
        if not source:
            raise invalid_field(
                "resource.sourceDisk",
                "",
                "This stand-in makes images from disks only (sourceDisk).",
            )
        try:
            ref = self._ref(source, project)
        except ValueError:
            ref = source
        match = re.fullmatch(r"projects/([^/]+)/zones/([^/]+)/disks/([^/]+)", ref)
        disk = self._disks.get((match.group(1), match.group(2), match.group(3))) if match else None
        if disk is None:
            raise not_found(ref)
        users = [u for u in disk.get("users", []) if self._running_user(u)]
        if users and q.get("forceCreate") != "true":
            user = self._ref(users[0], project)
            raise ApiError(
                400,
                f"The disk resource '{ref}' is already being used by '{user}'",
                "resourceInUseByAnotherResource",
            )
        labels = self._labels("resource.labels", body.get("labels", {}))
        image = self.add_image(
            project,
            name,
            family=body.get("family"),
            disk_size_gb=int(disk["sizeGb"]),
            status="PENDING",
            labels=labels,
        )
        image["creationTimestamp"] = self._stamp(self.now())
        image["sourceDisk"] = disk["selfLink"]
        image["sourceDiskId"] = disk["id"]
        image.pop("licenses", None)
        if "description" in body:
            image["description"] = body["description"]
        if "storageLocations" in body:
            image["storageLocations"] = list(body["storageLocations"])
        op = self._new_op("insert", project, None, image["selfLink"], image["id"])
        self._remember(project, q, op)

        def start(when: float) -> None:
            self._set_op(op, "RUNNING", when)
            self._at(when + self.timing.image, finish)

        def finish(when: float) -> None:
            image["status"] = "READY"
            self._set_op(op, "DONE", when)

        self._at(self.now() + self.timing.pending, start)
        return op.resource

    def _running_user(self, link: str) -> bool:
        return any(
            i.resource["selfLink"] == link and i.status != "TERMINATED" for i in self._live()
        )

    def _image(self, project: str, name: str) -> dict[str, Any]:
        image = self._images.get((project, name))
        if image is None:
            raise not_found(f"projects/{project}/global/images/{name}")
        return image

    def _images_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        return self._image(p["project"], p["image"])

    def _images_family(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        image = self._family_image(p["project"], p["family"])
        if image is None:
            raise not_found(f"projects/{p['project']}/global/images/family/{p['family']}")
        return image

    def _image_family_view(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._region_of(p["zone"])
        return {"image": self._images_family(p, q, body)}

    def _images_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        items = [i for (pr, _), i in self._images.items() if pr == p["project"]]
        return self._list("compute#imageList", items, q, f"projects/{p['project']}/global/images")

    # --- catalog reads

    def _zones(self) -> list[str]:
        return [z for zones in self.regions.values() for z in zones]

    def _mt(self, project: str, zone: str, spec: MachineTypeSpec) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "compute#machineType",
            "id": str(800_000 + sum(map(ord, spec.name)) * 31 + spec.cpus),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": spec.name,
            "description": f"{spec.cpus} vCPUs, {spec.memory_mb / 1024:g} GB RAM",
            "guestCpus": spec.cpus,
            "memoryMb": spec.memory_mb,
            "imageSpaceGb": 0,
            "maximumPersistentDisks": 16 if spec.shared_cpu else 128,
            "maximumPersistentDisksSizeGb": "3072" if spec.shared_cpu else "263168",
            "zone": zone,
            "selfLink": self.link(f"projects/{project}/zones/{zone}/machineTypes/{spec.name}"),
            "isSharedCpu": spec.shared_cpu,
            "architecture": "X86_64",
        }
        if spec.accelerators:
            out["accelerators"] = [
                {"guestAcceleratorType": kind, "guestAcceleratorCount": count}
                for kind, count in spec.accelerators
            ]
        return out

    def _mts_in(self, project: str, zone: str) -> list[dict[str, Any]]:
        return [
            self._mt(project, zone, s)
            for s in self.machine_types.values()
            if s.zones is None or zone in s.zones
        ]

    def _mt_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone, name = p["project"], p["zone"], p["machineType"]
        self._check_zone(project, zone)
        spec = self.machine_types.get(name)
        if spec is None or (spec.zones is not None and zone not in spec.zones):
            raise not_found(f"projects/{project}/zones/{zone}/machineTypes/{name}")
        return self._mt(project, zone, spec)

    def _mt_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone = p["project"], p["zone"]
        self._check_zone(project, zone)
        return self._list(
            "compute#machineTypeList",
            self._mts_in(project, zone),
            q,
            f"projects/{project}/zones/{zone}/machineTypes",
        )

    def _mt_aggregated(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project = p["project"]
        self._check_project(project)
        scopes = {z: self._mts_in(project, z) for z in self._zones()}
        return self._aggregated(
            "compute#machineTypeAggregatedList",
            "machineTypes",
            scopes,
            q,
            f"projects/{project}/aggregated/machineTypes",
        )

    def _acc(self, project: str, zone: str, spec: AcceleratorSpec) -> dict[str, Any]:
        return {
            "kind": "compute#acceleratorType",
            "id": str(10_000 + sum(map(ord, spec.name))),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": spec.name,
            "description": spec.description,
            "zone": self.link(f"projects/{project}/zones/{zone}"),
            "selfLink": self.link(f"projects/{project}/zones/{zone}/acceleratorTypes/{spec.name}"),
            "maximumCardsPerInstance": spec.max_cards,
        }

    def _accs_in(self, project: str, zone: str) -> list[dict[str, Any]]:
        return [
            self._acc(project, zone, s)
            for s in self.accelerators.values()
            if s.zones is None or zone in s.zones
        ]

    def _at_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone, name = p["project"], p["zone"], p["acceleratorType"]
        self._check_zone(project, zone)
        spec = self.accelerators.get(name)
        if spec is None or (spec.zones is not None and zone not in spec.zones):
            raise not_found(f"projects/{project}/zones/{zone}/acceleratorTypes/{name}")
        return self._acc(project, zone, spec)

    def _at_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project, zone = p["project"], p["zone"]
        self._check_zone(project, zone)
        return self._list(
            "compute#acceleratorTypeList",
            self._accs_in(project, zone),
            q,
            f"projects/{project}/zones/{zone}/acceleratorTypes",
        )

    def _at_aggregated(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        project = p["project"]
        self._check_project(project)
        scopes = {z: self._accs_in(project, z) for z in self._zones()}
        return self._aggregated(
            "compute#acceleratorTypeAggregatedList",
            "acceleratorTypes",
            scopes,
            q,
            f"projects/{project}/aggregated/acceleratorTypes",
        )

    def _zone(self, project: str, zone: str) -> dict[str, Any]:
        region = self._region_of(zone)
        return {
            "kind": "compute#zone",
            "id": str(2000 + self._zones().index(zone)),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": zone,
            "description": zone,
            "status": self.zone_status.get(zone, "UP"),
            "region": self.link(f"projects/{project}/regions/{region}"),
            "selfLink": self.link(f"projects/{project}/zones/{zone}"),
            "availableCpuPlatforms": ["Intel Cascade Lake", "AMD Milan"],
            "supportsPzs": False,
        }

    def _zones_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_zone(p["project"], p["zone"])
        return self._zone(p["project"], p["zone"])

    def _zones_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_project(p["project"])
        items = [self._zone(p["project"], z) for z in self._zones()]
        return self._list("compute#zoneList", items, q, f"projects/{p['project']}/zones")

    def _quota_list(self, scope: str, limits: dict[str, float]) -> list[dict[str, Any]]:
        used = self._usage()
        return [
            {"metric": metric, "limit": float(limit), "usage": used.get((scope, metric), 0.0)}
            for metric, limit in limits.items()
        ]

    def _region(self, project: str, region: str) -> dict[str, Any]:
        return {
            "kind": "compute#region",
            "id": str(1000 + list(self.regions).index(region)),
            "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
            "name": region,
            "description": region,
            "status": "UP",
            "selfLink": self.link(f"projects/{project}/regions/{region}"),
            "zones": [self.link(f"projects/{project}/zones/{z}") for z in self.regions[region]],
            "quotas": self._quota_list(region, self.quotas.get(region, {})),
            "supportsPzs": False,
        }

    def _regions_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_project(p["project"])
        if p["region"] not in self.regions:
            raise not_found(f"projects/{p['project']}/regions/{p['region']}")
        return self._region(p["project"], p["region"])

    def _regions_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_project(p["project"])
        items = [self._region(p["project"], r) for r in self.regions]
        return self._list("compute#regionList", items, q, f"projects/{p['project']}/regions")

    def _projects_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Any:
        self._check_project(p["project"])
        return {
            "kind": "compute#project",
            "id": PROJECT_NUMBER,
            "creationTimestamp": "2024-01-01T00:00:00.000-08:00",
            "name": p["project"],
            "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": _fingerprint({})},
            "quotas": self._quota_list("global", self.project_quotas),
            "selfLink": self.link(f"projects/{p['project']}"),
            "defaultServiceAccount": f"{PROJECT_NUMBER}-compute@developer.gserviceaccount.com",
            "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
            "defaultNetworkTier": "PREMIUM",
            "vmDnsSetting": "ZONAL_ONLY",
        }

    # --- lists

    def _page(self, items: list[Any], q: dict[str, str]) -> tuple[list[Any], str | None]:
        size = min(int(q.get("maxResults", "500")), 500)
        if size < 0:
            raise invalid_field("maxResults", size, "Must be non-negative.")
        size = size or 500
        start = 0
        if q.get("pageToken"):
            try:
                start = int(
                    base64.urlsafe_b64decode(q["pageToken"].encode())
                    .decode()
                    .removeprefix("offset:")
                )
            except (ValueError, binascii.Error):
                raise invalid_field("pageToken", q["pageToken"], "Invalid page token.") from None
        page = items[start : start + size]
        token = None
        if start + size < len(items):
            token = base64.urlsafe_b64encode(f"offset:{start + size}".encode()).decode()
        return page, token

    def _select(
        self, items: list[dict[str, Any]], q: dict[str, str], default_order: str = "name"
    ) -> list[dict[str, Any]]:
        if q.get("filter"):
            try:
                test = parse_filter(q["filter"])
            except ValueError as e:
                raise invalid_field(
                    "filter", q["filter"], f"Invalid list filter expression: {e}."
                ) from None
            items = [i for i in items if test(i)]
        order = q.get("orderBy", "")
        if order == "creationTimestamp desc":
            return sorted(items, key=lambda i: i.get("creationTimestamp", ""), reverse=True)
        if order not in ("", "name"):
            raise invalid_field(
                "orderBy", order, "Sorting is only supported by name and creationTimestamp desc."
            )
        key = default_order if not order else "name"
        return sorted(items, key=lambda i: str(i.get(key, "")))

    def _list(
        self,
        kind: str,
        items: list[dict[str, Any]],
        q: dict[str, str],
        path: str,
        default_order: str = "name",
    ) -> dict[str, Any]:
        page, token = self._page(self._select(items, q, default_order), q)
        out: dict[str, Any] = {"kind": kind, "id": path, "selfLink": self.link(path)}
        if page:
            out["items"] = page
        if token:
            out["nextPageToken"] = token
        return out

    def _aggregated(
        self,
        kind: str,
        key: str,
        scopes: dict[str, list[dict[str, Any]]],
        q: dict[str, str],
        path: str,
    ) -> dict[str, Any]:
        flat = [(zone, item) for zone, found in scopes.items() for item in self._select(found, q)]
        page, token = self._page(flat, q)
        items: dict[str, Any] = {}
        for zone in scopes:
            mine = [item for z, item in page if z == zone]
            scope = f"zones/{zone}"
            if mine:
                items[scope] = {key: mine}
            else:
                items[scope] = {
                    "warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": f"There are no results for scope '{scope}' on this page.",
                        "data": [{"key": "scope", "value": scope}],
                    }
                }
        out: dict[str, Any] = {
            "kind": kind,
            "id": path,
            "items": items,
            "selfLink": self.link(path),
        }
        if token:
            out["nextPageToken"] = token
        return out

    # --- one request

    def serve(
        self, http_method: str, raw_path: str, headers: dict[str, str], raw_body: bytes
    ) -> tuple[int, dict[str, str], Any]:
        """One request -> (status, headers, JSON body or None for "close without an
        answer")."""
        parts = urlsplit(raw_path)
        query = parse_qs(parts.query, keep_blank_values=True)
        seen = Seen("", http_method, parts.path, query, None)
        with self.lock:
            self.requests.append(seen)
        status, out_headers, payload = self._serve(seen, headers, raw_body)
        seen.status = status
        return status, out_headers, payload

    def _serve(
        self, seen: Seen, headers: dict[str, str], raw_body: bytes
    ) -> tuple[int, dict[str, str], Any]:
        base = self.contract.base_path
        if not seen.path.startswith(base):
            return self._error(None, ApiError(404, f"Not Found: {seen.path}"))
        route = self.contract.route(seen.http_method, seen.path[len(base) :])
        if route is None:
            with self.lock:
                self.violations.append(
                    f"request {seen.http_method} {seen.path}: no method of "
                    "the discovery document has this path"
                )
            return self._error(None, ApiError(404, f"Not Found: {seen.path}"))
        method = route.method
        seen.method = method.id
        seen.authorized = self._authorized(headers, seen.query)
        if self.require_auth and not seen.authorized:
            return self._error(method, self._auth_error(headers))
        delay = self.delay.get(method.id, 0.0)
        if delay:
            time.sleep(delay)
        with self.lock:
            fault = self._take_fault(method.id)
        if fault is not None and not fault.apply:
            return self._fault_answer(method, fault)
        try:
            params = self._params(method, route.params, seen.query)
            body = self._body(method, raw_body, seen)
        except ApiError as e:
            return self._error(method, e)
        if method.id in self.deny:
            return self._error(method, self._denied(method, seen.path[len(base) :]))
        handler = self.handlers.get(method.id)
        if handler is None:
            with self.lock:
                self.unserved.append(f"{method.id} ({seen.http_method} {seen.path})")
            return self._error(
                method,
                ApiError(
                    501,
                    f"{method.id} is not served by the Compute Engine stand-in",
                    "notImplemented",
                ),
            )
        try:
            with self.lock:
                self._tick()
                result = copy.deepcopy(handler(route.params, params, body))
        except ApiError as e:
            return self._error(method, e)
        if fault is not None:
            return self._fault_answer(method, fault)
        if method.response:
            self._check_response(method, result)
        if "fields" in params:
            result = select_fields(result, params["fields"])
        return 200, {}, result

    def _authorized(self, headers: dict[str, str], query: dict[str, list[str]]) -> bool:
        auth = headers.get("authorization", "")
        token = auth[7:] if auth.lower().startswith("bearer ") else ""
        token = token or query.get("access_token", [""])[-1]
        return bool(token) and (self.tokens is None or token in self.tokens)

    def _auth_error(self, headers: dict[str, str]) -> ApiError:
        challenge = {"WWW-Authenticate": 'Bearer realm="https://accounts.google.com/"'}
        if "authorization" not in headers:
            return ApiError(
                401,
                "Request is missing required authentication credential. "
                "Expected OAuth 2 access token, login cookie or other valid "
                "authentication credential. See https://developers.google.com/"
                "identity/sign-in/web/devconsole-project.",
                "required",
                location="Authorization",
                headers=challenge,
            )
        return ApiError(
            401,
            "Request had invalid authentication credentials. Expected OAuth 2 "
            "access token, login cookie or other valid authentication credential. "
            "See https://developers.google.com/identity/sign-in/web/devconsole-"
            "project.",
            "authError",
            location="Authorization",
            headers=challenge,
        )

    def _denied(self, method: Method, path: str) -> ApiError:
        resource, verb = method.id.split(".")[1:3]
        verb = {
            "insert": "create",
            "aggregatedList": "list",
            "getSerialPortOutput": "getSerialPortOutput",
            "wait": "get",
        }.get(verb, verb)
        return ApiError(
            403,
            f"Required 'compute.{resource}.{verb}' permission for '{path.removesuffix('/wait')}'",
            "forbidden",
        )

    def _take_fault(self, method_id: str) -> HttpFault | None:
        for fault in self.http_faults:
            if fault.times > 0 and fault.method in ("*", method_id):
                fault.times -= 1
                return fault
        return None

    def _fault_answer(self, method: Method, fault: HttpFault) -> tuple[int, dict[str, str], Any]:
        if fault.status == 0:
            return 0, {}, None
        domain, reason, message = REASONS.get(fault.status, ("global", "error", "Error"))
        headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else {}
        return self._error(
            method,
            ApiError(
                fault.status, fault.message or message, reason, domain=domain, headers=headers
            ),
        )

    def _params(
        self, method: Method, path_params: dict[str, str], query: dict[str, list[str]]
    ) -> dict[str, str]:
        for name, value in path_params.items():
            spec = method.parameters.get(name, {})
            why = self.contract.check_parameter(name, spec, value)
            if why:
                raise ApiError(400, why, "invalidParameter", location=name)
        out: dict[str, str] = {}
        for name, values in query.items():
            found = method.parameters.get(name) or self.contract.global_parameters.get(name)
            if found is None or found.get("location") == "path":
                message = (
                    f'Invalid JSON payload received. Unknown name "{name}": Cannot bind '
                    f"query parameter. Field '{name}' could not be found in request "
                    "message."
                )
                with self.lock:
                    self.violations.append(f"request {method.id}: unknown query parameter {name!r}")
                raise ApiError(400, message, "invalid")
            for value in values:
                why = self.contract.check_parameter(name, found, value)
                if why:
                    with self.lock:
                        self.violations.append(f"request {method.id}: {why}")
                    raise ApiError(400, why, "invalidParameter", location=name)
            out[name] = values[-1]
        return out

    def _body(self, method: Method, raw: bytes, seen: Seen) -> Any:
        if method.request is None:
            return None
        try:
            body = json.loads(raw or b"null")
        except ValueError as e:
            with self.lock:
                self.violations.append(f"request {method.id}: the body is not JSON ({e})")
            raise ApiError(400, f"Invalid JSON payload received. {e}", "parseError") from None
        seen.body = body
        if not isinstance(body, dict):
            with self.lock:
                self.violations.append(f"request {method.id}: the body is not a JSON object")
            raise ApiError(400, "Invalid JSON payload received. Expected an object.", "invalid")
        found = self.contract.validate(body, method.request, method_id=method.id)
        if found:
            with self.lock:
                self.violations.extend(f"request {method.id}: {v}" for v in found)
            unknown = next((v for v in found if "unknown property" in v), None)
            if unknown is not None:
                where, name = unknown.split(": unknown property ")
                # "Instance.scheduling" -> 'resource.scheduling', as Google names the body
                at = "resource" + (("." + where.split(".", 1)[1]) if "." in where else "")
                raise ApiError(
                    400,
                    f'Invalid JSON payload received. Unknown name "{name.strip(chr(39))}" '
                    f"at '{at}': Cannot find field.",
                    "invalid",
                )
            where, why = found[0].split(": ", 1)
            at = "resource" + (("." + where.split(".", 1)[1]) if "." in where else "")
            raise ApiError(400, f"Invalid value for field '{at}': {why}", "invalid")
        return body

    def _check_response(self, method: Method, result: Any) -> None:
        assert method.response is not None
        found = self.contract.validate(result, method.response)
        if found:
            with self.lock:
                self.violations.extend(f"response {method.id}: {v}" for v in found)

    def _error(self, method: Method | None, error: ApiError) -> tuple[int, dict[str, str], Any]:
        body = error_body(error, self.with_error_status)
        problems = check_error_shape(body)
        if problems:
            with self.lock:
                self.violations.extend(f"response error: {p}" for p in problems)
        return error.status, error.headers, body


# --- for tests ----------------------------------------------------------------------------


def insert_body(
    name: str,
    zone: str = "us-central1-a",
    machine_type: str = "e2-standard-2",
    *,
    image: str = "projects/debian-cloud/global/images/family/debian-12",
    **extra: Any,
) -> dict[str, Any]:
    """A valid instances.insert body (boot disk from an image family, the default network
    with an external IP); `extra` adds or replaces top-level fields."""
    body: dict[str, Any] = {
        "name": name,
        "machineType": f"zones/{zone}/machineTypes/{machine_type}",
        "disks": [{"boot": True, "autoDelete": True, "initializeParams": {"sourceImage": image}}],
        "networkInterfaces": [
            {"network": "global/networks/default", "accessConfigs": [{"type": "ONE_TO_ONE_NAT"}]}
        ],
    }
    body.update(extra)
    return body


class Client:
    """A plain HTTP client of the stand-in for its own tests (the driver has its own)."""

    def __init__(self, standin: ComputeStandin, token: str | None = TOKEN) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.project = standin.project
        self.http = httpx.Client(base_url=standin.endpoint, headers=headers, timeout=30)

    def zonal(self, zone: str, rest: str = "") -> str:
        return f"projects/{self.project}/zones/{zone}" + (f"/{rest}" if rest else "")

    def get(self, path: str, **params: Any) -> Any:
        return self.http.get(path, params=params)

    def post(self, path: str, body: Any = None, **params: Any) -> Any:
        return self.http.post(path, params=params, json=body)

    def delete(self, path: str, **params: Any) -> Any:
        return self.http.delete(path, params=params)

    def insert(self, body: dict[str, Any], zone: str = "us-central1-a", **params: Any) -> Any:
        return self.post(self.zonal(zone, "instances"), body, **params)

    def wait(self, op: dict[str, Any]) -> dict[str, Any]:
        """zoneOperations.wait (globalOperations for a global one) until DONE."""
        scope = op["selfLink"].split("/projects/", 1)[1].rsplit("/operations/", 1)[0]
        for _ in range(100):
            got = self.post(f"projects/{scope}/operations/{op['name']}/wait").json()
            if got["status"] == "DONE":
                return dict(got)
        raise AssertionError(f"operation {op['name']} never DONE")

    def close(self) -> None:
        self.http.close()


# --- filter and fields ---------------------------------------------------------------------


_TOKEN = re.compile(
    r'\s*(?:(?P<lp>\()|(?P<rp>\))|(?P<op>!=|>=|<=|=|:|>|<|\beq\b|\bne\b)|"(?P<q>(?:[^"\\]|\\.)*)"'
    r"|(?P<word>[^\s()=!:<>\"]+))"
)


def parse_filter(text: str) -> Callable[[dict[str, Any]], bool]:
    """Compute's list filter: `field op value` terms (`=`, `!=`, `:` (has; `:*` present),
    `<`, `>`, `eq`/`ne` (RE2 regular expressions over the whole value)), joined by AND
    (or juxtaposition) and OR, NOT or `-` in front, parentheses."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"unexpected {text[pos:]!r}")
        pos = m.end()
        kind = next(k for k, v in m.groupdict().items() if v is not None)
        tokens.append((kind, m.group(kind)))
    stream = iter([*tokens, ("end", "")])
    state = {"cur": next(stream)}

    def peek() -> tuple[str, str]:
        return state["cur"]

    def take() -> tuple[str, str]:
        cur = state["cur"]
        state["cur"] = next(stream, ("end", ""))
        return cur

    def expr() -> Callable[[dict[str, Any]], bool]:
        left = conj()
        while peek() == ("word", "OR"):
            take()
            right = conj()
            left = (lambda a, b: lambda r: a(r) or b(r))(left, right)
        return left

    def conj() -> Callable[[dict[str, Any]], bool]:
        left = unary()
        while peek()[0] in ("lp", "word", "q") and peek() != ("word", "OR"):
            if peek() == ("word", "AND"):
                take()
            right = unary()
            left = (lambda a, b: lambda r: a(r) and b(r))(left, right)
        return left

    def unary() -> Callable[[dict[str, Any]], bool]:
        if peek() == ("word", "NOT"):
            take()
            inner = unary()
            return lambda r: not inner(r)
        if peek()[0] == "lp":
            take()
            inner = expr()
            if take()[0] != "rp":
                raise ValueError("missing )")
            return inner
        kind, name = take()
        negate = False
        if kind == "word" and name.startswith("-"):
            negate, name = True, name[1:]
        if kind != "word" or not name:
            raise ValueError(f"expected a field, got {name!r}")
        op_kind, op = take()
        if op_kind != "op":
            raise ValueError(f"expected an operator after {name!r}")
        value_kind, value = take()
        if value_kind not in ("word", "q"):
            raise ValueError(f"expected a value after {name} {op}")
        if value_kind == "q":
            value = re.sub(r"\\(.)", r"\1", value)
        term = _term(name, op, value)
        return (lambda r: not term(r)) if negate else term

    result = expr()
    if peek()[0] != "end":
        raise ValueError(f"unexpected {peek()[1]!r}")
    return result


def _term(name: str, op: str, value: str) -> Callable[[dict[str, Any]], bool]:
    def get(resource: dict[str, Any]) -> Any:
        cur: Any = resource
        for part in name.split("."):
            if not isinstance(cur, dict) or part not in cur:
                return None
            cur = cur[part]
        return cur

    def text(found: Any) -> str:
        if isinstance(found, bool):
            return "true" if found else "false"
        return str(found)

    def test(resource: dict[str, Any]) -> bool:
        found = get(resource)
        if op == ":":
            if value == "*":
                return found is not None
            if isinstance(found, list):
                return any(text(x) == value for x in found)
            return found is not None and value in text(found)
        if op in ("eq", "ne"):
            hit = found is not None and re.fullmatch(value, text(found)) is not None
            return hit if op == "eq" else not hit
        if op in ("=", "!="):
            hit = found is not None and fnmatch.fnmatchcase(text(found), value)
            return hit if op == "=" else not hit
        if found is None:
            return False
        try:
            a, b = float(text(found)), float(value)
            return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
        except ValueError:
            s = text(found)
            return {"<": s < value, ">": s > value, "<=": s <= value, ">=": s >= value}[op]

    return test


def select_fields(value: Any, spec: str) -> Any:
    """A partial response (`fields=items(name,status),nextPageToken`)."""
    return _apply_fields(value, _parse_fields(spec))


def _parse_fields(spec: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    stack = [out]
    name = ""
    for char in spec + ",":
        if char in ",()":
            if name.strip():
                node = stack[-1]
                for part in name.strip().split("/")[:-1]:
                    node = node.setdefault(part, {})
                last = name.strip().split("/")[-1]
                node.setdefault(last, {})
                if char == "(":
                    stack.append(node[last])
            if char == ")":
                stack.pop()
            name = ""
        else:
            name += char
    return out


def _apply_fields(value: Any, tree: dict[str, Any]) -> Any:
    if not tree:
        return value
    if isinstance(value, list):
        return [_apply_fields(v, tree) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, sub in tree.items():
        if key == "*":
            for k, v in value.items():
                out[k] = _apply_fields(v, sub)
        elif key in value:
            out[key] = _apply_fields(value[key], sub)
    return out


def check_error_shape(body: dict[str, Any]) -> list[str]:
    """Google's JSON error, as the Compute API sends it."""
    problems = []
    error = body.get("error")
    if set(body) != {"error"} or not isinstance(error, dict):
        return ["not {'error': {...}}"]
    if not set(error) <= {"code", "message", "errors", "status", "details"}:
        problems.append(f"unknown keys {sorted(set(error) - {'code', 'message', 'errors'})}")
    if not isinstance(error.get("code"), int) or not isinstance(error.get("message"), str):
        problems.append("code must be an integer and message a string")
    if "status" in error and error["status"] not in STATUS_NAMES.values():
        problems.append(f"status {error['status']!r} is not a google.rpc.Code name")
    for item in error.get("errors", []):
        if not set(item) <= {"domain", "reason", "message", "location", "locationType"}:
            problems.append(f"unknown keys in errors[]: {sorted(item)}")
        if not all(isinstance(v, str) for v in item.values()):
            problems.append("errors[] values must be strings")
    return problems


def _fingerprint(value: Any) -> str:
    digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).digest()
    return base64.b64encode(digest[:8]).decode()


# --- HTTP ----------------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError | _Drop):
            super().handle_error(request, client_address)


def _handler(standin: ComputeStandin) -> type[BaseHTTPRequestHandler]:
    class _Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

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
            data = json.dumps(payload, indent=1).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(data)))
            for name, value in extra.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _any

    return _Handler
