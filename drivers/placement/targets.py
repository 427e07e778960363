"""What one launch of an offer is: a target (the offer in one of its zones), and the
definition its driver is handed, made of the user's (a DEFINITION file, flags, `-o`) and the
offer's own choices, which win:

- aws: `-o region=`, `zone=`, `instance_type=`, `market=spot|on-demand` and `fallback=off`
  (the failover tries the next zone and offer itself); an offer covered by a capacity
  reservation launches into it (`reservation=cr-...`; a Capacity Block with
  `market=capacity-block`, from its start). Sizes not given are the type's.
- kubernetes: `-o spot=`, the pool's node label as `node_selector` (else the instance type's
  label), and the GPUs each pod takes.
- process (local), and any other driver of shoal's: the user's definition as it is.
- gcp: `-o zone=` (each zone of the offer a target), `machine_type=`, `spot=` and
  `fallback=off`; an offer covered by a reservation consumes it by name
  (`reservation=NAME`: reservationAffinity SPECIFIC_RESERVATION); an offer without zones is
  skipped, saying why.
- azure: `-o location=`, `size=`, `spot=` and `fallback=off`; an offer covered by a
  capacity reservation launches into its group (`capacity_reservation_group=NAME`, in the
  reservation's zone). Sizes not given are the size's.
- any name no driver has: no driver launches it; the target says so.

`-o DRIVER.KEY=VALUE` (`-o aws.image=ami-...`, `-o kubernetes.image=busybox`) gives an
option to one driver's offers only: the offers of a document may be for several drivers,
whose options differ.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drivers.placement.document import Offer, market_word
from drivers.placement.unavailable import Key
from providers.core.errors import UsageError

if TYPE_CHECKING:
    from drivers.placement.document import Request
    from drivers.spec.types import LabelDefinition

NO_DRIVER_YET: tuple[str, ...] = ()  # offers `shoal offers` makes that no driver launches yet
# Drivers whose offers launch once per zone (each named and remembered on its own); an offer
# of theirs that names no zone is not launched: the driver would place it in its own zone,
# which may be in another region than the offer's price.
ZONED = ("aws", "gcp")
# What each driver's offer options are called (the offer's win over the user's).
OFFER_KEYS = {
    "aws": ("region", "zone", "instance_type", "market", "spot", "reservation", "fallback"),
    "gcp": ("zone", "machine_type", "spot", "reservation", "fallback"),
    "azure": ("location", "size", "spot", "zone", "capacity_reservation_group", "fallback"),
    "kubernetes": ("spot", "gpus"),
    "process": (),
}
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


@dataclass(frozen=True)
class Target:
    offer: Offer
    zone: str = ""  # "" when the offer names none (or its driver takes none)

    @property
    def where(self) -> str:
        return self.zone or self.offer.region

    def label(self) -> str:
        """`aws us-east-1a p5.48xlarge spot`, as attempts are named."""
        parts = (self.offer.provider, self.where, self.offer.instance_type,
                 market_word(self.offer.market))  # fmt: skip
        return " ".join(p for p in parts if p)

    def key(self, region_wide: bool = False) -> Key:
        offer = self.offer
        zone = "" if region_wide else self.zone
        return Key(offer.provider, offer.region, zone, offer.instance_type, offer.market)

    @property
    def launchable(self) -> bool:
        """Whether a driver of shoal's launches it (any other: the user's definition as is)."""
        return self.skipped is None

    @property
    def skipped(self) -> str | None:
        """Why no driver of shoal's launches it (None: one does)."""
        driver = self.offer.driver
        if driver not in _kinds() or driver in NO_DRIVER_YET:
            return f"no {driver} driver yet"
        if _kinds()[driver] == "gcp" and not self.zone:
            return (
                "its zones are unknown (`shoal offers` lists the zones of gcp's GPU series "
                "with credentials), and a VM must be placed in a zone of its region"
            )
        return None


def targets(offers: list[Offer]) -> list[Target]:
    """Each offer in each of its zones, in the document's order (aws: one launch per zone, so
    that each is named and remembered; other drivers place by themselves)."""
    out: list[Target] = []
    for offer in offers:
        zones = offer.zones
        reserved = offer.reservation
        if reserved is not None and reserved.zone and not offer.spot:
            zones = (reserved.zone,)  # a reservation holds its instances in one zone
        kind = _kinds().get(offer.driver)
        if kind in ZONED and zones:
            out.extend(Target(offer, zone) for zone in zones)
        elif kind == "azure" and reserved is not None and reserved.zone and not offer.spot:
            out.append(Target(offer, reserved.zone))  # a VM is regional unless it names one
        else:
            out.append(Target(offer))
    return out


@dataclass(frozen=True)
class Base:
    """The user's side of every definition: the definition document before its driver is
    known (DEFINITION, flags, -o), where it came from, and the driver instance to use per
    driver (`--driver aws/prod`: that instance for the aws offers)."""

    data: dict[str, Any]
    source: str = "definition"
    instances: dict[str, str] = field(default_factory=dict)

    def options_for(self, driver: str) -> dict[str, Any]:
        """The options for `driver`'s offers: the plain ones, then `driver.KEY` ones."""
        plain: dict[str, Any] = {}
        scoped: dict[str, Any] = {}
        kinds = _kinds()
        for key, value in self._options().items():
            prefix, dot, rest = key.partition(".")
            if not dot:
                plain[key] = value
            elif kinds.get(prefix) == driver:
                scoped[rest] = value
        return {**plain, **scoped}

    def check(self) -> None:
        """Each DRIVER.KEY option names a driver."""
        kinds = _kinds()
        for key in self._options():
            prefix, dot, rest = key.partition(".")
            if dot and (prefix not in kinds or not rest):
                raise UsageError(
                    f"-o {key}: an option for one driver's offers is DRIVER.KEY (aws.image, "
                    f"kubernetes.image, process.entry); {prefix!r} is not a driver"
                )

    def _options(self) -> dict[str, Any]:
        given = self.data.get("options") or {}
        if not isinstance(given, dict):
            raise UsageError(f"{self.source}: options must be an object")
        return {str(k): v for k, v in given.items()}


@functools.cache
def _kinds() -> dict[str, str]:
    """Driver names and aliases (and the providers with no driver yet) -> the driver's."""
    from drivers.registry import builtin_kinds, canonical

    kinds = {k: canonical(k) for k in builtin_kinds(with_aliases=True)}
    kinds.update({k: k for k in NO_DRIVER_YET})
    return kinds


def definition(base: Base, target: Target, request: Request) -> LabelDefinition:
    """The definition `target`'s driver is handed (checked: a UsageError names the field)."""
    from drivers.definitions import definition as defs

    offer = target.offer
    driver = _kinds().get(offer.driver, offer.driver)  # ec2 -> aws
    data = {k: v for k, v in base.data.items() if k not in ("driver", "options", "resources")}
    resources = dict(base.data.get("resources") or {})
    options = {
        k: v for k, v in base.options_for(driver).items() if k not in OFFER_KEYS.get(driver, ())
    }
    if driver in (*ZONED, "azure"):
        made = {"aws": _aws, "gcp": _gcp, "azure": _azure}[driver]
        options.update(made(target))
        shape = offer.shape
        if "cpu" not in resources and shape.vcpus:
            resources["cpu"] = max(1, math.floor(shape.vcpus))
        if "ram" not in resources and shape.memory_gib:
            resources["ram"] = max(1, math.floor(shape.memory_gib))
    elif driver == "kubernetes":
        options.update(_kubernetes(offer, request, options))
    for size in ("cpu", "ram"):
        asked = getattr(request, size)
        if size not in resources:
            resources[size] = max(1, math.ceil(asked / offer.instances)) if asked else 1
    data.update(driver=base.instances.get(driver, driver), resources=resources, options=options)
    return defs.build(data, f"{base.source} for the offer {target.label()}")


def _aws(target: Target) -> dict[str, Any]:
    offer = target.offer
    options: dict[str, Any] = {
        "region": offer.region,
        "instance_type": offer.instance_type,
        "market": "spot" if offer.spot else "on-demand",
        "fallback": "off",
    }
    if target.zone:
        options["zone"] = target.zone
    reserved = offer.reservation
    if reserved is not None and not offer.spot and reserved.id.startswith("cr-"):
        options["reservation"] = reserved.id
        if reserved.kind == "capacity-block":
            options["market"] = "capacity-block"
    return options


def _gcp(target: Target) -> dict[str, Any]:
    offer = target.offer
    options: dict[str, Any] = {
        "zone": target.zone,
        "machine_type": offer.instance_type,
        "spot": offer.spot,
        "fallback": "off",  # the next zone, region, type is the next target's
    }
    reserved = offer.reservation
    if reserved is not None and not offer.spot:
        options["reservation"] = reserved.id  # consumed by name (reservationAffinity)
    return options


def _azure(target: Target) -> dict[str, Any]:
    offer = target.offer
    options: dict[str, Any] = {
        "location": offer.region,
        "size": offer.instance_type,
        "spot": offer.spot,
        "fallback": "off",  # the next region, size is the next target's
    }
    if target.zone:
        options["zone"] = target.zone
    reserved = offer.reservation
    if reserved is not None and not offer.spot:
        # The reservation's id is GROUP/RESERVATION: a VM names the group, Azure places it
        # on the group's reservation of its size (in its zone).
        options["capacity_reservation_group"] = reserved.id.split("/", 1)[0]
    return options


def _kubernetes(offer: Offer, request: Request, given: dict[str, Any]) -> dict[str, Any]:
    selector = dict(given.get("node_selector") or {})
    if offer.pool is not None:
        selector[offer.pool.key] = offer.pool.value
    elif offer.instance_type:
        selector[INSTANCE_TYPE_LABEL] = offer.instance_type
    options: dict[str, Any] = {"spot": offer.spot, "node_selector": selector}
    gpus = offer.gpus_each
    if gpus is None:
        gpus = offer.shape.gpu_count
        if request.gpus:
            gpus = math.ceil(request.gpus / offer.instances)
            gpus = min(gpus, offer.shape.gpu_count) if offer.shape.gpu_count else gpus
    if gpus:
        options["gpus"] = gpus
    return options
