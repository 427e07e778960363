"""The `aws` driver's settings: an instance's config (`[drivers."aws/NAME"]`) and a
definition's options (`-o`), as pydantic models (errors name the key or option)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from drivers.definitions.fields import ENTRY, ENV, Command, Env
from providers.core.errors import is_secret_name, shown
from providers.core.strict import Count, Positive, Strict

_AMI = re.compile(r"^ami-[0-9a-f]{8,17}$")
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")
_TYPE = re.compile(r"^[a-z0-9-]+\.[a-z0-9-]+$")
_ZONE = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+[a-z](-[a-z0-9-]+)?$")
_RESERVATION = re.compile(r"^cr-[0-9a-f]{8,17}$")
RESERVED_TAG_PREFIXES = ("aws:", "shoal:")
MAX_TAGS = 40  # of EC2's 50 per resource, shoal's own take the rest
Fallback = Literal["off", "zones", "types"]
# auto: spot first, then on-demand; capacity-block: into the Capacity Block -o reservation names.
Market = Literal["spot", "on-demand", "auto", "capacity-block"]


def _image(value: str) -> str:
    if not value or _AMI.match(value):
        return value
    if value.startswith("ssm:/"):
        return value
    raise ValueError(
        f"{shown(value)} is not an AMI id (ami-0123456789abcdef0) or an SSM parameter "
        "(ssm:/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64)"
    )


def _region(value: str) -> str:
    if value and not _REGION.match(value):
        raise ValueError(f"{shown(value)} is not an AWS region name such as us-east-1")
    return value


def _zone(value: str) -> str:
    if value and not _ZONE.match(value):
        raise ValueError(f"{shown(value)} is not an availability zone name such as us-east-1a")
    return value


def _reservation(value: str) -> str:
    if value and value not in ("open", "none") and not _RESERVATION.match(value):
        raise ValueError(
            f"{shown(value)} is not a capacity reservation id (cr-0123456789abcdef0), open "
            "(any matching open reservation, EC2's default) or none"
        )
    return value


def _instance_type(value: str) -> str:
    if not _TYPE.match(value):
        raise ValueError(f"{shown(value)} is not an EC2 instance type such as m5.large")
    return value


def _tags(tags: dict[str, str]) -> dict[str, str]:
    if len(tags) > MAX_TAGS:
        raise ValueError(f"{len(tags)} tags; at most {MAX_TAGS} (EC2 takes 50, shoal uses some)")
    for key, value in tags.items():
        if not 1 <= len(key) <= 128 or len(value) > 256:
            raise ValueError(f"tag {shown(key)}: keys take 1-128 characters, values up to 256")
        if key.lower().startswith(RESERVED_TAG_PREFIXES):
            raise ValueError(f"tag {shown(key)}: aws: and shoal: keys are reserved")
        if is_secret_name(key):
            raise ValueError(
                f"tag {shown(key)}: looks like a credential, and tags are readable by anyone "
                "who may describe instances; keep secrets out of tags"
            )
    return tags


AmiRef = Annotated[str, AfterValidator(_image)]
InstanceType = Annotated[str, AfterValidator(_instance_type)]
Tags = Annotated[dict[str, str], AfterValidator(_tags)]
IMAGE = "an AMI id, or ssm:/PATH of a public parameter holding one"


class AwsConfig(Strict):
    """[drivers."aws/INSTANCE"] (and ec2/...)"""

    region: Annotated[str, AfterValidator(_region)] = Field(
        "", description="default: AWS_REGION, AWS_DEFAULT_REGION, [aws] default_region"
    )
    image: AmiRef = Field("", description=IMAGE + ", used when a definition names none")
    subnets: list[str] = Field([], description="subnet ids, tried in order with fallback")
    zones: list[str] = Field([], description="availability zones to place in (no subnets)")
    security_groups: list[str] = Field([], description="security group ids (sg-...)")
    key_name: str = Field("", description="EC2 key pair for ssh")
    instance_profile: str = Field("", description="IAM instance profile: a name or an ARN")
    root_disk_gib: Count = Field(0, description="root volume size, 0 = the image's")
    tags: Tags = Field({}, description="extra tags on the instance and its volumes")
    allowed_types: list[str] = Field(
        [], description='patterns the cheapest choice may take, e.g. ["m7i.*", "c7i.*"]'
    )
    spot: bool = Field(False, description="spot instances unless a definition says otherwise")
    fallback: Fallback = Field(
        "off", description="on no capacity: zones = the next subnet/zone, types = then the "
        "next cheapest type"
    )  # fmt: skip
    check_quotas: bool = Field(True, description="count the account's vCPU quotas")


class AwsOptions(Strict):
    image: AmiRef = Field("", description=IMAGE)
    instance_type: InstanceType | list[InstanceType] = Field(
        [], description="default: the cheapest type that fits (a list: tried in order)"
    )
    gpus: Count = Field(0, description="GPUs the type must have")
    gpu: str = Field("", description="GPU model, e.g. L4 or A100-80GB")
    spot: bool | None = Field(None, description="spot (true) or on-demand (false)")
    max_price: Positive | None = Field(None, description="spot: the most to pay, USD per hour")
    fallback: Fallback | None = Field(None, description="default: the instance's")
    entry: Command = Field([], description=ENTRY.replace("the image's", "none") + ", run at boot")
    env: Env = Field({}, description=ENV)
    root_disk_gib: Count | None = Field(None, description="root volume size, GiB")
    tags: Tags = Field({}, description="extra tags (beside the instance's)")
    allowed_types: list[str] | None = Field(None, description="default: the instance's")
    wait: bool = Field(False, description="return once the instance runs (its public IP known)")
    region: Annotated[str, AfterValidator(_region)] = Field(
        "", description="launch in this region (default: the instance's)"
    )
    zone: Annotated[str, AfterValidator(_zone)] = Field(
        "", description="launch in this availability zone (a configured subnet in it, if any)"
    )
    market: Market | None = Field(
        None, description="spot, on-demand, auto (spot, then on-demand) or capacity-block"
    )
    reservation: Annotated[str, AfterValidator(_reservation)] = Field(
        "", description="a capacity reservation id to launch into, open or none"
    )

    @model_validator(mode="after")
    def check_market(self) -> AwsOptions:
        """`market` decides `spot` (the spot attempt of auto first): the rest of the driver
        reads `spot` alone. A reservation holds on-demand capacity."""
        if self.market is not None:
            spot = self.market in ("spot", "auto")
            if self.spot is not None and self.spot != spot:
                raise ValueError(
                    f"spot={str(self.spot).lower()} and market={self.market} disagree; give one"
                )
            self.spot = spot
        targeted = self.reservation.startswith("cr-")
        if self.market == "capacity-block" and not targeted:
            raise ValueError(
                "market=capacity-block launches into a Capacity Block: name it with "
                "-o reservation=cr-..."
            )
        if targeted and self.spot is None:
            self.spot = False
        if targeted and self.spot:
            raise ValueError(
                f"reservation={self.reservation} holds on-demand capacity; drop spot or "
                "give -o market=on-demand"
            )
        return self
