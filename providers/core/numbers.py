"""Finite numbers in user input: the parts no model covers.

NaN compares false with everything, so `NaN < 0` lets it through every range check, and
Infinity passes `>= 0`; either then breaks what uses it (a grace period that never ends,
`NaN` in JSON that no parser reads). The models refuse them (providers/core/strict.py); these
find them in free-form trees (a definition's options, config tables this command does not
read) and keep them out of JSON decoding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any


def leaves(tree: Any, match: Callable[[Any], bool], path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, value) of every value in a decoded document (dicts and lists of JSON,
    YAML or TOML) that `match` picks."""
    if match(tree):
        yield path or "(top level)", tree
    elif isinstance(tree, Mapping):
        for key, value in tree.items():
            yield from leaves(value, match, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from leaves(value, match, f"{path}[{i}]")


def non_finite(tree: Any) -> Iterator[str]:
    """Dotted paths of the NaN and infinite floats anywhere in a decoded document."""
    for path, _ in leaves(tree, lambda v: isinstance(v, float) and not math.isfinite(v)):
        yield path


def reject_constant(name: str) -> float:
    """json.loads(parse_constant=...): NaN and Infinity are not JSON numbers."""
    raise ValueError(f"{name} is not a number (give a finite value)")
