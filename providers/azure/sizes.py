"""shoal's built-in table of Azure VM sizes (sizes.json beside this module).

Without a token for the Resource SKUs API, the Retail Prices API says what a size costs but
not what it is: its name gives vCPUs and GPUs, never memory. The table holds what Microsoft's
size pages publish per size (learn.microsoft.com/azure/virtual-machines/sizes/...), one
series per page with the page cited, so such sizes still get a real memory figure. It is read
only when a fetch needs it, and a size it does not list stays unknown rather than guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from providers import gpus
from providers.core.errors import ShoalError

DATA_FILE = "sizes.json"


@dataclass(frozen=True, slots=True)
class SizeRow:
    """One size as its page publishes it. GPU memory is per GPU; for a size smaller than one
    GPU (count 0) it is the memory of the slice the size gets."""

    vcpus: float
    memory_gib: float
    gpu: str = ""
    gpu_count: int = 0
    gpu_memory_gib: float = 0.0


@dataclass(frozen=True, slots=True)
class SizeTable:
    as_of: str
    rows: Mapping[str, SizeRow]  # keyed by the lower-cased size name: ARM names ignore case

    def get(self, name: str) -> SizeRow | None:
        return self.rows.get(name.lower())

    @property
    def source(self) -> str:
        return f"shoal's built-in Azure size table (Microsoft size pages, as of {self.as_of})"


def _bad(what: str) -> ShoalError:
    # The file ships with shoal: a bad one is a packaging bug, not a user error.
    return ShoalError(f"azure: the built-in size table {DATA_FILE} is malformed ({what})")


def _number(row: Mapping[str, Any], key: str, name: str, *, default: float | None = None) -> float:
    value = row.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(f"{name}: {key} is {value!r}, not a number")
    return float(value)


def parse_table(text: str) -> SizeTable:
    """The table in `text` (the JSON of sizes.json), checked row by row."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise _bad(str(exc)) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("series"), list):
        raise _bad("no series list")
    as_of = doc.get("asOf")
    if not isinstance(as_of, str) or not as_of:
        raise _bad("no asOf date")
    rows: dict[str, SizeRow] = {}
    for series in doc["series"]:
        sizes = series.get("sizes") if isinstance(series, dict) else None
        if not isinstance(sizes, dict):
            raise _bad(f"a series without sizes: {series!r:.80}")
        for name, row in sizes.items():
            if not isinstance(row, dict):
                raise _bad(f"{name}: not an object")
            gpu = row.get("gpu", "")
            if not isinstance(gpu, str):
                raise _bad(f"{name}: gpu is {gpu!r}, not a string")
            rows[str(name).lower()] = SizeRow(
                vcpus=_number(row, "vcpus", name),
                memory_gib=_number(row, "memoryGiB", name),
                gpu=gpus.model(gpu) if gpu else "",
                gpu_count=int(_number(row, "gpuCount", name, default=0)),
                gpu_memory_gib=_number(row, "gpuMemoryGiB", name, default=0),
            )
    return SizeTable(as_of=as_of, rows=rows)


@cache
def table() -> SizeTable:
    """The shipped table, read once per process and only when asked for; through
    importlib.resources so that it is found in a regular (non-editable) install too."""
    text = resources.files(__package__ or "providers.azure").joinpath(DATA_FILE).read_text("utf-8")
    return parse_table(text)
