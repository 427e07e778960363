"""`image pull REF`: an image from a registry, into the images dir.

    reference -> the registry's manifest for this platform (its digest names the image)
    -> already whole in place? done (the reference recorded)
    -> each blob (config, layers) fetched once into the blob store, verified
    -> layers applied in order into OUT/oci/.sha256-HEX.tmp-XXXX/rootfs (whiteouts, the
       archive rules), the config beside it -> renamed to OUT/oci/sha256-HEX

Nothing is visible before every byte is verified; any failure removes the temp dir, and the
blobs fetched so far stay for the next try (a resume, not a restart).
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from drivers.image.registry import images as store
from drivers.image.registry.cache import BlobStore
from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from drivers.image.extractor import Caps
    from drivers.image.registry.client import RegistryClient
    from drivers.image.registry.reference import Reference

# The layer media types shoal unpacks (the compression is read from the bytes themselves);
# foreign and non-distributable layers live elsewhere than the registry and are refused.
LAYER_TYPES = frozenset(
    {
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.oci.image.layer.v1.tar+gzip",
        "application/vnd.oci.image.layer.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.diff.tar.zstd",
    }
)
T = TypeVar("T")


@dataclass
class Progress:
    """What a pull says while it works (the CLI draws it; CI logs get lines)."""

    on_bytes: Callable[[int], None] = lambda n: None
    on_total: Callable[[int], None] = lambda n: None
    on_wait: Callable[[str, float], None] = lambda what, waited: None
    on_resume: Callable[[str, int], None] = lambda what, at: None
    on_step: Callable[[str], None] = lambda text: None


@dataclass
class RegistryPull:
    reference: str
    digest: str
    platform: str
    path: str  # the root filesystem
    config: str  # the image config file beside it
    layers: int
    bytes_downloaded: int
    bytes_unpacked: int
    seconds: float
    cached: bool
    image_config: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The pull's result: the resolved digest and platform, where the root is, and the
        upstream spec's Image fields (url, sum, name, version, tag) for interchange."""
        from drivers.image.registry.reference import parse_reference

        parsed = parse_reference(self.reference)
        name, tag = parsed.name, parsed.tag or ""
        run = self.image_config.get("config") or {}
        return {
            "reference": self.reference,
            "digest": self.digest,
            "platform": self.platform,
            "path": self.path,
            "config": self.config,
            "layers": self.layers,
            "bytes_downloaded": self.bytes_downloaded,
            "bytes_unpacked": self.bytes_unpacked,
            "seconds": self.seconds,
            "cached": self.cached,
            "checksum": self.digest,
            "entrypoint": run.get("Entrypoint"),
            "cmd": run.get("Cmd"),
            "url": f"docker://{self.reference}",
            "sum": self.digest,
            "name": name,
            "version": tag,
            "tag": tag,
        }


def pull_reference(
    ref: Reference,
    client: RegistryClient,
    images: Path,
    platform: str | None,
    caps: Caps,
    *,
    force: bool = False,
    lock_timeout: float = 600.0,
    progress: Progress | None = None,
) -> RegistryPull:
    from drivers.image.registry.cache import split_digest

    progress = progress or Progress()
    started = time.monotonic()
    images.mkdir(parents=True, exist_ok=True, mode=0o755)
    blobs = BlobStore(images)

    def load_config(config_digest: str, size: int) -> bytes:
        # Through the blob store: eight pulls of one image fetch their config once.
        blobs.fetch(
            config_digest, size,
            lambda offset: iter(client.open_blob(config_digest, offset, size=size)),
            lock_timeout=lock_timeout,
            on_wait=lambda waited: progress.on_wait("config", waited),
        )  # fmt: skip
        return b"".join(blobs.open_verified(config_digest, size))

    resolved = _space(images, "fetching the image config", lambda: client.resolve(
        ref, platform, load_config=load_config
    ))  # fmt: skip
    digest = resolved.manifest_digest
    _, hexpart = split_digest(digest)
    shown = ref.shown
    with store.locked(
        images, hexpart, lock_timeout, on_wait=lambda waited: progress.on_wait("it", waited)
    ):
        meta = None if force else store.known(images, digest)
        if meta is not None:
            store.remember(images, shown, resolved.platform, digest, lock_timeout)
            where = store.image_dir(images, digest)
            return RegistryPull(
                reference=shown, digest=digest, platform=resolved.platform,
                path=str(where / store.ROOTFS), config=str(where / store.CONFIG),
                layers=len(resolved.layers), bytes_downloaded=0,
                bytes_unpacked=int(meta.get("bytes_unpacked") or 0),
                seconds=round(time.monotonic() - started, 3), cached=True,
                image_config=store.read_object(where / store.CONFIG),
            )  # fmt: skip
        total = sum(layer.size for layer in resolved.layers)
        progress.on_total(total)
        downloaded = 0

        def fetch(blob_digest: str, size: int, what: str) -> None:
            nonlocal downloaded

            def opener(offset: int) -> Iterator[bytes]:
                return iter(client.open_blob(blob_digest, offset, size=size))

            got = blobs.fetch(
                blob_digest, size, opener, lock_timeout=lock_timeout,
                on_bytes=progress.on_bytes,
                on_wait=lambda waited: progress.on_wait(what, waited),
                on_resume=lambda at: progress.on_resume(what, at),
            )  # fmt: skip
            downloaded += got.downloaded
            if got.cached:
                progress.on_bytes(size)  # counted as done: nothing came over the wire

        # The config came with the manifest, checked against its digest (client.resolve).
        image_config = _parse_config(resolved.config_raw, resolved.config_digest)
        for n, layer in enumerate(resolved.layers, 1):
            if layer.media_type not in LAYER_TYPES:
                raise ShoalError(
                    f"{shown}: layer {n} is {layer.media_type[:100]}, which shoal cannot "
                    "unpack (OCI or Docker tar layers: plain, gzip, zstd)"
                )
            what = f"layer {n}/{len(resolved.layers)}"
            _space(
                images, f"fetching {what} (what came is kept to resume)",
                lambda: fetch(layer.digest, layer.size, what),  # noqa: B023
            )  # fmt: skip
        progress.on_step("unpacking")
        tmp = Path(tempfile.mkdtemp(prefix=f".sha256-{hexpart}.tmp-", dir=store.oci_dir(images)))
        try:
            unpacked = _space(
                images, "unpacking; nothing of the image was kept",
                lambda: _unpack(blobs, resolved.layers, tmp / store.ROOTFS, caps),
            )  # fmt: skip
            (tmp / store.CONFIG).write_bytes(resolved.config_raw)
            record = {
                "digest": digest,
                "platform": resolved.platform,
                "references": [shown],
                "config_digest": resolved.config_digest,
                "layers": [layer.digest for layer in resolved.layers],
                "bytes_compressed": total,
                "bytes_unpacked": unpacked,
                "pulled": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            where = store.place(tmp, images, digest, record)
        except BaseException:
            store.remove_tree(tmp)
            raise
        store.remember(images, shown, resolved.platform, digest, lock_timeout)
    return RegistryPull(
        reference=shown, digest=digest, platform=resolved.platform,
        path=str(where / store.ROOTFS), config=str(where / store.CONFIG),
        layers=len(resolved.layers), bytes_downloaded=downloaded, bytes_unpacked=unpacked,
        seconds=round(time.monotonic() - started, 3), cached=False, image_config=image_config,
    )  # fmt: skip


def _space(images: Path, doing: str, action: Callable[[], T]) -> T:
    """`action`, a full disk (or quota) said in one line naming the dir and what to do."""
    import errno

    try:
        return action()
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        raise ShoalError(
            f"no space left in {images} while {doing}; free space, or remove what is not "
            "used with `shoal image prune`"
        ) from None


def _unpack(blobs: BlobStore, layers: list[Any], root: Path, caps: Caps) -> int:
    """Apply the layers in order into `root` (made here); the bytes unpacked."""
    from drivers.image import decompress
    from drivers.image.registry.layers import LayerExtractor
    from drivers.image.tarstream import TarStream

    root.mkdir(mode=0o755)
    extractor = LayerExtractor(root, caps)
    try:
        for layer in layers:
            extractor.next_layer()
            blob = _Chunks(blobs.open_verified(layer.digest, layer.size))
            _, tar_bytes = decompress.open_stream(blob)
            tar = TarStream(tar_bytes)
            for member in tar.members():
                extractor.add(member, tar)
            while tar_bytes.read(decompress.INPUT_CHUNK):
                pass  # to the end of the blob: its digest is checked there
        extractor.finish()
    finally:
        extractor.close()
    return extractor.bytes_unpacked


class _Chunks:
    """An iterator of byte chunks as a reader (read(n))."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buffer = b""

    def read(self, size: int = -1, /) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, None)
            if chunk is None:
                break
            self._buffer += chunk
            if size < 0:
                continue
        if size < 0:
            out, self._buffer = self._buffer, b""
        else:
            out, self._buffer = self._buffer[:size], self._buffer[size:]
        return out


def _parse_config(raw: bytes, digest: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        raise ShoalError(f"the image config {digest} is not JSON") from None
    if not isinstance(value, dict):
        raise ShoalError(f"the image config {digest} is not a JSON object")
    return value

