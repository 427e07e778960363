"""RunInstances for one allocation: its parameters, and the attempts `-o fallback` allows.

One call launches one instance with everything it needs at once: the image and type, the
user-data, InstanceInitiatedShutdownBehavior=terminate (a shutdown from inside ends it),
IMDSv2 only, the subnet or zone, security groups, key pair, instance profile, root volume,
spot options, and its tags (TagSpecifications, so an instance is never untagged even for a
moment) on the instance and its volumes. ClientToken is the allocation id (then `ID-N` for
the N-th fallback attempt): a request sent again, by a retry after a dropped connection,
returns the instance the first one launched instead of launching another.

No capacity (InsufficientInstanceCapacity, a spot pool with none, a full reservation) tries,
with `fallback=zones`, the next configured subnet or zone (the region's zones when none are
configured), and with `fallback=types` then the next cheapest type that fits; when every
attempt found none it is a LaunchCapacityError (a NoCapacityError, 75) naming what was tried
and carrying EC2's code, which `-o market=auto` and the failover over offers
(drivers/placement) act on: a zone's capacity, or the account's limit in the region.

Capacity reservations: an on-demand instance runs in a matching open reservation by EC2's
default (CapacityReservationPreference `open`; the driver launches into the zone of one with
room, drivers/aws/capacity.py); `-o reservation=cr-...` targets that one
(CapacityReservationTarget), `-o reservation=none` keeps out of them, and a Capacity Block
takes `InstanceMarketOptions.MarketType=capacity-block` beside its target
(https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_CapacityReservationSpecification.html,
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-launch.html).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from drivers.aws.ec2 import ApiError, Instance, tag_specification
from providers.core.errors import ConfigError, NoCapacityError, UsageError

if TYPE_CHECKING:
    from drivers.vm.choice import Candidate

# No room for this request here and now: another zone or type may have some.
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "InsufficientHostCapacity",
    "InsufficientFreeAddressesInSubnet", "SpotCapacityNotAvailable", "capacity-not-available",
    "InsufficientCapacityOnOutpost", "ReservationCapacityExceeded",
})  # fmt: skip
# The account's limits: no zone or type of the same group helps.
LIMIT_CODES = frozenset({
    "VcpuLimitExceeded", "InstanceLimitExceeded", "MaxSpotInstanceCountExceeded",
    "PendingVerification",
})  # fmt: skip
# What the driver's config names: wrong there, a ConfigError naming the key.
CONFIG_CODES = {
    "InvalidSubnetID.NotFound": "subnets",
    "InvalidSubnetID.Malformed": "subnets",
    "InvalidSubnet": "subnets",
    "InvalidGroup.NotFound": "security_groups",
    "InvalidGroupId.Malformed": "security_groups",
    "InvalidSecurityGroupID.NotFound": "security_groups",
    "InvalidKeyPair.NotFound": "key_name",
    "InvalidKeyPair.Format": "key_name",
    "InvalidInstanceProfile.NotFound": "instance_profile",
    "NoSuchEntity": "instance_profile",
    "InvalidAvailabilityZone": "zones",
}
# What `-o reservation` names: wrong there, a UsageError naming the option.
RESERVATION_CODES = frozenset({
    "InvalidCapacityReservationId.NotFound", "InvalidCapacityReservationId.Malformed",
    "InvalidCapacityReservationIdForCapacityBlock",
})  # fmt: skip


class LaunchCapacityError(NoCapacityError):
    """RunInstances found no room: `code` is EC2's (the last attempt's), `tried` each attempt
    as `TYPE in PLACE (CODE)`, `attempts` how many were sent (the next ClientToken's number),
    `scope` "zone" (another zone or market may have room) or "region" (the account's limit:
    no zone of the region helps)."""

    def __init__(
        self, message: str, *, code: str, tried: Sequence[str] = (), attempts: int = 0,
        scope: str = "zone",
    ) -> None:  # fmt: skip
        super().__init__(message)
        self.code = code
        self.tried = list(tried)
        self.attempts = attempts
        self.scope = scope


@dataclass(frozen=True)
class Place:
    """Where to launch: a subnet, a zone, or wherever EC2 picks (both empty)."""

    subnet: str = ""
    zone: str = ""

    def __str__(self) -> str:
        return self.subnet or self.zone or "any zone"


@dataclass(frozen=True)
class Request:
    """Everything RunInstances takes for one allocation but the type and the place."""

    allocation_id: str
    image: str
    user_data: bytes
    tags: Mapping[str, str]
    security_groups: Sequence[str] = ()
    key_name: str = ""
    instance_profile: str = ""
    root_device: str = ""
    root_disk_gib: int = 0
    spot: bool = False
    max_price: float | None = None
    reservation: str = ""  # cr-... (targeted), open, none, or "" (EC2's default: open)
    capacity_block: bool = False

    def params(self, instance_type: str, place: Place, attempt: int) -> dict[str, str]:
        token = self.allocation_id if attempt == 0 else f"{self.allocation_id}-{attempt}"
        params = {
            "ImageId": self.image,
            "InstanceType": instance_type,
            "MinCount": "1",
            "MaxCount": "1",
            "ClientToken": token,
            "InstanceInitiatedShutdownBehavior": "terminate",
            "MetadataOptions.HttpTokens": "required",
            "MetadataOptions.HttpEndpoint": "enabled",
        }
        if self.user_data:
            params["UserData"] = base64.b64encode(self.user_data).decode("ascii")
        params.update(tag_specification(1, "instance", self.tags))
        params.update(tag_specification(2, "volume", self.tags))
        if place.subnet:
            params["SubnetId"] = place.subnet
        elif place.zone:
            params["Placement.AvailabilityZone"] = place.zone
        for n, group in enumerate(self.security_groups, 1):
            params[f"SecurityGroupId.{n}"] = group
        if self.key_name:
            params["KeyName"] = self.key_name
        if self.instance_profile:
            kind = "Arn" if self.instance_profile.startswith("arn:") else "Name"
            params[f"IamInstanceProfile.{kind}"] = self.instance_profile
        if self.root_disk_gib and self.root_device:
            params["BlockDeviceMapping.1.DeviceName"] = self.root_device
            params["BlockDeviceMapping.1.Ebs.VolumeSize"] = str(self.root_disk_gib)
            params["BlockDeviceMapping.1.Ebs.VolumeType"] = "gp3"
            params["BlockDeviceMapping.1.Ebs.DeleteOnTermination"] = "true"
        if self.spot:
            params["InstanceMarketOptions.MarketType"] = "spot"
            params["InstanceMarketOptions.SpotOptions.SpotInstanceType"] = "one-time"
            params["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] = "terminate"
            if self.max_price is not None:
                params["InstanceMarketOptions.SpotOptions.MaxPrice"] = f"{self.max_price:g}"
        elif self.capacity_block:
            params["InstanceMarketOptions.MarketType"] = "capacity-block"
        spec = "CapacityReservationSpecification."
        if self.reservation.startswith("cr-") and not self.spot:
            params[spec + "CapacityReservationTarget.CapacityReservationId"] = self.reservation
        elif self.reservation in ("open", "none") and not self.spot:
            params[spec + "CapacityReservationPreference"] = self.reservation
        return params


def launch(
    run: Callable[[dict[str, str]], list[Instance]],
    request: Request,
    types: Sequence[Candidate],
    places: Callable[[bool], Sequence[Place]],
    *,
    fallback: str,
    where: str,
    image_source: str,
    first: int = 0,
) -> tuple[Instance, Candidate, Place]:
    """The first attempt that launched: (the instance, its type, its place). `places(False)`
    is the first place to try; `places(True)` every place, asked only once an attempt found
    no capacity (it may cost a DescribeAvailabilityZones), starting with that first one.
    `first` numbers the first attempt (its ClientToken), after a launch of the same
    allocation that found no room (`-o market=auto`'s spot attempt)."""
    tried: list[str] = []
    codes: list[str] = []
    attempt = first
    every: Sequence[Place] | None = None
    for index, candidate in enumerate(types if fallback == "types" else types[:1]):
        targets = every or places(False)
        number = 0
        while number < len(targets):
            place = targets[number]
            try:
                found = run(request.params(candidate.name, place, attempt))
            except ApiError as exc:
                attempt += 1
                full = exc.code in CAPACITY_CODES or (
                    exc.code == "Unsupported" and fallback != "off"
                )
                if full:
                    tried.append(f"{candidate.name} in {place} ({exc.code})")
                    codes.append(exc.code)
                    if fallback == "off":
                        break
                    if every is None:
                        every = targets = places(True)
                    number += 1
                    continue
                if (
                    exc.code == "SpotMaxPriceTooLow"
                    and fallback == "types"
                    and index + 1 < len(types)
                ):
                    tried.append(f"{candidate.name} ({exc.code})")
                    codes.append(exc.code)
                    break
                refused = refusal(exc, where, image_source, candidate.name)
                if isinstance(refused, LaunchCapacityError):
                    refused.tried = [*tried, f"{candidate.name} in {place} ({exc.code})"]
                    refused.attempts = attempt
                raise refused from None
            if not found:
                raise NoCapacityError(f"{where}: RunInstances answered without an instance")
            return found[0], candidate, place
    hint = (
        "try again later, or let shoal try other zones and types: -o fallback=types"
        if fallback != "types"
        else "try again later"
    )
    raise LaunchCapacityError(
        f"{where}: no capacity; tried {'; '.join(tried)}; {hint}",
        code=codes[-1] if codes else "",
        tried=tried,
        attempts=attempt,
    )


def refusal(exc: ApiError, where: str, image_source: str, instance_type: str) -> Exception:
    """What an error answer of RunInstances means, as the error that names the cause."""
    code, said = exc.code, f"{exc.code}: {exc.detail}"
    if code.startswith("InvalidAMIID"):
        return UsageError(f"{image_source}: EC2 refused the image ({said})")
    if code.startswith("InvalidInstanceType"):
        return UsageError(f"options.instance_type: {instance_type} ({said})")
    if code == "SpotMaxPriceTooLow":
        return UsageError(f"options.max_price: below the current spot price ({said})")
    if code in RESERVATION_CODES:
        return UsageError(f"options.reservation: EC2 refused it ({said})")
    if code in LIMIT_CODES:
        return LaunchCapacityError(
            f"{where}: the account's limit is reached ({said}); free instances, or ask AWS "
            "for a higher quota",
            code=code,
            scope="region",
        )
    if code in CAPACITY_CODES:
        return LaunchCapacityError(f"{where}: no capacity ({said})", code=code)
    if code in CONFIG_CODES:
        return ConfigError(f"{where}: {CONFIG_CODES[code]}: EC2 refused it ({said})")
    if code.startswith(("Invalid", "Missing", "Unsupported")):
        return UsageError(f"{where}: RunInstances refused the request ({said})")
    return exc
