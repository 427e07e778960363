"""What `catalog import` accepts: providers/cloud/share.py's export document as models.

The file may come from anywhere, so every string is cut to 1000 characters and stripped of
control characters (no terminal escapes from a stranger's file), names must look like
region and instance type names (no paths), numbers are finite and in range, times are RFC
3339 and not in the future, and a region has one snapshot. Keys this shoal does not read
are ignored: a newer shoal may add some to version 1 files.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BeforeValidator, ConfigDict, Field, PlainValidator

from providers.core.errors import UsageError
from providers.core.strict import Strict
from providers.core.timeutil import parse_time, utcnow

_PROVIDER = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_ITEM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
CLOCK_SKEW = timedelta(minutes=10)


def _clean(text: str) -> str:
    return _CONTROL.sub("", text)[:1000]


def _provider(text: str) -> str:
    if not _PROVIDER.match(text):
        raise ValueError(f"{text!r} is not a provider name")
    return text


def _item_name(text: str) -> str:
    if not _ITEM_NAME.match(text):
        raise ValueError(f"{text!r} is not a region or instance type name")
    return text


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("expected an RFC 3339 time string")
    text = _clean(value)
    try:
        at = parse_time(text, "time")
    except UsageError:
        raise ValueError(f"{text!r} is not an RFC 3339 time") from None
    if at > utcnow() + CLOCK_SKEW:
        raise ValueError(f"{text} is in the future; the exporting clock is wrong")
    return at


def _row(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value  # JSON has no tuples


Text = Annotated[str, AfterValidator(_clean)]
Name = Annotated[str, AfterValidator(_clean), AfterValidator(_item_name)]
Time = Annotated[datetime, PlainValidator(_time)]
Amount = Annotated[float, Field(ge=0, le=1e9, description="a finite number >= 0, at most 1e9")]
Count = Annotated[int, Field(ge=0, le=1_000_000, description="an integer from 0 to 1000000")]


class Part(Strict):
    model_config = ConfigDict(extra="ignore")


class Region(Part):
    name: Name
    location: Text = ""
    zones: list[Text] = []


class Offer(Part):
    instanceType: Name
    vcpus: Amount | None = None
    memoryGib: Amount | None = None
    arch: Text
    gpu: Text
    gpuCount: Count
    gpuMemoryGib: Amount
    onDemand: Amount | None = None
    spot: Amount | None = None
    scheduled: Amount | None = None
    shapeSource: Text = ""  # older exports lack it


class Snapshot(Part):
    region: Name
    fetchedAt: Time
    source: Text = ""
    currency: Literal["USD"] = Field("USD", description="only USD is compared")
    notes: list[Text] = []
    offers: list[Offer]


def _one_per_region(snapshots: list[Snapshot]) -> list[Snapshot]:
    first: dict[str, int] = {}
    for i, snap in enumerate(snapshots):
        if snap.region in first:
            raise ValueError(
                f"region {snap.region!r} appears twice (snapshots {first[snap.region]} and {i})"
            )
        first[snap.region] = i
    return snapshots


HistoryRow = Annotated[
    tuple[Name, Name, Time, Amount | None, Amount | None, Amount | None], BeforeValidator(_row)
]


class ExportFile(Part):
    provider: Annotated[str, AfterValidator(_provider)]
    regions: list[Region] = []
    snapshots: Annotated[list[Snapshot], AfterValidator(_one_per_region)]
    history: list[HistoryRow] = Field(
        [], description="rows of [region, instanceType, observedAt, onDemand, spot, scheduled]"
    )
