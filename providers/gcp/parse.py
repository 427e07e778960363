"""Cloud Billing Catalog SKUs -> per-region rates -> priced machine types. Pure functions;
a page is checked whole against its model first (payloads.py).

Wire format (Cloud Billing Catalog API v1, `services.skus.list`,
https://cloud.google.com/billing/v1/how-tos/catalog-api,
https://cloud.google.com/billing/docs/reference/rest/v1/services.skus/list): a page is
`{"skus": [...], "nextPageToken": ""}`; a SKU has `description`, `category {resourceFamily,
resourceGroup, usageType}`, `serviceRegions` and `pricingInfo[{effectiveTime,
pricingExpression {usageUnit, tieredRates[{startUsageAmount, unitPrice {currencyCode,
units, nanos}}]}}]`. `units` is an int64 and so a JSON string; zero values are omitted.

Compute Engine bills a VM per vCPU-hour and per GiB-hour of its series, plus per GPU-hour;
accelerator-optimized series (A2, A3, G2) are "billed for their attached GPUs, predefined
vCPU, memory, and bundled Local SSD"
(https://cloud.google.com/compute/docs/accelerator-optimized-machines): their GPUs come
from the GPU SKUs. Bundled Local SSD is not included.

Which SKUs count (one table, `classify`): the description with its provisioning-mode
words and location removed must read `<SERIES> [AMD|Arm|Intel] [Memory-optimized]
[Predefined] [Instance] Core|Ram` (series `N2`, `N2D`, `C3`, `A3`, `M3` ...; C2 is "Compute
optimized", M1 "Memory-optimized"), `Nvidia <model> GPU` (model in GPU_SKU_MODELS) or one of
the GPU SKUs named without that wrapper (BARE_GPU_SKUS, e.g. G4's "RTX 6000 96GB"). Everything
else is left out: commitments (usageType Commit*, "Commitment"), custom and extended memory,
sole tenancy, premiums/upgrades (so M2, billed as M1 plus an upgrade premium, is never
priced), licences, Windows, virtual workstations, reservations.
Mode: usageType "Preemptible" (or "Preemptible" in the text) is Spot; "DWS Defined
Duration" / "DWS Flex Start" / "Flex Start" is flex-start and "Calendar Mode" is calendar
mode, both feeding the scheduled price (flex-start first); the rest on-demand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from providers.cloud.offers import Offer
from providers.core.errors import ShoalError
from providers.gcp.shapes import GPU_MODELS, Shape

if TYPE_CHECKING:
    from providers.gcp.payloads import Sku

COMPUTE_SERVICE_ID = "6F81-5844-456A"  # Compute Engine in the billing catalog

ONDEMAND, SPOT, FLEX, CALENDAR = "ondemand", "spot", "flex", "calendar"
CORE, RAM, GPU = "core", "ram", "gpu"

# GPU SKU model text (between "Nvidia " and " GPU", lowercased) -> Compute accelerator type.
GPU_SKU_MODELS: dict[str, str] = {
    "tesla k80": "nvidia-tesla-k80",
    "tesla p4": "nvidia-tesla-p4",
    "tesla p100": "nvidia-tesla-p100",
    "tesla v100": "nvidia-tesla-v100",
    "tesla t4": "nvidia-tesla-t4",
    "tesla a100": "nvidia-tesla-a100",
    "tesla a100 80gb": "nvidia-a100-80gb",
    "a100 80gb": "nvidia-a100-80gb",
    "l4": "nvidia-l4",
    "h100 80gb": "nvidia-h100-80gb",
    "h100 80gb mega": "nvidia-h100-mega-80gb",
    "h100 mega 80gb": "nvidia-h100-mega-80gb",
    "h200 141gb": "nvidia-h200-141gb",
    "b200": "nvidia-b200",
}

# GPU SKUs whose description has no "Nvidia ... GPU" wrapper (text after the mode words and
# location are removed) -> Compute accelerator type. G4's card is billed as "RTX 6000 96GB
# running in <location>" (and "... attached to Spot Preemptible VMs ...").
BARE_GPU_SKUS: dict[str, str] = {
    "rtx 6000 96gb": "nvidia-rtx-pro-6000",
}

# Series words in SKU descriptions that are not the machine prefix itself.
_SERIES_ALIASES = {"compute optimized": "c2", "memory-optimized": "m1"}

_EXCLUDED = (
    "commitment",
    "custom",
    "extended",
    "sole tenancy",
    "sole-tenan",
    "premium",
    "upgrade",
    "licens",
    "windows",
    "virtual workstation",
    "local ssd",
    "capacity optimized",
)
_MODE_PREFIX = re.compile(
    r"^(?:spot preemptible|preemptible|dws defined duration|dws flex start|flex start|"
    r"dws calendar mode|reserved) "
)
_ATTACHED = re.compile(r" attached to [a-z -]+? vms\b")
_LOCATION = re.compile(r" (?:running )?in .*$")
_MACHINE = re.compile(
    r"^(?P<series>[a-z]+\d+[a-z]?|compute optimized|memory-optimized)"
    r"(?: (?:amd|arm|intel))?(?: memory-optimized)?(?: predefined)?(?: instance)?"
    r" (?P<kind>core|ram)$"
)
_GPU = re.compile(r"^nvidia (?P<model>.+?) gpu$")
_REGION = re.compile(r"^[a-z]+-[a-z]+\d+$")
_UNITS = {CORE: "h", RAM: "GiBy.h", GPU: "h"}


def classify(description: str, usage_type: str) -> tuple[str, str, str] | None:
    """(kind, family or accelerator type, mode) for a SKU that prices part of a VM, else None."""
    if usage_type not in ("OnDemand", "Preemptible"):
        return None  # Commit1Yr, Commit3Yr and whatever else Google adds
    text = " ".join(description.lower().split())
    if any(word in text for word in _EXCLUDED):
        return None
    # The flex-start and calendar words come first: such a SKU may also say Preemptible.
    if "dws defined duration" in text or "flex start" in text:
        mode = FLEX
    elif "calendar mode" in text:
        mode = CALENDAR
    elif usage_type == "Preemptible" or "preemptible" in text:
        mode = SPOT
    elif text.startswith("reserved "):
        return None  # reservation placeholders, some priced at 0
    else:
        mode = ONDEMAND
    while (match := _MODE_PREFIX.match(text)) is not None:
        text = text[match.end() :]
    text = _ATTACHED.sub("", text)
    text = _LOCATION.sub("", text)
    if (machine := _MACHINE.match(text)) is not None:
        series = machine["series"]
        return machine["kind"], _SERIES_ALIASES.get(series, series), mode
    if (gpu := _GPU.match(text)) is not None:
        accelerator = GPU_SKU_MODELS.get(gpu["model"])
        return (GPU, accelerator, mode) if accelerator else None
    if text in BARE_GPU_SKUS:
        return GPU, BARE_GPU_SKUS[text], mode
    return None


def unit_price(sku: Sku) -> tuple[float, str] | None:
    """(USD per unit, usageUnit) of the SKU's current price.

    Tier choice: Compute SKUs have one tier starting at 0 usage. Where several start at 0
    (a free allowance listed before the price), the last of them is the price of a paid
    unit; tiers starting above 0 are volume steps a machine-hour never reaches. No tier
    at 0 means no usable price. The newest pricingInfo (by effectiveTime) is used.
    """
    infos = sku.get("pricingInfo") or []
    if not infos:
        return None
    info = max(infos, key=lambda p: p.get("effectiveTime") or "")
    expression = info.get("pricingExpression") or {}
    tiers = [t for t in expression.get("tieredRates") or [] if not t.get("startUsageAmount")]
    if not tiers:
        return None
    price = tiers[-1].get("unitPrice") or {}
    currency = price.get("currencyCode") or "USD"
    if currency != "USD":
        raise ShoalError(
            f"gcp: SKU {sku.get('skuId') or '?'} is priced in {currency}, not USD; shoal asks "
            "for currencyCode=USD, so a proxy or mirror in between changed it"
        )
    value = price.get("units", 0.0) + price.get("nanos", 0.0) / 1e9
    return value, expression.get("usageUnit") or ""


@dataclass
class RateBook:
    """What the whole (global) SKU list says, reduced to what pricing needs."""

    # (region, kind, family or accelerator, mode) -> USD per unit-hour
    rates: dict[tuple[str, str, str, str], float] = field(default_factory=dict)
    regions: set[str] = field(default_factory=set)
    locations: dict[str, str] = field(default_factory=dict)  # region -> "Belgium"
    skus: int = 0

    def rate(self, region: str, kind: str, what: str, mode: str) -> float | None:
        return self.rates.get((region, kind, what, mode))

    def add_page(self, page: Any, where: str = "gcp: SKU list") -> str:
        """Fold one `skus.list` page in (decoded JSON or a Body), checked whole first;
        returns its nextPageToken ("" at the end)."""
        from providers.gcp.payloads import SKUS

        read = SKUS.read(page, where)
        for sku in read.get("skus", []):
            self.add_sku(sku)
        return read.get("nextPageToken") or ""

    def add_sku(self, sku: Sku) -> None:
        self.skus += 1
        category = sku.get("category") or {}
        if category.get("resourceFamily") != "Compute":
            return
        regions = [r for r in sku.get("serviceRegions") or [] if _REGION.match(r)]
        self.regions.update(regions)
        description = sku.get("description") or ""
        if len(regions) == 1 and " running in " in description:
            self.locations.setdefault(regions[0], description.rsplit(" running in ", 1)[1])
        found = classify(description, category.get("usageType") or "")
        if found is None:
            return
        kind, what, mode = found
        priced = unit_price(sku)
        if priced is None:
            return
        price, unit = priced
        if price <= 0 or unit != _UNITS[kind]:
            return  # $0 placeholders and per-month or per-GB units do not price an hour
        for region in regions:
            # Google lists one SKU per location, so a repeat is a duplicate: first one wins.
            self.rates.setdefault((region, kind, what, mode), price)


def machine_price(shape: Shape, region: str, book: RateBook, mode: str) -> float | None:
    """vCPUs x core rate + GiB x RAM rate + GPUs x GPU rate; None if any rate is missing."""
    core = book.rate(region, CORE, shape.family, mode)
    ram = book.rate(region, RAM, shape.family, mode)
    if core is None or ram is None:
        return None
    total = shape.billed_vcpus * core + shape.memory_gib * ram
    if shape.gpu_count:
        gpu = book.rate(region, GPU, shape.accelerator, mode)
        if gpu is None:
            return None
        total += shape.gpu_count * gpu
    return round(total, 9)


def price_offers(
    region: str, shapes: list[Shape], book: RateBook, shape_source: str = ""
) -> dict[str, Offer]:
    """Offers for the shapes whose series has on-demand rates in `region`; others left out.
    `shape_source` says where the shapes came from when that is not the SKU list."""
    offers: dict[str, Offer] = {}
    for shape in sorted(shapes, key=lambda s: s.name):
        on_demand = machine_price(shape, region, book, ONDEMAND)
        if on_demand is None:
            continue
        scheduled = machine_price(shape, region, book, FLEX)
        if scheduled is None:
            scheduled = machine_price(shape, region, book, CALENDAR)
        model, gpu_gib = GPU_MODELS.get(shape.accelerator, (shape.accelerator, 0.0))
        offers[shape.name] = Offer(
            instance_type=shape.name,
            vcpus=shape.vcpus,
            memory_gib=shape.memory_gib,
            arch=shape.arch,
            gpu=model if shape.gpu_count else "",
            gpu_count=shape.gpu_count,
            gpu_memory_gib=float(gpu_gib) if shape.gpu_count else 0.0,
            on_demand=on_demand,
            spot=machine_price(shape, region, book, SPOT),
            scheduled=scheduled,
            shape_source=shape_source,
        )
    return offers


def unshaped_notes(region: str, book: RateBook, known: list[Shape]) -> list[str]:
    """Snapshot notes naming what `region` has rates for but no shape carries, so a machine
    family Google prices and shoal cannot list is said, not silently missing.

    `known` is every shape shoal knows (all regions' API machine types, or the whole built-in
    table), not this region's: a family offered elsewhere is not unknown here. GPUs priced on
    no known machine type are mostly the ones attached to N1 VMs, which shoal does not list as
    combinations."""
    families = {shape.family for shape in known}
    accelerators = {shape.accelerator for shape in known if shape.gpu_count}
    priced: dict[str, set[str]] = {CORE: set(), RAM: set(), GPU: set()}
    for rate_region, kind, what, _mode in book.rates:
        if rate_region == region:
            priced[kind].add(what)
    notes: list[str] = []
    if missing := sorted((priced[CORE] | priced[RAM]) - families):
        notes.append(f"priced families without known shapes (not listed): {', '.join(missing)}")
    if gpus := sorted(priced[GPU] - accelerators):
        notes.append(f"priced GPUs on no known machine type (not listed): {', '.join(gpus)}")
    return notes
