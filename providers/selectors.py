"""`--select` expressions over provider-neutral keys.

Grammar (comma-separated, or repeat `--select`):
  key=value  key==value  key!=value  key>n  key>=n  key<n  key<=n
  key in (a,b)  key notin (a,b)  key  (exists)  !key  (does not exist)
String comparisons ignore case; numeric keys compare as numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from providers.core.errors import UsageError
from providers.models import Selector
from providers.selector_keys import HELP, KNOWN_KEYS, NUMERIC_KEYS, STRING_KEYS

__all__ = [
    "HELP",
    "KNOWN_KEYS",
    "NUMERIC_KEYS",
    "STRING_KEYS",
    "UnjudgedCount",
    "matches",
    "parse",
    "unjudged",
]

# Keys whose value a provider may not know for a row (null, never 0): a comparison on them
# cannot be judged, and the rows it drops for that reason are counted and reported.
MAYBE_UNKNOWN = frozenset({"vcpus", "memory_gib"})

_KEY = r"[A-Za-z_][A-Za-z0-9_.]*"
_SET = re.compile(rf"^\s*({_KEY})\s+(in|notin)\s*\((.*)\)\s*$")
_CMP = re.compile(rf"^\s*({_KEY})\s*(==|!=|>=|<=|=|>|<)\s*(.*?)\s*$")
_EXISTS = re.compile(rf"^\s*(!?)\s*({_KEY})\s*$")


def _split_top_level(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (s.strip() for s in parts) if p]


def _check_key(key: str, token: str) -> str:
    key = key.lower()
    if key not in KNOWN_KEYS:
        raise UsageError(
            f"--select {token!r}: unknown key {key!r}; known keys: {', '.join(sorted(KNOWN_KEYS))}"
        )
    return key


def _check_values(key: str, op: str, values: list[str], token: str) -> None:
    if any(v == "" for v in values):
        raise UsageError(f"--select {token!r}: empty value; write e.g. {key}{op}VALUE")
    if op in (">", ">=", "<", "<=") and key not in NUMERIC_KEYS:
        raise UsageError(f"--select {token!r}: {op} needs a numeric key, {key!r} is text")
    if key in NUMERIC_KEYS:
        for value in values:
            try:
                float(value)
            except ValueError:
                raise UsageError(
                    f"--select {token!r}: {value!r} is not a number ({key} is numeric)"
                ) from None


def parse_one(token: str) -> Selector:
    """Parse one selector; a malformed one raises UsageError naming the token."""
    if m := _SET.match(token):
        key, op, body = _check_key(m.group(1), token), m.group(2), m.group(3)
        values = [v.strip() for v in body.split(",")]
        _check_values(key, op, values, token)
        return Selector(key=key, operator=op, values=values)
    if m := _CMP.match(token):
        key = _check_key(m.group(1), token)
        op = "=" if m.group(2) == "==" else m.group(2)
        value = m.group(3)
        if any(c in value for c in "=<>!()"):
            raise UsageError(f"--select {token!r}: unexpected {value!r} after {op}")
        _check_values(key, op, [value], token)
        return Selector(key=key, operator=op, values=[value])
    if m := _EXISTS.match(token):
        key = _check_key(m.group(2), token)
        return Selector(key=key, operator="!exists" if m.group(1) else "exists")
    raise UsageError(
        f"--select {token!r}: not a selector; use KEY=VALUE, KEY>=N, 'KEY in (a,b)' or KEY"
    )


def parse(expressions: Iterable[str]) -> list[Selector]:
    out: list[Selector] = []
    for expression in expressions:
        if expression.count("(") != expression.count(")"):
            raise UsageError(f"--select {expression!r}: unbalanced parentheses")
        out.extend(parse_one(token) for token in _split_top_level(expression))
    return out


def _as_number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _equal(actual: Any, wanted: str) -> bool:
    number = _as_number(actual)
    if number is not None:
        try:
            return number == float(wanted)
        except ValueError:
            return False
    return str(actual).lower() == wanted.lower()


def _gpu_equal(actual: Any, wanted: str, record: Mapping[str, Any]) -> bool:
    """`gpu=A100-80GB` is `gpu=A100` with 80 GiB per GPU; names compare canonically."""
    from providers.gpus import canonical

    model, memory = canonical(wanted)
    if canonical(str(actual))[0].lower() != model.lower():
        return False
    if memory is None:
        return True
    have = _as_number(record.get("gpu_memory_gib"))
    return have is not None and abs(have - memory) < 0.5


def matches_one(selector: Selector, record: Mapping[str, Any]) -> bool:
    actual = record.get(selector.key)
    if selector.key == "gpu" and actual and selector.operator in ("=", "in", "!=", "notin"):
        hit = any(_gpu_equal(actual, v, record) for v in selector.values)
        return hit if selector.operator in ("=", "in") else not hit
    present = actual is not None and actual != ""
    op = selector.operator
    if op == "exists":
        return present
    if op == "!exists":
        return not present
    if op in ("!=", "notin"):
        return not present or not any(_equal(actual, v) for v in selector.values)
    if not present:
        return False
    if op in ("=", "in"):
        return any(_equal(actual, v) for v in selector.values)
    number = _as_number(actual)
    if number is None:
        return False
    bound = float(selector.values[0])
    return {">": number > bound, ">=": number >= bound, "<": number < bound, "<=": number <= bound}[
        op
    ]


def matches(selectors: Iterable[Selector], record: Mapping[str, Any]) -> bool:
    return all(matches_one(s, record) for s in selectors)


def unjudged(selectors: Iterable[Selector], record: Mapping[str, Any]) -> list[str]:
    """The keys a comparison needed but the record does not know (see MAYBE_UNKNOWN)."""
    return [
        s.key
        for s in selectors
        if s.key in MAYBE_UNKNOWN
        and s.operator not in ("exists", "!exists")
        and record.get(s.key) is None
    ]


class UnjudgedCount:
    """Rows a filter left out only because a value it tests is unknown, per key."""

    def __init__(self) -> None:
        self.by_key: dict[str, int] = {}

    def add(self, selectors: Iterable[Selector], record: Mapping[str, Any]) -> None:
        for key in dict.fromkeys(unjudged(selectors, record)):
            self.by_key[key] = self.by_key.get(key, 0) + 1

    def notes(self) -> list[str]:
        return [
            f"--select could not judge {count} row(s) with no known {key} (left out; "
            f"`--select '!{key}'` lists them)"
            for key, count in sorted(self.by_key.items())
        ]
