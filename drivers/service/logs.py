"""`shoal logs ID`: a workload's output, from the drivers that keep one
(drivers.spec.base.ShowsLogs: process, container, kubernetes)."""

from __future__ import annotations

from collections.abc import Iterator

from drivers.ledger import book as L
from drivers.service import Drivers, recover
from providers.core.errors import NotFoundError, RetryableError, UsageError
from providers.core.wire import from_wire


def workload_logs(
    ctx: Drivers, alloc_id: str, *, tail: int | None = None, follow: bool = False
) -> Iterator[bytes]:
    """The output of `alloc_id`'s workload: its last `tail` lines (all when None); with
    `follow`, what it writes next, until it ends. Checked before the first byte: an unknown
    id, an allocation whose output is gone with it, a driver that keeps none."""
    from drivers.spec.base import ShowsLogs
    from drivers.spec.types import Resource

    if tail is not None and tail < 0:
        raise UsageError(f"--tail {tail}: give a number of lines, 0 or more")
    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    if row.status in (L.FREED, L.FAILED):
        raise NotFoundError(
            f"{row.id} is {row.status}: its workload's output went with it "
            f"({row.updated}); `shoal status {row.id}` shows what was recorded"
        )
    if row.status in L.IN_FLIGHT:
        raise RetryableError(f"{row.id} is {row.status.lower()}; try again shortly")
    if row.state is None:
        raise NotFoundError(f"{row.id} is {row.status}: no workload was started")
    driver = ctx.driver(row.driver)
    if not isinstance(driver, ShowsLogs):
        raise UsageError(f"driver {row.driver} keeps no workload output to show")
    return driver.logs(
        from_wire(Resource, row.state, strict=False), tail=tail, follow=follow
    )
