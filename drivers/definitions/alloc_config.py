"""The config file's [alloc] table as a model (a model module: imported only to check it)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from providers.core.strict import Strict

MINUTES_PER_YEAR = 365 * 24 * 60
# 0.6 s. Below it a booking lapses before a claim could reach it, and a tiny float (1e-300)
# rounds to no time at all in a timedelta: "gt=0" alone let that pass.
MIN_GRACE_MINUTES = 0.01


class AllocSection(Strict):
    """[alloc]: settings of `shoal alloc` beyond a driver's own."""

    reservation_grace_minutes: Annotated[
        float, Field(ge=MIN_GRACE_MINUTES, le=MINUTES_PER_YEAR)
    ] = Field(
        15.0,
        description=f"minutes, {MIN_GRACE_MINUTES} to {MINUTES_PER_YEAR}: a reservation not "
        "claimed this long after its start lapses",
    )
