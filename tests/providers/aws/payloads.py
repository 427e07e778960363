"""AWS Price List and EC2 payloads, built from the documented wire formats.

- Offer file (products / terms.OnDemand / terms.Reserved, priceDimensions, pricePerUnit):
  https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-service-price-list-file-for-services.html
- Region index (regions -> regionCode, currentVersionUrl relative to the pricing host):
  https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/service-region-index-file-for-service.html
- Bulk API walk-through (index.json -> region_index.json -> offer file):
  https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-the-aws-price-list-bulk-api.html
- DescribeSpotPriceHistory (Query API, XML, spotPriceHistorySet / nextToken):
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html

Product attributes follow the real EC2 files (every value a string: `"vcpu": "8"`,
`"memory": "1,152 GiB"`, `"gpuMemory": "NA"`), and the real files' layout: pretty-printed
with two-space indentation and `" : "` separators. `write_offer_file` streams a big file to
disk for the benchmark without building it in memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OFFER_PATH = "/offers/v1.0/aws/AmazonEC2/20250101000000/{region}/index.json"
REGION_INDEX_PATH = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
SERVICE_INDEX_PATH = "/offers/v1.0/aws/index.json"

LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "cn-north-1": "China (Beijing)",
}


@dataclass(frozen=True)
class Shape:
    instance_type: str
    vcpu: str
    memory: str
    processor: str
    gpu: str = "NA"  # count, as the files spell it
    gpu_memory: str = "NA"
    price: float = 0.1


SHAPES = [
    Shape("m5.large", "2", "8 GiB", "Intel Xeon Platinum 8175", price=0.096),
    Shape("c5ad.2xlarge", "8", "16 GiB", "AMD EPYC 7R32", price=0.344),
    Shape("m7g.xlarge", "4", "16 GiB", "AWS Graviton3 Processor", price=0.1632),
    Shape("t4g.micro", "2", "1 GiB", "AWS Graviton2 Processor", price=0.0084),
    Shape("x2iedn.32xlarge", "128", "4,096 GiB", "Intel Xeon Scalable (Icelake)", price=26.676),
    Shape("p5.48xlarge", "192", "2,048 GiB", "AMD EPYC 7R13 Processor", "8", "640 GB", 98.32),
    Shape("p4d.24xlarge", "96", "1,152 GiB", "Intel Xeon Platinum 8275L", "8", "320 GB", 32.7726),
    Shape("p4de.24xlarge", "96", "1,152 GiB", "Intel Xeon Platinum 8275L", "8", "640 GB", 40.966),
    Shape("g5.xlarge", "4", "16 GiB", "AMD EPYC 7R32", "1", "24 GB", 1.006),
    Shape("g5g.xlarge", "4", "8 GiB", "AWS Graviton2 Processor", "1", "16 GB", 0.42),
    Shape("g4dn.xlarge", "4", "16 GiB", "Intel Xeon Family", "1", "16 GB", 0.526),
    Shape("g6.xlarge", "4", "16 GiB", "AMD EPYC 7R13 Processor", "1", "24 GB", 0.8048),
    Shape("g6e.xlarge", "4", "32 GiB", "AMD EPYC 7R13 Processor", "1", "48 GB", 1.861),
    Shape("p3.2xlarge", "8", "61 GiB", "Intel Xeon E5-2686 v4 (Broadwell)", "1", "16 GB", 3.06),
    Shape("inf2.xlarge", "4", "16 GiB", "AMD EPYC 7R13 Processor", "NA", "NA", 0.7582),
    Shape("trn1.32xlarge", "128", "512 GiB", "Intel Xeon Platinum 8375C", "NA", "NA", 21.5),
]

# (operatingSystem, licenseModel, preInstalledSw, operation) as the EC2 files spell them.
SOFTWARE = [
    ("Linux", "No License required", "NA", "RunInstances"),
    ("Windows", "No License required", "NA", "RunInstances:0002"),
    ("Windows", "Bring your own license", "NA", "RunInstances:0800"),
    ("RHEL", "No License required", "NA", "RunInstances:0010"),
    ("SUSE", "No License required", "NA", "RunInstances:000g"),
    ("Linux", "No License required", "SQL Std", "RunInstances:0004"),
]
TENANCIES = ["Shared", "Dedicated", "Host"]
CAPACITY = ["Used", "UnusedCapacityReservation", "AllocatedCapacityReservation"]
ON_DEMAND_CODE = "JRTCKXETXF"
RATE_CODE = "6YS6EN2CT7"
RESERVED_CODES = [
    "4NA7Y494T4",
    "6QCMYABX3D",
    "HU7G6KETJZ",
    "38NPMPTW36",
    "NQ3QZPMQV9",
    "R5XV2EPZQZ",
]


def sku_for(*parts: str) -> str:
    digest = hashlib.sha1("|".join(parts).encode()).digest()
    alphabet = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
    return "".join(alphabet[b % len(alphabet)] for b in digest[:16])


def compute_product(
    shape: Shape,
    *,
    region: str = "us-east-1",
    os: str = "Linux",
    license_model: str = "No License required",
    pre_installed: str = "NA",
    operation: str = "RunInstances",
    tenancy: str = "Shared",
    capacity: str = "Used",
    sku: str = "",
    extra: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One `Compute Instance` product as the EC2 offer file has it."""
    sku = sku or sku_for(
        region, shape.instance_type, os, license_model, pre_installed, tenancy, capacity
    )
    prefix = "USE1-" if region == "us-east-1" else f"{region.upper()[:4]}-"
    usage = {"Used": "BoxUsage", "UnusedCapacityReservation": "UnusedBox"}.get(
        capacity, "Reservation"
    )
    attributes = {
        "enhancedNetworkingSupported": "Yes",
        "intelTurboAvailable": "No",
        "memory": shape.memory,
        "dedicatedEbsThroughput": "Up to 4750 Mbps",
        "vcpu": shape.vcpu,
        "classicnetworkingsupport": "false",
        "capacitystatus": capacity,
        "locationType": "AWS Region",
        "storage": "EBS only",
        "instanceFamily": "General purpose",
        "operatingSystem": os,
        "intelAvx2Available": "No",
        "regionCode": region,
        "physicalProcessor": shape.processor,
        "clockSpeed": "2.5 GHz",
        "ecu": "NA",
        "networkPerformance": "Up to 10 Gigabit",
        "servicename": "Amazon Elastic Compute Cloud",
        "gpu": shape.gpu,
        "gpuMemory": shape.gpu_memory,
        "vpcnetworkingsupport": "true",
        "instanceType": shape.instance_type,
        "tenancy": tenancy,
        "usagetype": f"{prefix}{usage}:{shape.instance_type}",
        "normalizationSizeFactor": "4",
        "intelAvxAvailable": "No",
        "processorFeatures": "AVX; AVX2",
        "servicecode": "AmazonEC2",
        "licenseModel": license_model,
        "currentGeneration": "Yes",
        "preInstalledSw": pre_installed,
        "location": LOCATIONS.get(region, region),
        "processorArchitecture": "64-bit",
        "marketoption": "OnDemand",
        "operation": operation,
        "availabilityzone": "NA",
    }
    for name in drop:
        attributes.pop(name, None)
    attributes.update(extra or {})
    return {"sku": sku, "productFamily": "Compute Instance", "attributes": attributes}


def other_product(family: str, sku: str, region: str = "us-east-1") -> dict[str, Any]:
    """A non-instance product (storage, data transfer, IP addresses...)."""
    return {
        "sku": sku,
        "productFamily": family,
        "attributes": {
            "servicecode": "AmazonEC2",
            "location": LOCATIONS.get(region, region),
            "regionCode": region,
            "volumeApiName": "gp3",
            "usagetype": "EBS:VolumeUsage.gp3",
            "operation": "",
        },
    }


def on_demand_term(
    sku: str, price: float | str, *, currency: str = "USD", unit: str = "Hrs"
) -> dict[str, Any]:
    """terms.OnDemand[sku]: one offer term with one hourly price dimension."""
    code = f"{sku}.{ON_DEMAND_CODE}"
    rate = f"{code}.{RATE_CODE}"
    amount = price if isinstance(price, str) else f"{price:.10f}"
    return {
        code: {
            "offerTermCode": ON_DEMAND_CODE,
            "sku": sku,
            "effectiveDate": "2025-01-01T00:00:00Z",
            "priceDimensions": {
                rate: {
                    "rateCode": rate,
                    "description": f"${amount} per On Demand Linux Instance Hour",
                    "beginRange": "0",
                    "endRange": "Inf",
                    "unit": unit,
                    "pricePerUnit": {currency: amount},
                    "appliesTo": [],
                }
            },
            "termAttributes": {},
        }
    }


def reserved_terms(sku: str, price: float, count: int = 6) -> dict[str, Any]:
    """terms.Reserved[sku]: upfront fee + hourly dimensions per term, as the files have."""
    terms: dict[str, Any] = {}
    for i, term_code in enumerate(RESERVED_CODES[:count]):
        code = f"{sku}.{term_code}"
        terms[code] = {
            "offerTermCode": term_code,
            "sku": sku,
            "effectiveDate": "2025-01-01T00:00:00Z",
            "priceDimensions": {
                f"{code}.2TG2D8R56U": {
                    "rateCode": f"{code}.2TG2D8R56U",
                    "description": "Upfront Fee",
                    "unit": "Quantity",
                    "pricePerUnit": {"USD": f"{price * 5000:.0f}"},
                    "appliesTo": [],
                },
                f"{code}.6YS6EN2CT7": {
                    "rateCode": f"{code}.6YS6EN2CT7",
                    "description": "Linux/UNIX (Amazon VPC), reserved instance applied",
                    "beginRange": "0",
                    "endRange": "Inf",
                    "unit": "Hrs",
                    "pricePerUnit": {"USD": f"{price * 0.6:.10f}"},
                    "appliesTo": [],
                },
            },
            "termAttributes": {
                "LeaseContractLength": "1yr" if i % 2 == 0 else "3yr",
                "OfferingClass": "standard" if i < 3 else "convertible",
                "PurchaseOption": ["No Upfront", "Partial Upfront", "All Upfront"][i % 3],
            },
        }
    return terms


def offer_file(
    products: list[dict[str, Any]],
    on_demand: dict[str, Any],
    reserved: dict[str, Any] | None = None,
    *,
    terms_first: bool = False,
    reserved_first: bool = False,
    extra_top: dict[str, Any] | None = None,
    pretty: bool = True,
) -> bytes:
    """A whole offer file (small, in memory) with the documented top-level layout."""
    terms: dict[str, Any] = {"OnDemand": on_demand, "Reserved": reserved or {}}
    if reserved_first:
        terms = {"Reserved": reserved or {}, "OnDemand": on_demand}
    head: dict[str, Any] = {
        "formatVersion": "v1.0",
        "disclaimer": "This pricing list is for informational purposes only.",
        "offerCode": "AmazonEC2",
        "version": "20250101000000",
        "publicationDate": "2025-01-01T00:00:00Z",
    }
    body = {"products": {p["sku"]: p for p in products}, "terms": terms}
    if terms_first:
        body = {"terms": terms, "products": body["products"]}
    document = {**head, **body, **(extra_top or {})}
    if pretty:
        return json.dumps(document, indent=2, separators=(",", " : ")).encode()
    return json.dumps(document, separators=(",", ":")).encode()


def region_index(base_paths: dict[str, str] | None = None) -> dict[str, Any]:
    regions = base_paths or {r: OFFER_PATH.format(region=r) for r in LOCATIONS}
    return {
        "formatVersion": "v1.0",
        "disclaimer": "This pricing list is for informational purposes only.",
        "publicationDate": "2025-01-01T00:00:00Z",
        "regions": {
            code: {"regionCode": code, "currentVersionUrl": url} for code, url in regions.items()
        },
    }


def catalog_products(
    region: str = "us-east-1", currency: str = "USD"
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Every shape under every OS / tenancy / capacity combination, plus other families:
    (products, OnDemand terms, Reserved terms)."""
    products: list[dict[str, Any]] = []
    on_demand: dict[str, Any] = {}
    reserved: dict[str, Any] = {}
    for shape in SHAPES:
        for os, license_model, pre_installed, operation in SOFTWARE:
            for tenancy in TENANCIES:
                for capacity in CAPACITY:
                    product = compute_product(
                        shape,
                        region=region,
                        os=os,
                        license_model=license_model,
                        pre_installed=pre_installed,
                        operation=operation,
                        tenancy=tenancy,
                        capacity=capacity,
                    )
                    products.append(product)
                    bump = 0.0 if (os, pre_installed, tenancy) == ("Linux", "NA", "Shared") else 1
                    price = shape.price + bump if capacity == "Used" else 0.0
                    on_demand[product["sku"]] = on_demand_term(
                        product["sku"], price, currency=currency
                    )
                    reserved[product["sku"]] = reserved_terms(product["sku"], shape.price, 2)
    for family in ("Storage", "Data Transfer", "IP Address"):
        sku = sku_for(region, family)
        products.append(other_product(family, sku, region))
        on_demand[sku] = on_demand_term(sku, 0.08, unit="GB-Mo")
    return products, on_demand, reserved


# -- the big file for the benchmark ------------------------------------------------------


def _pretty(value: Any, indent: int) -> str:
    text = json.dumps(value, indent=2, separators=(",", " : "))
    pad = " " * indent
    return text.replace("\n", "\n" + pad)


def _big_products(n_products: int, region: str) -> Iterator[tuple[str, Shape, bool, str]]:
    """(sku, shape, kept, product text) for n products cycling through the combinations."""
    combos = [
        (software, tenancy, capacity)
        for software in SOFTWARE
        for tenancy in TENANCIES
        for capacity in CAPACITY
    ]
    templates: dict[tuple[int, int], tuple[str, bool]] = {}
    for i in range(n_products):
        shape_at = (i // len(combos)) % len(SHAPES)
        combo_at = i % len(combos)
        (os, license_model, pre_installed, operation), tenancy, capacity = combos[combo_at]
        shape = SHAPES[shape_at]
        generation = i // (len(combos) * len(SHAPES))
        if generation:
            # Later rounds are new instance sizes, so the kept set keeps growing.
            size = f"{generation}xlarge"
            shape = Shape(
                f"{shape.instance_type.split('.')[0]}.g{size}",
                shape.vcpu,
                shape.memory,
                shape.processor,
                shape.gpu,
                shape.gpu_memory,
                shape.price * (1 + generation / 10),
            )
        key = (shape_at, combo_at)
        sku = sku_for(region, str(i))
        if generation or key not in templates:
            product = compute_product(
                shape,
                region=region,
                os=os,
                license_model=license_model,
                pre_installed=pre_installed,
                operation=operation,
                tenancy=tenancy,
                capacity=capacity,
                sku="@@SKU@@",
            )
            kept = (os, pre_installed, tenancy, capacity) == ("Linux", "NA", "Shared", "Used")
            text = _pretty(product, 4)
            if not generation:
                templates[key] = (text, kept)
        else:
            text, kept = templates[key]
        yield sku, shape, kept, text.replace("@@SKU@@", sku)


def write_offer_file(
    path: Path,
    n_products: int,
    *,
    region: str = "us-east-1",
    reserved_terms_per_sku: int = 6,
    currency: str = "USD",
) -> int:
    """Stream a realistic EC2 offer file with `n_products` products (Linux/Windows/RHEL/SUSE,
    SQL pre-installed, shared/dedicated/host tenancy, used/unused/allocated capacity, GPU
    and Graviton shapes), OnDemand terms for all and a large Reserved section, to `path`.
    About 11 KB per product with the default 6 reserved terms. Returns the size in bytes."""
    prices: list[tuple[str, float]] = []
    with path.open("w", encoding="utf-8", buffering=1 << 20) as out:
        out.write(
            '{\n  "formatVersion" : "v1.0",\n'
            '  "disclaimer" : "This pricing list is for informational purposes only.",\n'
            '  "offerCode" : "AmazonEC2",\n  "version" : "20250101000000",\n'
            '  "publicationDate" : "2025-01-01T00:00:00Z",\n  "products" : {\n'
        )
        sep = "    "
        for sku, shape, kept, text in _big_products(n_products, region):
            out.write(f'{sep}"{sku}" : {text}')
            sep = ",\n    "
            prices.append((sku, shape.price if kept else shape.price + 1))
        out.write('\n  },\n  "terms" : {\n    "OnDemand" : {\n')
        template = _pretty(on_demand_term("@@SKU@@", "@@PRICE@@", currency=currency), 6)
        sep = "      "
        for sku, price in prices:
            text = template.replace("@@SKU@@", sku).replace("@@PRICE@@", f"{price:.10f}")
            out.write(f'{sep}"{sku}" : {text}')
            sep = ",\n      "
        out.write('\n    },\n    "Reserved" : {\n')
        reserved = _pretty(reserved_terms("@@SKU@@", 1.0, reserved_terms_per_sku), 6)
        sep = "      "
        for sku, _ in prices:
            out.write(f'{sep}"{sku}" : {reserved.replace("@@SKU@@", sku)}')
            sep = ",\n      "
        out.write("\n    }\n  }\n}\n")
    return path.stat().st_size


def spot_page(items: list[tuple[str, str, str]], next_token: str = "", *, extra: str = "") -> bytes:
    """A DescribeSpotPriceHistoryResponse page: items are (instance type, zone, price)."""
    rows = "".join(
        "<item>"
        f"<availabilityZone>{zone}</availabilityZone>"
        f"<instanceType>{instance_type}</instanceType>"
        "<productDescription>Linux/UNIX</productDescription>"
        f"<spotPrice>{price}</spotPrice>"
        "<timestamp>2025-01-01T00:00:00.000Z</timestamp>"
        f"{extra}"
        "</item>"
        for instance_type, zone, price in items
    )
    token = f"<nextToken>{next_token}</nextToken>" if next_token else "<nextToken/>"
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">'
        "<requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>"
        f"<spotPriceHistorySet>{rows}</spotPriceHistorySet>{token}"
        "</DescribeSpotPriceHistoryResponse>"
    ).encode()
