"""Kubernetes quantities, per the API's grammar:
https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from providers.core.errors import ShoalError
from providers.kubernetes import quantity
from providers.kubernetes.quantity import QuantityError, bytes_, count, cpu_cores, fmt, milli, parse

W = "node gpu-1 status.allocatable.memory"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # decimalSI
        ("1n", Fraction(1, 1000)),  # below 1m: rounded up to 1m
        ("1500000n", Fraction(2, 1000)),  # 1.5m: rounded up
        ("1u", Fraction(1, 1000)),
        ("2500u", Fraction(3, 1000)),
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("3k", Fraction(3000)),
        ("4M", Fraction(4 * 10**6)),
        ("5G", Fraction(5 * 10**9)),
        ("6T", Fraction(6 * 10**12)),
        ("7P", Fraction(7 * 10**15)),
        ("8E", Fraction(8 * 10**18)),
        # binarySI
        ("1Ki", Fraction(1024)),
        ("16Mi", Fraction(16 * 2**20)),
        ("16Gi", Fraction(16 * 2**30)),
        ("2Ti", Fraction(2 * 2**40)),
        ("3Pi", Fraction(3 * 2**50)),
        ("7Ei", Fraction(7 * 2**60)),
        # decimalExponent
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("12e-3", Fraction(12, 1000)),
        ("5e+2", Fraction(500)),
        ("15e0", Fraction(15)),
        # numbers: <digits>.<digits> | <digits>. | .<digits>, signs
        ("0.5", Fraction(1, 2)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("1.", Fraction(1)),
        (".5", Fraction(1, 2)),
        ("+2", Fraction(2)),
        ("-250m", Fraction(-1, 4)),
        ("0", Fraction(0)),
        ("0.0001", Fraction(1, 1000)),  # more than three decimals: rounded up
        ("1.0001", Fraction(1001, 1000)),
        ("0.1m", Fraction(1, 1000)),  # the doc's own example
        ("31792000Ki", Fraction(31792000 * 1024)),
        ("191450m", Fraction(191450, 1000)),
    ],
)
def test_parse_every_form(text: str, expected: Fraction) -> None:
    assert parse(text, W) == expected
    assert milli(text, W) == expected * 1000


def test_huge_values_are_capped_like_the_api() -> None:
    cap = Fraction(2**63 - 1)
    assert parse("9E", W) == Fraction(9 * 10**18)
    assert parse("10E", W) == cap
    assert parse("16Ei", W) == cap
    assert parse("1e400", W) == cap
    assert parse("1e-400", W) == Fraction(1, 1000)
    assert milli("99999999999999999999", W) == (2**63 - 1) * 1000
    assert milli("9000000000Gi", W) == (2**63 - 1) * 1000


def test_json_numbers_are_accepted() -> None:
    # The API always writes strings, but its decoder also reads bare JSON numbers.
    assert parse(4, W) == 4
    assert parse(0.5, W) == Fraction(1, 2)
    assert milli(2, W) == 2000


@pytest.mark.parametrize(
    "bad",
    [
        "12XB",
        "",
        " ",
        "1 Gi",
        " 1Gi",
        "1Gi ",
        "1gi",
        "1GB",
        "1KI",
        "1K",  # the decimal kilo is lower-case k
        "Gi",
        "m",
        ".",
        "-",
        "1e",
        "1e1.5",  # the exponent is an integer
        "1e3Gi",
        "1.2.3",
        "0x10",
        "1_000",
        "١٢",  # non-ASCII digits
        "²",
        "1" * 100,  # longer than any real quantity
        "NaN",
        "inf",
    ],
)
def test_malformed_is_refused_naming_the_field(bad: str) -> None:
    with pytest.raises(QuantityError) as err:
        parse(bad, W)
    assert str(err.value).startswith(f"{W}: {bad!r} is not a quantity")
    assert "\n" not in str(err.value)
    with pytest.raises(ShoalError):
        milli(bad, W)


@pytest.mark.parametrize("bad", [None, True, [], {"cpu": "1"}])
def test_non_strings_are_refused(bad: object) -> None:
    with pytest.raises(QuantityError, match=r"^node gpu-1 status\.allocatable\.memory: "):
        parse(bad, W)


def test_error_message_is_the_documented_one() -> None:
    with pytest.raises(QuantityError) as err:
        milli("12XB", W)
    assert str(err.value) == (
        "node gpu-1 status.allocatable.memory: '12XB' is not a quantity; "
        "use for example 500m, 2, 16Gi or 1e3"
    )


def test_cache_never_hides_an_error() -> None:
    quantity.MILLI_CACHE.pop("12XB", None)
    for _ in range(2):
        with pytest.raises(QuantityError):
            milli("12XB", W)
    assert "12XB" not in quantity.MILLI_CACHE
    assert milli("16Gi", W) == milli("16Gi", "elsewhere") == 16 * 2**30 * 1000


@pytest.mark.parametrize(
    "text", ["2", "500m", "16Gi", "1024Mi", "3k", "7G", "1Ti", "0", "1500m", "7Ei", "4T"]
)
def test_fast_path_agrees_with_the_exact_parser(text: str) -> None:
    quantity.MILLI_CACHE.pop(text, None)
    fast = quantity._milli_fast(text)
    assert fast is not None
    assert fast == parse(text, W) * 1000


def test_fast_path_declines_what_it_does_not_know() -> None:
    for text in ("1.5", "1e3", "-1", "+1", "1n", "1u", "1P", "1E", "\uff11"):
        assert quantity._milli_fast(text) is None


def test_helpers() -> None:
    assert cpu_cores("250m") == Fraction(1, 4)
    assert cpu_cores("2") == 2
    assert bytes_("1.5Gi") == 1610612736
    assert bytes_("1k") == 1000
    assert bytes_("1m") == 1  # a milli-byte rounds up to a whole byte
    assert count("8") == 8
    assert count("500m") == 1
    with pytest.raises(QuantityError, match=r"^pod default/x spec\.containers\[0\]: "):
        count("eight", "pod default/x spec.containers[0]")


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Fraction(2), "2"),
        (0, "0"),
        (Fraction(1, 2), "0.5"),
        (Fraction(191450, 1000), "191.45"),
        (Fraction(1, 8), "0.13"),  # half-up
        (Fraction(1, 3), "0.33"),
        (Fraction(2, 3), "0.67"),
        (Fraction(1999, 1000), "2"),
        (Fraction(1, 1000), "0"),
        (Fraction(-3, 2), "-1.5"),
        (Fraction(-1, 1000), "0"),
        (Decimal("23.589"), "23.59"),
        (1.25, "1.25"),
        (Fraction(10**20), "100000000000000000000"),
    ],
)
def test_fmt(value: Fraction | Decimal | int | float, text: str) -> None:
    assert fmt(value) == text


def test_fmt_matches_the_local_catalog_shape() -> None:
    from providers.local.catalog import quantity as local_quantity

    for value in (2.0, 0.5, 23.59, 1.1, 15.89, 0.25):
        assert fmt(value) == local_quantity(value)
