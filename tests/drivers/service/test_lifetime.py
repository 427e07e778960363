"""A lifetime is decided once on its way through: parsed once per use case, its expiry taken
from one reading of the ledger's clock, and that instant is both the row's `expires` and
the deadline the driver's supervisor enforces. Real SQLite ledger, real process driver and
supervisor, the ledger's clock moved off the wall clock so that a second "now" would show."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import drivers.definitions.definition as definition_module
import providers.core.timeutil as timeutil
from drivers import service
from drivers.ledger.book import Ledger
from drivers.ledger.rows import unstamp
from drivers.process import driver as process_driver
from drivers.service import Drivers
from drivers.service import queue as scheduling
from drivers.spec.types import LabelDefinition, Resources
from providers.core.settings import Paths, Settings
from providers.core.wire import from_wire

pytestmark = pytest.mark.usefixtures("reap_workloads")

# Off the wall clock by minutes and microseconds: a deadline read from another clock (or the
# same one read again) cannot land on the row's expiry by chance.
SKEW = timedelta(minutes=7, microseconds=123_457)


class Clock:
    def __init__(self) -> None:
        self.now = datetime.now(UTC) + SKEW

    def __call__(self) -> datetime:
        return self.now


pytestmark = pytest.mark.usefixtures("ledger_backend")


@pytest.fixture
def ctx(home: Path, make_ledger: Callable[..., Ledger]) -> Iterator[Drivers]:
    from tests.conftest import LEDGER_ENV

    paths = Paths.from_env({"SHOAL_HOME": str(home)})
    paths.ensure_dir(paths.state_dir)
    config = {
        "drivers": {
            "process/default": {"cpu_limit": 2, "ram_limit": 4, "grace_seconds": 1},
            "test/default": {"cpu_limit": 2, "ram_limit": 4},
        }
    }
    ledger = make_ledger(paths.state_dir / "ledger.sqlite", clock=Clock())
    settings = Settings(paths=paths, config=config, env=dict(LEDGER_ENV))
    yield Drivers(settings=settings, ledger=ledger)


@pytest.fixture
def supervisor_specs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the process driver hands each supervisor it starts (the real one is started)."""
    seen: list[dict[str, Any]] = []
    real = process_driver.supervise

    def recording(workspace: Path, spec: dict[str, Any]) -> Any:
        seen.append(spec)
        return real(workspace, spec)

    monkeypatch.setattr(process_driver, "supervise", recording)
    return seen


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts parse_duration is asked to read, wherever it is called from."""
    asked: list[str] = []
    real = timeutil.parse_duration

    def counting(text: str, field: str) -> timedelta:
        asked.append(text)
        return real(text, field)

    monkeypatch.setattr(timeutil, "parse_duration", counting)
    monkeypatch.setattr(definition_module, "parse_duration", counting)
    return asked


def process(lifetime: str) -> LabelDefinition:
    return LabelDefinition(
        driver="process",
        resources=Resources(cpu=1, ram=1, lifetime=lifetime),
        options={"entry": ["sleep", "600"]},
    )


def deadline_of(spec: dict[str, Any]) -> datetime:
    return datetime.fromtimestamp(spec["deadline"], UTC)


def test_the_supervisors_deadline_is_the_rows_expiry_and_the_lifetime_is_parsed_once(
    ctx: Drivers, supervisor_specs: list[dict[str, Any]], parses: list[str]
) -> None:
    made = service.allocate(ctx, process("2h"), {})
    try:
        row = ctx.ledger.get(made.id)
        assert row.expires is not None
        expires = unstamp(row.expires)
        assert expires == ctx.ledger.clock() + timedelta(hours=2)
        (spec,) = supervisor_specs
        assert deadline_of(spec) == expires
        assert made.resource is not None and made.resource["metadata"]["deadline"] == row.expires
        assert parses == ["2h"]
    finally:
        service.free(ctx, made.id)


def test_a_claimed_reservation_is_stopped_at_the_end_of_its_window(
    ctx: Drivers, supervisor_specs: list[dict[str, Any]]
) -> None:
    booked = scheduling.book(ctx, process("1h"), {}, ctx.ledger.clock())
    base = scheduling.reserved_definition(ctx, booked.id)
    claimed = scheduling.claim(ctx, booked.id, from_wire(LabelDefinition, base), {})
    try:
        row = ctx.ledger.get(claimed.id)
        assert row.expires is not None and row.starts is not None
        assert unstamp(row.expires) == unstamp(row.starts) + timedelta(hours=1)
        (spec,) = supervisor_specs
        assert deadline_of(spec) == unstamp(row.expires)
    finally:
        service.free(ctx, claimed.id)


def test_a_waiter_parses_its_lifetime_once_however_often_it_tries(
    ctx: Drivers, parses: list[str]
) -> None:
    whole = LabelDefinition(driver="test", resources=Resources(cpu=2, ram=2))
    blocker = service.allocate(ctx, whole, {})
    freed: list[str] = []

    def free_blocker(state: scheduling.WaitState) -> None:
        # Told once the waiter has queued (its first try found no room): room comes back.
        if not freed:
            freed.append(service.free(ctx, blocker.id).id)

    wanted = LabelDefinition(driver="test", resources=Resources(cpu=2, ram=2, lifetime="30m"))
    made = service.allocate(
        ctx, wanted, {}, wait=scheduling.Wait(timeout=60, progress=free_blocker)
    )
    assert freed == [blocker.id]
    expires = ctx.ledger.get(made.id).expires
    assert expires is not None
    assert unstamp(expires) == ctx.ledger.clock() + timedelta(minutes=30)
    assert parses == ["30m"]


def test_a_dry_run_and_a_booking_parse_the_lifetime_once(ctx: Drivers, parses: list[str]) -> None:
    def wanted() -> LabelDefinition:
        return LabelDefinition(driver="test", resources=Resources(cpu=1, ram=1, lifetime="45m"))

    service.dry_run(ctx, wanted())
    assert parses == ["45m"]
    booked = scheduling.book(ctx, wanted(), {}, ctx.ledger.clock() + timedelta(hours=1))
    assert parses == ["45m", "45m"]
    row = ctx.ledger.get(booked.id)
    assert row.expires is not None and row.starts is not None
    assert unstamp(row.expires) - unstamp(row.starts) == timedelta(minutes=45)
