"""How many definitions fit on a node: the spec's capacity rule, shared by local drivers.

Totals may be stretched by the driver's overbook amounts, but only when the node's tenants
and the new one all tolerate it: multitenancy, plus cpu_overbook/ram_overbook for each stretch.
Arithmetic is signed and clamped, so usage above the total (an overbooked node, or a limit
lowered under running work) gives 0, never a wrapped-around huge number.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from drivers.spec.base import UNLIMITED
from drivers.spec.types import Resources


def fit_count(
    total_cpu: int,
    total_ram: int,
    overbook_cpu: int,
    overbook_ram: int,
    node_usage: Resources,
    req: Resources,
) -> int:
    """Count of `req` that fit; a total of 0 means that resource is unlimited."""
    if total_cpu <= 0 and total_ram <= 0:
        return UNLIMITED
    if (total_cpu > 0 and req.cpu > total_cpu) or (total_ram > 0 and req.ram > total_ram):
        return 0
    usage = node_usage
    if usage.is_empty():
        # The first tenant sets the node's tolerance; a stale flag would skew the next ones.
        usage = replace(
            usage,
            multitenancy=req.multitenancy,
            cpu_overbook=req.cpu_overbook,
            ram_overbook=req.ram_overbook,
        )
    cpu_budget, ram_budget = total_cpu, total_ram
    if usage.multitenancy and req.multitenancy:
        if usage.cpu_overbook and req.cpu_overbook:
            cpu_budget += max(0, overbook_cpu)
        if usage.ram_overbook and req.ram_overbook:
            ram_budget += max(0, overbook_ram)
    counts = []
    if total_cpu > 0 and req.cpu > 0:
        counts.append(max(0, cpu_budget - usage.cpu) // req.cpu)
    if total_ram > 0 and req.ram > 0:
        counts.append(max(0, ram_budget - usage.ram) // req.ram)
    return min(counts) if counts else UNLIMITED


@dataclass(frozen=True)
class Totals:
    """The most a driver could ever give one definition, with nothing allocated: vCPUs and
    GiB (None: no limit). `configured`: which of them are the instance's own `cpu_limit` /
    `ram_limit` (in `table`), which raising would raise; `source`: where the others come
    from (this host's supply, the engine's)."""

    cpu: int | None
    ram: int | None
    table: str = ""  # `[drivers."test/default"]`
    configured: tuple[str, ...] = ()  # "cpu", "ram"
    source: str = ""  # `this host's supply`


def never_fits(driver: str, totals: Totals, req: Resources) -> str | None:
    """The one-line refusal of a request no capacity of `driver` could ever hold, or None
    when it could fit once enough is freed. Said the same way by `alloc`, `alloc --wait` and
    `alloc --at`: a usage error (exit 2), never "no capacity" (75), which a retry loop would
    wait on forever. A request over a total is refused by fit_count before any overbooking
    is added, so the total bounds it, overbooking or not."""
    over: list[str] = []
    asks: list[str] = []
    limits: list[str] = []
    for key, total, asked, unit in (
        ("cpu", totals.cpu, req.cpu, ""),
        ("ram", totals.ram, req.ram, " GiB"),
    ):
        if total is not None and asked > total:
            over.append(f"{total}{unit} ({key})")
            asks.append(f"--{key} {total}")
            if key in totals.configured:
                limits.append(f"{key}_limit")
    if not over:
        return None
    unconfigured = len(limits) < len(over) and totals.source
    source = f", {totals.source}" if unconfigured else ""
    remedy = f", or raise {'/'.join(limits)} in {totals.table}" if limits and totals.table else ""
    return (
        f"{driver}: cpu={req.cpu} ram={req.ram}GiB can never fit: the driver's total is "
        f"{' and '.join(over)}{source}; ask for {' and '.join(asks)} or less{remedy}"
    )
