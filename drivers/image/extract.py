"""A streaming tar reader and an extractor that trusts nothing in the archive.

`tarfile` is not used to read: its `data` filter has had bypasses fixed only in recent patch
releases, and its per-member cost (~150 us) dominates archives of many small files. This
reader parses ustar, pax and GNU long-name headers itself, from any forward-only stream.

The extractor refuses, before anything becomes visible, every member that is unsafe:
absolute paths, `..` components, symlinks or hardlinks that leave the image directory,
device files and fifos, and archives past the caps on unpacked bytes or entries. setuid and
setgid bits are stripped. Every path is created through directory file descriptors opened
with O_NOFOLLOW, and files with O_EXCL|O_NOFOLLOW, so nothing is ever written through a link.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from drivers.image.decompress import Reader
from providers.errors import ShoalError

T = TypeVar("T")
BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
_MAX_MTIME = 2**40  # far past any real date, well inside what utime takes
READ_CHUNK = 1024 * 1024
MAX_META_BYTES = 1024 * 1024  # pax headers and GNU long names
_DIR_FD_CACHE = 256
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_CREATE_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

REGULAR, HARDLINK, SYMLINK, CHAR, BLOCKDEV, DIRECTORY, FIFO, CONTIGUOUS = (
    b"0",
    b"1",
    b"2",
    b"3",
    b"4",
    b"5",
    b"6",
    b"7",
)


class UnsafeArchiveError(ShoalError):
    """The archive holds something that must not be unpacked; nothing was."""


class TruncatedArchiveError(ShoalError):
    """The tar stream ended in the middle of a member."""


@dataclass(slots=True)
class Member:
    name: str
    kind: bytes
    size: int
    mode: int
    mtime: int
    linkname: str


def _octal(field: bytes) -> int:
    """A numeric header field; the fast path reads what GNU tar and Python write."""
    try:  # "0000644\0", "00000001750\0": digits then one terminator
        return int(field[:-1], 8)
    except ValueError:
        return _number(field)


def _checksum_ok(header: bytes) -> bool:
    """The header checksum: the byte sum with the checksum field counted as spaces.

    `sum(header)` costs 4 us a header, the largest per-member cost on many small files;
    adler32's low half is 1 + the byte sum mod 65521, in 0.3 us. A header's sum is below
    2 * 65521, so only a corruption that moves the sum by exactly 65521 could pass.
    """
    field = header[148:156]
    try:  # "012345\0 " from most writers, "0012345\0" from some
        stored = int(field.rstrip(b"\0 "), 8)
    except ValueError:
        stored = _number(field)
    low = zlib.adler32(header) & 0xFFFF
    return (stored - 8 * 32 + sum(field) + 1 - low) % 65521 == 0


def _number(field: bytes) -> int:
    if field and field[0] & 0x80:  # GNU base-256 for values past the octal range
        return int.from_bytes(field[1:], "big")
    try:  # the common case, fast: "0000644\0", "00000001750 "
        return int(field.rstrip(b"\0 ").lstrip(b" ") or b"0", 8)
    except ValueError:
        pass
    text = field.split(b"\0", 1)[0].strip(b" \0")
    try:
        return int(text, 8) if text else 0
    except ValueError:
        raise ShoalError(f"archive is not a tar file (bad number field {text!r})") from None


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class TarStream:
    """Members of a tar stream, in order; data is read through `data()` before the next."""

    def __init__(self, src: Reader) -> None:
        self.src = src
        self.buf = bytearray()
        self.pos = 0
        self._remaining = 0  # data bytes (plus padding) of the current member not yet read
        self._meta_bytes = 0  # pax/long-name bytes read since the last member

    def _fill(self, need: int) -> bool:
        while len(self.buf) - self.pos < need:
            if self.pos > READ_CHUNK:
                del self.buf[: self.pos]
                self.pos = 0
            more = self.src.read(max(READ_CHUNK, need))
            if not more:
                return False
            self.buf += more
        return True

    def _take(self, n: int) -> bytes:
        if not self._fill(n):
            raise TruncatedArchiveError("archive is truncated: it ends in the middle of a member")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def _skip(self, n: int) -> None:
        while n > 0:
            avail = len(self.buf) - self.pos
            if avail == 0 and not self._fill(1):
                raise TruncatedArchiveError(
                    "archive is truncated: it ends in the middle of a member"
                )
            step = min(n, len(self.buf) - self.pos)
            self.pos += step
            n -= step

    def data(self, size: int) -> Iterator[bytes]:
        """The current member's data in chunks; its padding is skipped afterwards.

        What is buffered comes first; the rest is read straight from the stream, so big
        members cost no copy through the header buffer.
        """
        left = size
        buffered = min(left, len(self.buf) - self.pos)
        if buffered:
            yield bytes(self.buf[self.pos : self.pos + buffered])
            self.pos += buffered
            left -= buffered
        while left > 0:
            chunk = self.src.read(min(left, READ_CHUNK))
            if not chunk:
                raise TruncatedArchiveError(
                    "archive is truncated: it ends in the middle of a member"
                )
            if len(chunk) > left:  # a reader that ignores the size hint: keep the excess
                self.buf += chunk[left:]
                chunk = chunk[:left]
            left -= len(chunk)
            yield chunk
        self._skip(-size % BLOCK)
        self._remaining = 0

    def small_data(self, size: int) -> bytes | None:
        """The whole member's data when it is already buffered (small files), else None."""
        end = self.pos + size
        if end + (-size % BLOCK) > len(self.buf):
            return None
        out = bytes(self.buf[self.pos : end])
        self.pos = end + (-size % BLOCK)
        self._remaining = 0
        return out

    def _meta(self, size: int, what: str) -> bytes:
        # One budget for all the metadata headers before a member: many small pax headers
        # must not add up to what one big one may not be.
        self._meta_bytes += size
        if self._meta_bytes > MAX_META_BYTES:
            raise UnsafeArchiveError(
                f"unsafe archive: more than {MAX_META_BYTES} bytes of headers before one "
                f"member (at a {what})"
            )
        raw = self._take(size)
        self._skip(-size % BLOCK)
        return raw

    def members(self) -> Iterator[Member]:
        pax: dict[str, str] = {}
        long_name: str | None = None
        long_link: str | None = None
        while True:
            if self._remaining:
                self._skip(self._remaining)
                self._remaining = 0
            if len(self.buf) - self.pos < BLOCK and not self._fill(BLOCK):
                if len(self.buf) - self.pos == 0:
                    # Cut between members (a zstd stream cut short ends this way too).
                    raise TruncatedArchiveError(
                        "archive is truncated: it ends without the end-of-archive blocks"
                    )
                raise TruncatedArchiveError("archive is truncated: a header is cut short")
            header = bytes(self.buf[self.pos : self.pos + BLOCK])
            self.pos += BLOCK
            if header == _ZERO_BLOCK:
                return
            if not _checksum_ok(header):
                raise ShoalError("archive is not a tar file, or is corrupt (header checksum)")
            kind = header[156:157]
            size = _octal(header[124:136])
            if kind == b"x":
                pax.update(_pax(self._meta(size, "pax header")))
                continue
            if kind == b"g":
                self._meta(size, "pax global header")
                continue
            if kind == b"L":
                long_name = _text(self._meta(size, "long name").rstrip(b"\0"))
                continue
            if kind == b"K":
                long_link = _text(self._meta(size, "long link name").rstrip(b"\0"))
                continue
            name = _text(header[0:100].split(b"\0", 1)[0])
            if header[257:263] == b"ustar\x00":  # POSIX ustar: a prefix field extends the name
                prefix = header[345:500].split(b"\0", 1)[0]
                if prefix:
                    name = _text(prefix) + "/" + name
            linkname = (
                _text(header[157:257].split(b"\0", 1)[0]) if kind in (HARDLINK, SYMLINK) else ""
            )
            mtime = _octal(header[136:148])
            if long_name is not None:
                name, long_name = long_name, None
            if long_link is not None:
                linkname, long_link = long_link, None
            self._meta_bytes = 0
            if pax:
                name = pax.get("path", name)
                linkname = pax.get("linkpath", linkname)
                if "size" in pax:
                    size = _pax_size(pax["size"])
                if "mtime" in pax:
                    mtime = _pax_mtime(pax["mtime"])
                pax = {}
            if kind in (REGULAR, b"\0", CONTIGUOUS):
                kind = REGULAR
            has_data = kind == REGULAR
            self._remaining = (size + (-size % BLOCK)) if has_data else 0
            yield Member(
                name, kind, size if has_data else 0, _octal(header[100:108]), mtime, linkname
            )


def _pax_size(value: str) -> int:
    # Digits only: a negative size would move the reader backwards and lower the byte cap.
    if not (value.isascii() and value.isdigit()) or len(value) > 20:
        raise ShoalError(f"archive has a malformed pax size {value[:40]!r}")
    return int(value)


def _pax_mtime(value: str) -> int:
    try:
        mtime = int(float(value))
    except (ValueError, OverflowError):
        raise ShoalError(f"archive has a malformed pax mtime {value[:40]!r}") from None
    if abs(mtime) > _MAX_MTIME:
        raise ShoalError(f"archive has an out-of-range pax mtime {value[:40]!r}")
    return mtime


def _pax(raw: bytes) -> dict[str, str]:
    out: dict[str, str] = {}
    pos = 0
    while pos < len(raw):
        space = raw.find(b" ", pos)
        if space < 0:
            break
        try:
            length = int(raw[pos:space])
        except ValueError:
            raise ShoalError("archive has a malformed pax header") from None
        if length <= 0:
            break
        record = raw[space + 1 : pos + length - 1]
        key, _, value = record.partition(b"=")
        out[key.decode("utf-8", "replace")] = _text(value)
        pos += length
    return out


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
        parent = self._dir(parts[:-1], member.name) if len(parts) > 1 else self._root_fd
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
            whole = tar.small_data(member.size)
            if whole is not None:
                written = os.write(fd, whole)
                if written < len(whole):
                    _write_all(fd, memoryview(whole)[written:])
            else:
                for chunk in tar.data(member.size):
                    _write_all(fd, memoryview(chunk))
            if mode & 0o1000:  # sticky is not set by open(); everything else came with it
                os.fchmod(fd, mode & ~self._umask)
            os.utime(fd, (member.mtime, member.mtime))
        finally:
            os.close(fd)
        self.bytes_unpacked += member.size
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


def extract(src: Reader, root: Path, caps: Caps) -> Extractor:
    """Unpack the tar stream `src` into the existing empty directory `root`."""
    tar = TarStream(src)
    extractor = Extractor(root, caps)
    try:
        for member in tar.members():
            extractor.add(member, tar)
        extractor.finish()
    finally:
        extractor.close()
    return extractor
