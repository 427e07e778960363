"""The allocate use cases: alloc (now or queued) and its dry run, plus the clean-up every
use case runs first: recover (rows of shoal processes that died mid-operation, so a
`kill -9` never leaves phantom usage past the next command) and expire.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drivers import ledger as L
from drivers.service_context import (
    Drivers,
    _capacity,
    _ignore_interrupts,
    _no_interrupts,
    _public_definition,
    _resource,
    _restore_interrupts,
    describe,
)
from drivers.views import AllocationView, DryRun
from providers.core.errors import LedgerWriteError, ShoalError, UsageError
from providers.core.wire import to_wire

if TYPE_CHECKING:
    # Driver code, types and the registry are imported where used: `status` listing a
    # large ledger should not pay for them (cold start).
    from datetime import datetime

    from drivers.base import ResourceDriver
    from drivers.scheduling import Wait
    from drivers.types import LabelDefinition

ALLOCATION_ID_KEY = "SHOAL_ALLOCATION_ID"


def recover(ctx: Drivers) -> None:
    """Undo allocations whose shoal process died before finishing them. A claim of a
    reservation (its row has a window start) goes back to RESERVED: the booking outlives
    the claim, as it does a claim interrupted by Ctrl-C."""
    for row in ctx.ledger.sweep():
        try:
            ctx.driver(row.driver).deallocate(_resource(row))
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
    overdue = ctx.ledger.expired(ctx.ledger.clock())
    if not overdue:
        return
    from drivers.base import FinishesWorkload

    for row in overdue:
        try:
            driver = ctx.driver(row.driver)
            if isinstance(driver, FinishesWorkload):
                driver.finish(_resource(row))
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


def prepare(ctx: Drivers, definition: LabelDefinition) -> ResourceDriver:
    driver = ctx.driver(definition.driver)
    definition.driver = driver.name()
    driver.validate_definition(definition)
    return driver


def dry_run(ctx: Drivers, definition: LabelDefinition, at: datetime | None = None) -> DryRun:
    """How many such definitions fit over the window they would hold, now (or from `at`,
    as a reservation would), beside the allocations and the reservations overlapping it;
    with what the driver would take and why, from drivers that explain their choice."""
    from drivers.base import UNLIMITED, ExplainsChoice
    from drivers.definition import expires_at

    driver = prepare(ctx, definition)
    scope = driver.name() if driver.is_remote() else None
    if at is not None:
        from drivers.scheduling import AT_SLACK

        if scope is not None:
            raise UsageError(f"--at: {driver.name()} is remote; reservations are for local drivers")
        if at < ctx.ledger.clock() - AT_SLACK:
            raise UsageError("--at is in the past; give now or a later time")
        at = max(at, ctx.ledger.clock())
    recover(ctx)
    usage = ctx.ledger.node_usage(scope)
    fit = ctx.ledger.fit_window(
        lambda usage: _capacity(driver, usage, definition),
        remote_driver=scope,
        start=at,
        end=expires_at(definition, at or ctx.ledger.clock()),
    )
    count = fit.count
    return DryRun(
        driver=driver.name(),
        fits=None if count >= UNLIMITED else count,
        unlimited=count >= UNLIMITED,
        node_usage={"cpu": usage.cpu, "ram": usage.ram},
        definition=_public_definition(to_wire(definition)),
        choice=driver.explain(definition) if isinstance(driver, ExplainsChoice) else None,
    )


def check_metadata(driver: ResourceDriver, metadata: dict[str, Any]) -> None:
    """An optional check beyond the spec's interface, so bad metadata is refused before a
    reservation is written rather than after."""
    from drivers.base import ChecksMetadata

    if isinstance(driver, ChecksMetadata):
        driver.validate_metadata(metadata)


def allocate(
    ctx: Drivers,
    definition: LabelDefinition,
    metadata: dict[str, Any],
    committed: Callable[[AllocationView], None] | None = None,
    wait: Wait | None = None,
) -> AllocationView:
    """Reserve, allocate, record. Up to the record an interrupt undoes the allocation; from
    the record on it is finished: `committed` (which prints the id) runs with Ctrl-C
    ignored, and Ctrl-C stays ignored after it, so a caller never exits 130 holding a live
    allocation it did not report. The room is taken after the `alloc --wait` waiters that
    came first; with `wait`, this one queues until it fits and it is its turn."""
    from drivers.definition import expires_at
    from drivers.scheduling import queue_fits, wait_for_room

    driver = prepare(ctx, definition)
    check_metadata(driver, metadata)
    recover(ctx)
    if wait is not None:
        alloc_id, expires = wait_for_room(ctx, driver, definition, metadata, wait)
    else:
        expires = expires_at(definition, ctx.ledger.clock())
        alloc_id = ctx.ledger.reserve(
            driver=driver.name(),
            definition=to_wire(definition),
            resources=definition.resources,
            metadata=metadata,
            is_remote=driver.is_remote(),
            expires=expires,
            fits=lambda usage: _capacity(driver, usage, definition),
            queue=queue_fits(driver),
        )
    return _bring_up(ctx, driver, definition, metadata, alloc_id, expires, committed)


def _bring_up(
    ctx: Drivers,
    driver: ResourceDriver,
    definition: LabelDefinition,
    metadata: dict[str, Any],
    alloc_id: str,
    expires: datetime | None,
    committed: Callable[[AllocationView], None] | None,
    undo: Callable[[str], None] | None = None,
) -> AllocationView:
    """Allocate in the driver for a row this shoal holds ALLOCATING, then record it. A
    failure or an interrupt before the record undoes it: the row turns FAILED (`undo`: a
    claimed reservation goes back to RESERVED)."""
    from drivers.types import Resource

    def failed(note: str) -> None:
        if undo is not None:
            undo(note)
        else:
            ctx.ledger.set_status(alloc_id, L.FAILED, note=note, expect=(L.ALLOCATING,))

    try:
        res = driver.allocate(definition, {**metadata, ALLOCATION_ID_KEY: alloc_id})
        res.timeout = expires
        previous = _ignore_interrupts()  # inside the try: an interrupt before it is undone
    except BaseException as exc:
        with _no_interrupts():
            note = (
                "interrupted" if isinstance(exc, KeyboardInterrupt) else f"allocate failed: {exc}"
            )
            with contextlib.suppress(ShoalError, OSError):
                driver.deallocate(Resource(identifier=alloc_id))
            failed(note)
        raise
    try:
        try:
            kept = ctx.ledger.set_status(
                alloc_id, L.ALLOCATED, state=to_wire(res), expect=(L.ALLOCATING,)
            )
        except BaseException as exc:  # the record failed (a full disk): undo, not leak
            with contextlib.suppress(ShoalError, OSError):
                driver.deallocate(res)
            with contextlib.suppress(ShoalError, OSError, sqlite3.Error):
                failed(f"recording failed: {exc}")
            raise
        if not kept:
            # Another shoal took this row for an orphan (its owner looked dead to it, as
            # across PID namespaces) and is cleaning it up: ours must not run uncounted.
            with contextlib.suppress(ShoalError, OSError):
                driver.deallocate(res)
            raise ShoalError(
                f"allocation {alloc_id} was reclaimed by another shoal while allocating; "
                "its resource was released, allocate again"
            )
        result = describe(ctx.ledger.get(alloc_id))
        if committed is not None:
            committed(result)
    finally:
        if committed is None:
            _restore_interrupts(previous)
    return result
