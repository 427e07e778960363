"""`shoal wait`: until allocations reach a state, as `docker wait` and `kubectl wait` do.

`ended` is any status an allocation does not move on from by itself: not holding capacity
(ALLOCATING, ALLOCATED, FREEING, ORPHANED) and not booked ahead (RESERVED); so EXITED,
EXPIRED, FREED, FAILED, LAPSED, GONE and whatever a driver records later. `allocated` is
ALLOCATED (a reservation once it is claimed).

Each look is `status` itself: the row reconciled with its driver. A workload whose
supervisor was killed (so nobody wrote its end into the ledger) is seen ending all the
same, and what the look finds is recorded as `status ID` would record it. Looks come
quickly at first (a short job's end is seen at once), then every POLL_MAX_SECONDS.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drivers.ledger import book as L
from drivers.service.context import Drivers
from drivers.service.listing import status
from drivers.spec.views import StatusView
from providers.core.errors import NotFoundError, RetryableError, ShoalError, UsageError

ENDED = "ended"
ALLOCATED = "allocated"
CONDITIONS = (ENDED, ALLOCATED)
# Statuses an allocation still moves on from: it holds capacity, is being freed, or is booked.
NOT_YET_ENDED = frozenset({L.ALLOCATING, L.ALLOCATED, L.FREEING, L.ORPHANED, L.RESERVED})
POLL_FIRST_SECONDS = 0.1
POLL_MAX_SECONDS = 1.0


@dataclass(frozen=True)
class Waited:
    """An allocation that reached the state waited for: as `status ID` shows it then, and
    how its workload ended when a driver recorded that (exit code 0-255, 128+N after
    signal N)."""

    view: StatusView
    exit_code: int | None

    def shown(self) -> str:
        """What `wait` prints for it: the exit code when known, else its status."""
        return str(self.exit_code) if self.exit_code is not None else self.view.allocation.status


def reached(condition: str, status_: str) -> bool:
    if condition == ALLOCATED:
        return status_ == L.ALLOCATED
    return status_ not in NOT_YET_ENDED


def wait(
    ctx: Drivers,
    ids: list[str],
    condition: str = ENDED,
    timeout: float | None = None,
    *,
    each: Callable[[Waited], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[Waited]:
    """Wait until every allocation of `ids` reached `condition`; their states in the order
    given. `each` hears of them in that order as soon as they and all before them reached
    it (what `docker wait` prints as it goes). An unknown id is a UsageError before any
    wait; `timeout` seconds passing a RetryableError naming what is still awaited; an
    allocation that ended while `allocated` was awaited can never reach it: a ShoalError."""
    if condition not in CONDITIONS:
        raise UsageError(f"--for {condition!r}: use one of {', '.join(CONDITIONS)}")
    ids = list(dict.fromkeys(ids))
    for one in ids:
        try:
            ctx.ledger.get(one)
        except NotFoundError:
            raise UsageError(
                f"no allocation {one!r}; `shoal status --all` lists them (nothing was waited for)"
            ) from None
    deadline = None if timeout is None else clock() + timeout
    done: dict[str, Waited] = {}
    told = 0
    delay = POLL_FIRST_SECONDS
    while True:
        last: dict[str, str] = {}
        for one in ids:
            if one in done:
                continue
            seen = status(ctx, one).allocation.status
            if reached(condition, seen):
                done[one] = _waited(ctx, one)
            elif condition == ALLOCATED and reached(ENDED, seen):
                raise ShoalError(f"{one} is {seen}: it ended before it was allocated")
            else:
                last[one] = seen
        while told < len(ids) and ids[told] in done:
            if each is not None:
                each(done[ids[told]])
            told += 1
        if not last:
            return [done[one] for one in ids]
        if deadline is not None and clock() >= deadline:
            still = ", ".join(f"{one} is still {seen}" for one, seen in last.items())
            raise RetryableError(
                f"timed out waiting for {condition}: {still}; give a longer --timeout"
            )
        pause = delay if deadline is None else min(delay, max(deadline - clock(), 0.0))
        sleep(pause)
        delay = min(delay * 2, POLL_MAX_SECONDS)


def _waited(ctx: Drivers, alloc_id: str) -> Waited:
    """The allocation as `status ID` shows it now, with its recorded outcome's exit code."""
    view = status(ctx, alloc_id)  # a second look: the first one may have just recorded it
    outcome = _outcome(ctx, alloc_id) or view.detail or {}
    code = outcome.get("exit_code")
    return Waited(view, code if isinstance(code, int) and not isinstance(code, bool) else None)


def _outcome(ctx: Drivers, alloc_id: str) -> dict[str, Any] | None:
    """How its workload ended, as its supervisor, `status` or `free` recorded it."""
    meta = (ctx.ledger.get(alloc_id).state or {}).get("metadata")
    outcome = meta.get("outcome") if isinstance(meta, dict) else None
    return outcome if isinstance(outcome, dict) else None
