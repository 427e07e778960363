"""Allocations in time: waiting for room (`alloc --wait`), booking ahead (`alloc --at`) and
claiming a booking (`alloc --reservation`).

Waiting. A waiter takes a place in the ledger's queue (arrival order) and sleeps on its
doorbell (drivers.ledger.doorbell): no CPU until a shoal that freed capacity rings it, or its slow
tick passes. The first waiter of a driver works out which waiters fit now, first come first
served (drivers.ledger.timeline.serve_in_order), and rings them; each takes its room in one
transaction that checks the same rule, so a later waiter never overtakes an earlier one that
fits the same room. Between rings a waiter only asks SQLite whether anything changed
(`PRAGMA data_version`), once a second; every few seconds, and when an expiry or a
reservation's deadline passes, the first waiter looks again whatever changed. A waiter that
dies keeps no place: its pid tells (checked when a ring fails, and by every sweep). The
first waiter also cleans up after shoals that died (recover, every few seconds and when it
becomes first): a row a dead shoal left ALLOCATING holds room nobody uses, and no other
command may come to free it. A live waiter whose pipe or place went missing makes a new
pipe and takes its place back; where no named pipe can be made, it polls.

Reservations. A RESERVED row holds [start, start + lifetime) in every capacity check. At or
after its start, `alloc --reservation ID` turns the same row into the allocation (no
capacity check: the room is booked) until `claim_by` (start + the grace period,
`[alloc] reservation_grace_minutes`); after that it LAPSES and holds nothing. What held the
room before the window must have ended first: an allocation past its lifetime that is still
being stopped (its SIGTERM grace) is waited for. A claim interrupted in any way (Ctrl-C,
SIGTERM, SIGHUP, or SIGKILL and the next command's cleanup) leaves the booking RESERVED.
"""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import FrameType
from typing import TYPE_CHECKING, Any

from drivers.spec.base import counted_by_team, team_pool
from providers.core.errors import NoCapacityError, RetryableError, ShoalError, UsageError

if TYPE_CHECKING:
    from drivers.ledger.book import Allocation, WaiterFits
    from drivers.ledger.doorbell import Bell
    from drivers.ledger.timeline import Waiter
    from drivers.service.context import Drivers
    from drivers.spec.base import ResourceDriver
    from drivers.spec.types import LabelDefinition, Resources
    from drivers.spec.views import AllocationView
    from providers.core.settings import Settings

# The first waiter of a driver asks SQLite whether anything changed this often (seconds);
# a ring wakes any waiter at once. Every wake-up costs (~0.2 ms of CPU here), so the others
# only check, at a slower tick, whether they have become the first (a terminal's line is
# redrawn every second all the same).
TICK_SECONDS = 1.0
FOLLOWER_TICK_SECONDS = 5.0
# The first waiter looks again after this many quiet ticks, changed or not (a ring lost to a
# shoal killed between its commit and its ring; a remote backend's capacity).
RECHECK_TICKS = 5
# The first waiter cleans up after dead shoals (recover) at most this often (seconds), and at
# once when it becomes first or an expiry passes: a shoal killed mid-alloc, or a waiter
# killed right after taking its turn, leaves a row that holds room until someone does.
TIDY_SECONDS = 5.0
DEFAULT_GRACE = timedelta(minutes=15)
# Signals that end a claim the way Ctrl-C does (its undo runs), instead of killing it mid-way.
_HANGUPS = (signal.SIGTERM, signal.SIGHUP)
# How far in the past `--at` may be and still mean "now" (it was parsed before the ledger
# was opened).
AT_SLACK = timedelta(seconds=5)


@dataclass(frozen=True)
class WaitState:
    """What a waiter waits for, shown on a terminal: its request, its place, how long."""

    what: str  # `cpu=1 ram=1GiB on test/default`, `reservation test-1a2b3c4d to start`
    ahead: int  # waiters of the same driver that came before it
    waited: float  # seconds
    remaining: float | None  # seconds until --timeout; None: waits forever


@dataclass(frozen=True)
class Wait:
    """`--wait [--timeout]`: seconds to wait (None: forever), and a progress callback: told
    once when the wait begins, and at every tick when `redraw` (a terminal)."""

    timeout: float | None = None
    progress: Callable[[WaitState], None] | None = None
    redraw: bool = False


def queue_fits(driver: ResourceDriver) -> WaiterFits:
    """The capacity check for another waiter of this driver (its own definition)."""
    from drivers.spec.types import LabelDefinition
    from providers.core.wire import from_wire

    parsed: dict[int, LabelDefinition] = {}

    def fits(waiter: Waiter, usage: Resources) -> int:
        if waiter.id not in parsed:
            parsed[waiter.id] = from_wire(LabelDefinition, waiter.definition, strict=False)
        try:
            return max(0, driver.available_capacity(usage, parsed[waiter.id]))
        except ShoalError:
            return 0  # its own check failing is its business: it is not counted as fitting

    return fits


def refuse_impossible(driver: ResourceDriver, definition: LabelDefinition, doing: str = "") -> None:
    """A local request no capacity of its driver could ever hold is a usage error (2), not a
    "no capacity now" (75) that a retry loop would retry forever, nor a wait (`doing`:
    `--wait`) or a booking (`--at`) that could never be served."""
    from drivers.spec.base import HasTotals
    from drivers.spec.capacity import never_fits
    from drivers.spec.types import Resources

    if driver.is_remote():
        return  # a backend's capacity with nothing of ours in it is not what it could hold
    said = f"{doing}: " if doing else ""
    if isinstance(driver, HasTotals):
        refusal = never_fits(driver.name(), driver.totals(), definition.resources)
        if refusal is not None:
            raise UsageError(said + refusal)
        return
    # A driver that does not say its totals: nothing fits even with nothing allocated.
    # (-1, it could not tell, is no such answer.)
    if driver.available_capacity(Resources(), definition) == 0:
        res = definition.resources
        raise UsageError(
            f"{said}{driver.name()}: cpu={res.cpu} ram={res.ram}GiB can never fit: it does "
            "not fit even with nothing allocated; ask for less"
        )


def prepare_booking(ctx: Drivers, definition: LabelDefinition) -> ResourceDriver:
    """The driver, its definition checked for a booking: what only the claim needs (the
    command to run) is not demanded yet, where the driver can tell (BooksAhead)."""
    from drivers.spec.base import BooksAhead

    driver = ctx.driver(definition.driver)
    definition.driver = driver.name()
    if isinstance(driver, BooksAhead):
        driver.validate_booking(definition)
    else:
        driver.validate_definition(definition)
    return driver


# -- waiting ---------------------------------------------------------------------------------


def wait_for_room(
    ctx: Drivers,
    driver: ResourceDriver,
    definition: LabelDefinition,
    metadata: dict[str, Any],
    wait: Wait,
    life: timedelta | None,
) -> tuple[str, datetime | None]:
    """Queue, sleep until this request fits and it is its turn, take the room; returns the
    ALLOCATING row's id and its expiry (`life` from the ledger's clock as the room is
    taken). Timeout: NoCapacityError (75). Ctrl-C leaves the queue and holds nothing."""
    from drivers.definitions.definition import expiry as ending
    from drivers.service.context import capacity
    from providers.core.wire import to_wire

    refuse_impossible(driver, definition, "--wait")
    ledger = ctx.ledger
    name = driver.name()
    queue = queue_fits(driver)
    expiry: list[datetime | None] = [None]

    def attempt(waiter: int | None) -> str:
        expiry[0] = ending(life, ledger.clock())
        return ledger.reserve(
            driver=name,
            definition=to_wire(definition),
            resources=definition.resources,
            metadata=metadata,
            is_remote=counted_by_team(driver),
            windowed=not driver.is_remote(),
            expires=expiry[0],
            fits=lambda usage: capacity(driver, usage, definition),
            queue=queue,
            waiter=waiter,
        )

    def queue_up(token: str, place: int | None = None) -> int:
        return ledger.enqueue(
            driver=name,
            definition=to_wire(definition),
            resources=definition.resources,
            life=life,
            is_remote=counted_by_team(driver),
            token=token,
            place=place,
        )

    with contextlib.suppress(NoCapacityError):
        return attempt(None), expiry[0]  # room now, and nobody queued before us
    began = time.monotonic()
    deadline = None if wait.timeout is None else began + wait.timeout
    bell = _bell(ctx)
    place: int | None = None
    try:
        place = queue_up(bell.token)
        version = ledger.data_version()
        quiet = 0
        due = _next_change(ctx)
        look = True  # at once: room may have come between the first try and queueing
        told = False
        leading = ledger.leads(place, name)
        tidied: float | None = time.monotonic()  # allocate() has just recovered
        while True:
            if look:
                if leading and (tidied is None or time.monotonic() - tidied >= TIDY_SECONDS):
                    tidied = time.monotonic()
                    _tidy(ctx)
                got = _take_turn(ctx, driver, place, queue, attempt)
                if got is not None:
                    place = None  # the row left the queue in the same transaction
                    return got, expiry[0]
                due = _next_change(ctx)
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                raise _timed_out(ctx, driver, definition, life, place, now - began)
            if wait.progress is not None and (wait.redraw or not told):
                told = True
                wait.progress(
                    WaitState(
                        what=f"cpu={definition.resources.cpu} ram={definition.resources.ram}GiB "
                        f"on {name}",
                        ahead=ledger.ahead(place, name),
                        waited=now - began,
                        remaining=None if deadline is None else deadline - now,
                    )
                )
            polling = not bell.rings
            tick = TICK_SECONDS if leading or wait.redraw or polling else FOLLOWER_TICK_SECONDS
            if bell.wait(tick if deadline is None else min(tick, deadline - now)):
                look, quiet = True, 0
                continue
            look = False
            if not leading:
                # Only the first waiter looks (it rings the others that fit); the rest sleep
                # until rung, checking now and then whether the first died or left, and
                # whether their own place and pipe are still there. One that cannot be rung
                # looks whenever the ledger changed.
                bell, place = _keep_place(ctx, bell, place, queue_up)
                look = leading = ledger.leads(place, name)
                if leading:
                    tidied = None  # the first died or left: what it held may be a dead shoal's
                latest = ledger.data_version()
                look = look or (polling and latest != version)
                version, quiet = latest, 0
                continue
            quiet += 1
            latest = ledger.data_version()
            passed = due is not None and ledger.clock() >= due
            if latest != version or passed or quiet >= RECHECK_TICKS:
                version, quiet = latest, 0
                bell, place = _keep_place(ctx, bell, place, queue_up)
                look = leading = ledger.leads(place, name)
                if passed:
                    due = _next_change(ctx)
                    tidied = None  # an expiry passed: record it, so its room counts
    finally:
        from drivers.service.context import no_interrupts

        with no_interrupts():
            if place is not None:
                with contextlib.suppress(ShoalError):
                    ledger.leave(place)
            bell.close()


def _bell(ctx: Drivers) -> Bell:
    """This waiter's doorbell (a named pipe beside a SQLite ledger, LISTEN on a team's);
    where named pipes cannot be made at all, a polling waiter."""
    try:
        bell: Bell = ctx.ledger.open_bell()
    except OSError as exc:
        raise ShoalError(
            f"--wait: cannot make a named pipe beside {ctx.ledger.label} ({exc.strerror}); "
            "check that the state dir is writable"
        ) from None
    return bell


def _keep_place(
    ctx: Drivers, bell: Bell, place: int, queue_up: Callable[[str, int | None], int]
) -> tuple[Bell, int]:
    """A waiter whose pipe was deleted or replaced makes a new one; one whose place was
    dropped (it looked dead to another shoal: another pid namespace) takes it back, in the
    same arrival order. Else it would wait, unrung and unserved, forever."""
    if bell.intact():
        if ctx.ledger.queued(place):
            return bell, place
        return bell, queue_up(bell.token, place)
    from drivers.ledger import doorbell

    fresh: Bell
    try:
        fresh = ctx.ledger.open_bell()
    except (OSError, ShoalError):
        fresh = doorbell.Polling()  # it can still look for itself
    bell.close()
    return fresh, queue_up(fresh.token, place)


def _tidy(ctx: Drivers) -> None:
    """What the first waiter does now and then, as any shoal command would: clean up after
    shoals that died mid-way (their rows hold room nobody uses) and record expiries. A
    warning it repeats is said once."""
    from drivers.service.recovery import recover

    said = list(ctx.warnings)
    with contextlib.suppress(ShoalError):
        recover(ctx)
    fresh = [w for w in ctx.warnings[len(said) :] if w not in said]
    ctx.warnings[len(said) :] = list(dict.fromkeys(fresh))


def _take_turn(
    ctx: Drivers,
    driver: ResourceDriver,
    place: int,
    queue: WaiterFits,
    attempt: Callable[[int | None], str],
) -> str | None:
    """Take the room if this waiter is served now; ring the others that are."""
    ledger = ctx.ledger
    name = driver.name()
    if driver.is_remote():
        # Strictly in arrival order: only the first asks the backend. A backend that cannot
        # tell now (75) is asked again later: the wait goes on.
        if not ledger.leads(place, name):
            return None
        with contextlib.suppress(RetryableError):
            return attempt(place)
        return None
    served = ledger.served_now(name, queue, team_pool(driver))
    for other in served:
        if other.id != place:
            ledger.ring(other.token)
    if not any(w.id == place for w in served):
        return None
    with contextlib.suppress(RetryableError):  # taken meanwhile, or the ledger was busy
        return attempt(place)
    return None


def _next_change(ctx: Drivers) -> datetime | None:
    """When capacity next comes back without anyone writing: an expiry, a reservation's
    end or its claim deadline."""
    return ctx.ledger.next_release()


def _timed_out(
    ctx: Drivers,
    driver: ResourceDriver,
    definition: LabelDefinition,
    life: timedelta | None,
    place: int | None,
    waited: float,
) -> RetryableError:
    from drivers.service.context import capacity
    from providers.core.timeutil import human_duration as span

    res = definition.resources
    ahead = ctx.ledger.ahead(place, driver.name()) if place is not None else 0
    text = (
        f"timed out after {span(waited)} waiting for "
        f"cpu={res.cpu} ram={res.ram}GiB on {driver.name()}"
    )
    if ahead:
        text += f" ({ahead} earlier waiter(s) still queued)"
    if not driver.is_remote():
        back = ctx.ledger.expected_back(
            lambda usage: capacity(driver, usage, definition), life, team_pool(driver)
        )
        if back is not None:
            at, what = back
            from providers.core.wire import format_time

            text += f"; capacity is expected back at {format_time(at)} (when {what})"
    return NoCapacityError(text)


# -- reservations ----------------------------------------------------------------------------


def grace(settings: Settings) -> timedelta:
    """`[alloc] reservation_grace_minutes` (default 15): how long a reservation waits to be
    claimed after its start before it lapses."""
    if "alloc" not in settings.config:
        return DEFAULT_GRACE
    from drivers.definitions.alloc_config import AllocSection
    from providers.core.settings import config_model

    section = config_model(settings, AllocSection, "alloc")
    return timedelta(minutes=section.reservation_grace_minutes)


def book(
    ctx: Drivers, definition: LabelDefinition, metadata: dict[str, Any], at: datetime
) -> AllocationView:
    """Book capacity for [at, at + lifetime) without starting anything: a RESERVED row. What
    only a running workload needs (process: its entry; container: its image) may be left to
    the claim (`alloc --reservation ID -o entry=...`), where the definition is checked whole."""
    from drivers.definitions.definition import life_of
    from drivers.service.bring_up import check_metadata
    from drivers.service.context import capacity, describe
    from drivers.service.recovery import recover
    from providers.core.wire import format_time, to_wire

    driver = prepare_booking(ctx, definition)
    check_metadata(driver, metadata)
    if driver.is_remote():
        raise UsageError(
            f"--at: {driver.name()} is remote (its backend decides what fits, and holds "
            "nothing for a booking); reservations are for local drivers"
        )
    life = life_of(definition)
    if life is None:
        raise UsageError("--at books a window [TIME, TIME+lifetime): give --lifetime too")
    now = ctx.ledger.clock()
    if at < now - AT_SLACK:
        raise UsageError(f"--at {format_time(at)} is in the past; give now or a later time")
    start = max(at, now)
    try:
        end = start + life
        claim_by = start + grace(ctx.settings)
    except OverflowError:
        raise UsageError("--at/--lifetime: the window ends after the year 9999") from None
    refuse_impossible(driver, definition, "--at")
    recover(ctx)
    alloc_id = ctx.ledger.reserve(
        driver=driver.name(),
        definition=to_wire(definition),
        resources=definition.resources,
        metadata=metadata,
        is_remote=counted_by_team(driver),
        windowed=True,
        expires=end,
        fits=lambda usage: capacity(driver, usage, definition),
        starts=start,
        claim_by=min(claim_by, end),
    )
    return describe(ctx.ledger.get(alloc_id))


def reserved_definition(ctx: Drivers, alloc_id: str) -> dict[str, Any]:
    """What a reservation was booked with: the base a claim's definition and flags add to.
    A claim whose shoal died (kill -9) is undone first: the booking is RESERVED again."""
    from drivers.service.recovery import recover

    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    if row.status != "RESERVED":
        raise ctx.ledger.unclaimable(row)
    _claimable_here(ctx, row)
    return dict(row.definition)


def _claimable_here(ctx: Drivers, row: Allocation) -> None:
    """A booking of a machine-scoped driver holds its own machine's room: only there."""
    from drivers.service.listing import elsewhere

    if elsewhere(ctx, row):
        raise UsageError(
            f"reservation {row.id} holds room on {row.host} ({row.driver} counts that "
            f"machine's capacity): claim it there, or book here with `shoal alloc --at`"
        )


_SAME = ("cpu", "ram", "multitenancy", "cpu_overbook", "ram_overbook")


def claim(
    ctx: Drivers,
    alloc_id: str,
    definition: LabelDefinition,
    metadata: dict[str, Any],
    committed: Callable[[AllocationView], None] | None = None,
    wait: Wait | None = None,
) -> AllocationView:
    """Turn a reservation into a running allocation with the capacity it booked; the
    allocation ends where the reservation's window does. A failed or interrupted claim
    (Ctrl-C, SIGTERM, SIGHUP; SIGKILL once the next command has cleaned up) leaves it
    RESERVED (to claim again until it lapses). The room is taken once what held it before
    the window has ended: an allocation past its lifetime still being stopped is waited for
    (`wait`) or refused (75)."""
    with _hangups_interrupt():
        return _claim(ctx, alloc_id, definition, metadata, committed, wait)


def _claim(
    ctx: Drivers,
    alloc_id: str,
    definition: LabelDefinition,
    metadata: dict[str, Any],
    committed: Callable[[AllocationView], None] | None,
    wait: Wait | None,
) -> AllocationView:
    from drivers.ledger import book as L
    from drivers.ledger.rows import unstamp
    from drivers.service.bring_up import bring_up, check_metadata, prepare
    from drivers.service.context import capacity
    from drivers.service.recovery import recover
    from providers.core.wire import to_wire

    recover(ctx)  # a claim whose shoal died is undone first
    row = ctx.ledger.get(alloc_id)
    if row.status != L.RESERVED:
        raise ctx.ledger.unclaimable(row)
    _claimable_here(ctx, row)
    booked = row.definition.get("resources", {})
    booked_driver = row.driver
    if definition.driver and definition.driver.split("/")[0] != booked_driver.split("/")[0]:
        raise UsageError(
            f"--reservation {alloc_id} is {booked_driver}'s, not {definition.driver}'s; drop "
            "--driver or give that one"
        )
    driver = prepare(ctx, definition)
    if driver.name() != booked_driver:
        raise UsageError(
            f"--reservation {alloc_id} is {booked_driver}'s, not {driver.name()}'s; drop "
            "--driver or give that one"
        )
    asked = to_wire(definition.resources)
    for key in _SAME:
        if asked.get(key) != booked.get(key):
            raise UsageError(
                f"--reservation {alloc_id} booked {key}={booked.get(key)}; the claim asks "
                f"{key}={asked.get(key)} (a claim runs with what was booked: drop the flag)"
            )
    if definition.resources.lifetime and definition.resources.lifetime != booked.get("lifetime"):
        raise UsageError(
            f"--reservation {alloc_id} ends at {row.expires}: its lifetime is the booking's "
            f"({booked.get('lifetime')}); drop --lifetime"
        )
    check_metadata(driver, metadata)
    assert row.starts is not None and row.expires is not None
    starts = unstamp(row.starts)
    began = time.monotonic()
    if wait is not None and ctx.ledger.clock() < starts:
        _sleep_until(ctx, starts, wait, f"reservation {alloc_id} to start", began)
        recover(ctx)  # what should have ended by the start: recorded (stopped) now

    def fits(usage: Resources) -> int:
        return capacity(driver, usage, definition)

    if wait is not None:
        _wait_out(ctx, alloc_id, fits, wait, began)
    ends = unstamp(row.expires)
    # The workload may live to the window's end, however late in its grace it was claimed:
    # the driver is handed `ends` itself (bring_up); the lifetime left is what the row says.
    left = math.ceil((ends - ctx.ledger.clock()).total_seconds())
    definition.resources.lifetime = f"{max(1, left)}s"
    metadata = {**row.metadata, **metadata}  # the claim's add to the booking's

    def undo(note: str, *, held_by_me: bool = False) -> None:
        ctx.ledger.set_status(
            alloc_id, L.RESERVED, note=f"claim failed ({note}); still reserved until it lapses",
            expect=(L.ALLOCATING,), held_by_me=held_by_me,
        )  # fmt: skip

    try:
        ctx.ledger.claim(
            alloc_id, to_wire(definition), metadata, fits=fits, remote_driver=team_pool(driver)
        )
        return bring_up(ctx, driver, definition, metadata, alloc_id, ends, committed, undo=undo)
    except KeyboardInterrupt:
        # The signal may land once the server committed the claim but before its answer was
        # read, or before bring_up holds the row: it is ALLOCATING and ours, with no undo on
        # the way. Past that, bring_up's own undo has run and this moves nothing.
        from drivers.service.context import no_interrupts

        with no_interrupts(), contextlib.suppress(ShoalError):
            undo("interrupted", held_by_me=True)
        raise


def _remaining(wait: Wait, began: float) -> float | None:
    return None if wait.timeout is None else wait.timeout - (time.monotonic() - began)


@dataclass(frozen=True)
class _Pending:
    """What a claim still waits for: said in its progress line, refused in its timeout."""

    what: str
    timed_out: Callable[[str], ShoalError]  # the error, given how long it waited
    left: float | None = None  # seconds until it comes by itself, when known


def _wait_until(
    wait: Wait, began: float, look: Callable[[], _Pending | None], tidy: Callable[[], None]
) -> None:
    """Poll `look` a tick at a time until it says nothing is pending, within `--timeout`,
    reporting progress; `tidy` runs after each sleep."""
    from providers.core.timeutil import human_duration as span

    told = False
    while True:
        pending = look()
        if pending is None:
            return
        waited = time.monotonic() - began
        remaining = _remaining(wait, began)
        if remaining is not None and remaining <= 0:
            raise pending.timed_out(span(waited))
        if wait.progress is not None and (wait.redraw or not told):
            told = True
            wait.progress(WaitState(pending.what, 0, waited, remaining))
        step = min(TICK_SECONDS, *(s for s in (pending.left, remaining) if s is not None))
        time.sleep(max(0.0, step))
        tidy()


def _sleep_until(ctx: Drivers, starts: datetime, wait: Wait, what: str, began: float) -> None:
    """`--reservation ID --wait` before the window: sleep to its start (Ctrl-C ends it)."""
    from providers.core.timeutil import human_duration as span

    def look() -> _Pending | None:
        left = (starts - ctx.ledger.clock()).total_seconds()
        if left <= 0:
            return None
        return _Pending(
            what,
            lambda waited: RetryableError(
                f"timed out after {waited} waiting for {what} (in {span(left)})"
            ),
            left,
        )

    _wait_until(wait, began, look, lambda: None)


def _wait_out(
    ctx: Drivers, alloc_id: str, fits: Callable[[Resources], int], wait: Wait, began: float
) -> None:
    """`--reservation ID --wait` at or after the window's start: wait until the allocations
    past their lifetime that still hold its room have ended (a workload in its SIGTERM
    grace, a `free` still stopping it), cleaning up as any command would meanwhile."""

    def look() -> _Pending | None:
        held_by = ctx.ledger.in_the_way(alloc_id, fits)
        if not held_by:
            return None
        holders = ", ".join(held_by[:3])
        return _Pending(
            f"reservation {alloc_id}'s room ({holders} still stopping)",
            lambda waited: NoCapacityError(
                f"timed out after {waited} waiting for reservation {alloc_id}'s room: "
                f"still held by {holders}, past its lifetime and being stopped"
            ),
        )

    # Each tidy records an expiry (stopping what its supervisor left) or a dead shoal's row.
    _wait_until(wait, began, look, lambda: _tidy(ctx))


@contextlib.contextmanager
def _hangups_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP during a claim are Ctrl-C (KeyboardInterrupt): its undo leaves the
    booking RESERVED, where their default action would kill the claim mid-way and lose the
    booking with it. Where Ctrl-C is held off (an undo running, or the allocation recorded:
    a claim never ends failing with a live allocation it did not report), so are they. A
    shoal started with SIGINT ignored (a background job) keeps ignoring it, and one started
    with SIGHUP ignored (nohup) keeps ignoring that."""
    try:
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *_HANGUPS)}
        started_ignored = previous[signal.SIGINT] == signal.SIG_IGN

        def ignored_int(signum: int, frame: FrameType | None) -> None:
            pass  # SIGINT ignored, as it was: SIG_IGN now only means "held off"

        def as_ctrl_c(signum: int, frame: FrameType | None) -> None:
            if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:
                raise KeyboardInterrupt

        if started_ignored:
            signal.signal(signal.SIGINT, ignored_int)
        for sig in _HANGUPS:
            if previous[sig] != signal.SIG_IGN:
                signal.signal(sig, as_ctrl_c)
    except ValueError:  # not the main thread: signals are not ours to change
        yield
        return
    try:
        yield
    finally:
        for sig in _HANGUPS:
            # None: a handler installed outside Python, which cannot be put back as it was.
            signal.signal(sig, signal.SIG_DFL if previous[sig] is None else previous[sig])
        if started_ignored and signal.getsignal(signal.SIGINT) is ignored_int:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
