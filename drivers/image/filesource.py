"""A local archive as a pull's source: a path, or a `file://` URL naming one.

It offers what `drivers.image.pull` reads of an HTTP source (read, the hasher fed as it
reads, bytes received, nothing announced), so a local archive is verified and unpacked by
the same path as a download: nothing visible before the checksum matches.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from providers.core.errors import NotFoundError, UsageError

if TYPE_CHECKING:
    import hashlib

    from drivers.image import checksum

CHUNK_BYTES = 1 << 20


def local_path(source: str) -> Path | None:
    """The file a source names (`file:///x.tar`, `/x.tar`, `./x.tar`, `x.tar` that exists),
    else None (an http(s) URL, or a registry reference)."""
    if source.startswith("file:"):
        parts = urlsplit(source)
        if parts.netloc not in ("", "localhost"):
            raise UsageError(
                f"file URL {source[:80]!r} names a host; only local files: file:///PATH"
            )
        if not parts.path:
            raise UsageError("file URL has no path; write it as file:///PATH")
        return Path(unquote(parts.path))
    if "://" in source:
        return None
    if source.startswith(("/", "./", "../", "~")):
        return Path(source).expanduser()
    path = Path(source)
    return path if path.is_file() else None


class FileSource:
    def __init__(
        self,
        path: Path,
        *,
        hasher: hashlib._Hash,
        on_bytes: Callable[[int, int | None], None] | None = None,
    ) -> None:
        self.path = path
        self.hasher = hasher
        self.on_bytes = on_bytes
        self.received = 0
        self.total: int | None = None
        self._fd = -1

    def open(self) -> None:
        try:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise NotFoundError(f"no such file: {self.path}") from None
        except IsADirectoryError:
            raise UsageError(f"{self.path} is a directory, not an archive") from None
        except OSError as exc:
            raise UsageError(f"cannot read {self.path}: {exc.strerror}") from None
        info = os.fstat(self._fd)
        if not os.path.stat.S_ISREG(info.st_mode):  # type: ignore[attr-defined]
            raise UsageError(f"{self.path} is not a regular file")
        self.total = info.st_size

    def announced(self) -> list[checksum.Sum]:
        return []  # a file announces nothing: --sum verifies it, else its digest is shown

    def read(self, size: int = -1) -> bytes:
        chunk = os.read(self._fd, size if size > 0 else CHUNK_BYTES)
        if chunk:
            self.hasher.update(chunk)
            self.received += len(chunk)
            if self.on_bytes is not None:
                self.on_bytes(self.received, self.total)
        return chunk

    def drain(self) -> None:
        while self.read(CHUNK_BYTES):
            pass

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> FileSource:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
