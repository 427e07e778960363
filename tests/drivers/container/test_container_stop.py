"""How `free` ends a container against the session's real Podman: the engine's SIGTERM, the
grace, then SIGKILL, with the grace the allocation was made with; what it records; and what
a `status` or `free` of a container costs (one inspect; no pydantic, httpx, or what only
`alloc` uses)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_imports import _modules, _top
from tests.drivers.container.conftest import Podman
from tests.drivers.container.test_container_driver import Shoal, alloc, exists, inspect, status

pytestmark = pytest.mark.engine

GRACE = 3
CONFIG = f'[drivers."container/default"]\ngrace_seconds = {GRACE}\n'
# The trap says so on stdout (the engine's log, which `free` records) and exits 7: an end by
# SIGKILL would be 137, an end by an untrapped SIGTERM 143.
TRAPS_TERM = "sh -c 'trap \"echo got SIGTERM; exit 7\" TERM; echo ready; sleep 600 & wait'"
# Ignores SIGTERM (and so does the sleep, which inherits the ignored disposition): only the
# SIGKILL after the grace ends it.
IGNORES_TERM = "sh -c 'trap \"\" TERM; echo ready; sleep 600 & wait'"


def timed_free(shoal: Shoal, alloc_id: str) -> float:
    start = time.monotonic()
    run = shoal("free", alloc_id)
    assert run.exit_code == 0, run.stderr
    return time.monotonic() - start


def test_free_sends_sigterm_and_the_trap_runs_within_the_grace(
    shoal: Shoal, podman_engine: Podman
) -> None:
    made = alloc(shoal, podman_engine, entry=TRAPS_TERM)
    cid = made["resource"]["metadata"]["container"]
    seen = inspect(podman_engine, cid)
    assert seen["Config"]["StopTimeout"] == GRACE  # any stop the engine makes has it too
    assert made["resource"]["metadata"]["grace_seconds"] == GRACE
    took = timed_free(shoal, made["id"])
    assert took < GRACE, f"free took {took:.1f}s: the trap did not end it within the grace"
    assert not exists(podman_engine, cid)
    ended = status(shoal, made["id"])
    assert ended["status"] == "FREED"
    outcome = ended["detail"]
    assert outcome["exit_code"] == 7, outcome  # the trap's own exit: SIGTERM reached it
    assert "got SIGTERM" in outcome["log_tail"], outcome
    assert outcome["state"] == "exited"


def test_sigkill_follows_after_the_grace_it_was_allocated_with(
    shoal: Shoal, podman_engine: Podman, write_config: Callable[[str], Path]
) -> None:
    made = alloc(shoal, podman_engine, entry=IGNORES_TERM)
    cid = made["resource"]["metadata"]["container"]
    # A grace configured later is for later allocations: this one's container was made (its
    # StopTimeout) and its lifetime supervised with GRACE.
    write_config('[drivers."container/default"]\ngrace_seconds = 60\n')
    took = timed_free(shoal, made["id"])
    assert GRACE <= took < GRACE + 20, f"free took {took:.1f}s, the grace is {GRACE}s"
    assert not exists(podman_engine, cid)
    outcome = status(shoal, made["id"])["detail"]
    assert outcome["exit_code"] == 137, outcome  # SIGKILL
    assert "ready" in outcome["log_tail"]


def test_status_and_free_of_a_container_import_neither_pydantic_nor_httpx(
    shoal: Shoal, podman_engine: Podman, home: Path
) -> None:
    # The instance has a config table: `alloc` checks it (pydantic), `status` and `free` of
    # the allocation read the engine and grace it recorded and do not.
    made = alloc(shoal, podman_engine, entry=TRAPS_TERM)
    # DOCKER_HOST unset: the allocation's own engine is the one asked.
    heavy = {"pydantic", "pydantic_core", "httpx", "httpcore"}
    # Nor what only `alloc` uses (capacity, images, the engine's cached totals), nor the
    # `socket` module (its enums; the engine client speaks on `_socket`).
    alloc_only = {
        "drivers.spec.capacity",
        "drivers.container.images",
        "providers.core.ttlcache",
        "socket",
    }
    for args in (["status", made["id"], "--json"], ["free", made["id"]]):
        loaded = _modules(home, *args)
        assert not _top(loaded) & heavy, args
        assert not loaded & alloc_only, (args, sorted(loaded & alloc_only))
    assert status(shoal, made["id"])["status"] == "FREED"
