"""The allocate use cases: alloc (now or queued through drivers.service.queue) and its dry
run.

`alloc --wait` waits for room in the ledger's queue, then launches; a launch that finds no
room at the backend (EC2's InsufficientInstanceCapacity, the account's limit: a
NoCapacityError from the driver) is tried again after a backoff, doubling with jitter
(`retry_delays`), until the wait's timeout. Each launch is an allocation of its own: one
that found no room is FAILED (`status --all` shows it), the next takes a new id (and a new
ClientToken at EC2).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from drivers.service.bring_up import bring_up, check_metadata, prepare
from drivers.service.context import Drivers, capacity, public_definition
from drivers.service.recovery import recover
from drivers.spec.base import counted_by_team
from drivers.spec.views import AllocationView, DryRun
from providers.core.errors import NoCapacityError, UsageError
from providers.core.wire import to_wire

if TYPE_CHECKING:
    # Driver code, types and the registry are imported where used: `status` listing a
    # large ledger should not pay for them (cold start).
    from datetime import datetime, timedelta

    from drivers.service.queue import Wait
    from drivers.spec.base import ResourceDriver
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
    scope = driver.name() if counted_by_team(driver) else None
    if at is not None:
        from drivers.service.queue import AT_SLACK

        if driver.is_remote():
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
    came first; with `wait`, this one queues until it fits and it is its turn, and a launch
    that finds no room at the backend is tried again until the wait's timeout.

    The lifetime is parsed here, once; its expiry is decided from one reading of the
    ledger's clock as the room is taken, written on the row and handed to the driver
    (bring_up), so the row's `expires` and the deadline the driver enforces are one instant."""
    from drivers.definitions.definition import expiry, life_of
    from drivers.service.queue import queue_fits, refuse_impossible

    driver = prepare(ctx, definition)
    check_metadata(driver, metadata)
    life = life_of(definition)
    recover(ctx)
    if wait is not None:
        return _launch_waiting(ctx, driver, definition, metadata, committed, wait, life)
    expires = expiry(life, ctx.ledger.clock())
    try:
        alloc_id = ctx.ledger.reserve(
            driver=driver.name(),
            definition=to_wire(definition),
            resources=definition.resources,
            metadata=metadata,
            is_remote=counted_by_team(driver),
            windowed=not driver.is_remote(),
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


# The backoff between launches `--wait` tries again: the first delay and the longest, in
# seconds (doubling between, each with +-20% jitter so that waiters who failed together do
# not ask again together).
RETRY_SECONDS = (5.0, 60.0)


def retry_delays() -> Iterator[float]:
    first, longest = RETRY_SECONDS
    delay = first
    while True:
        yield delay * random.uniform(0.8, 1.2)
        delay = min(delay * 2, longest)


def _launch_waiting(
    ctx: Drivers,
    driver: ResourceDriver,
    definition: LabelDefinition,
    metadata: dict[str, Any],
    committed: Callable[[AllocationView], None] | None,
    wait: Wait,
    life: timedelta | None,
) -> AllocationView:
    """Wait for room, launch; a launch that found no room at the backend is tried again
    after a backoff, until the timeout (a NoCapacityError naming the last launch's)."""
    from dataclasses import replace

    from drivers.service.queue import WaitState, wait_for_room
    from providers.core.timeutil import human_duration as span

    began = time.monotonic()
    delays = retry_delays()
    while True:
        left = None if wait.timeout is None else wait.timeout - (time.monotonic() - began)
        alloc_id, expires = wait_for_room(
            ctx, driver, definition, metadata, replace(wait, timeout=left), life
        )
        try:
            return bring_up(ctx, driver, definition, metadata, alloc_id, expires, committed)
        except NoCapacityError as exc:
            last = exc
        pause = next(delays)
        waited = time.monotonic() - began
        if wait.timeout is not None and waited + pause >= wait.timeout:
            raise NoCapacityError(
                f"timed out after {span(waited)} waiting for capacity on {driver.name()}; the "
                f"last launch found none: {last}"
            ) from None
        told = False
        resume = time.monotonic() + pause
        while (now := time.monotonic()) < resume:
            if wait.progress is not None and (wait.redraw or not told):
                told = True
                wait.progress(
                    WaitState(
                        what=f"capacity on {driver.name()} (the launch found none; trying "
                        f"again in {span(resume - now)})",
                        ahead=0,
                        waited=now - began,
                        remaining=None if wait.timeout is None else wait.timeout - (now - began),
                    )
                )
            time.sleep(min(1.0, resume - now))
