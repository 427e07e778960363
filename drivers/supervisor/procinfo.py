"""Process identity that survives pid reuse: a pid plus its kernel start time."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name may hold spaces and parentheses; the fields after the last ')' do not.
    return raw[raw.rfind(")") + 2 :].split()


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    fields = _stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def is_alive(pid: int, started: str | None) -> bool:
    """True when `pid` runs and is the same process that started at `started` (not a zombie)."""
    if pid <= 0:
        return False
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return False
    return started is None or fields[19] == started


def marked(marker: bytes) -> list[tuple[int, str]]:
    """Live processes whose environment holds the `NAME=value` entry `marker`, in any group.

    Workloads may leave their process group or session (setsid); the marker they inherit
    is what tells them, and only them, apart (a process that clears its own environment
    escapes this: only a cgroup would hold it).
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        fields = _stat_fields(int(entry.name))
        if not fields or len(fields) < 20 or fields[0] in ("Z", "X"):
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append((int(entry.name), fields[19]))
    return found


def signal_exactly(pid: int, started: str | None, signum: int) -> bool:
    """Signal `pid` only if it is still the process that started at `started`.

    A pidfd pins the process: checked once after opening, it cannot be a reused pid when
    the signal goes out. False when the process is gone.
    """
    import signal as _signal

    try:
        fd = os.pidfd_open(pid)
    except (ProcessLookupError, OSError):
        return False
    try:
        if not is_alive(pid, started):
            return False
        _signal.pidfd_send_signal(fd, signum)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def self_identity() -> tuple[int, str | None]:
    pid = os.getpid()
    return pid, start_time(pid)


def reap(pid: int) -> None:
    """Collect `pid` if it is our exited child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
