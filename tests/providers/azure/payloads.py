"""Azure payloads as the documentation shows them, and loopback handlers that serve them.

Formats from:
- Retail Prices API (fields, `$filter`, `NextPageLink`, `currencyCode`, 2023-01-01-preview):
  https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices
- Resource SKUs - List (capabilities, restrictions, `nextLink`):
  https://learn.microsoft.com/rest/api/compute/resource-skus/list
- Subscriptions - List Locations (metadata.regionType, availabilityZoneMappings):
  https://learn.microsoft.com/rest/api/resources/subscriptions/list-locations
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from tests.providers.apiserver import Reply

PRICES_PATH = "/api/retail/prices"
SUBSCRIPTION = "sub-0000-1111"
TOKEN = "tok-very-secret-123"
SKUS_PATH = f"/subscriptions/{SUBSCRIPTION}/providers/Microsoft.Compute/skus"
LOCATIONS_PATH = f"/subscriptions/{SUBSCRIPTION}/locations"

_SERIES = {"Standard_D4s_v5": "DSv5", "Standard_D4ps_v5": "Dpsv5", "Standard_E4s_v5": "ESv5"}


def price_item(
    sku: str,
    price: float,
    *,
    region: str = "eastus",
    windows: bool = False,
    variant: str = "",  # "" | "Spot" | "Low Priority"
    kind: str = "Consumption",  # Consumption | DevTestConsumption | Reservation
    unit: str = "1 Hour",
    primary: bool = True,
    currency: str = "USD",
    **extra: Any,
) -> dict[str, Any]:
    """One `Items` entry, field for field as the documented sample response."""
    short = sku.removeprefix("Standard_").replace("_", " ")
    meter = f"{short} {variant}".strip()
    series = _SERIES.get(sku) or (short.split()[0] if short else "Misc")
    product = f"Virtual Machines {series} Series" + (" Windows" if windows else "")
    item: dict[str, Any] = {
        "currencyCode": currency,
        "tierMinimumUnits": 0.0,
        "retailPrice": price,
        "unitPrice": price,
        "armRegionName": region,
        "location": {"eastus": "US East", "westus": "US West"}.get(region, region),
        "effectiveStartDate": "2023-06-01T00:00:00Z",
        "meterId": f"meter-{zlib.crc32(repr((sku, price, variant, kind, windows)).encode()):08x}",
        "meterName": meter,
        "productId": "DZH318Z0C2N1",
        "skuId": "DZH318Z0C2N1/00F4",
        "productName": product,
        "skuName": meter,
        "serviceName": "Virtual Machines",
        "serviceId": "DZH313Z7MMC8",
        "serviceFamily": "Compute",
        "unitOfMeasure": unit,
        "type": kind,
        "isPrimaryMeterRegion": primary,
        "armSkuName": sku,
    }
    if kind == "Reservation":
        item["reservationTerm"] = "1 Year"
    if kind == "Consumption" and not variant:
        item["savingsPlan"] = [
            {"unitPrice": round(price * 0.65, 4), "retailPrice": price * 0.65, "term": "3 Years"}
        ]
    item.update(extra)
    return item


def catalog() -> list[dict[str, Any]]:
    """Two regions of rows covering every branch of the row rules."""
    return [
        price_item("Standard_D4s_v5", 0.192),
        price_item("Standard_D4s_v5", 0.150, primary=False),  # cheaper, not primary: loses
        price_item("Standard_D4s_v5", 0.376, windows=True),
        price_item("Standard_D4s_v5", 0.0384, variant="Spot"),
        price_item("Standard_D4s_v5", 0.0752, variant="Spot", windows=True),
        price_item("Standard_D4s_v5", 0.0300, variant="Low Priority"),
        price_item("Standard_D4s_v5", 0.1000, kind="DevTestConsumption"),
        price_item("Standard_D4s_v5", 1009.0, kind="Reservation"),
        price_item("Standard_D4ps_v5", 0.160),
        price_item("Standard_D4ps_v5", 0.154),  # two primary rows: the lowest wins
        price_item("Standard_D4ps_v5", 0.031, variant="Spot", futureField={"new": [1, 2]}),
        price_item("Standard_NC24ads_A100_v4", 3.673),
        price_item("Standard_NC24ads_A100_v4", 0.7346, variant="Spot"),
        price_item("Standard_E4s_v5", 0.252),
        price_item("Standard_D2s_v5", 70.08, unit="1/Month"),  # not hourly: skipped
        price_item("", 0.05),  # a meter without a VM size: skipped
        price_item("Standard_D4s_v5", 0.208, region="westus"),
        price_item("Standard_D4s_v5", 0.0416, region="westus", variant="Spot"),
    ]


EASTUS_OFFERS = {
    "Standard_D4s_v5": (0.192, 0.0384),
    "Standard_D4ps_v5": (0.154, 0.031),
    "Standard_NC24ads_A100_v4": (3.673, 0.7346),
    "Standard_E4s_v5": (0.252, None),
}

_CLAUSE = re.compile(r"^\s*(\w+) eq '([^']*)'\s*$")
# $filter field -> row field (priceType filters the `type` field)
_FIELDS = {"priceType": "type"}


def evaluate(expression: str, row: dict[str, Any], *, skip: tuple[str, ...] = ()) -> bool:
    """Evaluate an OData `a eq 'x' and b eq 'y'` filter against one row."""
    for clause in expression.split(" and "):
        match = _CLAUSE.match(clause)
        if match is None:
            raise ValueError(f"unsupported clause {clause!r}")
        name, value = match.groups()
        if name in skip:
            continue
        if row.get(_FIELDS.get(name, name)) != value:
            return False
    return True


class PricesApi:
    """The Retail Prices endpoint: checks the query, filters, pages with `$skip`."""

    def __init__(
        self,
        rows: list[dict[str, Any]],
        *,
        base: str,
        page_size: int = 4,
        ignore: tuple[str, ...] = (),
        link_base: str | None = None,
        endless: bool = False,
        repeat: bool = False,
    ) -> None:
        self.rows = rows
        self.base = base
        self.page_size = page_size
        self.ignore = ignore
        self.link_base = link_base
        self.endless = endless
        self.repeat = repeat
        self.filters: list[str] = []

    def __call__(self, query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        assert query["api-version"] == ["2023-01-01-preview"]
        assert query["currencyCode"] == ["'USD'"]
        expression = query["$filter"][0]
        self.filters.append(expression)
        skip = int(query.get("$skip", ["0"])[0])
        matched = [r for r in self.rows if evaluate(expression, r, skip=self.ignore)]
        page = matched[skip : skip + self.page_size]
        more = skip + self.page_size < len(matched) or self.endless
        link = None
        if more:
            after = skip if self.repeat else skip + self.page_size
            # Azure's own style: absolute, port spelled out, query not percent-encoded.
            link = (
                f"{self.link_base or self.base}{PRICES_PATH}?currencyCode='USD'"
                f"&api-version=2023-01-01-preview&$filter={expression}&$skip={after}"
            )
        return Reply.json(
            {
                "BillingCurrency": "USD",
                "CustomerEntityId": "Default",
                "CustomerEntityType": "Retail",
                "Items": page,
                "NextPageLink": link,
                "Count": len(page),
            }
        )


def capability(name: str, value: str) -> dict[str, str]:
    return {"name": name, "value": value}


def sku(
    name: str,
    vcpus: int,
    memory: float,
    *,
    arch: str = "x64",
    gpus: int = 0,
    location: str = "eastus",
    restrictions: list[dict[str, Any]] | None = None,
    resource_type: str = "virtualMachines",
) -> dict[str, Any]:
    caps = [
        capability("MaxResourceVolumeMB", "0"),
        capability("vCPUs", str(vcpus)),
        capability("MemoryGB", f"{memory:g}"),
        capability("CpuArchitectureType", arch),
        capability("HyperVGenerations", "V1,V2"),
    ]
    if gpus:
        caps.append(capability("GPUs", str(gpus)))
    return {
        "resourceType": resource_type,
        "name": name,
        "tier": "Standard",
        "size": name.removeprefix("Standard_"),
        "family": "standardDSv5Family",
        "locations": [location],
        "locationInfo": [{"location": location, "zones": ["1", "2", "3"], "zoneDetails": []}],
        "capabilities": caps,
        "restrictions": restrictions or [],
    }


def location_restriction(location: str) -> dict[str, Any]:
    return {
        "type": "Location",
        "values": [location],
        "restrictionInfo": {"locations": [location]},
        "reasonCode": "NotAvailableForSubscription",
    }


def zone_restriction(location: str) -> dict[str, Any]:
    return {
        "type": "Zone",
        "values": [location],
        "restrictionInfo": {"locations": [location], "zones": ["3"]},
        "reasonCode": "NotAvailableForSubscription",
    }


def sku_list() -> list[dict[str, Any]]:
    return [
        sku("Standard_D4s_v5", 4, 16, restrictions=[zone_restriction("eastus")]),
        sku("Standard_D4ps_v5", 4, 16, arch="Arm64"),
        sku("Standard_NC24ads_A100_v4", 24, 220, gpus=1),
        sku("Standard_E4s_v5", 4, 32, restrictions=[location_restriction("eastus")]),
        sku("Standard_D4s_v5", 4, 16, location="westus"),
        sku("Premium_LRS", 0, 0, resource_type="disks"),
    ]


class ManagementApi:
    """Resource SKUs (paged with nextLink) and Locations, behind a bearer token."""

    def __init__(self, base: str, *, page_size: int = 2) -> None:
        self.base = base
        self.page_size = page_size

    def _authorised(self, headers: dict[str, str]) -> Reply | None:
        if headers.get("authorization") != f"Bearer {TOKEN}":
            seen = headers.get("authorization", "")
            return Reply.json(
                {"error": {"code": "InvalidAuthenticationToken", "message": f"bad {seen}"}}, 401
            )
        return None

    def skus(self, query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        refused = self._authorised(headers)
        if refused is not None:
            return refused
        assert query["api-version"] == ["2021-07-01"]
        match = re.fullmatch(r"location eq '(\w+)'", query["$filter"][0])
        assert match is not None
        rows = [s for s in sku_list() if match.group(1) in s["locations"]]
        start = int(query.get("$skiptoken", ["0"])[0])
        page: dict[str, Any] = {"value": rows[start : start + self.page_size]}
        if start + self.page_size < len(rows):
            page["nextLink"] = (
                f"{self.base}{SKUS_PATH}?api-version=2021-07-01&$filter={query['$filter'][0]}"
                f"&$skiptoken={start + self.page_size}"
            )
        return Reply.json(page)

    def locations(self, query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        refused = self._authorised(headers)
        if refused is not None:
            return refused
        assert query["api-version"] == ["2022-12-01"]
        return Reply.json({"value": locations()})


def location(name: str, display: str, region_type: str = "Physical") -> dict[str, Any]:
    return {
        "id": f"/subscriptions/{SUBSCRIPTION}/locations/{name}",
        "name": name,
        "type": "Region",
        "displayName": display,
        "regionalDisplayName": f"(US) {display}",
        "metadata": {
            "regionType": region_type,
            "regionCategory": "Recommended",
            "geography": "United States",
            "geographyGroup": "US",
            "pairedRegion": [],
        },
        "availabilityZoneMappings": (
            [{"logicalZone": z, "physicalZone": f"{name}-az{z}"} for z in ("2", "1", "3")]
            if region_type == "Physical" and name == "eastus"
            else []
        ),
    }


def locations() -> list[dict[str, Any]]:
    return [
        location("westus", "West US"),
        location("eastus", "East US"),
        location("us", "United States", "Logical"),
        location("global", "Global", "Logical"),
    ]
