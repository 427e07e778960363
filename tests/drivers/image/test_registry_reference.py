"""Image references as docker and podman normalise them (distribution/reference's own test
cases), what a refused one says (the part at fault, the form it needs, exit 2), and which
`image pull` arguments are references rather than URLs or files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cli.exit_codes import ExitCode, exit_code_for
from drivers.image.registry.reference import (
    Reference,
    looks_like_reference,
    parse_reference,
)
from providers.core.errors import UsageError

SHA = "sha256:" + "dbcc1c35ac38df41fd2f5e4130b32ffdb93ebae8b3dbe638c23575912276fc9c"


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("busybox", "docker.io", "library/busybox", "latest", None),
        ("busybox:1.36", "docker.io", "library/busybox", "1.36", None),
        ("docker://busybox:latest", "docker.io", "library/busybox", "latest", None),
        ("docker.io/library/redis:latest", "docker.io", "library/redis", "latest", None),
        ("docker.io/ubuntu", "docker.io", "library/ubuntu", "latest", None),
        ("index.docker.io/library/debian", "docker.io", "library/debian", "latest", None),
        ("library/foo/bar", "docker.io", "library/foo/bar", "latest", None),
        ("dmcgowan/myapp", "docker.io", "dmcgowan/myapp", "latest", None),
        ("test_com/foo", "docker.io", "test_com/foo", "latest", None),
        (f"redis@{SHA}", "docker.io", "library/redis", None, SHA),
        (f"busybox:latest@{SHA}", "docker.io", "library/busybox", "latest", SHA),
        ("ghcr.io/acme/build-env:3.2", "ghcr.io", "acme/build-env", "3.2", None),
        ("docker://ghcr.io/acme/build-env:3.2", "ghcr.io", "acme/build-env", "3.2", None),
        ("test.com:8080/foo", "test.com:8080", "foo", "latest", None),
        ("test-com:8080/foo", "test-com:8080", "foo", "latest", None),
        ("xn--n3h.com:18080/foo", "xn--n3h.com:18080", "foo", "latest", None),
        ("localhost/app", "localhost", "app", "latest", None),
        ("localhost:5000/x", "localhost:5000", "x", "latest", None),
        ("127.0.0.1:5000/library/debian:12", "127.0.0.1:5000", "library/debian", "12", None),
        ("[::1]:5000/x", "[::1]:5000", "x", "latest", None),
        ("[fc00:1:2:3:4:5:6:7]:5000/library/debian", "[fc00:1:2:3:4:5:6:7]:5000",
         "library/debian", "latest", None),
        ("Foo/bar", "Foo", "bar", "latest", None),  # uppercase: a registry, as docker reads it
        ("docker---rules/dock__er", "docker.io", "docker---rules/dock__er", "latest", None),
        ("docker.io/" + "1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
         "docker.io", "library/1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a",
         "latest", None),
        ("localhost:5000", "docker.io", "library/localhost", "5000", None),  # as docker: a tag
        ("busybox:" + "t" * 128, "docker.io", "library/busybox", "t" * 128, None),
    ],
)  # fmt: skip
def test_references_normalise_as_docker_does(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    assert parse_reference(text) == Reference(registry, repository, tag, digest)


def test_canonical_familiar_and_api_forms() -> None:
    hub = parse_reference("busybox")
    assert hub.shown == "docker.io/library/busybox:latest"
    assert hub.familiar == "busybox:latest"
    assert hub.api_host == "registry-1.docker.io"
    assert hub.target == "latest"
    pinned = parse_reference(f"ghcr.io/o/app:v1@{SHA}")
    assert pinned.shown == f"ghcr.io/o/app:v1@{SHA}"
    assert pinned.target == SHA  # a digest wins over the tag beside it
    assert pinned.api_host == "ghcr.io"
    v6 = parse_reference("[::1]:5000/x")
    assert (v6.api_host, v6.host) == ("[::1]:5000", "::1")
    assert parse_reference("docker.io/owner/app").familiar == "owner/app:latest"


def test_dir_names_are_safe_and_one_per_reference() -> None:
    texts = [
        "busybox",
        "busybox:1",
        f"busybox@{SHA}",
        f"busybox:latest@{SHA}",
        "localhost:5000/busybox",
        "[::1]:5000/busybox",
        "[::1:5000]/busybox",
        "a/b-c",
        "a-b/c",
        "a/b/c",
        "ghcr.io/o/" + "x" * 240 + ":" + "t" * 128,
        "ghcr.io/o/" + "x" * 240 + ":" + "t" * 127,
    ]
    names = [parse_reference(text).name_for_dir() for text in texts]
    assert len(set(names)) == len(names)
    for name in names:
        assert len(name) <= 200
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+~-]*", name)
    assert parse_reference("busybox").name_for_dir() == "docker.io+library+busybox~latest"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "names no image"),
        ("docker://", "names no image"),
        ("docker/Docker", "repository 'docker/Docker' must be lowercase; write 'docker/docker'"),
        ("docker.io/docker/Docker:1", "the repository 'docker/Docker' must be lowercase"),
        ("ghcr.io/Acme/App:v1", "the repository 'Acme/App' must be lowercase"),
        ("busybox:" + "t" * 129, "the tag is 129 characters; at most 128"),
        ("busybox:-x", "the tag '-x' may hold only letters"),
        ("busybox:", "gives no tag"),
        ("busybox@sha256:xyz", "the digest after `@` is not one: its sha256 part must be 64"),
        ("busybox@md5:" + "a" * 32, "the digest after `@` is not one: it must be sha256:"),
        ("busybox@sha256:" + "A" * 64, "64 lowercase hex digits"),
        ("busybox@", "the digest after `@` is not one"),
        ("1a3f5e7d9c1b3a5f7e9d1c3b5a7f9e1d3c5b7a9f1e3d5d7c9b1a3f5e7d9c1b3a", "image ID"),
        ("-docker", "the repository '-docker' must be lowercase letters and digits"),
        ("docker///docker", "the repository 'docker///docker'"),
        ("docker/dock..er", "the repository 'docker/dock..er'"),
        ("dock..er/docker", "the registry 'dock..er' is not a host name"),
        ("docker/", "names no repository"),
        ("fc00::1:5000/debian", "the registry 'fc00::1:5000' is not a host name"),
        ("[fe80::1%eth0]:5000/debian", "the registry '[fe80::1%eth0]:5000' is not a host name"),
        ("[fc00::1]:5000", "names a registry but no repository"),
        ("localhost:99999/x", "port is out of range"),
        ("bad name", "has a space"),
        ("caf\u00e9", "non-ASCII"),
        ("x" * 254 + "/y", "is 256 characters; at most 255"),
        ("x" * 250, "is 258 characters; at most 255"),  # library/ counts
    ],
)  # fmt: skip
def test_refused_references_name_the_part_and_exit_2(text: str, says: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_reference(text)
    assert says in str(caught.value)
    assert exit_code_for(caught.value) == ExitCode.USAGE
    assert "***" not in str(caught.value)  # nothing of a reference is masked as a secret


def test_a_url_style_password_is_refused_without_quoting_it() -> None:
    with pytest.raises(UsageError) as caught:
        parse_reference("docker://alice:Hunter2-secret@registry.example/app:1")
    message = str(caught.value)
    assert "--user and --password-stdin" in message
    assert "Hunter2" not in message and "alice" not in message


def test_the_docker_transport_is_not_echoed_as_a_masked_url() -> None:
    # The bug in issue 28: `docker://busybox:latest` came back as `docker://busybox:***`.
    with pytest.raises(UsageError) as caught:
        parse_reference("docker://busybox:Latest!")
    assert "'docker://busybox:Latest!'" in str(caught.value)
    assert "the tag 'Latest!'" in str(caught.value)


def test_what_looks_like_a_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "busybox").write_bytes(b"")
    assert looks_like_reference("alpine:3.20")
    assert looks_like_reference("ghcr.io/acme/build-env:3.2")
    assert looks_like_reference("localhost:5000/x")
    assert looks_like_reference("docker://busybox")
    assert looks_like_reference(f"busybox@{SHA}")
    assert not looks_like_reference("busybox")  # a file of that name is here
    assert not looks_like_reference("https://example.com/ubuntu-base-22.04.tar.gz")
    assert not looks_like_reference("http://127.0.0.1:8000/x.tar")
    assert not looks_like_reference("file:///srv/images/base.tar")
    assert not looks_like_reference("oci-archive:/srv/base.tar")
    assert not looks_like_reference("./images/base")
    assert not looks_like_reference("/srv/images/base")
    assert not looks_like_reference("~/base")
    assert not looks_like_reference("ubuntu-base-22.04.tar.zst")
    assert not looks_like_reference("")
