"""Reading a GCP project's capacity payloads: regions' and the project's quotas as Quotas,
reservations and future reservations as Reservations, and the notes they call for. Pure
functions; the requests are accounts.py's. Each page is checked whole against its model
first (providers/gcp/payloads.py), so what is read here has its types.

Metric meanings: providers/gcp/quota_map.py. Usage per machine type is not asked: a quota's
`usage` is what is in use.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from providers.accounts.model import Quota, Reservation
from providers.gcp.quota_map import classify
from providers.gcp.shapes import GPU_MODELS, builtin_shapes, region_of_zone

if TYPE_CHECKING:
    from providers.gcp import payloads

T = TypeVar("T")
Note = tuple[str, str]  # (the region it is about, "" for every region; the note)
# Procurement states whose capacity is not (or no longer) to come.
ENDED = frozenset({"CANCELLED", "DECLINED", "FAILED", "FAILED_PARTIALLY_FULFILLED", "FULFILLED"})
UNAPPROVED = frozenset({"DRAFTING", "PENDING_APPROVAL"})


@dataclass
class RegionQuotas:
    quotas: list[Quota] = field(default_factory=list)
    zones: list[str] = field(default_factory=list)
    status: str = ""
    unknown: str = ""  # why the region's quotas are unknown ("" when read)


# -- pages -----------------------------------------------------------------------------------


def regions_page(page: Any, where: str) -> tuple[list[tuple[str, RegionQuotas]], str]:
    """A regions.list page's regions (name, quotas and zones), and its nextPageToken."""
    from providers.gcp.payloads import REGIONS

    read = REGIONS.read(page, where)
    return [read_region(item) for item in read.get("items", [])], read.get("nextPageToken") or ""


def project_quotas(page: Any, where: str) -> list[Quota]:
    """projects.get: the project-wide quotas (CPUS_ALL_REGIONS, GPUS_ALL_REGIONS, ...)."""
    from providers.gcp.payloads import PROJECT

    return [quota_of(item, "global") for item in PROJECT.read(page, where).get("quotas") or []]


@dataclass
class Reserved:
    """What the reservation lists say, page by page: reservations, notes, and the future
    reservations not approved yet (region -> `name (state)`)."""

    found: list[Reservation] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    pending: dict[str, list[str]] = field(default_factory=dict)

    def reservations_page(self, page: Any, where: str) -> str:
        """Fold a reservations.aggregatedList page in; returns its nextPageToken."""
        from providers.gcp.payloads import RESERVATIONS

        read = RESERVATIONS.read(page, where)
        for zone, scoped in _zones(read):
            for item in scoped.get("reservations") or []:
                reservation = read_reservation(item, zone)
                if reservation is None:
                    self.notes.append(
                        (
                            region_of_zone(zone),
                            f"reservation {item.get('name') or ''} in {zone} reserves aggregate "
                            "resources (TPUs), not VMs; not shown",
                        )
                    )
                else:
                    self.found.append(reservation)
        self.notes.extend(_unreachable(read))
        return read.get("nextPageToken") or ""

    def future_page(self, page: Any, where: str) -> str:
        """Fold a futureReservations.aggregatedList page in; returns its nextPageToken."""
        from providers.gcp.payloads import FUTURE_RESERVATIONS

        read = FUTURE_RESERVATIONS.read(page, where)
        for zone, scoped in _zones(read):
            for item in scoped.get("futureReservations") or []:
                reservation, state = read_future(item, zone)
                if reservation is not None:
                    self.found.append(reservation)
                elif state in UNAPPROVED:
                    named = f"{item.get('name') or ''} ({state})"
                    self.pending.setdefault(region_of_zone(zone), []).append(named)
        self.notes.extend(_unreachable(read))
        return read.get("nextPageToken") or ""

    def result(self) -> tuple[list[Reservation], list[Note]]:
        notes = list(self.notes)
        for region, names in sorted(self.pending.items()):
            listed = ", ".join(sorted(names))
            notes.append((region, f"future reservations not approved yet, not counted: {listed}"))
        return self.found, notes


@dataclass
class TypeZones:
    """What machineTypes.aggregatedList says of the machine types of `series` (a2, g2...),
    page by page: region -> machine type -> the zones that offer it, and the zones that did
    not answer. Entries of other series (a server that ignored the filter) are left out."""

    series: frozenset[str]
    found: dict[str, dict[str, set[str]]] = field(default_factory=dict)
    unreachable: set[str] = field(default_factory=set)

    def page(self, page: Any, where: str) -> str:
        """Fold a machineTypes.aggregatedList page in (each entry's name; the zone is its
        scope's); returns its nextPageToken."""
        from providers.gcp.payloads import MACHINE_TYPES

        read = MACHINE_TYPES.read(page, where)
        for zone, scoped in _zones(read):
            region = region_of_zone(zone)
            for item in scoped.get("machineTypes") or []:
                name = item.get("name") or ""
                if name.split("-", 1)[0] in self.series:
                    self.found.setdefault(region, {}).setdefault(name, set()).add(zone)
        self.unreachable.update(_last(z) for z in read.get("unreachables") or [])
        return read.get("nextPageToken") or ""

    def of(self, region: str) -> dict[str, list[str]]:
        """The region's machine types of the series with the zones that offer them."""
        return {name: sorted(zones) for name, zones in sorted(self.found.get(region, {}).items())}

    def cover(self, region: str) -> list[str]:
        """The names the region's list answers for (a type of them not listed is offered in
        none of its zones): none when a zone of the region did not answer."""
        return [] if self.missing(region) else [f"{series}-*" for series in sorted(self.series)]

    def missing(self, region: str) -> list[str]:
        return sorted(z for z in self.unreachable if region_of_zone(z) == region)


def _zones(read: payloads.Aggregated[T]) -> Iterator[tuple[str, T]]:
    """(zone, its scope) of an aggregatedList page: `items` keyed `zones/<zone>`; other
    scopes (regions, global) are not read."""
    for scope, scoped in (read.get("items") or {}).items():
        if scope.startswith("zones/"):
            yield scope.removeprefix("zones/"), scoped


def _unreachable(read: payloads.Aggregated[Any]) -> list[Note]:
    """A note for each region with zones the aggregated list could not reach."""
    zones = [_last(zone) for zone in read.get("unreachables") or []]
    return [
        (
            region,
            "zones that did not answer (their reservations are missing): "
            + ", ".join(sorted(z for z in zones if region_of_zone(z) == region)),
        )
        for region in sorted({region_of_zone(z) for z in zones})
    ]


# -- entries ---------------------------------------------------------------------------------


def _last(path: str) -> str:
    """`zones/us-central1-a/machineTypes/a3-highgpu-8g` (or a URL) -> `a3-highgpu-8g`."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def quota_of(item: payloads.Quota, scope: str = "region") -> Quota:
    """One `quotas[]` entry (see quota_map.classify for where it goes)."""
    metric = item["metric"]
    kind = classify(metric)
    return Quota(
        code=metric,
        name=metric,
        group=kind.group,
        market=kind.market,
        resource=kind.resource,
        limit=item["limit"],
        used=item.get("usage", 0.0),
        scope="global" if scope == "global" else "region",
        gpus=kind.gpus,
        within=kind.within if scope != "global" else (),
    )


def read_region(item: payloads.Region) -> tuple[str, RegionQuotas]:
    """One region of regions.list. A region with `quotaStatusWarning` ({code, message,
    data[]}: the API "is populated only if fetching of the quotas field fails") has
    unknown quotas: whatever `quotas[]` it carries is left out, and `unknown` says why."""
    zones = sorted(_last(zone) for zone in item.get("zones") or [])
    warning = item.get("quotaStatusWarning")
    if warning is not None:
        return item["name"], RegionQuotas([], zones, item.get("status") or "", _said(warning))
    quotas = [quota_of(quota) for quota in item.get("quotas") or []]
    return item["name"], RegionQuotas(quotas, zones, item.get("status") or "")


def _said(warning: payloads.StatusWarning) -> str:
    """`regions.list could not read the region's quotas (CODE: message; key=value)`."""
    code = warning.get("code") or "no code"
    message = " ".join((warning.get("message") or "").split())
    data = "; ".join(
        f"{d.get('key') or ''}={d.get('value') or ''}" for d in warning.get("data") or []
    )
    detail = ": ".join(part for part in (code, message) if part) + (f"; {data}" if data else "")
    return f"regions.list could not read the region's quotas ({detail})"


def _shape(properties: payloads.InstanceProperties) -> tuple[str, float | None, str, int]:
    """(machine type, vCPUs, GPU model, GPU count) of a reserved VM: its accelerators, else
    shoal's built-in machine types."""
    machine_type = _last(properties.get("machineType") or "")
    gpu, count = "", 0
    for accelerator in properties.get("guestAccelerators") or []:
        known = GPU_MODELS.get(_last(accelerator.get("acceleratorType") or ""))
        gpu = known[0] if known else gpu
        count += int(accelerator.get("acceleratorCount", 0))
    shape = next((s for s in builtin_shapes() if s.name == machine_type), None)
    if shape is None:
        return machine_type, None, gpu, count
    if not count and shape.accelerator:
        gpu = GPU_MODELS.get(shape.accelerator, ("", 0.0))[0]
        count = shape.gpu_count
    return machine_type, shape.vcpus, gpu, count


def read_reservation(item: payloads.Reservation, zone: str) -> Reservation | None:
    """One reservation of VMs (None for an aggregate one: TPUs): `total` its count,
    `available` the count not in use; from now (it exists) to `deleteAtTime` if set."""
    specific = item.get("specificReservation")
    if specific is None:
        return None
    total = int(specific.get("count", 0))
    in_use = int(specific.get("inUseCount", 0))
    machine_type, vcpus, gpu, gpu_count = _shape(specific.get("instanceProperties") or {})
    return Reservation(
        id=item.get("name") or "",
        kind="reservation",
        instance_type=machine_type,
        total=total,
        available=max(0, total - in_use),
        start=None,
        end=item.get("deleteAtTime"),
        zone=_last(item.get("zone") or "") or zone,
        state=item.get("status") or "",
        vcpus=vcpus,
        gpu=gpu,
        gpus=gpu_count,
    )


def read_future(item: payloads.FutureReservation, zone: str) -> tuple[Reservation | None, str]:
    """(a future reservation's capacity still to come, its procurement state). What it has
    delivered (`fulfilledCount`) is in the reservations it created, listed as such; one
    that ended, or is not approved yet, holds nothing (None)."""
    status = item.get("status") or {}
    state = (status.get("procurementStatus") or "").upper()
    sku = item.get("specificSkuProperties")
    if state in ENDED or state in UNAPPROVED or not sku:
        return None, state  # no sku: an aggregate (TPU) future reservation
    remaining = int(sku.get("totalCount", 0)) - int(status.get("fulfilledCount", 0))
    if remaining <= 0:
        return None, state
    window = item.get("timeWindow") or {}
    start, end = window.get("startTime"), window.get("endTime")
    duration = window.get("duration")
    if end is None and start is not None and duration:
        end = _after(start, duration.get("seconds", 0.0))
    machine_type, vcpus, gpu, gpu_count = _shape(sku.get("instanceProperties") or {})
    reservation = Reservation(
        id=item.get("name") or "",
        kind="future-reservation",
        instance_type=machine_type,
        total=remaining,
        available=remaining,
        start=start,
        end=end,
        zone=_last(item.get("zone") or "") or zone,
        state=state,
        vcpus=vcpus,
        gpu=gpu,
        gpus=gpu_count,
    )
    return reservation, state


def _after(start: datetime, seconds: float) -> datetime | None:
    """`start` + `seconds`, or None (no end known) past the last date Python has."""
    try:
        return start + timedelta(seconds=seconds)
    except OverflowError:
        return None
