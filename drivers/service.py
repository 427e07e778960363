"""Allocation use cases: alloc, status, free, task, over the ledger and the driver list.

Every use case first cleans up after shoal processes that died mid-operation, so a
`kill -9` never leaves phantom usage past the next command.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from drivers import ledger as L
from drivers.ledger import Allocation, Ledger
from drivers.views import ERROR, AllocationView, DryRun, FreeResult, StatusView, Summary
from providers.core.errors import (
    LedgerWriteError,
    NotFoundError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.timeutil import utcnow
from providers.core.wire import from_wire, to_wire

if TYPE_CHECKING:
    # Driver code, types and the registry are imported where used: `status` listing a
    # large ledger should not pay for them (cold start).
    from datetime import datetime

    from drivers.base import ResourceDriver
    from drivers.scheduling import Wait
    from drivers.types import LabelDefinition, Resource, Resources
    from providers.core.settings import Settings

ALLOCATION_ID_KEY = "SHOAL_ALLOCATION_ID"


@dataclass
class Drivers:
    settings: Settings
    ledger: Ledger
    warnings: list[str] = field(default_factory=list)
    _open: dict[str, ResourceDriver] = field(default_factory=dict)

    def driver(self, name: str) -> ResourceDriver:
        if name not in self._open:
            from drivers.registry import open_driver

            self._open[name] = open_driver(self.settings, name)
        return self._open[name]

    @classmethod
    def from_settings(cls, settings: Settings) -> Drivers:
        from drivers.paths import ledger_file

        return cls(settings=settings, ledger=Ledger(ledger_file(settings.paths)))


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Hold off Ctrl-C while undoing a half-done operation, so the undo itself completes."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _ignore_interrupts() -> Any:
    """Ignore Ctrl-C from here; returns what _restore_interrupts needs."""
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not ours to change
        return None


def _restore_interrupts(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


def _resource(row: Allocation) -> Resource:
    from drivers.types import Resource

    if row.state:
        return from_wire(Resource, row.state, strict=False)
    return Resource(identifier=row.id)


def recover(ctx: Drivers) -> None:
    """Undo allocations whose shoal process died before finishing them."""
    for row in ctx.ledger.sweep():
        try:
            ctx.driver(row.driver).deallocate(_resource(row))
        except ShoalError as exc:
            ctx.warnings.append(f"allocation {row.id} was interrupted and cleanup failed: {exc}")
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


def _capacity(driver: ResourceDriver, usage: Resources, definition: LabelDefinition) -> int:
    """`usage` is the node's (local drivers) or, for a remote driver, its own holdings."""
    count = driver.available_capacity(usage, definition)
    if count < 0:
        raise RetryableError(f"driver {driver.name()} could not tell its capacity; try again")
    return count


def prepare(ctx: Drivers, definition: LabelDefinition) -> ResourceDriver:
    driver = ctx.driver(definition.driver)
    definition.driver = driver.name()
    driver.validate_definition(definition)
    return driver


def dry_run(ctx: Drivers, definition: LabelDefinition, at: datetime | None = None) -> DryRun:
    """How many such definitions fit over the window they would hold, now (or from `at`,
    as a reservation would), beside the allocations and the reservations overlapping it."""
    from drivers.base import UNLIMITED
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


def describe(row: Allocation) -> AllocationView:
    return AllocationView(
        id=row.id,
        driver=row.driver,
        status=row.status,
        cpu=row.cpu,
        ram=row.ram,
        created=row.created,
        expires=row.expires,
        updated=row.updated,
        note=row.note,
        resource=_public_state(row.state),
        definition=_public_definition(row.definition),
        metadata=row.metadata,
        starts=row.starts,
        claim_by=row.claim_by,
    )


def _public_state(state: dict[str, Any] | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {k: v for k, v in state.items() if k != "authentication"}


def _public_definition(definition: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in definition.items() if k != "authentication"}


def status(ctx: Drivers, alloc_id: str) -> StatusView:
    from drivers.types import STATUS_ALLOCATED, STATUS_NONE

    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    view = describe(row)
    if row.status not in (L.ALLOCATED, L.GONE, L.EXPIRED):
        return StatusView(view, detail=_recorded_outcome(row))
    driver = ctx.driver(row.driver)
    try:
        seen = driver.status(_resource(row))
    except ShoalError as exc:
        return StatusView(view, "ERROR", f"driver could not report status: {exc}")
    detail = _detail(driver, row)
    if row.status == L.EXPIRED:
        drift = None
        if seen == STATUS_ALLOCATED:
            drift = f"ledger says EXPIRED but the driver reports it; `shoal free {row.id}` ends it"
        return StatusView(view, seen, drift, detail)
    if row.status == L.ALLOCATED and seen == STATUS_NONE:
        try:
            ctx.ledger.set_status(row.id, L.GONE, note="driver reports NONE", expect=(L.ALLOCATED,))
        except LedgerWriteError as exc:
            drift = f"ledger says ALLOCATED but the driver reports NONE; not recorded: {exc}"
            return StatusView(view, seen, drift, detail)
        drift = "ledger said ALLOCATED but the driver reports NONE; marked GONE"
        return StatusView(replace(view, status=L.GONE), seen, drift, detail)
    if row.status == L.GONE and seen == STATUS_ALLOCATED:
        from drivers.types import LabelDefinition

        definition = from_wire(LabelDefinition, row.definition, strict=False)
        # Back only if it fits: others may have taken its place while it was gone.
        if ctx.ledger.readmit(row.id, lambda usage: _capacity(driver, usage, definition)):
            drift = "ledger said GONE but the driver reports it again; marked ALLOCATED"
            return StatusView(replace(view, status=L.ALLOCATED), seen, drift, detail)
        drift = (
            "ledger said GONE and the driver reports it again, but there is no capacity "
            f"for it now; it stays GONE: `shoal free {row.id}` releases it"
        )
        return StatusView(view, seen, drift, detail)
    return StatusView(view, seen, None, detail)


def _recorded_outcome(row: Allocation) -> dict[str, Any] | None:
    """How a freed workload ended, as `free` recorded it (drivers that keep an outcome)."""
    meta = (row.state or {}).get("metadata")
    outcome = meta.get("outcome") if isinstance(meta, dict) else None
    return outcome if isinstance(outcome, dict) else None


def _detail(driver: ResourceDriver, row: Allocation) -> dict[str, Any] | None:
    """What the workload is doing, from drivers that can tell (kubernetes: phase, reason)."""
    from drivers.base import DescribesWorkload

    if not isinstance(driver, DescribesWorkload):
        return None
    try:
        return driver.describe(_resource(row))
    except ShoalError as exc:
        return {"error": str(exc)}


def remote_allocations(ctx: Drivers, driver_name: str) -> list[dict[str, Any]]:
    """What a driver's shared backend holds for shoal, whichever machine made it (an
    optional driver method beyond the spec: kubernetes pods and jobs, engine containers)."""
    driver = ctx.driver(driver_name)
    from drivers.base import ListsRemote

    if not isinstance(driver, ListsRemote):
        raise UsageError(
            f"driver {driver.name()} keeps no shared state to list; `shoal status` lists "
            "this machine's allocations"
        )
    return list(driver.remote_allocations())


def free_remote(ctx: Drivers, driver_name: str, alloc_id: str) -> FreeResult:
    """Free an allocation a shared backend holds, whichever machine made it: through this
    ledger when it is ours, else straight in the backend (a crashed CI runner's pods)."""
    from drivers.types import Resource

    try:
        ctx.ledger.get(alloc_id)
    except NotFoundError:
        pass
    else:
        return free(ctx, alloc_id)  # ours: no need to list the backend
    driver = ctx.driver(driver_name)
    if alloc_id not in {row["id"] for row in remote_allocations(ctx, driver_name)}:
        raise NotFoundError(
            f"{driver.name()} holds no shoal allocation {alloc_id!r}; "
            f"`shoal status --remote {driver_name}` lists them"
        )
    driver.deallocate(Resource(identifier=alloc_id))
    return FreeResult(
        alloc_id,
        L.FREED,
        True,
        f"{alloc_id}: freed in {driver.name()} (made on another machine; not in this "
        "machine's ledger)",
    )


SORT_KEYS = ("id", "driver", "status", "cpu", "ram", "created", "expires", "updated")


@dataclass(frozen=True)
class Listing:
    """Which allocations `status` lists, and in what order."""

    driver: str | None = None  # a driver (`test`) or an instance (`test/dev`)
    statuses: tuple[str, ...] = ()  # upper case; any status when empty
    sort: str | None = None  # a SORT_KEYS key, '-' first for descending

    @classmethod
    def parse(cls, driver: str | None, statuses: list[str] | None, sort: str | None) -> Listing:
        wanted = tuple(
            dict.fromkeys(s.strip().upper() for v in statuses or [] for s in v.split(",") if s)
        )
        unknown = [s for s in wanted if s not in L.ALL_STATUSES]
        if unknown:
            raise UsageError(
                f"--status {unknown[0]}: not a status; use {', '.join(L.ALL_STATUSES)}"
            )
        if sort is not None and sort.lstrip("-") not in SORT_KEYS:
            raise UsageError(f"--sort {sort!r}: use one of {', '.join(SORT_KEYS)}")
        return cls(driver or None, wanted, sort)

    def is_plain(self) -> bool:
        return self.driver is None and not self.statuses and self.sort is None

    def apply(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.driver:
            exact = "/" in self.driver
            rows = [
                r
                for r in rows
                if (
                    r["driver"] == self.driver
                    if exact
                    else r["driver"].split("/")[0] == self.driver
                )
            ]
        if self.statuses:
            rows = [r for r in rows if r["status"] in self.statuses]
        if self.sort:
            key = self.sort.lstrip("-")
            present = [r for r in rows if r.get(key) is not None]
            absent = [r for r in rows if r.get(key) is None]
            present.sort(key=lambda r: r[key], reverse=self.sort.startswith("-"))
            rows = present + absent  # unknowns last either way
        return rows


def list_allocations(
    ctx: Drivers, *, include_ended: bool, listing: Listing | None = None
) -> list[Summary]:
    recover(ctx)
    listing = listing or Listing()
    # Naming a status asks for it whether or not it has ended.
    rows = ctx.ledger.summaries(include_ended=include_ended or bool(listing.statuses))
    return [Summary.from_json(r) for r in listing.apply(rows)]


def list_allocations_json(ctx: Drivers, *, include_ended: bool) -> list[str]:
    """Like list_allocations, each row as JSON text (fast for large ledgers)."""
    recover(ctx)
    return ctx.ledger.summaries_json(include_ended=include_ended)


def free(ctx: Drivers, alloc_id: str, *, note: str = "freed") -> FreeResult:
    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    if row.status in (L.FREED, L.FAILED):
        already = (
            "already freed" if row.status == L.FREED else "allocation had failed; nothing held"
        )
        return FreeResult(row.id, row.status, False, f"{row.id}: {already} ({row.updated})")
    if row.status in (L.RESERVED, L.LAPSED):
        return _cancel_reservation(ctx, row)
    if row.status == L.FREEING and row.owner_alive():
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
        ctx.driver(row.driver).deallocate(_resource(row))
    except BaseException:
        with _no_interrupts():
            ctx.ledger.set_status(row.id, previous, note=row.note, expect=(L.FREEING,))
        raise
    with _no_interrupts():
        ctx.ledger.set_status(row.id, L.FREED, note=note, expect=(L.FREEING,), state=state)
    return FreeResult(row.id, L.FREED, True, f"{row.id}: {note}")


def _cancel_reservation(ctx: Drivers, row: Allocation) -> FreeResult:
    """`free` of a reservation cancels it: nothing runs, its window's capacity comes back."""
    if row.status == L.LAPSED:
        lapsed = f"{row.id}: reservation had lapsed; nothing held"
        return FreeResult(row.id, L.LAPSED, False, lapsed)
    if not ctx.ledger.set_status(row.id, L.FREED, note=L.CANCELLED, expect=(L.RESERVED,)):
        return free(ctx, row.id)  # claimed or lapsed meanwhile: decide again
    return FreeResult(row.id, L.FREED, True, f"{row.id}: {L.CANCELLED}")


def _finish(ctx: Drivers, row: Allocation) -> dict[str, Any] | None:
    """For drivers that keep an outcome: the workload stopped, and the row's state with how
    it ended (`resource.metadata.outcome`), recorded before deallocate removes the rest."""
    from drivers.base import FinishesWorkload

    driver = ctx.driver(row.driver)
    if row.state is None or not isinstance(driver, FinishesWorkload):
        return None
    outcome = driver.finish(_resource(row))
    meta = row.state.get("metadata")
    return {
        **row.state,
        "metadata": {**(meta if isinstance(meta, dict) else {}), "outcome": outcome},
    }


OTHER_FREE_WAIT_SECONDS = 120.0


def _await_other_free(ctx: Drivers, row: Allocation, note: str) -> FreeResult:
    import time

    deadline = time.monotonic() + OTHER_FREE_WAIT_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = ctx.ledger.get(row.id)
        if now.status == L.FREED:
            # Not by this command, but freed as asked.
            return FreeResult(
                row.id, L.FREED, False, f"{row.id}: freed (by shoal process {row.owner_pid})"
            )
        if now.status != L.FREEING or not now.owner_alive():
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
    ctx.driver(row.driver).deallocate(_resource(row))
    try:
        ctx.ledger.set_status(row.id, L.FREED, note=note, expect=(row.status,))
    except LedgerWriteError:
        raise LedgerWriteError(
            f"{row.id}: freed in {row.driver}, but the ledger could not record it ({cause}); "
            f"once there is room, `shoal status {row.id}` records it as GONE"
        ) from None
    return FreeResult(row.id, L.FREED, True, f"{row.id}: {note}")


def free_expired(ctx: Drivers) -> list[FreeResult]:
    recover(ctx)
    results = []
    due = ctx.ledger.expired(ctx.ledger.clock()) + ctx.ledger.with_status(L.EXPIRED)
    for row in sorted(due, key=lambda r: r.expires or ""):
        try:
            results.append(free(ctx, row.id, note=f"expired at {row.expires}"))
        except ShoalError as exc:
            results.append(FreeResult(row.id, ERROR, False, str(exc)))
    return results


def run_task(ctx: Drivers, alloc_id: str, name: str, options: str) -> Any:
    from drivers.types import ApplicationTask

    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    if row.status != L.ALLOCATED:
        raise UsageError(f"{row.id} is {row.status}; tasks run only on ALLOCATED resources")
    if options:
        from providers.core.numbers import reject_constant

        try:
            json.loads(options, parse_constant=reject_constant)
        except ValueError as exc:
            raise UsageError(f"--options: invalid JSON: {exc}") from None
        except RecursionError:
            raise UsageError("--options: invalid JSON: nested too deeply") from None
    task = ctx.driver(row.driver).get_task(name, options)
    if task is None:
        raise UsageError(f"driver {row.driver} has no task {name!r}")
    now = utcnow()
    info = ApplicationTask(
        application_uid=row.id,
        task=name,
        when="ALLOCATED",
        created_at=now,
        updated_at=now,
        options=json.loads(options) if options else {},
    )
    task.set_info(info, _resource(row))
    result = task.execute()
    try:
        return json.loads(result)
    except ValueError:
        return {"result": result.decode(errors="replace")}
