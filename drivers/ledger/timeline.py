"""Capacity over time: what the ledger's rows hold at each instant of a window.

An allocation holds from now until its expiry (overdue or without a lifetime: until it is
freed); a reservation holds over its window [start, start + lifetime). A request needs a
window too: [now, now + lifetime) for an allocation, its own window for a reservation.
Usage only grows where a span starts, so a window fits when the request fits at its start
and at every span start inside it. Pure functions: the ledger feeds them rows, the driver's
`available_capacity` is the `fits` callback, and messages say what blocked and until when.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from drivers.spec.types import Resources
from providers.core.timeutil import human_duration

# How many future release times a "capacity is expected back" estimate looks at.
RELEASES_LOOKED_AT = 200

Fits = Callable[[Resources], int]


@dataclass(frozen=True)
class Span:
    """Capacity held over [start, end): start None = held now, end None = until freed."""

    cpu: int
    ram: int
    count: int = 1
    multitenancy: bool = True
    cpu_overbook: bool = True
    ram_overbook: bool = True
    start: datetime | None = None
    end: datetime | None = None
    label: str = ""  # the id that names it in messages
    reserved: bool = False  # a reservation (RESERVED), not an allocation

    def holds_at(self, at: datetime) -> bool:
        return (self.start is None or self.start <= at) and (self.end is None or at < self.end)


def usage_at(spans: Iterable[Span], at: datetime) -> Resources:
    """What the spans hold at `at`, as the drivers' capacity check takes it (node usage)."""
    cpu = ram = count = 0
    multi = cpu_ob = ram_ob = True
    for span in spans:
        if not span.holds_at(at):
            continue
        cpu += span.cpu
        ram += span.ram
        count += span.count
        multi = multi and span.multitenancy
        cpu_ob = cpu_ob and span.cpu_overbook
        ram_ob = ram_ob and span.ram_overbook
    if count == 0:
        return Resources()
    return Resources(cpu=cpu, ram=ram, multitenancy=multi, cpu_overbook=cpu_ob, ram_overbook=ram_ob)


@dataclass(frozen=True)
class Fit:
    """How many fit over a window, and where it is tightest: the first instant nothing fits
    (else the instant with the fewest), with the reservations that start there."""

    count: int
    at: datetime
    usage: Resources
    starting: tuple[str, ...] = ()  # reservations starting at `at` (after the window's start)


def instants(spans: Iterable[Span], start: datetime, end: datetime | None) -> list[datetime]:
    """The window's start and every span start inside it: where usage can grow."""
    inside = {
        s.start
        for s in spans
        if s.start is not None and start < s.start and (end is None or s.start < end)
    }
    return sorted({start, *inside})


def window_fit(spans: Sequence[Span], start: datetime, end: datetime | None, fits: Fits) -> Fit:
    """How many such requests fit over [start, end) (end None: until freed)."""
    seen: dict[tuple[int, int, bool, bool, bool], int] = {}
    best: Fit | None = None
    for at in instants(spans, start, end):
        usage = usage_at(spans, at)
        key = (usage.cpu, usage.ram, usage.multitenancy, usage.cpu_overbook, usage.ram_overbook)
        if key not in seen:
            seen[key] = fits(usage)
        count = seen[key]
        if best is None or count < best.count:
            starting = tuple(s.label for s in spans if s.reserved and s.start == at and at > start)
            best = Fit(count, at, usage, starting)
        if count < 1:
            break
    assert best is not None  # instants() always holds the start
    return best


def next_fit(
    spans: Sequence[Span],
    now: datetime,
    life: timedelta | None,
    fits: Fits,
) -> tuple[datetime, str] | None:
    """The first time after now a request of this lifetime fits, as spans end (expiries and
    reservation ends), with what ends then; None when no end within reach makes room."""
    ends: dict[datetime, str] = {}
    for span in sorted(
        (s for s in spans if s.end is not None and s.end > now), key=lambda s: s.end or now
    ):
        assert span.end is not None
        if span.end in ends:
            continue
        if len(ends) >= RELEASES_LOOKED_AT:
            break
        ends[span.end] = _ending(span)
    for at in sorted(ends):
        if window_fit(spans, at, at + life if life else None, fits).count >= 1:
            return at, ends[at]
    return None


# -- waiters ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Waiter:
    """One queued `alloc --wait`, in arrival order (`id`)."""

    id: int
    driver: str
    definition: dict[str, object] = field(compare=False)
    cpu: int
    ram: int
    multitenancy: bool
    cpu_overbook: bool
    ram_overbook: bool
    life: timedelta | None
    token: str
    owner_pid: int | None
    owner_start: str | None
    host: str | None = None  # the machine it waits on (a team ledger's)
    lease: str | None = None

    def span(self, now: datetime) -> Span:
        return Span(
            cpu=self.cpu,
            ram=self.ram,
            multitenancy=self.multitenancy,
            cpu_overbook=self.cpu_overbook,
            ram_overbook=self.ram_overbook,
            end=now + self.life if self.life else None,
            label=f"waiter {self.id}",
        )


def serve_in_order(
    waiters: Iterable[Waiter],
    spans: Sequence[Span],
    now: datetime,
    fits_for: Callable[[Waiter, Resources], int],
    alive: Callable[[Waiter], bool] = lambda w: True,
) -> tuple[list[Waiter], list[Span]]:
    """First come, first served: each waiter, in arrival order, is served if it fits beside
    what the spans hold and what the waiters before it were served. A waiter that does not
    fit is passed over (a smaller one behind it may fit), never overtaken by one that
    would take its room. Returns the served waiters and the spans they would hold; dead
    waiters (checked only where they would be served: it costs a /proc read) are skipped."""
    served: list[Waiter] = []
    held = list(spans)
    for waiter in waiters:
        end = now + waiter.life if waiter.life else None
        if window_fit(held, now, end, functools.partial(fits_for, waiter)).count < 1:
            continue
        if not alive(waiter):
            continue
        served.append(waiter)
        held.append(waiter.span(now))
    return served, held[len(spans) :]


# -- messages --------------------------------------------------------------------------------


def _when(at: datetime) -> str:
    from providers.core.wire import format_time

    return format_time(at)


def _ending(span: Span) -> str:
    if span.reserved:
        return f"reservation {span.label} ends"
    if span.count > 1:
        return f"{span.label} and {span.count - 1} more expire"
    return f"{span.label} expires"


def refusal(
    *,
    driver: str,
    cpu: int,
    ram: int,
    life: timedelta | None,
    start: datetime,
    now: datetime,
    fit: Fit,
    spans: Sequence[Span],
    fits: Fits,
    ahead: int = 0,
    booking: bool = False,
) -> str:
    """Why a request does not fit, naming what holds the room and when it comes back."""
    what = f"cpu={cpu} ram={ram}GiB"
    if booking and life is not None:
        holders = [s.label for s in spans if s.reserved and s.holds_at(fit.at)]
        why = (
            f"reservation {', '.join(holders)} holds it then"
            if len(holders) == 1
            else f"reservations {', '.join(holders)} hold it then"
            if holders
            else "allocations hold it then"
        )
        later = next_fit(spans, max(start, now), life, fits)
        tail = f"; the first window that fits starts {_when(later[0])}" if later else ""
        return (
            f"no capacity for {driver} from {_when(start)} to {_when(start + life)}: {what} "
            f"does not fit at {_when(fit.at)} ({why}){tail}"
        )
    if ahead:
        return (
            f"no capacity for {driver}: {what} fits now, but {ahead} earlier waiter(s) "
            "come first; `shoal alloc --wait` queues behind them"
        )
    if fit.at > start:
        names = ", ".join(fit.starting) or "a reservation"
        span = f"for {human_duration(life, style='span')}" if life else "without a lifetime"
        return (
            f"no capacity for {driver}: {what} {span} would still hold it when reservation "
            f"{names} starts at {_when(fit.at)} (in {human_duration(fit.at - now, style='span')}); "
            f"a lifetime up to {human_duration(fit.at - now, style='span')} fits now"
        )
    base = f"no capacity for {driver}: {what} does not fit now"
    back = next_fit(spans, now, life, fits)
    if back is None:
        return (
            f"{base}; nothing holding it has a lifetime, so no capacity is expected back "
            "until something is freed: free something, or wait for it with --wait"
        )
    at, label = back
    return (
        f"{base}; capacity is expected back at {_when(at)} "
        f"(in {human_duration(at - now, style='span')}, "
        f"when {label}); free something, retry then, or wait for it with --wait"
    )
