"""Azure's payloads as models: what shoal reads of each document, checked whole
(providers/core/payload.py). Imported when a page is read, never before: it imports pydantic.

Fields as documented (a text may be null; any key not declared is ignored):
- Retail Prices: https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices
- Resource SKUs: https://learn.microsoft.com/rest/api/compute/resource-skus/list
- Locations: https://learn.microsoft.com/rest/api/resources/subscriptions/list-locations
- Usage: https://learn.microsoft.com/rest/api/compute/usage/list
- Capacity reservation groups and reservations (api-version 2025-04-01):
  https://learn.microsoft.com/rest/api/compute/capacity-reservation-groups/get,
  https://learn.microsoft.com/rest/api/compute/capacity-reservations/get
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Generic, Required, TypeVar

from pydantic import AfterValidator
from pydantic_core import PydanticCustomError
from typing_extensions import TypedDict

from providers.core.errors import shown
from providers.core.payload import Amount, Document, IsoTime, Name, Signed

T = TypeVar("T")

# A group's resource id, as ARM returns it: the path of its Get, so it is checked.
_GROUP_ID = re.compile(
    r"/subscriptions/[^/?#]+/resourceGroups/[^/?#]+/providers/Microsoft\.Compute/"
    r"capacityReservationGroups/[^/?#]+",
    re.IGNORECASE,
)


def _group_id(value: str) -> str:
    if not _GROUP_ID.fullmatch(value):
        raise PydanticCustomError(
            "group_id",
            "a capacity reservation group's id is {got}, not its resource path "
            "(/subscriptions/ID/resourceGroups/RG/providers/Microsoft.Compute/"
            "capacityReservationGroups/NAME)",
            {"got": shown(value)},
        )
    return value


class ArmList(TypedDict, Generic[T], total=False):
    """A Resource Manager list: a page of `value`, and the link to the next one."""

    value: Required[list[T]]
    nextLink: str | None


# -- Retail Prices ---------------------------------------------------------------------------


class PriceItem(TypedDict, total=False):
    retailPrice: Required[float]
    currencyCode: str | None
    armSkuName: str | None
    armRegionName: str | None
    serviceName: str | None
    productName: str | None
    skuName: str | None
    meterName: str | None
    type: str | None
    unitOfMeasure: str | None
    tierMinimumUnits: float | None
    isPrimaryMeterRegion: bool | None


class PricesPage(TypedDict, total=False):
    Items: Required[list[PriceItem]]
    NextPageLink: str | None
    BillingCurrency: str | None


# -- Resource SKUs ---------------------------------------------------------------------------


class Capability(TypedDict, total=False):
    name: str | None
    value: str | None


class RestrictionInfo(TypedDict, total=False):
    locations: list[str] | None


class Restriction(TypedDict, total=False):
    type: str | None
    values: list[str] | None
    restrictionInfo: RestrictionInfo | None


class ResourceSku(TypedDict, total=False):
    resourceType: str | None
    name: str | None
    locations: list[str] | None
    capabilities: list[Capability] | None
    restrictions: list[Restriction] | None


# -- Locations -------------------------------------------------------------------------------


class LocationMetadata(TypedDict, total=False):
    regionType: str | None


class ZoneMapping(TypedDict, total=False):
    logicalZone: str | None


class Location(TypedDict, total=False):
    name: str | None
    displayName: str | None
    metadata: LocationMetadata | None
    availabilityZoneMappings: list[ZoneMapping] | None


# -- Usage -----------------------------------------------------------------------------------


class UsageName(TypedDict, total=False):
    value: Required[Name]
    localizedValue: str | None


class Usage(TypedDict, total=False):
    name: Required[UsageName]
    limit: Required[Signed]
    currentValue: Required[Signed]


# -- capacity reservation groups and reservations --------------------------------------------


class GroupProperties(TypedDict, total=False):
    reservationType: str | None  # "Block": fixed windows of capacity


class GroupItem(TypedDict, total=False):
    id: Required[Annotated[str, AfterValidator(_group_id)]]
    name: str | None
    location: str | None  # a display name in the documented sample ("West US")
    properties: GroupProperties | None


class UtilizationInfo(TypedDict, total=False):
    currentCapacity: Amount | None
    virtualMachinesAllocated: list[Any] | None


class ReservationView(TypedDict, total=False):
    name: str | None
    utilizationInfo: UtilizationInfo | None


class GroupInstanceView(TypedDict, total=False):
    capacityReservations: Required[list[ReservationView]]


class GroupViewProperties(TypedDict, total=False):
    instanceView: GroupInstanceView | None


class GroupView(TypedDict, total=False):
    """A group read with `$expand=instanceView`."""

    properties: GroupViewProperties | None


class ReservationSku(TypedDict, total=False):
    name: str | None
    capacity: Amount


class Schedule(TypedDict, total=False):
    start: IsoTime
    end: IsoTime


class OwnView(TypedDict, total=False):
    utilizationInfo: UtilizationInfo | None


class ReservationProperties(TypedDict, total=False):
    instanceView: OwnView | None
    virtualMachinesAssociated: list[Any] | None
    scheduleProfile: Schedule | None
    provisioningTime: IsoTime
    timeCreated: IsoTime
    provisioningState: str | None


class CapacityReservation(TypedDict, total=False):
    name: str | None
    sku: Required[ReservationSku]
    zones: list[str] | None
    properties: ReservationProperties | None


PRICES: Document[PricesPage] = Document("Retail Prices", PricesPage)
SKUS: Document[ArmList[ResourceSku]] = Document("Resource SKUs", ArmList[ResourceSku])
LOCATIONS: Document[ArmList[Location]] = Document("locations", ArmList[Location])
USAGES: Document[ArmList[Usage]] = Document("usages", ArmList[Usage])
GROUPS: Document[ArmList[GroupItem]] = Document("capacity reservation groups", ArmList[GroupItem])
GROUP_VIEW: Document[GroupView] = Document("capacity reservation group", GroupView)
RESERVATIONS: Document[ArmList[CapacityReservation]] = Document(
    "capacity reservations", ArmList[CapacityReservation]
)
