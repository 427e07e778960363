"""GCP's payloads as models: what shoal reads of each document, checked whole
(providers/core/payload.py). Imported when a page is read, never before: it imports pydantic.

Fields as documented, in proto3 JSON (a zero value may be left out; int64s are strings;
any key not declared is ignored):
- Cloud Billing Catalog `services.skus.list`:
  https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list
- Compute Engine v1 `machineTypes.aggregatedList`, `regions.list`, `projects.get`,
  `reservations.aggregatedList`, `futureReservations.aggregatedList`:
  https://cloud.google.com/compute/docs/reference/rest/v1
"""

from __future__ import annotations

from typing import Generic, Required, TypeVar

from typing_extensions import TypedDict

from providers.core.payload import Amount, Document, Name, Signed, Time

T = TypeVar("T")


class ComputeList(TypedDict, Generic[T], total=False):
    """A Compute Engine list page (an empty list is left out)."""

    items: list[T]
    nextPageToken: str | None


class Aggregated(TypedDict, Generic[T], total=False):
    """An aggregatedList page: `items` keyed by scope (`zones/us-central1-a`), each scope
    with its list or only a `warning`; zones that did not answer in `unreachables`."""

    items: dict[str, T] | None
    unreachables: list[str] | None
    nextPageToken: str | None


# -- the Cloud Billing Catalog ---------------------------------------------------------------


class Money(TypedDict, total=False):
    currencyCode: str | None
    units: Signed  # int64: a string
    nanos: Signed


class Tier(TypedDict, total=False):
    startUsageAmount: Amount
    unitPrice: Money


class PricingExpression(TypedDict, total=False):
    usageUnit: str | None
    tieredRates: list[Tier] | None


class PricingInfo(TypedDict, total=False):
    effectiveTime: str | None  # RFC 3339, compared as text: the newest is the price
    pricingExpression: PricingExpression | None


class Category(TypedDict, total=False):
    resourceFamily: str | None
    usageType: str | None


class Sku(TypedDict, total=False):
    skuId: str | None
    description: str | None
    category: Category | None
    serviceRegions: list[str] | None
    pricingInfo: list[PricingInfo] | None


class SkuPage(TypedDict, total=False):
    skus: list[Sku]
    nextPageToken: str | None


# -- machine types ---------------------------------------------------------------------------


class MachineAccelerator(TypedDict, total=False):
    guestAcceleratorType: str | None
    guestAcceleratorCount: Amount


class MachineType(TypedDict, total=False):
    name: str | None
    guestCpus: float  # int32s: JSON numbers
    memoryMb: float
    architecture: str | None
    accelerators: list[MachineAccelerator] | None


class MachineTypes(TypedDict, total=False):
    machineTypes: list[MachineType] | None


# -- regions and the project's quotas --------------------------------------------------------


class Quota(TypedDict, total=False):
    metric: Required[Name]
    limit: Required[Signed]
    usage: Signed


class WarningData(TypedDict, total=False):
    key: str | None
    value: str | None


class StatusWarning(TypedDict, total=False):
    """Region's `quotaStatusWarning` ("populated only if fetching of the quotas field
    fails"): a warning code, its message and key/value data."""

    code: str | None
    message: str | None
    data: list[WarningData] | None


class Region(TypedDict, total=False):
    name: Required[Name]
    status: str | None
    zones: list[str] | None
    quotas: list[Quota] | None
    quotaStatusWarning: StatusWarning | None


class Project(TypedDict, total=False):
    quotas: list[Quota] | None


# -- reservations ----------------------------------------------------------------------------


class Accelerator(TypedDict, total=False):
    acceleratorType: str | None
    acceleratorCount: Amount


class InstanceProperties(TypedDict, total=False):
    machineType: str | None
    guestAccelerators: list[Accelerator] | None


class SpecificReservation(TypedDict, total=False):
    count: Amount
    inUseCount: Amount
    instanceProperties: InstanceProperties | None


class Reservation(TypedDict, total=False):
    name: str | None
    zone: str | None
    status: str | None
    deleteAtTime: Time
    specificReservation: SpecificReservation | None  # absent: aggregate resources (TPUs)


class Reservations(TypedDict, total=False):
    reservations: list[Reservation] | None


class FutureStatus(TypedDict, total=False):
    procurementStatus: str | None
    fulfilledCount: Amount


class SkuProperties(TypedDict, total=False):
    totalCount: Amount
    instanceProperties: InstanceProperties | None


class Duration(TypedDict, total=False):
    seconds: Amount


class TimeWindow(TypedDict, total=False):
    startTime: Time
    endTime: Time
    duration: Duration | None


class FutureReservation(TypedDict, total=False):
    name: str | None
    zone: str | None
    status: FutureStatus | None
    specificSkuProperties: SkuProperties | None  # absent: aggregate resources (TPUs)
    timeWindow: TimeWindow | None


class FutureReservations(TypedDict, total=False):
    futureReservations: list[FutureReservation] | None


SKUS: Document[SkuPage] = Document("Cloud Billing SKU list", SkuPage)
MACHINE_TYPES: Document[Aggregated[MachineTypes]] = Document(
    "machine types", Aggregated[MachineTypes]
)
REGIONS: Document[ComputeList[Region]] = Document("regions", ComputeList[Region])
PROJECT: Document[Project] = Document("project", Project)
RESERVATIONS: Document[Aggregated[Reservations]] = Document(
    "reservations", Aggregated[Reservations]
)
FUTURE_RESERVATIONS: Document[Aggregated[FutureReservations]] = Document(
    "future reservations", Aggregated[FutureReservations]
)
