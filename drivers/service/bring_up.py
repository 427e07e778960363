"""Bringing an allocation up once its row is held: the driver prepared and its definition
checked, the metadata checked, then allocate in the driver and record, undone on any failure
or interrupt before the record. Shared by `alloc` and the `--wait` / `--reservation` paths
(drivers.service.queue), which hold their row their own way.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drivers.ledger import book as L
from drivers.service.context import (
    Drivers,
    describe,
    ignore_interrupts,
    no_interrupts,
    restore_interrupts,
)
from drivers.spec.types import ALLOCATION_ID_KEY
from drivers.spec.views import AllocationView
from providers.core.errors import ShoalError
from providers.core.wire import to_wire

if TYPE_CHECKING:
    from datetime import datetime

    from drivers.spec.base import ResourceDriver
    from drivers.spec.types import LabelDefinition


def prepare(ctx: Drivers, definition: LabelDefinition) -> ResourceDriver:
    driver = ctx.driver(definition.driver)
    definition.driver = driver.name()
    driver.validate_definition(definition)
    return driver


def check_metadata(driver: ResourceDriver, metadata: dict[str, Any]) -> None:
    """An optional check beyond the spec's interface, so bad metadata is refused before a
    reservation is written rather than after."""
    from drivers.spec.base import ChecksMetadata

    if isinstance(driver, ChecksMetadata):
        driver.validate_metadata(metadata)


def bring_up(
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
    claimed reservation goes back to RESERVED). `expires` is the row's: the driver gets it
    as `resources.expires` (its deadline), never working it out again from the lifetime."""
    from dataclasses import replace

    from drivers.spec.types import Resource

    def failed(note: str) -> None:
        if undo is not None:
            undo(note)
        else:
            ctx.ledger.set_status(alloc_id, L.FAILED, note=note, expect=(L.ALLOCATING,))

    try:
        decided = replace(definition, resources=replace(definition.resources, expires=expires))
        res = driver.allocate(decided, {**metadata, ALLOCATION_ID_KEY: alloc_id})
        res.timeout = expires
        previous = ignore_interrupts()  # inside the try: an interrupt before it is undone
    except BaseException as exc:
        with no_interrupts():
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
            restore_interrupts(previous)
    return result
