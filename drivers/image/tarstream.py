"""A streaming tar reader: ustar, pax and GNU long-name headers parsed into `Member`s, and
each member's data, from any forward-only stream.

`tarfile` is not used to read: its `data` filter has had bypasses fixed only in recent patch
releases, and its per-member cost (~150 us) dominates archives of many small files. Where a
member may land is `drivers.image.extractor`'s to decide; this reader only refuses what it
cannot read (a truncated stream, bad numbers, headers past their budget).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from drivers.image.decompress import Reader
from providers.core.errors import ShoalError

BLOCK = 512
_ZERO_BLOCK = bytes(BLOCK)
_MAX_MTIME = 2**40  # far past any real date, well inside what utime takes
READ_CHUNK = 1024 * 1024
MAX_META_BYTES = 1024 * 1024  # pax headers and GNU long names
# The fields read, in one call (slicing each costs more on 20,000 headers): name, mode,
# (uid, gid), size, mtime, checksum, type, linkname, magic, (version, owner names, device
# numbers), prefix.
_HEADER = struct.Struct("100s8s16x12s12s8sc100s6s82x155s12x")

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


_META_KINDS = frozenset((b"x", b"g", b"L", b"K"))


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


def _checksum_ok(header: bytes, field: bytes) -> bool:
    """The header checksum: the byte sum with the checksum field (`field`) counted as spaces.

    `sum(header)` costs 4 us a header, the largest per-member cost on many small files;
    adler32's low half is 1 + the byte sum mod 65521, in 0.3 us. A header's sum is below
    2 * 65521, so only a corruption that moves the sum by exactly 65521 could pass.
    """
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
        # Immutable, so a header or a small file's data is one copy out of it (a bytearray's
        # slice is a second); a refill copies only the unread tail.
        self.buf = b""
        self.pos = 0
        self._remaining = 0  # data bytes (plus padding) of the current member not yet read
        self._meta_bytes = 0  # pax/long-name bytes read since the last member

    def _fill(self, need: int) -> bool:
        have = len(self.buf) - self.pos
        if have >= need:
            return True
        # Joined once: a reader that trickles must not make a big header cost quadratic copies.
        pieces = [self.buf[self.pos :]]
        while have < need:
            more = self.src.read(max(READ_CHUNK, need))
            if not more:
                break
            pieces.append(more)
            have += len(more)
        self.buf = b"".join(pieces)
        self.pos = 0
        return have >= need

    def _take(self, n: int) -> bytes:
        if not self._fill(n):
            raise TruncatedArchiveError("archive is truncated: it ends in the middle of a member")
        out = self.buf[self.pos : self.pos + n]
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
            yield self.buf[self.pos : self.pos + buffered]
            self.pos += buffered
            left -= buffered
        while left > 0:
            chunk = self.src.read(min(left, READ_CHUNK))
            if not chunk:
                raise TruncatedArchiveError(
                    "archive is truncated: it ends in the middle of a member"
                )
            if len(chunk) > left:  # a reader that ignores the size hint: keep the excess
                self.buf = self.buf[self.pos :] + chunk[left:]
                self.pos = 0
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
        out = self.buf[self.pos : end]
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
        unpack = _HEADER.unpack
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
            header = self.buf[self.pos : self.pos + BLOCK]
            self.pos += BLOCK
            if header == _ZERO_BLOCK:
                return
            name_f, mode_f, size_f, mtime_f, sum_f, kind, link_f, magic, prefix = unpack(header)
            if not _checksum_ok(header, sum_f):
                raise ShoalError("archive is not a tar file, or is corrupt (header checksum)")
            try:  # _octal inlined: "00000001750\0", digits then one terminator
                size = int(size_f[:-1], 8)
            except ValueError:
                size = _number(size_f)
            if kind in _META_KINDS:
                if kind == b"x":
                    pax.update(_pax(self._meta(size, "pax header")))
                elif kind == b"g":
                    self._meta(size, "pax global header")
                elif kind == b"L":
                    long_name = _text(self._meta(size, "long name").rstrip(b"\0"))
                else:
                    long_link = _text(self._meta(size, "long link name").rstrip(b"\0"))
                continue
            name = name_f.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")
            if magic == b"ustar\x00":  # POSIX ustar: a prefix field extends the name
                prefix = prefix.split(b"\0", 1)[0]
                if prefix:
                    name = _text(prefix) + "/" + name
            linkname = _text(link_f.split(b"\0", 1)[0]) if kind in (HARDLINK, SYMLINK) else ""
            mtime = _octal(mtime_f)
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
            else:
                size = 0  # only regular files have data here
            self._remaining = size + (-size % BLOCK)
            yield Member(name, kind, size, _octal(mode_f), mtime, linkname)


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
