"""The tar reader, the extractor and the decompressors, on archive bytes in memory."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import io
import lzma
import os
import stat
import tarfile
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from drivers.image import decompress, extract
from drivers.image.extractor import Caps, Extractor
from drivers.image.tarstream import TruncatedArchiveError, UnsafeArchiveError
from providers.core.errors import ShoalError
from tests.drivers.image import archives as A

MIB = 1024 * 1024
BLOCK_BYTES = 512
BIG = Caps(max_bytes=1 << 40, max_entries=1_000_000)


def unpack(data: bytes, root: Path, caps: Caps = BIG) -> Extractor:
    """Unpack the (possibly compressed) archive `data` into the new directory `root`."""
    root.mkdir()
    _, reader = decompress.open_stream(io.BytesIO(data))
    return extract.extract(reader, root, caps)


def tree(root: Path) -> dict[str, str]:
    """Every path under root -> 'dir', 'file:<content>' or 'link:<target>'."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = f"link:{os.readlink(path)}"
            elif path.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = "file:" + path.read_bytes().decode("utf-8", "replace")
    return out


def noise(size: int) -> bytes:
    """`size` deterministic bytes that do not compress."""
    blocks = (hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(size // 32 + 1))
    return b"".join(blocks)[:size]


class Trickle:
    """A reader that hands out at most `step` bytes per read (a slow network)."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data = io.BytesIO(data)
        self.step = step

    def read(self, size: int = -1, /) -> bytes:
        return self.data.read(self.step if size < 0 else min(size, self.step))


# -- benign archives -----------------------------------------------------------------------


@pytest.mark.parametrize("compression", A.COMPRESSIONS)
def test_simple_tree(tmp_path: Path, compression: str) -> None:
    root = tmp_path / "img"
    result = unpack(A.simple(compression), root)
    assert tree(root) == {
        "bin": "dir",
        "etc": "dir",
        "etc/os-release": "file:ID=shoal-test\n",
        "bin/tool": "file:#!/bin/sh\necho ok\n",
        "bin/alias": "link:tool",
        "bin/tool2": "file:#!/bin/sh\necho ok\n",
    }
    tool = (root / "bin/tool").stat()
    assert stat.S_IMODE(tool.st_mode) == 0o755
    assert stat.S_IMODE((root / "etc/os-release").stat().st_mode) == 0o644
    assert tool.st_ino == (root / "bin/tool2").stat().st_ino  # a real hard link
    assert tool.st_nlink == 2
    assert int(tool.st_mtime) == A.MTIME
    assert int((root / "etc").stat().st_mtime) == A.MTIME
    assert result.entries == 6
    assert result.bytes_unpacked == len(b"ID=shoal-test\n") + len(b"#!/bin/sh\necho ok\n")


@pytest.mark.parametrize("fmt", ["pax", "gnu", "ustar"])
def test_header_formats(tmp_path: Path, fmt: str) -> None:
    entries: list[A.Entry] = [A.Dir("d"), A.File("d/f", b"x" * 1000), A.Symlink("d/s", "f")]
    root = tmp_path / "img"
    unpack(A.make_tar(entries, fmt=fmt), root)
    assert tree(root) == {"d": "dir", "d/f": "file:" + "x" * 1000, "d/s": "link:f"}


def test_pax_long_names_and_link_targets(tmp_path: Path) -> None:
    directory, file_name, link_name, link_target = A.pax_long_name_members(300)
    root = tmp_path / "img"
    unpack(A.pax_long_names(300), root)
    assert (root / file_name).read_bytes() == b"long\n"
    assert os.readlink(root / link_name) == link_target
    assert (root / directory).is_dir()


def test_gnu_long_names_and_link_targets(tmp_path: Path) -> None:
    long_dir = "/".join(["g" * 60] * 3)
    long_target = "t" * 150
    data = A.make_tar(
        [A.Dir(long_dir), A.File(f"{long_dir}/f", b"gnu\n"), A.Symlink("s", long_target)],
        fmt="gnu",
    )
    assert b"././@LongLink" in data
    root = tmp_path / "img"
    unpack(data, root)
    assert (root / long_dir / "f").read_bytes() == b"gnu\n"
    assert os.readlink(root / "s") == long_target


def test_ustar_prefix_field(tmp_path: Path) -> None:
    name = "p" * 90 + "/" + "q" * 60 + "/file"  # > 100: split into prefix and name
    data = A.make_tar([A.File(name, b"prefixed\n")], fmt="ustar")
    assert data[345:346] == b"p"  # the prefix field is in use
    root = tmp_path / "img"
    unpack(data, root)
    assert (root / name).read_bytes() == b"prefixed\n"


def test_many_small_files_through_a_trickling_reader(tmp_path: Path) -> None:
    data = A.many_files(1500, per_dir=500)
    root = tmp_path / "img"
    root.mkdir()
    result = extract.extract(Trickle(data, 777), root, BIG)
    assert result.entries == 1500 + 4
    assert (root / "files/0002/0001499").read_bytes() == b"1499\n"
    assert sum(1 for _ in root.rglob("*") if _.is_file()) == 1500


class Gulp:
    """A reader that hands out everything it has left, whatever size was asked for."""

    def __init__(self, data: bytes, step: int) -> None:
        self.data = io.BytesIO(data)
        self.step = step

    def read(self, size: int = -1, /) -> bytes:
        return self.data.read(self.step)


def test_reader_that_ignores_the_size_hint(tmp_path: Path) -> None:
    """What a reader sends past a big member's end is the next members' headers and data."""
    big = noise(3 * MIB + 5)
    entries: list[A.Entry] = [A.File("big", big)]
    entries += [A.File(f"small/{i}", f"{i}\n".encode() * i, mtime=A.MTIME + i) for i in range(40)]
    root = tmp_path / "img"
    root.mkdir()
    result = extract.extract(Gulp(A.make_tar(entries), 3 * MIB // 2), root, BIG)
    assert result.entries == 41
    assert (root / "big").read_bytes() == big
    for i in range(40):
        assert (root / f"small/{i}").read_bytes() == f"{i}\n".encode() * i
        assert int((root / f"small/{i}").stat().st_mtime) == A.MTIME + i


@pytest.mark.parametrize("step", [511, 4099, 1024 * 1024 + 3])
def test_members_straddling_every_refill(tmp_path: Path, step: int) -> None:
    """Headers and data cut at every offset by the reads; empty files keep mode and time."""
    entries: list[A.Entry] = []
    for i in range(600):
        body = b"" if i % 7 == 0 else bytes([i % 251]) * (i * 13 % 3000)
        entries.append(A.File(f"d{i % 3}/f{i}", body, mode=0o640, mtime=A.MTIME + i))
    root = tmp_path / "img"
    root.mkdir()
    result = extract.extract(Trickle(A.make_tar(entries), step), root, BIG)
    assert result.entries == 600
    for i in range(600):
        path = root / f"d{i % 3}/f{i}"
        info = path.stat()
        assert path.read_bytes() == (b"" if i % 7 == 0 else bytes([i % 251]) * (i * 13 % 3000))
        assert int(info.st_mtime) == A.MTIME + i
        assert stat.S_IMODE(info.st_mode) == 0o640 & ~_umask()


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def test_dot_entries_and_redundant_slashes(tmp_path: Path) -> None:
    data = A.make_tar([A.Dir("./"), A.Dir("./a"), A.File("./a//b/./c", b"c\n")])
    root = tmp_path / "img"
    unpack(data, root)
    assert tree(root) == {"a": "dir", "a/b": "dir", "a/b/c": "file:c\n"}


def test_setuid_and_setgid_bits_are_stripped(tmp_path: Path) -> None:
    data = A.make_tar(
        [
            A.setuid("suid"),
            A.setgid("sgid"),
            A.File("both", b"", mode=0o6711),
            A.File("sticky", b"", mode=0o1644),
            A.Dir("gdir", mode=0o2775),
        ]
    )
    root = tmp_path / "img"
    previous = os.umask(0o002)  # group-writable bits survive this umask, so stripping shows
    try:
        unpack(data, root)
    finally:
        os.umask(previous)
    modes = {p.name: stat.S_IMODE(p.lstat().st_mode) for p in root.iterdir()}
    assert modes == {
        "suid": 0o755,
        "sgid": 0o755,
        "both": 0o711,
        "sticky": 0o1644,
        "gdir": 0o775,
    }
    for mode in modes.values():
        assert mode & 0o6000 == 0


def test_the_umask_is_applied_so_an_image_is_not_world_writable(tmp_path: Path) -> None:
    data = A.make_tar([A.Dir("open", mode=0o777), A.File("open/f", b"x", mode=0o666)])
    root = tmp_path / "img"
    previous = os.umask(0o077)
    try:
        unpack(data, root)
    finally:
        os.umask(previous)
    assert stat.S_IMODE((root / "open").stat().st_mode) == 0o700
    assert stat.S_IMODE((root / "open/f").stat().st_mode) == 0o600


def test_read_only_directory_is_filled_and_stays_owner_writable(tmp_path: Path) -> None:
    data = A.make_tar([A.Dir("ro", mode=0o555), A.File("ro/f", b"in\n", mode=0o444)])
    root = tmp_path / "img"
    unpack(data, root)
    assert (root / "ro/f").read_bytes() == b"in\n"
    assert stat.S_IMODE((root / "ro").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "ro/f").stat().st_mode) == 0o444


def test_later_member_replaces_file_or_link_without_writing_through(tmp_path: Path) -> None:
    data = A.make_tar(
        [
            A.File("target", b"original\n"),
            A.Hardlink("hard", "target"),
            A.File("hard", b"replaced\n"),  # must not write into `target` through the link
            A.Symlink("soft", "target"),
            A.File("soft", b"replaced too\n"),  # must not follow the symlink
            A.File("twice", b"one\n"),
            A.File("twice", b"two\n"),
        ]
    )
    root = tmp_path / "img"
    unpack(data, root)
    assert tree(root) == {
        "target": "file:original\n",
        "hard": "file:replaced\n",
        "soft": "file:replaced too\n",
        "twice": "file:two\n",
    }
    assert (root / "target").stat().st_nlink == 1


def test_symlinks_inside_the_image_are_kept(tmp_path: Path) -> None:
    data = A.make_tar(
        [
            A.Dir("usr"),
            A.Dir("usr/lib"),
            A.File("usr/lib/libx.so.1", b"elf"),
            A.Symlink("usr/lib/libx.so", "libx.so.1"),
            A.Symlink("lib", "usr/lib"),
            A.Symlink("usr/up", "../usr/lib/./libx.so.1"),
            A.Symlink("dangling", "nowhere/at/all"),
        ]
    )
    root = tmp_path / "img"
    unpack(data, root)
    assert (root / "lib/libx.so").read_bytes() == b"elf"
    assert (root / "usr/up").read_bytes() == b"elf"
    assert os.readlink(root / "dangling") == "nowhere/at/all"


def test_empty_archive(tmp_path: Path) -> None:
    root = tmp_path / "img"
    result = unpack(A.make_tar([]), root)
    assert list(root.iterdir()) == []
    assert (result.entries, result.bytes_unpacked) == (0, 0)


def test_big_file_streams_in_bounded_memory(tmp_path: Path) -> None:
    size = 48 * MIB
    data = A.gzip_bomb(size)
    root = tmp_path / "img"
    root.mkdir()
    tracemalloc.start()
    try:
        _, reader = decompress.open_stream(io.BytesIO(data))
        result = extract.extract(reader, root, BIG)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.bytes_unpacked == size
    assert (root / "zeros").stat().st_size == size
    assert peak < 12 * MIB, f"peak {peak} bytes for a {size} byte file"


# -- hostile archives: refused, nothing outside touched -----------------------------------

Hostile = Callable[[Path], bytes]

HOSTILE: dict[str, Hostile] = {
    "absolute path": lambda out: A.absolute_path(str(out / "abs")),
    "dotdot": lambda out: A.dotdot("../outside/dotdot"),
    "dotdot in the middle": lambda out: A.dotdot("a/../../outside/mid"),
    "dotdot after a dir": lambda out: A.make_tar([A.Dir("a"), A.File("a/../../outside/x")]),
    "symlink relative escape": lambda out: A.symlink_escape("../outside"),
    "symlink deep relative escape": lambda out: A.make_tar(
        [A.Dir("a"), A.Symlink("a/l", "../../outside")]
    ),
    "symlink absolute": lambda out: A.symlink_absolute(str(out)),
    "symlink absolute to root": lambda out: A.symlink_absolute("/"),
    "symlink then write through": lambda out: A.symlink_then_write_through(str(out)),
    "relative symlink then write through": lambda out: A.make_tar(
        [A.Symlink("d", "../outside"), A.File("d/x", b"through\n")]
    ),
    "dir then symlink then write through": lambda out: A.dir_then_symlink_write_through(str(out)),
    "symlink through a symlink": lambda out: A.make_tar(
        [A.Dir("a"), A.Symlink("a/b", ".."), A.Symlink("l", "a/b/../outside")]
    ),
    "symlink through a later symlink": lambda out: A.make_tar(
        [A.Symlink("l", "a/b/../outside"), A.Dir("a"), A.Symlink("a/b", "..")]
    ),
    "hardlink escape": lambda out: A.hardlink_escape("../outside/file"),
    "hardlink absolute": lambda out: A.hardlink_escape(str(out / "file")),
    "hardlink then overwrite": lambda out: A.hardlink_then_overwrite("../outside/file"),
    "hardlink to a symlink": lambda out: A.make_tar([A.Symlink("s", "f"), A.Hardlink("h", "s")]),
    "hardlink to a later file": lambda out: A.make_tar([A.Hardlink("h", "f"), A.File("f", b"f\n")]),
    "hardlink to a directory": lambda out: A.make_tar([A.Dir("d"), A.Hardlink("h", "d")]),
    "pax path escape": lambda out: A.pax_path_escape("../outside/pax"),
    "pax absolute path": lambda out: A.pax_path_escape(str(out / "pax")),
    "pax linkpath escape": lambda out: A.make_tar(
        [A.Symlink("l", "ok", pax_headers={"linkpath": "../outside"})]
    ),
    "gnu long name escape": lambda out: A.make_tar(
        [A.File("../outside/" + "n" * 120, b"gnu\n")], fmt="gnu"
    ),
    "gnu long link escape": lambda out: A.make_tar(
        [A.Symlink("l", "../" * 40 + "outside")], fmt="gnu"
    ),
    "ustar prefix escape": lambda out: A.make_tar(
        [A.File("../" + "p" * 90 + "/" + "f" * 60, b"prefix\n")], fmt="ustar"
    ),
    "fifo": lambda out: A.make_tar([A.Fifo("fifo")]),
    "char device": lambda out: A.make_tar([A.CharDevice("null")]),
    "block device": lambda out: A.make_tar([A.BlockDevice("loop0")]),
    "file replaces a directory": lambda out: A.make_tar([A.Dir("d"), A.File("d", b"x")]),
    "symlink replaces a directory": lambda out: A.make_tar([A.Dir("d"), A.Symlink("d", "e")]),
    "write through an in-image symlink": lambda out: A.make_tar(
        [A.Dir("real"), A.Symlink("d", "real"), A.File("d/x", b"x")]
    ),
    "unsupported type": lambda out: A.make_tar(
        [A.File("v", tweak=lambda info: setattr(info, "type", b"V"))]
    ),
    "member with no name": lambda out: A.make_tar([A.File("./", b"")]),
    "member with an empty name": lambda out: A.make_tar(
        [A.File("x", b"", tweak=lambda info: setattr(info, "name", ""))]
    ),
}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """tmp_path/outside: an existing dir with one file, next to the image root tmp_path/img."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "file").write_bytes(b"precious\n")
    return path


def assert_untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["file"]
    assert (outside / "file").read_bytes() == b"precious\n"
    assert (outside / "file").stat().st_nlink == 1
    assert sorted(p.name for p in outside.parent.iterdir()) == ["img", "outside"]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_archive_refused(tmp_path: Path, outside: Path, case: str) -> None:
    data = HOSTILE[case](outside)
    root = tmp_path / "img"
    with pytest.raises(UnsafeArchiveError, match="unsafe archive"):
        unpack(data, root)
    assert_untouched(outside)


@pytest.mark.parametrize("compression", ["gz", "zst"])
def test_hostile_member_after_good_ones_in_compressed_archive(
    tmp_path: Path, outside: Path, compression: str
) -> None:
    data = A.make_tar(
        [A.Dir("etc"), A.File("etc/ok", b"ok\n"), A.File("../outside/late", b"late\n")],
        compression,
    )
    with pytest.raises(UnsafeArchiveError, match=r"\.\."):
        unpack(data, tmp_path / "img")
    assert_untouched(outside)


@pytest.mark.parametrize(
    ("member", "what"),
    [
        (A.Fifo("p"), "fifo"),
        (A.CharDevice("c"), "character device"),
        (A.BlockDevice("b"), "block device"),
    ],
)
def test_special_files_are_not_created(tmp_path: Path, member: A.Entry, what: str) -> None:
    root = tmp_path / "img"
    with pytest.raises(UnsafeArchiveError, match=what):
        unpack(A.make_tar([A.File("before", b"1"), member]), root)
    assert [p.name for p in root.iterdir()] == ["before"]


# -- caps -----------------------------------------------------------------------------------


def test_byte_cap_refuses_one_big_member_before_writing_it(tmp_path: Path) -> None:
    root = tmp_path / "img"
    with pytest.raises(UnsafeArchiveError, match="unpacks past 1048576 bytes"):
        unpack(A.gzip_bomb(64 * MIB), root, Caps(MIB, 100))
    assert list(root.iterdir()) == []


def test_byte_cap_counts_all_members(tmp_path: Path) -> None:
    entries: list[A.Entry] = [A.File(f"f{i}", bytes(300 * 1024)) for i in range(4)]
    data = A.make_tar(entries, "gz")
    with pytest.raises(UnsafeArchiveError, match="'f3'"):
        unpack(data, tmp_path / "a", Caps(MIB, 100))
    result = unpack(data, tmp_path / "b", Caps(4 * 300 * 1024, 100))  # exactly at the cap
    assert result.bytes_unpacked == 4 * 300 * 1024


def test_entry_cap(tmp_path: Path) -> None:
    data = A.many_files(10, per_dir=100)  # 2 dirs + 10 files
    with pytest.raises(UnsafeArchiveError, match="more than 11 entries"):
        unpack(data, tmp_path / "a", Caps(MIB, 11))
    assert unpack(data, tmp_path / "b", Caps(MIB, 12)).entries == 12


def test_negative_pax_size_cannot_lower_the_byte_cap(tmp_path: Path) -> None:
    data = A.make_tar(
        [
            A.File("neg", b"", pax_headers={"size": str(-64 * MIB)}),
            A.File("big", size=2 * MIB),
        ]
    )
    root = tmp_path / "img"
    with pytest.raises(ShoalError):
        unpack(data, root, Caps(MIB, 100))
    assert not (root / "big").exists()


@pytest.mark.parametrize(
    "pax", [{"size": "12abc"}, {"size": " "}, {"mtime": "soon"}, {"mtime": "nan"}, {"mtime": "inf"}]
)
def test_malformed_pax_numbers_are_archive_errors(tmp_path: Path, pax: dict[str, str]) -> None:
    data = A.make_tar([A.File("f", b"data", pax_headers=pax)])
    with pytest.raises(ShoalError, match="pax"):
        unpack(data, tmp_path / "img")


def test_oversized_pax_header_refused(tmp_path: Path) -> None:
    data = A.make_tar([A.File("f", b"", pax_headers={"comment": "c" * (2 * MIB)})])
    with pytest.raises(UnsafeArchiveError, match="pax header"):
        unpack(data, tmp_path / "img")


# -- broken archives -----------------------------------------------------------------------


def test_truncated_in_a_member(tmp_path: Path) -> None:
    data = A.make_tar([A.File("f", bytes(range(256)) * 40)])
    with pytest.raises(TruncatedArchiveError, match="truncated"):
        unpack(A.truncated(data, 512 + 3000), tmp_path / "img")


def test_truncated_in_a_header(tmp_path: Path) -> None:
    data = A.make_tar([A.File("f", b"x" * 512), A.File("g", b"y")])
    with pytest.raises(TruncatedArchiveError, match="truncated"):
        unpack(A.truncated(data, 1024 + 100), tmp_path / "img")


def test_truncated_at_a_member_boundary(tmp_path: Path) -> None:
    """A cut exactly between members: only the missing end-of-archive blocks tell."""
    data = A.make_tar([A.File("f", b"x" * 512), A.File("g", b"y" * 512)])
    with pytest.raises(TruncatedArchiveError, match="truncated"):
        unpack(A.truncated(data, 1024), tmp_path / "img")


def test_empty_stream_is_not_an_image(tmp_path: Path) -> None:
    with pytest.raises(ShoalError):
        unpack(b"", tmp_path / "img")


@pytest.mark.parametrize("compression", ["gz", "xz", "bz2", "zst"])
@pytest.mark.parametrize("keep", [0.5, 0.9])
def test_truncated_compressed_archive(tmp_path: Path, compression: str, keep: float) -> None:
    payload = noise(256 * 1024)  # incompressible: the cut lands inside the data
    data = A.make_tar([A.File("a", payload), A.File("b", payload[::-1])], compression)
    with pytest.raises(ShoalError, match="truncated"):
        unpack(data[: int(len(data) * keep)], tmp_path / "img")


def test_not_a_tar(tmp_path: Path) -> None:
    with pytest.raises(ShoalError, match="not a tar"):
        unpack(b"<html>503 Service Unavailable</html>" + bytes(600), tmp_path / "img")


def test_corrupt_header_checksum(tmp_path: Path) -> None:
    data = bytearray(A.make_tar([A.File("f", b"data")], fmt="ustar"))
    data[0] ^= 0x01  # the name changes, the stored checksum does not
    with pytest.raises(ShoalError, match="header checksum"):
        unpack(bytes(data), tmp_path / "img")


def _rechecksum(data: bytearray, spelling: bytes = b"%06o\0 ") -> bytes:
    """The archive with its first header's checksum field rewritten in `spelling`."""
    data[148:156] = b" " * 8
    data[148:156] = (spelling % sum(data[:BLOCK_BYTES])).ljust(8, b"\0")
    return bytes(data)


@pytest.mark.parametrize(
    "spelling",
    [b"%06o\0 ", b"%07o\0", b"%07o ", b" %06o\0", b"%o\0"],
    ids=["gnu", "7-digit", "space-ended", "leading-space", "short"],
)
def test_header_checksum_spellings_writers_use(tmp_path: Path, spelling: bytes) -> None:
    data = bytearray(A.make_tar([A.File("f", b"data")], fmt="ustar"))
    unpack(_rechecksum(data, spelling), tmp_path / "img")
    assert (tmp_path / "img" / "f").read_bytes() == b"data"


def test_header_checksum_past_the_adler_modulus(tmp_path: Path) -> None:
    # The fast check works modulo 65521: a header whose byte sum is above that must still
    # verify, and a flipped bit in it must still be caught.
    data = bytearray(A.make_tar([A.File("f", b"data")], fmt="ustar"))
    data[2:100] = b"\xff" * 98  # after the name's NUL
    data[157:257] = b"\xff" * 100  # linkname and user/group names: not read for a file
    data[265:329] = b"\xff" * 64
    data = bytearray(_rechecksum(data))
    assert sum(data[:BLOCK_BYTES]) > 65521
    unpack(bytes(data), tmp_path / "ok")
    assert (tmp_path / "ok" / "f").read_bytes() == b"data"
    data[300] ^= 0x01
    with pytest.raises(ShoalError, match="header checksum"):
        unpack(bytes(data), tmp_path / "bad")


@pytest.mark.parametrize("compression", ["gz", "xz", "bz2"])  # the ones with a CRC
def test_corrupt_compressed_stream(tmp_path: Path, compression: str) -> None:
    payload = noise(128 * 1024)
    data = bytearray(A.make_tar([A.File("a", payload)], compression))
    for i in range(len(data) // 3, len(data) // 3 + 16):
        data[i] ^= 0x5A
    with pytest.raises(ShoalError):
        unpack(bytes(data), tmp_path / "img")


# -- decompression ---------------------------------------------------------------------------

KINDS = {"none": "tar", "gz": "gzip", "xz": "xz", "bz2": "bzip2", "zst": "zstd"}


@pytest.mark.parametrize("compression", A.COMPRESSIONS)
def test_format_detected_from_bytes(compression: str) -> None:
    plain = A.simple()
    kind, reader = decompress.open_stream(io.BytesIO(A.simple(compression)))
    assert kind == KINDS[compression]
    out = bytearray()
    while chunk := reader.read(1000):
        assert len(chunk) <= 1000
        out += chunk
    assert bytes(out) == plain


@pytest.mark.parametrize("compression", ["gz", "xz", "bz2", "zst"])
def test_every_read_is_bounded_however_much_the_input_expands(compression: str) -> None:
    bomb = A.bomb(4 * MIB, compression)
    assert isinstance(bomb, bytes)
    _, reader = decompress.open_stream(io.BytesIO(bomb))
    total = 0
    while chunk := reader.read(4096):
        assert len(chunk) <= 4096
        total += len(chunk)
    assert total >= 4 * MIB


def test_concatenated_gzip_members_and_zero_padding(tmp_path: Path) -> None:
    plain = A.make_tar([A.File("a", b"first\n"), A.File("b", b"second\n")])
    half = len(plain) // 2
    data = gzip.compress(plain[:half]) + gzip.compress(plain[half:]) + bytes(100)
    root = tmp_path / "img"
    unpack(data, root)
    assert tree(root) == {"a": "file:first\n", "b": "file:second\n"}


@pytest.mark.parametrize(
    "compress",
    [lzma.compress, bz2.compress, lambda b: zstandard.ZstdCompressor().compress(b)],
    ids=["xz", "bz2", "zst"],
)
def test_concatenated_streams(tmp_path: Path, compress: Callable[[bytes], bytes]) -> None:
    plain = A.make_tar([A.File("a", b"first\n"), A.File("b", b"second\n")])
    half = len(plain) // 2
    root = tmp_path / "img"
    unpack(compress(plain[:half]) + compress(plain[half:]), root)
    assert tree(root) == {"a": "file:first\n", "b": "file:second\n"}


def test_zstd_with_checksum_and_without_content_size(tmp_path: Path) -> None:
    plain = A.make_tar([A.File("a", b"zstd\n" * 1000)])
    writer = zstandard.ZstdCompressor(write_checksum=True, write_content_size=False)
    data = writer.compress(plain)
    root = tmp_path / "img"
    unpack(data, root)
    assert (root / "a").read_bytes() == b"zstd\n" * 1000


def test_peekable_gives_back_what_it_peeked() -> None:
    peekable = decompress.Peekable(Trickle(b"abcdefgh", 2))
    assert peekable.peek(5) == b"abcde"
    assert peekable.peek(3) == b"abc"
    assert peekable.read(2) == b"ab"
    assert peekable.read(-1) == b"cde"
    assert peekable.read(10) == b"fg"
    assert peekable.read(10) == b"h"
    assert peekable.read(10) == b""


@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"\x1f\x8b\x08", "gzip"),
        (b"\xfd7zXZ\x00", "xz"),
        (b"BZh9", "bzip2"),
        (b"\x28\xb5\x2f\xfd\x00", "zstd"),
        (b"ustar", "tar"),
        (b"", "tar"),
    ],
)
def test_detect(head: bytes, kind: str) -> None:
    assert decompress.detect(head) == kind


def test_tarfile_agrees_on_what_was_unpacked(tmp_path: Path) -> None:
    """The own tar reader unpacks what the standard library would list."""
    data = A.make_tar(
        [A.Dir("d"), *[A.File(f"d/{i}", noise(i * 97)) for i in range(30)]], fmt="gnu"
    )
    root = tmp_path / "img"
    unpack(data, root)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar.getmembers():
            if member.isfile():
                handle = tar.extractfile(member)
                assert handle is not None
                assert (root / member.name).read_bytes() == handle.read()


# -- found in review -------------------------------------------------------------------------


def test_hardlink_to_a_file_that_a_symlink_replaced_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    # The symlink is harmless where it stands (x/y/../../etc is inside); linked elsewhere by a
    # hardlink, the same relative target would point out of the image.
    data = A.make_tar(
        [
            A.File("x/y/a", b"plain"),
            A.Symlink("x/y/a", "../../outside/file"),
            A.Hardlink("esc", "x/y/a"),
        ]
    )
    root = tmp_path / "img"
    with pytest.raises(UnsafeArchiveError, match="hardlink"):
        unpack(data, root)
    assert_untouched(outside)


def _pax_header(records: dict[str, str]) -> A.Raw:
    body = b""
    for key, value in records.items():
        record = f" {key}={value}\n".encode()
        length = len(record) + len(str(len(record)))
        if len(str(length)) != len(str(len(record))):
            length += 1
        body += str(length).encode() + record
    info = tarfile.TarInfo("PaxHeaders/x")
    info.type = tarfile.XHDTYPE
    info.size = len(body)
    return A.Raw(info, body)


def test_many_pax_headers_before_one_member_share_one_budget(tmp_path: Path) -> None:
    headers = [_pax_header({f"k{i}": "v" * 400_000}) for i in range(3)]  # 1.2 MB in all
    data = A.make_tar([*headers, A.File("f", b"x")], fmt="ustar")
    with pytest.raises(UnsafeArchiveError, match="bytes of headers"):
        unpack(data, tmp_path / "img")


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ({"path": "a\x00b"}, "NUL"),
        ({"size": "9" * 30}, "pax size"),
        ({"mtime": "1" * 30}, "pax mtime"),
    ],
)
def test_bad_pax_values_are_clean_errors(
    tmp_path: Path, records: dict[str, str], message: str
) -> None:
    data = A.make_tar([_pax_header(records), A.File("f", b"x")], fmt="ustar")
    with pytest.raises(ShoalError, match=message):
        unpack(data, tmp_path / "img")


def test_hardlink_source_survives_a_deep_destination(tmp_path: Path) -> None:
    # The destination's directories push the source's cached descriptor out of the cache.
    deep = "/".join(f"d{i}" for i in range(300))
    data = A.make_tar(
        [A.File("s/t", b"source"), A.File(f"{deep}/t", b"WRONG"), A.Hardlink(f"{deep}/link", "s/t")]
    )
    root = tmp_path / "img"
    unpack(data, root)
    assert (root / deep / "link").read_bytes() == b"source"


def test_xz_with_a_huge_dictionary_is_refused_without_the_memory(tmp_path: Path) -> None:
    filters = [{"id": lzma.FILTER_LZMA2, "dict_size": 1536 * 1024 * 1024}]
    data = lzma.compress(A.make_tar([A.File("f", b"x" * 1000)]), filters=filters)
    with pytest.raises(ShoalError, match="needs more than 256 MiB"):
        unpack(data, tmp_path / "img")
