"""The free use cases: free one allocation (or cancel a reservation), free the expired
ones, free what a shared backend holds for another machine.
"""

from __future__ import annotations

from typing import Any

from drivers.ledger import book as L
from drivers.ledger.book import Allocation
from drivers.service.context import Drivers, describe, no_interrupts, resource_of, with_outcome
from drivers.service.listing import elsewhere, remote_allocations
from drivers.service.recovery import recover
from drivers.spec.views import FreeResult, unknown_allocation
from providers.core.errors import LedgerWriteError, NotFoundError, RetryableError, ShoalError


def _done(ctx: Drivers, alloc_id: str, changed: bool, message: str) -> FreeResult:
    """The outcome with the row as the ledger holds it now."""
    return FreeResult(describe(ctx.ledger.get(alloc_id)).to_json(), changed, message)


def free_failed(ctx: Drivers, alloc_id: str, error: ShoalError) -> FreeResult:
    """A free that could not be done: the row as the ledger holds it (a failure keeps its
    status), or only the id when the ledger has none (or cannot be read)."""
    try:
        allocation = describe(ctx.ledger.get(alloc_id)).to_json()
    except ShoalError:
        allocation = unknown_allocation(alloc_id)
    return FreeResult(allocation, False, str(error), error)


def free(ctx: Drivers, alloc_id: str, *, note: str = "freed") -> FreeResult:
    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    if row.status == L.FAILED:
        ended = _leftovers(ctx, row)
        if ended:
            message = f"{row.id}: allocation had failed, but left {', '.join(ended)}; ended"
            return _done(ctx, row.id, True, message)
    if row.status in (L.FREED, L.FAILED):
        already = (
            "already freed" if row.status == L.FREED else "allocation had failed; nothing held"
        )
        return FreeResult(describe(row).to_json(), False, f"{row.id}: {already} ({row.updated})")
    if row.status in (L.RESERVED, L.LAPSED):
        return _cancel_reservation(ctx, row)
    if elsewhere(ctx, row):
        raise ShoalError(
            f"{row.id} runs on {row.host} ({row.driver} counts that machine's capacity, and "
            f"only that machine can stop it): free it there with `shoal free {row.id}`"
        )
    if row.status == L.FREEING and ctx.ledger.owner_alive(row):
        # Another shoal is freeing it: that is what we were asked for. Wait for its outcome.
        return _await_other_free(ctx, row, note)
    if row.status in L.IN_FLIGHT:
        raise RetryableError(
            f"{row.id} is {row.status.lower()} by shoal process {row.owner_pid}; try again shortly"
        )
    previous = row.status
    freeing_note = f"{L.FREEING_FROM}{previous}"
    try:
        moved = ctx.ledger.set_status(
            row.id, L.FREEING, expect=(previous,), owner=True, note=freeing_note
        )
    except LedgerWriteError as exc:
        return _free_unrecorded(ctx, row, note, exc)
    if not moved:
        return free(ctx, alloc_id, note=note)  # someone moved it; decide again from the new state
    try:
        state = _finish(ctx, row)
        ctx.driver(row.driver).deallocate(resource_of(row))
    except BaseException:
        with no_interrupts():
            # As it was, or as it ended meanwhile (its supervisor said so): not ALLOCATED.
            ctx.ledger.undo_free(row.id, previous, row.note)
        raise
    with no_interrupts():
        ctx.ledger.set_status(row.id, L.FREED, note=note, expect=(L.FREEING,), state=state)
    return _done(ctx, row.id, True, f"{row.id}: {note}")


def _leftovers(ctx: Drivers, row: Allocation) -> list[str]:
    from drivers.spec.base import EndsLeftovers

    try:
        driver = ctx.driver(row.driver)
    except ShoalError:  # a driver no longer configured: as before, nothing to reach
        return []
    return driver.end_leftovers(resource_of(row)) if isinstance(driver, EndsLeftovers) else []


def _cancel_reservation(ctx: Drivers, row: Allocation) -> FreeResult:
    """`free` of a reservation cancels it: nothing runs, its window's capacity comes back."""
    if row.status == L.LAPSED:
        lapsed = f"{row.id}: reservation had lapsed; nothing held"
        return FreeResult(describe(row).to_json(), False, lapsed)
    if not ctx.ledger.set_status(row.id, L.FREED, note=L.CANCELLED, expect=(L.RESERVED,)):
        return free(ctx, row.id)  # claimed or lapsed meanwhile: decide again
    return _done(ctx, row.id, True, f"{row.id}: {L.CANCELLED}")


def _finish(ctx: Drivers, row: Allocation) -> dict[str, Any] | None:
    """For drivers that keep an outcome: the workload stopped, and the row's state with how
    it ended (`resource.metadata.outcome`), recorded before deallocate removes the rest."""
    from drivers.spec.base import FinishesWorkload

    driver = ctx.driver(row.driver)
    if row.state is None or not isinstance(driver, FinishesWorkload):
        return None
    return with_outcome(row, driver.finish(resource_of(row)))


OTHER_FREE_WAIT_SECONDS = 120.0


def _await_other_free(ctx: Drivers, row: Allocation, note: str) -> FreeResult:
    import time

    deadline = time.monotonic() + OTHER_FREE_WAIT_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = ctx.ledger.get(row.id)
        if now.status == L.FREED:
            # Not by this command, but freed as asked.
            by = f"{row.id}: freed (by shoal process {row.owner_pid})"
            return FreeResult(describe(now).to_json(), False, by)
        if now.status != L.FREEING or not ctx.ledger.owner_alive(now):
            return free(ctx, row.id, note=note)  # it failed or died: decide again
    raise RetryableError(
        f"{row.id} is still being freed by shoal process {row.owner_pid} after "
        f"{OTHER_FREE_WAIT_SECONDS:.0f}s; try again"
    )


def _free_unrecorded(
    ctx: Drivers, row: Allocation, note: str, cause: LedgerWriteError
) -> FreeResult:
    """The ledger cannot be written (a full disk): free the workload first, since that is
    what the user needs, then record it if the ledger lets us."""
    ctx.driver(row.driver).deallocate(resource_of(row))
    try:
        ctx.ledger.set_status(row.id, L.FREED, note=note, expect=(row.status,))
    except LedgerWriteError:
        raise LedgerWriteError(
            f"{row.id}: freed in {row.driver}, but the ledger could not record it ({cause}); "
            f"once there is room, `shoal status {row.id}` records it as GONE"
        ) from None
    return _done(ctx, row.id, True, f"{row.id}: {note}")


def free_expired(ctx: Drivers) -> list[FreeResult]:
    recover(ctx)
    results = []
    due = ctx.ledger.expired(ctx.ledger.clock()) + ctx.ledger.with_status(L.EXPIRED)
    for row in sorted(due, key=lambda r: r.expires or ""):
        try:
            results.append(free(ctx, row.id, note=f"expired at {row.expires}"))
        except ShoalError as exc:
            results.append(free_failed(ctx, row.id, exc))
    return results


def free_expired_remote(ctx: Drivers, driver_name: str) -> list[FreeResult]:
    """Free what a shared backend holds past its expiry, whichever machine made it: the
    rows of its listing that say `expired` (aws: a running instance past its
    `shoal:expires` tag). Ours go through the ledger, the others' straight to the backend."""
    from drivers.spec.types import Resource

    recover(ctx)
    driver = ctx.driver(driver_name)
    results = []
    for row in remote_allocations(ctx, driver_name):
        if not (row["detail"] or {}).get("expired"):
            continue
        alloc_id = str(row["id"])
        note = f"expired at {row.get('expires')}"
        try:
            try:
                ctx.ledger.get(alloc_id)
            except NotFoundError:
                driver.deallocate(Resource(identifier=alloc_id))
                said = f"{note}; freed in {driver.name()} (made on another machine)"
                results.append(_freed_remotely(row, said))
            else:
                results.append(free(ctx, alloc_id, note=note))
        except ShoalError as exc:
            results.append(_failed_remotely(ctx, row, exc))
    return results


def _freed_remotely(row: dict[str, Any], note: str) -> FreeResult:
    """Another machine's allocation, freed in the backend: its listed row, now FREED."""
    return FreeResult({**row, "status": L.FREED, "note": note}, True, f"{row['id']}: {note}")


def _failed_remotely(ctx: Drivers, row: dict[str, Any], error: ShoalError) -> FreeResult:
    """Ours: the row as the ledger holds it; another machine's: its listed row."""
    try:
        ctx.ledger.get(str(row["id"]))
    except ShoalError:
        return FreeResult(row, False, str(error), error)
    return free_failed(ctx, str(row["id"]), error)


def free_remote(ctx: Drivers, driver_name: str, alloc_id: str) -> FreeResult:
    """Free an allocation a shared backend holds, whichever machine made it: through this
    ledger when it is ours, else straight in the backend (a crashed CI runner's pods)."""
    from drivers.spec.types import Resource

    try:
        ctx.ledger.get(alloc_id)
    except NotFoundError:
        pass
    else:
        return free(ctx, alloc_id)  # ours: no need to list the backend
    driver = ctx.driver(driver_name)
    listed = [row for row in remote_allocations(ctx, driver_name) if row["id"] == alloc_id]
    if not listed:
        raise NotFoundError(
            f"{driver.name()} holds no shoal allocation {alloc_id!r}; "
            f"`shoal status --remote {driver_name}` lists them"
        )
    driver.deallocate(Resource(identifier=alloc_id))
    note = f"freed in {driver.name()} (made on another machine; not in this machine's ledger)"
    return _freed_remotely(listed[0], note)
