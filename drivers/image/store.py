"""The images directory: what is there, and removing an image safely."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers.image.naming import check_component
from drivers.image.pull import META_SUFFIX, locked
from providers.core.errors import NotFoundError, ShoalError

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
    """SHOAL_IMAGE_DIR, else `[image] dir` from the config, else DATA/images."""
    from providers.core.env import ENV_IMAGE_DIR

    given = settings.env.get(ENV_IMAGE_DIR)
    if given:
        return Path(given).expanduser()
    configured = image_settings(settings).get("dir")
    return Path(configured).expanduser() if configured else settings.paths.data_dir / "images"


# The registry images' and the blob store's directories (drivers.image.registry).
REGISTRY_DIRS = ("oci", "blobs")


def list_images(out_dir: Path) -> list[dict[str, Any]]:
    """Every image: the archives (OUT/NAME-VERSION) and the registry images (OUT/oci), as
    one kind of item (`kind` says which; `digest` is a registry image's manifest digest or
    an archive's checksum)."""
    return [*_archives(out_dir), *_registry_images(out_dir)]


def _registry_images(out_dir: Path) -> list[dict[str, Any]]:
    if not (out_dir / "oci").is_dir():
        return []
    from drivers.image.registry import images
    from drivers.image.registry.reference import parse_reference

    out = []
    for item in images.list_images(out_dir):
        refs = item["references"] or [f"(untagged {item['digest'][:19]})"]
        for ref in refs:
            name, tag = ref, ""
            if item["references"]:
                with contextlib.suppress(ShoalError):  # a hand-edited refs.json: shown as is
                    parsed = parse_reference(ref)
                    name, tag = parsed.name, parsed.tag or ""
            out.append(
                {
                    "name": name,
                    "version": tag,
                    "path": item["path"],
                    "tag": "",
                    "checksum": item["digest"],
                    "bytes_unpacked": item["bytes_unpacked"],
                    "pulled": item["pulled"],
                    "url": f"docker://{ref}",
                    "kind": "registry",
                    "digest": item["digest"],
                    "platform": item["platform"],
                    "reference": ref,
                    "config": item["config"],
                }
            )
    return out


def _archives(out_dir: Path) -> list[dict[str, Any]]:
    if not out_dir.is_dir():
        return []
    images = []
    for entry in sorted(out_dir.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir() or entry.name in REGISTRY_DIRS:
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
                "kind": "archive",
                "digest": meta.get("checksum", ""),
                "platform": None,
                "reference": None,
                "config": None,
            }
        )
    return images


def remove_any(out_dir: Path, what: str, lock_timeout: float) -> list[str]:
    """Remove an archive image (NAME-VERSION) or the registry images `what` names (a
    reference as pulled, a digest); the paths removed."""
    if (out_dir / what).is_dir() and what not in REGISTRY_DIRS and not what.startswith("."):
        return [remove_image(out_dir, what, lock_timeout)]
    from drivers.image.registry import images

    if (out_dir / "oci").is_dir() and images.find(out_dir, what):
        return [
            str(images.image_dir(out_dir, digest) / images.ROOTFS)
            for digest in images.remove(out_dir, what, lock_timeout)
        ]
    return [remove_image(out_dir, what, lock_timeout)]  # says what is wrong with the name


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
