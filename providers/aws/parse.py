"""EC2 offer-file products and prices -> Offers (pure functions, no I/O).

Attribute names and spellings are the EC2 offer file's (every value a string):
`instanceType`, `vcpu` ("96"), `memory` ("1,152 GiB"), `gpu` (a count, "NA" when none),
`gpuMemory` ("NA" or e.g. "320 GB"), `physicalProcessor`, `processorArchitecture` ("64-bit"),
`tenancy`, `operatingSystem`, `preInstalledSw`, `capacitystatus`, `licenseModel`,
`marketoption`. https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-service-price-list-file-for-services.html
"""

from __future__ import annotations

import re
from typing import Any

from providers import gpus
from providers.aws.offerfile import OfferScan, Product
from providers.cloud.offers import Offer
from providers.core.errors import ShoalError

# Bytes every kept product's slice contains verbatim; only lets the scan skip decoding.
# Not "Used": keep_product takes a product without capacitystatus as used.
NEEDLES = (b'"Linux"', b'"Shared"', b'"Compute Instance"')

# Instance family -> (GPU model, GiB per GPU or 0 if not fixed by the family). The offer
# files give a GPU count but not always the model, so the family names it.
GPU_FAMILIES: dict[str, tuple[str, float]] = {
    "p6-b200": ("B200", 179.0),
    "p5en": ("H200", 141.0),
    "p5e": ("H200", 141.0),
    "p5": ("H100", 80.0),
    "p4de": ("A100", 80.0),
    "p4d": ("A100", 40.0),
    "p3dn": ("V100", 32.0),
    "p3": ("V100", 16.0),
    "p2": ("K80", 12.0),
    "g6e": ("L40S", 48.0),
    "g6": ("L4", 24.0),
    "gr6": ("L4", 24.0),
    "g5g": ("T4G", 16.0),
    "g5": ("A10G", 24.0),
    "g4dn": ("T4", 16.0),
    "g4ad": ("Radeon Pro V520", 8.0),
    "g3": ("M60", 8.0),
    "g3s": ("M60", 8.0),
    "inf1": ("Inferentia", 8.0),
    "inf2": ("Inferentia2", 32.0),
    "trn1": ("Trainium", 32.0),
    "trn1n": ("Trainium", 32.0),
    "trn2": ("Trainium2", 96.0),
    "dl1": ("Gaudi", 32.0),
    "dl2q": ("Qualcomm AI 100", 16.0),
}
# Accelerator families whose chips the `gpu` attribute does not count (count per size).
_ACCELERATOR_COUNT_ATTRIBUTES = ("gpu", "accelerator", "neuronDevices")
_NUMBER = re.compile(r"[0-9][0-9,]*(?:\.[0-9]+)?")
_UNITS_GIB = {"gib": 1.0, "gb": 1.0, "mib": 1 / 1024, "mb": 1 / 1024, "tib": 1024.0, "tb": 1024.0}


def keep_product(product: Product) -> bool:
    """On-demand Linux on shared tenancy, no pre-installed software, capacity used."""
    if product.get("productFamily") != "Compute Instance":
        return False
    attributes = product.get("attributes")
    if not isinstance(attributes, dict) or not attributes.get("instanceType"):
        return False
    return (
        attributes.get("operatingSystem") == "Linux"
        and attributes.get("tenancy") == "Shared"
        and attributes.get("preInstalledSw", "NA") == "NA"
        and attributes.get("capacitystatus", "Used") == "Used"
        and attributes.get("licenseModel", "No License required") == "No License required"
        and attributes.get("marketoption", "OnDemand") == "OnDemand"
        # Local Zones and Wavelength Zones price the same type differently from the region.
        and attributes.get("locationType", "AWS Region") == "AWS Region"
    )


def offers_from_scan(scan: OfferScan) -> dict[str, Offer]:
    """One Offer per instance type; with several kept skus for one type (should not happen
    after the filter) the lowest hourly price wins. Raises ShoalError when prices exist
    but none is in USD."""
    if scan.currencies and "USD" not in scan.currencies:
        found = ", ".join(sorted(scan.currencies))
        raise ShoalError(
            f"the offer file prices in {found}, not USD; shoal compares prices in USD only"
        )
    offers: dict[str, Offer] = {}
    for sku, product in scan.products.items():
        offer = offer_from_attributes(product.get("attributes") or {})
        currency, price = scan.hourly.get(sku, ("", -1.0))
        offer.on_demand = price if currency == "USD" and price > 0 else None
        known = offers.get(offer.instance_type)
        if known is not None and (
            offer.on_demand is None
            or (known.on_demand is not None and known.on_demand <= offer.on_demand)
        ):
            continue
        offers[offer.instance_type] = offer
    return offers


def offer_from_attributes(attributes: dict[str, Any]) -> Offer:
    instance_type = str(attributes.get("instanceType", ""))
    gpu_count = _count(attributes)
    gpu, gpu_memory = gpu_model(instance_type, attributes, gpu_count)
    return Offer(
        instance_type=instance_type,
        vcpus=_number(attributes.get("vcpu")),
        memory_gib=gib(attributes.get("memory")),
        arch=arch(attributes),
        gpu=gpu if gpu_count else "",
        gpu_count=gpu_count,
        gpu_memory_gib=gpu_memory if gpu_count else 0.0,
    )


def family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def arch(attributes: dict[str, Any]) -> str:
    """x86_64 or arm64. `processorArchitecture` says "64-bit" for both, so an explicit
    arm64/x86_64 value wins, then Graviton/AWS/Apple processors are arm64."""
    declared = str(attributes.get("processorArchitecture", "")).lower()
    if "arm" in declared or "aarch64" in declared:
        return "arm64"
    if "x86" in declared:
        return "x86_64"
    processor = str(attributes.get("physicalProcessor", ""))
    if not processor and not declared:
        return ""
    if "Graviton" in processor or processor.startswith(("AWS", "Apple")):
        return "arm64"
    return "x86_64"


def gpu_model(instance_type: str, attributes: dict[str, Any], count: int) -> tuple[str, float]:
    """(model, GiB per GPU). An explicit model attribute wins over the family table.
    `gpuMemory` is read as the total across GPUs (as EC2 reports GPU memory), unless the
    family's per-GPU size says the file gave it per GPU."""
    name = family(instance_type)
    table_model, table_memory = GPU_FAMILIES.get(name, ("", 0.0))
    explicit = ""
    for key in ("gpuModel", "gpuType", "acceleratorModel"):
        value = str(attributes.get(key, "")).strip()
        if value and value.upper() != "NA":
            explicit = value
            break
    model = gpus.model(explicit) if explicit else table_model
    total = gib(attributes.get("gpuMemory"))
    if total <= 0 or count <= 0:
        return model, table_memory
    per_gpu = total / count
    if table_memory and abs(total - table_memory) < abs(per_gpu - table_memory):
        per_gpu = total
    return model, round(per_gpu, 2)


def _count(attributes: dict[str, Any]) -> int:
    for key in _ACCELERATOR_COUNT_ATTRIBUTES:
        value = _number(attributes.get(key))
        if value > 0:
            return int(value)
    return 0


def _number(value: Any) -> float:
    match = _NUMBER.search(str(value or ""))
    if match is None:
        return 0.0
    return float(match.group(0).replace(",", ""))


def gib(value: Any) -> float:
    """ "1,152 GiB" -> 1152.0, "512 MiB" -> 0.5, "NA" -> 0.0."""
    text = str(value or "").strip()
    match = _NUMBER.search(text)
    if match is None:
        return 0.0
    number = float(match.group(0).replace(",", ""))
    unit = text[match.end() :].strip().lower()
    return round(number * _UNITS_GIB.get(unit, 1.0), 4)
