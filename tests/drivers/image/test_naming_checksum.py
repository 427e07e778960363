"""Image names and versions from URLs, their checks, and the checksum forms."""

from __future__ import annotations

import base64
import hashlib

import pytest

from drivers.image import checksum, naming
from providers.core.errors import UsageError
from tests.drivers.image.server import checksum_headers

DATA = b"shoal image bytes\n" * 100


# -- names and versions --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://h/x/ubuntu-base-22.04.tar.xz", ("ubuntu-base", "22.04")),
        (
            "https://h/alpine-minirootfs-3.19.1-x86_64.tar.gz",
            ("alpine-minirootfs-3.19.1", "x86_64"),
        ),
        ("http://h/img-1.0.tar", ("img", "1.0")),
        ("http://h/img-1.0.tar.gz", ("img", "1.0")),
        ("http://h/img-1.0.tar.bz2", ("img", "1.0")),
        ("http://h/img-1.0.tar.zst", ("img", "1.0")),
        ("http://h/img-1.0.tar.zstd", ("img", "1.0")),
        ("http://h/img-1.0.tgz", ("img", "1.0")),
        ("http://h/img-1.0.txz", ("img", "1.0")),
        ("http://h/img-1.0.tbz2", ("img", "1.0")),
        ("http://h/img-1.0.tzst", ("img", "1.0")),
        ("http://h/img-2.zst", ("img", "2")),
        ("http://h/img-2.xz", ("img", "2")),
        ("http://h/IMG-1.0.TAR.GZ", ("IMG", "1.0")),
        ("http://h/img-1.0.tar.gz?sig=abc-def.tar&x=1#frag-2", ("img", "1.0")),
        ("http://h/a/b/c/rootfs-2024.01.02", ("rootfs", "2024.01.02")),
        ("http://h/my%20img-1.0.tar", ("my img", "1.0")),
    ],
)
def test_name_and_version_from_the_url(url: str, expected: tuple[str, str]) -> None:
    assert naming.split_name_version(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://h/image.tar.gz",  # no '-'
        "http://h/-1.0.tar",  # no name
        "http://h/img-.tar.gz",  # no version
        "http://h/",  # no file name
        "http://h/.tar.gz",
    ],
)
def test_name_and_version_that_cannot_be_derived(url: str) -> None:
    with pytest.raises(UsageError, match="--name and --version"):
        naming.split_name_version(url)


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("a-1.tar.gz", "a-1"),
        ("a-1.TGZ", "a-1"),
        ("a-1.gz", "a-1"),
        ("a-1.tar.xz", "a-1"),
        ("a-1.zip", "a-1.zip"),  # not an archive extension shoal knows: kept
        (".tar.gz", ".tar"),  # never strips to nothing
    ],
)
def test_strip_extension(name: str, stem: str) -> None:
    assert naming.strip_extension(name) == stem


@pytest.mark.parametrize("value", ["ubuntu", "ubuntu-base", "22.04", "v1_2+b~3", "A9", "x-1.0"])
def test_good_components(value: str) -> None:
    assert naming.check_component(value, "--name") == value


@pytest.mark.parametrize(
    "value",
    ["", "a/b", "/abs", ".hidden", "..", "../x", "a/../b", "a..b", "-x", "a b", "a\\b", "é", "a\n"],
)
def test_bad_components(value: str) -> None:
    with pytest.raises(UsageError, match="--version"):
        naming.check_component(value, "--version")


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:8080/a-1.tar", "https://example.org/x/a-1.tar.gz?token=1"]
)
def test_good_urls(url: str) -> None:
    assert naming.check_url(url) == url


@pytest.mark.parametrize(
    "url", ["ftp://h/a-1.tar", "file:///tmp/a-1.tar", "/tmp/a-1.tar", "http:///a-1.tar", ""]
)
def test_bad_urls(url: str) -> None:
    with pytest.raises(UsageError, match="http"):
        naming.check_url(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://user:Pw-Zq9-LEAK@h/a-1.tar",
        "https://user:Pw-Zq9-LEAK@h:8443/a-1.tar",
        "http://Pw-Zq9-LEAK@h/a-1.tar",
        "ftp://user:Pw-Zq9-LEAK@h/a-1.tar",  # refused for the credentials, not echoed
        "gopher://user:Pw-Zq9-LEAK@/a-1.tar",
    ],
)
def test_urls_with_credentials_are_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(UsageError) as info:
        naming.check_url(url)
    assert "Pw-Zq9-LEAK" not in str(info.value)


# -- checksums -----------------------------------------------------------------------------


@pytest.mark.parametrize("algo", ["md5", "sha1", "sha256", "sha512"])
def test_parse_every_algorithm(algo: str) -> None:
    digest = hashlib.new(algo, DATA).hexdigest()
    parsed = checksum.parse(f"{algo}:{digest}")
    assert (parsed.algo, parsed.hex) == (algo, digest)
    assert str(parsed) == f"{algo}:{digest}"
    hasher = checksum.new_hasher(parsed.algo)
    hasher.update(DATA)
    assert hasher.hexdigest() == parsed.hex


def test_parse_normalises_case_and_space() -> None:
    digest = hashlib.sha256(DATA).hexdigest()
    assert checksum.parse(f"  SHA256:{digest.upper()} \n") == checksum.Sum("sha256", digest)


def test_weak_algorithms() -> None:
    assert sorted(checksum.WEAK) == ["md5", "sha1"]
    assert checksum.DEFAULT == "sha256"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "sha256",
        "sha256:",
        ":" + "0" * 64,
        "sha384:" + "0" * 96,
        "crc32:deadbeef",
        "sha256:" + "0" * 63,
        "sha256:" + "0" * 65,
        "sha256:" + "g" * 64,
        "md5:" + "0" * 64,
        "sha256=" + "0" * 64,
    ],
)
def test_parse_refuses_malformed(text: str) -> None:
    with pytest.raises(UsageError, match="--sum"):
        checksum.parse(text)


def test_announced_reads_every_header_form() -> None:
    found = checksum.announced(checksum_headers(DATA))
    sha256 = hashlib.sha256(DATA).hexdigest()
    assert checksum.Sum("sha256", sha256) in found
    assert checksum.Sum("sha1", hashlib.sha1(DATA).hexdigest()) in found
    assert checksum.Sum("md5", hashlib.md5(DATA).hexdigest()) in found
    # X-Checksum-Sha256, Digest and Repr-Digest each announce the same sha256
    assert [s for s in found if s.algo == "sha256"] == [checksum.Sum("sha256", sha256)] * 3
    assert len(found) == 5


@pytest.mark.parametrize("name", ["Digest", "Repr-Digest"])
def test_announced_digest_lists(name: str) -> None:
    sha512 = hashlib.sha512(DATA).digest()
    md5 = hashlib.md5(DATA).digest()
    value = (
        f"unixsum=30637, sha-512=:{base64.b64encode(sha512).decode()}:, "
        f"MD5={base64.b64encode(md5).decode()}"
    )
    assert checksum.announced({name: value}) == [
        checksum.Sum("sha512", sha512.hex()),
        checksum.Sum("md5", md5.hex()),
    ]


def test_announced_header_names_are_case_insensitive() -> None:
    digest = hashlib.sha256(DATA).hexdigest()
    assert checksum.announced({"x-checksum-sha256": digest.upper()}) == [
        checksum.Sum("sha256", digest)
    ]


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Checksum-Sha256": "abc"},  # too short
        {"X-Checksum-Sha256": "z" * 64},  # not hex
        {"X-Checksum-Md5": hashlib.sha256(DATA).hexdigest()},  # wrong length for md5
        {"Digest": "sha-256=not*base64"},
        {"Digest": "sha-256=" + base64.b64encode(b"short").decode()},
        {"Repr-Digest": "sha-384=:" + base64.b64encode(bytes(48)).decode() + ":"},
        {"Content-MD5": base64.b64encode(hashlib.md5(DATA).digest()).decode()},
        {"ETag": '"' + hashlib.sha256(DATA).hexdigest() + '"'},
        {},
    ],
)
def test_announced_ignores_what_it_cannot_read(headers: dict[str, str]) -> None:
    assert checksum.announced(headers) == []
