"""The Azure parsers on documented payloads, without a server (formats: see payloads.py)."""

from __future__ import annotations

from typing import Any

import pytest

from providers.azure import parse
from providers.azure.fetch import next_url
from providers.cloud.offers import Offer
from providers.core.errors import ShoalError
from tests.providers.azure import payloads as p

WHERE = "azure: test"


@pytest.mark.parametrize(
    ("item", "expected"),
    [
        (p.price_item("Standard_D4s_v5", 0.192), ("on_demand", 0.192, True)),
        (p.price_item("Standard_D4s_v5", 0.04, variant="Spot"), ("spot", 0.04, True)),
        (p.price_item("Standard_D4s_v5", 0.2, primary=False), ("on_demand", 0.2, False)),
        (p.price_item("Standard_D4s_v5", 0.3, windows=True), None),
        (p.price_item("Standard_D4s_v5", 0.05, variant="Spot", windows=True), None),
        (p.price_item("Standard_D4s_v5", 0.03, variant="Low Priority"), None),
        (p.price_item("Standard_D4s_v5", 0.1, kind="DevTestConsumption"), None),
        (p.price_item("Standard_D4s_v5", 1009.0, kind="Reservation"), None),
        (p.price_item("Standard_D4s_v5", 70.0, unit="1/Month"), None),
        (p.price_item("", 0.05), None),
        (p.price_item("Standard_D4s_v5", 0.0), None),
        (p.price_item("Standard_D4s_v5", 0.1, tierMinimumUnits=100.0), None),
        (
            p.price_item("Standard_D4s_v5", 0.192, isPrimaryMeterRegion=None),
            ("on_demand", 0.192, False),
        ),
    ],
)
def test_row_rules(item: dict[str, Any], expected: tuple[str, float, bool] | None) -> None:
    row = parse.price_row(item, WHERE)
    got = None if row is None else (row.kind, row.price, row.primary)
    assert got == expected


def test_low_priority_in_meter_name_only_is_still_low_priority() -> None:
    item = p.price_item("Standard_D4s_v5", 0.03, skuName="D4s v5", meterName="D4s v5 Low Priority")
    assert parse.price_row(item, WHERE) is None


def test_unknown_fields_are_ignored() -> None:
    item = p.price_item("Standard_D4s_v5", 0.192, someday={"x": [1]}, reservationTerm=None)
    assert parse.price_row(item, WHERE) == parse.PriceRow(
        "Standard_D4s_v5", "on_demand", 0.192, True
    )


def test_price_book_prefers_primary_then_lowest() -> None:
    book = parse.PriceBook()
    for item in [
        p.price_item("Standard_D4s_v5", 0.150, primary=False),
        p.price_item("Standard_D4s_v5", 0.200),
        p.price_item("Standard_D4s_v5", 0.192),
        p.price_item("Standard_D4s_v5", 0.100, primary=False),
        p.price_item("Standard_E4s_v5", 0.300, primary=False),
        p.price_item("Standard_E4s_v5", 0.250, primary=False),
        p.price_item("Standard_E4s_v5", 0.03, variant="Spot"),
        p.price_item("Standard_E4s_v5", 0.3, windows=True),
    ]:
        book.add(item, WHERE)
    assert book.rows == 8
    assert book.offers() == {
        "Standard_D4s_v5": Offer("Standard_D4s_v5", on_demand=0.192),
        "Standard_E4s_v5": Offer("Standard_E4s_v5", on_demand=0.25, spot=0.03),
    }


def test_currency_other_than_usd_is_named() -> None:
    with pytest.raises(ShoalError, match="'EUR', not USD"):
        parse.price_row(p.price_item("Standard_D4s_v5", 0.2, currency="EUR"), WHERE)
    with pytest.raises(ShoalError, match="'an unnamed currency', not USD"):
        parse.price_row(p.price_item("Standard_D4s_v5", 0.2, currencyCode=None), WHERE)
    with pytest.raises(ShoalError, match="'GBP', not USD"):
        parse.price_page({"BillingCurrency": "GBP", "Items": []}, WHERE)


@pytest.mark.parametrize(
    ("page", "message"),
    [
        ([], "payload: expected an object, got a list;"),
        ({"Items": None}, "payload: Items: expected a list, got nothing (null);"),
        ({"Items": ["x"]}, "payload: Items[0]: expected an object, got string 'x';"),
        (
            {"Items": [p.price_item("Standard_D4s_v5", 0.2, retailPrice="0.2")]},
            "Items[0].retailPrice: expected a number, got string '0.2';",
        ),
        (
            {"Items": [p.price_item("Standard_D4s_v5", 0.2, retailPrice=float("nan"))]},
            "Items[0].retailPrice: must be a finite number, got number nan;",
        ),
        (
            {"Items": [p.price_item("Standard_D4s_v5", 0.2, productName=7)]},
            "Items[0].productName: expected a string, got integer 7;",
        ),
        ({"Items": [], "NextPageLink": 5}, "NextPageLink: expected a string, got integer 5;"),
    ],
)
def test_malformed_price_pages(page: Any, message: str) -> None:
    """The whole page is checked: where, which document, the field's path, what was
    expected; one line."""
    with pytest.raises(ShoalError) as caught:
        parse.price_page(page, WHERE)
    said = str(caught.value)
    assert said.startswith(f"{WHERE}: malformed Retail Prices payload: ")
    assert message in said and said.endswith("; nothing was cached from it")
    assert "\n" not in said


def test_last_page_has_no_link() -> None:
    assert parse.price_page({"Items": [], "NextPageLink": None}, WHERE) == ([], None)
    assert parse.price_page({"Items": [], "NextPageLink": ""}, WHERE) == ([], None)


@pytest.mark.parametrize(
    ("name", "vcpus", "arch", "gpu", "count", "gib"),
    [
        ("Standard_D4s_v5", 4, "x86_64", "", 0, 0),
        ("Standard_D4ps_v5", 4, "arm64", "", 0, 0),
        ("Standard_E8pds_v6", 8, "arm64", "", 0, 0),
        ("Standard_B2pls_v2", 2, "arm64", "", 0, 0),
        ("Standard_E16-4ds_v5", 4, "x86_64", "", 0, 0),
        ("Standard_DS3_v2", 4, "x86_64", "", 0, 0),
        ("Standard_D14_v2", 16, "x86_64", "", 0, 0),
        ("Standard_D2_v3", 2, "x86_64", "", 0, 0),
        ("Standard_A4", 8, "x86_64", "", 0, 0),
        ("Standard_A4_v2", 4, "x86_64", "", 0, 0),
        ("Standard_NC24ads_A100_v4", 24, "x86_64", "A100", 1, 80),
        ("Standard_NC96ads_A100_v4", 96, "x86_64", "A100", 4, 80),
        ("Standard_ND96amsr_A100_v4", 96, "x86_64", "A100", 8, 80),
        ("Standard_ND96asr_v4", 96, "x86_64", "A100", 8, 40),
        ("Standard_NC40ads_H100_v5", 40, "x86_64", "H100", 1, 94),
        ("Standard_ND96isr_H100_v5", 96, "x86_64", "H100", 8, 80),
        ("Standard_ND96isr_MI300X_v5", 96, "x86_64", "MI300X", 8, 192),
        ("Standard_NC6s_v3", 6, "x86_64", "V100", 1, 16),
        ("Standard_NC24rs_v3", 24, "x86_64", "V100", 4, 16),
        ("Standard_NC4as_T4_v3", 4, "x86_64", "T4", 1, 16),
        ("Standard_NC64as_T4_v3", 64, "x86_64", "T4", 4, 16),
        ("Standard_NV36ads_A10_v5", 36, "x86_64", "A10", 1, 24),
        ("Standard_NV6ads_A10_v5", 6, "x86_64", "A10", 0, 4),  # a sixth of an A10's 24 GiB
        ("Standard_NV4as_v4", 4, "x86_64", "MI25", 0, 2),  # an eighth of an MI25's 16 GiB
        ("Standard_NC8ads_L4_v9", 8, "x86_64", "L4", 0, 0),  # model from the name only
        ("Standard_D2_v2_Promo", 2, "x86_64", "", 0, 0),
        ("Dedicated-Host-Type1", 0, "", "", 0, 0),
    ],
)
def test_shape_from_name(name: str, vcpus: int, arch: str, gpu: str, count: int, gib: int) -> None:
    assert parse.shape_from_name(name) == parse.Shape(float(vcpus), arch, gpu, count, float(gib))


def test_sku_page_keeps_vms_of_the_region_and_flags_restrictions() -> None:
    rows = p.sku_list()
    rows.append(p.sku("Standard_E16-4ds_v5", 16, 128))
    rows[-1]["capabilities"].append(p.capability("vCPUsAvailable", "4"))
    specs, link = parse.sku_page({"value": rows, "nextLink": "https://x/next"}, "EastUS", WHERE)
    assert link == "https://x/next"
    assert specs == {
        "Standard_D4s_v5": parse.SkuSpec(4, 16, 0, "x86_64", False),  # a zone restriction only
        "Standard_D4ps_v5": parse.SkuSpec(4, 16, 0, "arm64", False),
        "Standard_NC24ads_A100_v4": parse.SkuSpec(24, 220, 1, "x86_64", False),
        "Standard_E4s_v5": parse.SkuSpec(4, 32, 0, "x86_64", True),
        "Standard_E16-4ds_v5": parse.SkuSpec(4, 128, 0, "x86_64", False),
    }


def test_sku_page_malformed() -> None:
    bad = p.sku("Standard_D4s_v5", 4, 16)
    bad["capabilities"][1]["value"] = "four"
    with pytest.raises(
        ShoalError,
        match=r"Resource SKUs payload: value\[0\]\.capabilities\[1\]\.value: expected a number "
        r"\(vCPUs\), got string 'four'",
    ):
        parse.sku_page({"value": [bad]}, "eastus", WHERE)
    with pytest.raises(ShoalError, match=r"value\[0\]: expected an object, got integer 3"):
        parse.sku_page({"value": [3]}, "eastus", WHERE)
    with pytest.raises(ShoalError, match="value: required"):
        parse.sku_page({"skus": []}, "eastus", WHERE)


def test_locations_physical_only_with_zones() -> None:
    regions, link = parse.locations_page({"value": p.locations()}, WHERE)
    assert link is None
    assert [(r.name, r.location, r.zones) for r in regions] == [
        ("westus", "West US", []),
        ("eastus", "East US", ["1", "2", "3"]),
    ]
    with pytest.raises(ShoalError, match=r"value\[0\]: expected an object, got string 'eastus'"):
        parse.locations_page({"value": ["eastus"]}, WHERE)


@pytest.mark.parametrize(
    ("link", "base", "expected"),
    [
        # Azure's own link, default base: followed as given (443 is https's port).
        (
            "https://prices.azure.com:443/api/retail/prices?$skip=100",
            "https://prices.azure.com",
            "https://prices.azure.com:443/api/retail/prices?$skip=100",
        ),
        # A mirror serving Azure's links: kept on the mirror, with its path prefix.
        (
            "https://prices.azure.com:443/api/retail/prices?$skip=100",
            "http://127.0.0.1:8080/azure",
            "http://127.0.0.1:8080/azure/api/retail/prices?$skip=100",
        ),
        (
            "http://127.0.0.1:8080/azure/api/retail/prices?$skip=5",
            "http://127.0.0.1:8080/azure",
            "http://127.0.0.1:8080/azure/api/retail/prices?$skip=5",
        ),
        (
            "https://other.example/azure/api/retail/prices?$skip=5",
            "http://mirror:81/azure",
            "http://mirror:81/azure/api/retail/prices?$skip=5",
        ),
        ("/api/retail/prices?$skip=5", "http://m:81", "http://m:81/api/retail/prices?$skip=5"),
    ],
)
def test_next_url(link: str, base: str, expected: str) -> None:
    assert next_url(link, base) == expected


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({}, None),
        ({"armRegionName": "EastUS"}, None),  # Azure's region names ignore case
        ({"armRegionName": "southcentralus"}, parse.OTHER_REGION),
        ({"serviceName": "Storage"}, parse.OTHER_SERVICE),
        ({"type": "DevTestConsumption"}, parse.OTHER_PRICE_TYPE),
        ({"currencyCode": "EUR"}, parse.OTHER_CURRENCY),
    ],
)
def test_an_item_outside_the_request_is_named(changes: dict[str, Any], reason: str | None) -> None:
    item = p.price_item("Standard_D4s_v5", 0.192, **changes)
    assert parse.unasked(item, parse.Ask("eastus")) == reason


def test_a_price_book_with_an_ask_drops_and_counts_what_was_not_asked() -> None:
    book = parse.PriceBook(parse.Ask("eastus"))
    for item in [
        p.price_item("Standard_D4s_v5", 0.150, region="westus"),
        p.price_item("Standard_D4s_v5", 0.100, serviceName="Virtual Machines Licenses"),
        p.price_item("Standard_D4s_v5", 0.192),
    ]:
        book.add(item, WHERE)
    assert book.rows == 3
    assert book.dropped == {parse.OTHER_REGION: 1, parse.OTHER_SERVICE: 1}
    assert book.offers() == {"Standard_D4s_v5": Offer("Standard_D4s_v5", on_demand=0.192)}
