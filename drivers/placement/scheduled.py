"""Whether a launch really found room, where the backend says so only later: a Kubernetes pod
is created at once and then waits for a node. One still unscheduled past a timeout (the
scheduler's `Unschedulable`, or no node given at all: no pool could grow to take it) is a
launch that found no room, which the failover treats as EC2's InsufficientInstanceCapacity.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from providers.core.errors import NoCapacityError

if TYPE_CHECKING:
    from drivers.service import Drivers
    from drivers.spec.views import AllocationView

# How long a pod may wait for a node before its offer counts as full: long enough for a
# cluster autoscaler (Karpenter, a node group) to add one, which takes a minute or two.
SCHEDULE_SECONDS = 180.0
POLL_SECONDS = 1.0
# Drivers whose allocations are watched so (the others' launch answers for their room).
WATCHED = ("kubernetes",)
_RUNNING = ("Running", "Succeeded", "Failed", "Complete")


class Unscheduled(NoCapacityError):
    """The workload found no node within SCHEDULE_SECONDS."""


def unscheduled(ctx: Drivers, view: AllocationView) -> str | None:
    """None once the workload is on a node; else, past SCHEDULE_SECONDS, why not
    (`Unschedulable after 3m: 0/4 nodes are available: ...`)."""
    from drivers.service.context import resource_of
    from drivers.spec.base import DescribesWorkload
    from providers.core.timeutil import human_duration

    if view.driver.partition("/")[0] not in WATCHED:
        return None
    driver = ctx.driver(view.driver)
    if not isinstance(driver, DescribesWorkload):
        return None
    resource = resource_of(ctx.ledger.get(view.id))
    began = time.monotonic()
    while True:
        seen = driver.describe(resource)
        if seen.get("node") or seen.get("phase") in _RUNNING:
            return None
        waited = time.monotonic() - began
        if waited >= SCHEDULE_SECONDS:
            reason = str(seen.get("reason") or "not scheduled")
            message = " ".join(str(seen.get("message") or "").split())[:160]
            text = f"{reason} after {human_duration(waited)}"
            return f"{text}: {message}" if message else text
        time.sleep(min(POLL_SECONDS, SCHEDULE_SECONDS - waited))
