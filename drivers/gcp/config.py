"""The `gcp` driver's settings: an instance's config (`[drivers."gcp/NAME"]`) and a
definition's options (`-o`), as pydantic models (errors name the key or option)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from drivers.definitions.fields import ENTRY, ENV, Command, Env
from providers.core.errors import is_secret_name, shown
from providers.core.strict import Count, Strict

_ZONE = re.compile(r"^[a-z]+(-[a-z0-9]+)+-[a-z]$")
_TYPE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_PROJECT = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$|^[a-z0-9.:-]+$")
# An image: projects/P/global/images/NAME or .../images/family/F, maybe as a full URL.
_IMAGE = re.compile(
    r"^(https://[a-z.]+/compute/v1/)?projects/[a-z0-9.:-]+/global/images/(family/)?"
    r"[a-z][-a-z0-9]{0,62}$"
)
LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
RESERVED_LABEL_PREFIX = "shoal-"
MAX_LABELS = 60  # of Google's 64 per resource, shoal's own take the rest
DEFAULT_IMAGE = "projects/debian-cloud/global/images/family/debian-12"
Fallback = Literal["off", "zones", "types"]
IMAGE = "an image or image family: projects/P/global/images/family/F or projects/P/global/images/N"


def _zone(value: str) -> str:
    if value and not _ZONE.match(value):
        raise ValueError(f"{shown(value)} is not a Compute Engine zone such as us-central1-a")
    return value


def _reservation(value: str) -> str:
    # A reservation's name follows Compute Engine's resource names (RFC 1035, 1-63).
    if (
        value
        and value not in ("any", "none")
        and not re.fullmatch(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", value)
    ):
        raise ValueError(
            f"{shown(value)} is not a reservation name (lowercase letters, digits and -), "
            "any or none"
        )
    return value


def _zones(values: list[str]) -> list[str]:
    return [_zone(v) for v in values]


def _image(value: str) -> str:
    if value and not _IMAGE.match(value):
        raise ValueError(f"{shown(value)} is not {IMAGE}")
    return value


def _machine_type(value: str) -> str:
    if not _TYPE.match(value):
        raise ValueError(f"{shown(value)} is not a machine type name such as e2-standard-4")
    return value


def _project(value: str) -> str:
    if value and not _PROJECT.match(value):
        raise ValueError(f"{shown(value)} is not a project id such as my-project-123")
    return value


def _labels(labels: dict[str, str]) -> dict[str, str]:
    if len(labels) > MAX_LABELS:
        raise ValueError(f"{len(labels)} labels; at most {MAX_LABELS} (Google takes 64)")
    for key, value in labels.items():
        if not LABEL_KEY.match(key) or not LABEL_VALUE.match(value):
            raise ValueError(
                f"label {shown(key)}: keys are 1-63 of [a-z0-9_-] starting with a letter, "
                "values up to 63 of [a-z0-9_-]"
            )
        if key.startswith(RESERVED_LABEL_PREFIX):
            raise ValueError(f"label {shown(key)}: shoal- keys are reserved")
        if is_secret_name(key):
            raise ValueError(
                f"label {shown(key)}: looks like a credential, and labels are readable by "
                "anyone who may list instances; keep secrets out of labels"
            )
    return labels


Zone = Annotated[str, AfterValidator(_zone)]
ImageRef = Annotated[str, AfterValidator(_image)]
MachineType = Annotated[str, AfterValidator(_machine_type)]
Labels = Annotated[dict[str, str], AfterValidator(_labels)]


class GcpConfig(Strict):
    """[drivers."gcp/INSTANCE"] (and gce/...)"""

    project: Annotated[str, AfterValidator(_project)] = Field(
        "", description="default: SHOAL_GCP_PROJECT, [gcp] project, GOOGLE_CLOUD_PROJECT, ..."
    )
    zone: Zone = Field("", description="the zone to launch in (default us-central1-a)")
    zones: Annotated[list[str], AfterValidator(_zones)] = Field(
        [], description="zones tried in order with fallback (default: the region's)"
    )
    network: str = Field("", description="VPC network (default: the project's `default`)")
    subnetwork: str = Field("", description="subnetwork of the zone's region")
    service_account: str = Field("", description="service account email the VM runs as")
    image: ImageRef = Field("", description=IMAGE + f" (default {DEFAULT_IMAGE})")
    disk_gb: Count = Field(0, description="boot disk size, 0 = the image's")
    labels: Labels = Field({}, description="extra labels on the instance and its disk")
    allowed_types: list[str] = Field(
        [], description='patterns the cheapest choice may take, e.g. ["e2-*", "n2-*"]'
    )
    spot: bool = Field(False, description="spot VMs unless a definition says otherwise")
    fallback: Fallback = Field(
        "off", description="on no capacity: zones = the next zone, types = then the next "
        "cheapest type"
    )  # fmt: skip
    check_quotas: bool = Field(True, description="count the project's Compute Engine quotas")


class GcpOptions(Strict):
    zone: Zone = Field("", description="launch in this zone (default: the instance's)")
    machine_type: MachineType | list[MachineType] = Field(
        [], description="default: the cheapest type that fits (a list: tried in order)"
    )
    image: ImageRef = Field("", description=IMAGE)
    gpus: Count = Field(0, description="GPUs the type must have")
    gpu: str = Field("", description="GPU model, e.g. L4, T4 or A100-80GB")
    spot: bool | None = Field(None, description="spot (true) or on-demand (false)")
    reservation: Annotated[str, AfterValidator(_reservation)] = Field(
        "",
        description="a reservation's name (consumed SPECIFICally), any (Google's default: a "
        "matching automatic reservation) or none",
    )
    fallback: Fallback | None = Field(None, description="default: the instance's")
    network: str = Field("", description="VPC network (default: the instance's)")
    subnetwork: str = Field("", description="subnetwork (default: the instance's)")
    service_account: str = Field("", description="service account email (default: the instance's)")
    disk_gb: Count | None = Field(None, description="boot disk size, GB")
    labels: Labels = Field({}, description="extra labels (beside the instance's)")
    allowed_types: list[str] | None = Field(None, description="default: the instance's")
    entry: Command = Field([], description=ENTRY.replace("the image's", "none") + ", run at boot")
    env: Env = Field({}, description=ENV)
