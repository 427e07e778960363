"""Reading the AWS answers an account's capacity is made of: EC2's XML (DescribeInstances,
DescribeInstanceTypes, DescribeCapacityReservations) and Service Quotas' JSON pages, into
the records providers/aws/accounts.py puts together. A number or time that does not read
is a malformed answer (one-line ShoalError naming the API and the field). A Service Quotas
page is checked whole against its model (providers/aws/payloads.py), so what is read of it
has its types.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from providers import gpus
from providers.accounts.model import Market, Reservation
from providers.aws.api import decode_json, items, text
from providers.core.errors import ShoalError, UsageError, one_line, scrub
from providers.core.timeutil import parse_time

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    from providers.aws.payloads import ServiceQuota

QUOTAS, DEFAULTS, INSTANCES, RESERVATIONS, TYPES = (
    "ListServiceQuotas", "ListAWSDefaultServiceQuotas", "DescribeInstances",
    "DescribeCapacityReservations", "DescribeInstanceTypes",
)  # fmt: skip
OFFERINGS = "DescribeInstanceTypeOfferings"
KEPT_STATES = ("active", "scheduled", "payment-pending")
MAX_NUMBER = 1e6  # past any count of instances or vCPUs EC2 reports for one item


@dataclass
class Running:
    """Instances of one type in one zone and market; vcpus per instance (None: ask
    DescribeInstanceTypes)."""

    instance_type: str
    zone: str
    market: Market
    vcpus: float | None
    count: int = 0


@dataclass(frozen=True)
class Shape:
    """What DescribeInstanceTypes says of a type."""

    vcpus: float | None
    gpu: str = ""
    gpus: int = 0


def quota_page(
    raw: bytes, api: str, where: str, secrets: Sequence[str] = ()
) -> tuple[list[ServiceQuota], str]:
    """A ListServiceQuotas (or ListAWSDefaultServiceQuotas) page's quotas, and its next
    token ("" on the last), from the answer's bytes.

    pydantic parses the bytes itself (providers/core/payload.py), but reads NaN and Infinity
    as numbers, and `1e400` or a 400-digit integer (a value past any quota, left out by the
    reader) as the same infinity. A page that may hold the constants is decoded first, as
    json.loads reads it: they are refused there, as every AWS JSON answer's are.

    A failure quotes the value it found, cut at 60 characters: a server that echoes the
    session token in a field would have the token's first 57 in the message, which no scrub
    of the message can tell from text. Such a page's failure is said from the page with
    `secrets` scrubbed out of it first."""
    from providers.aws.payloads import QUOTA_PAGE
    from providers.core.http.client import Body

    decode = functools.partial(decode_json, raw, api)
    page = decode() if b"NaN" in raw or b"Infinity" in raw else Body(raw, decode)
    try:
        read = QUOTA_PAGE.read(page, where)
    except ShoalError as exc:
        failure = exc
    else:
        return read.get("Quotas", []), read.get("NextToken") or ""
    text = raw.decode("utf-8", "replace")
    clean = scrub(text, secrets)
    if clean != text:
        QUOTA_PAGE.read(decode_json(clean.encode(), api), where)  # raises, its values scrubbed
    raise ShoalError(one_line(str(failure), secrets)) from None


def running(pages: Iterable[Element]) -> list[Running]:
    groups: dict[tuple[str, str, Market, float | None], Running] = {}
    for root in pages:
        for reservation in items(root, "reservationSet"):
            for instance in items(reservation, "instancesSet"):
                if text(instance, "instanceState", "name") not in ("pending", "running"):
                    continue  # the filter asked for these; a server may ignore filters
                name = text(instance, "instanceType")
                zone = text(instance, "placement", "availabilityZone")
                market: Market = (
                    "spot" if text(instance, "instanceLifecycle") == "spot" else "onDemand"
                )
                cores = number(instance, INSTANCES, "cpuOptions", "coreCount")
                threads = number(instance, INSTANCES, "cpuOptions", "threadsPerCore")
                vcpus = cores * threads if cores is not None and threads is not None else None
                key = (name, zone, market, vcpus)
                groups.setdefault(key, Running(name, zone, market, vcpus)).count += 1
    return list(groups.values())


def shapes(root: Element) -> dict[str, Shape]:
    shapes: dict[str, Shape] = {}
    for item in items(root, "instanceTypeSet"):
        name = text(item, "instanceType")
        devices = (
            items(item, "gpuInfo", "gpus")
            or items(item, "neuronInfo", "neuronDevices")
            or items(item, "inferenceAcceleratorInfo", "accelerators")
        )
        models = [gpus.model(text(d, "name")) for d in devices if text(d, "name")]
        count = sum(int(number(d, TYPES, "count") or 0) for d in devices)
        vcpus = number(item, TYPES, "vCpuInfo", "defaultVCpus")
        shapes[name] = Shape(vcpus, models[0] if models else "", count)
    return shapes


def offerings(root: Element, region: str, into: dict[str, set[str]]) -> None:
    """One DescribeInstanceTypeOfferings page (LocationType availability-zone) folded into
    instance type -> zones. Each `instanceTypeOfferingSet` item is {instanceType,
    locationType, location}
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceTypeOffering.html);
    an item of another location type, or a zone of another region (a server that ignored
    the request), is left out."""
    for item in items(root, "instanceTypeOfferingSet"):
        name, zone = text(item, "instanceType"), text(item, "location")
        if text(item, "locationType") not in ("", "availability-zone"):
            continue
        rest = zone.removeprefix(region)
        # us-east-1a, or a Local Zone's us-east-1-bos-1a
        if name and rest != zone and (rest.isalpha() or rest.startswith("-")):
            into.setdefault(name, set()).add(zone)


def reservations(root: Element) -> list[Reservation]:
    found = []
    for item in items(root, "capacityReservationSet"):
        state = text(item, "state")
        if state not in KEPT_STATES:
            continue
        block = text(item, "reservationType") == "capacity-block"
        found.append(
            Reservation(
                id=text(item, "capacityReservationId"),
                kind="capacity-block" if block else "capacity-reservation",
                instance_type=text(item, "instanceType"),
                total=int(number(item, RESERVATIONS, "totalInstanceCount") or 0),
                # Never more free than held: a broken answer must not make usage negative.
                available=min(
                    int(number(item, RESERVATIONS, "availableInstanceCount") or 0),
                    int(number(item, RESERVATIONS, "totalInstanceCount") or 0),
                ),
                start=time_of(item, "startDate"),
                end=time_of(item, "endDate"),
                zone=text(item, "availabilityZone"),
                state=state,
            )
        )
    return found


def number(element: Element, api: str, *path: str) -> float | None:
    """The number at `path` (None when absent); not a number: a malformed answer."""
    raw = text(element, *path)
    if not raw:
        return None
    try:
        value = float(raw)
    except ValueError:
        raise ShoalError(f"malformed {api} response: {'/'.join(path)} is not a number") from None
    if not 0 <= value <= MAX_NUMBER:  # NaN fails this too; 1e400 reads as infinity
        raise ShoalError(f"malformed {api} response: {'/'.join(path)} is out of range")
    return value


def time_of(element: Element, name: str) -> datetime | None:
    raw = text(element, name)
    if not raw:
        return None
    try:
        return parse_time(raw, name)
    except UsageError:
        raise ShoalError(f"malformed {RESERVATIONS} response: {name} is not a time") from None
