"""Waking a waiting `shoal alloc --wait` without polling: one named pipe (FIFO) per waiter.

A waiter makes its pipe (in a private directory beside the ledger) and holds both ends
open, then sleeps in `select` on it: no CPU until a byte arrives or its slow tick passes. A
shoal that frees capacity writes one byte into the pipe of the first waiter of each driver
(`ring`). Opening a pipe that nobody holds fails (ENXIO); a ring that cannot be delivered
(no reader, no pipe, something else in its place) tells nothing for certain, so the ledger
checks the waiter's pid before dropping its place. A ring opens nothing but a named pipe:
never through a symbolic link, and what it opened is checked before a byte is written.

A state dir on a filesystem without named pipes (some FUSE and network filesystems refuse
mkfifo) gets `Polling` instead: the waiter asks the ledger once a tick whether anything
changed, as the first waiter always does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import stat
import time
from pathlib import Path
from typing import Protocol

# mkfifo's answers on a filesystem that has no named pipes (EPERM: "does not support the
# type of node requested"); a permission problem is EACCES or EROFS.
NO_PIPES = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})


class Bell(Protocol):
    """What a waiter sleeps on: a `Doorbell`, or `Polling` where pipes cannot be made."""

    rings: bool
    token: str

    def wait(self, timeout: float) -> bool: ...
    def intact(self) -> bool: ...
    def close(self) -> None: ...


def bell_dir(ledger_path: Path) -> Path:
    return ledger_path.with_name(ledger_path.name + ".waiters")


def _open_pipe(path: Path, flags: int) -> int:
    """Open `path` only if it is a named pipe: never through a symbolic link (ELOOP), and a
    file or anything else found there is closed unused (ENXIO)."""
    fd = os.open(path, flags | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise OSError(errno.ENXIO, "not a named pipe", str(path))
    except BaseException:
        os.close(fd)
        raise
    return fd


class Doorbell:
    """This process's pipe; `token` names it in the waiters table."""

    rings = True  # a ring wakes it; a waiter that cannot be rung polls instead

    def __init__(self, directory: Path) -> None:
        directory.mkdir(mode=0o700, exist_ok=True)
        if stat.S_IMODE(directory.stat().st_mode) & 0o077:
            os.chmod(directory, 0o700)
        # What secrets.token_hex gives, without its import of hmac (OpenSSL's load, ~10 ms).
        self.token = os.urandom(8).hex()
        self.path = directory / self.token
        os.mkfifo(self.path, 0o600)
        try:
            # The read end first (a non-blocking open of the write end needs a reader), then
            # a write end of our own, so the pipe never reads as closed between rings.
            self._read = _open_pipe(self.path, os.O_RDONLY)
            try:
                self._write = _open_pipe(self.path, os.O_WRONLY)
            except BaseException:
                os.close(self._read)
                raise
        except BaseException:
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

    def intact(self) -> bool:
        """Whether its name still leads to its pipe (a deleted or replaced name cannot be
        rung: the waiter makes a new pipe)."""
        try:
            named = os.stat(self.path, follow_symlinks=False)
            held = os.fstat(self._read)
        except OSError:
            return False
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.path.unlink(missing_ok=True)  # a name only: a link there is not followed


class Polling:
    """A waiter without a pipe (a filesystem without named pipes): never rung, it sleeps a
    tick at a time and asks the ledger itself. Its token is empty: a ring skips it."""

    rings = False
    token = ""

    def wait(self, timeout: float) -> bool:
        time.sleep(max(0.0, timeout))
        return False

    def intact(self) -> bool:
        return True

    def close(self) -> None:
        pass


def open_bell(directory: Path) -> Bell:
    """A doorbell for a new waiter; on a filesystem without named pipes, Polling. Any other
    failure (permissions, a full disk) is raised."""
    try:
        return Doorbell(directory)
    except OSError as exc:
        if exc.errno in NO_PIPES:
            return Polling()
        raise


def ring(directory: Path, token: str) -> bool:
    """Wake the waiter whose pipe this is; False when it could not be rung (nobody holds the
    pipe, no pipe, or something else in its place): whether the waiter lives is its pid's
    to say."""
    if not token or "/" in token or token.startswith("."):
        return False
    try:
        fd = _open_pipe(directory / token, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.write(fd, b"!")
    except BlockingIOError:
        pass  # full: it has been rung already
    except OSError:
        return False
    finally:
        os.close(fd)
    return True


def forget(directory: Path, token: str) -> None:
    """Remove a dead waiter's pipe name."""
    if token and "/" not in token and not token.startswith("."):
        with contextlib.suppress(OSError):
            (directory / token).unlink()
