"""A GCP project's capacity: Compute Engine quotas per region and project-wide, and
reservations (current and future), as the provider-neutral records of
providers/accounts/model.py.

APIs asked (Compute Engine v1, OAuth token in SHOAL_GCP_TOKEN, project in SHOAL_GCP_PROJECT
or [gcp] project; every list is paged by `nextPageToken`/`pageToken`):
- regions.list: every region with its `quotas[]` of {metric, limit, usage, owner} (doubles)
  and `zones[]`, so one paged list answers every region:
  https://cloud.google.com/compute/docs/reference/rest/v1/regions/list
- projects.get: the project-wide `quotas[]` (CPUS_ALL_REGIONS, GPUS_ALL_REGIONS, ...):
  https://cloud.google.com/compute/docs/reference/rest/v1/projects/get
- reservations.aggregatedList: `items` keyed `zones/<zone>` -> {reservations[] | warning};
  a reservation's `specificReservation` {count, inUseCount (int64: JSON strings),
  instanceProperties {machineType, guestAccelerators[]}}, `status`, `deleteAtTime`:
  https://cloud.google.com/compute/docs/reference/rest/v1/reservations/aggregatedList
- futureReservations.aggregatedList: `items` keyed `zones/<zone>` -> {futureReservations[]};
  `specificSkuProperties` {totalCount, instanceProperties}, `timeWindow` {startTime,
  endTime | duration}, `status` {procurementStatus, fulfilledCount}:
  https://cloud.google.com/compute/docs/reference/rest/v1/futureReservations/aggregatedList
  (procurement states:
  https://cloud.google.com/python/docs/reference/google-cloud-compute-v1beta/latest/google.cloud.compute_v1beta.types.FutureReservationStatus.ProcurementStatus).
Metric meanings: providers/gcp/quota_map.py. Usage per machine type is not asked: a
quota's `usage` is what is in use, so `usage` stays empty. A refused reservations list is a
note; a refused regions or project read is a CredentialsError (77).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from providers.accounts.model import AccountSnapshot, Quota, Reservation
from providers.accounts.parallel import run_all
from providers.cloud.http import CloudHttp, RetryPolicy
from providers.config import base_url, setting
from providers.core.env import ENV_GCP_COMPUTE_URL, ENV_GCP_PROJECT, ENV_GCP_TOKEN
from providers.core.errors import CredentialsError, ShoalError, scrub, shown
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.urls import display
from providers.gcp.fetch import DEFAULT_COMPUTE_URL
from providers.gcp.quota_map import GPUS_ALL_REGIONS, PREEMPTIBLE, classify
from providers.gcp.shapes import GPU_MODELS, builtin_shapes, region_of_zone
from providers.regions import check_region

if TYPE_CHECKING:
    import httpx

PROVIDER = "gcp"
MAX_PAGES = 200  # regions.list is one page; aggregated lists a few; a looping token is a bug
MAX_NUMBER = 1e15  # past any quota or count Compute Engine has: a broken payload
AUTH_HINT = (
    f"set {ENV_GCP_TOKEN} to a valid OAuth access token (gcloud auth print-access-token) "
    f"that may read Compute Engine in the project in {ENV_GCP_PROJECT} (the Compute Viewer "
    f"role: compute.regions.list, compute.projects.get)"
)
# Procurement states whose capacity is not (or no longer) to come.
_ENDED = frozenset({"CANCELLED", "DECLINED", "FAILED", "FAILED_PARTIALLY_FULFILLED", "FULFILLED"})
_UNAPPROVED = frozenset({"DRAFTING", "PENDING_APPROVAL"})
Note = tuple[str, str]  # (the region it is about, "" for every region; the note)
_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")


@dataclass
class RegionQuotas:
    quotas: list[Quota] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    status: str = ""


class GcpAccounts:
    """AccountFetcher for GCP: `account` is the project."""

    provider = PROVIDER

    def __init__(
        self,
        *,
        token: str,
        project: str,
        compute_url: str = DEFAULT_COMPUTE_URL,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        max_pages: int = MAX_PAGES,
    ) -> None:
        self.token = token
        self.account = project
        self.compute_url = compute_url.rstrip("/")
        self.policy = policy
        self.transport = transport
        self.max_pages = max_pages
        self._regions: dict[str, RegionQuotas] | None = None
        self._unread = False  # the regions list regions() got, not yet given to a fetch

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> GcpAccounts:
        token = settings.env.get(ENV_GCP_TOKEN, "").strip()
        project = setting(settings, PROVIDER, "project", ENV_GCP_PROJECT).strip()
        missing = [n for n, v in ((ENV_GCP_TOKEN, token), (ENV_GCP_PROJECT, project)) if not v]
        if missing:
            raise CredentialsError(
                f"gcp: a project's quotas need {' and '.join(missing)}; set {ENV_GCP_TOKEN} to "
                f"an OAuth access token (gcloud auth print-access-token) and {ENV_GCP_PROJECT} "
                f"(or [gcp] project) to the project id"
            )
        return cls(
            token=token,
            project=project,
            compute_url=base_url(
                settings, PROVIDER, "compute_url", ENV_GCP_COMPUTE_URL, DEFAULT_COMPUTE_URL
            ),
            policy=policy,
            transport=transport,
        )

    # -- plumbing ----------------------------------------------------------------------

    def _url(self, tail: str) -> str:
        return f"{self.compute_url}/compute/v1/projects/{self.account}{tail}"

    @contextmanager
    def _scrubbed(self) -> Iterator[None]:
        """Errors raised inside quote what a server sent: never with the token in it."""
        try:
            yield
        except ShoalError as exc:
            exc.args = (scrub(str(exc), [self.token]),)
            raise

    def _pages(self, url: str, page: Callable[[Any, str], None]) -> None:
        """GET `url` and every page after it (`pageToken`); each goes to `page`. A client
        of its own per call: HttpClient is not thread-safe."""
        http = CloudHttp(
            PROVIDER,
            auth_hint=AUTH_HINT,
            secrets=[self.token],
            policy=self.policy,
            transport=self.transport,
        )
        headers = {"Authorization": f"Bearer {self.token}"}
        where = f"{PROVIDER}: {display(url)}"
        token = ""
        seen: set[str] = set()
        try:
            with self._scrubbed():
                for _ in range(self.max_pages):
                    params = {"pageToken": token} if token else None
                    payload = http.get_json(url, params=params, headers=headers)
                    if not isinstance(payload, dict):
                        raise _malformed(where, f"the answer is {_kind(payload)}")
                    page(payload, where)
                    token = _text(payload, "nextPageToken", where)
                    if not token:
                        return
                    if token in seen:
                        raise ShoalError(f"{where}: the page token repeats; stopped")
                    seen.add(token)
                raise ShoalError(f"{where}: more than {self.max_pages} pages; stopped")
        finally:
            http.close()

    # -- AccountFetcher ----------------------------------------------------------------

    def regions(self) -> list[str]:
        if self._regions is None:
            self._list_regions()
        assert self._regions is not None
        return sorted(self._regions)

    def _list_regions(self) -> dict[str, RegionQuotas]:
        """regions.list: every region's quotas in one paged list."""
        found: dict[str, RegionQuotas] = {}

        def page(payload: dict[str, Any], where: str) -> None:
            for item in _list(payload, "items", where):
                name, region = read_region(item, where)
                found[name] = region

        self._pages(self._url("/regions"), page)
        self._regions, self._unread = found, True
        return found

    def _region_quotas(self) -> dict[str, RegionQuotas]:
        """The list regions() just read, once (a CLI checks the region, then fetches);
        otherwise asked again, since usage moves."""
        if self._regions is not None and self._unread:
            self._unread = False
            return self._regions
        found = self._list_regions()
        self._unread = False
        return found

    def fetch(self, regions: Sequence[str]) -> list[AccountSnapshot]:
        fetched_at = utcnow()
        calls: list[Callable[[], Any]] = [
            self._region_quotas,
            self._project_quotas,
            self._reservations,
            self._future,
        ]
        results = run_all(calls)
        by_region, project = results[0], results[1]
        if isinstance(by_region, Exception):
            raise by_region
        if isinstance(project, Exception):
            raise project
        known = sorted(by_region)
        asked = [check_region(PROVIDER, r, known) for r in dict.fromkeys(regions)]
        notes: list[Note] = []
        reservations: list[Reservation] = []
        for result, what, permission in (
            (results[2], "reservations", "compute.reservations.list"),
            (results[3], "future reservations", "compute.futureReservations.list"),
        ):
            if isinstance(result, CredentialsError):
                notes.append(
                    ("", f"{what} unknown: the {what} list was refused; grant {permission}")
                )
            elif isinstance(result, Exception):
                raise result
            else:
                held, more = result
                reservations.extend(held)
                notes.extend(more)
        base = display(self.compute_url)
        sources = [
            f"Compute Engine API regions.list and projects.get ({base})",
            f"Compute Engine API reservations and futureReservations aggregatedList ({base})",
        ]
        snapshots = []
        for name in asked:
            region = by_region[name]
            quotas = list(region.quotas) + list(project)
            mine = [r for r in reservations if region_of_zone(r.zone) == name]
            said = [text for place, text in notes if place in ("", name)]
            snapshots.append(
                AccountSnapshot(
                    provider=PROVIDER,
                    region=name,
                    fetched_at=fetched_at,
                    quotas=quotas,
                    reservations=mine,
                    sources=list(sources),
                    notes=[scrub(n, [self.token]) for n in said + binding_notes(name, quotas)],
                    zones=list(region.zones),
                )
            )
        return snapshots

    def _project_quotas(self) -> list[Quota]:
        http = CloudHttp(
            PROVIDER,
            auth_hint=AUTH_HINT,
            secrets=[self.token],
            policy=self.policy,
            transport=self.transport,
        )
        url = self._url("")
        try:
            with self._scrubbed():
                payload = http.get_json(url, headers={"Authorization": f"Bearer {self.token}"})
                where = f"{PROVIDER}: {display(url)}"
                if not isinstance(payload, dict):
                    raise _malformed(where, f"the answer is {_kind(payload)}")
                return [
                    quota_of(item, where, scope="global")
                    for item in _list(payload, "quotas", where, optional=True)
                ]
        finally:
            http.close()

    def _reservations(self) -> tuple[list[Reservation], list[Note]]:
        found: list[Reservation] = []
        notes: list[Note] = []

        def page(payload: dict[str, Any], where: str) -> None:
            for zone, item in _aggregated(payload, "reservations", where):
                reservation = read_reservation(item, zone, where)
                if reservation is None:
                    name = _text(item, "name", where)
                    notes.append(
                        (
                            region_of_zone(zone),
                            f"reservation {name} in {zone} reserves aggregate resources "
                            "(TPUs), not VMs; not shown",
                        )
                    )
                else:
                    found.append(reservation)
            notes.extend(_unreachable(payload, where))

        self._pages(self._url("/aggregated/reservations"), page)
        return found, notes

    def _future(self) -> tuple[list[Reservation], list[Note]]:
        found: list[Reservation] = []
        pending: dict[str, list[str]] = {}
        notes: list[Note] = []

        def page(payload: dict[str, Any], where: str) -> None:
            for zone, item in _aggregated(payload, "futureReservations", where):
                reservation, state = read_future(item, zone, where)
                if reservation is not None:
                    found.append(reservation)
                elif state in _UNAPPROVED:
                    name = _text(item, "name", where)
                    pending.setdefault(region_of_zone(zone), []).append(f"{name} ({state})")
            notes.extend(_unreachable(payload, where))

        self._pages(self._url("/aggregated/futureReservations"), page)
        for region, names in sorted(pending.items()):
            listed = ", ".join(sorted(names))
            notes.append((region, f"future reservations not approved yet, not counted: {listed}"))
        return found, notes


# -- payloads: pure functions ------------------------------------------------------------


def _malformed(where: str, what: str) -> ShoalError:
    return ShoalError(f"{where}: malformed payload ({what}); nothing was cached from it")


def _kind(value: Any) -> str:
    return f"{type(value).__name__}, not an object"


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _malformed(where, f"{key} is {shown(value)}, not a string")
    return value


def _list(item: Mapping[str, Any], key: str, where: str, optional: bool = False) -> list[Any]:
    value = item.get(key)
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise _malformed(where, f"{key} is missing or not a list")
    return value


def _object(item: Mapping[str, Any], key: str, where: str) -> dict[str, Any]:
    value = item.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _malformed(where, f"{key} is {_kind(value)}")
    return value


def number(value: Any, field: str, where: str) -> float:
    """A JSON number or (int64, as Google sends it) a decimal string, finite and below
    MAX_NUMBER; anything else (true, "NaN", 1e400, NaN) is a malformed payload."""
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}(?:\.\d{1,20})?", value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _malformed(where, f"{field} is {shown(value)}, not a number")
    try:
        result = float(value)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result) or abs(result) > MAX_NUMBER:
        raise _malformed(where, f"{field} is {shown(value)}, not a usable number")
    return result


def timestamp(value: Any, field: str, where: str) -> datetime | None:
    """An RFC 3339 time (`2026-10-01T00:00:00Z`, `2026-09-30T17:00:00.000-07:00`), or None."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _TIME.fullmatch(value.strip()):
        raise _malformed(where, f"{field} is {shown(value)}, not an RFC 3339 time")
    text = re.sub(r"(\.\d{6})\d+", r"\1", value.strip())
    try:
        return datetime.fromisoformat(text.replace("z", "Z")).astimezone(UTC)
    except ValueError:
        raise _malformed(where, f"{field} is {shown(value)}, not a valid time") from None


def _last(path: str) -> str:
    """`zones/us-central1-a/machineTypes/a3-highgpu-8g` (or a URL) -> `a3-highgpu-8g`."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def quota_of(item: Any, where: str, scope: str = "region") -> Quota:
    """One `quotas[]` entry (see quota_map.classify for where it goes)."""
    if not isinstance(item, dict):
        raise _malformed(where, f"a quota is {_kind(item)}")
    metric = _text(item, "metric", where)
    if not metric:
        raise _malformed(where, "a quota has no metric")
    limit = number(item.get("limit"), f"{metric}: limit", where)
    used = number(item.get("usage", 0), f"{metric}: usage", where)
    kind = classify(metric)
    return Quota(
        code=metric,
        name=metric,
        group=kind.group,
        market=kind.market,
        resource=kind.resource,
        limit=limit,
        used=used,
        scope="global" if scope == "global" else "region",
        gpus=kind.gpus,
    )


def read_region(item: Any, where: str) -> tuple[str, RegionQuotas]:
    if not isinstance(item, dict):
        raise _malformed(where, f"a region is {_kind(item)}")
    name = _text(item, "name", where)
    if not name:
        raise _malformed(where, "a region has no name")
    where = f"{where}: {name}"
    zones = sorted(
        _last(z) for z in _list(item, "zones", where, optional=True) if isinstance(z, str)
    )
    quotas = [quota_of(q, where) for q in _list(item, "quotas", where, optional=True)]
    return name, RegionQuotas(quotas, zones, _text(item, "status", where))


def _aggregated(payload: dict[str, Any], key: str, where: str) -> Iterator[tuple[str, Any]]:
    """(zone, entry) of an aggregatedList page: `items` keyed `zones/<zone>`, each with a
    list under `key` or only a `warning` (no results in that zone)."""
    items = _object(payload, "items", where)
    for scope, scoped in items.items():
        if not isinstance(scoped, dict):
            raise _malformed(where, f"items[{shown(scope)}] is {_kind(scoped)}")
        if not str(scope).startswith("zones/"):
            continue
        zone = str(scope).removeprefix("zones/")
        for entry in _list(scoped, key, f"{where}: {zone}", optional=True):
            if not isinstance(entry, dict):
                raise _malformed(where, f"an entry of {zone} is {_kind(entry)}")
            yield zone, entry


def _unreachable(payload: dict[str, Any], where: str) -> list[Note]:
    """A note for each region with zones the aggregated list could not reach."""
    zones = []
    for zone in _list(payload, "unreachables", where, optional=True):
        if not isinstance(zone, str):
            raise _malformed(where, f"unreachables holds {shown(zone)}, not a zone")
        zones.append(_last(zone))
    regions = sorted({region_of_zone(z) for z in zones})
    return [
        (
            region,
            "zones that did not answer (their reservations are missing): "
            + ", ".join(sorted(z for z in zones if region_of_zone(z) == region)),
        )
        for region in regions
    ]


def _accelerators(properties: Mapping[str, Any], where: str) -> tuple[str, int]:
    """(canonical GPU model, count) of `guestAccelerators[]`."""
    model, count = "", 0
    for accelerator in _list(properties, "guestAccelerators", where, optional=True):
        if not isinstance(accelerator, dict):
            raise _malformed(where, f"a guest accelerator is {_kind(accelerator)}")
        kind = _last(_text(accelerator, "acceleratorType", where))
        known = GPU_MODELS.get(kind)
        model = known[0] if known else model
        count += int(number(accelerator.get("acceleratorCount", 0), "acceleratorCount", where))
    return model, count


def _shape(
    machine_type: str, properties: Mapping[str, Any], where: str
) -> tuple[float | None, str, int]:
    """(vCPUs, GPU model, GPU count) of a reserved VM: its accelerators, else shoal's
    built-in machine types."""
    gpu, count = _accelerators(properties, where)
    shape = next((s for s in builtin_shapes() if s.name == machine_type), None)
    if shape is None:
        return None, gpu, count
    if not count and shape.accelerator:
        gpu = GPU_MODELS.get(shape.accelerator, ("", 0.0))[0]
        count = shape.gpu_count
    return shape.vcpus, gpu, count


def read_reservation(item: dict[str, Any], zone: str, where: str) -> Reservation | None:
    """One reservation of VMs (None for an aggregate one: TPUs): `total` its count,
    `available` the count not in use; from now (it exists) to `deleteAtTime` if set."""
    name = _text(item, "name", where)
    where = f"{where}: reservation {name}"
    specific = item.get("specificReservation")
    if specific is None:
        return None
    if not isinstance(specific, dict):
        raise _malformed(where, f"specificReservation is {_kind(specific)}")
    total = int(number(specific.get("count", 0), "specificReservation.count", where))
    in_use = int(number(specific.get("inUseCount", 0), "specificReservation.inUseCount", where))
    properties = _object(specific, "instanceProperties", where)
    machine_type = _last(_text(properties, "machineType", where))
    vcpus, gpu, gpu_count = _shape(machine_type, properties, where)
    return Reservation(
        id=name,
        kind="reservation",
        instance_type=machine_type,
        total=total,
        available=max(0, total - in_use),
        start=None,
        end=timestamp(item.get("deleteAtTime"), "deleteAtTime", where),
        zone=_last(_text(item, "zone", where)) or zone,
        state=_text(item, "status", where),
        vcpus=vcpus,
        gpu=gpu,
        gpus=gpu_count,
    )


def read_future(item: dict[str, Any], zone: str, where: str) -> tuple[Reservation | None, str]:
    """(a future reservation's capacity still to come, its procurement state). What it has
    delivered (`fulfilledCount`) is in the reservations it created, listed as such; one
    that ended, or is not approved yet, holds nothing (None)."""
    name = _text(item, "name", where)
    where = f"{where}: future reservation {name}"
    status = _object(item, "status", where)
    state = _text(status, "procurementStatus", where).upper()
    if state in _ENDED or state in _UNAPPROVED:
        return None, state
    sku = _object(item, "specificSkuProperties", where)
    if not sku:
        return None, state  # an aggregate (TPU) future reservation
    total = int(number(sku.get("totalCount", 0), "specificSkuProperties.totalCount", where))
    delivered = int(number(status.get("fulfilledCount", 0), "status.fulfilledCount", where))
    remaining = total - delivered
    if remaining <= 0:
        return None, state
    window = _object(item, "timeWindow", where)
    start = timestamp(window.get("startTime"), "timeWindow.startTime", where)
    end = timestamp(window.get("endTime"), "timeWindow.endTime", where)
    duration = _object(window, "duration", where)
    if end is None and start is not None and duration:
        seconds = number(duration.get("seconds", 0), "timeWindow.duration.seconds", where)
        end = start + timedelta(seconds=seconds)
    properties = _object(sku, "instanceProperties", where)
    machine_type = _last(_text(properties, "machineType", where))
    vcpus, gpu, gpu_count = _shape(machine_type, properties, where)
    reservation = Reservation(
        id=name,
        kind="future-reservation",
        instance_type=machine_type,
        total=remaining,
        available=remaining,
        start=start,
        end=end,
        zone=_last(_text(item, "zone", where)) or zone,
        state=state,
        vcpus=vcpus,
        gpu=gpu,
        gpus=gpu_count,
    )
    return reservation, state


def binding_notes(region: str, quotas: Sequence[Quota]) -> list[str]:
    """Where the project-wide GPUS_ALL_REGIONS leaves less than a region's GPU metric:
    `GPUS_ALL_REGIONS (project: 8, 2 used) binds before NVIDIA_H100_GPUS in us-central1
    (16)`."""
    project = next((q for q in quotas if q.code.upper() == GPUS_ALL_REGIONS), None)
    if project is None:
        return []
    left = project.limit - (project.used or 0)
    notes = []
    for quota in quotas:
        if quota.resource[0] != "gpu" or quota.code.upper().startswith(PREEMPTIBLE):
            continue
        if left < quota.limit - (quota.used or 0):
            notes.append(
                f"{GPUS_ALL_REGIONS} (project: {_count(project.limit)}, {_count(project.used)} "
                f"used) binds before {quota.code} in {region} ({_count(quota.limit)}"
                + (f", {_count(quota.used)} used)" if quota.used else ")")
            )
    return notes


def _count(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"
