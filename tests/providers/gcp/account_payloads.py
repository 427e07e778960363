"""GCP account payloads in the Compute Engine API's documented formats, and a loopback API
that serves them (regions with quotas, the project, reservations, future reservations).

Formats from the Compute Engine v1 reference:
- regions.list (`items[]` of Region {name, status, zones[], quotas[] of {metric, limit,
  usage, owner}}, `nextPageToken`):
  https://cloud.google.com/compute/docs/reference/rest/v1/regions/list
- projects.get (`quotas[]`): https://cloud.google.com/compute/docs/reference/rest/v1/projects
- reservations.aggregatedList (`items` keyed `zones/<zone>` -> {reservations[]} or
  {warning: NO_RESULTS_ON_PAGE}; `specificReservation.count`/`inUseCount` are int64, so
  JSON strings; `deleteAtTime`; `unreachables[]`):
  https://cloud.google.com/compute/docs/reference/rest/v1/reservations/aggregatedList
- futureReservations.aggregatedList (`specificSkuProperties.totalCount` int64 string,
  `timeWindow` {startTime, endTime | duration}, `status` {procurementStatus,
  fulfilledCount}): https://cloud.google.com/compute/docs/reference/rest/v1/futureReservations
- machineTypes.aggregatedList (`items` keyed `zones/<zone>` -> {machineTypes[]} or
  {warning}; `filter` a regular expression the whole field must match, `name eq "..."`):
  https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/aggregatedList
- Errors: `{"error": {"code", "message", "status"}}` (payloads.error).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from tests.providers.apiserver import ApiServer, Reply
from tests.providers.gcp.payloads import (
    MACHINE_TYPES_PATH,
    PROJECT,
    REGIONS_PATH,
    TOKEN,
    error,
    machine_type,
)

PROJECT_PATH = f"/compute/v1/projects/{PROJECT}"
RESERVATIONS_PATH = f"{PROJECT_PATH}/aggregated/reservations"
FUTURE_PATH = f"{PROJECT_PATH}/aggregated/futureReservations"
API = "https://compute.googleapis.com/compute/v1/projects/proj-1"


def quota(metric: str, limit: Any, usage: Any = 0.0) -> dict[str, Any]:
    return {"metric": metric, "limit": limit, "usage": usage}


def region(name: str, zones: list[str], quotas: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "compute#region",
        "id": str(1000 + len(name)),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": name,
        "description": name,
        "status": "UP",
        "selfLink": f"{API}/regions/{name}",
        "zones": [f"{API}/zones/{name}-{z}" for z in zones],
        "quotas": quotas,
        "supportsPzs": False,
    }


def us_central1() -> dict[str, Any]:
    return region(
        "us-central1",
        ["c", "a", "b", "f"],
        [
            quota("CPUS", 24.0, 8.0),
            quota("DISKS_TOTAL_GB", 4096.0, 100.0),
            quota("N2_CPUS", 24.0, 4.0),
            quota("A3_CPUS", 416.0, 0.0),
            quota("PREEMPTIBLE_CPUS", 0.0, 0.0),
            quota("NVIDIA_H100_GPUS", 16.0, 0.0),
            quota("PREEMPTIBLE_NVIDIA_H100_GPUS", 16.0, 0.0),
            quota("NVIDIA_H100_MEGA_GPUS", 8.0, 0.0),
            quota("NVIDIA_A100_80GB_GPUS", 4.0, 0.0),
            quota("NVIDIA_L4_GPUS", 4.0, 1.0),
            quota("NVIDIA_T4_VWS_GPUS", 1.0, 0.0),
            quota("COMMITTED_NVIDIA_A100_GPUS", 0.0, 0.0),
            # In use above the limit (a lowered quota): kept as the API says.
            quota("INSTANCES", 10.0, 14.0),
            quota("SOME_FUTURE_THING", 3.0, 1.0),
        ],
    )


def europe_west4() -> dict[str, Any]:
    return region(
        "europe-west4",
        ["a", "b"],
        [quota("CPUS", 32.0, 0.0), quota("NVIDIA_L4_GPUS", 8.0, 0.0)],
    )


def us_east1() -> dict[str, Any]:
    return region("us-east1", ["b", "c", "d"], [quota("CPUS", 24.0, 0.0)])


def project() -> dict[str, Any]:
    return {
        "kind": "compute#project",
        "id": "123456789",
        "name": PROJECT,
        "quotas": [
            quota("SNAPSHOTS", 5000.0, 0.0),
            quota("NETWORKS", 15.0, 1.0),
            quota("CPUS_ALL_REGIONS", 64.0, 12.0),
            quota("GPUS_ALL_REGIONS", 8.0, 2.0),
        ],
        "selfLink": API,
        "defaultServiceAccount": "1234-compute@developer.gserviceaccount.com",
        "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
    }


def reservation(
    name: str,
    zone: str,
    machine_type: str,
    count: Any,
    in_use: Any,
    *,
    accelerators: list[tuple[str, int]] | None = None,
    delete_at: str = "",
    status: str = "READY",
) -> dict[str, Any]:
    properties: dict[str, Any] = {"machineType": machine_type}
    if accelerators:
        properties["guestAccelerators"] = [
            {"acceleratorType": kind, "acceleratorCount": n} for kind, n in accelerators
        ]
    item: dict[str, Any] = {
        "kind": "compute#reservation",
        "id": str(zlib.crc32(name.encode())),
        "creationTimestamp": "2026-08-01T10:00:00.000-07:00",
        "selfLink": f"{API}/zones/{zone}/reservations/{name}",
        "zone": f"{API}/zones/{zone}",
        "name": name,
        "specificReservation": {
            "instanceProperties": properties,
            "count": count,
            "inUseCount": in_use,
            "assuredCount": count,
        },
        "specificReservationRequired": True,
        "status": status,
        "shareSettings": {"shareType": "LOCAL"},
    }
    if delete_at:
        item["deleteAtTime"] = delete_at
    return item


def future(
    name: str,
    zone: str,
    machine_type: str,
    total: Any,
    state: str,
    *,
    start: str = "2026-10-01T00:00:00Z",
    end: str | None = "2026-10-15T00:00:00Z",
    duration: int | None = None,
    fulfilled: str = "0",
) -> dict[str, Any]:
    window: dict[str, Any] = {"startTime": start}
    if end is not None:
        window["endTime"] = end
    if duration is not None:
        window["duration"] = {"seconds": str(duration)}
    return {
        "kind": "compute#futureReservation",
        "id": str(zlib.crc32(name.encode())),
        "creationTimestamp": "2026-08-20T09:00:00.000-07:00",
        "selfLink": f"{API}/zones/{zone}/futureReservations/{name}",
        "zone": f"{API}/zones/{zone}",
        "name": name,
        "namePrefix": name,
        "specificSkuProperties": {
            "instanceProperties": {"machineType": machine_type},
            "totalCount": total,
        },
        "timeWindow": window,
        "status": {
            "procurementStatus": state,
            "autoCreatedReservations": [],
            "fulfilledCount": fulfilled,
        },
        "planningStatus": "SUBMITTED",
        "autoDeleteAutoCreatedReservations": True,
    }


def no_results(zone: str) -> dict[str, Any]:
    return {
        "warning": {
            "code": "NO_RESULTS_ON_PAGE",
            "message": f"There are no results for scope 'zones/{zone}' on this page.",
            "data": [{"key": "scope", "value": f"zones/{zone}"}],
        }
    }


def aggregated(kind: str, key: str, by_zone: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """One aggregatedList page; a zone with nothing gets the API's warning instead."""
    return {
        "kind": f"compute#{kind}AggregatedList",
        "id": f"projects/{PROJECT}/aggregated/{key}",
        "items": {
            f"zones/{zone}": {key: entries} if entries else no_results(zone)
            for zone, entries in by_zone.items()
        },
        "selfLink": f"{API}/aggregated/{key}",
    }


def reservation_pages() -> list[dict[str, Any]]:
    return [
        aggregated(
            "reservation",
            "reservations",
            {
                "us-central1-a": [
                    reservation(
                        "res-h100",
                        "us-central1-a",
                        "a3-highgpu-8g",
                        "4",
                        "1",
                        delete_at="2026-12-01T00:00:00Z",
                    ),
                ],
                "us-east1-b": [],
            },
        ),
        aggregated(
            "reservation",
            "reservations",
            {
                "us-central1-b": [
                    reservation(
                        "res-t4",
                        "us-central1-b",
                        "n1-standard-8",
                        "2",
                        "2",
                        accelerators=[("nvidia-tesla-t4", 1)],
                    ),
                ],
                "europe-west4-a": [
                    reservation("res-l4", "europe-west4-a", "g2-standard-8", "3", "0"),
                ],
            },
        ),
    ]


def future_pages() -> list[dict[str, Any]]:
    return [
        aggregated(
            "futureReservation",
            "futureReservations",
            {
                "us-central1-b": [
                    future("fr-h200", "us-central1-b", "a3-ultragpu-8g", "2", "APPROVED"),
                    future(
                        "fr-mega",
                        "us-central1-b",
                        "a3-megagpu-8g",
                        "4",
                        "PROVISIONING",
                        end=None,
                        duration=7 * 86400,
                        fulfilled="1",
                    ),
                    future("fr-done", "us-central1-b", "a3-highgpu-8g", "2", "FULFILLED"),
                    future("fr-asked", "us-central1-b", "a3-highgpu-8g", "2", "PENDING_APPROVAL"),
                ],
            },
        ),
    ]


@dataclass
class ProjectApi:
    """The project behind a bearer token; lists paged with opaque `pageToken`s. Paths in
    `refused` answer 403 PERMISSION_DENIED quoting the token (a careless server)."""

    regions: list[dict[str, Any]] = field(
        default_factory=lambda: [us_central1(), europe_west4(), us_east1()]
    )
    region_page_size: int = 2
    project: dict[str, Any] = field(default_factory=project)
    reservations: list[dict[str, Any]] = field(default_factory=reservation_pages)
    futures: list[dict[str, Any]] = field(default_factory=future_pages)
    refused: set[str] = field(default_factory=set)
    # machineTypes.aggregatedList pages (None: not served here); `filter` is applied.
    machine_types: list[dict[str, Any]] | None = None
    filters: list[str] = field(default_factory=list)  # the `filter` each list call sent

    def serve(self, server: ApiServer) -> None:
        chunks = [
            self.regions[i : i + self.region_page_size]
            for i in range(0, len(self.regions), self.region_page_size)
        ] or [[]]
        server.route(
            REGIONS_PATH,
            self.pager(REGIONS_PATH, [{"kind": "compute#regionList", "items": c} for c in chunks]),
        )
        server.route(PROJECT_PATH, self.pager(PROJECT_PATH, [self.project]))
        server.route(RESERVATIONS_PATH, self.pager(RESERVATIONS_PATH, self.reservations))
        server.route(FUTURE_PATH, self.pager(FUTURE_PATH, self.futures))
        if self.machine_types is not None:
            server.route(MACHINE_TYPES_PATH, self.pager(MACHINE_TYPES_PATH, self.machine_types))

    def pager(self, path: str, pages: list[dict[str, Any]]) -> Any:
        def handle(query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
            sent = headers.get("authorization", "")
            if sent != f"Bearer {TOKEN}":
                return error(
                    401,
                    "UNAUTHENTICATED",
                    f"Request had invalid authentication credentials ({sent}).",
                )
            if path in self.refused:
                return error(
                    403,
                    "PERMISSION_DENIED",
                    f"Required permission for '{path}' is missing (token {TOKEN}).",
                )
            token = query.get("pageToken", [""])[0]
            index = int(token.removeprefix("page-")) if token else 0
            page = dict(pages[index])
            if "filter" in query:
                self.filters.append(query["filter"][0])
                page = _filtered(page, query["filter"][0])
            if index + 1 < len(pages):
                page["nextPageToken"] = f"page-{index + 1}"
            return Reply.json(page)

        return handle


def gpu_machine_type_pages() -> list[dict[str, Any]]:
    """machineTypes.aggregatedList in two pages: us-central1's a3-highgpu-8g in zones a and c,
    g2-standard-8 in b, an N2 beside them (a filter leaves it out), europe-west4's
    a3-highgpu-8g in b, a zone without machine types, and us-east1-d that did not answer."""

    def a3(zone: str) -> dict[str, Any]:
        return machine_type("a3-highgpu-8g", 208, 1872 * 1024, zone, "nvidia-h100-80gb", 8)

    empty = "zones/europe-west4-c"
    return [
        {
            "kind": "compute#machineTypeAggregatedList",
            "id": f"projects/{PROJECT}/aggregated/machineTypes",
            "items": {
                "zones/us-central1-a": {
                    "machineTypes": [
                        a3("us-central1-a"),
                        machine_type("n2-standard-4", 4, 16384, "us-central1-a"),
                    ]
                },
                "zones/us-central1-b": {
                    "machineTypes": [
                        machine_type("g2-standard-8", 8, 32768, "us-central1-b", "nvidia-l4", 1),
                    ]
                },
            },
        },
        {
            "kind": "compute#machineTypeAggregatedList",
            "items": {
                "zones/us-central1-c": {"machineTypes": [a3("us-central1-c")]},
                "zones/europe-west4-b": {"machineTypes": [a3("europe-west4-b")]},
                empty: {
                    "warning": {
                        "code": "NO_RESULTS_ON_PAGE",
                        "message": f"There are no results for scope '{empty}' on this page.",
                        "data": [{"key": "scope", "value": empty}],
                    }
                },
            },
            "unreachables": ["zones/us-east1-d"],
        },
    ]


def _filtered(page: dict[str, Any], expression: str) -> dict[str, Any]:
    """`page` with the machine types a `name eq "REGEX"` filter keeps (the whole name must
    match, as Compute Engine's regular-expression filters do)."""
    found = re.fullmatch(r'name eq "(.+)"', expression)
    assert found, f"unexpected filter {expression!r}"
    pattern = re.compile(found.group(1))
    items = {}
    for scope, scoped in (page.get("items") or {}).items():
        kept = [m for m in scoped.get("machineTypes") or [] if pattern.fullmatch(m["name"])]
        items[scope] = {**scoped, "machineTypes": kept} if "machineTypes" in scoped else scoped
    return {**page, "items": items}
