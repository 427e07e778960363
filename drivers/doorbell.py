"""Waking a waiting `shoal alloc --wait` without polling: one named pipe (FIFO) per waiter.

A waiter makes its pipe (in a private directory beside the ledger) and holds both ends
open, then sleeps in `select` on it: no CPU until a byte arrives or its slow tick passes. A
shoal that frees capacity writes one byte into the pipe of the first waiter of each driver
(`ring`). Opening a pipe that nobody holds fails (ENXIO), so a ring also tells a dead
waiter (kill -9) from a live one; the kernel closes a dead process's ends, so no pipe is
ever stale, only its name (removed with the waiter's row).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import select
import stat
from pathlib import Path


def bell_dir(ledger_path: Path) -> Path:
    return ledger_path.with_name(ledger_path.name + ".waiters")


class Doorbell:
    """This process's pipe; `token` names it in the waiters table."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(mode=0o700, exist_ok=True)
        if stat.S_IMODE(directory.stat().st_mode) & 0o077:
            os.chmod(directory, 0o700)
        self.token = secrets.token_hex(8)
        self.path = directory / self.token
        os.mkfifo(self.path, 0o600)
        try:
            # The read end first (a non-blocking open of the write end needs a reader), then
            # a write end of our own, so the pipe never reads as closed between rings.
            self._read = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            self._write = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            self.path.unlink(missing_ok=True)
            raise

    def wait(self, timeout: float) -> bool:
        """Sleep until rung or `timeout` seconds pass; True if rung. Ctrl-C interrupts it."""
        ready, _, _ = select.select([self._read], [], [], max(0.0, timeout))
        if not ready:
            return False
        self.drain()
        return True

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError, InterruptedError):
            while os.read(self._read, 512):
                pass

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.path.unlink(missing_ok=True)


def ring(directory: Path, token: str) -> bool:
    """Wake the waiter whose pipe this is; False when nobody holds it (the waiter is gone)."""
    if not token or "/" in token or token.startswith("."):
        return False
    try:
        fd = os.open(directory / token, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        # No reader (ENXIO) or no pipe: the waiter is gone. Anything else (a permission
        # problem) says nothing about it: it is left to its own slow tick.
        return exc.errno not in (errno.ENXIO, errno.ENOENT)
    try:
        os.write(fd, b"!")
    except BlockingIOError:
        pass  # full: it has been rung already
    finally:
        os.close(fd)
    return True


def forget(directory: Path, token: str) -> None:
    """Remove a dead waiter's pipe name."""
    if token and "/" not in token and not token.startswith("."):
        with contextlib.suppress(OSError):
            (directory / token).unlink()
