"""The streaming offer-file scanner, fed chunks of every size (boundaries fall everywhere)."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.aws import offerfile
from providers.aws.offerfile import OfferFileError, OfferScan, hourly_price, scan_offer_file
from providers.aws.parse import NEEDLES, keep_product
from tests.providers.aws import payloads as p


def chunked(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]


def reference(data: bytes) -> tuple[set[str], dict[str, tuple[str, float]]]:
    """What a full json.loads says the scan must keep (small files only)."""
    doc = json.loads(data)
    kept = {sku for sku, product in doc["products"].items() if keep_product(product)}
    prices = {}
    for sku in kept:
        price = hourly_price(doc["terms"]["OnDemand"].get(sku, {}))
        if price is not None:
            prices[sku] = price
    return kept, prices


def scan(data: bytes, size: int = 1 << 20, needles: tuple[bytes, ...] = NEEDLES) -> OfferScan:
    return scan_offer_file(chunked(data, size), keep_product, needles)


def small_file(step: int = 1, **kwargs: Any) -> bytes:
    products, on_demand, reserved = p.catalog_products()
    products = products[::step] + products[-2:]
    return p.offer_file(
        products,
        {s["sku"]: on_demand[s["sku"]] for s in products},
        {s["sku"]: reserved[s["sku"]] for s in products if s["sku"] in reserved},
        **kwargs,
    )


@pytest.mark.parametrize("size", [1, 7, 64, 4096, 1 << 20])
@pytest.mark.parametrize("pretty", [True, False])
def test_every_chunking_keeps_exactly_what_json_loads_keeps(size: int, pretty: bool) -> None:
    products, on_demand, reserved = p.catalog_products()
    small = products[::7] + products[-3:]  # keep it quick at 1-byte chunks
    data = p.offer_file(
        small,
        {s["sku"]: on_demand[s["sku"]] for s in small},
        {s["sku"]: reserved[s["sku"]] for s in small if s["sku"] in reserved},
        pretty=pretty,
    )
    kept, prices = reference(data)
    result = scan(data, size)
    assert set(result.products) == kept and kept
    assert result.hourly == prices
    assert result.metadata["offerCode"] == "AmazonEC2"
    assert result.saw_products and result.saw_on_demand


def test_the_whole_catalog_and_the_filter_rules() -> None:
    result = scan(small_file())
    kept = {
        (a["instanceType"], a["operatingSystem"], a["tenancy"], a["capacitystatus"])
        for a in (prod["attributes"] for prod in result.products.values())
    }
    assert kept == {(shape.instance_type, "Linux", "Shared", "Used") for shape in p.SHAPES}
    by_type = {
        result.products[sku]["attributes"]["instanceType"]: price
        for sku, price in result.hourly.items()
    }
    assert by_type["p4d.24xlarge"] == ("USD", 32.7726)
    assert result.currencies == {"USD"}


def test_needles_only_skip_work_they_never_change_the_result() -> None:
    data = small_file()
    assert scan(data).products == scan(data, needles=()).products


@pytest.mark.parametrize("size", [5, 1 << 20])
def test_terms_before_products_still_match_prices(size: int) -> None:
    data = small_file(5, terms_first=True)
    kept, prices = reference(data)
    result = scan(data, size)
    assert set(result.products) == kept
    assert result.hourly == prices
    assert result.bytes_scanned >= len(data) - 3  # products came last: read to the end


@pytest.mark.parametrize("size", [3, 1 << 20])
def test_reserved_before_on_demand_is_skipped(size: int) -> None:
    data = small_file(5, reserved_first=True)
    kept, prices = reference(data)
    result = scan(data, size)
    assert result.hourly == prices and len(prices) == len(kept)


def test_the_scan_stops_after_on_demand_and_leaves_reserved_unread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offerfile, "_BATCH_LOOKAHEAD", 8192)
    data = small_file()
    pulled: list[int] = []

    def chunks() -> Iterator[bytes]:
        for chunk in chunked(data, 4096):
            pulled.append(len(chunk))
            yield chunk

    result = scan_offer_file(chunks(), keep_product, NEEDLES)
    assert result.stopped_early
    # What was read past OnDemand is only the scanner's lookahead.
    assert sum(pulled) < data.index(b'"Reserved"') + offerfile._LOOKAHEAD + 3 * 8192 < len(data)
    assert result.bytes_scanned < data.index(b'"Reserved"')


def test_unknown_fields_and_odd_values_anywhere_are_ignored() -> None:
    products, on_demand, reserved = p.catalog_products()
    first = products[0]
    first["newField"] = {"deep": [1, 2.5e3, -0.5, True, False, None, {"x": [[]]}]}
    first["attributes"]["newAttribute"] = "yes"
    sku = first["sku"]
    on_demand[sku][f"{sku}.{p.ON_DEMAND_CODE}"]["newTermField"] = ["a", {"b": "c"}]
    data = p.offer_file(
        products,
        on_demand,
        reserved,
        extra_top={"attributesList": {"a": [1, 2, {"b": None}]}, "count": 12, "flag": True},
    )
    extra_first = b'{"newTop" : [1, {"z" : "}{"}], "n" : -1.5e-3,' + data[1:]
    for blob in (data, extra_first):
        kept, prices = reference(blob)
        result = scan(blob, 11)
        assert set(result.products) == kept and result.hourly == prices


def test_escapes_and_braces_inside_strings_take_the_exact_path() -> None:
    shape = p.SHAPES[0]
    tricky = p.compute_product(
        shape,
        sku="TRICKY",
        extra={"note": 'brace } and { and "quote" and \\ backslash', "tag": "}}}{"},
    )
    # "Linux" spelled with a unicode escape: the needles must not skip it.
    escaped = json.dumps(
        p.compute_product(p.SHAPES[1], sku="ESCAPED"), separators=(",", ":")
    ).replace('"Linux"', '"\\u004cinux"')
    plain = p.compute_product(p.SHAPES[2], sku="PLAIN")
    windows = p.compute_product(p.SHAPES[3], sku="WIN", os="Windows")
    terms = {
        s: p.on_demand_term(s, 1.0 + i) for i, s in enumerate(["TRICKY", "ESCAPED", "PLAIN", "WIN"])
    }
    terms["TRICKY"]["TRICKY.X"] = {"weird": "}{"}
    data = (
        b'{"products":{"TRICKY":'
        + json.dumps(tricky).encode()
        + b',"ESC\\u0041PED":'  # an escaped key as well
        + escaped.encode()
        + b',"PLAIN":'
        + json.dumps(plain).encode()
        + b',"WIN":'
        + json.dumps(windows).encode()
        + b'},"terms":{"OnDemand":'
        + json.dumps(terms).replace('"ESCAPED"', '"ESC\\u0041PED"', 1).encode()
        + b"}}"
    )
    for size in (1, 13, 1 << 20):
        result = scan(data, size)
        assert set(result.products) == {"TRICKY", "ESCAPED", "PLAIN"}
        assert result.hourly == {
            "TRICKY": ("USD", 1.0),
            "ESCAPED": ("USD", 2.0),
            "PLAIN": ("USD", 3.0),
        }


def test_a_huge_unknown_value_is_skipped_member_by_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(offerfile, "_SKIP_WINDOW", 256)
    monkeypatch.setattr(offerfile, "_BATCH_LOOKAHEAD", 128)
    big = {f"k{i}": {"v": [i, {"w": "x" * 50}], "s": "}{"} for i in range(40)}
    data = small_file(9, extra_top={"zzz": big, "arr": [[1, 2], {"a": "b"}, "c", 3] * 30})
    data = b'{"bigFirst" : ' + json.dumps(big).encode() + b", " + data[1:]
    kept, prices = reference(data)
    for size in (9, 1000):
        result = scan(data, size)
        assert set(result.products) == kept and result.hourly == prices


@pytest.mark.parametrize(
    "cut",
    [1, 20, 300, 5000, -200, -40],
)
def test_a_truncated_file_is_a_clear_error(cut: int) -> None:
    data = small_file(9, terms_first=True)  # read to the end, so every cut matters
    with pytest.raises(OfferFileError, match=r"ends early|malformed"):
        scan(data[:cut], 64)


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"[1, 2]", "expected an object"),
        (
            b'{"products" : {"A" : {"productFamily" : "Compute Instance", "os" : "Linux", '
            b'"tenancy" : "Shared", "capacitystatus" : "Used",}}}',
            "malformed JSON in the entry",
        ),
        (b'{"products" : {"A" : {"sku" : "A"} "B" : {}}}', "expected ',' or '}'"),
        (b'{"products" : {"A" : @}}', "unexpected byte"),
        (b'{"products" : {}, "terms" : {"OnDemand" : {}}}} trailing', ""),
        (b'{"products" : {} } trailing', "after the end"),
        (b'{"products" : {}, 12 : 1}', "expected a key"),
        (b'{"products" : {}, "x" 1}', "expected ':'"),
    ],
)
def test_malformed_json_is_a_clear_error(blob: bytes, message: str) -> None:
    if not message:  # stops after OnDemand: what follows is never read
        assert scan(blob, 3).stopped_early
        return
    for size in (2, 1 << 20):
        with pytest.raises(OfferFileError, match=message):
            scan(blob, size)


def test_an_entry_bigger_than_the_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(offerfile, "_MAX_ENTRY", 100)
    monkeypatch.setattr(offerfile, "_BATCH_LOOKAHEAD", 10)
    monkeypatch.setattr(offerfile, "_LOOKAHEAD", 10)
    blob = b'{"products" : {"A" : {"note" : "\\"' + b"y" * 10_000 + b'"}}}'
    with pytest.raises(OfferFileError, match="larger than"):
        scan(blob, 50)


def test_hourly_price_prefers_usd_and_hours() -> None:
    terms = {
        "T1": {"priceDimensions": {"r1": {"unit": "Quantity", "pricePerUnit": {"USD": "9"}}}},
        "T2": {"priceDimensions": {"r2": {"unit": "Hrs", "pricePerUnit": {"CNY": "7.1"}}}},
        "T3": {"priceDimensions": {"r3": {"unit": "Hrs", "pricePerUnit": {"USD": "1.5"}}}},
        "T4": {"priceDimensions": {"r4": {"unit": "Hrs", "pricePerUnit": {"USD": "bad"}}}},
        "T5": "not a term",
        "T6": {"priceDimensions": {"r6": "not a dimension", "r7": {"unit": "Hrs"}}},
    }
    seen: set[str] = set()
    assert hourly_price(terms, seen) == ("USD", 1.5)
    assert seen == {"USD", "CNY"}
    assert hourly_price("nope") is None
    assert hourly_price({"T2": terms["T2"]}) == ("CNY", 7.1)


def test_memory_stays_bounded_on_a_generated_file(tmp_path: Path) -> None:
    path = tmp_path / "offer.json"
    size = p.write_offer_file(path, 600, reserved_terms_per_sku=2)
    assert size > 2_500_000

    def chunks() -> Iterator[bytes]:
        with path.open("rb") as fh:
            while block := fh.read(1 << 16):
                yield block

    tracemalloc.start()
    try:
        result = scan_offer_file(chunks(), keep_product, NEEDLES)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4_000_000  # the file is ~3 MB: a scan holds a window, never the file
    assert result.stopped_early and len(result.products) == len(result.hourly) > 0
    kept, prices = reference(path.read_bytes())
    assert set(result.products) == kept and result.hourly == prices


def test_random_documents_agree_with_json_loads() -> None:
    """Seeded fuzz: tricky strings (braces, quotes, escapes, unicode), odd nesting, random
    member order and whitespace, random chunk sizes."""
    import random

    rng = random.Random(4)
    alphabet = ["{", "}", '"', "\\", "[", "]", ",", ":", " ", "a", "é", "\n", "Linux", "Used"]

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6)))

    def junk(depth: int = 0) -> Any:
        kind = rng.randint(0, 5 if depth < 3 else 2)
        if kind == 0:
            return text()
        if kind == 1:
            return rng.choice([1, -2.5, True, None, 1e21])
        if kind == 2:
            return rng.randint(0, 9)
        if kind == 3:
            return [junk(depth + 1) for _ in range(rng.randint(0, 3))]
        return {text(): junk(depth + 1) for _ in range(rng.randint(0, 3))}

    for _ in range(25):
        products: dict[str, Any] = {}
        terms: dict[str, Any] = {}
        for i in range(rng.randint(1, 12)):
            sku = f"S{i}{text()}"
            shape = rng.choice(p.SHAPES)
            changes = rng.choice([{}, {"os": "Windows"}, {"tenancy": "Host"}, {}])
            product = p.compute_product(shape, sku=sku, **changes)  # type: ignore[arg-type]
            if rng.random() < 0.4:
                product["attributes"][text() or "x"] = text()
            if rng.random() < 0.3:
                product[text() or "y"] = junk()
            products[sku] = product
            terms[sku] = p.on_demand_term(sku, rng.randint(1, 99) / 10)
        parts = [
            ("products", products),
            (
                "terms",
                {"Reserved": junk(), "OnDemand": terms}
                if rng.random() < 0.5
                else {"OnDemand": terms, "Reserved": junk()},
            ),
            ("extra", junk()),
        ]
        rng.shuffle(parts)
        indent = rng.choice([None, 0, 2])
        data = json.dumps(dict(parts), indent=indent, ensure_ascii=rng.random() < 0.5).encode()
        kept, prices = reference(data)
        result = scan(data, rng.choice([1, 2, 3, 17, 250, 1 << 20]))
        assert set(result.products) == kept
        assert result.hourly == prices
