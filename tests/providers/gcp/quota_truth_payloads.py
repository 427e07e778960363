"""A GCP project written afresh for the quota-truth tests (issue 24, item 5), in the Compute
Engine v1 discovery document's shapes:

- Region (regions.list `items[]`): {kind, id, creationTimestamp, name, description, status,
  zones[], quotas[] of Quota {metric, limit, usage, owner}, quotaStatusWarning {code,
  message, data[] of {key, value}}, selfLink, supportsPzs}; `quotaStatusWarning` is
  "[Output Only] Warning of fetching the `quotas` field for this region. This field is
  populated only if fetching of the `quotas` field fails."
  (https://cloud.google.com/compute/docs/reference/rest/v1/regions)
- Project (projects.get): {kind, id, name, quotas[], commonInstanceMetadata, ...}
  (https://cloud.google.com/compute/docs/reference/rest/v1/projects)

The project: in us-central1 eight H100s of NVIDIA_H100_GPUS are unused, but the
project-wide GPUS_ALL_REGIONS (8) has 6 in use elsewhere: 2 can really be launched. In
us-east5 the API could not fetch the quotas. europe-west4 answers normally.
"""

from __future__ import annotations

import zlib
from typing import Any

from tests.providers.gcp.account_payloads import ProjectApi, aggregated
from tests.providers.gcp.payloads import PROJECT

SELF = f"https://www.googleapis.com/compute/v1/projects/{PROJECT}"


def metric(name: str, limit: float, usage: float = 0.0) -> dict[str, Any]:
    return {"metric": name, "limit": limit, "usage": usage}


def region(
    name: str, zones: str, quotas: list[dict[str, Any]] | None, **more: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "compute#region",
        "id": str(zlib.crc32(name.encode())),
        "creationTimestamp": "1969-12-31T16:00:00.000-08:00",
        "name": name,
        "description": name,
        "status": "UP",
        "zones": [f"{SELF}/zones/{name}-{z}" for z in zones],
        "selfLink": f"{SELF}/regions/{name}",
        "supportsPzs": True,
        **more,
    }
    if quotas is not None:
        out["quotas"] = quotas
    return out


def central() -> dict[str, Any]:
    return region(
        "us-central1",
        "abcf",
        [
            metric("CPUS", 72.0, 4.0),
            metric("A3_CPUS", 832.0),
            metric("PREEMPTIBLE_CPUS", 0.0),
            metric("NVIDIA_H100_GPUS", 8.0),
            metric("PREEMPTIBLE_NVIDIA_H100_GPUS", 16.0, 1.0),
            metric("NVIDIA_L4_GPUS", 1.0, 1.0),
            metric("IN_USE_ADDRESSES", 8.0, 1.0),
        ],
    )


def east5_unknown() -> dict[str, Any]:
    return region(
        "us-east5",
        "abc",
        None,
        quotaStatusWarning={
            "code": "UNREACHABLE",
            "message": "Quota information is temporarily unavailable for this region.",
            "data": [{"key": "scope", "value": "regions/us-east5"}],
        },
    )


def west4() -> dict[str, Any]:
    return region(
        "europe-west4",
        "abc",
        [metric("CPUS", 24.0), metric("G2_CPUS", 48.0), metric("NVIDIA_L4_GPUS", 4.0)],
    )


def project() -> dict[str, Any]:
    return {
        "kind": "compute#project",
        "id": "987654321012",
        "creationTimestamp": "2024-02-14T08:00:00.000-08:00",
        "name": PROJECT,
        "commonInstanceMetadata": {"kind": "compute#metadata", "fingerprint": "x7n1Q=="},
        "quotas": [
            metric("CPUS_ALL_REGIONS", 1024.0, 40.0),
            metric("GPUS_ALL_REGIONS", 8.0, 6.0),
            metric("FIREWALLS", 200.0, 12.0),
        ],
        "selfLink": SELF,
        "defaultServiceAccount": "987654321012-compute@developer.gserviceaccount.com",
        "xpnProjectStatus": "UNSPECIFIED_XPN_PROJECT_STATUS",
        "defaultNetworkTier": "PREMIUM",
    }


def api() -> ProjectApi:
    """The project behind the loopback Compute Engine API (regions on one page each)."""
    return ProjectApi(
        regions=[central(), east5_unknown(), west4()],
        region_page_size=1,
        project=project(),
        reservations=[aggregated("reservation", "reservations", {})],
        futures=[aggregated("futureReservation", "futureReservations", {})],
    )
