"""Self-tests of the image-pull test support: the loopback HTTP server and archive builders."""

from __future__ import annotations

import base64
import hashlib
import io
import socket
import tarfile
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx
import pytest
import zstandard

from tests.drivers.image import archives as A
from tests.drivers.image.server import ImageServer, checksum_headers, wrong_sha256

DATA = bytes(range(256)) * 400  # 102400 bytes, not a multiple of the 64 KiB chunk


def get(url: str, **kw: Any) -> httpx.Response:
    return httpx.get(url, timeout=5, **kw)


def read_partial(url: str, **kw: Any) -> tuple[bytes, Exception | None]:
    """Stream a GET and return (bytes received, the error that ended it or None)."""
    got = bytearray()
    try:
        with httpx.stream("GET", url, **kw) as response:
            for piece in response.iter_raw():
                got += piece
    except httpx.HTTPError as exc:
        return bytes(got), exc
    return bytes(got), None


# -- plain serving and ranges --------------------------------------------------------------


def test_full_get_has_etag_length_and_accept_ranges(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    response = get(url)
    assert response.status_code == 200
    assert response.content == DATA
    assert response.headers["content-length"] == str(len(DATA))
    assert response.headers["accept-ranges"] == "bytes"
    assert response.headers["etag"] == f'"{hashlib.sha1(DATA).hexdigest()}"'
    assert http_server.etag("/img.tar") == response.headers["etag"]


def test_head_sends_headers_only(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    response = httpx.head(url, timeout=5)
    assert response.status_code == 200
    assert response.headers["content-length"] == str(len(DATA))
    assert response.content == b""


@pytest.mark.parametrize(
    ("header", "start", "end"),
    [
        ("bytes=1000-", 1000, len(DATA)),
        ("bytes=10-19", 10, 20),
        ("bytes=-100", len(DATA) - 100, len(DATA)),
    ],
)
def test_range_gives_206(http_server: ImageServer, header: str, start: int, end: int) -> None:
    url = http_server.add("/img.tar", DATA)
    response = get(url, headers={"Range": header})
    assert response.status_code == 206
    assert response.content == DATA[start:end]
    assert response.headers["content-range"] == f"bytes {start}-{end - 1}/{len(DATA)}"
    assert response.headers["content-length"] == str(end - start)
    assert http_server.requests[-1].range == header


def test_range_past_end_is_416(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    response = get(url, headers={"Range": f"bytes={len(DATA)}-"})
    assert response.status_code == 416
    assert response.headers["content-range"] == f"bytes */{len(DATA)}"


def test_if_range_matching_etag_gives_206_else_full_200(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    etag = get(url).headers["etag"]
    same = get(url, headers={"Range": "bytes=100-", "If-Range": etag})
    assert (same.status_code, same.content) == (206, DATA[100:])

    new = DATA[::-1]
    http_server.add("/img.tar", new)  # the image changed on the server
    changed = get(url, headers={"Range": "bytes=100-", "If-Range": etag})
    assert (changed.status_code, changed.content) == (200, new)
    assert "content-range" not in changed.headers
    assert changed.headers["etag"] != etag


def test_weak_etag_never_satisfies_if_range(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA, etag='W/"v1"')
    response = get(url, headers={"Range": "bytes=100-", "If-Range": 'W/"v1"'})
    assert response.status_code == 200


def test_ranges_false_ignores_range(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA, ranges=False, etag=None)
    response = get(url, headers={"Range": "bytes=100-"})
    assert (response.status_code, response.content) == (200, DATA)
    assert "accept-ranges" not in response.headers
    assert "etag" not in response.headers


def test_big_body_from_memory_and_from_disk(http_server: ImageServer, tmp_path: Path) -> None:
    big = hashlib.sha256(b"seed").digest() * (4 * 1024 * 1024 // 32 + 7)
    on_disk = tmp_path / "big.bin"
    on_disk.write_bytes(big)
    for url in (http_server.add("/mem", big), http_server.add("/disk", on_disk)):
        assert hashlib.sha256(get(url).content).digest() == hashlib.sha256(big).digest()
        tail = get(url, headers={"Range": "bytes=3000000-"})
        assert tail.content == big[3000000:]
    assert http_server.etag("/mem") == http_server.etag("/disk")


def test_unknown_path_is_404(http_server: ImageServer) -> None:
    assert get(http_server.url("/nope")).status_code == 404


def test_extra_and_checksum_headers(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA, headers={**checksum_headers(DATA), "X-Extra": "1"})
    headers = get(url).headers
    digest = hashlib.sha256(DATA).digest()
    assert headers["x-checksum-sha256"] == hashlib.sha256(DATA).hexdigest()
    assert headers["x-checksum-sha1"] == hashlib.sha1(DATA).hexdigest()
    assert headers["x-checksum-md5"] == hashlib.md5(DATA).hexdigest()
    assert headers["digest"] == "sha-256=" + base64.b64encode(digest).decode()
    assert headers["repr-digest"] == "sha-256=:" + base64.b64encode(digest).decode() + ":"
    assert headers["x-extra"] == "1"
    assert checksum_headers(DATA, "Digest") == {"Digest": headers["digest"]}


def test_url_refuses_non_loopback_hosts(http_server: ImageServer) -> None:
    assert http_server.url("x", host="localhost") == f"http://localhost:{http_server.port}/x"
    with pytest.raises(ValueError):
        http_server.url("/x", host="example.com")


# -- auth and redirects --------------------------------------------------------------------


def test_basic_auth_and_forbidden(http_server: ImageServer) -> None:
    url = http_server.add("/private", DATA, auth=("user", "pw"))
    missing = get(url)
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Basic ")
    assert get(url, auth=("user", "nope")).status_code == 401
    assert get(url, auth=("user", "pw")).content == DATA

    denied = http_server.add("/denied", DATA, forbidden=True)
    assert get(denied, auth=("user", "pw")).status_code == 403


def test_redirect_to_localhost_and_no_auth_crosses_hosts(http_server: ImageServer) -> None:
    http_server.add("/img.tar", DATA)
    http_server.redirect(
        "/img.tar", http_server.url("/img.tar", host="localhost"), only_host="127.0.0.1"
    )
    response = get(http_server.url("/img.tar"), auth=("user", "pw"), follow_redirects=True)
    assert response.content == DATA
    first, second = http_server.requests
    assert (first.hostname, first.status) == ("127.0.0.1", 302)
    assert "authorization" in first.headers
    assert (second.hostname, second.status) == ("localhost", 200)
    assert second.host == f"localhost:{http_server.port}"
    assert "authorization" not in second.headers


def test_redirect_status_and_location(http_server: ImageServer) -> None:
    url = http_server.redirect("/old", "/new", status=301)
    response = get(url)
    assert (response.status_code, response.headers["location"]) == (301, "/new")


# -- faults --------------------------------------------------------------------------------


def test_drop_resets_after_at_bytes_then_resume_with_range(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "drop", at=70000)
    got, error = read_partial(url)
    assert isinstance(error, httpx.ReadError | httpx.RemoteProtocolError)
    assert got == DATA[:70000]
    etag = http_server.etag("/img.tar")
    assert etag is not None
    rest = get(url, headers={"Range": f"bytes={len(got)}-", "If-Range": etag})
    assert rest.status_code == 206
    assert got + rest.content == DATA


def test_truncate_closes_cleanly_short_of_content_length(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    fault = http_server.fault("/img.tar", "truncate", at=1234)
    got, error = read_partial(url)
    assert isinstance(error, httpx.RemoteProtocolError)
    assert got == DATA[:1234]
    assert fault.hits == 1 and fault.exhausted
    assert get(url).content == DATA  # consumed once


def test_fault_at_counts_bytes_of_a_range_response(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "truncate", at=10)
    got, _ = read_partial(url, headers={"Range": "bytes=500-"})
    assert got == DATA[500:510]


def test_stall_hangs_without_closing(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "stall", at=5000, seconds=60)
    started = time.monotonic()
    got, error = read_partial(url, timeout=httpx.Timeout(5, read=0.3))
    assert isinstance(error, httpx.ReadTimeout)
    assert got == DATA[:5000]
    assert time.monotonic() - started < 5
    # the handler is still sleeping; fixture teardown must end it


def test_short_stall_then_the_rest(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "stall", at=100, seconds=0.2)
    started = time.monotonic()
    assert get(url).content == DATA
    assert time.monotonic() - started >= 0.2


def test_delay_before_headers(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "delay", seconds=60)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(url, timeout=httpx.Timeout(5, read=0.3))


def test_status_faults_consumed_in_order_and_times(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "status", status=503, headers={"Retry-After": "1"}, times=2)
    http_server.fault("/img.tar", "status", status=429)
    http_server.fault("/img.tar", "status", status=500)
    first = get(url)
    assert (first.status_code, first.headers["retry-after"]) == (503, "1")
    assert [get(url).status_code for _ in range(4)] == [503, 429, 500, 200]
    assert [r.status for r in http_server.requests_for("/img.tar")] == [503, 503, 429, 500, 200]


def test_status_fault_404_and_forever(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "status", status=404, times=None)
    assert [get(url).status_code for _ in range(3)] == [404, 404, 404]
    http_server.clear_faults("/img.tar")
    assert get(url).status_code == 200


def test_fault_restricted_to_method(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "status", status=500, method="HEAD")
    assert get(url).status_code == 200
    assert httpx.head(url, timeout=5).status_code == 500


def test_body_faults_skip_head(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "truncate", at=10)
    assert httpx.head(url, timeout=5).status_code == 200
    got, error = read_partial(url)
    assert (len(got), type(error)) == (10, httpx.RemoteProtocolError)


def test_faults_wait_behind_auth(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA, auth=("u", "p"))
    http_server.fault("/img.tar", "status", status=503)
    assert get(url).status_code == 401
    assert get(url, auth=("u", "p")).status_code == 503


def test_wrong_checksum_header(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA, headers=checksum_headers(DATA, "X-Checksum-Sha256"))
    http_server.fault("/img.tar", "wrong_checksum")
    bad = get(url)
    assert bad.content == DATA
    assert bad.headers["x-checksum-sha256"] == wrong_sha256(DATA)
    assert bad.headers["x-checksum-sha256"] != hashlib.sha256(DATA).hexdigest()
    assert get(url).headers["x-checksum-sha256"] == hashlib.sha256(DATA).hexdigest()


def test_corrupt_flips_one_byte(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    http_server.fault("/img.tar", "corrupt", at=65537)
    body = get(url).content
    assert len(body) == len(DATA)
    assert [i for i in range(len(DATA)) if body[i] != DATA[i]] == [65537]


def test_unknown_fault_kind_rejected(http_server: ImageServer) -> None:
    with pytest.raises(ValueError):
        http_server.fault("/x", "explode")


# -- request log and lifecycle -------------------------------------------------------------


def test_request_log_records_headers_and_connections(http_server: ImageServer) -> None:
    url = http_server.add("/img.tar", DATA)
    with httpx.Client(timeout=5, headers={"X-Test": "yes"}) as client:
        client.get(url + "?q=1", headers={"Range": "bytes=0-9"})
        client.get(url)
    first, second = http_server.requests
    assert (first.method, first.path, first.target) == ("GET", "/img.tar", "/img.tar?q=1")
    assert first.host == f"127.0.0.1:{http_server.port}"
    assert first.headers["x-test"] == "yes"
    assert first.range == "bytes=0-9" and second.range is None
    assert (first.status, second.status) == (206, 200)
    assert first.connection == second.connection  # keep-alive reused
    assert http_server.requests_for("/img.tar", "GET") == [first, second]
    http_server.clear_requests()
    assert http_server.requests == []


def test_stop_ends_stalled_and_idle_handlers() -> None:
    server = ImageServer().start()
    url = server.add("/img.tar", DATA)
    server.fault("/img.tar", "stall", at=10, seconds=120)
    stalled = socket.create_connection(("127.0.0.1", server.port))
    stalled.sendall(b"GET /img.tar HTTP/1.1\r\nHost: x\r\n\r\n")
    stalled.recv(100)
    idle = httpx.Client(timeout=5)
    idle.get(url)  # leaves an idle keep-alive connection open
    before = threading.active_count()
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 3
    assert threading.active_count() < before
    assert not [t for t in threading.enumerate() if t.name.startswith("image-server")]
    stalled.close()
    idle.close()


# -- archives ------------------------------------------------------------------------------


def members(data: bytes) -> list[tarfile.TarInfo]:
    """List members with tarfile's reader (fine for inspecting what the builders wrote)."""
    if A.compression_of(data) == "zst":
        data = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
        return tar.getmembers()


@pytest.mark.parametrize("compression", A.COMPRESSIONS)
def test_make_tar_compressions_by_magic_and_round_trip(compression: str) -> None:
    data = A.make_tar([A.Dir("d"), A.File("d/f", b"hello")], compression)
    assert A.compression_of(data) == compression
    if compression != "none":
        assert data.startswith(A.MAGIC[compression])
    else:
        assert data[257:262] == b"ustar"
    names = [(m.name, m.type, m.size) for m in members(data)]
    assert names == [("d", tarfile.DIRTYPE, 0), ("d/f", tarfile.REGTYPE, 5)]
    assert A.make_tar([A.File("f", b"x")], compression) == A.make_tar(
        [A.File("f", b"x")], compression
    )  # deterministic


def test_entry_types_and_mode_bits_round_trip() -> None:
    data = A.make_tar(
        [
            A.File("f", b"data", mode=0o600),
            A.Dir("d"),
            A.Symlink("s", "f"),
            A.Hardlink("h", "f"),
            A.Fifo("p"),
            A.CharDevice("c"),
            A.BlockDevice("b", major=8, minor=1),
            A.File("suid", b"", mode=0o4755),
            A.setgid("sgid"),
            A.File("tweaked", b"", tweak=lambda info: setattr(info, "uid", 4242)),
        ]
    )
    got = {m.name: m for m in members(data)}
    assert got["f"].isreg() and got["f"].mode == 0o600
    assert got["d"].isdir()
    assert got["s"].issym() and got["s"].linkname == "f"
    assert got["h"].islnk() and got["h"].linkname == "f"
    assert got["p"].isfifo()
    assert got["c"].ischr() and (got["c"].devmajor, got["c"].devminor) == (1, 3)
    assert got["b"].isblk() and (got["b"].devmajor, got["b"].devminor) == (8, 1)
    assert got["suid"].mode == 0o4755
    assert got["sgid"].mode == 0o2755
    assert got["tweaked"].uid == 4242
    assert [m.name for m in members(A.special_files("xz"))] == [
        "fifo",
        "null",
        "loop0",
        "suid",
        "sgid",
    ]


def test_raw_tarinfo_entry() -> None:
    info = tarfile.TarInfo("raw")
    info.size = 3
    info.mode = 0o7777
    (member,) = members(A.make_tar([A.Raw(info, b"abc")]))
    assert (member.name, member.size, member.mode) == ("raw", 3, 0o7777)


def test_gzip_bomb_is_small_and_built_streaming() -> None:
    size = 32 * 1024 * 1024
    tracemalloc.start()
    try:
        data = A.gzip_bomb(size)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024
    assert A.compression_of(data) == "gz"
    assert len(data) < size // 500
    (member,) = members(data)
    assert (member.name, member.size) == ("zeros", size)


def test_bomb_to_path(tmp_path: Path) -> None:
    path = A.bomb(1024 * 1024, "zst", path=tmp_path / "b.tar.zst")
    assert isinstance(path, Path)
    assert A.compression_of(path.read_bytes()) == "zst"


def test_write_tar_and_simple(tmp_path: Path) -> None:
    path = A.write_tar(tmp_path / "x.tar.bz2", [A.File("a", b"1")], "bz2")
    assert [m.name for m in members(path.read_bytes())] == ["a"]
    assert "bin/tool2" in [m.name for m in members(A.simple("gz"))]


def test_many_files() -> None:
    got = members(A.many_files(2500, "gz"))
    files = [m for m in got if m.isreg()]
    assert len(files) == 2500
    assert len({m.name for m in files}) == 2500
    assert [m.name for m in got if m.isdir()] == ["files", "files/0000", "files/0001", "files/0002"]


def test_hostile_archives_have_the_promised_members(tmp_path: Path) -> None:
    outside = str(tmp_path / "outside")

    def kinds(data: bytes) -> list[tuple[str, bytes, str]]:
        return [(m.name, m.type, m.linkname) for m in members(data)]

    assert kinds(A.absolute_path(outside + "/abs"))[-1] == (outside + "/abs", tarfile.REGTYPE, "")
    assert kinds(A.dotdot())[-1][0].startswith("../")
    assert kinds(A.symlink_escape()) == [("link", tarfile.SYMTYPE, "../../etc")]
    assert kinds(A.symlink_absolute()) == [("link", tarfile.SYMTYPE, "/etc")]
    assert kinds(A.symlink_then_write_through(outside)) == [
        ("d", tarfile.SYMTYPE, outside),
        ("d/x", tarfile.REGTYPE, ""),
    ]
    assert [k[0] for k in kinds(A.dir_then_symlink_write_through(outside))] == ["d", "d", "d/x"]
    assert kinds(A.hardlink_escape()) == [("link", tarfile.LNKTYPE, "../outside")]
    assert [k[1] for k in kinds(A.hardlink_then_overwrite())] == [tarfile.LNKTYPE, tarfile.REGTYPE]
    assert kinds(A.pax_path_escape()) == [("../shoal-test-pax-escape", tarfile.REGTYPE, "")]


def test_pax_long_names() -> None:
    data = A.pax_long_names(300)
    directory, file_name, link_name, link_target = A.pax_long_name_members(300)
    got = [(m.name, m.linkname) for m in members(data)]
    assert got == [(directory, ""), (file_name, ""), (link_name, link_target)]
    assert len(file_name) > 255 and len(link_target) > 100
    assert b" path=" in data and b" linkpath=" in data


def test_truncated() -> None:
    data = A.simple()
    assert A.truncated(data) == data[: len(data) // 2]
    assert A.truncated(data, 600) == data[:600]
