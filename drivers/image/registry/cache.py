"""Blobs by digest: stored once, shared by every image that has them, verified before use.

    IMAGES/blobs/sha256/HEX             a complete blob whose bytes hash to its name
    IMAGES/blobs/sha256/.HEX.partial    bytes received so far (a pull cut, kill -9 included)
    IMAGES/blobs/sha256/.HEX.lock       flock while a pull fetches or checks it

A pull takes a blob's lock before it looks: eight pulls of one image fetch each blob once,
the others wait (and say so) and then find it complete. A partial file is resumed with
`Range` from its length, its bytes hashed first so the digest covers the whole blob; bytes
past the size the manifest declared are refused (a server or manifest that lies). A blob is
renamed into place only once its digest and size match, and a complete blob is hashed
again before it is used (a disk that lost bytes must not unpack garbage).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from providers.core.errors import ShoalError

HASHES = {"sha256": 64, "sha512": 128}  # the OCI image spec's registered algorithms
READ_CHUNK = 1 << 20


class DigestMismatchError(ShoalError):
    """A blob's bytes do not hash to its digest, or are not the size declared for it."""


def split_digest(digest: str) -> tuple[str, str]:
    """("sha256", hex) of a digest; a ShoalError for anything else (a digest names a path)."""
    algo, _, hexpart = digest.partition(":")
    if algo not in HASHES or len(hexpart) != HASHES[algo] or not _is_hex(hexpart):
        raise ShoalError(f"not a content digest: {digest[:80]!r} (expected sha256:<64 hex>)")
    return algo, hexpart


def _is_hex(text: str) -> bool:
    return all(ch in "0123456789abcdef" for ch in text)


@dataclass
class Fetch:
    """What `BlobStore.fetch` did: bytes that came over the network, and whether the blob
    was there already (verified)."""

    path: Path
    downloaded: int
    cached: bool
    resumed_at: int = 0


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root / "blobs"

    def path(self, digest: str) -> Path:
        algo, hexpart = split_digest(digest)
        return self.root / algo / hexpart

    def has(self, digest: str) -> bool:
        return self.path(digest).is_file()

    @contextlib.contextmanager
    def _locked(
        self, digest: str, timeout: float, on_wait: Callable[[float], None] | None
    ) -> Iterator[None]:
        from drivers.image.pull import locked

        final = self.path(digest)
        final.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
        busy = (
            f"blob {digest[:19]}: another pull held it for {timeout:.0f}s; try again (or "
            "raise [image] lock_timeout_seconds)"
        )
        with locked(final.with_name(f".{final.name}.lock"), timeout, on_wait, busy):
            yield

    def fetch(
        self,
        digest: str,
        size: int,
        opener: Callable[[int], Iterator[bytes]],
        *,
        lock_timeout: float = 600.0,
        on_bytes: Callable[[int], None] | None = None,
        on_wait: Callable[[float], None] | None = None,
        on_resume: Callable[[int], None] | None = None,
    ) -> Fetch:
        """The blob's path, fetched through `opener(offset)` (the body from `offset` on)
        unless a complete, verified copy is there."""
        algo, hexpart = split_digest(digest)
        final = self.path(digest)
        with self._locked(digest, lock_timeout, on_wait):
            if final.is_file():
                try:
                    verify_file(final, digest, size)
                    return Fetch(final, 0, True)
                except DigestMismatchError:
                    final.unlink(missing_ok=True)  # damaged at rest: fetched again below
            partial = final.with_name(f".{hexpart}.partial")
            hasher = hashlib.new(algo)
            have = _hash_existing(partial, hasher, size)
            if have and on_resume is not None:
                on_resume(have)
            downloaded = 0
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
            fd = os.open(partial, flags, 0o644)
            try:
                if have < size or size == 0:
                    for chunk in opener(have):
                        if have + len(chunk) > size:
                            raise DigestMismatchError(
                                f"blob {digest}: the server sent more than the {size} bytes "
                                "the manifest declares; nothing of it was kept"
                            )
                        _write_all(fd, chunk)
                        hasher.update(chunk)
                        have += len(chunk)
                        downloaded += len(chunk)
                        if on_bytes is not None:
                            on_bytes(len(chunk))
                os.fsync(fd)
            except DigestMismatchError:
                os.close(fd)
                fd = -1
                partial.unlink(missing_ok=True)
                raise
            except BaseException:
                # What came is kept to resume; an empty partial is nothing to resume.
                with contextlib.suppress(OSError):
                    if os.fstat(fd).st_size == 0:
                        partial.unlink()
                raise
            finally:
                if fd >= 0:
                    os.close(fd)
            if have != size or hasher.hexdigest() != hexpart:
                partial.unlink(missing_ok=True)  # a resume cannot mend wrong bytes
                what = (
                    f"{have} bytes where the manifest declares {size}"
                    if have != size
                    else f"bytes that hash to {algo}:{hasher.hexdigest()}"
                )
                raise DigestMismatchError(
                    f"blob {digest}: the registry sent {what}; nothing of it was kept"
                )
            os.chmod(partial, 0o444)
            os.replace(partial, final)
            return Fetch(final, downloaded, False, resumed_at=have - downloaded)

    def open_verified(self, digest: str, size: int) -> Iterator[bytes]:
        """A complete blob's bytes, hashed as they are read; a mismatch at the end raises
        (the caller unpacks into a temp dir, so nothing wrong becomes visible)."""
        algo, hexpart = split_digest(digest)
        hasher = hashlib.new(algo)
        seen = 0
        with open(self.path(digest), "rb") as blob:
            while chunk := blob.read(READ_CHUNK):
                hasher.update(chunk)
                seen += len(chunk)
                yield chunk
        if seen != size or hasher.hexdigest() != hexpart:
            with contextlib.suppress(OSError):
                self.path(digest).unlink()
            raise DigestMismatchError(f"blob {digest}: damaged on disk; pull again")

    def remove_unused(self, keep: set[str], older_than: float | None = None) -> list[str]:
        """Delete blobs no kept image names (and leftovers of pulls nobody holds); returns
        the digests removed."""
        removed: list[str] = []
        if not self.root.is_dir():
            return removed
        now = time.time()
        for algo_dir in self.root.iterdir():
            if algo_dir.name not in HASHES:
                continue
            for entry in algo_dir.iterdir():
                name = entry.name
                digest = f"{algo_dir.name}:{name}"
                if name.startswith("."):
                    if name.endswith(".partial"):
                        hexpart = name[1:].removesuffix(".partial")
                        held = f"{algo_dir.name}:{hexpart}" in keep
                        if not held and unlocked(algo_dir / f".{hexpart}.lock"):
                            entry.unlink(missing_ok=True)
                    continue
                if digest in keep:
                    continue
                if older_than is not None and now - entry.stat().st_mtime < older_than:
                    continue
                if unlocked(algo_dir / f".{name}.lock"):
                    entry.unlink(missing_ok=True)
                    removed.append(digest)
        return removed


def verify_file(path: Path, digest: str, size: int) -> None:
    algo, hexpart = split_digest(digest)
    hasher = hashlib.new(algo)
    seen = 0
    with open(path, "rb") as blob:
        while chunk := blob.read(READ_CHUNK):
            hasher.update(chunk)
            seen += len(chunk)
    if seen != size or hasher.hexdigest() != hexpart:
        raise DigestMismatchError(f"blob {digest}: {path} does not match its digest")


def _hash_existing(partial: Path, hasher: hashlib._Hash, size: int) -> int:
    """Feed a partial file's bytes to `hasher`; its length (0 when there is none, or when it
    is longer than the blob: it is then started over)."""
    try:
        with open(partial, "rb") as held:
            length = os.fstat(held.fileno()).st_size
            if length > size:
                raise OSError("longer than the blob")
            while chunk := held.read(READ_CHUNK):
                hasher.update(chunk)
            return length
    except FileNotFoundError:
        return 0
    except OSError:
        partial.unlink(missing_ok=True)
        return 0


def unlocked(lock: Path) -> bool:
    """Whether nobody holds a blob's lock now (a pull in progress keeps its blob)."""
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
