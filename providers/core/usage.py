"""Allocations as a provider sees them: who holds how much of this node, until when."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class AllocationUsage:
    """One live allocation on this node. `ram_gib` in GiB; `expires` None means no lifetime.
    A reservation (`alloc --at`) has `starts`: it holds [starts, expires), named by `label`."""

    driver: str
    cpu: int
    ram_gib: int
    expires: datetime | None
    starts: datetime | None = None
    label: str = ""


class AllocationSource(Protocol):
    """Implemented by the drivers' ledger; wired into the local provider by the CLI."""

    def active_local_usage(self) -> list[AllocationUsage]: ...
