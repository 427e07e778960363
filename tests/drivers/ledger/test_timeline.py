"""Capacity over time, as pure arithmetic: windows, reservations, first come first served."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from drivers.ledger.timeline import (
    Span,
    Waiter,
    next_fit,
    refusal,
    serve_in_order,
    usage_at,
    window_fit,
)
from drivers.spec.capacity import fit_count
from drivers.spec.types import Resources
from providers.core.timeutil import human_duration

NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
H = timedelta(hours=1)


ONE = Resources(cpu=1, ram=1)


def cap(cpu: int, ram: int = 100) -> Callable[..., int]:
    def fits(usage: Resources, req: Resources = ONE) -> int:
        return fit_count(cpu, ram, 0, 0, usage, req)

    return fits


def held(cpu: int, end: datetime | None = None, label: str = "a") -> Span:
    return Span(cpu=cpu, ram=1, end=end, label=label)


def booked(cpu: int, start: datetime, end: datetime, label: str = "r") -> Span:
    return Span(cpu=cpu, ram=1, start=start, end=end, label=label, reserved=True)


def test_usage_counts_what_holds_the_instant() -> None:
    spans = [held(1, NOW + H), held(1), booked(2, NOW + 2 * H, NOW + 3 * H)]
    assert usage_at(spans, NOW).cpu == 2
    assert usage_at(spans, NOW + H).cpu == 1  # the first expired
    assert usage_at(spans, NOW + 2 * H).cpu == 3  # the reservation began
    assert usage_at(spans, NOW + 3 * H).cpu == 1  # and ended
    assert usage_at([], NOW) == Resources()


def test_a_window_is_checked_where_each_reservation_starts() -> None:
    spans = [booked(2, NOW + 2 * H, NOW + 3 * H, "res-1")]
    fits = cap(2)
    # Short enough to end before the reservation: fits.
    assert window_fit(spans, NOW, NOW + 2 * H, fits).count == 2
    # Still running when it starts: nothing fits, and the reservation is named.
    long = window_fit(spans, NOW, NOW + 2 * H + timedelta(seconds=1), fits)
    assert long.count == 0
    assert long.at == NOW + 2 * H
    assert long.starting == ("res-1",)
    # Without a lifetime it runs forever: refused too.
    assert window_fit(spans, NOW, None, fits).count == 0
    # After the reservation ends it fits again.
    assert window_fit(spans, NOW + 3 * H, None, fits).count == 2


def test_next_fit_finds_the_first_end_that_makes_room() -> None:
    spans = [held(1, NOW + H, "soon"), held(1, NOW + 2 * H, "later")]
    fits = cap(2)
    at, what = next_fit(spans, NOW, None, lambda u: fits(u, Resources(cpu=2, ram=1))) or (
        None,
        "",
    )
    assert at == NOW + 2 * H and what == "later expires"
    assert next_fit([held(2)], NOW, None, fits) is None  # nothing has a lifetime


def waiter(ident: int, cpu: int, life: timedelta | None = None) -> Waiter:
    return Waiter(
        id=ident,
        driver="test/default",
        definition={},
        cpu=cpu,
        ram=1,
        multitenancy=False,
        cpu_overbook=False,
        ram_overbook=False,
        life=life,
        token=f"t{ident}",
        owner_pid=None,
        owner_start=None,
    )


def test_waiters_are_served_in_arrival_order_and_smaller_ones_fill_gaps() -> None:
    fits = cap(3)

    def fits_for(w: Waiter, usage: Resources) -> int:
        return fits(usage, Resources(cpu=w.cpu, ram=1))

    queue = [waiter(1, 1), waiter(2, 1), waiter(3, 1)]
    served, spans = serve_in_order(queue, [held(1)], NOW, fits_for)
    assert [w.id for w in served] == [1, 2]  # two slots: the first two, never the third
    assert sum(s.cpu for s in spans) == 2
    # A big one that does not fit is passed over; the small one behind it is served.
    served, _ = serve_in_order([waiter(1, 3), waiter(2, 1)], [held(1)], NOW, fits_for)
    assert [w.id for w in served] == [2]
    # A dead waiter is skipped where it would have been served.
    served, _ = serve_in_order(queue, [held(2)], NOW, fits_for, alive=lambda w: w.id != 1)
    assert [w.id for w in served] == [2]


def test_refusals_say_what_holds_the_room_and_until_when() -> None:
    fits = cap(1)
    spans = [held(1, NOW + H, "test-1")]
    fit = window_fit(spans, NOW, None, fits)
    text = refusal(
        driver="test/default", cpu=1, ram=1, life=None, start=NOW, now=NOW, fit=fit,
        spans=spans, fits=fits,
    )  # fmt: skip
    assert "does not fit now" in text
    assert "capacity is expected back at 2026-12-01T09:00:00Z (in 1h, when test-1 expires)" in text
    spans = [booked(1, NOW + 30 * timedelta(minutes=1), NOW + 2 * H, "test-r")]
    fit = window_fit(spans, NOW, NOW + H, fits)
    text = refusal(
        driver="test/default", cpu=1, ram=1, life=H, start=NOW, now=NOW, fit=fit,
        spans=spans, fits=fits,
    )  # fmt: skip
    assert "for 1h would still hold it when reservation test-r starts" in text
    assert "a lifetime up to 30m fits now" in text


def test_durations_read_as_people_write_them() -> None:
    seconds = (0, 45, 60, 3599, 3600, 5400, 90000)
    assert [human_duration(timedelta(seconds=s), style="span") for s in seconds] == [
        "0s", "45s", "1m", "59m", "1h", "1h30m", "1d1h"
    ]  # fmt: skip
