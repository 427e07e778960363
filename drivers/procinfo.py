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


def group_members(pgid: int, marker: bytes) -> list[tuple[int, str]]:
    """Live processes of group `pgid` whose environment holds the `NAME=value` entry `marker`.

    A group's id cannot be reused while any member lives, but once it empties another
    program's group may take the number; the marker tells our processes from theirs.
    """
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if not fields or len(fields) < 20 or fields[0] in ("Z", "X") or fields[2] != str(pgid):
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            found.append((int(entry.name), fields[19]))
    return found


def self_identity() -> tuple[int, str | None]:
    pid = os.getpid()
    return pid, start_time(pid)


def reap(pid: int) -> None:
    """Collect `pid` if it is our exited child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
