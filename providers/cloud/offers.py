"""What a cloud fetcher hands the cache: instance types with their shape and hourly prices.

A fetcher parses a provider's own payloads into these and nothing else reaches the cache,
the catalog or a renderer: provider payloads stop here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from providers.models import RegionSpec

# (amount so far, total if known, what is being fetched). Amounts are bytes, or a count of
# items when the label says " rows" (paged APIs, where bytes are not seen).
Progress = Callable[[int, int | None, str], None]


def no_progress(done: int, total: int | None, what: str) -> None:
    pass


@dataclass(slots=True)
class Offer:
    """One instance type in one region. Memory in GiB, GPU memory in GiB per GPU;
    prices per hour in the snapshot's currency, None when not offered or not known.
    vCPUs and memory are None when the provider's data does not say them: an unknown is
    never 0, or a `memory_gib>=16` filter would silently drop the row."""

    instance_type: str
    vcpus: float | None = None
    memory_gib: float | None = None
    arch: str = ""  # x86_64 | arm64 | "" (unknown)
    gpu: str = ""  # model, e.g. "H100"
    gpu_count: int = 0
    gpu_memory_gib: float = 0.0
    on_demand: float | None = None
    spot: float | None = None
    scheduled: float | None = None
    # Where the shape (vCPUs, memory, GPUs) came from when that is not the snapshot's
    # source, e.g. shoal's built-in table of a provider's published sizes; "" otherwise.
    shape_source: str = ""


@dataclass
class Snapshot:
    """Everything one refresh learned about one region of one provider."""

    provider: str
    region: str
    fetched_at: datetime  # aware, UTC
    source: str  # where the data came from: a URL safe to print (no keys, no query)
    currency: str = "USD"
    offers: dict[str, Offer] = field(default_factory=dict)  # instance type -> offer
    notes: list[str] = field(default_factory=list)  # e.g. "spot prices need AWS credentials"


class Fetcher(Protocol):
    """One provider's network side. Constructed from settings; raises typed errors."""

    provider: str

    def list_regions(self) -> list[RegionSpec]:
        """The provider's regions, from its data (not a hard-coded list)."""
        ...

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        """Download and parse one region's instance types and prices."""
        ...
