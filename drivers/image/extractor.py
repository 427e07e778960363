"""Writing an archive's members under the image directory, trusting nothing in them.

The extractor refuses, before anything becomes visible, every member that is unsafe:
absolute paths, `..` components, symlinks or hardlinks that leave the image directory,
device files and fifos, and archives past the caps on unpacked bytes or entries. setuid and
setgid bits are stripped. Every path is created through directory file descriptors opened
with O_NOFOLLOW, and files with O_EXCL|O_NOFOLLOW, so nothing is ever written through a link.
"""

from __future__ import annotations

import os
import stat
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from drivers.image.tarstream import (
    BLOCKDEV,
    CHAR,
    DIRECTORY,
    FIFO,
    HARDLINK,
    REGULAR,
    SYMLINK,
    Member,
    TarStream,
    UnsafeArchiveError,
)

T = TypeVar("T")
_DIR_FD_CACHE = 256
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def safe_parts(name: str, member: str) -> tuple[str, ...]:
    """Path components of a member name inside the image; unsafe names are refused."""
    if name.startswith("/"):
        raise UnsafeArchiveError(f"unsafe archive: member {member!r} has an absolute path")
    if "\0" in name:
        raise UnsafeArchiveError(f"unsafe archive: member {member!r} has a NUL in its name")
    clean = name and "/." not in name and "//" not in name and not name.startswith(".")
    if clean and name[-1] != "/":
        return tuple(name.split("/"))  # the common, clean case
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise UnsafeArchiveError(f"unsafe archive: member {member!r} has a '..' component")
    return parts


def link_target_parts(link_dir: tuple[str, ...], target: str, member: str) -> tuple[str, ...]:
    """Where a symlink in `link_dir` points, resolved by name; refused when it leaves."""
    if target.startswith("/"):
        raise UnsafeArchiveError(
            f"unsafe archive: symlink {member!r} points to the absolute path {target!r}"
        )
    resolved = list(link_dir)
    descended = False
    for part in target.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if descended:  # `a/b/..` is not `a` when `a/b` is a link (even a later one)
                raise UnsafeArchiveError(
                    f"unsafe archive: symlink {member!r} -> {target!r} climbs after a name, "
                    "so through another link it could leave the image directory"
                )
            if not resolved:
                raise UnsafeArchiveError(
                    f"unsafe archive: symlink {member!r} -> {target!r} leaves the image directory"
                )
            resolved.pop()
        else:
            resolved.append(part)
            descended = True
    return tuple(resolved)


@dataclass
class Caps:
    max_bytes: int
    max_entries: int


@dataclass
class Extractor:
    root: Path
    caps: Caps
    entries: int = 0
    bytes_unpacked: int = 0
    _root_fd: int = -1
    _dirs: OrderedDict[tuple[str, ...], int] = field(default_factory=OrderedDict)
    _dir_meta: dict[tuple[str, ...], tuple[int, int]] = field(default_factory=dict)
    _files: set[tuple[str, ...]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self._root_fd = os.open(self.root, _OPEN_DIR)
        # Modes are the archive's less the umask, as tar does for a regular user: an image
        # must not become writable to others because its archive said 0777.
        self._umask = os.umask(0o022)
        os.umask(self._umask)

    def close(self) -> None:
        for fd in self._dirs.values():
            os.close(fd)
        self._dirs.clear()
        if self._root_fd >= 0:
            os.close(self._root_fd)
            self._root_fd = -1

    # -- directories through fds, never through links ------------------------------------

    def _dir(self, parts: tuple[str, ...], member: str) -> int:
        if not parts:
            return self._root_fd
        fd = self._dirs.get(parts)
        if fd is not None:
            self._dirs.move_to_end(parts)
            return fd
        parent = self._dir(parts[:-1], member)
        name = parts[-1]
        try:
            fd = os.open(name, _OPEN_DIR, dir_fd=parent)
        except FileNotFoundError:
            os.mkdir(name, 0o700, dir_fd=parent)
            self._dir_meta.setdefault(parts, (0o755, 0))
            fd = os.open(name, _OPEN_DIR, dir_fd=parent)
        except (NotADirectoryError, OSError) as exc:
            raise UnsafeArchiveError(
                f"unsafe archive: member {member!r} goes through {'/'.join(parts)!r}, "
                f"which is a link or a file ({exc.strerror})"
            ) from None
        self._dirs[parts] = fd
        if len(self._dirs) > _DIR_FD_CACHE:
            _, old = self._dirs.popitem(last=False)
            os.close(old)
        return fd

    def _create(self, parent: int, name: str, member: str, make: Callable[[], T]) -> T:
        """Create an entry; an earlier file or link of that name goes, a directory refuses."""
        try:
            return make()
        except FileExistsError:
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                raise UnsafeArchiveError(
                    f"unsafe archive: member {member!r} replaces a directory"
                ) from None
            os.unlink(name, dir_fd=parent)
            return make()

    # -- members -------------------------------------------------------------------------

    def _count(self, member: Member) -> None:
        self.entries += 1
        if self.entries > self.caps.max_entries:
            raise UnsafeArchiveError(
                f"unsafe archive: more than {self.caps.max_entries} entries "
                "(raise [image] max_entries if this image is expected)"
            )
        if member.size and self.bytes_unpacked + member.size > self.caps.max_bytes:
            raise UnsafeArchiveError(
                f"unsafe archive: unpacks past {self.caps.max_bytes} bytes at {member.name!r} "
                "(a decompression bomb?; raise [image] max_unpacked_gib if expected)"
            )

    def add(self, member: Member, tar: TarStream) -> None:
        self._count(member)
        parts = safe_parts(member.name, member.name)
        kind = member.kind
        if kind == REGULAR and parts:  # most members: straight through
            self._file(parts, member, member.mode & 0o1777, tar)
            return
        if kind in (CHAR, BLOCKDEV, FIFO):
            what = {CHAR: "a character device", BLOCKDEV: "a block device", FIFO: "a fifo"}[kind]
            raise UnsafeArchiveError(f"unsafe archive: member {member.name!r} is {what}")
        if not parts:
            if kind == DIRECTORY:
                return  # "./" itself
            raise UnsafeArchiveError(f"unsafe archive: member {member.name!r} has no name")
        mode = member.mode & 0o1777  # setuid and setgid stripped
        if kind == DIRECTORY:
            self._dir(parts, member.name)
            self._dir_meta[parts] = (mode, member.mtime)
        elif kind == REGULAR:
            self._file(parts, member, mode, tar)
        elif kind == SYMLINK:
            link_target_parts(parts[:-1], member.linkname, member.name)
            if "\0" in member.linkname:
                raise UnsafeArchiveError(f"unsafe archive: symlink {member.name!r} has a NUL")
            # It may replace a file: a later hardlink to this name must not link the symlink.
            self._files.discard(parts)
            parent = self._dir(parts[:-1], member.name)
            self._create(
                parent,
                parts[-1],
                member.name,
                lambda: os.symlink(member.linkname, parts[-1], dir_fd=parent),
            )
        elif kind == HARDLINK:
            self._hardlink(parts, member)
        else:
            raise UnsafeArchiveError(
                f"unsafe archive: member {member.name!r} has unsupported type {kind!r}"
            )

    def _file(self, parts: tuple[str, ...], member: Member, mode: int, tar: TarStream) -> None:
        # Written for the 20,000-small-files case: every call and attribute here is per member.
        name = parts[-1]
        size = member.size
        if len(parts) == 1:
            parent = self._root_fd
        else:
            where = parts[:-1]
            parent = self._dirs.get(where, -1)  # the cache hit of _dir, without the call
            if parent < 0:
                parent = self._dir(where, member.name)
            else:
                self._dirs.move_to_end(where)
        try:
            fd = os.open(name, _CREATE_FILE, mode, dir_fd=parent)
        except FileExistsError:
            fd = self._create(
                parent,
                name,
                member.name,
                lambda: os.open(name, _CREATE_FILE, mode, dir_fd=parent),
            )
        try:
            whole = tar.small_data(size)
            if whole is not None:
                written = os.write(fd, whole) if size else 0  # an empty file needs no call
                if written < size:
                    _write_all(fd, memoryview(whole)[written:])
            else:
                for chunk in tar.data(size):
                    _write_all(fd, memoryview(chunk))
            if mode & 0o1000:  # sticky is not set by open(); everything else came with it
                os.fchmod(fd, mode & ~self._umask)
            mtime = member.mtime
            os.utime(fd, (mtime, mtime))
        finally:
            os.close(fd)
        self.bytes_unpacked += size
        self._files.add(parts)

    def _hardlink(self, parts: tuple[str, ...], member: Member) -> None:
        target = safe_parts(member.linkname, member.name)
        if target not in self._files:
            raise UnsafeArchiveError(
                f"unsafe archive: hardlink {member.name!r} -> {member.linkname!r} does not "
                "point to a file unpacked before it"
            )
        # Our own descriptor: looking up the destination may evict the cached one.
        source_dir = os.dup(self._dir(target[:-1], member.name))
        try:
            info = os.stat(target[-1], dir_fd=source_dir, follow_symlinks=False)
            if not stat.S_ISREG(info.st_mode):
                raise UnsafeArchiveError(
                    f"unsafe archive: hardlink {member.name!r} -> {member.linkname!r} is not "
                    "to a regular file"
                )
            parent = self._dir(parts[:-1], member.name)
            self._create(
                parent,
                parts[-1],
                member.name,
                lambda: os.link(
                    target[-1],
                    parts[-1],
                    src_dir_fd=source_dir,
                    dst_dir_fd=parent,
                    follow_symlinks=False,
                ),
            )
        finally:
            os.close(source_dir)
        self._files.add(parts)

    def finish(self) -> None:
        """Directory modes and times last (deepest first), so read-only ones are filled first.

        Directories stay owner-writable, or the image could not be removed by its owner.
        """
        for parts in sorted(self._dir_meta, key=len, reverse=True):
            mode, mtime = self._dir_meta[parts]
            fd = self._dir(parts, "/".join(parts))
            os.fchmod(fd, (mode | 0o700) & ~self._umask)
            if mtime:
                os.utime(fd, (mtime, mtime))


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view) :]
