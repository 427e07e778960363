"""Ending a `process` workload and all it started: through its supervisor (SIGTERM, grace,
SIGKILL), then by pid identity and by the allocation's environment marker for whatever it
left, recording an outcome "by shoal" when the supervisor could not.
"""

from __future__ import annotations

import contextlib
import signal
import time
from datetime import datetime
from typing import TYPE_CHECKING

from drivers.process.spawn import marker
from drivers.spec.types import Resource
from drivers.supervisor import procinfo
from drivers.supervisor.supervise import OUTCOME_FILE, now_text, write_outcome
from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from drivers.process.workloads import Workloads

_POLL_SECONDS = 0.02
SUPERVISOR_MARGIN_SECONDS = 10.0  # beyond grace, for a supervisor to stop its workload
DUE_SECONDS = 2.0  # a supervisor this close to its deadline is left to end the workload


def wait_gone(pid: int, started: str | None, seconds: float) -> bool:
    return procinfo.wait_exit(pid, started, seconds)


def stop_marked(identifier: str, grace: float) -> bool:
    """Stop every process carrying the allocation's marker: SIGTERM, grace, SIGKILL.
    True when there was one."""
    mark = marker(identifier)
    found = False
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        members = procinfo.marked(mark)
        if not members:
            return found
        found = True
        for pid, started in members:
            procinfo.signal_exactly(pid, started, sig)
        deadline = time.monotonic() + wait
        while members and time.monotonic() < deadline:
            time.sleep(_POLL_SECONDS)
            for pid, _ in members:
                procinfo.reap(pid)
            members = [m for m in members if procinfo.is_alive(*m)]
    if procinfo.marked(mark):
        raise ShoalError(f"processes of {identifier} survived SIGKILL; try again")
    return found


def stop(driver: Workloads, res: Resource) -> None:
    """End the workload and all it started. Its supervisor does it, and records how it
    ended; whatever it leaves (a supervisor killed with SIGKILL leaves it all) is stopped
    here, and recorded as stopped by shoal."""
    workspace = driver.workspace(res.identifier)
    grace = float(res.metadata.get("grace_seconds", driver.cfg.grace_seconds))
    supervisor = driver.supervisor_identity(res)
    if supervisor is not None and driver.supervisor_alive(res):
        pid, started = supervisor
        due = deadline_of(res)
        left = due - time.time() if due is not None else None
        wait = grace + SUPERVISOR_MARGIN_SECONDS
        if left is None or left > DUE_SECONDS:
            procinfo.signal_exactly(pid, started, signal.SIGTERM)
        else:  # its deadline has come: it is ending the workload already
            wait += max(left, 0.0)
        if not wait_gone(pid, started, wait):
            procinfo.signal_exactly(pid, started, signal.SIGKILL)
            wait_gone(pid, started, 5.0)
    stopped = False
    identity = driver.workload_identity(res)
    if identity is not None and procinfo.signal_exactly(*identity, signal.SIGTERM):
        stopped = True
        pid, started = identity
        if not wait_gone(pid, started, grace):
            procinfo.signal_exactly(pid, started, signal.SIGKILL)
            if not wait_gone(pid, started, 5.0):
                raise ShoalError(f"process {pid} of {res.identifier} survived SIGKILL; try again")
    # Its children, and whatever they started, even in sessions of their own.
    stopped = stop_marked(res.identifier, grace) or stopped
    if stopped and not (workspace / OUTCOME_FILE).exists():
        due = deadline_of(res)
        write_outcome(
            str(workspace),
            {
                "exit_code": None,
                "signal": None,
                "ended": now_text(),
                "reason": "expired" if due is not None and time.time() >= due else "stopped",
                "by": "shoal",
            },
        )


def deadline_of(res: Resource) -> float | None:
    """When the allocation's lifetime ends (Unix seconds): the supervisor's deadline, else
    the ledger's expiry."""
    for value in (res.metadata.get("deadline"), res.timeout):
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None
