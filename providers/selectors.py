"""`--select` expressions over provider-neutral keys.

Grammar (comma-separated, or repeat `--select`):
  key=value  key==value  key!=value  key>n  key>=n  key<n  key<=n
  key in (a,b)  key notin (a,b)  key  (exists)  !key  (does not exist)
or, in the upstream Go `types.Selector` shape, a JSON list (or a ListResourceFilter object):
  [{"key": "gpu", "operator": "In", "values": ["H100"]}]
String comparisons ignore case; numeric keys compare as numbers. Either way a selector is
a `Selector` with upstream's operator names (In, NotIn, Exists, DoesNotExist) plus shoal's
numeric Gt, Gte, Lt, Lte; `=` is In with one value, `!=` NotIn with one.
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
    "OPERATORS",
    "STRING_KEYS",
    "UnjudgedCount",
    "matches",
    "parse",
    "parse_json",
    "unjudged",
]

IN, NOT_IN, EXISTS, DOES_NOT_EXIST = "In", "NotIn", "Exists", "DoesNotExist"
GT, GTE, LT, LTE = "Gt", "Gte", "Lt", "Lte"
# Upstream's four, then shoal's numeric ones.
OPERATORS = (IN, NOT_IN, EXISTS, DOES_NOT_EXIST, GT, GTE, LT, LTE)
_NUMERIC_OPS = {GT: ">", GTE: ">=", LT: "<", LTE: "<="}
# The text grammar's operators as Selector operators.
_TEXT_OPS = {
    "=": IN,
    "in": IN,
    "!=": NOT_IN,
    "notin": NOT_IN,
    **{symbol: name for name, symbol in _NUMERIC_OPS.items()},
}

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
        return Selector(key=key, operator=_TEXT_OPS[op], values=values)
    if m := _CMP.match(token):
        key = _check_key(m.group(1), token)
        op = "=" if m.group(2) == "==" else m.group(2)
        value = m.group(3)
        if any(c in value for c in "=<>!()"):
            raise UsageError(f"--select {token!r}: unexpected {value!r} after {op}")
        _check_values(key, op, [value], token)
        return Selector(key=key, operator=_TEXT_OPS[op], values=[value])
    if m := _EXISTS.match(token):
        key = _check_key(m.group(2), token)
        return Selector(key=key, operator=DOES_NOT_EXIST if m.group(1) else EXISTS)
    raise UsageError(
        f"--select {token!r}: not a selector; use KEY=VALUE, KEY>=N, 'KEY in (a,b)' or KEY"
    )


def parse(expressions: Iterable[str]) -> list[Selector]:
    out: list[Selector] = []
    for expression in expressions:
        if expression.lstrip().startswith(("[", "{")):
            out.extend(parse_json(expression))
            continue
        if expression.count("(") != expression.count(")"):
            raise UsageError(f"--select {expression!r}: unbalanced parentheses")
        out.extend(parse_one(token) for token in _split_top_level(expression))
    return out


def parse_json(text: str) -> list[Selector]:
    """Selectors in the upstream Go shape: a JSON list of `{key, operator, values}`, or a
    ListResourceFilter `{"resourceSelectors": [...]}`. Errors name the field at fault
    (`--select [1].operator`)."""
    import json

    from providers.core.wire import WireError, from_wire

    try:
        document = json.loads(text)
    except (ValueError, RecursionError) as exc:
        where = (
            f" at line {exc.lineno} column {exc.colno}"
            if isinstance(exc, json.JSONDecodeError)
            else ""
        )
        raise UsageError(
            f"--select: not valid JSON{where}; give a list such as "
            '\'[{"key":"gpu","operator":"In","values":["H100"]}]\''
        ) from None
    path = ""
    if isinstance(document, dict):
        extra = sorted(set(document) - {"resourceSelectors"})
        if extra:
            raise UsageError(
                f"--select {extra[0]}: unknown field; a JSON --select is a list of selectors "
                'or {"resourceSelectors": [...]}'
            )
        path, document = "resourceSelectors", document.get("resourceSelectors")
    if not isinstance(document, list):
        raise UsageError(
            f"--select {path or '(document)'}: expected a list of selectors "
            '({"key", "operator", "values"})'
        )
    out: list[Selector] = []
    for index, item in enumerate(document):
        where = f"{path}[{index}]"
        if isinstance(item, dict) and "values" in item and item["values"] is None:
            item = {k: v for k, v in item.items() if k != "values"}  # Go's nil slice
        if isinstance(item, dict) and isinstance(item.get("values"), list):
            # Numbers are what a person writes for `vcpus`; upstream's values are strings.
            item = {
                **item,
                "values": [
                    json.dumps(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                    for v in item["values"]
                ],
            }
        try:
            selector = from_wire(Selector, item, where)
        except WireError as exc:
            raise UsageError(f"--select {exc}") from None
        out.append(_checked(selector, where))
    return out


def _checked(selector: Selector, where: str) -> Selector:
    """A decoded JSON selector with its key, operator and values checked as the text
    grammar's are; the operator in its canonical spelling."""

    def fail(field: str, message: str) -> UsageError:
        return UsageError(f"--select {where}.{field}: {message}")

    key = selector.key.lower()
    if key not in KNOWN_KEYS:
        raise fail(
            "key",
            f"{'unknown key ' + repr(selector.key) if selector.key else 'missing'}; known keys: "
            f"{', '.join(sorted(KNOWN_KEYS))}",
        )
    op = next((o for o in OPERATORS if o.lower() == selector.operator.lower()), None)
    if op is None:
        raise fail(
            "operator",
            f"{selector.operator!r} is not an operator; use In, NotIn, Exists or DoesNotExist "
            "(or Gt, Gte, Lt, Lte on a number)",
        )
    values = selector.values
    if op in (EXISTS, DOES_NOT_EXIST) and values:
        raise fail("values", f"{op} takes no values; give [] or leave values out")
    if op in (IN, NOT_IN) and not values:
        raise fail("values", f"{op} needs at least one value")
    if op in _NUMERIC_OPS and len(values) != 1:
        raise fail("values", f"{op} needs exactly one number")
    if op in _NUMERIC_OPS and key not in NUMERIC_KEYS:
        raise fail("operator", f"{op} needs a numeric key, {key!r} is text")
    for index, value in enumerate(values):
        if value == "":
            raise fail(f"values[{index}]", "empty value")
        if key in NUMERIC_KEYS:
            try:
                float(value)
            except ValueError:
                raise fail(
                    f"values[{index}]", f"{value!r} is not a number ({key} is numeric)"
                ) from None
    return Selector(key=key, operator=op, values=list(values))


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
    op = selector.operator
    if selector.key == "gpu" and actual and op in (IN, NOT_IN):
        hit = any(_gpu_equal(actual, v, record) for v in selector.values)
        return hit if op == IN else not hit
    present = actual is not None and actual != ""
    if op == EXISTS:
        return present
    if op == DOES_NOT_EXIST:
        return not present
    if op == NOT_IN:
        return not present or not any(_equal(actual, v) for v in selector.values)
    if not present:
        return False
    if op == IN:
        return any(_equal(actual, v) for v in selector.values)
    number = _as_number(actual)
    if number is None:
        return False
    bound = float(selector.values[0])
    return {GT: number > bound, GTE: number >= bound, LT: number < bound, LTE: number <= bound}[op]


def matches(selectors: Iterable[Selector], record: Mapping[str, Any]) -> bool:
    return all(matches_one(s, record) for s in selectors)


def unjudged(selectors: Iterable[Selector], record: Mapping[str, Any]) -> list[str]:
    """The keys a comparison needed but the record does not know (see MAYBE_UNKNOWN)."""
    return [
        s.key
        for s in selectors
        if s.key in MAYBE_UNKNOWN
        and s.operator not in (EXISTS, DOES_NOT_EXIST)
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
