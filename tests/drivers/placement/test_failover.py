"""The failover loop itself, on a real ledger, the real test driver and a real memory file:
what a round skips, what a later round of `--wait` tries again, and what is reported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers.ledger.book import Ledger
from drivers.placement.document import parse
from drivers.placement.failover import Attempt, place
from drivers.placement.targets import Base, Target
from drivers.placement.unavailable import FILE, Unavailable
from drivers.service import Drivers
from drivers.service.queue import Wait
from providers.core.errors import NoCapacityError, UsageError
from providers.core.settings import Paths, Settings


@pytest.fixture
def ctx(home: Path) -> Iterator[Drivers]:
    paths = Paths.from_env({"SHOAL_HOME": str(home)})
    paths.ensure_dir(paths.state_dir)
    config = {"drivers": {"test/default": {"cpu_limit": 2, "ram_limit": 4}}}
    ledger = Ledger(paths.state_dir / "ledger.sqlite")
    yield Drivers(settings=Settings(paths=paths, config=config, env={}), ledger=ledger)
    ledger.close()


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    from drivers.service import alloc as service_alloc

    monkeypatch.setattr(service_alloc, "RETRY_SECONDS", (0.05, 0.1))


def local(instances: int = 1, provider: str = "local", driver: str = "test") -> dict[str, object]:
    return {"provider": provider, "driver": driver, "region": {"name": "here"},
            "instanceType": "host", "market": "onDemand", "instances": instances}  # fmt: skip


BASE = Base({"resources": {"cpu": 1, "ram": 1}})


def test_a_later_round_of_wait_tries_what_the_memory_holds(
    ctx: Drivers, tmp_path: Path, fast_retries: None
) -> None:
    document = parse(json.dumps({"offers": [local()]}), "x")
    memory = Unavailable(tmp_path / FILE)
    memory.remember(Target(document.offers[0]).key(), "InsufficientInstanceCapacity")
    said: list[Attempt] = []
    with pytest.raises(NoCapacityError, match="remembered for"):
        place(ctx, document, BASE, {}, report=said.append, memory=memory)
    made = place(ctx, document, BASE, {}, report=said.append, memory=memory,
                 wait=Wait(timeout=30))  # fmt: skip
    assert len(made) == 1 and made[0].status == "ALLOCATED"
    assert [a.verb for a in said] == ["skipped", "skipped"]  # the round after says nothing


def test_what_no_driver_launches_is_a_usage_error_not_a_retry(ctx: Drivers) -> None:
    document = parse(json.dumps({"offers": [local(provider="lambda", driver="lambda")]}), "x")
    said: list[Attempt] = []
    with pytest.raises(UsageError, match="no offer can be launched: skipped lambda here host"):
        place(ctx, document, BASE, {}, report=said.append, wait=Wait(timeout=30))
    assert said == [
        Attempt("lambda here host on-demand", "skipped", "no lambda driver yet", False)
    ]


def test_a_refusal_before_launch_is_named_and_not_remembered(ctx: Drivers, tmp_path: Path) -> None:
    document = parse(json.dumps({"offers": [local(instances=3), local(instances=2)]}), "x")
    memory = Unavailable(tmp_path / FILE)
    said: list[Attempt] = []
    made = place(ctx, document, BASE, {}, report=said.append, memory=memory)
    assert len(made) == 2
    assert [str(a) for a in said] == [
        "tried local here host on-demand: cpu=1 ram=1GiB does not fit now after 2 of 3 "
        "(those freed)"
    ]
    # The ledger counts the room again at the next alloc: nothing to remember.
    assert not (tmp_path / FILE).exists()
