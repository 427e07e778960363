#!/usr/bin/env python3
"""Reading provider pages in-process: what a refresh spends on the payloads once they are
downloaded (providers/core/payload.py: pages checked whole by pydantic).

Pages of realistic size, built with the tests' payload builders: Azure Retail Prices (4 pages
of 1,000 items), an Azure Resource SKUs page (1,000 SKUs), the GCP Compute SKU list (7 pages
of 5,000) and GCP aggregated machine types (20 pages of 500). Each is read two ways: from the
answer's bytes (a Body: pydantic parses the JSON itself, as the fetchers do) and from
json.loads' result, both timed from the bytes; and "first" is the first page read in the
process (pydantic's import for the first document, each document's validator build). Medians
of --runs runs, in ms; compare with the parsers of an earlier commit on the same pages.

    python benchmarks/payloads.py [--runs 9]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ payload builders

from tests.providers.azure import payloads as azure
from tests.providers.gcp import payloads as gcp

WHERE = "bench: http://127.0.0.1/x"
GCP_REGIONS = [
    "us-central1",
    "us-east1",
    "us-east4",
    "us-west1",
    "europe-west1",
    "europe-west4",
    "asia-east1",
    "asia-northeast1",
    "southamerica-east1",
    "australia-southeast1",
]


def azure_price_pages(items: int = 4000, size: int = 1000) -> list[bytes]:
    rows = []
    for i in range(items):
        name = f"Standard_D{2 * (i % 48) + 2}s_v{i // 96 + 1}"
        variant = ("", "Spot", "Low Priority")[i % 3]
        rows.append(azure.price_item(name, 0.05 + i / 1000, variant=variant))
    pages = []
    for start in range(0, items, size):
        more = start + size < items
        link = f"https://prices.azure.com/api/retail/prices?$skip={start + size}" if more else None
        page = {"BillingCurrency": "USD", "Items": rows[start : start + size], "NextPageLink": link}
        pages.append(json.dumps(page).encode())
    return pages


def azure_sku_pages(count: int = 1000) -> list[bytes]:
    rows = [azure.sku(f"Standard_D{i}s_v5", 4, 16, gpus=int(i % 5 == 0)) for i in range(count)]
    return [json.dumps({"value": rows}).encode()]


def gcp_sku_pages(pages: int = 7, size: int = 5000) -> list[bytes]:
    base = gcp.catalog()
    out = []
    for number in range(pages):
        skus = []
        for i in range(size):
            n = number * size + i
            sku = copy.deepcopy(base[n % len(base)])
            sku["serviceRegions"] = [GCP_REGIONS[n % len(GCP_REGIONS)]]
            skus.append(sku)
        token = f"tok-{number + 1}" if number + 1 < pages else ""
        out.append(json.dumps({"skus": skus, "nextPageToken": token}).encode())
    return out


def gcp_machine_type_pages(pages: int = 20, size: int = 500) -> list[bytes]:
    series = [f"n2-standard-{c}" for c in (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)]
    names = [*series, "a2-highgpu-1g", "g2-standard-8", "c3-standard-4", "e2-medium"]
    zones = [f"{region}-{zone}" for region in GCP_REGIONS[:8] for zone in "abc"]
    accelerators = {"a2": ("nvidia-tesla-a100", 1), "g2": ("nvidia-l4", 1)}
    out = []
    for number in range(pages):
        items: dict[str, Any] = {}
        for i in range(size):
            n = number * size + i
            zone = zones[(n // 40) % len(zones)]
            name = names[n % len(names)] + ("" if n < 1000 else f"-x{n}")
            accel, count = accelerators.get(name[:2], ("", 0))
            scope = items.setdefault(f"zones/{zone}", {"machineTypes": []})
            scope["machineTypes"].append(gcp.machine_type(name, 8, 32768, zone, accel, count))
        token = f"mt-{number + 1}" if number + 1 < pages else ""
        out.append(json.dumps({"items": items, "nextPageToken": token}).encode())
    return out


def read_azure_prices(pages: list[Any]) -> object:
    from providers.azure import parse

    book = parse.PriceBook(parse.Ask("eastus"))
    for page in pages:
        items, _ = parse.price_page(page, WHERE)
        for item in items:
            book.add(item, WHERE)
    return book.offers()


def read_azure_skus(pages: list[Any]) -> object:
    from providers.azure import parse

    return [parse.sku_page(page, "eastus", WHERE) for page in pages]


def read_gcp_skus(pages: list[Any]) -> object:
    from providers.gcp.parse import RateBook

    book = RateBook()
    for page in pages:
        book.add_page(page, WHERE)
    return book


def read_gcp_machine_types(pages: list[Any]) -> object:
    from providers.gcp.shapes import machine_types_page

    shapes: dict[str, Any] = {}
    zones: dict[str, set[str]] = {}
    for page in pages:
        machine_types_page(page, shapes, zones, WHERE)
    return shapes


def median_ms(
    read: Callable[[list[Any]], object], pages: list[bytes], how: str, runs: int
) -> float:
    """Median ms of `read` over `pages` given as Bodies (`how` "bytes") or decoded."""
    from providers.core.http.client import Body

    times = []
    for _ in range(runs):
        start = time.perf_counter()
        if how == "bytes":
            read([Body(raw, lambda raw=raw: json.loads(raw)) for raw in pages])
        else:
            read([json.loads(raw) for raw in pages])
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    cases = (
        ("Azure Retail Prices 4 x 1,000", read_azure_prices, azure_price_pages()),
        ("Azure Resource SKUs 1 x 1,000", read_azure_skus, azure_sku_pages()),
        ("GCP SKU list 7 x 5,000", read_gcp_skus, gcp_sku_pages()),
        ("GCP machine types 20 x 500", read_gcp_machine_types, gcp_machine_type_pages()),
    )
    print(f"{'pages':30} {'MB':>5} {'first (ms)':>11} {'bytes (ms)':>11} {'json.loads (ms)':>16}")
    for name, read, pages in cases:
        # Once per process: pydantic's import (the first case) and the document's validator.
        first = median_ms(read, pages[:1], "bytes", 1)
        size = sum(map(len, pages)) / 1e6
        from_bytes = median_ms(read, pages, "bytes", args.runs)
        from_loads = median_ms(read, pages, "loads", args.runs)
        print(f"{name:30} {size:5.1f} {first:11.1f} {from_bytes:11.1f} {from_loads:16.1f}")


if __name__ == "__main__":
    main()
