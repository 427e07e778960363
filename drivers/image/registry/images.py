"""Registry images in the images dir: each one known by its manifest's digest, found by the
references it was pulled as.

    IMAGES/oci/sha256-HEX/rootfs/        the layers applied in order
    IMAGES/oci/sha256-HEX/config.json    the image config as pulled (entrypoint, cmd, env,
                                         workdir, user: how the image says to run it)
    IMAGES/oci/sha256-HEX/image.json     what shoal knows of it (digest, platform, sizes,
                                         layers, the references it was pulled as, when)
    IMAGES/oci/refs.json                 "REFERENCE|PLATFORM" -> the digest it was last

An image directory appears whole or not at all (built beside it, renamed into place under
its lock); refs.json is replaced whole under its own lock. Two tags of one image share its
directory, two images share their common layers' blobs (drivers.image.registry.cache).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from providers.core.errors import NotFoundError, ShoalError

OCI = "oci"
REFS = "refs.json"
ROOTFS = "rootfs"
CONFIG = "config.json"
RECORD = "image.json"


def oci_dir(images: Path) -> Path:
    return images / OCI


def image_dir(images: Path, digest: str) -> Path:
    from drivers.image.registry.cache import split_digest

    algo, hexpart = split_digest(digest)
    return oci_dir(images) / f"{algo}-{hexpart}"


@contextlib.contextmanager
def locked(
    images: Path,
    name: str,
    timeout: float,
    on_wait: Callable[[float], None] | None = None,
) -> Iterator[None]:
    from drivers.image.pull import locked as flocked

    root = oci_dir(images)
    root.mkdir(parents=True, exist_ok=True, mode=0o755)
    with flocked(root / f".{name}.lock", timeout, on_wait=on_wait):
        yield


def ref_key(reference: str, platform: str) -> str:
    return f"{reference}|{platform}"


def read_refs(images: Path) -> dict[str, str]:
    return {str(k): str(v) for k, v in read_object(oci_dir(images) / REFS).items()}


def read_object(path: Path) -> dict[str, Any]:
    """A JSON object from a file of the store; {} when it is missing, unreadable or not one."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _write_json(path: Path, value: Any) -> None:
    """Whole or not at all: a new file of our own renamed over the old one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump(value, out, indent=1, sort_keys=True)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def remember(images: Path, reference: str, platform: str, digest: str, timeout: float) -> None:
    """`reference` on `platform` is `digest` (as of now)."""
    with locked(images, "refs", timeout):
        refs = read_refs(images)
        refs[ref_key(reference, platform)] = digest
        _write_json(oci_dir(images) / REFS, refs)
    record = image_dir(images, digest) / RECORD
    meta = read_object(record)
    if not meta:
        return
    with contextlib.suppress(OSError):
        if reference not in meta.get("references", []):
            meta["references"] = sorted({*meta.get("references", []), reference})
        meta["used"] = _now()
        _write_json(record, meta)


SCHEMES = "schemes.json"


def known_scheme(images: Path, registry: str) -> str | None:
    """How `registry` answered last time ("http" or "https"): a loopback or insecure
    registry is otherwise tried over https first (a CA bundle and a failed handshake, ~40 ms
    of every pull)."""
    value = read_object(oci_dir(images) / SCHEMES).get(registry)
    return value if value in ("http", "https") else None


def remember_scheme(images: Path, registry: str, scheme: str) -> None:
    """Kept best-effort (last writer wins): a stale hint only costs the fallback the client
    makes when the registry changed."""
    path = oci_dir(images) / SCHEMES
    found = read_object(path)
    if found.get(registry) == scheme:
        return
    found[registry] = scheme
    with contextlib.suppress(OSError):
        _write_json(path, found)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def known(images: Path, digest: str) -> dict[str, Any] | None:
    """An image's record when it is whole in place (its rootfs and config there)."""
    where = image_dir(images, digest)
    meta = read_object(where / RECORD)
    if meta.get("digest") != digest:
        return None
    if not (where / ROOTFS).is_dir() or not (where / CONFIG).is_file():
        return None
    return meta


def place(tmp: Path, images: Path, digest: str, record: dict[str, Any]) -> Path:
    """Rename a built image directory into place (its record written last inside it)."""
    _write_json(tmp / RECORD, record)
    os.chmod(tmp, 0o755)
    target = image_dir(images, digest)
    if os.path.lexists(target):
        trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
        os.replace(target, trash / "image")
        os.replace(tmp, target)
        remove_tree(trash)
    else:
        os.replace(tmp, target)
    return target


def list_images(images: Path) -> list[dict[str, Any]]:
    """Every registry image, its references (the ones refs.json still points at it) and
    sizes."""
    root = oci_dir(images)
    if not root.is_dir():
        return []
    refs = read_refs(images)
    by_digest: dict[str, list[str]] = {}
    for key, digest in refs.items():
        by_digest.setdefault(digest, []).append(key.rpartition("|")[0])
    out = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or not entry.is_dir():
            continue
        digest = entry.name.replace("-", ":", 1)
        meta = known(images, digest)
        if meta is None:
            continue
        out.append(
            {
                "references": sorted(set(by_digest.get(digest, []))),
                "digest": digest,
                "platform": meta.get("platform", ""),
                "path": str(entry / ROOTFS),
                "config": str(entry / CONFIG),
                "bytes_unpacked": meta.get("bytes_unpacked"),
                "bytes_compressed": meta.get("bytes_compressed"),
                "layers": len(meta.get("layers", [])),
                "pulled": meta.get("pulled"),
                "used": meta.get("used") or meta.get("pulled"),
            }
        )
    return out


def find(images: Path, what: str) -> list[str]:
    """The digests `what` names: a digest (or a unique prefix of its hex, 12+ digits), or a
    reference as pulled (on any platform)."""
    refs = read_refs(images)
    if what.startswith("sha256:") or what.startswith("sha512:"):
        return [what] if known(images, what) is not None else []
    hexish = what.removeprefix("sha256-")
    if len(hexish) >= 12 and all(c in "0123456789abcdef" for c in hexish):
        return [i["digest"] for i in list_images(images) if i["digest"][7:].startswith(hexish)]
    from drivers.image.registry.reference import parse_reference

    try:
        shown = parse_reference(what).shown
    except ShoalError:
        return []
    return sorted({d for k, d in refs.items() if k.rpartition("|")[0] == shown})


def remove(images: Path, what: str, timeout: float) -> list[str]:
    """Remove the images `what` names, and their references; the digests removed."""
    digests = find(images, what)
    if not digests:
        raise NotFoundError(f"no image {what!r} in {images}; `shoal image list` shows them")
    for digest in digests:
        _remove_digest(images, digest, timeout)
    return digests


def _remove_digest(images: Path, digest: str, timeout: float) -> None:
    from drivers.image.registry.cache import split_digest

    _, hexpart = split_digest(digest)
    with locked(images, hexpart, timeout):
        target = image_dir(images, digest)
        if target.is_dir():
            trash = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.replace(target, trash / "image")
            remove_tree(trash)
    with locked(images, "refs", timeout):
        refs = {k: d for k, d in read_refs(images).items() if d != digest}
        _write_json(oci_dir(images) / REFS, refs)


def prune(images: Path, older_than: float | None, timeout: float) -> dict[str, list[str]]:
    """Images no reference points at (a tag pulled again as another digest), and with
    `older_than` (seconds) images not pulled or used for that long; then the blobs no image
    left uses and the leftovers of pulls nobody holds."""
    from drivers.image.registry.cache import BlobStore

    removed: list[str] = []
    refs = read_refs(images)
    pointed = set(refs.values())
    now = time.time()
    for image in list_images(images):
        stale = False
        if older_than is not None:
            used = image.get("used") or image.get("pulled") or ""
            try:
                at = time.mktime(time.strptime(used, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
            except (ValueError, OverflowError):
                at = 0.0
            stale = now - at >= older_than
        if image["digest"] not in pointed or stale:
            _remove_digest(images, image["digest"], timeout)
            removed.append(image["digest"])
    keep: set[str] = set()
    for image in list_images(images):
        meta = known(images, image["digest"]) or {}
        keep.update(str(layer) for layer in meta.get("layers", []))
        if meta.get("config_digest"):
            keep.add(str(meta["config_digest"]))
    blobs = BlobStore(images).remove_unused(keep)
    from drivers.image.registry.cache import unlocked

    for leftover in oci_dir(images).glob(".*.tmp-*") if oci_dir(images).is_dir() else []:
        # `.sha256-HEX.tmp-XXXX`: a pull still building it holds `.HEX.lock`.
        hexpart = leftover.name[1:].partition(".tmp-")[0].partition("-")[2]
        if unlocked(oci_dir(images) / f".{hexpart}.lock"):
            remove_tree(leftover)
    return {"images": removed, "blobs": blobs}


def remove_tree(path: Path) -> None:
    """Remove a tree an image made read-only in places."""

    def writable(func: Any, name: str, _exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(name), 0o700)
            os.chmod(name, 0o700)
            func(name)

    shutil.rmtree(path, onerror=writable)
