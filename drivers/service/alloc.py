"""The allocate use cases: alloc (now or queued through drivers.service.queue) and its dry
run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drivers.service.bring_up import bring_up, check_metadata, prepare
from drivers.service.context import Drivers, capacity, public_definition
from drivers.service.recovery import recover
from drivers.spec.views import AllocationView, DryRun
from providers.core.errors import NoCapacityError, UsageError
from providers.core.wire import to_wire

if TYPE_CHECKING:
    # Driver code, types and the registry are imported where used: `status` listing a
    # large ledger should not pay for them (cold start).
    from datetime import datetime

    from drivers.service.queue import Wait
    from drivers.spec.types import LabelDefinition


def dry_run(ctx: Drivers, definition: LabelDefinition, at: datetime | None = None) -> DryRun:
    """How many such definitions fit over the window they would hold, now (or from `at`,
    as a reservation would), beside the allocations and the reservations overlapping it;
    with what the driver would take and why, from drivers that explain their choice."""
    from drivers.definitions.definition import expiry, life_of
    from drivers.spec.base import UNLIMITED, ExplainsChoice

    if at is not None:
        from drivers.service.queue import prepare_booking

        driver = prepare_booking(ctx, definition)  # as `alloc --at` would check it
    else:
        driver = prepare(ctx, definition)
    scope = driver.name() if driver.is_remote() else None
    if at is not None:
        from drivers.service.queue import AT_SLACK

        if scope is not None:
            raise UsageError(f"--at: {driver.name()} is remote; reservations are for local drivers")
        if at < ctx.ledger.clock() - AT_SLACK:
            raise UsageError("--at is in the past; give now or a later time")
        at = max(at, ctx.ledger.clock())
    recover(ctx)
    usage = ctx.ledger.node_usage(scope)
    fit = ctx.ledger.fit_window(
        lambda usage: capacity(driver, usage, definition),
        remote_driver=scope,
        start=at,
        end=expiry(life_of(definition), at or ctx.ledger.clock()),
    )
    count = fit.count
    return DryRun(
        driver=driver.name(),
        fits=None if count >= UNLIMITED else count,
        unlimited=count >= UNLIMITED,
        node_usage={"cpu": usage.cpu, "ram": usage.ram},
        definition=public_definition(to_wire(definition)),
        choice=driver.explain(definition) if isinstance(driver, ExplainsChoice) else None,
    )


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
    came first; with `wait`, this one queues until it fits and it is its turn.

    The lifetime is parsed here, once; its expiry is decided from one reading of the
    ledger's clock as the room is taken, written on the row and handed to the driver
    (bring_up), so the row's `expires` and the deadline the driver enforces are one instant."""
    from drivers.definitions.definition import expiry, life_of
    from drivers.service.queue import queue_fits, refuse_impossible, wait_for_room

    driver = prepare(ctx, definition)
    check_metadata(driver, metadata)
    life = life_of(definition)
    recover(ctx)
    if wait is not None:
        alloc_id, expires = wait_for_room(ctx, driver, definition, metadata, wait, life)
    else:
        expires = expiry(life, ctx.ledger.clock())
        try:
            alloc_id = ctx.ledger.reserve(
                driver=driver.name(),
                definition=to_wire(definition),
                resources=definition.resources,
                metadata=metadata,
                is_remote=driver.is_remote(),
                expires=expires,
                fits=lambda usage: capacity(driver, usage, definition),
                queue=queue_fits(driver),
            )
        except NoCapacityError:
            # "No room now" (75) only for what some freeing would make room for: a request
            # over the driver's total is a usage error (2), which no retry waits out.
            refuse_impossible(driver, definition)
            raise
    return bring_up(ctx, driver, definition, metadata, alloc_id, expires, committed)
