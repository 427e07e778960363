"""`shoal image pull/list/rm` through the CLI, in-process and as real processes."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import json
import os
import pty
import re
import shutil
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import shoal_argv, shoal_env, spawn, wait_for
from tests.drivers.image import archives as A
from tests.drivers.image.server import ImageServer, checksum_headers

KIB = 1024
MIB = 1024 * KIB
FAST = "[image]\nattempts = 3\nbackoff_seconds = 0.01\nread_timeout_seconds = 1\n"
PATIENT = "[image]\nattempts = 3\nbackoff_seconds = 0.01\nread_timeout_seconds = 60\n"
PASSWORD = "Pw-q7Zx-NEVER-PRINT-9k2"
TERMINAL = {"TERM": "xterm-256color"}  # rich draws no live display on a dumb terminal
TOKEN = base64.b64encode(f"ci:{PASSWORD}".encode()).decode()
JSON_KEYS = {
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

Cli = Callable[..., Any]


@pytest.fixture
def http_server() -> Iterator[ImageServer]:
    """The loopback image server (tests/drivers/image/server.py), stopped after the test."""
    server = ImageServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def isolated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_config: Callable[[str], Path]
) -> Path:
    """HOME in tmp (for ~/.netrc), no image credentials from outside, fast retries."""
    fake_home = tmp_path / "user-home"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.delenv("SHOAL_IMAGE_USER", raising=False)
    monkeypatch.delenv("SHOAL_IMAGE_PASSWORD", raising=False)
    write_config(FAST)
    return fake_home


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "images"




def noise(size: int, seed: bytes = b"") -> bytes:
    blocks = (hashlib.sha256(seed + i.to_bytes(8, "big")).digest() for i in range(size // 32 + 1))
    return b"".join(blocks)[:size]


def image_tar(tag: bytes = b"v1", compression: str = "gz", blob: int = 300 * KIB) -> bytes:
    return A.make_tar(
        [
            A.Dir("etc"),
            A.File("etc/release", b"release " + tag + b"\n"),
            A.File("blob", noise(blob, tag)),
        ],
        compression,
    )


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def leftovers(out: Path) -> list[str]:
    """Everything in OUT but lock and meta files."""
    if not out.exists():
        return []
    return sorted(
        p.name for p in out.iterdir() if not re.fullmatch(r"\.[^/]+\.(lock|json)", p.name)
    )


def pull(cli: Cli, url: str, out: Path, *args: str, **kw: Any) -> Any:
    return cli("image", "pull", url, "--out", str(out), *args, **kw)


def one_error(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("shoal: error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


# -- pull: output ----------------------------------------------------------------------------


def test_pull_prints_the_path_and_one_summary_line(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    data = image_tar()
    url = http_server.add("/dl/ubuntu-base-22.04.tar.zst", data)  # gzip inside
    run = pull(cli, url, out)
    assert run.exit_code == 0, run.stderr
    assert run.stdout == f"{out / 'ubuntu-base-22.04'}\n"
    *progress, summary = run.stderr.splitlines()
    assert all(line.startswith("pulling ubuntu-base-22.04.tar.zst: ") for line in progress)
    assert summary.startswith("pulled ubuntu-base-22.04: ")
    assert f"{len(data) / KIB:.1f} KiB in " in summary and f"sha256:{sha256(data)}" in summary
    assert (out / "ubuntu-base-22.04/etc/release").read_bytes() == b"release v1\n"


def test_json_has_exactly_the_documented_fields(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    data = image_tar()
    url = http_server.add("/img-1.0.tar.gz", data)
    run = pull(cli, url, out, "--json", "--tag", "nightly")
    assert run.exit_code == 0, run.stderr
    assert run.stderr == ""
    got = run.json()
    assert set(got) == JSON_KEYS
    assert got["path"] == str(out / "img-1.0")
    assert (got["name"], got["version"], got["tag"]) == ("img", "1.0", "nightly")
    assert got["bytes_downloaded"] == len(data)
    assert got["bytes_unpacked"] == len(b"release v1\n") + 300 * KIB
    assert got["checksum"] == f"sha256:{sha256(data)}"
    assert isinstance(got["seconds"], float | int) and got["seconds"] >= 0
    assert got["cached"] is False
    assert (got["url"], got["sum"]) == (url, got["checksum"])  # the spec's Image


def test_second_pull_is_cached_and_force_pulls_again(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar(b"v1"))
    assert pull(cli, url, out).exit_code == 0
    http_server.add("/img-1.0.tar.gz", image_tar(b"v2"))
    http_server.clear_requests()
    cached = pull(cli, url, out, "--json")
    assert cached.exit_code == 0
    assert cached.json()["cached"] is True
    assert cached.json()["bytes_downloaded"] == 0
    assert http_server.requests_for("/img-1.0.tar.gz", "GET") == []
    text = pull(cli, url, out)
    assert text.exit_code == 0 and "already in place" in text.stderr
    forced = pull(cli, url, out, "--json", "--force")
    assert forced.exit_code == 0
    assert forced.json()["cached"] is False
    assert len(http_server.requests_for("/img-1.0.tar.gz", "GET")) == 1
    assert (out / "img-1.0/etc/release").read_bytes() == b"release v2\n"


def test_name_and_version_flags(cli: Cli, http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/latest.tar.xz", image_tar(compression="xz"))
    run = pull(cli, url, out, "--name", "base", "--version", "2024.1")
    assert run.exit_code == 0, run.stderr
    assert run.stdout == f"{out / 'base-2024.1'}\n"


def test_default_images_dir_and_config_dir(
    cli: Cli, http_server: ImageServer, home: Path, tmp_path: Path, write_config: Any
) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar())
    run = cli("image", "pull", url)
    assert run.exit_code == 0, run.stderr
    assert run.stdout == f"{home / 'data/images/img-1.0'}\n"
    configured = tmp_path / "configured"
    write_config(FAST + f'dir = "{configured}"\n')
    run = cli("image", "pull", url)
    assert run.exit_code == 0, run.stderr
    assert run.stdout == f"{configured / 'img-1.0'}\n"
    listed = cli("image", "list", "--json")
    assert [i["path"] for i in listed.json()] == [str(configured / "img-1.0")]


# -- pull: refusals --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "flags"),
    [
        ("/img-1.0.tar", ("--name", "a/b")),
        ("/img-1.0.tar", ("--name", ".hidden")),
        ("/img-1.0.tar", ("--version", "../1")),
        ("/img-1.0.tar", ("--version", "1/2")),
        ("/.img-1.0.tar", ()),
        ("/a%2Fb-1.0.tar", ()),
        ("/noversion.tar", ()),
        ("/img-1.0.tar", ("--sum", "sha256:abc")),
        ("/img-1.0.tar", ("--sum", "crc32:00000000")),
    ],
)
def test_bad_input_exits_2_before_any_request(
    cli: Cli, http_server: ImageServer, out: Path, path: str, flags: tuple[str, ...]
) -> None:
    url = http_server.add(path, image_tar())
    run = pull(cli, url, out, *flags)
    assert run.exit_code == 2, run.stderr
    one_error(run.stderr)
    assert run.stdout == ""
    assert http_server.requests == []
    assert leftovers(out) == []


@pytest.mark.parametrize("scheme", ["http", "ftp"])
def test_url_with_credentials_exits_2_without_echoing_them(
    cli: Cli, http_server: ImageServer, out: Path, scheme: str
) -> None:
    http_server.add("/img-1.0.tar", image_tar())
    url = f"{scheme}://ci:{PASSWORD}@127.0.0.1:{http_server.port}/img-1.0.tar"
    run = pull(cli, url, out)
    assert run.exit_code == 2
    assert "credentials" in one_error(run.stderr)
    assert PASSWORD not in run.stdout + run.stderr
    assert http_server.requests == []


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:99999/img-1.0.tar", "its port 99999 is out of range 1-65535"),
        ("http://127.0.0.1:0/img-1.0.tar", "its port 0 is out of range 1-65535"),
        ("http://[::1/img-1.0.tar", "its host has a '[' without its ']'"),
        ("http://host:port/img-1.0.tar", "its port is not a number"),
        ("ftp://127.0.0.1/img-1.0.tar", "its scheme 'ftp' is not http or https"),
        ("http:///img-1.0.tar", "it has no host"),
        ("http://:8080/img-1.0.tar", "it has no host"),
        ("http://127.0.0.1/img\x00-1.0.tar", "a space or a control character"),
        ("http://127.0.0.1/img -1.0.tar", "a space or a control character"),
        ("http://127.0.0.1 /img-1.0.tar", "a space or a control character"),
    ],
)
def test_a_malformed_url_argument_exits_2_naming_it(
    cli: Cli, out: Path, url: str, said: str
) -> None:
    # SHOAL_DEBUG unset: an unexpected exception would be the one-line "unexpected ..." error.
    run = pull(cli, url, out, env={"SHOAL_DEBUG": ""})
    assert run.exit_code == 2, run.stderr
    line = one_error(run.stderr)
    assert line.startswith("shoal: error: URL argument ") and said in line, line
    assert "unexpected" not in run.stderr and run.stdout == ""
    assert leftovers(out) == []


@pytest.mark.parametrize("algo", ["md5", "sha1", "sha256", "sha512"])
def test_sum_algorithms_and_weak_warning(
    cli: Cli, http_server: ImageServer, out: Path, algo: str
) -> None:
    data = image_tar()
    url = http_server.add("/img-1.0.tar.gz", data)
    digest = hashlib.new(algo, data).hexdigest()
    run = pull(cli, url, out, "--sum", f"{algo}:{digest}", "--json")
    assert run.exit_code == 0, run.stderr
    assert run.json()["checksum"] == f"{algo}:{digest}"
    warnings = [line for line in run.stderr.splitlines() if line.startswith("shoal: warning:")]
    if algo in ("md5", "sha1"):
        assert len(warnings) == 1 and algo in warnings[0]
    else:
        assert run.stderr == ""


def test_checksum_mismatch_exits_1_with_both_sums(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    data = image_tar()
    url = http_server.add("/img-1.0.tar.gz", data)
    wrong = sha256(b"something else")
    run = pull(cli, url, out, "--sum", f"sha256:{wrong}")
    assert run.exit_code == 1
    error = one_error(run.stderr)
    assert f"sha256:{wrong}" in error and f"sha256:{sha256(data)}" in error
    assert run.stdout == ""
    assert leftovers(out) == []


@pytest.mark.parametrize("header", ["X-Checksum-Sha256", "Digest", "Repr-Digest"])
def test_announced_checksum_against_sum_exits_1_with_both(
    cli: Cli, http_server: ImageServer, out: Path, header: str
) -> None:
    data = image_tar()
    url = http_server.add("/img-1.0.tar.gz", data, headers=checksum_headers(data, header))
    wrong = sha256(b"the build I meant")
    run = pull(cli, url, out, "--sum", f"sha256:{wrong}")
    assert run.exit_code == 1
    error = one_error(run.stderr)
    assert f"sha256:{wrong}" in error and f"sha256:{sha256(data)}" in error
    assert "announces" in error
    assert leftovers(out) == []


def test_wrong_announced_checksum_without_sum_exits_1(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    data = image_tar()
    url = http_server.add("/img-1.0.tar.gz", data, headers=checksum_headers(data))
    http_server.fault("/img-1.0.tar.gz", "wrong_checksum")
    run = pull(cli, url, out)
    assert run.exit_code == 1
    assert "checksum mismatch" in one_error(run.stderr)
    assert leftovers(out) == []


@pytest.mark.parametrize(
    ("status", "code"), [(401, 77), (403, 77), (404, 1), (410, 1), (503, 69), (500, 69)]
)
def test_http_status_exit_codes(
    cli: Cli, http_server: ImageServer, out: Path, status: int, code: int
) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar())
    http_server.fault("/img-1.0.tar.gz", "status", status=status, times=None)
    run = pull(cli, url, out)
    assert run.exit_code == code, run.stderr
    assert f"HTTP {status}" in one_error(run.stderr)
    assert leftovers(out) == []


def test_persistent_cuts_exit_69(cli: Cli, http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar())
    http_server.fault("/img-1.0.tar.gz", "drop", at=0, times=None)
    run = pull(cli, url, out)
    assert run.exit_code == 69, run.stderr
    one_error(run.stderr)
    assert leftovers(out) == []


def test_resume_after_a_cut(cli: Cli, http_server: ImageServer, out: Path) -> None:
    data = image_tar(compression="zst")
    url = http_server.add("/img-1.0.tar.zst", data)
    http_server.fault("/img-1.0.tar.zst", "truncate", at=123_457)
    run = pull(cli, url, out, "--json", "--sum", f"sha256:{sha256(data)}")
    assert run.exit_code == 0, run.stderr
    assert run.json()["bytes_downloaded"] == len(data)
    _, second = http_server.requests_for("/img-1.0.tar.zst", "GET")
    assert second.range == "bytes=123457-"
    assert second.headers["if-range"] == http_server.etag("/img-1.0.tar.zst")


def test_lock_held_past_lock_timeout_exits_75(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar())
    out.mkdir()
    fd = os.open(out / ".img-1.0.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        started = time.monotonic()
        run = pull(cli, url, out, "--lock-timeout", "0.5")
        waited = time.monotonic() - started
    finally:
        os.close(fd)
    assert run.exit_code == 75, run.stderr
    error = one_error(run.stderr)
    assert ".img-1.0.lock" in error and "0.5s" in error
    assert waited >= 0.5  # it did wait for the lock, not give up at once
    assert http_server.requests == []
    assert pull(cli, url, out).exit_code == 0


def test_unknown_config_key_exits_78(
    cli: Cli, http_server: ImageServer, out: Path, write_config: Any
) -> None:
    write_config("[image]\nattempt = 3\n")
    run = pull(cli, http_server.add("/img-1.0.tar.gz", image_tar()), out)
    assert run.exit_code == 78
    assert "attempt" in one_error(run.stderr)


# -- credentials -------------------------------------------------------------------------------


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text
        assert TOKEN not in text


def test_user_and_password_stdin(cli: Cli, http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar(), auth=("ci", PASSWORD))
    run = pull(cli, url, out, "--user", "ci", "--password-stdin", "--json", input=PASSWORD + "\n")
    assert run.exit_code == 0, run.stderr
    assert_no_secret(run.stdout, run.stderr)
    assert (out / "img-1.0/etc/release").exists()


def test_user_and_password_from_the_environment(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar(), auth=("ci", PASSWORD))
    env = {"SHOAL_IMAGE_USER": "ci", "SHOAL_IMAGE_PASSWORD": PASSWORD}
    run = pull(cli, url, out, env=env)
    assert run.exit_code == 0, run.stderr
    assert_no_secret(run.stdout, run.stderr)


def test_netrc(cli: Cli, http_server: ImageServer, out: Path, isolated: Path) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar(), auth=("ci", PASSWORD))
    netrc = isolated / ".netrc"
    netrc.write_text(f"machine 127.0.0.1\n  login ci\n  password {PASSWORD}\n")
    netrc.chmod(0o600)
    run = pull(cli, url, out)
    assert run.exit_code == 0, run.stderr
    assert_no_secret(run.stdout, run.stderr)


def test_netrc_for_another_host_is_not_used(
    cli: Cli, http_server: ImageServer, out: Path, isolated: Path
) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar(), auth=("ci", PASSWORD))
    netrc = isolated / ".netrc"
    netrc.write_text(f"machine localhost login ci password {PASSWORD}\n")
    netrc.chmod(0o600)
    run = pull(cli, url, out)
    assert run.exit_code == 77
    assert "authorization" not in http_server.requests[0].headers
    assert_no_secret(run.stdout, run.stderr)


def test_user_without_password_exits_2(cli: Cli, http_server: ImageServer, out: Path) -> None:
    url = http_server.add("/img-1.0.tar.gz", image_tar(), auth=("ci", PASSWORD))
    run = pull(cli, url, out, "--user", "ci")
    assert run.exit_code == 2
    assert "--password-stdin" in one_error(run.stderr)
    assert http_server.requests == []


def test_redirect_to_localhost_never_carries_authorization(
    cli: Cli, http_server: ImageServer, out: Path
) -> None:
    http_server.add("/mirror/img-1.0.tar.gz", image_tar())
    url = http_server.redirect(
        "/img-1.0.tar.gz", http_server.url("/mirror/img-1.0.tar.gz", host="localhost")
    )
    run = pull(cli, url, out, "--user", "ci", "--password-stdin", input=PASSWORD + "\n")
    assert run.exit_code == 0, run.stderr
    first, second = http_server.requests
    assert first.hostname == "127.0.0.1" and "authorization" in first.headers
    assert second.hostname == "localhost" and "authorization" not in second.headers
    assert second.status == 200


def test_password_never_appears_in_any_output(
    cli: Cli, http_server: ImageServer, out: Path, tmp_path: Path
) -> None:
    data = image_tar()
    http_server.add("/ok-1.0.tar.gz", data, auth=("ci", PASSWORD))
    http_server.add("/denied-1.0.tar.gz", data, auth=("ci", "another"))
    http_server.add("/forbidden-1.0.tar.gz", data, forbidden=True)
    http_server.add("/down-1.0.tar.gz", data, auth=("ci", PASSWORD))
    http_server.fault("/down-1.0.tar.gz", "status", status=503, times=None)
    http_server.add("/bad-1.0.tar.gz", data, auth=("ci", PASSWORD))
    http_server.add("/far-1.0.tar.gz", data, auth=("ci", PASSWORD))
    http_server.redirect("/away-1.0.tar.gz", http_server.url("/far-1.0.tar.gz", host="localhost"))
    http_server.add("/evil-1.0.tar.gz", A.dotdot("../x", "gz"), auth=("ci", PASSWORD))
    runs = []
    for path, extra, code in [
        ("/ok-1.0.tar.gz", ("--json",), 0),
        ("/ok-1.0.tar.gz", ("--json", "--force", "--tag", "t"), 0),
        ("/ok-1.0.tar.gz", (), 0),
        ("/denied-1.0.tar.gz", (), 77),
        ("/forbidden-1.0.tar.gz", (), 77),
        ("/down-1.0.tar.gz", (), 69),
        ("/bad-1.0.tar.gz", ("--sum", f"sha256:{sha256(b'x')}"), 1),
        ("/away-1.0.tar.gz", (), 77),
        ("/evil-1.0.tar.gz", (), 1),
        ("/missing-1.0.tar.gz", (), 1),
    ]:
        url = http_server.url(path)
        run = pull(cli, url, out, "--user", "ci", "--password-stdin", *extra, input=PASSWORD)
        assert run.exit_code == code, (path, run.stderr)
        runs.append(run)
    listed = cli("image", "list", "--out", str(out), "--json")
    table = cli("image", "list", "--out", str(out))
    assert_no_secret(*(r.stdout + r.stderr for r in [*runs, listed, table]))
    for written in out.rglob("*"):  # nor in the meta files
        if written.is_file():
            assert PASSWORD.encode() not in written.read_bytes()
            assert TOKEN.encode() not in written.read_bytes()


# -- unsafe archives ------------------------------------------------------------------------

HOSTILE: dict[str, Callable[[Path], bytes]] = {
    "absolute path": lambda outside: A.absolute_path(str(outside / "abs"), "gz"),
    "dotdot": lambda outside: A.dotdot("../../outside/dotdot", "gz"),
    "symlink relative": lambda outside: A.symlink_escape("../../outside", "gz"),
    "symlink absolute": lambda outside: A.symlink_absolute(str(outside), "gz"),
    "symlink then write": lambda outside: A.symlink_then_write_through(str(outside), "gz"),
    "hardlink": lambda outside: A.hardlink_escape("../../outside/file", "gz"),
    "hardlink absolute": lambda outside: A.hardlink_then_overwrite(str(outside / "file"), "gz"),
    "pax path": lambda outside: A.pax_path_escape("../../outside/pax", "gz"),
    "fifo": lambda outside: A.make_tar([A.File("ok", b"ok"), A.Fifo("p")], "gz"),
    "char device": lambda outside: A.make_tar([A.CharDevice("null")], "gz"),
    "block device": lambda outside: A.make_tar([A.BlockDevice("loop0")], "gz"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
def test_unsafe_archive_exits_1_and_unpacks_nothing(
    cli: Cli, http_server: ImageServer, out: Path, tmp_path: Path, case: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "file").write_bytes(b"precious\n")
    url = http_server.add("/img-1.0.tar.gz", HOSTILE[case](outside))
    run = pull(cli, url, out)
    assert run.exit_code == 1, run.stderr
    assert "unsafe archive" in one_error(run.stderr)
    assert leftovers(out) == []
    assert sorted(p.name for p in outside.iterdir()) == ["file"]
    assert (outside / "file").read_bytes() == b"precious\n"
    assert (outside / "file").stat().st_nlink == 1


def test_setuid_and_setgid_are_stripped(cli: Cli, http_server: ImageServer, out: Path) -> None:
    data = A.make_tar([A.setuid("suid"), A.setgid("sgid"), A.File("plain", mode=0o750)], "gz")
    url = http_server.add("/img-1.0.tar.gz", data)
    assert pull(cli, url, out).exit_code == 0
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (out / "img-1.0").iterdir()}
    assert modes == {"suid": 0o755, "sgid": 0o755, "plain": 0o750}


def test_entry_cap_from_config(
    cli: Cli, http_server: ImageServer, out: Path, write_config: Any
) -> None:
    write_config(FAST + "max_entries = 100\n")
    url = http_server.add("/img-1.0.tar.gz", A.many_files(150, "gz"))
    run = pull(cli, url, out)
    assert run.exit_code == 1
    assert "more than 100 entries" in one_error(run.stderr)
    assert leftovers(out) == []


@pytest.fixture(scope="module")
def bomb_512m() -> bytes:
    return A.gzip_bomb(512 * MIB)


# A process's ru_maxrss counts the memory of the process it was forked from until it execs:
# forked from pytest (hundreds of MiB late in a long run) any child "peaks" at pytest's size.
# This launcher, small itself, forks the shoal process and reports that child's own peak.
_PEAK_LAUNCHER = """
import os, sys
report, argv = sys.argv[1], sys.argv[2:]
pid = os.fork()
if pid == 0:
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as out:
    out.write(str(usage.ru_maxrss))
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def pull_measured(
    home: Path, procs: list[subprocess.Popen[str]], tmp: Path, *args: str
) -> tuple[int, str, int]:
    """`shoal ARGS` run through the launcher: its exit code, stderr and peak RSS in KiB."""
    import sys

    report = tmp / "peak-rss"
    proc = subprocess.Popen(
        [sys.executable, "-S", "-c", _PEAK_LAUNCHER, str(report), *shoal_argv(*args)],
        env=shoal_env(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    procs.append(proc)
    _, stderr = proc.communicate(timeout=300)
    return proc.returncode, stderr, int(report.read_text())


def test_gzip_bomb_refused_in_bounded_memory(
    home: Path,
    http_server: ImageServer,
    out: Path,
    write_config: Any,
    procs: list[subprocess.Popen[str]],
    bomb_512m: bytes,
) -> None:
    write_config(FAST + "max_unpacked_gib = 0.001\n")
    url = http_server.add("/bomb-1.0.tar.gz", bomb_512m)
    code, stderr, peak = pull_measured(home, procs, home, "image", "pull", url, "--out", str(out))
    assert code == 1, stderr
    assert "unsafe archive" in stderr and "bomb" in stderr
    assert peak < 150 * 1024, f"peak RSS {peak} KiB"
    assert leftovers(out) == []


def test_big_unpack_streams_in_bounded_memory(
    home: Path,
    http_server: ImageServer,
    out: Path,
    procs: list[subprocess.Popen[str]],
    bomb_512m: bytes,
) -> None:
    """Under the default cap the same 512 MiB is unpacked: flat memory, not a buffer."""
    url = http_server.add("/zeros-1.0.tar.gz", bomb_512m)
    code, stderr, peak = pull_measured(home, procs, home, "image", "pull", url, "--out", str(out))
    try:
        assert code == 0, stderr
        assert (out / "zeros-1.0/zeros").stat().st_size == 512 * MIB
        assert peak < 150 * 1024, f"peak RSS {peak} KiB"
    finally:
        shutil.rmtree(out, ignore_errors=True)  # do not keep 512 MiB in pytest's tmp


def test_trailing_bomb_refused_in_bounded_memory(
    home: Path,
    http_server: ImageServer,
    out: Path,
    write_config: Any,
    procs: list[subprocess.Popen[str]],
) -> None:
    """Zeros after the end-of-archive blocks decompress too: they count against the cap."""
    import zlib

    write_config(FAST + "max_unpacked_gib = 0.004\n")
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [compressor.compress(A.make_tar([A.File("tiny", b"tiny\n")]))]
    parts += [compressor.compress(bytes(MIB)) for _ in range(256)]
    url = http_server.add("/bomb-1.0.tar.gz", b"".join(parts) + compressor.flush())
    code, stderr, peak = pull_measured(home, procs, home, "image", "pull", url, "--out", str(out))
    assert code == 1, stderr
    assert "unsafe archive" in stderr
    assert peak < 150 * 1024, f"peak RSS {peak} KiB"
    assert leftovers(out) == []


# -- real processes: signals, locks, concurrency, terminals ----------------------------------


def tmp_dirs(out: Path) -> list[Path]:
    return list(out.glob(".img-1.0.tmp-*")) if out.exists() else []


def unpacking(out: Path) -> bool:
    """A pull's temp dir holds something: members are being unpacked."""
    return any(next(p.iterdir(), None) is not None for p in tmp_dirs(out))


@pytest.mark.parametrize("earlier", [False, True], ids=["fresh", "force-over-good-image"])
def test_ctrl_c_mid_download_leaves_nothing(
    cli: Cli,
    home: Path,
    http_server: ImageServer,
    out: Path,
    write_config: Any,
    procs: list[subprocess.Popen[str]],
    earlier: bool,
) -> None:
    write_config(PATIENT)
    url = http_server.add("/img-1.0.tar.gz", image_tar(b"v1"))
    if earlier:
        assert pull(cli, url, out).exit_code == 0
        http_server.add("/img-1.0.tar.gz", image_tar(b"v2"))
    http_server.clear_requests()
    http_server.fault("/img-1.0.tar.gz", "stall", at=100_000, seconds=120)
    args = ["image", "pull", url, "--out", str(out), *(["--force"] if earlier else [])]
    proc = spawn(home, procs, *args)
    wait_for(lambda: http_server.requests_for("/img-1.0.tar.gz", "GET"), "the download")
    wait_for(lambda: tmp_dirs(out), "the temp dir")
    wait_for(lambda: unpacking(out), "unpacking to start")
    time.sleep(0.3)  # well into the stall
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert stdout == ""
    assert tmp_dirs(out) == []
    if earlier:
        assert leftovers(out) == ["img-1.0"]
        assert (out / "img-1.0/etc/release").read_bytes() == b"release v1\n"
    else:
        assert leftovers(out) == []


def test_lock_of_a_killed_pull_does_not_block_and_its_temp_dir_is_swept(
    cli: Cli,
    home: Path,
    http_server: ImageServer,
    out: Path,
    write_config: Any,
    procs: list[subprocess.Popen[str]],
) -> None:
    write_config(PATIENT)
    data = image_tar()
    url = http_server.add("/img-1.0.tar.gz", data)
    http_server.fault("/img-1.0.tar.gz", "stall", at=100_000, seconds=120)
    proc = spawn(home, procs, "image", "pull", url, "--out", str(out))
    wait_for(lambda: tmp_dirs(out), "the temp dir")
    wait_for(lambda: unpacking(out), "unpacking to start")
    stale = tmp_dirs(out)
    proc.kill()  # SIGKILL: no cleanup runs, the lock file stays, the kernel drops the flock
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert [p.exists() for p in stale] == [True]
    assert (out / ".img-1.0.lock").exists()
    run = pull(cli, url, out, "--json", "--lock-timeout", "5")
    assert run.exit_code == 0, run.stderr
    assert run.json()["cached"] is False
    assert [p.exists() for p in stale] == [False]
    assert leftovers(out) == ["img-1.0"]


@pytest.mark.slow
def test_concurrent_pulls_download_once(
    home: Path,
    http_server: ImageServer,
    out: Path,
    write_config: Any,
    procs: list[subprocess.Popen[str]],
) -> None:
    write_config(PATIENT)
    data = image_tar()
    url = http_server.add("/img-1.0.tar.gz", data)
    http_server.fault("/img-1.0.tar.gz", "stall", at=50_000, seconds=1.5)  # keep them together
    started = [
        spawn(home, procs, "image", "pull", url, "--out", str(out), "--json") for _ in "abcd"
    ]
    results = []
    for proc in started:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        results.append(json.loads(stdout))
    assert len(http_server.requests_for("/img-1.0.tar.gz", "GET")) == 1
    assert {r["path"] for r in results} == {str(out / "img-1.0")}
    assert sorted(r["cached"] for r in results) == [False, True, True, True]
    assert {r["checksum"] for r in results} == {f"sha256:{sha256(data)}"}
    assert leftovers(out) == ["img-1.0"]


def test_progress_on_a_terminal(
    home: Path,
    http_server: ImageServer,
    out: Path,
    write_config: Any,
    procs: list[subprocess.Popen[str]],
) -> None:
    write_config(PATIENT)
    url = http_server.add("/img-1.0.tar.gz", image_tar(blob=2 * MIB))
    http_server.fault("/img-1.0.tar.gz", "stall", at=MIB, seconds=1.5)  # the bar has time
    url += "?signature=SeCrEtSiG"  # a signed URL: the query must never be shown
    master, slave = pty.openpty()
    captured = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every writer of the pty is gone
                return
            if not chunk:
                return
            captured.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = spawn(
            home, procs, "image", "pull", url, "--out", str(out), stderr=slave, env=TERMINAL
        )
        os.close(slave)
        slave = -1
        stdout, _ = proc.communicate(timeout=60)
        reader.join(timeout=10)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    text = captured.decode("utf-8", "replace")
    assert proc.returncode == 0, text
    assert stdout == f"{out / 'img-1.0'}\n"
    assert "pulled img-1.0: " in text  # the summary line
    progress = text[: text.index("pulled img-1.0: ")]
    assert re.search(r"\d+(\.\d)? (B|KiB|MiB) of \d+\.\d MiB", progress), text  # 1.0 of 2.4 MiB
    assert "img-1.0.tar.gz" in progress  # the bar names the file
    assert "SeCrEtSiG" not in text


# -- list and rm ----------------------------------------------------------------------------


def test_list_and_rm(cli: Cli, http_server: ImageServer, out: Path) -> None:
    empty = cli("image", "list", "--out", str(out), "--json")
    assert (empty.exit_code, empty.json()) == (0, [])
    a = http_server.add("/alpha-1.0.tar.gz", image_tar(b"a"))
    b = http_server.add("/beta-2.5.tar.xz", image_tar(b"b", "xz"))
    assert pull(cli, a, out, "--tag", "stable").exit_code == 0
    assert pull(cli, b, out).exit_code == 0

    listed = cli("image", "list", "--out", str(out), "--json")
    assert listed.exit_code == 0
    images = {(i["name"], i["version"]): i for i in listed.json()}
    assert set(images) == {("alpha", "1.0"), ("beta", "2.5")}
    alpha = images[("alpha", "1.0")]
    assert alpha["path"] == str(out / "alpha-1.0")
    assert alpha["tag"] == "stable"
    assert alpha["checksum"] == f"sha256:{sha256(image_tar(b'a'))}"
    assert alpha["bytes_unpacked"] == len(b"release a\n") + 300 * KIB
    assert alpha["url"] == a
    assert alpha["pulled"]

    table = cli("image", "list", "--out", str(out))
    assert table.exit_code == 0
    assert "alpha" in table.stdout and "beta" in table.stdout and "stable" in table.stdout
    assert "2.5" in table.stdout

    removed = cli("image", "rm", "alpha-1.0", "--out", str(out))
    assert removed.exit_code == 0, removed.stderr
    assert str(out / "alpha-1.0") in removed.stderr
    assert not (out / "alpha-1.0").exists()
    assert not (out / ".alpha-1.0.json").exists()
    assert [i["name"] for i in cli("image", "list", "--out", str(out), "--json").json()] == ["beta"]
    again = cli("image", "rm", "alpha-1.0", "--out", str(out))
    assert again.exit_code == 1
    assert "alpha-1.0" in one_error(again.stderr)

    as_json = cli("image", "rm", "beta-2.5", "--out", str(out), "--json")
    assert (as_json.exit_code, as_json.json()) == (0, {"removed": str(out / "beta-2.5")})
    assert leftovers(out) == []


@pytest.mark.parametrize("name", ["../etc", ".img-1.0.lock", "a/b"])
def test_rm_refuses_bad_names(cli: Cli, out: Path, tmp_path: Path, name: str) -> None:
    out.mkdir()
    (out / ".img-1.0.lock").write_text("")
    (tmp_path / "etc").mkdir()
    run = cli("image", "rm", name, "--out", str(out))
    assert run.exit_code == 2
    assert (tmp_path / "etc").exists() and (out / ".img-1.0.lock").exists()


def test_rm_unknown_exits_1(cli: Cli, out: Path) -> None:
    run = cli("image", "rm", "nothing-1.0", "--out", str(out))
    assert run.exit_code == 1
    assert "nothing-1.0" in one_error(run.stderr)
