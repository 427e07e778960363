"""The `azure` driver's settings: an instance's config (`[drivers."azure/NAME"]`) and a
definition's options (`-o`), as pydantic models (errors name the key or option)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, BeforeValidator, Field

from drivers.definitions.fields import ENTRY, ENV, Command, Env
from providers.core.errors import is_secret_name, shown
from providers.core.strict import Count, Strict

_LOCATION = re.compile(r"^[a-z][a-z0-9]{1,39}$")
_SIZE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{1,63}$")
_GROUP = re.compile(r"^[-\w._()]{1,89}[-\w_()]$")
_SUBNET = re.compile(
    r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]+/providers/"
    r"Microsoft\.Network/virtualNetworks/[-\w._]+/subnets/[-\w._]+$"
)
# An image: a marketplace URN publisher:offer:sku:version, or an image's resource id.
_URN = re.compile(r"^[-\w.]+:[-\w.]+:[-\w.]+:(latest|[0-9][0-9.]*)$")
_IMAGE_ID = re.compile(
    r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]+/providers/Microsoft\.Compute/"
    r"(images/[-\w._]+|galleries/[-\w._]+/images/[-\w._]+(/versions/[-\w._]+)?)$"
)
_TAG_KEY = re.compile(r"^[^<>%&\\?/]{1,512}$")
RESERVED_TAG_PREFIX = "shoal-"
MAX_TAGS = 47  # of Azure's 50 per resource, shoal's own take the rest
DEFAULT_IMAGE = "Canonical:ubuntu-24_04-lts:server:latest"
DEFAULT_LOCATION = "eastus"
Fallback = Literal["off", "zones", "types"]
IMAGE = "an image URN (publisher:offer:sku:version) or an image's resource id"


def _location(value: str) -> str:
    if value and not _LOCATION.match(value):
        raise ValueError(f"{shown(value)} is not an Azure location such as eastus")
    return value


def _size(value: str) -> str:
    if value and not _SIZE.match(value):
        raise ValueError(f"{shown(value)} is not a VM size such as Standard_D4s_v5")
    return value


def _group(value: str) -> str:
    if value and not _GROUP.match(value):
        raise ValueError(f"{shown(value)} is not a resource group name")
    return value


def _subnet(value: str) -> str:
    if value and not _SUBNET.match(value):
        raise ValueError(
            f"{shown(value)} is not a subnet's resource id (/subscriptions/ID/resourceGroups/"
            "RG/providers/Microsoft.Network/virtualNetworks/VNET/subnets/NAME)"
        )
    return value


def _image(value: str) -> str:
    if value and not (_URN.match(value) or _IMAGE_ID.match(value)):
        raise ValueError(f"{shown(value)} is not {IMAGE}")
    return value


def _zone_number(value: object) -> object:
    # `-o zone=2` reads as JSON, the number 2, and `zones = [1, 2]` in TOML are numbers too:
    # Azure names its zones by those numbers.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


_GROUP_ID = re.compile(
    r"^/subscriptions/[0-9a-fA-F-]{36}/resourceGroups/[-\w._()]+/providers/Microsoft\.Compute/"
    r"capacityReservationGroups/[-\w._]+$",
    re.IGNORECASE,
)
_GROUP_NAME = re.compile(r"^[A-Za-z0-9][-\w.]{0,78}[\w]$|^[A-Za-z0-9]$")


def _reservation_group(value: str) -> str:
    if value and not (_GROUP_ID.match(value) or _GROUP_NAME.match(value)):
        raise ValueError(
            f"{shown(value)} is not a capacity reservation group's name or resource id"
        )
    return value


def _zone(value: str) -> str:
    if value and value not in ("1", "2", "3"):
        raise ValueError(f"{shown(value)} is not an availability zone (1, 2 or 3)")
    return value


def _tags(tags: dict[str, str]) -> dict[str, str]:
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags; at most {MAX_TAGS} (Azure takes 50)")
    for key, value in tags.items():
        if not _TAG_KEY.match(key) or len(value) > 256:
            raise ValueError(
                f"tag {shown(key)}: names are 1-512 characters without <>%&\\?/, values up to 256"
            )
        if key.lower().startswith(RESERVED_TAG_PREFIX):
            raise ValueError(f"tag {shown(key)}: shoal- names are reserved")
        if is_secret_name(key):
            raise ValueError(
                f"tag {shown(key)}: looks like a credential, and tags are readable by anyone "
                "who may read the subscription; keep secrets out of tags"
            )
    return tags


def _max_price(value: float) -> float:
    if value != -1 and not 0 < value < 1e6:
        raise ValueError(f"{value} is not a price in USD per hour (or -1: up to on-demand)")
    return value


Location = Annotated[str, AfterValidator(_location)]
Size = Annotated[str, AfterValidator(_size)]
Group = Annotated[str, AfterValidator(_group)]
Subnet = Annotated[str, AfterValidator(_subnet)]
ImageRef = Annotated[str, AfterValidator(_image)]
Zone = Annotated[str, BeforeValidator(_zone_number), AfterValidator(_zone)]
Tags = Annotated[dict[str, str], AfterValidator(_tags)]


class AzureConfig(Strict):
    """[drivers."azure/INSTANCE"]"""

    subscription: str = Field(
        "", description="default: AZURE_SUBSCRIPTION_ID, [azure] subscription, the CLI's"
    )
    resource_group: Group = Field("", description="the resource group VMs go to (required)")
    location: Location = Field("", description=f"default {DEFAULT_LOCATION}")
    zones: list[Zone] = Field(
        [], description="zones tried in order with fallback (default: none: regional)"
    )
    subnet: Subnet = Field("", description="the subnet's resource id the NIC joins (required)")
    public_ip: bool = Field(False, description="give each VM a Standard public IP")
    image: ImageRef = Field("", description=IMAGE + f" (default {DEFAULT_IMAGE})")
    disk_gb: Count = Field(0, description="OS disk size, 0 = the image's")
    admin_user: str = Field("shoal", description="the VM's admin user name")
    ssh_key: str = Field("", description="an OpenSSH public key for admin_user (default: none)")
    tags: Tags = Field({}, description="extra tags on the VM, its NIC, IP and disk")
    allowed_types: list[str] = Field(
        [], description='patterns the cheapest choice may take, e.g. ["Standard_D*"]'
    )
    spot: bool = Field(False, description="spot VMs unless a definition says otherwise")
    self_delete: bool = Field(
        True,
        description="the VM deletes itself at its lifetime (its identity gets Virtual Machine "
        "Contributor on it); false: shoal's next command ends it",
    )
    fallback: Fallback = Field(
        "off", description="on no capacity: zones = the next zone, types = then the next "
        "cheapest size"
    )  # fmt: skip
    check_quotas: bool = Field(True, description="count the subscription's vCPU quotas")


class AzureOptions(Strict):
    location: Location = Field("", description="launch in this location (default: the instance's)")
    size: Size | list[Size] = Field(
        [], description="default: the cheapest size that fits (a list: tried in order)"
    )
    image: ImageRef = Field("", description=IMAGE)
    gpus: Count = Field(0, description="GPUs the size must have")
    gpu: str = Field("", description="GPU model, e.g. T4, A100 or H100")
    spot: bool | None = Field(None, description="spot (true) or regular (false)")
    max_price: Annotated[float, AfterValidator(_max_price)] = Field(
        -1, description="spot: USD per hour at most (-1: up to the on-demand price)"
    )
    subnet: Subnet = Field("", description="subnet resource id (default: the instance's)")
    resource_group: Group = Field("", description="default: the instance's")
    zone: Zone = Field("", description="availability zone 1, 2 or 3 (default: none)")
    public_ip: bool | None = Field(None, description="default: the instance's")
    disk_gb: Count | None = Field(None, description="OS disk size, GB")
    tags: Tags = Field({}, description="extra tags (beside the instance's)")
    allowed_types: list[str] | None = Field(None, description="default: the instance's")
    fallback: Fallback | None = Field(None, description="default: the instance's")
    capacity_reservation_group: Annotated[str, AfterValidator(_reservation_group)] = Field(
        "", description="place the VM on this capacity reservation group (name or resource id)"
    )
    entry: Command = Field([], description=ENTRY.replace("the image's", "none") + ", run at boot")
    env: Env = Field({}, description=ENV)
