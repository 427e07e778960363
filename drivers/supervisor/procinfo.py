"""Process identity that survives pid reuse: a pid plus its kernel start time, read from /proc
once here for shoal and for the supervisor. The standard library only (os, signal): the
supervisor runs by path with no shoal on its sys.path and loads this file from beside it."""

from __future__ import annotations

import contextlib
import os
import signal


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (the state is [0], the parent's
    pid [1], the start time [19]); None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("ascii", "replace")
    except (OSError, ValueError):
        return None
    # The command name may hold spaces, parentheses and any bytes; the fields after the last
    # ')' hold none of them.
    return raw[raw.rfind(")") + 2 :].split()


def _running(pid: int) -> list[str] | None:
    """Its stat fields while it runs: not a zombie, and a stat long enough to name its start."""
    fields = stat_fields(pid)
    if not fields or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields


def start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    fields = stat_fields(pid)
    return fields[19] if fields and len(fields) > 19 else None


def is_alive(pid: int, started: str | None) -> bool:
    """True when `pid` runs and is the same process that started at `started` (not a zombie)."""
    if pid <= 0:
        return False
    fields = _running(pid)
    return fields is not None and (started is None or fields[19] == started)


def marked(marker: bytes, children_of: int | None = None) -> list[tuple[int, str]]:
    """Live processes whose environment holds the `NAME=value` entry `marker`, in any group,
    and those whose parent is `children_of`: (pid, start time) each, this process left out.

    Workloads may leave their process group or session (setsid); the marker they inherit
    is what tells them, and only them, apart (a process that clears its own environment
    escapes this: only a cgroup would hold it).
    """
    found = []
    me = os.getpid()
    parent = str(children_of) if children_of is not None else None
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        fields = _running(int(name))
        if fields is None:
            continue
        mine = fields[1] == parent
        if not mine:
            try:
                with open(f"/proc/{name}/environ", "rb") as fh:
                    mine = marker in fh.read().split(b"\0")
            except OSError:
                continue
        if mine:
            found.append((int(name), fields[19]))
    return found


def signal_exactly(pid: int, started: str | None, signum: int) -> bool:
    """Signal `pid` only if it is still the process that started at `started`.

    A pidfd pins the process: checked once after opening, it cannot be a reused pid when
    the signal goes out. False when the process is gone.
    """
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if not is_alive(pid, started):
            return False
        signal.pidfd_send_signal(fd, signum)
        return True
    except ProcessLookupError:
        return False
    finally:
        os.close(fd)


def wait_exit(pid: int, started: str | None, seconds: float) -> bool:
    """Wait up to `seconds` for `pid` (the process that started at `started`) to exit; True
    once it has. A pidfd wakes the caller the moment the process exits (polling every 20 ms
    cost `free` 10 ms on average); where none can be opened (an old kernel), it polls."""
    import select
    import time

    reap(pid)
    try:
        fd = os.pidfd_open(pid)
    except OSError:  # gone already, or no pidfds here
        fd = -1
    try:
        deadline = time.monotonic() + seconds
        while True:
            # Checked after the pidfd is open: it is this process's, not a reused pid's.
            reap(pid)
            if not is_alive(pid, started):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if fd >= 0:
                poller = select.poll()
                poller.register(fd, select.POLLIN)
                poller.poll(max(1, int(left * 1000)))
            else:
                time.sleep(min(0.02, left))
    finally:
        if fd >= 0:
            os.close(fd)


def self_identity() -> tuple[int, str | None]:
    pid = os.getpid()
    return pid, start_time(pid)


def reap(pid: int) -> None:
    """Collect `pid` if it is our exited child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
