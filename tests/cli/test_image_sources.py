"""`image pull` of a local archive (a path, `file://`), and an image known by its source and
content, never by its file name alone."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_image_commands import image_tar, one_error, pull
from tests.drivers.image.server import ImageServer

Cli = Callable[..., Any]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "images"


@pytest.fixture
def http_server() -> Iterator[ImageServer]:
    server = ImageServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("form", ["absolute", "file-url", "relative", "bare"])
def test_a_local_archive_is_pulled_like_a_download(
    cli: Cli, out: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    data = image_tar(b"local")
    archive = tmp_path / "src" / "base-2.1.tar.gz"
    archive.parent.mkdir()
    archive.write_bytes(data)
    monkeypatch.chdir(archive.parent)
    source = {
        "absolute": str(archive),
        "file-url": archive.as_uri(),
        "relative": "./base-2.1.tar.gz",
        "bare": "base-2.1.tar.gz",
    }[form]
    run = pull(cli, source, out, "--json", "--sum", f"sha256:{hashlib.sha256(data).hexdigest()}")
    assert run.exit_code == 0, run.stderr
    got = run.json()
    assert (got["name"], got["version"], got["cached"]) == ("base", "2.1", False)
    assert got["url"] == archive.as_uri()
    assert (out / "base-2.1/etc/release").read_bytes() == b"release local\n"
    assert pull(cli, source, out, "--json").json()["cached"] is True


def test_a_local_archive_that_does_not_match_its_sum_leaves_nothing(
    cli: Cli, out: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "base-2.1.tar"
    archive.write_bytes(image_tar(b"x", compression="none"))
    run = pull(cli, str(archive), out, "--sum", "sha256:" + "0" * 64)
    assert run.exit_code == 1
    assert "checksum mismatch" in one_error(run.stderr)
    assert not (out / "base-2.1").exists()


@pytest.mark.parametrize(
    ("source", "said", "code"),
    [
        ("file://db.example/base-1.tar", "names a host", 2),
        ("/nonexistent/base-1.tar", "no such file", 1),
    ],
)
def test_a_bad_local_source_says_what_is_wrong(
    cli: Cli, out: Path, source: str, said: str, code: int
) -> None:
    run = pull(cli, source, out)
    assert run.exit_code == code, run.stderr
    assert said in one_error(run.stderr)


def test_the_same_file_name_from_another_server_is_another_image(
    cli: Cli, out: Path, http_server: ImageServer
) -> None:
    first = http_server.add("/a/img-1.0.tar.gz", image_tar(b"from a"))
    other = http_server.add("/b/img-1.0.tar.gz", image_tar(b"from b"))
    assert pull(cli, first, out).exit_code == 0
    again = pull(cli, other, out, "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["cached"] is False  # not "already in place" with the first one's bytes
    assert (out / "img-1.0/etc/release").read_bytes() == b"release from b\n"
    assert pull(cli, other, out, "--json").json()["cached"] is True
