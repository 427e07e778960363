"""Engine answers a review found mishandled, each from a loopback unix-socket engine:

- shoal's engine client turned a status code of latin-1 digits (b"\\xb2\\xb2\\xb2", which
  str.isdigit() accepts and int() refuses) and a Content-Length of 5,000 digits (past int()'s
  4,300) into "unexpected ValueError" (exit 1) instead of the engine's protocol error;
- a container's supervisor (every container has one now) read the answer to /wait with
  http.client's read(limit), which is no cap after a chunk size of -1: it read the whole
  stream into memory (300 MiB measured);
- and it died on a /wait answer nested too deeply for json (RecursionError), leaving its
  container running past its deadline.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers.container.engine import Engine
from drivers.supervisor import engine_client, supervise
from providers.core.errors import ShoalError
from tests.conftest import wait_for


@pytest.fixture
def sock() -> Iterator[Path]:
    import shutil

    short = Path(tempfile.mkdtemp(prefix="shoal-review-"))  # unix socket paths are short
    yield short / "engine.sock"
    shutil.rmtree(short, ignore_errors=True)


def _request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data and (got := conn.recv(65536)):
        data += got
    return data


@contextlib.contextmanager
def answering(path: Path, answer: bytes) -> Iterator[None]:
    """One connection, answered with `answer` whatever it asked."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                _request(conn)
                conn.sendall(answer)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield
    finally:
        thread.join(15)
        listener.close()


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 \xb2\xb2\xb2 OK\r\nContent-Length: 2\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n{}",
    ],
    ids=["latin-1-digits-in-the-status", "a-5000-digit-length"],
)
def test_a_status_or_length_int_refuses_is_the_engines_protocol_error(
    sock: Path, answer: bytes
) -> None:
    with answering(sock, answer), pytest.raises(ShoalError) as caught:
        Engine(f"unix://{sock}", timeout=10).get_json("/info")
    assert "ProtocolError" in str(caught.value)


def test_the_supervisor_reads_at_most_its_cap_of_an_endless_chunk(sock: Path) -> None:
    """Chunk size -1, then data without end: the supervisor reads 64 KiB and hangs up."""
    offered = 256 << 20
    sent = [0]
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(1)
    listener.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                _request(conn)
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n")
                blob = b"x" * (1 << 20)
                while sent[0] < offered:
                    conn.sendall(blob)
                    sent[0] += len(blob)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with contextlib.suppress(OSError, engine_client.HTTPException):
            _, body = engine_client.engine_answer(
                f"unix://{sock}", "POST", "/v1.41/containers/c1/wait", 30
            )
            assert len(body) <= 1 << 16
    finally:
        thread.join(30)
        listener.close()
    assert sent[0] < offered // 4, f"the engine got {sent[0] >> 20} MiB into the supervisor"


def test_a_wait_answer_nested_too_deeply_does_not_kill_the_supervisor(sock: Path) -> None:
    """The container ends (its /wait answers) with a body json cannot decode: the supervisor
    goes on, and stops the container at its deadline."""
    asked: list[str] = []
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock))
    listener.listen(8)
    listener.settimeout(1)
    done = threading.Event()

    def serve() -> None:
        held: list[socket.socket] = []
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            line = _request(conn).split(b"\r\n", 1)[0].decode()
            asked.append(line)
            if "condition=next-exit" in line:
                held.append(conn)  # a real engine answers when it exits again: never here
                continue
            if "/stop" in line:
                conn.sendall(b"HTTP/1.1 204 No Content\r\n\r\n")
            else:
                nested = b"[" * 60000
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%b" % (len(nested), nested)
                )
            conn.close()
        for conn in held:
            conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    spec = {
        "mode": "container", "address": f"unix://{sock}", "api": "/v1.41", "container": "c1",
        "deadline": time.time() + 2, "grace": 1,
    }  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", supervise.__file__],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
        wait_for(lambda: any("/stop" in line for line in asked), "the stop at the deadline", 30)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
        done.set()
        thread.join(15)
        listener.close()
    assert b"RecursionError" not in err
