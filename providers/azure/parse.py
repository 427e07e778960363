"""Pure parsers for Azure's payloads: Retail Prices pages, Resource SKUs pages, locations,
and what a VM size's name says about its shape. No network here. Each page is checked whole
against its model first (payloads.py), so what is read here has its types.

Wire formats, as documented:
- Retail Prices: https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices
- Resource SKUs: https://learn.microsoft.com/rest/api/compute/resource-skus/list
- Locations: https://learn.microsoft.com/rest/api/resources/subscriptions/list-locations
- Size names: https://learn.microsoft.com/azure/virtual-machines/vm-naming-conventions
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from providers.cloud.offers import Offer
from providers.core.errors import ShoalError
from providers.core.schema import given
from providers.models import RegionSpec

if TYPE_CHECKING:
    from providers.azure.payloads import PriceItem, ResourceSku

ON_DEMAND = "on_demand"
SPOT = "spot"
HOUR = "1 Hour"


def check_currency(code: str, where: str) -> None:
    if code != "USD":
        raise ShoalError(
            f"{where}: prices are in {code or 'an unnamed currency'!r}, not USD; shoal "
            "compares USD prices only; point SHOAL_AZURE_PRICES_URL at a source that serves "
            "currencyCode='USD'"
        )


# -- Retail Prices ---------------------------------------------------------------------------


def price_page(page: Any, where: str) -> tuple[list[PriceItem], str | None]:
    """A page's `Items`, checked (decoded JSON or a Body), and its `NextPageLink` (None on
    the last page)."""
    from providers.azure.payloads import PRICES

    read = PRICES.read(page, where)
    billing = read.get("BillingCurrency")
    if billing:
        check_currency(billing, where)
    return read["Items"], read.get("NextPageLink") or None


@dataclass(frozen=True, slots=True)
class PriceRow:
    sku: str
    kind: str  # ON_DEMAND | SPOT
    price: float
    primary: bool


def price_row(item: PriceItem, where: str) -> PriceRow | None:
    """The hourly Linux price a row gives, or None when shoal does not use the row."""
    check_currency(item.get("currencyCode") or "", where)
    price = item["retailPrice"]
    sku = item.get("armSkuName") or ""
    product = item.get("productName") or ""
    names = f"{item.get('skuName') or ''} {item.get('meterName') or ''}"
    if not sku or item.get("type") != "Consumption":
        # DevTestConsumption is a subscription-offer discount and Reservation a 1/3-year
        # commitment priced per term: neither is what anyone pays by the hour.
        return None
    if "Windows" in product or item.get("unitOfMeasure") != HOUR:
        return None
    if item.get("tierMinimumUnits") or price <= 0:
        # A tier above 0 units is a volume discount, and a zero price a placeholder meter:
        # either would undercut the real hourly rate.
        return None
    if "Low Priority" in names:
        # Low Priority is Batch's older preemptible tier, billed only inside Batch pools:
        # not a price for a VM anyone can start, so it is not reported as spot.
        return None
    kind = SPOT if "Spot" in names else ON_DEMAND
    return PriceRow(sku, kind, price, item.get("isPrimaryMeterRegion") is True)


@dataclass(frozen=True, slots=True)
class Ask:
    """What the `$filter` and `currencyCode` of a Retail Prices request asked for."""

    region: str  # armRegionName; Azure compares it without case
    service: str = "Virtual Machines"
    price_type: str = "Consumption"  # the `priceType` clause filters the items' `type`
    currency: str = "USD"


# Why an item is not one the request asked for; the values name it in the snapshot's note.
OTHER_REGION = "other regions"
OTHER_SERVICE = "other services"
OTHER_PRICE_TYPE = "other price types"
OTHER_CURRENCY = "other currencies"


def unasked(item: PriceItem, ask: Ask) -> str | None:
    """Which clause of the request the item falls outside, or None when it is one asked for.

    A mirror, a proxy or a saved page chain may ignore `$filter`; filing whatever comes back
    under the requested region would price one region with another's meters."""
    if (item.get("armRegionName") or "").lower() != ask.region.lower():
        return OTHER_REGION
    if item.get("serviceName") != ask.service:
        return OTHER_SERVICE
    if item.get("type") != ask.price_type:
        return OTHER_PRICE_TYPE
    if item.get("currencyCode") != ask.currency:
        return OTHER_CURRENCY
    return None


class PriceBook:
    """The winning row per (size, kind) over all pages; memory grows with sizes, not rows.

    A row from the region's primary meter beats a non-primary one (the preview API returns
    both); among rows that still compete, the lowest retailPrice wins, since that is the
    rate Azure bills when several meters describe the same size. With an `ask`, items the
    request did not ask for are dropped before that and counted in `dropped` by reason.
    """

    def __init__(self, ask: Ask | None = None) -> None:
        self._best: dict[tuple[str, str], PriceRow] = {}
        self._ask = ask
        self.rows = 0
        self.dropped: dict[str, int] = {}
        self.other_currency: str | None = None  # the first currency not asked for, if any

    def add(self, item: PriceItem, where: str) -> None:
        self.rows += 1
        if self._ask is not None:
            reason = unasked(item, self._ask)
            if reason is not None:
                self.dropped[reason] = self.dropped.get(reason, 0) + 1
                if reason == OTHER_CURRENCY and self.other_currency is None:
                    self.other_currency = item.get("currencyCode") or ""
                return
        row = price_row(item, where)
        if row is None:
            return
        key = (row.sku, row.kind)
        held = self._best.get(key)
        if held is None or (not row.primary, row.price) < (not held.primary, held.price):
            self._best[key] = row

    def offers(self) -> dict[str, Offer]:
        offers: dict[str, Offer] = {}
        for (sku, kind), row in sorted(self._best.items()):
            offer = offers.setdefault(sku, Offer(sku))
            if kind == SPOT:
                offer.spot = row.price
            else:
                offer.on_demand = row.price
        return offers


# -- what a size name says -------------------------------------------------------------------

# [Family][Sub-family][vCPUs][-constrained vCPUs][features]_[accelerator]_[version]
_SIZE = re.compile(r"^(?:Standard|Basic)_([A-Z]+)(\d+)(?:-(\d+))?([a-z]*)((?:_[A-Za-z0-9]+)*)$")
_VERSION = re.compile(r"^v\d+$")
# In D/DS v1-v2 and A v1 the number is a size index, not a vCPU count.
_LEGACY_D = {1: 1, 2: 2, 3: 4, 4: 8, 5: 16, 11: 2, 12: 4, 13: 8, 14: 16, 15: 20}
_LEGACY_A = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 8: 8, 9: 16, 10: 8, 11: 16}
_GPU_MODELS = ("A100", "H100", "H200", "V100", "T4", "A10", "MI300X", "L4", "L40S", "GB200")
# (size pattern, model, GiB per GPU, vCPUs per GPU); from the N-series size pages.
_GPU_FAMILIES: tuple[tuple[re.Pattern[str], str, float, int], ...] = tuple(
    (re.compile(p), m, g, c)
    for p, m, g, c in (
        (r"nc\d+ads_a100_v4", "A100", 80, 24),
        (r"nd\d+amsr_a100_v4", "A100", 80, 12),
        (r"nd\d+asr_v4", "A100", 40, 12),
        (r"ncc?\d+ad[a-z]*_h100_v5", "H100", 94, 40),
        (r"nd\d+[a-z]*_h100_v5", "H100", 80, 12),
        (r"nd\d+[a-z]*_h200_v5", "H200", 141, 12),
        (r"nd\d+[a-z]*_mi300x_v5", "MI300X", 192, 12),
        (r"nc\d+r?s_v3", "V100", 16, 6),
        (r"nd\d+rs_v2", "V100", 32, 5),
        (r"nc\d+as_t4_v3", "T4", 16, 0),
        (r"nv\d+adm?s_a10_v5", "A10", 24, 36),
        (r"nv\d+s_v3", "M60", 8, 12),
        (r"nv\d+as_v4", "MI25", 16, 32),
    )
)
_T4_COUNTS = {4: 1, 8: 1, 16: 1, 64: 4}  # NCasT4_v3 is not proportional


@dataclass(slots=True)
class Shape:
    vcpus: float = 0.0
    arch: str = ""
    gpu: str = ""
    gpu_count: int = 0
    gpu_memory_gib: float = 0.0


def shape_from_name(name: str) -> Shape:
    """What the size name tells: vCPUs, arch (a `p` feature letter is Arm), GPU model, count
    and memory for the N-series families known here. Memory is never in the name."""
    match = _SIZE.match(name)
    if match is None:
        return Shape()
    family, number, constrained, features, rest = match.groups()
    tokens = [t for t in rest.split("_") if t]
    version = next((t for t in tokens if _VERSION.match(t)), "")
    size = int(number)
    if constrained:
        vcpus = int(constrained)
    elif family in ("D", "DS") and version in ("", "v2"):
        vcpus = _LEGACY_D.get(size, 0)
    elif family == "A" and not version:
        vcpus = _LEGACY_A.get(size, 0)
    else:
        vcpus = size
    shape = Shape(vcpus=float(vcpus), arch="arm64" if "p" in features else "x86_64")
    upper = {t.upper() for t in tokens}
    shape.gpu = next((m for m in _GPU_MODELS if m in upper), "")
    core = name.split("_", 1)[1].lower()
    for pattern, model, gib, per_gpu in _GPU_FAMILIES:
        if pattern.fullmatch(core):
            shape.gpu, shape.gpu_memory_gib = model, float(gib)
            # A size smaller than one GPU's share gets a slice of a GPU: count 0, model kept,
            # and the slice's memory (NV6ads_A10_v5: a sixth of an A10, 4 GiB), as the size
            # pages give it, so that `gpu_memory_gib>=16` does not pick a 4 GiB slice.
            shape.gpu_count = _T4_COUNTS.get(size, 0) if per_gpu == 0 else size // per_gpu
            if per_gpu and size < per_gpu:
                shape.gpu_memory_gib = float(gib) * size / per_gpu
            break
    return shape


# -- Resource SKUs ---------------------------------------------------------------------------


@dataclass(slots=True)
class SkuSpec:
    vcpus: float
    memory_gib: float
    gpu_count: int
    arch: str
    restricted: bool


_ARCH = {"x64": "x86_64", "arm64": "arm64"}
_NUMBERS = frozenset({"vCPUsAvailable", "vCPUs", "MemoryGB", "GPUs"})  # capabilities read


def _finite(text: str) -> float | None:
    """A capability's number (capabilities are strings: "16"), or None if it is not one."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _restricted(sku: ResourceSku, region: str) -> bool:
    """Restricted in the whole location for this subscription (a zone restriction is not)."""
    for restriction in sku.get("restrictions") or []:
        if restriction.get("type") != "Location":
            continue
        places = list(restriction.get("values") or [])
        places += (restriction.get("restrictionInfo") or {}).get("locations") or []
        if region.lower() in {place.lower() for place in places}:
            return True
    return False


def sku_page(page: Any, region: str, where: str) -> tuple[dict[str, SkuSpec], str | None]:
    """The virtual machine sizes on one Resource SKUs page (decoded JSON or a Body), and its
    `nextLink`."""
    from providers.azure.payloads import SKUS

    read = SKUS.read(page, where)
    specs: dict[str, SkuSpec] = {}
    for index, sku in enumerate(read["value"]):
        if sku.get("resourceType") != "virtualMachines":
            continue
        places = sku.get("locations")
        if places and region.lower() not in {place.lower() for place in places}:
            continue
        capabilities: dict[str, float] = {}
        arch = ""
        for at, cap in enumerate(sku.get("capabilities") or []):
            name, raw = cap.get("name") or "", cap.get("value") or ""
            if name == "CpuArchitectureType":
                arch = _ARCH.get(raw.lower(), "")
            elif name in _NUMBERS and raw:
                value = _finite(raw)
                if value is None:
                    path = f"value[{index}].capabilities[{at}].value"
                    said = f"expected a number ({name}), got {given(raw)}"
                    raise SKUS.malformed(where, path, said)
                capabilities[name] = value
        # vCPUsAvailable is what the guest sees on constrained-core sizes (E16-4ds_v5: 4).
        specs[sku.get("name") or ""] = SkuSpec(
            vcpus=capabilities.get("vCPUsAvailable") or capabilities.get("vCPUs", 0.0),
            # Azure's MemoryGB is binary: Standard_D4s_v5 says 16 for its 16 GiB.
            memory_gib=capabilities.get("MemoryGB", 0.0),
            gpu_count=int(capabilities.get("GPUs", 0.0)),
            arch=arch,
            restricted=_restricted(sku, region),
        )
    return specs, read.get("nextLink") or None


# -- locations -------------------------------------------------------------------------------


def locations_page(page: Any, where: str) -> tuple[list[RegionSpec], str | None]:
    """Physical regions (logical ones such as `global` or `us` hold no VMs), from a page
    (decoded JSON or a Body)."""
    from providers.azure.payloads import LOCATIONS

    read = LOCATIONS.read(page, where)
    regions: list[RegionSpec] = []
    for location in read["value"]:
        if (location.get("metadata") or {}).get("regionType") != "Physical":
            continue
        zones = [z.get("logicalZone") for z in location.get("availabilityZoneMappings") or []]
        regions.append(
            RegionSpec(
                name=location.get("name") or "",
                zones=sorted(zone for zone in zones if zone),
                location=location.get("displayName") or "",
            )
        )
    return regions, read.get("nextLink") or None
