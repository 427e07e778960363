"""The engine client's HTTP/1.1 (drivers/container/engine_http.py) on a socket pair: the
request as sent, and answers framed each way an engine frames them, or broken."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from drivers.container.engine_http import ProtocolError, Response, send


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    ours, engine = socket.socketpair()
    ours.settimeout(5)
    engine.settimeout(5)
    yield ours, engine
    ours.close()
    engine.close()


def answer(pair: tuple[socket.socket, socket.socket], raw: bytes, method: str = "GET") -> Response:
    ours, engine = pair
    engine.sendall(raw)
    engine.shutdown(socket.SHUT_WR)
    return Response(ours, method)


def received(engine: socket.socket) -> bytes:
    data = b""
    while chunk := engine.recv(65536):
        data += chunk
    return data


def test_a_json_body_goes_with_its_length(pair: tuple[socket.socket, socket.socket]) -> None:
    ours, engine = pair
    send(ours, "POST", "/v1.41/containers/create?name=x", {"User-Agent": "shoal"}, b'{"a":1}')
    ours.shutdown(socket.SHUT_WR)
    head, _, body = received(engine).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /v1.41/containers/create?name=x HTTP/1.1"
    assert {"Host: engine", "Connection: close", "User-Agent: shoal", "Content-Length: 7"} <= set(
        lines
    )
    assert body == b'{"a":1}'


def test_an_empty_post_says_so_and_an_upload_goes_chunked(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    ours, engine = pair
    send(ours, "POST", "/x", {}, None)
    send(ours, "POST", "/y", {}, iter([b"abc", b"", b"0123456789"]))
    ours.shutdown(socket.SHUT_WR)
    first, second = received(engine).split(b"POST /y", 1)
    assert b"Content-Length: 0\r\n" in first
    head, _, body = second.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head
    assert body == b"3\r\nabc\r\nA\r\n0123456789\r\n0\r\n\r\n"  # the empty piece is skipped


def test_content_length(pair: tuple[socket.socket, socket.socket]) -> None:
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nLibpod-Api-Version: 4\r\n\r\nhello"
    got = answer(pair, raw)
    assert (got.status, got.reason) == (200, "OK")
    assert got.headers["libpod-api-version"] == "4"
    assert got.read_all(100) == b"hello"
    assert got.read() == b""


def test_chunked_read_whole_and_in_small_pieces(pair: tuple[socket.socket, socket.socket]) -> None:
    raw = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;x=y\r\nhello\r\n6\r\n world\r\n0\r\nT: 1\r\n\r\n"  # an extension, a trailer
    )
    got = answer(pair, raw)
    pieces = []
    while piece := got.read(4):
        pieces.append(piece)
    assert b"".join(pieces) == b"hello world"
    assert max(map(len, pieces)) <= 4


@pytest.mark.parametrize(
    "framed",
    [
        b"B\r\nhello world\r\n0\r\n\r\n",  # upper-case hex
        b"0000b\r\nhello world\r\n0\r\n\r\n",  # leading zeros
        b"5 ;ext\r\nhello\r\n6\t; a=\"b\"\r\n world\r\n0\r\n\r\n",  # space before ";"
        b"5\nhello\n6\n world\n0\n\n",  # bare LF line ends
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n",  # no blank line after the last chunk
    ],
)
def test_chunk_sizes_as_servers_write_them(
    pair: tuple[socket.socket, socket.socket], framed: bytes
) -> None:
    got = answer(pair, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framed)
    assert got.read_all(100) == b"hello world"


def test_up_to_the_close_and_no_body_where_none_may_be(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    got = answer(pair, b"HTTP/1.0 200 OK\r\n\r\nall of it")
    assert got.read_all(100) == b"all of it"


def test_a_304_has_no_body_and_a_100_continue_is_skipped(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n"
    got = answer(pair, raw, "POST")
    assert got.status == 304
    assert got.read_all(100) == b""


def test_read_all_stops_past_its_limit(pair: tuple[socket.socket, socket.socket]) -> None:
    got = answer(pair, b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789")
    assert got.read_all(4) == b"01234"  # one byte past the limit: the caller's cue


@pytest.mark.parametrize(
    "raw",
    [
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 2xx OK\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\n",  # a digit, but not ASCII
        b"HTTP/1.1 200 OK\r\nContent-Le",
    ],
)
def test_what_is_not_http_is_a_protocol_error(
    pair: tuple[socket.socket, socket.socket], raw: bytes
) -> None:
    with pytest.raises(ProtocolError):
        answer(pair, raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n9\r\ncut",
    ],
)
def test_a_body_cut_short_is_a_protocol_error(
    pair: tuple[socket.socket, socket.socket], raw: bytes
) -> None:
    got = answer(pair, raw)
    with pytest.raises(ProtocolError):
        got.read_all(100)


def test_a_hang_up_before_any_answer_is_a_connection_error(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    with pytest.raises(ConnectionResetError):
        answer(pair, b"")
