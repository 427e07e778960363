"""`drivers.image.pull` against the real loopback server: verify, resume, cache, refuse."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from drivers.image import extract, pull
from drivers.image.pull import ChecksumMismatchError, PullOptions, PullResult
from drivers.image.source import Policy
from drivers.image.tarstream import UnsafeArchiveError
from drivers.spec.types import Image
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from tests.drivers.image import archives as A
from tests.drivers.image.server import ImageServer, checksum_headers

KIB = 1024
MIB = 1024 * KIB
RESULT_KEYS = {
    "path",
    "name",
    "version",
    "tag",
    "bytes_downloaded",
    "bytes_unpacked",
    "checksum",
    "seconds",
    "cached",
    # The spec's Image beside them (url, sum; name, version and tag above).
    "url",
    "sum",
}


def noise(size: int, seed: bytes = b"") -> bytes:
    """`size` deterministic bytes that do not compress."""
    blocks = (hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(size // 32 + 1))
    return b"".join(blocks)[:size]


def rootfs(tag: bytes = b"v1", blob: int = 300 * KIB) -> list[A.Entry]:
    return [
        A.Dir("etc"),
        A.File("etc/release", b"release " + tag + b"\n"),
        A.Dir("bin"),
        A.File("bin/tool", b"#!/bin/sh\n", mode=0o755),
        A.Symlink("bin/alias", "tool"),
        A.File("blob", noise(blob, tag)),
    ]


def rootfs_tar(tag: bytes = b"v1", compression: str = "gz", blob: int = 300 * KIB) -> bytes:
    return A.make_tar(rootfs(tag, blob), compression)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def options(out: Path, **overrides: Any) -> PullOptions:
    """Fast retries: 3 attempts, 10 ms backoff, 1 s read timeout."""
    policy = Policy(attempts=3, backoff_seconds=0.01, read_timeout_seconds=1.0)
    return PullOptions(out_dir=out, policy=policy, **overrides)


def do_pull(url: str, out: Path, sum_text: str = "", **overrides: Any) -> PullResult:
    name = overrides.pop("name", "")
    version = overrides.pop("version", "")
    tag = overrides.pop("tag", "")
    return pull.pull(url, sum_text, name, version, tag, options(out, **overrides))


def leftovers(out: Path) -> list[str]:
    """Everything in OUT but lock and meta files (what a failed pull must not leave)."""
    if not out.exists():
        return []
    return sorted(
        p.name for p in out.iterdir() if not re.fullmatch(r"\.[^/]+\.(lock|json)", p.name)
    )


def assert_release(image: Path, tag: bytes) -> None:
    assert (image / "etc/release").read_bytes() == b"release " + tag + b"\n"
    assert (image / "blob").read_bytes() == noise(300 * KIB, tag)
    assert os.readlink(image / "bin/alias") == "tool"


def gets(server: ImageServer, url: str) -> list[Any]:
    return server.requests_for(url, "GET")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "out"


# -- the happy path ---------------------------------------------------------------------------


def test_pull_unpacks_into_out_name_version(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar(b"jammy", "xz")
    url = http_server.add("/images/ubuntu-base-22.04.tar.xz", data)
    result = do_pull(url, out)
    image = out / "ubuntu-base-22.04"
    assert result.path == str(image)
    assert (result.name, result.version, result.tag) == ("ubuntu-base", "22.04", "")
    assert result.bytes_downloaded == len(data)
    assert result.bytes_unpacked == len(b"release jammy\n") + len(b"#!/bin/sh\n") + 300 * KIB
    assert result.checksum == f"sha256:{sha256(data)}"
    assert result.cached is False
    assert result.seconds >= 0
    assert set(result.to_json()) == RESULT_KEYS
    assert_release(image, b"jammy")
    assert sorted(p.name for p in out.iterdir()) == [
        ".ubuntu-base-22.04.json",
        ".ubuntu-base-22.04.lock",
        "ubuntu-base-22.04",
    ]
    meta = json.loads((out / ".ubuntu-base-22.04.json").read_text())
    assert meta["url"] == url
    assert meta["checksum"] == result.checksum
    assert meta["bytes_unpacked"] == result.bytes_unpacked
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", meta["pulled"])
    assert len(gets(http_server, url)) == 1


def test_name_version_and_tag_overrides(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/whatever.tar.gz", rootfs_tar())
    result = do_pull(url, out, name="custom", version="9.1", tag="nightly")
    assert (result.name, result.version, result.tag) == ("custom", "9.1", "nightly")
    assert result.path == str(out / "custom-9.1")
    assert_release(out / "custom-9.1", b"v1")
    assert json.loads((out / ".custom-9.1.json").read_text())["tag"] == "nightly"


@pytest.mark.parametrize(
    ("path", "name", "version"),
    [
        ("/img-1.tar", "a/b", ""),
        ("/img-1.tar", ".hidden", ""),
        ("/img-1.tar", "", "../1"),
        ("/img-1.tar", "", ".1"),
        ("/.img-1.tar", "", ""),
        ("/a%2Fb-1.tar", "", ""),
        ("/noversion.tar", "", ""),
    ],
)
def test_bad_names_refused_before_any_request(
    http_server: ImageServer, out: Path, path: str, name: str, version: str
) -> None:
    url = http_server.add(path, rootfs_tar())
    with pytest.raises(UsageError):
        do_pull(url, out, name=name, version=version)
    assert http_server.requests == []
    assert not out.exists()


def test_url_with_credentials_refused(http_server: ImageServer, out: Path) -> None:
    http_server.add("/img-1.tar", rootfs_tar())
    url = http_server.url("/img-1.tar").replace("http://", "http://user:Pw-S3cret@")
    with pytest.raises(UsageError, match="credentials") as info:
        do_pull(url, out)
    assert "Pw-S3cret" not in str(info.value)
    assert http_server.requests == []


# Each compression served under an extension that names another: bytes decide, not names.
MISLEADING = {
    "none": "/img-1.tar.zst",
    "gz": "/img-1.tar.xz",
    "xz": "/img-1.tar.bz2",
    "bz2": "/img-1.tgz",
    "zst": "/img-1.tar.gz",
}


@pytest.mark.parametrize("compression", A.COMPRESSIONS)
def test_format_detected_from_bytes_not_extension(
    http_server: ImageServer, out: Path, compression: str
) -> None:
    data = rootfs_tar(compression.encode(), compression)
    url = http_server.add(MISLEADING[compression], data)
    result = do_pull(url, out)
    assert_release(out / "img-1", compression.encode())
    assert result.checksum == f"sha256:{sha256(data)}"


@pytest.mark.parametrize("algo", ["md5", "sha1", "sha256", "sha512"])
def test_sum_in_every_algorithm(http_server: ImageServer, out: Path, algo: str) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data)
    digest = hashlib.new(algo, data).hexdigest()
    warnings: list[str] = []
    result = do_pull(url, out, f"{algo}:{digest.upper()}", warn=warnings.append)
    assert result.checksum == f"{algo}:{digest}"
    assert json.loads((out / ".img-1.json").read_text())["checksum"] == f"{algo}:{digest}"
    if algo in ("md5", "sha1"):
        assert len(warnings) == 1
        assert algo in warnings[0] and "weak" in warnings[0]
    else:
        assert warnings == []


def unexpected_files(out: Path, dirname: str, members: dict[str, int]) -> list[str]:
    """Files under OUT that are neither lock/meta files nor (partial) archive members."""
    bad = []
    for dirpath, _, filenames in os.walk(out):
        for name in filenames:
            path = Path(dirpath, name)
            rel = path.relative_to(out)
            size = path.lstat().st_size
            if len(rel.parts) == 1 and name in (f".{dirname}.lock", f".{dirname}.json"):
                continue
            top, inner = rel.parts[0], "/".join(rel.parts[1:])
            in_image = top == dirname or top.startswith(f".{dirname}.tmp-")
            if in_image and inner in members and size <= members[inner]:
                continue
            bad.append(f"{rel} ({size} bytes)")
    return bad


def test_one_pass_no_archive_file_appears_under_out(http_server: ImageServer, out: Path) -> None:
    members = {f"data/{i}": 256 * KIB for i in range(8)}
    entries: list[A.Entry] = [A.Dir("data")]
    entries += [A.File(name, noise(size, name.encode())) for name, size in members.items()]
    data = A.make_tar(entries, "gz")
    assert len(data) > 2 * MIB  # incompressible: an archive file would be big
    url = http_server.add("/img-1.tar.gz", data)
    seen: list[str] = []
    scans = 0

    def scan(done: int, total: int | None) -> None:
        nonlocal scans
        scans += 1
        seen.extend(unexpected_files(out, "img-1", members))

    do_pull(url, out, f"sha256:{sha256(data)}", on_bytes=scan)
    seen.extend(unexpected_files(out, "img-1", members))
    assert scans >= 4  # looked during the download, not only after
    assert seen == []
    assert sorted(p.name for p in (out / "img-1/data").iterdir()) == [str(i) for i in range(8)]


# -- nothing visible until verified ----------------------------------------------------------


def test_checksum_mismatch_leaves_nothing(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data)
    wrong = sha256(b"another image")
    with pytest.raises(ChecksumMismatchError) as info:
        do_pull(url, out, f"sha256:{wrong}")
    message = str(info.value)
    assert f"sha256:{wrong}" in message and f"sha256:{sha256(data)}" in message
    assert leftovers(out) == []


Failure = Callable[[ImageServer, str, Path], tuple[str, type[Exception]]]


def fail_checksum(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    server.add(path, rootfs_tar(b"v2"))
    return f"sha256:{sha256(b'not it')}", ChecksumMismatchError


def fail_corrupt(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    data = rootfs_tar(b"v2", "none")  # a flipped byte in a file's data: only the sum tells
    server.add(path, data)
    server.fault(path, "corrupt", at=len(data) // 2)
    return f"sha256:{sha256(data)}", ChecksumMismatchError


def fail_truncated(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    server.add(path, A.truncated(rootfs_tar(b"v2")))
    return "", ShoalError


def fail_404(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    server.fault(path, "status", status=404, times=None)
    return "", NotFoundError


def fail_503(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    server.fault(path, "status", status=503, times=None)
    return "", ProviderUnreachableError


def fail_dropped(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    server.add(path, rootfs_tar(b"v2"))
    server.fault(path, "truncate", at=0, times=None)
    return "", ProviderUnreachableError


def fail_unsafe(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    server.add(path, A.make_tar([*rootfs(b"v2"), A.File("../escaped", b"x")], "gz"))
    return "", UnsafeArchiveError


def fail_announced(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    data = rootfs_tar(b"v2")
    server.add(path, data, headers=checksum_headers(data, "X-Checksum-Sha256"))
    server.fault(path, "wrong_checksum")
    return "", ChecksumMismatchError


def fail_server_restarts(server: ImageServer, path: str, tmp: Path) -> tuple[str, type[Exception]]:
    server.add(path, rootfs_tar(b"v2"), ranges=False)
    server.fault(path, "truncate", at=1000, times=None)
    return "", ProviderUnreachableError  # a network that never delivers: exit 69


FAILURES: dict[str, Failure] = {
    "checksum mismatch": fail_checksum,
    "corrupt byte": fail_corrupt,
    "truncated archive": fail_truncated,
    "http 404": fail_404,
    "http 503 forever": fail_503,
    "cut at byte 0 forever": fail_dropped,
    "unsafe archive": fail_unsafe,
    "announced checksum wrong": fail_announced,
    "server cannot resume": fail_server_restarts,
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_failed_pull_leaves_nothing(
    http_server: ImageServer, out: Path, tmp_path: Path, failure: str
) -> None:
    http_server.add("/img-1.tar.gz", rootfs_tar())
    sum_text, error = FAILURES[failure](http_server, "/img-1.tar.gz", tmp_path)
    with pytest.raises(error):
        do_pull(http_server.url("/img-1.tar.gz"), out, sum_text)
    assert leftovers(out) == []
    assert not (tmp_path / "escaped").exists()


@pytest.mark.parametrize("failure", list(FAILURES))
def test_failed_force_repull_keeps_the_previous_image(
    http_server: ImageServer, out: Path, tmp_path: Path, failure: str
) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar(b"v1"))
    first = do_pull(url, out)
    meta = (out / ".img-1.json").read_text()
    sum_text, error = FAILURES[failure](http_server, "/img-1.tar.gz", tmp_path)
    with pytest.raises(error):
        do_pull(url, out, sum_text, force=True)
    assert leftovers(out) == ["img-1"]
    assert_release(out / "img-1", b"v1")
    assert (out / ".img-1.json").read_text() == meta
    assert do_pull(url, out).checksum == first.checksum  # still in place, still cached


# -- announced checksums ---------------------------------------------------------------------

ANNOUNCING = [
    ("X-Checksum-Sha256", "sha256"),
    ("X-Checksum-Sha1", "sha1"),
    ("X-Checksum-Md5", "md5"),
    ("Digest", "sha256"),
    ("Repr-Digest", "sha256"),
]


@pytest.fixture
def no_unpacking(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("unpacking started")

    monkeypatch.setattr(extract, "extract", refuse)
    yield


@pytest.mark.parametrize(("header", "algo"), ANNOUNCING)
def test_announced_checksum_disagreeing_with_sum_fails_before_unpacking(
    http_server: ImageServer, out: Path, no_unpacking: None, header: str, algo: str
) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data, headers=checksum_headers(data, header))
    announced = hashlib.new(algo, data).hexdigest()
    wanted = hashlib.new(algo, b"the image I meant").hexdigest()
    received: list[int] = []
    with pytest.raises(ChecksumMismatchError) as info:
        do_pull(url, out, f"{algo}:{wanted}", on_bytes=lambda done, total: received.append(done))
    assert f"{algo}:{announced}" in str(info.value)
    assert f"{algo}:{wanted}" in str(info.value)
    assert received == []  # not one body byte was read
    assert leftovers(out) == []


@pytest.mark.parametrize(("header", "algo"), ANNOUNCING)
def test_announced_checksum_agreeing_with_sum(
    http_server: ImageServer, out: Path, header: str, algo: str
) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data, headers=checksum_headers(data, header))
    digest = hashlib.new(algo, data).hexdigest()
    assert do_pull(url, out, f"{algo}:{digest}").checksum == f"{algo}:{digest}"
    assert_release(out / "img-1", b"v1")


@pytest.mark.parametrize(("header", "algo"), ANNOUNCING)
def test_announced_checksum_is_verified_without_sum(
    http_server: ImageServer, out: Path, header: str, algo: str
) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data, headers=checksum_headers(data, header))
    assert do_pull(url, out).checksum == f"{algo}:{hashlib.new(algo, data).hexdigest()}"


@pytest.mark.parametrize(("header", "algo"), ANNOUNCING)
def test_wrong_announced_checksum_fails_without_sum(
    http_server: ImageServer, out: Path, header: str, algo: str
) -> None:
    data = rootfs_tar()
    lie = checksum_headers(rootfs_tar(b"other"), header)
    url = http_server.add("/img-1.tar.gz", data, headers=lie)
    with pytest.raises(ChecksumMismatchError, match="checksum mismatch"):
        do_pull(url, out)
    assert leftovers(out) == []


def test_wrong_checksum_fault_fails(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data, headers=checksum_headers(data))
    http_server.fault("/img-1.tar.gz", "wrong_checksum")
    with pytest.raises(ChecksumMismatchError):
        do_pull(url, out)
    assert leftovers(out) == []
    assert do_pull(url, out).checksum == f"sha256:{sha256(data)}"  # the next answer is right


def test_sum_in_another_algorithm_than_announced(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data, headers=checksum_headers(data, "Digest"))
    digest = hashlib.sha512(data).hexdigest()
    assert do_pull(url, out, f"sha512:{digest}").checksum == f"sha512:{digest}"


# -- cache, force, lock ----------------------------------------------------------------------


def test_second_pull_is_cached(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data)
    first = do_pull(url, out, tag="t1")
    http_server.clear_requests()
    second = do_pull(url, out)
    assert http_server.requests == []
    assert second.cached is True
    assert second.bytes_downloaded == 0
    assert (second.path, second.checksum) == (first.path, first.checksum)
    assert second.bytes_unpacked == first.bytes_unpacked
    assert second.tag == "t1"
    same_sum = do_pull(url, out, f"sha256:{sha256(data)}")
    assert same_sum.cached is True
    assert http_server.requests == []


def test_force_pulls_again(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar(b"v1"))
    do_pull(url, out)
    http_server.add("/img-1.tar.gz", rootfs_tar(b"v2"))
    assert do_pull(url, out).cached is True
    assert_release(out / "img-1", b"v1")
    forced = do_pull(url, out, force=True)
    assert forced.cached is False
    assert len(gets(http_server, url)) == 2
    assert_release(out / "img-1", b"v2")
    assert leftovers(out) == ["img-1"]  # the old image is gone, not parked


def test_another_sum_pulls_the_build_asked_for(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar(b"v1"))
    do_pull(url, out)
    new = rootfs_tar(b"v2")
    http_server.add("/img-1.tar.gz", new)
    result = do_pull(url, out, f"sha256:{sha256(new)}")
    assert result.cached is False
    assert_release(out / "img-1", b"v2")


@pytest.mark.parametrize("meta", ["sha512", "missing", "garbage"])
def test_a_sum_is_cached_only_when_the_record_proves_it(
    http_server: ImageServer, out: Path, meta: str
) -> None:
    data = rootfs_tar(b"v1")
    url = http_server.add("/img-1.tar.gz", data)
    do_pull(url, out)  # records sha256
    record = out / ".img-1.json"
    if meta == "missing":
        record.unlink()
    elif meta == "garbage":
        record.write_text("{not json")
    sha512 = hashlib.sha512(data).hexdigest()
    asked = f"sha512:{sha512}" if meta == "sha512" else f"sha256:{sha256(data)}"
    result = do_pull(url, out, asked)
    assert result.cached is False  # not provably the build asked for: pulled and verified
    assert result.checksum == asked
    assert do_pull(url, out, asked).cached is True  # now the record proves it


def test_a_symlinked_lock_file_is_refused(
    http_server: ImageServer, out: Path, tmp_path: Path
) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar())
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (out / ".img-1.lock").symlink_to(victim)
    with pytest.raises(ShoalError, match="lock file"):
        do_pull(url, out)
    assert victim.read_text() == "precious"
    assert http_server.requests == []


def test_stale_temp_and_old_dirs_are_swept(http_server: ImageServer, out: Path) -> None:
    out.mkdir()
    # mkdtemp's names: an 8-character suffix.
    for stale in (".img-1.tmp-dead1abc", ".img-1.old-dead2abc", ".img-1.tmp-dead3abc/deep/er"):
        (out / stale).mkdir(parents=True)
        (out / stale / "junk").write_bytes(b"left by a killed pull")
    (out / ".other-1.tmp-keepabcd").mkdir()  # another image's: not ours to sweep
    # The temp dir of image `img-1.tmp-q` (another lock) also starts with `.img-1.tmp-`.
    (out / ".img-1.tmp-q.tmp-busyabcd").mkdir()
    url = http_server.add("/img-1.tar.gz", rootfs_tar())
    do_pull(url, out)
    assert leftovers(out) == [".img-1.tmp-q.tmp-busyabcd", ".other-1.tmp-keepabcd", "img-1"]


def test_lock_held_elsewhere_times_out(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar())
    out.mkdir()
    fd = os.open(out / ".img-1.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(RetryableError, match=r"\.img-1\.lock"):
            do_pull(url, out, lock_timeout_seconds=0.3)
        assert http_server.requests == []
    finally:
        os.close(fd)
    assert do_pull(url, out).cached is False  # released: the next pull goes ahead


# -- resume ------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "gz", "zst"])
@pytest.mark.parametrize("at", [1, 100_000, 200_001])
def test_cut_connection_resumes_with_range(
    http_server: ImageServer, out: Path, compression: str, at: int
) -> None:
    data = rootfs_tar(b"r", compression)
    assert len(data) > at
    url = http_server.add("/img-1.tar", data)
    http_server.fault("/img-1.tar", "truncate", at=at)
    result = do_pull(url, out, f"sha256:{sha256(data)}")
    first, second = gets(http_server, url)
    assert first.range is None and "if-range" not in first.headers
    assert second.range == f"bytes={at}-"
    assert second.headers["if-range"] == http_server.etag("/img-1.tar")
    assert second.status == 206
    assert result.bytes_downloaded == len(data)
    assert_release(out / "img-1", b"r")


def test_dropped_connection_resumes_where_the_bytes_stopped(
    http_server: ImageServer, out: Path
) -> None:
    data = rootfs_tar(b"r", "gz")
    url = http_server.add("/img-1.tar", data)
    http_server.fault("/img-1.tar", "drop", at=150_000)
    received: list[int] = [0]
    result = do_pull(url, out, on_bytes=lambda done, total: received.append(done))
    _, second = gets(http_server, url)
    assert second.range is not None
    start = int(second.range.removeprefix("bytes=").removesuffix("-"))
    assert start <= 150_000  # a reset may lose bytes in flight: resume from those held
    assert start in received
    assert second.headers["if-range"] == http_server.etag("/img-1.tar")
    assert result.bytes_downloaded == len(data)
    assert result.checksum == f"sha256:{sha256(data)}"
    assert_release(out / "img-1", b"r")


def test_resume_by_last_modified(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar(b"r", "none")
    stamp = "Wed, 21 Oct 2015 07:28:00 GMT"
    url = http_server.add("/img-1.tar", data, etag='W/"weak"', last_modified=stamp)
    http_server.fault("/img-1.tar", "truncate", at=5000)
    do_pull(url, out, f"sha256:{sha256(data)}")
    _, second = gets(http_server, url)
    assert (second.range, second.headers["if-range"], second.status) == ("bytes=5000-", stamp, 206)
    assert_release(out / "img-1", b"r")


def test_last_modified_within_the_date_second_is_too_weak_to_resume_by(
    http_server: ImageServer, out: Path
) -> None:
    # Modified "now": it may change again within this second, so If-Range cannot trust it.
    from email.utils import formatdate

    data = rootfs_tar(b"w", "none")
    url = http_server.add(
        "/img-1.tar", data, etag=None, last_modified=formatdate(time.time() + 5, usegmt=True)
    )
    http_server.fault("/img-1.tar", "truncate", at=5000)
    do_pull(url, out, f"sha256:{sha256(data)}")
    assert [r.range for r in gets(http_server, url)] == [None, None]  # started over
    assert_release(out / "img-1", b"w")


def test_stall_longer_than_read_timeout_resumes(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar(b"s", "gz")
    url = http_server.add("/img-1.tar", data)
    http_server.fault("/img-1.tar", "stall", at=70_000, seconds=60)
    result = do_pull(url, out, f"sha256:{sha256(data)}")
    _, second = gets(http_server, url)
    assert second.range == "bytes=70000-"
    assert result.bytes_downloaded == len(data)
    assert_release(out / "img-1", b"s")


def test_server_without_ranges_starts_over(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar(b"n", "gz")
    url = http_server.add("/img-1.tar", data, ranges=False)
    http_server.fault("/img-1.tar", "truncate", at=120_000)
    warnings: list[str] = []
    result = do_pull(url, out, f"sha256:{sha256(data)}", warn=warnings.append)
    requests = gets(http_server, url)
    assert [r.status for r in requests] == [200, 200, 200]
    assert requests[1].range == "bytes=120000-"  # asked, but got the whole body: start over
    assert requests[2].range is None
    assert any("starting the download over" in w for w in warnings)
    assert result.bytes_downloaded == 120_000 + len(data)  # all that came over the wire
    assert_release(out / "img-1", b"n")
    assert leftovers(out) == ["img-1"]


def test_changed_etag_starts_over_with_the_new_file(http_server: ImageServer, out: Path) -> None:
    old = A.make_tar([A.File("old.txt", noise(200 * KIB, b"old"))], "gz")
    new = A.make_tar([A.File("new.txt", noise(200 * KIB, b"new"))], "gz")
    url = http_server.add("/img-1.tar", old)
    http_server.fault("/img-1.tar", "truncate", at=150_000)
    old_etag = http_server.etag("/img-1.tar")
    replaced: list[bool] = []

    def replace(done: int, total: int | None) -> None:
        if not replaced:  # the file changes on the server mid-download
            http_server.add("/img-1.tar", new)
            replaced.append(True)

    result = do_pull(url, out, on_bytes=replace)
    requests = gets(http_server, url)
    assert len(requests) == 3
    assert requests[1].headers["if-range"] == old_etag
    assert requests[1].status == 200  # the validator failed: the whole new body
    assert result.checksum == f"sha256:{sha256(new)}"
    assert sorted(p.name for p in (out / "img-1").iterdir()) == ["new.txt"]


def test_no_validator_starts_over_without_asking_for_a_range(
    http_server: ImageServer, out: Path
) -> None:
    data = rootfs_tar(b"x", "gz")
    url = http_server.add("/img-1.tar", data, etag=None)
    http_server.fault("/img-1.tar", "truncate", at=100_000)
    do_pull(url, out, f"sha256:{sha256(data)}")
    assert [r.range for r in gets(http_server, url)] == [None, None]
    assert_release(out / "img-1", b"x")


def test_persistent_cuts_give_up_after_bounded_retries(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.tar", rootfs_tar())
    http_server.fault("/img-1.tar", "drop", at=0, times=None)
    with pytest.raises(ProviderUnreachableError):
        do_pull(url, out)
    assert 2 <= len(gets(http_server, url)) <= 12
    assert leftovers(out) == []


@pytest.mark.parametrize("status", [500, 502, 503, 504, 429, 408])
def test_retryable_statuses_are_retried(http_server: ImageServer, out: Path, status: int) -> None:
    data = rootfs_tar()
    url = http_server.add("/img-1.tar.gz", data)
    http_server.fault("/img-1.tar.gz", "status", status=status, times=2)
    do_pull(url, out, f"sha256:{sha256(data)}")
    assert [r.status for r in gets(http_server, url)] == [status, status, 200]
    assert_release(out / "img-1", b"v1")


def test_retryable_status_forever_gives_up(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar())
    http_server.fault("/img-1.tar.gz", "status", status=503, times=None)
    with pytest.raises(ProviderUnreachableError, match="HTTP 503 after 3 attempts"):
        do_pull(url, out)
    assert len(gets(http_server, url)) == 3


@pytest.mark.parametrize(
    ("status", "error"),
    [(401, CredentialsError), (403, CredentialsError), (404, NotFoundError), (410, ShoalError)],
)
def test_final_statuses(
    http_server: ImageServer, out: Path, status: int, error: type[Exception]
) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar())
    http_server.fault("/img-1.tar.gz", "status", status=status, times=None)
    with pytest.raises(error, match=f"HTTP {status}"):
        do_pull(url, out)
    assert len(gets(http_server, url)) == 1  # not retried
    assert leftovers(out) == []


def test_trailing_bytes_past_the_tar_count_against_the_cap(
    http_server: ImageServer, out: Path
) -> None:
    """A bomb hidden after the end-of-archive blocks is not decompressed without limit."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [compressor.compress(A.make_tar([A.File("small", b"tiny\n")]))]
    parts += [compressor.compress(bytes(MIB)) for _ in range(64)]
    data = b"".join(parts) + compressor.flush()
    url = http_server.add("/img-1.tar.gz", data)
    with pytest.raises(UnsafeArchiveError, match="unsafe archive"):
        do_pull(url, out, max_unpacked_bytes=MIB)
    assert leftovers(out) == []


def test_entry_cap(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.tar.gz", A.many_files(50, "gz"))
    with pytest.raises(UnsafeArchiveError, match="more than 20 entries"):
        do_pull(url, out, max_entries=20)
    assert leftovers(out) == []


# -- credentials ---------------------------------------------------------------------------


def test_basic_auth(http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar(), auth=("ci", "Pw-S3cret"))
    do_pull(url, out, user="ci", password="Pw-S3cret")
    assert_release(out / "img-1", b"v1")
    assert gets(http_server, url)[0].headers["authorization"].startswith("Basic ")


@pytest.mark.parametrize(("user", "password"), [("", ""), ("ci", "wrong"), ("nobody", "Pw-S3cret")])
def test_refused_credentials(http_server: ImageServer, out: Path, user: str, password: str) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar(), auth=("ci", "Pw-S3cret"))
    with pytest.raises(CredentialsError, match="HTTP 401") as info:
        do_pull(url, out, user=user, password=password)
    assert "Pw-S3cret" not in str(info.value) and "wrong" not in str(info.value)
    assert leftovers(out) == []


def test_redirect_to_another_host_drops_credentials(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar()
    http_server.add("/pub/img-1.tar.gz", data)
    url = http_server.redirect(
        "/priv/img-1.tar.gz", http_server.url("/pub/img-1.tar.gz", host="localhost")
    )
    do_pull(url, out, user="ci", password="Pw-S3cret")
    first, second = http_server.requests
    assert (first.hostname, first.status) == ("127.0.0.1", 302)
    assert "authorization" in first.headers
    assert (second.hostname, second.path, second.status) == ("localhost", "/pub/img-1.tar.gz", 200)
    assert "authorization" not in second.headers
    assert_release(out / "img-1", b"v1")


def test_credentials_never_reach_a_protected_file_on_another_host(
    http_server: ImageServer, out: Path
) -> None:
    http_server.add("/pub/img-1.tar.gz", rootfs_tar(), auth=("ci", "Pw-S3cret"))
    url = http_server.redirect(
        "/priv/img-1.tar.gz",
        http_server.url("/pub/img-1.tar.gz", host="localhost"),
        only_host="127.0.0.1",
    )
    with pytest.raises(CredentialsError) as refused:
        do_pull(url, out, user="ci", password="Pw-S3cret")
    assert [("authorization" in r.headers) for r in http_server.requests] == [True, False]
    # It says why: not that the credentials were wrong, but that they were not sent there.
    assert "never sent your credentials" in str(refused.value)
    assert "Pw-S3cret" not in str(refused.value)


def test_same_host_redirect_keeps_credentials(http_server: ImageServer, out: Path) -> None:
    http_server.add("/new/img-1.tar.gz", rootfs_tar(), auth=("ci", "Pw-S3cret"))
    url = http_server.redirect("/old/img-1.tar.gz", "/new/img-1.tar.gz", status=301)
    do_pull(url, out, user="ci", password="Pw-S3cret")
    assert [("authorization" in r.headers) for r in http_server.requests] == [True, True]
    assert_release(out / "img-1", b"v1")


def test_redirect_loop_is_an_error(http_server: ImageServer, out: Path) -> None:
    url = http_server.redirect("/loop/img-1.tar.gz", "/loop/img-1.tar.gz")
    with pytest.raises(ShoalError, match="redirects"):
        do_pull(url, out)
    assert leftovers(out) == []


# -- the driver API ------------------------------------------------------------------------


def test_image_validate_fills_name_and_version() -> None:
    image = Image(url="http://127.0.0.1:1/x/ubuntu-base-22.04.tar.zst")
    image.validate()
    assert (image.name, image.version) == ("ubuntu-base", "22.04")
    named = Image(url="http://127.0.0.1:1/x.tar", name="mine", version="2")
    named.validate()
    assert (named.name, named.version) == ("mine", "2")


@pytest.mark.parametrize(
    "image",
    [
        Image(url="ftp://h/a-1.tar"),
        Image(url="http://u:p@h/a-1.tar"),
        Image(url="http://h/a-1.tar", sum="sha256:abc"),
        Image(url="http://h/a-1.tar", sum="crc:00"),
        Image(url="http://h/noversion.tar"),
        Image(url="http://h/a-1.tar", name="../x"),
        Image(url="http://h/a-1.tar", version="1/2"),
    ],
)
def test_image_validate_refuses(image: Image) -> None:
    with pytest.raises(UsageError):
        image.validate()


def test_image_download_unpack_round_trip(http_server: ImageServer, out: Path) -> None:
    data = rootfs_tar(b"api")
    url = http_server.add("/img-3.1.tar.gz", data, auth=("ci", "Pw-S3cret"))
    image = Image(url=url, sum=f"sha256:{sha256(data)}", tag="api")
    path = image.download_unpack(str(out), "ci", "Pw-S3cret")
    assert path == str(out / "img-3.1")
    assert (image.name, image.version) == ("img", "3.1")
    assert_release(Path(path), b"api")
    assert json.loads((out / ".img-3.1.json").read_text())["tag"] == "api"
    http_server.clear_requests()
    assert Image(url=url).download_unpack(str(out), "", "") == path  # cached: no request
    assert http_server.requests == []


@pytest.mark.parametrize(("mode", "refused"), [(0o777, True), (0o775, False), (0o1777, False)])
def test_an_images_dir_everyone_can_write_to_is_refused(
    http_server: ImageServer, out: Path, mode: int, refused: bool
) -> None:
    url = http_server.add("/img-1.tar.gz", rootfs_tar())
    out.mkdir()
    out.chmod(mode)
    if refused:
        with pytest.raises(ConfigError, match="writable by everyone"):
            do_pull(url, out)
        assert http_server.requests == []
    else:
        assert do_pull(url, out).cached is False
