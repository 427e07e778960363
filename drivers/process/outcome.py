"""How a `process` workload ended and what it wrote: `describe` (running, or its exit code,
signal, time, reason and last output lines, as its supervisor recorded them in the
workspace) and output.log, tailed and followed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from drivers.spec.types import STATUS_ALLOCATED, Resource
from drivers.supervisor.supervise import LOG_FILE, OUTCOME_FILE
from providers.core.errors import NotFoundError

if TYPE_CHECKING:
    from drivers.process.workloads import Workloads

_POLL_SECONDS = 0.02
OUTCOME_WAIT_SECONDS = 2.0  # for a supervisor about to record how its workload ended
FOLLOW_POLL_SECONDS = 0.2
TAIL_LINES, TAIL_CHARS = 10, 2000  # `log_tail`: the last lines of output.log


def describe(driver: Workloads, res: Resource) -> dict[str, Any]:
    """Running: its pid and whether its supervisor is there to end it on time. Ended:
    its exit code (128+N after signal N), the signal, when, why (`exited` by itself,
    `expired`, `stopped` by `free`), and the last lines of its output; kept with the
    workspace until `free`."""
    workspace = driver.workspace(res.identifier)
    if not workspace.is_dir():
        return {"state": "gone", "message": "the workspace no longer exists"}
    watched = driver.supervisor_identity(res) is not None  # not by a shoal from before supervisors
    supervised = watched and driver.supervisor_alive(res)
    if driver.status(res) == STATUS_ALLOCATED:
        identity = driver.workload_identity(res)
        deadline = res.metadata.get("deadline")
        return {
            "state": "running",
            "pid": identity[0] if identity else None,
            # "gone": killed; the next shoal command past the deadline ends the workload
            "supervisor": "running" if supervised else ("gone" if watched else None),
            "deadline": deadline if isinstance(deadline, str) else None,
        }
    outcome = read_outcome(workspace, wait=OUTCOME_WAIT_SECONDS if supervised else 0.0)
    unrecorded = {} if outcome else {"message": "it ended with no supervisor to record how"}
    return {
        **unrecorded,
        "state": "exited",
        "exit_code": outcome.get("exit_code"),
        "signal": outcome.get("signal"),
        "finished": outcome.get("ended"),
        "reason": outcome.get("reason"),
        "by": outcome.get("by"),  # who ended it: its supervisor, or shoal (it was gone)
        "log_tail": text_tail(workspace / LOG_FILE, TAIL_LINES, TAIL_CHARS),
    }


def follow_log(
    driver: Workloads, res: Resource, *, tail: int | None, follow: bool
) -> Iterator[bytes]:
    """output.log: the last `tail` lines (all without it); with `follow`, what it writes
    next, until the workload and everything it started have ended."""
    path = driver.workspace(res.identifier) / LOG_FILE
    try:
        log = path.open("rb")
    except FileNotFoundError:
        raise NotFoundError(
            f"{res.identifier}: no output log ({path} is gone with its workspace)"
        ) from None
    with log:
        log.seek(tail_offset(log, tail) if tail is not None else 0)
        while True:
            # Looked at before reading: what it wrote before it ended is read below.
            ended = not follow or not driver.running(res)
            chunk = log.read(1 << 16)
            if chunk:
                yield chunk
            elif ended:
                return
            else:
                time.sleep(FOLLOW_POLL_SECONDS)


def read_outcome(workspace: Path, wait: float) -> dict[str, Any]:
    """The supervisor's record; `wait` seconds for one about to be written."""
    deadline = time.monotonic() + wait
    while True:
        try:
            found = json.loads((workspace / OUTCOME_FILE).read_text())
            return found if isinstance(found, dict) else {}
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                return {}
        time.sleep(_POLL_SECONDS)


def tail_offset(log: BinaryIO, lines: int) -> int:
    """Where the last `lines` lines of `log` begin (a last line may lack its newline)."""
    end = log.seek(0, os.SEEK_END)
    if lines <= 0:
        return end
    position, seen = end, 0
    while position > 0:
        step = min(1 << 16, position)
        position -= step
        log.seek(position)
        block = log.read(step)
        stop = len(block)
        if position + step == end and block.endswith(b"\n"):
            stop -= 1  # the final newline ends the last line; it starts none
        while True:
            stop = block.rfind(b"\n", 0, stop)
            if stop < 0:
                break
            seen += 1
            if seen == lines:
                return position + stop + 1
    return 0


def text_tail(path: Path, lines: int, chars: int) -> str:
    """The last `lines` lines of a file as text (at most `chars` of them); "" without it."""
    try:
        with path.open("rb") as log:
            start = tail_offset(log, lines)
            end = log.seek(0, os.SEEK_END)
            log.seek(max(start, end - chars * 4))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return text[-chars:].strip()
