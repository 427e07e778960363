"""Finite numbers in user input: the parts no model covers.

NaN compares false with everything, so `NaN < 0` lets it through every range check, and
Infinity passes `>= 0`; either then breaks what uses it (a grace period that never ends,
`NaN` in JSON that no parser reads). The models refuse them (providers/core/strict.py); these
find them in free-form trees (a definition's options, config tables this command does not
read) and keep them out of JSON decoding.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any


def non_finite(tree: Any, path: str = "") -> Iterator[str]:
    """Dotted paths of the NaN and infinite floats anywhere in a decoded document."""
    if isinstance(tree, float) and not math.isfinite(tree):
        yield path or "(top level)"
    elif isinstance(tree, Mapping):
        for key, value in tree.items():
            yield from non_finite(value, f"{path}.{key}" if path else str(key))
    elif isinstance(tree, list):
        for i, value in enumerate(tree):
            yield from non_finite(value, f"{path}[{i}]")


def reject_constant(name: str) -> float:
    """json.loads(parse_constant=...): NaN and Infinity are not JSON numbers."""
    raise ValueError(f"{name} is not a number (give a finite value)")
