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
from providers.core.errors import UsageError

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
        reservation=opts.reservation,
        capacity_block=opts.market == "capacity-block",
    )


def places(
    cfg: AwsConfig, ec2: Ec2, zone: str = "", prefer: str = ""
) -> Callable[[bool], list[Place]]:
    """The configured subnets, else zones, else wherever EC2 picks then each of the
    region's zones (asked only when a fallback needs them). `zone` (`-o zone`) is the only
    place: the configured subnets in it, else the zone itself. `prefer` (the zone of an open
    capacity reservation with room) goes first."""
    if zone:
        placed = _in_zone(cfg, ec2, zone)
        return lambda every: placed

    def where(every: bool) -> list[Place]:
        configured = [Place(subnet=s) for s in cfg.subnets] or [Place(zone=z) for z in cfg.zones]
        preferred: list[Place] = []
        if prefer and cfg.subnets:
            preferred = _in_zone(cfg, ec2, prefer, strict=False)
        elif prefer and (not cfg.zones or prefer in cfg.zones):
            preferred = [Place(zone=prefer)]
        if not every:
            return preferred[:1] or configured[:1] or [Place()]
        rest = configured or [Place(), *(Place(zone=z) for z in ec2.zones())]
        return [*preferred, *(p for p in rest if p not in preferred)]

    return where


def _targeted(reservation: str) -> str:
    return reservation if reservation.startswith("cr-") else ""


def _in_zone(cfg: AwsConfig, ec2: Ec2, zone: str, strict: bool = True) -> list[Place]:
    if not cfg.subnets:
        return [Place(zone=zone)]
    zones = ec2.subnet_zones(cfg.subnets)
    found = [Place(subnet=s) for s in cfg.subnets if zones.get(s) == zone]
    if not found and strict:
        raise UsageError(
            f"options.zone: none of the configured subnets ({', '.join(cfg.subnets)}) is in "
            f"{zone}; give a zone they are in, or add a subnet of {zone} to subnets"
        )
    return found


def resource(
    allocation_id: str, plan: Plan, instance: Instance, candidate: Candidate, spot: bool
) -> Resource:
    market = "spot" if spot else "on-demand"
    if plan.opts.market == "capacity-block":
        market = "capacity-block"
    meta = {
        "instance_id": instance.id,
        "region": plan.region,
        "zone": instance.zone,
        "subnet": instance.subnet,
        "instance_type": candidate.name,
        "market": market,
        "price": candidate.spot if spot else candidate.on_demand,
        "reservation": instance.reservation or _targeted(plan.opts.reservation),
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
