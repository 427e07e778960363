"""Decompression by the archive's first bytes, with output bounded on every read.

Each reader's `read(n)` returns at most `n` bytes however much the input expands, so a
decompression bomb costs time (until the unpack caps stop it), never memory.
"""

from __future__ import annotations

import bz2
import lzma
import zlib
from typing import Any, Protocol

from providers.core.errors import ShoalError

INPUT_CHUNK = 256 * 1024
XZ_MEMLIMIT = 256 * 1024 * 1024  # xz -9 needs 65 MiB
ZSTD_MAX_WINDOW = 128 * 1024 * 1024  # zstd's own default limit, stated rather than assumed


class Reader(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class Peekable:
    """A reader that can show its first bytes without consuming them."""

    def __init__(self, inner: Reader) -> None:
        self.inner = inner
        self._head = b""

    def peek(self, size: int) -> bytes:
        while len(self._head) < size:
            more = self.inner.read(size - len(self._head))
            if not more:
                break
            self._head += more
        return self._head[:size]

    def read(self, size: int = -1, /) -> bytes:
        if self._head:
            if size < 0 or size >= len(self._head):
                out, self._head = self._head, b""
                return out
            out, self._head = self._head[:size], self._head[size:]
            return out
        return self.inner.read(size)


def detect(head: bytes) -> str:
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"\xfd7zXZ\x00"):
        return "xz"
    if head.startswith(b"BZh"):
        return "bzip2"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "zstd"
    return "tar"


class _Zlib:
    """gzip, including several concatenated members (as pigz and `cat a.gz b.gz` make)."""

    def __init__(self, src: Reader) -> None:
        self.src = src
        self.d = zlib.decompressobj(wbits=31)
        self.pending = b""
        self.between_members = False  # a member just ended: EOF here is a clean end
        self.eof = False

    def read(self, size: int = -1, /) -> bytes:
        size = size if size > 0 else INPUT_CHUNK
        while not self.eof:
            if self.d.unconsumed_tail:
                data = self.d.unconsumed_tail
            elif self.pending:
                data, self.pending = self.pending, b""
            else:
                data = self.src.read(INPUT_CHUNK)
                if not data:
                    if not self.between_members:
                        raise ShoalError("archive is truncated: the gzip stream ended early")
                    self.eof = True
                    return b""
            if self.between_members:
                data = data.lstrip(b"\x00")  # zero padding after the last member
                if not data:
                    continue
                self.between_members = False
            try:
                out = self.d.decompress(data, size)
            except zlib.error as exc:
                raise ShoalError(f"archive is not valid gzip: {exc}") from None
            if self.d.eof:
                self.pending = self.d.unused_data
                self.d = zlib.decompressobj(wbits=31)
                self.between_members = True
            if out:
                return out
        return b""


class _Blocks:
    """bzip2 and xz: decompressor objects with max_length, over multiple streams."""

    def __init__(self, src: Reader, kind: str) -> None:
        self.src = src
        self.kind = kind
        self.d = self._new()
        self.eof = False

    def _new(self) -> bz2.BZ2Decompressor | lzma.LZMADecompressor:
        if self.kind == "bzip2":
            return bz2.BZ2Decompressor()
        # An xz header chooses its dictionary size: without a limit, a 200 KB file can make
        # the decompressor take gigabytes.
        return lzma.LZMADecompressor(memlimit=XZ_MEMLIMIT)

    def read(self, size: int = -1, /) -> bytes:
        size = size if size > 0 else INPUT_CHUNK
        while not self.eof:
            data = b""
            if self.d.eof:
                rest = self.d.unused_data
                if not rest.strip(b"\x00"):
                    rest = rest + self.src.read(INPUT_CHUNK)
                    if not rest.strip(b"\x00"):
                        self.eof = True
                        return b""
                self.d = self._new()
                data = rest.lstrip(b"\x00") if self.kind == "xz" else rest
            elif self.d.needs_input:
                data = self.src.read(INPUT_CHUNK)
                if not data:
                    raise ShoalError(f"archive is truncated: the {self.kind} stream ended early")
            try:
                out = self.d.decompress(data, size)
            except lzma.LZMAError as exc:
                if "memory" in str(exc).lower():
                    raise ShoalError(
                        f"unsafe archive: its xz stream needs more than "
                        f"{XZ_MEMLIMIT // 2**20} MiB to decompress; refused"
                    ) from None
                raise ShoalError(f"archive is not valid {self.kind}: {exc}") from None
            except (OSError, EOFError) as exc:
                raise ShoalError(f"archive is not valid {self.kind}: {exc}") from None
            if out:
                return out
        return b""


class _Zstd:
    def __init__(self, src: Reader) -> None:
        import zstandard

        self._error = zstandard.ZstdError
        source: Any = src  # any object with read(); the stubs ask for IO[bytes]
        self.reader = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW).stream_reader(
            source, read_size=INPUT_CHUNK, read_across_frames=True
        )

    def read(self, size: int = -1, /) -> bytes:
        try:
            return self.reader.read(size if size > 0 else INPUT_CHUNK)
        except self._error as exc:
            raise ShoalError(f"archive is not valid zstd: {exc}") from None


def open_stream(src: Reader) -> tuple[str, Reader]:
    """(format, reader of the tar bytes) for a raw archive stream."""
    peekable = Peekable(src)
    kind = detect(peekable.peek(6))
    if kind == "gzip":
        return kind, _Zlib(peekable)
    if kind in ("xz", "bzip2"):
        return kind, _Blocks(peekable, kind)
    if kind == "zstd":
        return kind, _Zstd(peekable)
    return kind, peekable
