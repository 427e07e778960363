"""Products -> Offers: the filter rules, specs normalisation, GPU table, currencies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from providers.aws.offerfile import OfferScan
from providers.aws.parse import (
    arch,
    gib,
    gpu_model,
    keep_product,
    offer_from_attributes,
    offers_from_scan,
)
from providers.core.errors import ShoalError
from tests.providers.aws import payloads as p

M5 = p.SHAPES[0]


@pytest.mark.parametrize(
    "changes, kept",
    [
        ({}, True),
        ({"os": "Windows"}, False),
        ({"os": "RHEL"}, False),
        ({"tenancy": "Dedicated"}, False),
        ({"tenancy": "Host"}, False),
        ({"pre_installed": "SQL Std"}, False),
        ({"capacity": "UnusedCapacityReservation"}, False),
        ({"capacity": "AllocatedCapacityReservation"}, False),
        ({"license_model": "Bring your own license"}, False),
        ({"extra": {"marketoption": "CapacityBlock"}}, False),
        ({"drop": ("capacitystatus", "licenseModel", "marketoption", "preInstalledSw")}, True),
        ({"drop": ("instanceType",)}, False),
    ],
)
def test_filter_rules(changes: dict[str, Any], kept: bool) -> None:
    assert keep_product(p.compute_product(M5, **changes)) is kept


def test_other_families_and_odd_shapes_are_not_kept() -> None:
    assert not keep_product(p.other_product("Storage", "S"))
    assert not keep_product({"productFamily": "Compute Instance", "attributes": "x"})


@pytest.mark.parametrize(
    "text, value",
    [
        ("16 GiB", 16.0),
        ("1,152 GiB", 1152.0),
        ("0.5 GiB", 0.5),
        ("512 MiB", 0.5),
        ("2 TiB", 2048.0),
        ("NA", 0.0),
        (None, 0.0),
        ("24 GB", 24.0),
    ],
)
def test_gib(text: str | None, value: float) -> None:
    assert gib(text) == value


@pytest.mark.parametrize(
    "attributes, expected",
    [
        (
            {"physicalProcessor": "AWS Graviton3 Processor", "processorArchitecture": "64-bit"},
            "arm64",
        ),
        (
            {"physicalProcessor": "Intel Xeon Platinum 8175", "processorArchitecture": "64-bit"},
            "x86_64",
        ),
        ({"physicalProcessor": "Apple M2 Pro chip"}, "arm64"),
        ({"processorArchitecture": "arm64"}, "arm64"),
        ({"processorArchitecture": "x86_64", "physicalProcessor": "AWS Graviton"}, "x86_64"),
        ({}, ""),
    ],
)
def test_arch(attributes: dict[str, str], expected: str) -> None:
    assert arch(attributes) == expected


def test_specs_from_real_attribute_spellings() -> None:
    shapes = {s.instance_type: s for s in p.SHAPES}
    offer = offer_from_attributes(p.compute_product(shapes["p4d.24xlarge"])["attributes"])
    assert (offer.vcpus, offer.memory_gib, offer.arch) == (96.0, 1152.0, "x86_64")
    assert (offer.gpu, offer.gpu_count, offer.gpu_memory_gib) == ("A100", 8, 40.0)
    g5g = offer_from_attributes(p.compute_product(shapes["g5g.xlarge"])["attributes"])
    assert (g5g.gpu, g5g.gpu_count, g5g.gpu_memory_gib, g5g.arch) == ("T4G", 1, 16.0, "arm64")
    m5 = offer_from_attributes(p.compute_product(M5)["attributes"])
    assert (m5.gpu, m5.gpu_count, m5.gpu_memory_gib) == ("", 0, 0.0)


@pytest.mark.parametrize(
    "instance_type, attributes, count, expected",
    [
        ("p5.48xlarge", {"gpuMemory": "640 GB"}, 8, ("H100", 80.0)),  # total across GPUs
        ("p5.48xlarge", {"gpuMemory": "80 GB"}, 8, ("H100", 80.0)),  # given per GPU
        ("p4de.24xlarge", {"gpuMemory": "NA"}, 8, ("A100", 80.0)),  # table only
        ("p5e.48xlarge", {}, 8, ("H200", 141.0)),
        ("g6e.xlarge", {"gpuMemory": "48 GB"}, 1, ("L40S", 48.0)),
        ("zz9.large", {"gpuMemory": "96 GB"}, 4, ("", 24.0)),  # unknown family: total / n
        ("g5.xlarge", {"gpuModel": "NVIDIA A10G Tensor Core"}, 1, ("A10G", 24.0)),
        ("new1.xlarge", {"gpuModel": "NVIDIA B300 288GB"}, 1, ("B300", 0.0)),
        ("new1.xlarge", {"gpuType": "Gaudi"}, 1, ("Gaudi", 0.0)),
    ],
)
def test_gpu_model(
    instance_type: str, attributes: dict[str, str], count: int, expected: tuple[str, float]
) -> None:
    assert gpu_model(instance_type, attributes, count) == expected


def _scan(*entries: tuple[dict[str, Any], tuple[str, float] | None]) -> OfferScan:
    scan = OfferScan()
    for product, price in entries:
        scan.products[product["sku"]] = product
        if price is not None:
            scan.hourly[product["sku"]] = price
            scan.currencies.add(price[0])
    return scan


def test_one_offer_per_type_lowest_price_wins_and_missing_prices_are_none() -> None:
    a = p.compute_product(M5, sku="A")
    b = p.compute_product(M5, sku="B")
    c = p.compute_product(M5, sku="C")
    g = p.compute_product(p.SHAPES[8], sku="G")
    z = p.compute_product(p.SHAPES[1], sku="Z")
    offers = offers_from_scan(
        _scan((a, ("USD", 0.2)), (b, ("USD", 0.1)), (c, None), (g, None), (z, ("USD", 0.0)))
    )
    assert offers["m5.large"].on_demand == 0.1
    assert offers["g5.xlarge"].on_demand is None
    assert offers["c5ad.2xlarge"].on_demand is None  # a zero price is not an offer


def test_a_file_priced_in_another_currency_is_refused() -> None:
    product = p.compute_product(M5, sku="A", region="cn-north-1")
    with pytest.raises(ShoalError, match="CNY, not USD"):
        offers_from_scan(_scan((product, ("CNY", 0.7))))


def test_local_zones_and_a_missing_capacity_status() -> None:
    from providers.aws.parse import NEEDLES, keep_product

    base = {
        "productFamily": "Compute Instance",
        "attributes": {
            "instanceType": "m5.large",
            "operatingSystem": "Linux",
            "tenancy": "Shared",
            "preInstalledSw": "NA",
        },
    }
    assert keep_product(base)  # no capacitystatus: taken as Used ...
    raw = json.dumps(base).encode()
    assert all(needle in raw for needle in NEEDLES)  # ... so the byte prefilter keeps it
    local = {**base, "attributes": {**base["attributes"], "locationType": "AWS Local Zone"}}
    assert not keep_product(local)
