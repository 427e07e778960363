"""`shoal image pull REF` from a real registry (Debian's docker-registry on loopback), the
images pushed by skopeo: the root filesystem its layers make, the config beside it, digests
and platforms, the cache, credentials and TLS."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.drivers.image.registry.layouts import Node
from tests.drivers.image.registry.server import Registry

Cli = Callable[..., Any]


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("REGISTRY_AUTH_FILE", "DOCKER_CONFIG", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    return home


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "images"


def pull(cli: Cli, ref: str, out: Path, *args: str, **kw: Any) -> Any:
    return cli("image", "pull", ref, "--out", str(out), "--json", *args, **kw)


def tree(root: Path) -> dict[str, Node]:
    """The unpacked root as Nodes (mode, kind, data, link target), for comparing with what
    the layers make."""
    found: dict[str, Node] = {}
    inodes: dict[tuple[int, int], str] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            found[rel] = Node("symlink", target=os.readlink(path))
        elif stat.S_ISDIR(info.st_mode):
            found[rel] = Node("dir")
        else:
            key = (info.st_dev, info.st_ino)
            if info.st_nlink > 1 and key in inodes:
                found[rel] = Node("hardlink", data=path.read_bytes(), target=inodes[key])
            else:
                inodes.setdefault(key, rel)
                found[rel] = Node("file", data=path.read_bytes())
    return found


def shape(nodes: dict[str, Node]) -> dict[str, tuple[str, bytes, str | None]]:
    return {p: (n.kind, n.data if n.kind != "dir" else b"", n.target) for p, n in nodes.items()}


def test_an_image_is_its_layers_applied_with_its_config_beside(
    cli: Cli, registry_plain: Registry, samples: Any, out: Path
) -> None:
    ref = samples.push(registry_plain)
    run = pull(cli, ref, out)
    assert run.exit_code == 0, run.stderr
    got = run.json()
    assert got["digest"] == samples.image.manifest.digest
    assert got["platform"].startswith("linux/")
    assert got["cached"] is False and got["layers"] == len(samples.image.layers)
    assert shape(tree(Path(got["path"]))) == shape(samples.image.expected)
    config = json.loads(Path(got["config"]).read_text())
    assert config == samples.image.config_document
    assert got["entrypoint"] == samples.image.config_document["config"].get("Entrypoint")
    from tests.cli.test_json_schema import check

    check(got, "image-pull")
    again = pull(cli, ref, out)
    assert again.exit_code == 0 and again.json()["cached"] is True
    assert again.json()["bytes_downloaded"] == 0


def test_an_index_resolves_to_the_platform_asked(
    cli: Cli, registry_plain: Registry, samples: Any, out: Path
) -> None:
    ref = samples.push(registry_plain, "app/multi:1", tag="multi")
    arm = pull(cli, ref, out, "--platform", "linux/arm64/v8")
    assert arm.exit_code == 0, arm.stderr
    wanted = samples.index.for_platform("linux/arm64/v8")
    assert arm.json()["digest"] == wanted.manifest.digest
    assert shape(tree(Path(arm.json()["path"]))) == shape(wanted.expected)
    amd = pull(cli, ref, out, "--platform", "linux/amd64")
    assert amd.exit_code == 0, amd.stderr
    assert amd.json()["digest"] == samples.index.for_platform("linux/amd64").manifest.digest
    # The two share their base layer's blob: stored once.
    blobs = list((out / "blobs" / "sha256").glob("[0-9a-f]*"))
    assert len(blobs) == len({b.name for b in blobs})
    listed = cli("image", "list", "--out", str(out), "--json").json()
    from tests.cli.test_json_schema import check_each

    check_each(listed, "image")
    assert {i["digest"] for i in listed if i["kind"] == "registry"} == {
        arm.json()["digest"],
        amd.json()["digest"],
    }


def test_credentials_from_an_auth_file_and_never_printed(
    cli: Cli, registry_basic: Registry, samples: Any, out: Path, tmp_path: Path
) -> None:
    ref = samples.push(registry_basic)
    anonymous = pull(cli, ref, out)
    assert anonymous.exit_code == 77, anonymous.stderr
    auth = tmp_path / "auth.json"
    import base64

    token = base64.b64encode(registry_basic.creds.encode()).decode()
    auth.write_text(json.dumps({"auths": {registry_basic.host: {"auth": token}}}))
    run = pull(cli, ref, out, env={"REGISTRY_AUTH_FILE": str(auth)})
    assert run.exit_code == 0, run.stderr
    assert registry_basic.password not in run.stdout + run.stderr


def test_token_auth_and_tls(
    cli: Cli, registry_token: Registry, registry_tls: Registry, samples: Any, out: Path,
    tmp_path: Path,
) -> None:  # fmt: skip
    ref = samples.push(registry_token)
    reader = registry_token.users["reader"]
    run = pull(
        cli, ref, out, "--user", "reader", "--password-stdin", input=reader + "\n",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert reader not in run.stdout + run.stderr
    tls_ref = samples.push(registry_tls)
    secure = pull(cli, tls_ref, out, env=registry_tls.env)
    assert secure.exit_code == 0, secure.stderr
    untrusted = pull(cli, tls_ref, tmp_path / "other", "--force")
    assert untrusted.exit_code != 0


def test_docker_schema_2_lists_and_manifests_and_the_listing(
    cli: Cli, registry_plain: Registry, samples: Any, out: Path
) -> None:
    ref = samples.push(registry_plain, "app/docker:1", tag="multi-gzip", format="v2s2")
    run = pull(cli, ref, out, "--platform", "linux/amd64")
    assert run.exit_code == 0, run.stderr
    wanted = samples.index_gzip.for_platform("linux/amd64")
    assert shape(tree(Path(run.json()["path"]))) == shape(wanted.expected)
    names = cli("image", "list", "--out", str(out), "-q")
    assert names.stdout.split() == [ref]  # what `image rm` takes
    table = cli("image", "list", "--out", str(out))
    assert run.json()["digest"] in table.stdout and "app/docker" in table.stdout
    assert cli("image", "rm", ref, "--out", str(out)).exit_code == 0
    assert cli("image", "list", "--out", str(out), "--json").json() == []
    pruned = cli("image", "prune", "--out", str(out), "--json")
    assert pruned.exit_code == 0 and pruned.json()["blobs"]  # the layers nothing uses now
    assert not [p for p in (out / "blobs" / "sha256").iterdir() if not p.name.startswith(".")]
