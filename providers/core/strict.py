"""The base of shoal's input models, and the constrained numbers they share.

A model module imports pydantic; it is imported only where input is validated
(providers/core/schema.py says why). Strict everywhere: an unknown key is an error, a bool or a
string is not a number, a TOML date is neither, and NaN and infinities are refused (they
slip through range checks: `NaN < 0` is false).
"""

from __future__ import annotations

import os
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "MAX_SETTING",
    "MIN_POSITIVE",
    "Count",
    "NonNegative",
    "Positive",
    "PositiveInt",
    "Strict",
]

# pydantic looks for plugins (observers of every validation) by reading the entry points of
# every installed distribution when it builds a model's validator: 5-10 ms a run, more in a
# big environment, for nothing shoal's input checks want. Read then, so set before.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        # A model's validator is built at its first use, not when its module is imported.
        defer_build=True,
    )
    # Credentials: an error about a value under such a model never quotes it.
    secret: ClassVar[bool] = False


# The largest a setting or option may be: past any count of vCPUs, GiB or GPUs, dollars an
# hour or seconds (1e9 s is 31 years) shoal has a use for, and far below where using it
# breaks (an integer SQLite cannot store, a timeout the OS refuses, a duration timedelta
# cannot hold): 1e300 was accepted, as NaN once was.
MAX_SETTING = 1_000_000_000
# The smallest a positive one may be: a microsecond in seconds, a timedelta's resolution
# (below it a duration rounds to none: 1e-300 passed "gt=0" and meant zero), a millionth of
# a dollar or a GiB.
MIN_POSITIVE = 1e-6

Count = Annotated[int, Field(ge=0, le=MAX_SETTING)]
PositiveInt = Annotated[int, Field(gt=0, le=MAX_SETTING)]
NonNegative = Annotated[float, Field(ge=0, le=MAX_SETTING)]
Positive = Annotated[float, Field(ge=MIN_POSITIVE, le=MAX_SETTING)]
