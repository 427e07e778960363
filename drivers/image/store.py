"""The images directory: what is there, and removing an image safely."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers.image.naming import check_component
from drivers.image.pull import META_SUFFIX, locked
from providers.core.errors import NotFoundError

if TYPE_CHECKING:
    from providers.core.settings import Settings


def image_settings(settings: Settings) -> dict[str, Any]:
    """The config's [image] table, checked (a ConfigError names the file and the key), as
    PullOptions.from_config takes it: the keys that are set."""
    if "image" not in settings.config:  # nothing to check: pydantic stays unimported
        return {}
    from drivers.image.config import ImageSection
    from providers.core.settings import config_model

    return config_model(settings, ImageSection, "image").model_dump(exclude_none=True)


def images_dir(settings: Settings) -> Path:
    """`[image] dir` from the config, else DATA/images."""
    configured = image_settings(settings).get("dir")
    return Path(configured).expanduser() if configured else settings.paths.data_dir / "images"


def list_images(out_dir: Path) -> list[dict[str, Any]]:
    if not out_dir.is_dir():
        return []
    images = []
    for entry in sorted(out_dir.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        name, _, version = entry.name.rpartition("-")
        meta: dict[str, Any] = {}
        try:
            loaded = json.loads((out_dir / f".{entry.name}{META_SUFFIX}").read_text())
            meta = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass
        images.append(
            {
                "name": name or entry.name,
                "version": version,
                "path": str(entry),
                "tag": meta.get("tag", ""),
                "checksum": meta.get("checksum", ""),
                "bytes_unpacked": meta.get("bytes_unpacked"),
                "pulled": meta.get("pulled"),
                "url": meta.get("url", ""),
            }
        )
    return images


def remove_image(out_dir: Path, dirname: str, lock_timeout: float) -> str:
    """Remove OUT/NAME-VERSION under its pull lock: a pull in progress is waited for."""
    check_component(dirname, "NAME-VERSION")
    target = out_dir / dirname
    if not target.is_dir():
        raise NotFoundError(f"no image {dirname!r} in {out_dir}; `shoal image list` shows them")
    with locked(out_dir / f".{dirname}.lock", lock_timeout):
        # Out of sight first (one rename), then deleted: never half an image under its name.
        trash = Path(tempfile.mkdtemp(prefix=f".{dirname}.old-", dir=out_dir))
        try:
            os.replace(target, trash / "image")
        except FileNotFoundError:  # removed meanwhile by another `image rm`
            trash.rmdir()
            raise NotFoundError(f"no image {dirname!r} in {out_dir}") from None
        (out_dir / f".{dirname}{META_SUFFIX}").unlink(missing_ok=True)
        shutil.rmtree(trash)
    return str(target)
