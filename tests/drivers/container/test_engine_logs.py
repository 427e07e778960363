"""`shoal logs` of a container through the engine client: Docker's multiplexed log stream
demultiplexed by one function (engine.demux) however the stream is cut, read a bounded piece at
a time, and every failure said by the engine client's error map (fake engines on a unix
socket; the real Podman's in test_container_lifetimes.py)."""

from __future__ import annotations

import contextlib
import itertools
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from drivers.container.engine import Engine, demux
from providers.core.errors import (
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
)
from tests.conftest import Run, shoal_argv, shoal_env
from tests.drivers.container.test_engine_errors import (
    INFO,
    PING,
    FakeEngine,
    Route,
    alloc,
    fake_engine,
)

LOGS = ("GET", "/containers/c0ffee/logs")
RUNNING = {"State": {"Status": "running", "Running": True}, "NetworkSettings": {}}


def frame(stream: int, payload: bytes) -> bytes:
    return bytes([stream, 0, 0, 0]) + len(payload).to_bytes(4, "big") + payload


def cut(data: bytes, sizes: tuple[int, ...] = (1, 2, 3, 5, 7, 11, 13)) -> list[bytes]:
    """`data` in pieces of awkward sizes: headers and payloads split across pieces."""
    pieces: list[bytes] = []
    pos = 0
    for size in itertools.cycle(sizes):
        if pos >= len(data):
            return pieces
        pieces.append(data[pos : pos + size])
        pos += size
    raise AssertionError("unreachable")


STREAM = (
    frame(1, b"one\n") + frame(2, b"two\n") + frame(1, b"") + frame(1, b"three\n" * 3)
    + frame(2, b"\x00\x01\x02\x00\x00\x00\x00\x05")  # a payload that looks like a header
)  # fmt: skip
SAID = b"one\ntwo\n" + b"three\n" * 3 + b"\x00\x01\x02\x00\x00\x00\x00\x05"


# -- the demultiplexer ------------------------------------------------------------------------


def test_demux_keeps_the_payloads_wherever_the_stream_is_cut() -> None:
    assert b"".join(demux([STREAM])) == SAID
    for first, second in itertools.combinations(range(1, len(STREAM)), 2):
        pieces = [STREAM[:first], STREAM[first:second], STREAM[second:]]
        assert b"".join(demux(pieces)) == SAID, (first, second)
    assert b"".join(demux(bytes([b]) for b in STREAM)) == SAID
    assert b"".join(demux([b"", *cut(STREAM), b""])) == SAID


def test_demux_passes_a_tty_stream_as_it_is() -> None:
    # A container with a TTY: no headers, the bytes as the terminal wrote them.
    raw = b"hi\r\n\x01there\r\n" * 50
    assert b"".join(demux(cut(raw))) == raw
    assert b"".join(demux([b"hi\r", b"\n"])) == b"hi\r\n"  # fewer than 8 bytes in all
    assert b"".join(demux([])) == b""


def test_demux_yields_a_frame_as_it_arrives_and_what_came_of_a_cut_one() -> None:
    huge = bytes([1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF])  # a frame of 4 GiB announced
    asked: list[bytes] = []

    def pieces() -> Iterator[bytes]:
        for piece in (huge + b"first", b"second"):
            asked.append(piece)
            yield piece
        raise AssertionError("not read past what was needed")

    out = demux(pieces())
    assert next(out) == b"first" and len(asked) == 1  # not held until the frame is whole
    assert next(out) == b"second"
    # A stream that ends mid-frame: what came of its payload, nothing of a header cut short.
    assert b"".join(demux([frame(1, b"whole\n") + frame(2, b"cut short")[:12]])) == b"whole\ncut "
    assert b"".join(demux([frame(1, b"whole\n") + frame(2, b"x")[:5]])) == b"whole\n"


# -- the engine client's stream ----------------------------------------------------------------


Answer = Callable[[BaseHTTPRequestHandler], None]


def chunked(pieces: list[bytes], *, end: bool = True, asked: list[str] | None = None) -> Answer:
    """A route answering 200 with `pieces` as its HTTP chunks, then the last chunk unless not
    `end` (the engine went away mid-answer); the request's target goes to `asked`."""

    def answer(handler: BaseHTTPRequestHandler) -> None:
        if asked is not None:
            asked.append(handler.path)
        handler.wfile.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for piece in pieces:
            handler.wfile.write(b"%X\r\n%b\r\n" % (len(piece), piece))
        if end:
            handler.wfile.write(b"0\r\n\r\n")

    return answer


@pytest.fixture
def sock() -> Iterator[Path]:
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="shoal-logs-"))  # a unix socket path is short
    yield short / "engine.sock"
    shutil.rmtree(short, ignore_errors=True)


At = Callable[[dict[tuple[str, str], Route]], FakeEngine]


@pytest.fixture
def engine_at(sock: Path) -> Iterator[At]:
    """Starts a fake engine on `sock` with the routes given; stopped after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda routes: stack.enter_context(fake_engine(sock, routes))


def test_the_stream_is_read_chunk_by_chunk_and_demultiplexed(sock: Path, engine_at: At) -> None:
    asked: list[str] = []
    engine_at({LOGS: (200, chunked(cut(STREAM), asked=asked))})
    got = list(Engine(f"unix://{sock}").log_stream("c0ffee", tail=None, follow=True))
    assert b"".join(got) == SAID
    assert asked == ["/v1.41/containers/c0ffee/logs?stdout=1&stderr=1&tail=all&follow=1"]
    assert max(map(len, got)) <= 13  # a piece as each chunk came, not the whole answer


def test_the_tail_goes_through_the_same_demultiplexer(sock: Path, engine_at: At) -> None:
    asked: list[str] = []
    engine_at({LOGS: (200, chunked(cut(STREAM), asked=asked))})
    assert Engine(f"unix://{sock}").logs("c0ffee", 2) == SAID.decode()
    assert asked == ["/v1.41/containers/c0ffee/logs?stdout=1&stderr=1&tail=2"]


def test_a_follow_waits_as_long_as_a_quiet_container_is(sock: Path, engine_at: At) -> None:
    # Podman 4.3 sends a followed log's head with its first line: a quiet container's
    # answer is late by as long as the container is quiet.
    def late(handler: BaseHTTPRequestHandler) -> None:
        time.sleep(1.0)
        chunked([frame(1, b"at last\n")])(handler)

    engine_at({LOGS: (200, late)})
    slow = Engine(f"unix://{sock}", timeout=0.2)
    assert list(slow.log_stream("c0ffee", tail=None, follow=True)) == [b"at last\n"]
    with pytest.raises(RetryableError, match="did not answer GET /containers/c0ffee/logs in time"):
        list(slow.log_stream("c0ffee", tail=None, follow=False))


def test_an_engine_that_goes_mid_answer_is_a_stream_cut_off(sock: Path, engine_at: At) -> None:
    engine_at({LOGS: (200, chunked([frame(1, b"so far\n"), frame(2, b"and th")], end=False))})
    got: list[bytes] = []
    with pytest.raises(ProviderUnreachableError) as caught:
        got.extend(Engine(f"unix://{sock}").log_stream("c0ffee", tail=None, follow=True))
    assert b"".join(got) == b"so far\nand th"
    assert str(caught.value).startswith("container engine: GET /containers/c0ffee/logs: ")
    assert "broke off" in str(caught.value)


def test_a_stream_framed_wrong_is_the_engines_fault(sock: Path, engine_at: At) -> None:
    def garbage(handler: BaseHTTPRequestHandler) -> None:
        handler.wfile.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")

    engine_at({LOGS: (200, garbage)})
    with pytest.raises(ShoalError) as caught:
        list(Engine(f"unix://{sock}").log_stream("c0ffee", tail=None, follow=False))
    assert type(caught.value) is ShoalError  # 1: not a connection to try again
    assert str(caught.value).startswith("container engine: GET /containers/c0ffee/logs: ")
    assert "not a chunk size" in str(caught.value)


def test_a_refusal_is_the_error_maps(sock: Path, engine_at: At) -> None:
    gone = {"message": 'no container with name or ID "c0ffee" found: no such container'}
    engine_at({LOGS: (404, gone)})
    with pytest.raises(NotFoundError, match=r'^no container with name or ID "c0ffee" found'):
        list(Engine(f"unix://{sock}").log_stream("c0ffee", tail=None, follow=True))


# -- `shoal logs` of an allocation on a fake engine --------------------------------------------


def allocated(cli: Callable[..., Run], sock: Path, routes: dict[tuple[str, str], Route]) -> str:
    routes.update(
        {
            ("GET", "/info"): (200, INFO),
            PING: (200, "OK"),
            ("POST", "/containers/create"): (201, {"Id": "c0ffee", "Warnings": []}),
            ("POST", "/containers/c0ffee/start"): (204, None),
            ("GET", "/containers/c0ffee/json"): (200, RUNNING),
        }
    )
    made = alloc(cli, f"unix://{sock}", "--json")
    assert made.exit_code == 0, made.stderr
    return str(made.json()["id"])


def test_shoal_logs_prints_the_bytes_the_engine_sent(cli: Callable[..., Run], sock: Path) -> None:
    asked: list[str] = []
    routes: dict[tuple[str, str], Route] = {LOGS: (200, chunked(cut(STREAM), asked=asked))}
    with fake_engine(sock, routes):
        alloc_id = allocated(cli, sock, routes)
        for args in ((), ("--follow",), ("--tail", "1")):
            run = cli("logs", alloc_id, *args, env={"DOCKER_HOST": "unix:///nowhere"})
            assert (run.exit_code, run.stderr) == (0, "")
            assert run.stdout == SAID.decode()
    assert [target.partition("?")[2] for target in asked] == [
        "stdout=1&stderr=1&tail=all",
        "stdout=1&stderr=1&tail=all&follow=1",
        "stdout=1&stderr=1&tail=1",
    ]


def test_shoal_logs_says_what_the_engine_refused_as_the_error_map_does(
    cli: Callable[..., Run], sock: Path
) -> None:
    routes: dict[tuple[str, str], Route] = {LOGS: (500, {"message": "log driver\nbroken"})}
    with fake_engine(sock, routes):
        alloc_id = allocated(cli, sock, routes)
        run = cli("logs", alloc_id)
        assert run.exit_code == 1, run.stderr
        assert run.stderr.strip() == (
            "shoal: error: container engine: GET /containers/c0ffee/logs: HTTP 500: "
            "log driver broken"
        )
        gone = {"message": 'no container with name or ID "c0ffee" found: no such container'}
        routes[LOGS] = routes[("GET", "/containers/c0ffee/json")] = (404, gone)
        run = cli("logs", alloc_id, "-f")
        assert run.exit_code == 1, run.stderr
        assert 'no container with name or ID "c0ffee" found' in run.stderr
    run = cli("logs", alloc_id, "-f")  # the engine is no more
    assert run.exit_code == 69, run.stderr
    assert f"no container engine answers at {sock}" in run.stderr


def test_an_engine_that_dies_mid_follow_is_69_after_what_it_sent(
    cli: Callable[..., Run], sock: Path
) -> None:
    pieces = cut(frame(1, b"so far\n") + frame(2, b"and then"))[:-1]  # a frame cut short
    routes: dict[tuple[str, str], Route] = {LOGS: (200, chunked(pieces, end=False))}
    with fake_engine(sock, routes):
        alloc_id = allocated(cli, sock, routes)
        run = cli("logs", alloc_id, "--follow", env={"SHOAL_DEBUG": ""})
    assert run.exit_code == 69, run.stderr
    assert run.stdout == "so far\nand th"
    assert "container engine: GET /containers/c0ffee/logs: " in run.stderr
    assert "broke off" in run.stderr and "unexpected" not in run.stderr


def test_ctrl_c_ends_a_follow_with_exit_0(cli: Callable[..., Run], sock: Path, home: Path) -> None:
    def held(handler: BaseHTTPRequestHandler) -> None:
        chunked([frame(1, b"ready\n")], end=False)(handler)
        handler.server.closing.wait(60)  # type: ignore[attr-defined]

    routes: dict[tuple[str, str], Route] = {LOGS: (200, held)}
    with fake_engine(sock, routes):
        alloc_id = allocated(cli, sock, routes)
        follow = subprocess.Popen(
            shoal_argv("logs", alloc_id, "-f"),
            env=shoal_env(home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        try:
            assert follow.stdout is not None
            ready, _, _ = select.select([follow.stdout], [], [], 30)
            assert ready, "no output from logs --follow"
            assert follow.stdout.readline() == "ready\n"
            follow.send_signal(signal.SIGINT)
            _, err = follow.communicate(timeout=30)
        finally:
            if follow.poll() is None:
                follow.kill()
                follow.wait(10)
    assert follow.returncode == 0, err
    assert err == ""
