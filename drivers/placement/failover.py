"""The failover over offers: launch the first offer that has room, in the document's order
(the cheapest that fits, as `shoal offers` ranks them), each aws offer zone by zone.

Each launch is an ordinary allocation (drivers.service.allocate) through the offer's driver;
one that finds no room (a NoCapacityError: EC2's InsufficientInstanceCapacity or the
account's limit at RunInstances, no quota room before it, a cluster with no node that
fits, a pod still unscheduled past a timeout) is named (`tried aws us-east-1a p5.48xlarge
spot: InsufficientInstanceCapacity`), remembered for a few minutes (drivers.placement.
unavailable: the next alloc skips it), and the next zone, region, offer and provider is
tried; any other error (credentials 77, a definition at fault 2, ...) ends the failover at
once, as it would fail every offer alike. An offer of several instances (eight 1-GPU
instances for 8 GPUs) launches all of them or none: the ones made are freed when one finds
no room. When every offer failed, one error lists every attempt (75).

With `--wait`, a round that found no room is tried again after a backoff (doubling, with
jitter: drivers.service.alloc.retry_delays), until the timeout; a later round tries what
the memory holds too, its own backoff setting the pace.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from drivers.placement.document import Document, none_fits
from drivers.placement.targets import Base, Target, definition, targets
from providers.core.errors import ConfigError, NoCapacityError, ShoalError, UsageError

if TYPE_CHECKING:
    from drivers.placement.document import Request
    from drivers.placement.unavailable import Unavailable
    from drivers.service import Drivers
    from drivers.service.queue import Wait
    from drivers.spec.views import AllocationView


@dataclass(frozen=True)
class Attempt:
    label: str  # aws us-east-1a p5.48xlarge spot
    verb: str  # tried | skipped
    reason: str
    no_room: bool = True  # false: it could not be launched at all (no driver)

    def __str__(self) -> str:
        return f"{self.verb} {self.label}: {self.reason}"


class Short(NoCapacityError):
    """An offer of several instances found no room for one of them (the ones made are
    freed): `cause` is that one's error."""

    def __init__(self, cause: NoCapacityError, made: int, instances: int) -> None:
        super().__init__(f"{cause} (after {made} of {instances}; freed)")
        self.cause = cause
        self.made = made
        self.instances = instances


def place(
    ctx: Drivers,
    document: Document,
    base: Base,
    metadata: dict[str, Any],
    *,
    report: Callable[[Attempt], None],
    committed: Callable[[AllocationView], None] | None = None,
    wait: Wait | None = None,
    memory: Unavailable | None = None,
) -> list[AllocationView]:
    """The allocations of the first offer that had room (one per instance it needs);
    each attempt is told to `report` as it ends."""
    from drivers.service.alloc import retry_delays

    if not document.offers:
        raise none_fits(document)
    base.check()
    todo = targets(document.offers)
    _check(ctx, base, todo, document.request, metadata)
    began = time.monotonic()
    delays = retry_delays()
    rounds = 1
    attempts: list[Attempt] = []

    def note(attempt: Attempt) -> None:
        attempts.append(attempt)
        report(attempt)

    while True:
        attempts.clear()  # the error names the last round's
        full: set[tuple[object, ...]] = set()  # (provider, region, type, market, instances)
        starts: list[float] = []  # seconds until a capacity block starts
        for target in todo:
            offer = target.offer
            if target.skipped is not None:
                if rounds == 1:
                    note(Attempt(target.label(), "skipped", target.skipped, False))
                continue
            whole = (offer.provider, offer.region, offer.instance_type, offer.market,
                     offer.instances)  # fmt: skip
            if whole in full:
                continue  # the region's limit or room: no other zone of it helps
            kept = None if memory is None or rounds > 1 else memory.recall(target.key())
            if kept is not None:
                note(Attempt(target.label(), "skipped", _remembered(kept.reason, kept.since,
                                                                       kept.until)))  # fmt: skip
                continue
            short = offer.fits_now is not None and offer.fits_now < offer.instances
            if short and rounds == 1:  # as the offers were judged: a later round asks again
                bound = f" ({offer.binding})" if offer.binding else ""
                note(Attempt(target.label(), "skipped",
                             f"{offer.fits_now} of {offer.instances} fit now{bound}"))  # fmt: skip
                continue
            later = _not_started(target)
            if later is not None:
                seconds, text = later
                starts.append(seconds)
                note(Attempt(target.label(), "skipped", text))
                continue
            try:
                return _launch(ctx, base, target, document.request, metadata, committed)
            except NoCapacityError as exc:
                cause = exc.cause if isinstance(exc, Short) else exc
                reason, region_wide, launched = _why(cause)
                if isinstance(exc, Short) and exc.instances > 1:
                    reason += f" after {exc.made} of {exc.instances} (those freed)"
                note(Attempt(target.label(), "tried", reason))
                if memory is not None and launched:
                    memory.remember(target.key(region_wide), reason)
                if region_wide:
                    full.add(whole)
        said = "; ".join(map(str, attempts))
        if not any(a.no_room for a in attempts):
            raise UsageError(
                f"no offer can be launched: {said}; ask `shoal offers` for providers with a "
                "driver (-p aws,kubernetes,local)"
            )
        if wait is None:
            raise NoCapacityError(f"no offer could be launched: {said}")
        pause = min([next(delays), *starts])
        waited = time.monotonic() - began
        if wait.timeout is not None and waited + pause >= wait.timeout:
            from providers.core.timeutil import human_duration as span

            raise NoCapacityError(
                f"timed out after {span(waited)} ({rounds} round(s)) waiting for an offer "
                f"with room; the last round: {said}"
            )
        _pause(wait, began, pause, f"an offer with room (round {rounds} found none)")
        rounds += 1


def _check(
    ctx: Drivers, base: Base, todo: Sequence[Target], request: Request, metadata: dict[str, Any]
) -> None:
    """Each driver's definition checked before anything is launched: a definition at fault
    (an option a driver does not take, an image missing) fails every offer of it alike."""
    from drivers import service

    seen: set[str] = set()
    for target in todo:
        kind = target.offer.driver
        if not target.launchable or kind in seen:
            continue
        seen.add(kind)
        try:
            driver = service.prepare(ctx, definition(base, target, request))
            service.check_metadata(driver, metadata)
        except (UsageError, ConfigError) as exc:
            fix = f"; -o {kind}.KEY=VALUE gives an option to the {kind} offers only"
            exc.args = (f"the {kind} offers: {exc}{fix if isinstance(exc, UsageError) else ''}",)
            raise


def _launch(
    ctx: Drivers,
    base: Base,
    target: Target,
    request: Request,
    metadata: dict[str, Any],
    committed: Callable[[AllocationView], None] | None,
) -> list[AllocationView]:
    """Every instance the offer needs, or none (those made are freed)."""
    from drivers import service
    from drivers.placement.scheduled import WATCHED, Unscheduled, unscheduled
    from drivers.service.context import ignore_interrupts

    offer = target.offer
    # One allocation the driver's answer settles: reported as it is recorded (Ctrl-C held
    # off from then on). Several, or a pod still to be placed: reported once all are.
    direct = offer.instances == 1 and offer.driver not in WATCHED
    made: list[AllocationView] = []
    try:
        for _ in range(offer.instances):
            made.append(
                service.allocate(
                    ctx,
                    definition(base, target, request),
                    dict(metadata),
                    committed=committed if direct else None,
                )
            )
            why = unscheduled(ctx, made[-1])
            if why is not None:
                raise Unscheduled(why)
    except NoCapacityError as exc:
        if not made:
            raise
        _undo(ctx, made, target)
        if isinstance(exc, Unscheduled):
            made.pop()  # the unscheduled one: not launched
        raise Short(exc, len(made), offer.instances) from None
    except BaseException:
        _undo(ctx, made, target)
        raise
    if not direct and committed is not None:
        ignore_interrupts()  # as one allocation's report: never 130 after printing some
        for view in made:
            committed(view)
    return made


def _undo(ctx: Drivers, made: list[AllocationView], target: Target) -> None:
    from drivers import service
    from drivers.service.context import no_interrupts

    with no_interrupts():
        for view in made:
            try:
                service.free(ctx, view.id, note=f"freed: {target.label()} had no room for all")
            except ShoalError as exc:
                ctx.settings.warn(
                    f"{view.id} could not be freed after the failover ({exc}); free it with "
                    f"`shoal free {view.id}`"
                )


def _why(exc: NoCapacityError) -> tuple[str, bool, bool]:
    """(what an attempt is named with, whether no zone of the region has room, whether the
    launch itself found none). A launch's: EC2's code and its scope where the driver says
    them (drivers/aws/launch.py LaunchCapacityError), a pod unscheduled; these are
    remembered. Else the refusal before any launch (the quota's room counted, the cluster's
    or the host's), which the next alloc counts again anyway."""
    from drivers.placement.scheduled import Unscheduled

    code = str(getattr(exc, "code", "") or "")
    if code:
        return code, getattr(exc, "scope", "zone") == "region", True
    text = " ".join(str(exc).split())
    if text.startswith("no capacity for "):
        text = text.partition(": ")[2] or text
    return text.split("; ")[0][:200], True, isinstance(exc, Unscheduled)


def _remembered(reason: str, since: float, until: float) -> str:
    from providers.core.timeutil import human_duration as span

    now = time.time()
    return f"{reason} {span(now - since)} ago (remembered for {span(until - now)} more)"


def _not_started(target: Target) -> tuple[float, str] | None:
    """A Capacity Block is launched into from its start: (seconds until then, why skipped)."""
    from providers.core.timeutil import utcnow
    from providers.core.wire import format_time

    reserved = target.offer.reservation
    if reserved is None or reserved.kind != "capacity-block" or reserved.start is None:
        return None
    left = (reserved.start - utcnow()).total_seconds()
    if left <= 0:
        return None
    return left, f"capacity block {reserved.id} starts at {format_time(_utc(reserved.start))}"


def _utc(stamp: datetime) -> datetime:
    from datetime import UTC

    return stamp.astimezone(UTC)


def _pause(wait: Wait, began: float, seconds: float, what: str) -> None:
    """Sleep `seconds` (Ctrl-C ends it), telling the wait's progress line."""
    from drivers.service.queue import WaitState

    told = False
    resume = time.monotonic() + seconds
    while (now := time.monotonic()) < resume:
        if wait.progress is not None and (wait.redraw or not told):
            told = True
            remaining = None if wait.timeout is None else wait.timeout - (now - began)
            wait.progress(WaitState(what, 0, now - began, remaining))
        with contextlib.suppress(InterruptedError):
            time.sleep(min(1.0, resume - now))
