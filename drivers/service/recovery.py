"""The clean-up every use case runs first: recover (rows of shoal processes that died
mid-operation, so a `kill -9` never leaves phantom usage past the next command) and expire
(allocations past their lifetime).
"""

from __future__ import annotations

from drivers.ledger import book as L
from drivers.service.context import Drivers, resource_of
from providers.core.errors import LedgerWriteError, ShoalError


def recover(ctx: Drivers) -> None:
    """Undo allocations whose shoal process died before finishing them. A claim of a
    reservation (its row has a window start) goes back to RESERVED: the booking outlives
    the claim, as it does a claim interrupted by Ctrl-C."""
    for row in ctx.ledger.sweep():
        try:
            ctx.driver(row.driver).deallocate(resource_of(row))
        except ShoalError as exc:
            ctx.warnings.append(f"allocation {row.id} was interrupted and cleanup failed: {exc}")
            continue
        if row.starts is not None:
            ctx.ledger.set_status(
                row.id, L.RESERVED, expect=(L.ORPHANED,),
                note=f"claim failed ({row.note}); still reserved until it lapses",
            )  # fmt: skip
            ctx.warnings.append(
                f"reservation {row.id}: its claim was interrupted ({row.note}); cleaned up, "
                "still reserved"
            )
            continue
        ctx.ledger.set_status(
            row.id, L.FAILED, note=f"{row.note}; cleaned up", expect=(L.ORPHANED,)
        )
        ctx.warnings.append(f"allocation {row.id} was interrupted ({row.note}); cleaned up")
    expire(ctx)


def expire(ctx: Drivers) -> None:
    """Allocations past their lifetime become EXPIRED and hold nothing from then on. Their
    supervisors have stopped the workloads already; one that could not (killed with
    SIGKILL) left its workload to this: it is stopped here, what it left kept for `free`.
    One that cannot be stopped now stays as it is, and is tried again by the next command."""
    # Another machine's workloads of a machine-scoped driver are that machine's to stop.
    overdue = [
        row
        for row in ctx.ledger.expired(ctx.ledger.clock())
        if row.is_remote or ctx.ledger.mine(row)
    ]
    if not overdue:
        return
    from drivers.spec.base import FinishesWorkload

    for row in overdue:
        try:
            driver = ctx.driver(row.driver)
            if isinstance(driver, FinishesWorkload):
                driver.finish(resource_of(row))
        except ShoalError as exc:
            ctx.warnings.append(f"{row.id} is past its lifetime but could not be stopped: {exc}")
            continue
        try:
            ctx.ledger.set_status(
                row.id, L.EXPIRED, note=f"expired at {row.expires}", expect=(L.ALLOCATED, L.GONE)
            )
        except LedgerWriteError as exc:  # a full disk: reads still answer
            ctx.warnings.append(f"{row.id} is past its lifetime; not recorded: {exc}")
            return
