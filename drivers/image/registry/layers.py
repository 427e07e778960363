"""Applying an image's layers, in order, into one root filesystem.

Each layer is a tar stream unpacked with the archive rules of `drivers.image.extractor`
(no absolute paths, no `..`, nothing written through a link, no device nodes, setuid and
setgid stripped, caps on bytes and entries over the whole image), plus what makes a stack
of layers one tree (the OCI image spec's "Applying Changesets"):

- `DIR/.wh.NAME` deletes `DIR/NAME` of the layers below (a file, a link or a whole tree);
  the whiteout itself is not written.
- `DIR/.wh..wh..opq` (an opaque directory) hides every entry of `DIR` from the layers below;
  what this layer adds to `DIR` stays, wherever it comes in the stream.
- An absolute symbolic link means the image's root (`/etc/alternatives/x -> /usr/bin/x`):
  kept as written, checked as that path from the root.
- An entry of a lower layer is replaced by one of another kind (a directory by a file, a
  file by a directory); inside one layer the archive rules stand (a member may not replace
  a directory of its own layer).

Deletions go through directory descriptors opened with O_NOFOLLOW, as every write does: a
whiteout never deletes through a link, and never outside the root.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from drivers.image.extractor import Caps, Extractor, link_target_parts, safe_parts
from drivers.image.tarstream import DIRECTORY, SYMLINK, Member, TarStream, UnsafeArchiveError

WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass
class LayerExtractor(Extractor):
    """An Extractor over several layers: `next_layer()` before each one."""

    layer: int = 0
    # The paths this layer wrote: an opaque marker keeps them, and replacing one of them with
    # another kind of entry is the archive rule's to refuse.
    _mine: set[tuple[str, ...]] = field(default_factory=set)

    def next_layer(self) -> None:
        self.layer += 1
        self._mine = set()

    def add(self, member: Member, tar: TarStream) -> None:
        parts = safe_parts(member.name, member.name)
        name = parts[-1] if parts else ""
        if name.startswith(WHITEOUT):
            self._count(member)
            if name == OPAQUE:
                self._opaque(parts[:-1], member.name)
            else:
                gone = name[len(WHITEOUT) :]
                if not gone or gone in (".", ".."):
                    raise UnsafeArchiveError(
                        f"unsafe archive: whiteout {member.name!r} names nothing to delete"
                    )
                self._delete(parts[:-1], gone, member.name)
            return
        if parts:
            self._make_room(parts, member)
            self._mine.add(parts)
        if member.kind == SYMLINK and member.linkname.startswith("/") and parts:
            self._rooted_symlink(parts, member)
            return
        super().add(member, tar)

    def _rooted_symlink(self, parts: tuple[str, ...], member: Member) -> None:
        """An absolute link is the image's own (`/etc/alternatives/x -> /usr/bin/x`): it
        means its root, not the host's. Kept as written, checked as the path it names from
        the root (no `..` above it); nothing is ever written through it (O_NOFOLLOW)."""
        self._count(member)
        if "\0" in member.linkname:
            raise UnsafeArchiveError(f"unsafe archive: symlink {member.name!r} has a NUL")
        link_target_parts((), member.linkname.lstrip("/"), member.name)
        self._files.discard(parts)
        parent = self._dir(parts[:-1], member.name)
        self._create(
            parent,
            parts[-1],
            member.name,
            lambda: os.symlink(member.linkname, parts[-1], dir_fd=parent),
        )

    # -- what a layer removes of the ones below ------------------------------------------

    def _make_room(self, parts: tuple[str, ...], member: Member) -> None:
        """A lower layer's entry of another kind at `parts` (or a lower file or link where
        this member needs a directory on its way) goes first."""
        for depth in range(1, len(parts) + 1):
            here = parts[:depth]
            if here in self._mine:
                continue
            last = depth == len(parts)
            want_dir = not last or member.kind == DIRECTORY
            parent = self._dir(here[:-1], member.name)
            try:
                info = os.stat(here[-1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return  # nothing below from here on
            is_dir = stat.S_ISDIR(info.st_mode)
            if is_dir and not want_dir:
                self._remove(here, member.name)  # a lower directory replaced by a file
            elif not is_dir and want_dir:
                self._remove(here, member.name)  # a lower file or link replaced by a directory
                return

    def _delete(self, dir_parts: tuple[str, ...], gone: str, member: str) -> None:
        target = (*dir_parts, gone)
        if target in self._mine:
            return  # this layer's own entry: a whiteout hides only what is below
        if not self._exists(target, member):
            return  # nothing below to delete (and no directory is made for it)
        self._remove(target, member)

    def _exists(self, parts: tuple[str, ...], member: str) -> bool:
        """Whether `parts` exists, looked up one directory at a time without making any; a
        way through a link or a file is refused (a whiteout must not delete through one)."""
        for depth in range(1, len(parts) + 1):
            parent = self._dir(parts[: depth - 1], member)
            try:
                info = os.stat(parts[depth - 1], dir_fd=parent, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if depth < len(parts) and not stat.S_ISDIR(info.st_mode):
                raise UnsafeArchiveError(
                    f"unsafe archive: whiteout {member!r} goes through "
                    f"{'/'.join(parts[:depth])!r}, which is a link or a file"
                )
        return True

    def _opaque(self, dir_parts: tuple[str, ...], member: str) -> None:
        fd = self._dir(dir_parts, member)
        self._mine.add(dir_parts)
        for entry in os.listdir(fd):
            child = (*dir_parts, entry)
            if child not in self._mine and not any(
                mine[: len(child)] == child for mine in self._mine
            ):
                self._remove(child, member)

    def _remove(self, parts: tuple[str, ...], member: str) -> None:
        """Delete `parts` and everything under it, through descriptors (never a link)."""
        for cached in [p for p in self._dirs if p[: len(parts)] == parts]:
            os.close(self._dirs.pop(cached))
        for known in [p for p in self._dir_meta if p[: len(parts)] == parts]:
            del self._dir_meta[known]
        self._files = {p for p in self._files if p[: len(parts)] != parts}
        parent = self._dir(parts[:-1], member)
        _remove_at(parent, parts[-1])


def _remove_at(parent: int, name: str) -> None:
    info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    try:
        os.fchmod(fd, stat.S_IMODE(info.st_mode) | 0o700)  # a read-only directory of the image
        for entry in os.listdir(fd):
            _remove_at(fd, entry)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent)


def new_root(root: os.PathLike[str] | str, caps: Caps) -> LayerExtractor:
    from pathlib import Path

    return LayerExtractor(Path(root), caps)
