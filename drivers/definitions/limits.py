"""Bounds the drivers' option models and the drivers themselves share, without pydantic (a
driver re-checks a stored value against them in commands that import no model)."""

from __future__ import annotations

# A stall the test driver injects: time.sleep overflows past ~292 years (and 1e18 s is no
# test); a day is more than any test waits.
MAX_DELAY_SECONDS = 86_400
