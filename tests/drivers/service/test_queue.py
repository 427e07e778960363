"""Reservations and the waiters' queue on a real SQLite ledger and the real test driver, with
the ledger's clock moved by the test: booking, claiming, lapsing, cancelling, and never more
held than there is at any instant."""

from __future__ import annotations

import random
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from drivers import service
from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.ledger.rows import unstamp
from drivers.service import Drivers
from drivers.service import queue as scheduling
from drivers.spec.types import LabelDefinition, Resources
from providers.core.errors import NoCapacityError, RetryableError, UsageError
from providers.core.settings import Paths, Settings
from providers.core.timeutil import utcnow

CPU, RAM = 4, 8
MINUTE = timedelta(minutes=1)


class Clock:
    def __init__(self) -> None:
        self.now = utcnow()

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture
def clock() -> Clock:
    return Clock()


pytestmark = pytest.mark.usefixtures("ledger_backend")


@pytest.fixture
def ctx(home: Path, clock: Clock, make_ledger: Callable[..., Ledger]) -> Iterator[Drivers]:
    paths = Paths.from_env({"SHOAL_HOME": str(home)})
    paths.ensure_dir(paths.state_dir)
    config = {
        "drivers": {"test/default": {"cpu_limit": CPU, "ram_limit": RAM}},
        "alloc": {"reservation_grace_minutes": 10},
    }
    from tests.conftest import LEDGER_ENV

    settings = Settings(paths=paths, config=config, env=dict(LEDGER_ENV))
    ledger = make_ledger(paths.state_dir / "ledger.sqlite", clock=clock)
    yield Drivers(settings=settings, ledger=ledger)


def definition(cpu: int, ram: int, lifetime: str = "") -> LabelDefinition:
    return LabelDefinition(
        driver="test", resources=Resources(cpu=cpu, ram=ram, lifetime=lifetime), options={}
    )


def allocate(ctx: Drivers, cpu: int, ram: int, lifetime: str = "") -> str:
    return service.allocate(ctx, definition(cpu, ram, lifetime), {}).id


def book(ctx: Drivers, cpu: int, ram: int, at: datetime, lifetime: str) -> str:
    return scheduling.book(ctx, definition(cpu, ram, lifetime), {}, at).id


def claim(ctx: Drivers, alloc_id: str) -> str:
    base = scheduling.reserved_definition(ctx, alloc_id)
    from providers.core.wire import from_wire

    return scheduling.claim(ctx, alloc_id, from_wire(LabelDefinition, base), {}).id


# -- the invariant -----------------------------------------------------------------------------


def holdings(ctx: Drivers, now: datetime) -> list[tuple[datetime, datetime | None, int, int]]:
    """[start, end) of everything that holds capacity from now on, read straight from the
    rows (not through the code under test): allocations from now to their expiry,
    reservations not past their claim deadline over their windows."""
    out: list[tuple[datetime, datetime | None, int, int]] = []
    for row in ctx.ledger.with_status(*L.HOLDING):
        end = unstamp(row.expires) if row.expires else None
        out.append((now, end, row.cpu, row.ram))
    for row in ctx.ledger.with_status(L.RESERVED):
        assert row.starts and row.expires and row.claim_by
        if unstamp(row.claim_by) > now:
            out.append((unstamp(row.starts), unstamp(row.expires), row.cpu, row.ram))
    return out


def assert_never_oversubscribed(ctx: Drivers, now: datetime) -> None:
    spans = holdings(ctx, now)
    for at in {now, *(start for start, _, _, _ in spans if start > now)}:
        live = [(c, r) for start, end, c, r in spans if start <= at and (end is None or at < end)]
        assert sum(c for c, _ in live) <= CPU, (at, spans)
        assert sum(r for _, r in live) <= RAM, (at, spans)


def expire_due(ctx: Drivers, now: datetime) -> None:
    """What the lifetime supervisors do: an allocation past its expiry stops holding."""
    for row in ctx.ledger.with_status(L.ALLOCATED):
        if row.expires and unstamp(row.expires) <= now:
            service.free(ctx, row.id, note="expired")


def test_random_interleavings_never_oversubscribe_any_instant(ctx: Drivers, clock: Clock) -> None:
    rng = random.Random(14)
    lifetimes = ["", "10m", "30m", "1h", "2h"]
    done = {"alloc": 0, "book": 0, "claim": 0, "free": 0, "refused": 0}
    for _ in range(250):
        op = rng.choice(["alloc", "alloc", "book", "book", "claim", "claim", "free", "tick"])
        cpu, ram = rng.randint(1, 3), rng.randint(1, 5)
        try:
            if op == "alloc":
                allocate(ctx, cpu, ram, rng.choice(lifetimes))
            elif op == "book":
                at = clock.now + rng.randint(0, 180) * MINUTE
                book(ctx, cpu, ram, at, rng.choice(lifetimes[1:]))
            elif op == "claim":
                due = [
                    r.id
                    for r in ctx.ledger.with_status(L.RESERVED)
                    if r.starts and unstamp(r.starts) <= clock.now
                ]
                if not due:
                    continue
                claim(ctx, rng.choice(due))
            elif op == "free":
                live = ctx.ledger.with_status(L.ALLOCATED, L.RESERVED)
                if not live:
                    continue
                service.free(ctx, rng.choice(live).id)
            else:
                clock.advance(rng.randint(1, 40) * MINUTE)
                expire_due(ctx, clock.now)
                service.recover(ctx)  # lapses what was not claimed in time
                op = "tick"
            if op in done:
                done[op] += 1
        except NoCapacityError:
            done["refused"] += 1
        assert_never_oversubscribed(ctx, clock.now)
    # The walk did exercise every path, refusals included.
    assert all(count > 3 for count in done.values()), done
    assert ctx.ledger.with_status(L.LAPSED) or ctx.ledger.with_status(L.FREED)


# -- reservations ----------------------------------------------------------------------------


def test_an_allocation_that_would_run_into_a_reservation_is_refused_a_shorter_one_fits(
    ctx: Drivers, clock: Clock
) -> None:
    reserved = book(ctx, CPU, 1, clock.now + 60 * MINUTE, "1h")
    with pytest.raises(NoCapacityError) as refused:
        allocate(ctx, 1, 1, "2h")
    said = str(refused.value)
    assert f"reservation {reserved} starts at" in said
    assert "a lifetime up to 1h fits now" in said
    with pytest.raises(NoCapacityError):
        allocate(ctx, 1, 1)  # no lifetime: it would hold the room forever
    short = allocate(ctx, 1, 1, "59m")
    assert ctx.ledger.get(short).status == L.ALLOCATED
    # Another reservation over the same window does not fit either; after it, it does.
    with pytest.raises(NoCapacityError, match=f"reservation {reserved} holds it then"):
        book(ctx, 1, 1, clock.now + 90 * MINUTE, "1h")
    later = book(ctx, 1, 1, clock.now + 120 * MINUTE, "1h")
    assert ctx.ledger.get(later).status == L.RESERVED
    # --dry-run counts the reservations in its window too.
    assert service.dry_run(ctx, definition(1, 1, "2h")).fits == 0
    assert service.dry_run(ctx, definition(1, 1, "30m")).fits == CPU - 1


def test_claim_turns_the_reservation_into_the_allocation_with_its_room(
    ctx: Drivers, clock: Clock
) -> None:
    reserved = book(ctx, 2, 2, clock.now + 30 * MINUTE, "1h")
    with pytest.raises(RetryableError, match="starts at"):
        claim(ctx, reserved)  # too early
    clock.advance(35 * MINUTE)
    # Everything else is full: the claim takes the booked room all the same.
    allocate(ctx, 2, 2)
    with pytest.raises(NoCapacityError):
        allocate(ctx, 1, 1)
    assert claim(ctx, reserved) == reserved
    row = ctx.ledger.get(reserved)
    assert row.status == L.ALLOCATED
    assert row.expires and row.starts
    # It ends where the booked window does, not a full lifetime after the claim.
    assert unstamp(row.expires) == unstamp(row.starts) + 60 * MINUTE
    with pytest.raises(UsageError, match="already claimed"):
        claim(ctx, reserved)


def test_a_claim_waits_for_an_allocation_past_its_lifetime_that_still_holds_the_room(
    ctx: Drivers, clock: Clock
) -> None:
    before = allocate(ctx, CPU, 1, "30m")
    reserved = book(ctx, CPU, 1, clock.now + 30 * MINUTE, "1h")
    clock.advance(31 * MINUTE)
    # Its workload is still being stopped (a `free` in its SIGTERM grace): it holds the room.
    assert ctx.ledger.set_status(
        before, L.FREEING, note=L.FREEING_FROM + L.ALLOCATED, expect=(L.ALLOCATED,), owner=True
    )
    with pytest.raises(NoCapacityError, match=f"still held by {before}"):
        claim(ctx, reserved)
    assert ctx.ledger.get(reserved).status == L.RESERVED
    base = scheduling.reserved_definition(ctx, reserved)
    from providers.core.wire import from_wire

    waited = scheduling.Wait(timeout=0.3)
    with pytest.raises(NoCapacityError, match=f"timed out .* still held by {before}"):
        scheduling.claim(ctx, reserved, from_wire(LabelDefinition, base), {}, wait=waited)
    assert ctx.ledger.set_status(before, L.FREED, expect=(L.FREEING,))
    assert claim(ctx, reserved) == reserved
    assert ctx.ledger.get(reserved).status == L.ALLOCATED


def test_a_reservation_not_claimed_in_its_grace_lapses_and_frees_its_room(
    ctx: Drivers, clock: Clock
) -> None:
    reserved = book(ctx, CPU, 1, clock.now + 5 * MINUTE, "1h")
    clock.advance(16 * MINUTE)  # 5 to the start, 10 of grace, and a minute more
    assert allocate(ctx, CPU, 1)  # its room is back
    assert ctx.ledger.get(reserved).status == L.LAPSED
    with pytest.raises(UsageError, match="lapsed"):
        claim(ctx, reserved)


def test_free_cancels_a_reservation(ctx: Drivers, clock: Clock) -> None:
    reserved = book(ctx, CPU, 1, clock.now + 5 * MINUTE, "1h")
    with pytest.raises(NoCapacityError):
        allocate(ctx, 1, 1)
    result = service.free(ctx, reserved)
    assert (result.status, result.changed) == (L.FREED, True)
    assert "cancelled" in result.message
    assert allocate(ctx, CPU, 1)
    assert service.free(ctx, reserved).changed is False


def test_bad_bookings_are_usage_errors(ctx: Drivers, clock: Clock) -> None:
    with pytest.raises(UsageError, match="in the past"):
        book(ctx, 1, 1, clock.now - 10 * MINUTE, "1h")
    with pytest.raises(UsageError, match="give --lifetime"):
        scheduling.book(ctx, definition(1, 1), {}, clock.now + MINUTE)
    with pytest.raises(UsageError, match=r"can never fit: the driver.s total is 4 \(cpu\)"):
        book(ctx, CPU + 1, 1, clock.now + MINUTE, "1h")
    plain = allocate(ctx, 1, 1)
    with pytest.raises(UsageError, match="not a reservation"):
        claim(ctx, plain)


# -- the queue -------------------------------------------------------------------------------


def test_waiters_ahead_come_first_and_dead_ones_are_dropped(ctx: Drivers, clock: Clock) -> None:
    allocate(ctx, CPU, 1)
    ledger = ctx.ledger
    queued = definition(1, 1)
    from providers.core.wire import to_wire

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    bell = ledger.open_bell()
    first = ledger.enqueue(
        driver="test/default", definition=to_wire(queued), resources=queued.resources,
        life=None, is_remote=False, token=bell.token,
    )  # fmt: skip
    # The queued one is ours (this process): alive. Room for one comes back.
    service.free(ctx, ledger.with_status(L.ALLOCATED)[0].id)
    allocate(ctx, CPU - 1, 1)
    with pytest.raises(NoCapacityError, match="1 earlier waiter"):
        allocate(ctx, 1, 1)  # it fits, but the waiter came first
    assert [w.id for w in ledger.served_now("test/default", scheduling.queue_fits(
        ctx.driver("test/default")))] == [first]  # fmt: skip
    # Its owner dies: its place goes, and the room is anyone's.
    with ledger._db.transaction() as conn:
        conn.execute(
            "UPDATE waiters SET owner_pid=?, owner_start=NULL WHERE id=?", (dead.pid, first)
        )
    assert allocate(ctx, 1, 1)
    assert ledger.waiting("test/default") == []
    assert bell.wait(10)  # it was rung when the room came back (a NOTIFY comes a moment later)
    bell.close()


@pytest.mark.sqlite_only
def test_the_schema_of_a_version_1_ledger_is_upgraded_in_place(home: Path) -> None:
    import sqlite3

    path = home / "ledger.sqlite"
    old = sqlite3.connect(path, isolation_level=None)
    from drivers.ledger import db as ledger_db

    version_1 = ledger_db._SCHEMA
    old.executescript(f"{version_1} PRAGMA user_version=1;")
    old.execute(
        "INSERT INTO allocations VALUES ('test-1', 'test/default', 'ALLOCATED', '{}', NULL, '{}',"
        " '2026-01-01T00:00:00.000000Z', '2026-01-01T00:00:00.000000Z', NULL, 1, 1, 0, 0, 0, 0,"
        " NULL, NULL, NULL)"
    )
    old.close()
    ledger = Ledger(path, clock=lambda: datetime(2026, 1, 2, tzinfo=UTC))
    try:
        row = ledger.get("test-1")
        assert (row.status, row.starts, row.claim_by) == (L.ALLOCATED, None, None)
        assert ledger.waiting("test/default") == []
        assert ledger._db.conn().execute("PRAGMA user_version").fetchone()[0] == 3
    finally:
        ledger.close()


def test_a_claim_interrupted_as_its_commit_is_answered_leaves_the_booking_reserved(
    ctx: Drivers, clock: Clock
) -> None:
    """Ctrl-C (or SIGTERM/SIGHUP, which a claim turns into it) may land once the server
    has committed the claim but before its answer is read: the row is ALLOCATING and the
    claim's, and no allocation's undo holds it yet."""
    reserved = book(ctx, 2, 2, clock.now + MINUTE, "1h")
    clock.advance(2 * MINUTE)
    real = ctx.ledger.claim

    def committed_then_interrupted(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # type: ignore[arg-type]
        raise KeyboardInterrupt

    ctx.ledger.claim = committed_then_interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        claim(ctx, reserved)
    row = ctx.ledger.get(reserved)
    assert (row.status, row.owner_pid) == (L.RESERVED, None)
    assert "interrupted" in (row.note or "")
    ctx.ledger.claim = real  # type: ignore[method-assign]
    assert claim(ctx, reserved) == reserved


def test_an_interrupted_claim_gives_back_only_a_row_it_holds(ctx: Drivers, clock: Clock) -> None:
    """The give-back is conditional on the row being this process's claim: one another
    shoal holds (its claim won the row) is left to it."""
    reserved = book(ctx, 2, 2, clock.now + MINUTE, "1h")
    clock.advance(2 * MINUTE)
    real = ctx.ledger.claim

    def another_won_then_interrupted(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # type: ignore[arg-type]
        with ctx.ledger._write() as conn:  # the row as another live shoal's claim
            conn.execute(
                "UPDATE allocations SET owner_pid=1, owner_start=1 WHERE id=?", (reserved,)
            )
        raise KeyboardInterrupt

    ctx.ledger.claim = another_won_then_interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        claim(ctx, reserved)
    row = ctx.ledger.get(reserved)
    assert (row.status, row.owner_pid) == (L.ALLOCATING, 1)
