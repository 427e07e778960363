"""The process driver runs a pulled image as its config says (`-o image=REF`): its
entrypoint and cmd, env and working directory, in its own copy of the root filesystem,
the image in the images dir left as pulled."""

from __future__ import annotations

import platform as host
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import wait_for
from tests.drivers.container.conftest import find_busybox
from tests.drivers.image.registry.layouts import (
    ImageConfig,
    Layout,
    directory,
    file,
    push,
    symlink,
)
from tests.drivers.image.registry.server import Registry

Cli = Callable[..., Any]
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(host.machine(), host.machine())


def _user_namespaces() -> str | None:
    """Why this machine cannot run a workload in a user namespace (None: it can)."""
    import shutil
    import subprocess

    unshare = shutil.which("unshare")
    if unshare is None:
        return "no unshare (util-linux)"
    done = subprocess.run(
        [unshare, "--user", "--map-root-user", "true"], capture_output=True, text=True, check=False
    )
    return None if done.returncode == 0 else f"user namespaces refused: {done.stderr.strip()}"


@pytest.fixture
def pulled(cli: Cli, registry_plain: Registry, tmp_path: Path, home: Path) -> str:
    why = _user_namespaces()
    if why is not None:
        pytest.skip(f"the process driver cannot run an image here: {why}")
    busybox = find_busybox()
    if busybox is None:
        pytest.skip("no static busybox to build the image from (Debian: busybox-static)")
    layout = Layout(tmp_path / "layout")
    base = layout.add_layer(
        [
            directory("bin"),
            file("bin/busybox", busybox.read_bytes(), mode=0o755),
            *(symlink(f"bin/{tool}", "busybox") for tool in ("sh", "cat", "sleep")),
            directory("srv"),
            file("srv/motd", "from the image\n"),
            directory("tmp", mode=0o1777),
        ]
    )
    config = ImageConfig(
        architecture=ARCH,
        entrypoint=["/bin/sh", "-c"],
        cmd=["echo $GREETING; pwd; cat motd; echo written > /srv/new; sleep 300"],
        env=("PATH=/bin", "GREETING=hello from the image"),
        workdir="/srv",
    )
    image = layout.add_image([base], config)
    layout.tag("1", image)
    ref = push(layout, "app/runner:1", registry_plain, tag="1")
    run = cli("image", "pull", ref, "--json")
    assert run.exit_code == 0, run.stderr
    return ref


def output_of(cli: Cli, alloc_id: str) -> str:
    log = Path(cli("status", alloc_id, "--json").json()["resource"]["metadata"]["log"])
    return log.read_text() if log.exists() else ""


@pytest.mark.usefixtures("reap_workloads")
def test_a_pulled_image_runs_as_its_config_says(cli: Cli, pulled: str, home: Path) -> None:
    run = cli(
        "alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "-o", f"image={pulled}",
        "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    alloc_id = run.json()["id"]
    wait_for(lambda: len(output_of(cli, alloc_id).splitlines()) >= 3, "the workload's output")
    lines = output_of(cli, alloc_id).splitlines()
    assert lines[:3] == ["hello from the image", "/srv", "from the image"], lines
    # It wrote into its own copy; the pulled image is as it was.
    listed = cli("image", "list", "--json").json()
    (image,) = [i for i in listed if i["kind"] == "registry"]
    assert not (Path(image["path"]) / "srv" / "new").exists()
    assert cli("free", alloc_id).exit_code == 0


@pytest.mark.usefixtures("reap_workloads")
def test_an_entry_replaces_the_cmd_and_an_image_not_pulled_says_so(cli: Cli, pulled: str) -> None:
    run = cli(
        "alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "-o", f"image={pulled}",
        "-o", "entry='echo only this; sleep 300'", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    alloc_id = run.json()["id"]
    wait_for(lambda: output_of(cli, alloc_id), "the workload's output")
    assert output_of(cli, alloc_id).splitlines()[0] == "only this"
    assert cli("free", alloc_id).exit_code == 0
    missing = cli(
        "alloc", "--driver", "process", "--cpu", "1", "--ram", "1",
        "-o", "image=127.0.0.1:1/never/pulled:1",
    )  # fmt: skip
    assert missing.exit_code == 2
    assert "is not pulled here; `shoal image pull" in missing.stderr
