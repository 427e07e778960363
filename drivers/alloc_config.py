"""The config file's [alloc] table as a model (a model module: imported only to check it)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from providers.core.strict import Strict

MINUTES_PER_YEAR = 365 * 24 * 60


class AllocSection(Strict):
    """[alloc]: settings of `shoal alloc` beyond a driver's own."""

    reservation_grace_minutes: Annotated[float, Field(gt=0, le=MINUTES_PER_YEAR)] = Field(
        15.0, description="a reservation not claimed this long after its start lapses"
    )
