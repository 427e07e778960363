"""Kubernetes resource quantities (`500m`, `16Gi`, `1e3`, `0.5`) as exact numbers.

The grammar is the API's own (https://kubernetes.io/docs/reference/kubernetes-api/common-definitions/quantity/):

    <quantity>        ::= <signedNumber><suffix>
    <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
    <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
    <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
    <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
    <decimalExponent> ::= "e" <signedNumber> | "E" <signedNumber>

(`n` and `u` are accepted by the API's parser although the doc's list omits them.) As in
the API, a quantity never exceeds 2^63-1 in magnitude (larger ones are capped) and has at
most three decimal places: finer values round up (`0.1m` is `1m`). The exponent is an
integer, as the API's parser reads it (`1e1.5` is refused). A bare `E` is the exa suffix.

Aggregation works on integers in milli-units (`milli`), with a cache and a fast path for
the forms nearly every object uses (`2`, `500m`, `16Gi`), because a large cluster has
hundreds of thousands of them; `parse` gives the exact Fraction for anything else
(`fractions`, and the `decimal` it imports, ~3 ms, are imported by the first such value).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from decimal import Decimal
    from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
# A decimal suffix's factor as (numerator, denominator)
_DECIMAL = {
    "n": (1, 10**9),
    "u": (1, 10**6),
    "m": (1, 10**3),
    "": (1, 1),
    "k": (10**3, 1),
    "M": (10**6, 1),
    "G": (10**9, 1),
    "T": (10**12, 1),
    "P": (10**15, 1),
    "E": (10**18, 1),
}
_QUANTITY = re.compile(
    r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|[numkMGTPE]?)", re.ASCII
)
_MAX = 2**63 - 1
_MAX_LEN = 64  # far longer than any real quantity; keeps huge digit strings out of int()
_EXAMPLES = "use for example 500m, 2, 16Gi or 1e3"

# Parsed milli-values of the strings seen so far (capacity reads it inline in its hot loop);
# a cluster repeats a few hundred distinct
# quantities across all its pods, so lookups replace nearly all parsing.
MILLI_CACHE: dict[str, int] = {}
_CACHE_LIMIT = 65536


class QuantityError(ShoalError):
    """A value is not a Kubernetes quantity; the message names the object and field."""


def _text(value: Any, where: str) -> str:
    # The API serialises quantities as strings, but its decoder also takes JSON numbers.
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value) if isinstance(value, float) else str(value)
    raise QuantityError(f"{where}: {value!r} is not a quantity; {_EXAMPLES}")


def parse(value: Any, where: str) -> Fraction:
    """The exact value of a quantity, capped and rounded up to 1m as the API does."""
    from fractions import Fraction

    text = _text(value, where)
    match = _QUANTITY.fullmatch(text) if len(text) <= _MAX_LEN else None
    if match is None:
        raise QuantityError(f"{where}: {text!r} is not a quantity; {_EXAMPLES}")
    sign, number, suffix = match.groups()
    whole, _, frac = number.partition(".")
    mantissa = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
    if suffix in _BINARY:
        result = mantissa * _BINARY[suffix]
    elif suffix[:1] in ("e", "E") and len(suffix) > 1:
        # Beyond +-40 the result is capped or rounded anyway; clamping keeps 10**exp small.
        exponent = max(-40, min(40, int(suffix[1:])))
        result = mantissa * Fraction(10) ** exponent
    else:
        result = mantissa * Fraction(*_DECIMAL[suffix])
    result = min(result, Fraction(_MAX))
    # Round up (away from zero) to a whole milli-unit, the API's finest precision.
    millis = -((-result.numerator * 1000) // result.denominator)
    result = Fraction(millis, 1000)
    return -result if sign == "-" else result


def milli(value: Any, where: str) -> int:
    """A quantity in milli-units (`500m` -> 500, `2` -> 2000, `1Ki` -> 1024000)."""
    if type(value) is str:
        cached = MILLI_CACHE.get(value)
        if cached is not None:
            return cached
        result = _milli_fast(value)
        if result is None:
            result = _exact_milli(value, where)
        if len(MILLI_CACHE) < _CACHE_LIMIT:
            MILLI_CACHE[value] = result
        return result
    return _exact_milli(value, where)


def _exact_milli(value: Any, where: str) -> int:
    exact = parse(value, where) * 1000
    return exact.numerator // exact.denominator  # already whole: parse rounds to 1m


def _milli_fast(text: str) -> int | None:
    """The common forms in integer arithmetic; None leaves the rest to `parse`."""
    if not text.isascii() or len(text) > 19:
        return None
    result = None
    head, last = text[:-1], text[-1:]
    if text.isdigit():
        result = int(text) * 1000
    elif last == "m" and head.isdigit():
        result = int(head)
    elif last == "i" and len(text) > 2 and text[:-2].isdigit():
        factor = _BINARY.get(text[-2:])
        if factor is not None:
            result = int(text[:-2]) * factor * 1000
    elif last in ("k", "M", "G", "T") and head.isdigit():
        result = int(head) * _DECIMAL[last][0] * 1000
    if result is None or result > _MAX * 1000:
        return None  # the cap is parse's job
    return result


def cpu_cores(value: Any, where: str = "cpu") -> Fraction:
    """CPU in cores (`250m` -> 1/4)."""
    return parse(value, where)


def bytes_(value: Any, where: str = "memory") -> int:
    """Bytes, rounded up to a whole byte (`1.5Gi` -> 1610612736)."""
    exact = parse(value, where)
    return -((-exact.numerator) // exact.denominator)


def count(value: Any, where: str = "count") -> int:
    """A whole count (GPUs, pods), rounded up as the API's Value() does."""
    return bytes_(value, where)


def fmt(value: Fraction | Decimal | int | float) -> str:
    """A ResourceItem quantity: integers bare, otherwise up to two decimals, trimmed.

    The same shape as `providers.local.catalog.quantity`, computed exactly (that one takes
    a float; importing it would also pull in the local provider's host probing).
    """
    from fractions import Fraction

    exact = Fraction(value)
    return fmt_ratio(exact.numerator, exact.denominator)


def fmt_ratio(numerator: int, denominator: int) -> str:
    """`fmt(numerator / denominator)` in integer arithmetic (denominator > 0)."""
    if numerator % denominator == 0:
        return str(numerator // denominator)
    sign = "-" if numerator < 0 else ""
    # Half-up to hundredths on the magnitude, as the figures are shown to people.
    hundredths = (abs(numerator) * 200 + denominator) // (2 * denominator)
    whole, cents = divmod(hundredths, 100)
    if cents == 0:
        return f"{sign}{whole}" if whole else "0"
    return f"{sign}{whole}.{cents:02d}".rstrip("0")
