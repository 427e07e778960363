"""Images for the `container` driver: the engine's name for `-o image=...`, which is an image
the engine has, or an image dir `shoal image pull` unpacked (`NAME-VERSION` in the images
dir, or a path): a `docker save` archive (it has a manifest.json) is loaded, any other tree
is imported as the image's root filesystem, once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.core.errors import NotFoundError, ShoalError
from providers.core.settings import Settings

if TYPE_CHECKING:
    from drivers.container.engine import Engine

UNSAFE_NAME = re.compile(r"[^a-zA-Z0-9_.-]+")  # what an engine name may not hold


def resolve_image(engine: Engine, settings: Settings, wanted: str) -> str:
    """The engine's name for `wanted`, loading or importing an unpacked image once. A name
    that is no image dir is the engine's own, unchecked: the container's create says
    whether the engine has it (`missing_image`), one request fewer."""
    candidates = []
    if "/" in wanted and Path(wanted).expanduser().is_dir():
        candidates.append(Path(wanted).expanduser())
    elif "/" not in wanted and ":" not in wanted:
        from drivers.image.store import images_dir

        candidates.append(images_dir(settings) / wanted)
    directory = next((c for c in candidates if c.is_dir()), None)
    if directory is None:
        return wanted
    manifest = directory / "manifest.json"
    if manifest.is_file():
        return _load_saved(engine, directory, manifest)
    import hashlib

    name = UNSAFE_NAME.sub("-", directory.name.lower()).strip("-.") or "image"
    # Two trees with one base name (a/rootfs, b/rootfs) are two images: the tag names
    # the tree's resolved path and its modification time.
    where = directory.resolve()
    stamp = f"{where}:{where.stat().st_mtime_ns}".encode()
    tag = hashlib.sha256(stamp).hexdigest()[:12]
    reference = f"shoal-{name}:{tag}"
    if not engine.image_exists(reference) and not engine.image_exists(f"localhost/{reference}"):
        try:
            engine.import_rootfs(tar_stream(directory), f"shoal-{name}", tag)
        except BaseException:
            engine.remove_image(reference)  # never a half-imported image under the name
            raise
    return reference


def missing_image(wanted: str) -> NotFoundError:
    return NotFoundError(
        f"options.image: {wanted!r} is neither an image the engine has nor an image "
        "dir; `shoal image pull URL` it, or import/pull it into the engine"
    )


def _load_saved(engine: Engine, directory: Path, manifest: Path) -> str:
    """A `docker save` tree: load it (as a tar of the tree) unless its tag is there."""
    import tempfile

    try:
        entries = json.loads(manifest.read_text())
        tags = entries[0].get("RepoTags") or []
    except (OSError, ValueError, IndexError, AttributeError, TypeError):
        raise ShoalError(f"{manifest}: not a docker save manifest") from None
    if tags and engine.image_exists(tags[0]):
        return str(tags[0])
    with tempfile.TemporaryFile() as archive:
        for chunk in tar_stream(directory):
            archive.write(chunk)
        archive.seek(0)
        engine.load(archive)
    if not tags:
        raise ShoalError(f"{manifest}: the archive names no RepoTags; tag it when saving")
    return str(tags[0])


def tar_stream(root: Path) -> Iterator[bytes]:
    """A tree as an uncompressed tar, produced as it is read (no temporary archive)."""
    import tarfile

    chunks: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> int:
            chunks.append(bytes(data))
            return len(data)

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        # An image unpacked by a user belongs to root inside the container, as pulled ones do.
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    sink: Any = Sink()
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*")):
            try:
                tar.add(path, arcname=str(path.relative_to(root)), recursive=False, filter=as_root)
            except OSError as exc:
                raise ShoalError(
                    f"image dir {root}: cannot read {path.relative_to(root)} ({exc.strerror}); "
                    "fix its permissions"
                ) from None
            if chunks:
                yield b"".join(chunks)
                chunks.clear()
    if chunks:
        yield b"".join(chunks)
