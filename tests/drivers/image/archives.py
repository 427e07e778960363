"""Archive builders for image-pull tests: benign, special and hostile tarballs, in memory.

Written with `tarfile` (writing is fine; the extractor under test must not trust tarfile's
reading side). Output is deterministic: fixed mtimes, uid/gid 0, gzip header mtime 0.

Hostile helpers take the outside location as a parameter so tests can point it into
`tmp_path` and assert nothing landed there (tests may run as root: never aim at /etc for real).
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import zstandard

COMPRESSIONS = ("none", "gz", "xz", "bz2", "zst")
MTIME = 1_700_000_000
FORMATS = {"pax": tarfile.PAX_FORMAT, "gnu": tarfile.GNU_FORMAT, "ustar": tarfile.USTAR_FORMAT}

# Leading magic bytes of each compression; a plain tar has b"ustar" at offset 257.
MAGIC = {
    "gz": b"\x1f\x8b",
    "xz": b"\xfd7zXZ\x00",
    "bz2": b"BZh",
    "zst": b"\x28\xb5\x2f\xfd",
}

Tweak = Callable[[tarfile.TarInfo], None]


@dataclass
class _Entry:
    name: str
    mode: int = 0o644
    mtime: int = MTIME
    uid: int = 0
    gid: int = 0
    uname: str = "root"
    gname: str = "root"
    pax_headers: dict[str, str] = field(default_factory=dict)
    tweak: Tweak | None = None  # last word: edit the TarInfo in place before it is written

    def info(self) -> tarfile.TarInfo:
        info = tarfile.TarInfo(self.name)
        info.mode = self.mode
        info.mtime = self.mtime
        info.uid, info.gid = self.uid, self.gid
        info.uname, info.gname = self.uname, self.gname
        info.pax_headers = dict(self.pax_headers)
        self.fill(info)
        if self.tweak is not None:
            self.tweak(info)
        return info

    def fill(self, info: tarfile.TarInfo) -> None:
        raise NotImplementedError

    def body(self) -> IO[bytes] | None:
        return None


@dataclass
class File(_Entry):
    """A regular file. `mode` keeps setuid/setgid/sticky bits (e.g. 0o4755)."""

    data: bytes = b""
    size: int | None = None  # stream `size` zero bytes instead of `data` (big files)

    def __init__(self, name: str, data: bytes = b"", mode: int = 0o644, **kw: Any) -> None:
        size = kw.pop("size", None)
        super().__init__(name, mode=mode, **kw)
        self.data = data
        self.size = size

    def fill(self, info: tarfile.TarInfo) -> None:
        info.type = tarfile.REGTYPE
        info.size = len(self.data) if self.size is None else self.size

    def body(self) -> IO[bytes]:
        if self.size is None:
            return io.BytesIO(self.data)
        return io.BufferedReader(Zeros(self.size))


@dataclass
class Dir(_Entry):
    mode: int = 0o755

    def fill(self, info: tarfile.TarInfo) -> None:
        info.type = tarfile.DIRTYPE


@dataclass
class Symlink(_Entry):
    target: str = ""
    mode: int = 0o777

    def __init__(self, name: str, target: str, **kw: Any) -> None:
        kw.setdefault("mode", 0o777)
        super().__init__(name, **kw)
        self.target = target

    def fill(self, info: tarfile.TarInfo) -> None:
        info.type = tarfile.SYMTYPE
        info.linkname = self.target


@dataclass
class Hardlink(_Entry):
    """A hard link; `target` is the archive member name (or hostile path) it links to."""

    target: str = ""

    def __init__(self, name: str, target: str, **kw: Any) -> None:
        super().__init__(name, **kw)
        self.target = target

    def fill(self, info: tarfile.TarInfo) -> None:
        info.type = tarfile.LNKTYPE
        info.linkname = self.target


@dataclass
class Fifo(_Entry):
    def fill(self, info: tarfile.TarInfo) -> None:
        info.type = tarfile.FIFOTYPE


@dataclass
class CharDevice(_Entry):
    major: int = 1  # 1:3 is /dev/null
    minor: int = 3

    def fill(self, info: tarfile.TarInfo) -> None:
        info.type = tarfile.CHRTYPE
        info.devmajor, info.devminor = self.major, self.minor


@dataclass
class BlockDevice(_Entry):
    major: int = 7  # 7:0 is /dev/loop0
    minor: int = 0
    mode: int = 0o660

    def fill(self, info: tarfile.TarInfo) -> None:
        info.type = tarfile.BLKTYPE
        info.devmajor, info.devminor = self.major, self.minor


@dataclass
class Raw:
    """A hand-made TarInfo written as is (with `data` as its body when it is a file)."""

    info: tarfile.TarInfo
    data: bytes | None = None


Entry = _Entry | Raw


def setuid(name: str, data: bytes = b"#!/bin/sh\n") -> File:
    return File(name, data, mode=0o4755)


def setgid(name: str, data: bytes = b"#!/bin/sh\n") -> File:
    return File(name, data, mode=0o2755)


class Zeros(io.RawIOBase):
    """A readable stream of `size` zero bytes that never holds more than one read in memory."""

    def __init__(self, size: int) -> None:
        self.remaining = size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = min(len(buffer), self.remaining)
        buffer[:n] = bytes(n)
        self.remaining -= n
        return n


# -- writing -------------------------------------------------------------------------------


class _Sink(io.RawIOBase):
    """Wraps an output so compressors' close() never closes the caller's stream."""

    def __init__(self, out: IO[bytes]) -> None:
        self.out = out

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self.out.write(data)


def _compressor(out: IO[bytes], compression: str, level: int | None) -> Any:
    sink: Any = _Sink(out)
    if compression == "none":
        return sink
    if compression == "gz":
        return gzip.GzipFile(fileobj=sink, mode="wb", mtime=0, compresslevel=level or 9)
    if compression == "xz":
        return lzma.LZMAFile(sink, "wb", preset=level)
    if compression == "bz2":
        return bz2.BZ2File(sink, "wb", compresslevel=level or 9)
    if compression == "zst":
        return zstandard.ZstdCompressor(level=level or 3).stream_writer(sink, closefd=False)
    raise ValueError(f"unknown compression {compression!r}; expected one of {COMPRESSIONS}")


def _write(
    out: IO[bytes],
    entries: Iterable[Entry],
    compression: str,
    fmt: str,
    level: int | None,
) -> None:
    compressed = _compressor(out, compression, level)
    with tarfile.open(fileobj=compressed, mode="w|", format=FORMATS[fmt]) as tar:
        for entry in entries:
            if isinstance(entry, Raw):
                body = io.BytesIO(entry.data) if entry.data is not None else None
                tar.addfile(entry.info, body)
            else:
                tar.addfile(entry.info(), entry.body())
    compressed.close()


def make_tar(
    entries: Iterable[Entry],
    compression: str = "none",
    *,
    fmt: str = "pax",
    level: int | None = None,
) -> bytes:
    """The bytes of a tar of `entries`, in order, compressed with `compression`.

    compression: "none" | "gz" | "xz" | "bz2" | "zst". fmt: "pax" | "gnu" | "ustar".
    Entries are written exactly as given (no implied parent directories).
    """
    out = io.BytesIO()
    _write(out, entries, compression, fmt, level)
    return out.getvalue()


def write_tar(
    path: os.PathLike[str] | str,
    entries: Iterable[Entry],
    compression: str = "none",
    *,
    fmt: str = "pax",
    level: int | None = None,
) -> Path:
    """Like `make_tar` but streams to `path` (for big archives); returns the path."""
    target = Path(path)
    with target.open("wb") as out:
        _write(out, entries, compression, fmt, level)
    return target


def compression_of(data: bytes) -> str | None:
    """The compression by magic bytes ("gz", "xz", "bz2", "zst"), "none" for plain tar, or None."""
    for name, magic in MAGIC.items():
        if data.startswith(magic):
            return name
    if data[257:262] == b"ustar":
        return "none"
    return None


# -- benign and special archives ------------------------------------------------------------


def simple(compression: str = "none") -> bytes:
    """A small well-formed rootfs-ish tree: dirs, files, a relative symlink and a hardlink."""
    return make_tar(
        [
            Dir("bin"),
            Dir("etc"),
            File("etc/os-release", b"ID=shoal-test\n"),
            File("bin/tool", b"#!/bin/sh\necho ok\n", mode=0o755),
            Symlink("bin/alias", "tool"),
            Hardlink("bin/tool2", "bin/tool"),
        ],
        compression,
    )


def special_files(compression: str = "none") -> bytes:
    """A fifo, a char device, a block device, a setuid and a setgid file."""
    return make_tar(
        [
            Fifo("fifo"),
            CharDevice("null"),
            BlockDevice("loop0"),
            setuid("suid"),
            setgid("sgid"),
        ],
        compression,
    )


def many_files(n: int, compression: str = "none", *, per_dir: int = 1000) -> bytes:
    """`n` one-line files `files/DDDD/NNNNNNN`, at most `per_dir` per directory (dirs included)."""

    def entries() -> Iterable[Entry]:
        for i in range(n):
            directory = f"files/{i // per_dir:04d}"
            if i % per_dir == 0:
                if i == 0:
                    yield Dir("files")
                yield Dir(directory)
            yield File(f"{directory}/{i:07d}", f"{i}\n".encode())

    return make_tar(entries(), compression)


def bomb(
    uncompressed_size: int,
    compression: str = "gz",
    *,
    name: str = "zeros",
    path: os.PathLike[str] | str | None = None,
) -> bytes | Path:
    """A tar holding one file of `uncompressed_size` zero bytes, built streaming.

    Returns the compressed bytes, or writes them to `path` and returns that Path.
    """
    entries = [File(name, size=uncompressed_size)]
    if path is not None:
        return write_tar(path, entries, compression)
    return make_tar(entries, compression)


def gzip_bomb(uncompressed_size: int, *, name: str = "zeros") -> bytes:
    """A gzip'd tar whose single file is `uncompressed_size` zeros (1 GiB -> about 1 MiB)."""
    result = bomb(uncompressed_size, "gz", name=name)
    assert isinstance(result, bytes)
    return result


def truncated(data: bytes, keep: int | None = None) -> bytes:
    """`data` cut short (default: half), e.g. an archive ending mid-member."""
    return data[: len(data) // 2 if keep is None else keep]


# -- hostile archives ----------------------------------------------------------------------


def absolute_path(
    target: str = "/tmp/shoal-test-absolute-escape", compression: str = "none"
) -> bytes:
    """A regular file whose member name is the absolute path `target`."""
    return make_tar([File("ok", b"ok\n"), File(target, b"escaped\n")], compression)


def dotdot(name: str = "../../shoal-test-dotdot-escape", compression: str = "none") -> bytes:
    """A regular file whose member name climbs out with `..` components."""
    return make_tar([File("ok", b"ok\n"), File(name, b"escaped\n")], compression)


def symlink_escape(target: str = "../../etc", compression: str = "none") -> bytes:
    """`link -> ../../etc`: a relative symlink pointing outside the extraction root."""
    return make_tar([Symlink("link", target)], compression)


def symlink_absolute(target: str = "/etc", compression: str = "none") -> bytes:
    """`link -> /etc`: an absolute symlink."""
    return make_tar([Symlink("link", target)], compression)


def symlink_then_write_through(
    outside: str = "/tmp/shoal-test-outside", compression: str = "none"
) -> bytes:
    """Symlink `d -> OUTSIDE`, then file `d/x`: extracting naively writes OUTSIDE/x."""
    return make_tar([Symlink("d", outside), File("d/x", b"written through\n")], compression)


def dir_then_symlink_write_through(
    outside: str = "/tmp/shoal-test-outside", compression: str = "none"
) -> bytes:
    """Dir `d`, then symlink `d -> OUTSIDE` replacing it, then file `d/x`."""
    return make_tar(
        [Dir("d"), Symlink("d", outside), File("d/x", b"written through\n")], compression
    )


def hardlink_escape(target: str = "../outside", compression: str = "none") -> bytes:
    """Hardlink `link` to `target` outside the extraction root."""
    return make_tar([Hardlink("link", target)], compression)


def hardlink_then_overwrite(target: str = "../outside", compression: str = "none") -> bytes:
    """Hardlink `link -> target`, then a regular file `link` whose data would overwrite it."""
    return make_tar([Hardlink("link", target), File("link", b"overwritten\n")], compression)


def pax_long_names(length: int = 300, compression: str = "none") -> bytes:
    """Names and a symlink target longer than ustar's 100/155 limits (PAX `path`/`linkpath`).

    Members: dir `D` (a long directory path), file `D/F` and symlink `D/L -> F` (long target
    path); use `pax_long_name_members(length)` for the exact names.
    """
    directory, file_name, link_name, link_target = pax_long_name_members(length)
    return make_tar(
        [Dir(directory), File(file_name, b"long\n"), Symlink(link_name, link_target)],
        compression,
        fmt="pax",
    )


def pax_long_name_members(length: int = 300) -> tuple[str, str, str, str]:
    """(dir, file, symlink, symlink target) names used by `pax_long_names(length)`."""
    directory = "/".join(["d" * 50] * max(1, length // 51))
    file_name = f"{directory}/{'f' * 120}"
    link_name = f"{directory}/link"
    link_target = "t" * max(length, 101)
    return directory, file_name, link_name, link_target


def pax_path_escape(escaped: str = "../shoal-test-pax-escape", compression: str = "none") -> bytes:
    """A member whose ustar name is harmless (`benign`) but whose PAX `path` is `escaped`."""
    return make_tar(
        [File("benign", b"escaped\n", pax_headers={"path": escaped})], compression, fmt="pax"
    )
