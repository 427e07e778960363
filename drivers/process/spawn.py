"""Starting a `process` workload and knowing it again: the supervisor's spawn with Ctrl-C and
SIGTERM held until it answers, its one-line answer, the identity files (pid plus kernel start
time) and the CPUs a new allocation is pinned to.

Identity is pid plus kernel start time, written by each process itself before it execs (the
supervisor's and the workload's), so a reused pid is never mistaken for ours and an
allocation interrupted by kill -9 can still be found and stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from drivers.process.outcome import text_tail
from drivers.spec.types import ALLOCATION_ID_KEY
from drivers.supervisor import procinfo
from drivers.supervisor.supervise import PID_FILE, SUPERVISOR_FILE, SUPERVISOR_LOG, write_identity
from providers.core.errors import ShoalError

CPUS_FILE = ".shoal-cpus"
SUPERVISOR = str(Path(__file__).resolve().parent.parent / "supervisor" / "supervise.py")
ANSWER_TIMEOUT_SECONDS = 60.0  # for the supervisor to start the workload (a loaded machine)
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}


def marker(identifier: str) -> bytes:
    """What every process of the allocation carries in its environment."""
    return f"{ALLOCATION_ID_KEY}={identifier}".encode()


def read_identity(workspace: Path, name: str = PID_FILE) -> tuple[int, str | None] | None:
    try:
        pid, started = (workspace / name).read_text().split()
        return int(pid), started
    except (OSError, ValueError):
        return None


def pick_cpus(root: Path, count: int) -> list[int]:
    """The `count` CPUs that the fewest live allocations under `root` are pinned to."""
    usable = sorted(os.sched_getaffinity(0))
    load: Counter[int] = Counter({cpu: 0 for cpu in usable})
    for other in root.iterdir():
        identity = read_identity(other)
        if identity and procinfo.is_alive(*identity):
            try:
                load.update(int(c) for c in (other / CPUS_FILE).read_text().split())
            except (OSError, ValueError):
                continue
    ranked = sorted(usable, key=lambda cpu: (load[cpu], cpu))
    return sorted(ranked[: max(1, min(count, len(usable)))])


def supervise(
    workspace: Path, spec: dict[str, Any]
) -> tuple[dict[str, Any], tuple[int, str | None]]:
    """Start the allocation's supervisor, which starts the workload; its answer (the
    workload's pid and start time, or why it could not start) and its identity.

    Ctrl-C or SIGTERM is held from before the spawn until the answer is in: by then the
    supervisor's identity file (written before it execs) and the workload's (written
    before the workload execs) are on disk, so the caller's cleanup always finds what it
    must stop. Without this an interrupt between fork and exec left a workload that no
    row accounted for."""
    supervisor_file = str(workspace / SUPERVISOR_FILE)

    def in_supervisor() -> None:
        # After fork, before exec: the supervisor records its own identity first.
        write_identity(supervisor_file)
        # exec keeps the signal mask: the supervisor must not start with signals blocked.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)

    errors = (workspace / SUPERVISOR_LOG).open("ab")
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
    try:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", SUPERVISOR],
                cwd="/",
                env={"PATH": os.defpath},  # not the workload's: it carries no marker
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
                start_new_session=True,
                preexec_fn=in_supervisor,
                close_fds=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            shutil.rmtree(workspace, ignore_errors=True)
            raise ShoalError(
                f"process driver: cannot start the supervisor ({sys.executable}): {exc}"
            ) from None
        finally:
            errors.close()
        answer = _answer(proc, spec)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)
    identity = read_identity(workspace, SUPERVISOR_FILE) or (
        proc.pid,
        procinfo.start_time(proc.pid),
    )
    if "pid" in answer:
        # Popen would warn when collected while the supervisor runs on; it outlives us.
        proc.returncode = 0
    else:
        try:  # it exits at once after an error; anything else is stopped
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log = text_tail(workspace / SUPERVISOR_LOG, 1, 300)
        answer.setdefault("detail", log)
    return answer, identity


def _answer(proc: subprocess.Popen[bytes], spec: dict[str, Any]) -> dict[str, Any]:
    """Hand the supervisor its spec; its one-line answer (an error when it gives none)."""
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
    except OSError:  # it died before reading: its stdout says so (nothing)
        with contextlib.suppress(OSError):
            proc.stdin.close()
    received = b""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + ANSWER_TIMEOUT_SECONDS
    poller = select.poll()  # not select(): a caller with 1,024 files open has fds past it
    poller.register(fd, select.POLLIN)
    while b"\n" not in received:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if not poller.poll(max(1, int(left * 1000))):
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        received += chunk
    proc.stdout.close()
    try:
        answer = json.loads(received.split(b"\n", 1)[0])
    except ValueError:
        return {"error": "supervisor"}
    return answer if isinstance(answer, dict) else {"error": "supervisor"}
