"""A process workload run as an image says: its root filesystem, entrypoint, cmd, env and
working directory (`-o image=REF`).

The image is one `shoal image pull` unpacked (a registry reference as pulled, an archive's
NAME-VERSION, or a directory). Each allocation gets its own copy of the root in its
workspace (`cp -a`, reflinked where the filesystem can): a workload writes where it likes
and the image in the images dir stays as pulled. It runs chrooted into that copy in a user
namespace of its own (`unshare --user --map-root-user --root`): root inside, you outside,
no privilege needed, and nothing of the host's tree in sight. The image's `User` cannot be
switched to (one user is mapped): the workload runs as the namespace's root.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.core.errors import ShoalError, UsageError

if TYPE_CHECKING:
    from providers.core.settings import Settings

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
ROOT_COPY = "rootfs"


@dataclass
class ImageRun:
    command: list[str]  # the image's Entrypoint with the entry, or its Cmd
    env: dict[str, str] = field(default_factory=dict)  # the image's Env (PATH always)
    source: str = ""  # the image's root in the images dir
    workdir: str = "/"

    def argv(self, workspace: Path) -> list[str]:
        """What the supervisor starts: the command chrooted into the workspace's copy."""
        unshare = shutil.which("unshare")
        if unshare is None:
            raise ShoalError(
                "options.image needs unshare (util-linux) to run the image in its own root; "
                "install util-linux"
            )
        copy = workspace / ROOT_COPY
        return [
            unshare, "--user", "--map-root-user", f"--root={copy}", f"--wd={self.workdir}",
            *self.command,
        ]  # fmt: skip


def find_image(settings: Settings, image: str) -> tuple[Path, dict[str, Any]]:
    """(the root filesystem, the image config) `image` names."""
    from drivers.image.store import images_dir

    images = images_dir(settings)
    given = Path(image).expanduser()
    if image.startswith(("/", "./", "../", "~")):
        if (given / "rootfs").is_dir():
            from drivers.image.registry.images import read_object

            return given / "rootfs", read_object(given / "config.json")
        if given.is_dir():
            return given, {}
        raise UsageError(f"options.image: {image} is not a directory")
    if "/" not in image and ":" not in image and "@" not in image and (images / image).is_dir():
        return images / image, {}  # an archive's NAME-VERSION: no config
    from drivers.image.registry import images as registry
    from drivers.image.registry.reference import parse_reference

    shown = parse_reference(image).shown
    refs = registry.read_refs(images)
    digests = [d for k, d in refs.items() if k.rpartition("|")[0] == shown]
    if not digests:
        raise UsageError(
            f"options.image: {shown} is not pulled here; `shoal image pull {image}` first"
        )
    from drivers.image.registry.client import default_platform

    mine = refs.get(registry.ref_key(shown, str(default_platform())))
    digest = mine or digests[0]
    where = registry.image_dir(images, digest)
    if registry.known(images, digest) is None:
        raise UsageError(f"options.image: {shown} is damaged or gone; pull it again")
    return where / registry.ROOTFS, registry.read_object(where / registry.CONFIG)


def plan(settings: Settings, image: str, entry: list[str] | None) -> ImageRun:
    """What to run for `image`: its Entrypoint with `entry` (else its Cmd), its Env, in its
    WorkingDir (its root copied into the workspace by `prepare`)."""
    root, config = find_image(settings, image)
    found = config.get("config")
    run: dict[str, Any] = found if isinstance(found, dict) else {}
    entrypoint = [str(a) for a in run.get("Entrypoint") or []]
    command = entry if entry else [str(a) for a in run.get("Cmd") or []]
    argv = entrypoint + command
    if not argv:
        raise UsageError(
            f"options.image: {image} says nothing to run (no Entrypoint or Cmd); give "
            "options.entry"
        )
    env = {}
    for item in run.get("Env") or []:
        key, equals, value = str(item).partition("=")
        if equals and key:
            env[key] = value
    env.setdefault("PATH", DEFAULT_PATH)
    return ImageRun(argv, env, str(root), str(run.get("WorkingDir") or "/"))


def prepare(run: ImageRun, workspace: Path) -> None:
    """The allocation's own copy of the image's root (reflinked where the filesystem can)."""
    done = subprocess.run(
        ["cp", "-a", "--reflink=auto", run.source, str(workspace / ROOT_COPY)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        why = " ".join(done.stderr.split())[:200]
        raise ShoalError(f"options.image: could not copy the image's root into {workspace}: {why}")
