"""One allocation's instance: the RunInstances request its plan makes (the boot script with
`--meta` as its environment, the tags that say whose it is and until when, the root
volume and the market), the places it may go, and the Resource the launched instance is.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from drivers.aws.launch import Place, Request
from drivers.aws.state import (
    ALLOCATION_TAG,
    DRIVER_TAG,
    EXPIRES_TAG,
    MANAGED_BY_TAG,
    OWNER_TAG,
)
from drivers.spec.types import Resource

if TYPE_CHECKING:
    from drivers.aws.config import AwsConfig
    from drivers.aws.ec2 import Ec2, Instance
    from drivers.aws.plan import Plan
    from drivers.spec.types import LabelDefinition
    from drivers.vm.choice import Candidate


def request(
    plan: Plan,
    definition: LabelDefinition,
    metadata: dict[str, Any],
    allocation_id: str,
    *,
    cfg: AwsConfig,
    driver: str,
) -> Request:
    from drivers.vm.userdata import user_data
    from providers.core.wire import format_time

    opts = plan.opts
    expires = definition.resources.expires  # the ledger row's, decided by the service
    if expires is not None and expires.microsecond:  # whole seconds, never before the ledger's
        expires = expires.replace(microsecond=0) + timedelta(seconds=1)
    # Metadata last: -o env cannot forge SHOAL_ALLOCATION_ID.
    environment = opts.env | {str(k): str(v) for k, v in metadata.items()}
    script = user_data(allocation_id, expires=expires, environment=environment, entry=opts.entry)
    tags = {"Name": f"shoal-{allocation_id}", **cfg.tags, **opts.tags}
    tags.update({
        ALLOCATION_TAG: allocation_id,
        MANAGED_BY_TAG: "shoal",
        OWNER_TAG: socket.gethostname()[:256],
        DRIVER_TAG: driver,
    })  # fmt: skip
    if expires is not None:
        tags[EXPIRES_TAG] = format_time(expires)
    root_disk = cfg.root_disk_gib if opts.root_disk_gib is None else opts.root_disk_gib
    return Request(
        allocation_id=allocation_id,
        image=plan.image,
        user_data=script,
        tags=tags,
        security_groups=cfg.security_groups,
        key_name=cfg.key_name,
        instance_profile=cfg.instance_profile,
        root_device=plan.root_device,
        root_disk_gib=root_disk,
        spot=plan.spot,
        max_price=opts.max_price,
    )


def places(cfg: AwsConfig, ec2: Ec2) -> Callable[[bool], list[Place]]:
    """The configured subnets, else zones, else wherever EC2 picks then each of the
    region's zones (asked only when a fallback needs them)."""

    def where(every: bool) -> list[Place]:
        configured = [Place(subnet=s) for s in cfg.subnets] or [Place(zone=z) for z in cfg.zones]
        if configured:
            return configured if every else configured[:1]
        return [Place(), *(Place(zone=z) for z in ec2.zones())] if every else [Place()]

    return where


def resource(allocation_id: str, plan: Plan, instance: Instance, candidate: Candidate) -> Resource:
    meta = {
        "instance_id": instance.id,
        "region": plan.region,
        "zone": instance.zone,
        "subnet": instance.subnet,
        "instance_type": candidate.name,
        "market": "spot" if plan.spot else "on-demand",
        "price": candidate.price,
        "image": plan.image,
        "private_ip": instance.private_ip,
        "public_ip": instance.public_ip,
    }
    return Resource(
        identifier=allocation_id,
        ip_addr=instance.public_ip or instance.private_ip,
        hw_addr=instance.mac,
        metadata={k: v for k, v in meta.items() if v not in ("", None)},
    )
