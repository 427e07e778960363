"""The pure GCP parsers: SKU classification, tier choice, rate book, machine prices, shapes."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import pytest

from providers import gpus
from providers.core.errors import ShoalError
from providers.gcp.parse import (
    CALENDAR,
    CORE,
    FLEX,
    GPU,
    ONDEMAND,
    RAM,
    SPOT,
    RateBook,
    classify,
    machine_price,
    price_offers,
    unit_price,
    unshaped_notes,
)
from providers.gcp.shapes import (
    ARM_FAMILIES,
    GPU_MODELS,
    TABLE_FILE,
    Shape,
    builtin_shapes,
    builtin_table,
    machine_types_page,
    shape_from_api,
    table_from_json,
)
from tests.providers.gcp import payloads as p


def checked(sku: dict[str, Any]) -> Any:
    """A SKU as the readers get it: its page checked against the model (int64s as numbers)."""
    from providers.gcp.payloads import SKUS

    return SKUS.read({"skus": [sku]}, "gcp: test")["skus"][0]


@pytest.mark.parametrize(
    ("description", "usage", "expected"),
    [
        ("N2 Instance Core running in Americas", "OnDemand", (CORE, "n2", ONDEMAND)),
        ("Spot Preemptible N2 Instance Ram running in Belgium", "Preemptible", (RAM, "n2", SPOT)),
        (
            "Preemptible N1 Predefined Instance Core running in Americas",
            "Preemptible",
            (CORE, "n1", SPOT),
        ),
        ("N2D AMD Instance Core running in Americas", "OnDemand", (CORE, "n2d", ONDEMAND)),
        ("T2A Arm Instance Ram running in Americas", "OnDemand", (RAM, "t2a", ONDEMAND)),
        ("Compute optimized Core running in Americas", "OnDemand", (CORE, "c2", ONDEMAND)),
        ("Memory-optimized Instance Ram running in EMEA", "OnDemand", (RAM, "m1", ONDEMAND)),
        ("A3 Instance Core running in Americas", "OnDemand", (CORE, "a3", ONDEMAND)),
        ("C3D Instance Core running in Frankfurt", "OnDemand", (CORE, "c3d", ONDEMAND)),
        ("C4A Arm Instance Core running in Iowa", "OnDemand", (CORE, "c4a", ONDEMAND)),
        (
            "M3 Memory-optimized Instance Core running in Americas",
            "OnDemand",
            (CORE, "m3", ONDEMAND),
        ),
        (
            "Spot Preemptible M3 Memory-optimized Instance Ram running in Belgium",
            "Preemptible",
            (RAM, "m3", SPOT),
        ),
        ("ZZ9 Instance Ram running in Americas", "OnDemand", (RAM, "zz9", ONDEMAND)),
        ("RTX 6000 96GB running in Oregon", "OnDemand", (GPU, "nvidia-rtx-pro-6000", ONDEMAND)),
        (
            "RTX 6000 96GB attached to Spot Preemptible VMs running in Oregon",
            "Preemptible",
            (GPU, "nvidia-rtx-pro-6000", SPOT),
        ),
        ("DWS Defined Duration A2 Core running in Americas", "OnDemand", (CORE, "a2", FLEX)),
        ("DWS Defined Duration A2 Ram running in Americas", "Preemptible", (RAM, "a2", FLEX)),
        ("Nvidia Tesla T4 GPU running in Americas", "OnDemand", (GPU, "nvidia-tesla-t4", ONDEMAND)),
        (
            "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas",
            "Preemptible",
            (GPU, "nvidia-tesla-t4", SPOT),
        ),
        (
            "Nvidia Tesla A100 80GB GPU running in Americas",
            "OnDemand",
            (GPU, "nvidia-a100-80gb", ONDEMAND),
        ),
        (
            "Nvidia Tesla A100 GPU running in Americas",
            "OnDemand",
            (GPU, "nvidia-tesla-a100", ONDEMAND),
        ),
        (
            "Nvidia H100 80GB GPU running in Americas",
            "OnDemand",
            (GPU, "nvidia-h100-80gb", ONDEMAND),
        ),
        (
            "Nvidia H100 80GB Mega GPU running in Iowa",
            "OnDemand",
            (GPU, "nvidia-h100-mega-80gb", ONDEMAND),
        ),
        (
            "Nvidia L4 GPU attached to DWS Defined Duration VMs running in Americas",
            "OnDemand",
            (GPU, "nvidia-l4", FLEX),
        ),
        (
            "Nvidia H100 80GB GPU in Iowa in Calendar Mode",
            "OnDemand",
            (GPU, "nvidia-h100-80gb", CALENDAR),
        ),
        # Left out.
        ("Commitment v1: N2 Cpu in Americas for 1 Year", "Commit1Yr", None),
        ("N2 Instance Core running in Americas", "Commit3Yr", None),
        ("N2 Custom Instance Core running in Americas", "OnDemand", None),
        ("N1 Predefined Custom Extended Instance Ram running in Americas", "OnDemand", None),
        ("N2 Sole Tenancy Instance Core running in Americas", "OnDemand", None),
        (
            "Memory Optimized Upgrade Premium for Memory-optimized Instance Core running in "
            "Americas",
            "OnDemand",
            None,
        ),
        ("Licensing Fee for Windows Server 2022 (CPU cost)", "OnDemand", None),
        ("Nvidia Tesla T4 Virtual Workstation GPU running in Americas", "OnDemand", None),
        ("Reserved Nvidia Tesla A100 80GB GPU in Virginia", "OnDemand", None),
        ("Nvidia Quantum Flux GPU running in Americas", "OnDemand", None),
        ("Network Internet Egress from Americas to EMEA", "OnDemand", None),
        ("N2 Instance Core running in Americas", "SomethingNew", None),
    ],
)
def test_classify(description: str, usage: str, expected: object) -> None:
    assert classify(description, usage) == expected


def test_unit_price_takes_the_last_tier_starting_at_zero() -> None:
    tiers: list[dict[str, Any]] = [
        {"unitPrice": p.money(0.0)},  # startUsageAmount omitted: 0 in proto3 JSON
        {"startUsageAmount": 0, "unitPrice": p.money(0.25)},
        {"startUsageAmount": 720, "unitPrice": p.money(0.1)},
    ]
    assert unit_price(checked(p.sku("X", 0, tiers=tiers))) == (0.25, "h")
    assert (
        unit_price(checked(p.sku("X", 0, tiers=[{"startUsageAmount": 5, "unitPrice": {}}]))) is None
    )
    assert unit_price(checked({"pricingInfo": []})) is None
    big = p.sku("X", 12.5)
    assert big["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"] == {
        "currencyCode": "USD",
        "units": "12",
        "nanos": 500000000,
    }
    assert unit_price(checked(big)) == (12.5, "h")


def test_unit_price_uses_the_newest_pricing_info() -> None:
    item = p.sku("X", 1.0)
    newer = p.sku("X", 2.0)["pricingInfo"][0] | {"effectiveTime": "2026-08-01T00:00:00Z"}
    item["pricingInfo"] = [newer, item["pricingInfo"][0]]
    assert unit_price(checked(item)) == (2.0, "h")


def test_non_usd_and_malformed_prices_are_clear_errors() -> None:
    with pytest.raises(ShoalError, match=r"priced in EUR, not USD"):
        unit_price(checked(p.sku("N2 Instance Core running in Americas", 0.03, currency="EUR")))
    bad = p.sku("X", 1.0)
    bad["pricingInfo"][0]["pricingExpression"]["tieredRates"][0]["unitPrice"]["units"] = "x"
    with pytest.raises(
        ShoalError,
        match=r"^gcp: test: malformed Cloud Billing SKU list payload: skus\[0\]\.pricingInfo\[0\]"
        r"\.pricingExpression\.tieredRates\[0\]\.unitPrice\.units: expected a number, got "
        r"string 'x'; nothing was cached from it$",
    ):
        RateBook().add_page({"skus": [bad]}, "gcp: test")


def test_rate_book_keeps_only_what_prices_a_vm() -> None:
    book = RateBook()
    assert book.add_page({"skus": p.catalog(), "nextPageToken": "next"}) == "next"
    assert book.regions == {"us-central1", "us-east1", "europe-west1", "us-east4"}
    assert book.locations == {"europe-west1": "Belgium", "us-central1": "Iowa"}
    assert book.rate("us-east1", CORE, "n2", ONDEMAND) == p.N2_CORE
    assert book.rate("us-east1", RAM, "n2", SPOT) == p.N2_SPOT_RAM
    assert book.rate("europe-west1", CORE, "n2", ONDEMAND) == p.BE_N2_CORE
    assert book.rate("us-central1", GPU, "nvidia-tesla-a100", FLEX) == p.A100_DWS
    assert book.rate("us-central1", CORE, "c3", ONDEMAND) is None  # priced at $0
    assert book.rate("us-east4", GPU, "nvidia-a100-80gb", ONDEMAND) is None
    # Custom, sole tenancy and commitment SKUs did not overwrite the list price.
    assert {k for k in book.rates if k[2] == "n2" and k[0] == "us-central1"} == {
        ("us-central1", CORE, "n2", ONDEMAND),
        ("us-central1", RAM, "n2", ONDEMAND),
        ("us-central1", CORE, "n2", SPOT),
        ("us-central1", RAM, "n2", SPOT),
    }
    assert book.add_page({"skus": []}) == ""
    assert book.skus == len(p.catalog())


def test_rate_book_rejects_a_payload_of_the_wrong_shape() -> None:
    with pytest.raises(ShoalError, match="payload: skus: expected a list, got string 'nope'"):
        RateBook().add_page({"skus": "nope"})
    with pytest.raises(ShoalError, match="payload: expected an object, got a list"):
        RateBook().add_page([1, 2])
    # A SKU that is not an object is a malformed page, not one to skip.
    with pytest.raises(ShoalError, match=r"skus\[0\]: expected an object, got string"):
        RateBook().add_page({"skus": ["not a sku", None]})


def test_rate_book_ignores_a_unit_that_is_not_hourly() -> None:
    book = RateBook()
    book.add_sku(checked(p.sku("N2 Instance Ram running in Americas", 3.1, unit="GiBy.mo")))
    assert book.rates == {}


def _book() -> RateBook:
    book = RateBook()
    book.add_page({"skus": p.catalog()})
    return book


def test_machine_prices_are_cores_plus_memory_plus_gpus() -> None:
    book = _book()
    shapes = {s.name: s for s in builtin_shapes()}
    n2 = shapes["n2-standard-4"]
    assert machine_price(n2, "us-central1", book, ONDEMAND) == pytest.approx(0.194236)
    assert machine_price(n2, "us-central1", book, SPOT) == pytest.approx(
        4 * p.N2_SPOT_CORE + 16 * p.N2_SPOT_RAM
    )
    a2 = shapes["a2-highgpu-1g"]
    assert machine_price(a2, "us-central1", book, ONDEMAND) == pytest.approx(3.673385)
    assert machine_price(a2, "us-central1", book, FLEX) == pytest.approx(
        12 * p.A2_DWS_CORE + 85 * p.A2_DWS_RAM + p.A100_DWS
    )
    a3 = shapes["a3-highgpu-8g"]
    assert machine_price(a3, "us-central1", book, ONDEMAND) == pytest.approx(
        208 * p.A3_CORE + 1872 * p.A3_RAM + 8 * p.H100
    )
    micro = shapes["e2-micro"]
    assert machine_price(micro, "us-central1", book, ONDEMAND) == pytest.approx(
        0.25 * p.E2_CORE + 1 * p.E2_RAM
    )
    # A2 ultra needs the 80 GB card, which has no on-demand rate here.
    assert machine_price(shapes["a2-ultragpu-1g"], "us-central1", book, ONDEMAND) is None


def test_price_offers_leave_out_families_without_rates() -> None:
    offers = price_offers("us-central1", builtin_shapes(), _book())
    assert {name.split("-")[0] for name in offers} == {"e2", "n1", "n2", "a2", "a3", "g2"}
    assert "c3-standard-4" not in offers and "a2-ultragpu-1g" not in offers
    a2 = offers["a2-highgpu-8g"]
    assert (a2.gpu, a2.gpu_count, a2.gpu_memory_gib, a2.vcpus, a2.memory_gib) == (
        "A100",
        8,
        40.0,
        96,
        680,
    )
    assert a2.spot == pytest.approx(96 * p.A2_SPOT_CORE + 680 * p.A2_SPOT_RAM + 8 * p.A100_SPOT)
    g2 = offers["g2-standard-24"]
    assert g2.on_demand == pytest.approx(24 * p.G2_CORE + 96 * p.G2_RAM + 2 * p.L4)
    assert (g2.gpu, g2.gpu_count, g2.spot, g2.scheduled) == ("L4", 2, None, None)
    n1 = offers["n1-standard-1"]
    assert (n1.memory_gib, n1.gpu, n1.arch) == (3.75, "", "x86_64")
    belgium = price_offers("europe-west1", builtin_shapes(), _book())
    assert {name.split("-")[0] for name in belgium} == {"n2"}
    assert belgium["n2-highmem-2"].on_demand == pytest.approx(2 * p.BE_N2_CORE + 16 * p.BE_N2_RAM)
    assert belgium["n2-highmem-2"].spot is None


def test_price_offers_say_where_the_shapes_came_from() -> None:
    offers = price_offers("us-central1", builtin_shapes(), _book(), "the built-in table")
    assert {o.shape_source for o in offers.values()} == {"the built-in table"}
    assert price_offers("us-central1", builtin_shapes(), _book())["e2-micro"].shape_source == ""


def test_g4_is_priced_with_its_rtx_pro_6000_cards() -> None:
    book = _book()
    for sku in (
        p.core("G4 Instance Core running in Americas", 0.03),
        p.ram("G4 Instance Ram running in Americas", 0.004),
        p.gpu("RTX 6000 96GB running in Americas", 2.0),
    ):
        book.add_sku(checked(sku))
    g4 = price_offers("us-central1", builtin_shapes(), book)["g4-standard-96"]
    assert (g4.gpu, g4.gpu_count, g4.gpu_memory_gib) == ("RTX PRO 6000", 2, 96.0)
    assert g4.on_demand == pytest.approx(96 * 0.03 + 360 * 0.004 + 2 * 2.0)


def test_calendar_mode_fills_scheduled_when_there_is_no_flex_start_rate() -> None:
    book = _book()
    for desc, price in (
        ("G2 Instance Core running in Americas in Calendar Mode", 0.02),
        ("G2 Instance Ram running in Americas in Calendar Mode", 0.002),
        ("Nvidia L4 GPU in Americas in Calendar Mode", 0.4),
    ):
        book.add_sku(checked(p.sku(desc, price, unit="GiBy.h" if "Ram" in desc else "h")))
    offer = price_offers("us-central1", builtin_shapes(), book)["g2-standard-4"]
    assert offer.scheduled == pytest.approx(4 * 0.02 + 16 * 0.002 + 0.4)


def _table_file() -> Any:
    return json.loads(resources.files("providers.gcp").joinpath(TABLE_FILE).read_text())


def test_the_data_file_is_sound() -> None:
    raw = _table_file()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", raw["asOf"])
    rows = raw["machineTypes"]
    names = [row["name"] for row in rows]
    assert len(names) == len(set(names)), "no machine type twice"
    for row in rows:
        family = row["name"].split("-", 1)[0]
        assert row["vcpus"] > 0 and row["memoryGib"] > 0, row
        assert raw["pages"][family].startswith("https://cloud.google.com/compute/docs/"), row
        assert row["arch"] == ("arm64" if family in ARM_FAMILIES else "x86_64"), row
        assert (row["accelerator"] == "") == (row["gpuCount"] == 0), row
        if row["accelerator"]:
            model, gib = GPU_MODELS[row["accelerator"]]
            # The names shoal emits are providers.gpus' canonical ones, whichever spelling
            # (the accelerator type or the model) reaches the canonicaliser.
            assert gpus.model(model) == model == gpus.model(row["accelerator"]), row
            assert gib > 0
    table = builtin_table()
    assert table.as_of == raw["asOf"] and [s.name for s in table.shapes] == names


def test_the_table_covers_every_series_the_sku_parser_prices() -> None:
    shapes = {s.name: s for s in builtin_shapes()}
    families = {s.family for s in shapes.values()}
    assert families >= {
        *("e2", "n1", "n2", "n2d", "n4", "n4a", "n4d", "c2", "c2d", "c3", "c3d", "c4", "c4a"),
        *("c4d", "c4n", "t2d", "t2a", "m1", "m2", "m3", "m4", "m4n", "z3", "h3", "a2", "a3"),
        *("a4", "g2", "g4"),
    }
    for name in (
        *(f"a2-highgpu-{n}g" for n in (1, 2, 4, 8)),
        "a2-megagpu-16g",
        *(f"a2-ultragpu-{n}g" for n in (1, 2, 4, 8)),
        *(f"a3-highgpu-{n}g" for n in (1, 2, 4, 8)),
        *("a3-megagpu-8g", "a3-ultragpu-8g", "a3-edgegpu-8g", "a4-highgpu-8g"),
        *("e2-micro", "e2-small", "e2-medium", "n1-standard-1", "h3-standard-88"),
    ):
        assert name in shapes, name
    # Figures as Google's pages give them, not a per-vCPU rule: n2-highmem-128 is 864 GiB,
    # c4-standard-2 7 GiB, c3d-highcpu-30 59 GiB.
    assert shapes["n2-highmem-128"].memory_gib == 864
    assert shapes["c4-standard-2"].memory_gib == 7
    assert shapes["c3d-highcpu-30"].memory_gib == 59
    assert shapes["n1-highcpu-2"].memory_gib == 1.8
    assert shapes["m1-megamem-96"].memory_gib == 1433.6
    a3 = shapes["a3-highgpu-2g"]
    assert (a3.vcpus, a3.memory_gib, a3.accelerator, a3.gpu_count) == (
        52,
        468,
        "nvidia-h100-80gb",
        2,
    )
    assert shapes["a3-megagpu-8g"].accelerator == "nvidia-h100-mega-80gb"
    assert (shapes["a2-ultragpu-8g"].accelerator, shapes["a2-ultragpu-8g"].memory_gib) == (
        "nvidia-a100-80gb",
        1360,
    )
    assert (shapes["g2-standard-24"].gpu_count, shapes["g2-standard-32"].gpu_count) == (2, 1)
    assert shapes["c4a-standard-4"].arch == shapes["n4a-highmem-2"].arch == "arm64"
    # Billed by SKUs of their own (or a fraction of a GPU): left out, not mispriced.
    assert not {"m4-ultramem-224", "g4-standard-6", "f1-micro", "c3-standard-4-lssd"} & set(shapes)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "not a JSON object"),
        ({"machineTypes": [{"name": "x-1"}]}, "no 'asOf'"),
        ({"asOf": "2026-08-26", "machineTypes": []}, "no 'machineTypes'"),
        ({"asOf": "2026-08-26", "machineTypes": [{"vcpus": 1}]}, "without a name"),
        (
            {"asOf": "d", "machineTypes": [{"name": "x-1", "vcpus": 0, "memoryGib": 1}]},
            "x-1: vcpus and memoryGib must be positive",
        ),
        (
            {"asOf": "d", "machineTypes": [{"name": "x-1", "vcpus": True, "memoryGib": 1}]},
            "x-1: vcpus and memoryGib must be positive",
        ),
        (
            {
                "asOf": "d",
                "machineTypes": [
                    {"name": "x-1", "vcpus": 1, "memoryGib": 1, "accelerator": "nvidia-l4"}
                ],
            },
            "x-1: an accelerator needs a GPU count",
        ),
        (
            {"asOf": "d", "machineTypes": [{"name": "x-1", "vcpus": 1, "memoryGib": 1}]},
            "x-1: arch must be one of",
        ),
        (
            {
                "asOf": "d",
                "machineTypes": [
                    {"name": "x-1", "vcpus": 1, "memoryGib": 1, "arch": "arm64"},
                    {"name": "x-1", "vcpus": 2, "memoryGib": 2, "arch": "arm64"},
                ],
            },
            "x-1 is listed twice",
        ),
    ],
)
def test_a_malformed_table_is_a_clear_error(raw: Any, message: str) -> None:
    with pytest.raises(ShoalError, match=re.escape(message)):
        table_from_json(raw)


def test_unshaped_notes_name_families_and_gpus_per_region() -> None:
    book = _book()
    book.add_sku(
        checked(p.core("ZZ9 Instance Core running in Iowa", 0.05, regions=["us-central1"]))
    )
    shapes = builtin_shapes()
    assert unshaped_notes("us-central1", book, shapes) == [
        "priced families without known shapes (not listed): zz9",
        "priced GPUs on no known machine type (not listed): nvidia-tesla-t4",
    ]
    assert unshaped_notes("europe-west1", book, shapes) == []
    known = [Shape("n2-standard-4", 4, 16)]
    assert unshaped_notes("europe-west1", book, known) == []
    assert unshaped_notes("us-east1", book, known)[0] == (
        "priced families without known shapes (not listed): a2, a3, e2, g2, n1"
    )


def test_machine_types_pages_are_the_union_over_zones() -> None:
    shapes: dict[str, dict[str, Shape]] = {}
    zones: dict[str, set[str]] = {}
    first, second = p.machine_type_pages()
    first["items"]["regions/us-central1"] = {"machineTypes": [{"name": "x"}]}  # not a zone
    assert machine_types_page(first, shapes, zones) == "mt-2"
    assert machine_types_page(second, shapes, zones) == ""
    assert sorted(shapes["us-central1"]) == [
        "a2-highgpu-1g",
        "c3-standard-4",
        "g2-standard-8",
        "n2-standard-4",
    ]
    assert zones["us-central1"] == {
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-central1-z",
    }
    a2 = shapes["us-central1"]["a2-highgpu-1g"]
    assert (a2.vcpus, a2.memory_gib, a2.accelerator, a2.gpu_count) == (
        12,
        85,
        "nvidia-tesla-a100",
        1,
    )
    with pytest.raises(ShoalError, match="payload: items: expected an object, got a list"):
        machine_types_page({"items": []}, shapes, zones)
    # A scope that is not an object is a malformed page, not one to skip.
    with pytest.raises(ShoalError, match=re.escape('items."zones/us-central1-q": expected an')):
        machine_types_page({"items": {"zones/us-central1-q": "not a scope"}}, shapes, zones)


def test_shape_from_api_reads_the_architecture_and_rejects_bad_sizes() -> None:
    arm = p.machine_type("c4a-standard-4", 4, 16384, "us-central1-a") | {"architecture": "ARM64"}
    assert shape_from_api(arm) == Shape("c4a-standard-4", 4, 16, "arm64")
    unknown = p.machine_type("t2a-standard-1", 1, 4096, "us-central1-a")
    del unknown["architecture"]
    assert shape_from_api(unknown) == Shape("t2a-standard-1", 1, 4, "arm64")
    assert shape_from_api({"guestCpus": 2}) is None
    page: dict[str, Any] = {"items": {"zones/us-central1-a": {"machineTypes": [{"name": "x-1"}]}}}
    with pytest.raises(ShoalError, match="machine type 'x-1' has no guestCpus or memoryMb"):
        machine_types_page(page, {}, {})
    page["items"]["zones/us-central1-a"]["machineTypes"] = [
        {"name": "x-1", "guestCpus": "2", "memoryMb": 1}
    ]
    with pytest.raises(
        ShoalError,
        match=r'items\."zones/us-central1-a"\.machineTypes\[0\]\.guestCpus: expected a number',
    ):
        machine_types_page(page, {}, {})
