"""A hostile engine on a loopback unix socket: answers framed to make the engine client read
past its cap (drivers/container/engine_http.py, engine.MAX_BYTES) are refused as the engine's
protocol error, after reading little of what the engine would send."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from drivers.container.engine import Engine
from providers.core.errors import ShoalError

OFFERED = 32 << 20  # what each hostile engine would send in all, were it read to the end
READ_AT_MOST = 8 << 20  # what a client that stops at once lets through (socket buffers)


class Hostile:
    """One connection: reads the request's head, then sends `head` and `body` until the client
    hangs up or OFFERED bytes are sent; `sent` counts what the client took."""

    def __init__(self, path: Path, head: bytes, body: Iterable[bytes]) -> None:
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen(1)
        self.listener.settimeout(10)
        self.head, self.body = head, body
        self.sent = 0
        self.thread = threading.Thread(target=self._serve)

    def _serve(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(10)
        with conn:
            request = b""
            while b"\r\n\r\n" not in request and (data := conn.recv(65536)):
                request += data
            with contextlib.suppress(OSError):  # the client hung up: what it took is counted
                for piece in itertools.chain([self.head], self.body):
                    view = memoryview(piece)
                    while view and self.sent < OFFERED:
                        taken = conn.send(view)
                        self.sent += taken
                        view = view[taken:]
                    if self.sent >= OFFERED:
                        break


@contextlib.contextmanager
def hostile(path: Path, head: bytes, body: Iterable[bytes]) -> Iterator[Hostile]:
    engine = Hostile(path, head, body)
    engine.thread.start()
    try:
        yield engine
    finally:
        engine.thread.join(15)
        engine.listener.close()


@pytest.fixture
def sock() -> Iterator[Path]:
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="shoal-hostile-"))  # a unix socket path is short
    yield short / "engine.sock"
    shutil.rmtree(short, ignore_errors=True)


CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"


def forever(piece: bytes) -> Iterator[bytes]:
    return itertools.repeat(piece)


CASES = {
    # int("-1", 16) is -1, and read(-1) reads to the end of the stream.
    "negative chunk size": (CHUNKED + b"-1\r\n", forever(b"x" * 65536), "not a chunk size"),
    "signed chunk size": (CHUNKED + b"+4000000\r\n", forever(b"x" * 65536), "not a chunk size"),
    "0x chunk size": (CHUNKED + b"0x4000000\r\n", forever(b"x" * 65536), "not a chunk size"),
    "underscored size": (CHUNKED + b"4_000_000\r\n", forever(b"x" * 65536), "not a chunk size"),
    "a size past 64 bits": (
        CHUNKED + b"1" + b"0" * 16 + b"\r\n",
        forever(b"x" * 65536),
        "not a chunk size",
    ),
    # One byte of data under each 4 KiB of extension: the data never reaches the cap.
    "extensions outweigh data": (
        CHUNKED,
        forever(b"1;" + b"e" * 4000 + b"\r\nx\r\n"),
        "chunk framing far larger than the data",
    ),
    "an endless size line": (CHUNKED + b"1;", forever(b"e" * 65536), "chunk size line longer"),
    "endless trailers": (CHUNKED + b"0\r\n", forever(b"T: " + b"t" * 1000 + b"\r\n"), "trailers"),
    "endless interim answers": (
        b"",
        forever(b"HTTP/1.1 100 Continue\r\nX: " + b"x" * 60000 + b"\r\n\r\n"),
        "interim",
    ),
    "an endless head": (b"HTTP/1.1 200 OK\r\n", forever(b"X: " + b"x" * 60000 + b"\r\n"), "head"),
    "garbage after a chunk": (CHUNKED + b"1\r\nx", forever(b"y" * 65536), "not followed by CRLF"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_hostile_answer_is_refused_before_reading_much_of_it(sock: Path, case: str) -> None:
    head, body, said = CASES[case]
    with hostile(sock, head, body) as engine, pytest.raises(ShoalError) as caught:
        Engine(f"unix://{sock}", timeout=10).info()
    assert said in str(caught.value)
    assert "GET /info" in str(caught.value)
    assert "try again" not in str(caught.value)  # the engine's fault, not a dropped connection
    assert engine.sent < READ_AT_MOST


def test_a_chunked_answer_is_still_read_across_chunks(sock: Path) -> None:
    body = b'{"NCPU": 4, "MemTotal": 1}'
    framed = b"".join(b"%x;name=value\r\n%b\r\n" % (len(body[i : i + 5]), body[i : i + 5])
                      for i in range(0, len(body), 5))
    with hostile(sock, CHUNKED + framed + b"0\r\nT: 1\r\n\r\n", []):
        assert Engine(f"unix://{sock}", timeout=10).info() == {"NCPU": 4, "MemTotal": 1}
