"""OCI image layouts written in Python (image-layout spec 1.0: `oci-layout`, `index.json`,
`blobs/sha256/HEX`), and `push()` to a registry with skopeo.

A layer is a list of `Entry` (`file`, `directory`, `symlink`, `hardlink`, and the whiteouts
`whiteout(path)` = `.wh.NAME`, `opaque(dir)` = `DIR/.wh..wh..opq`), written as a tar
(deterministic: mtime, owners and order as given) compressed with gzip or zstd (or none),
streamed into the layout with its digest (compressed) and diff_id (uncompressed) computed on
the way. `Layout.add_image()` writes the config and manifest; `add_index()` a multi-platform
index; `tag()` names one in index.json (`org.opencontainers.image.ref.name`), which is what
`oci:DIR:TAG` finds.

Ready-made images: `sample_image()` (three layers with every entry kind, whiteouts, an opaque
directory, gzip and zstd, a full config) with `expected`, the root filesystem its layers make;
`sample_index()` (linux/amd64 and linux/arm64/v8 sharing their base layer); `sized_image()`
for the benchmark (5 layers of incompressible data totalling about the size asked).

Imported by benchmarks/ from an install without pytest: nothing here imports pytest.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import posixpath
import random
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from .server import Registry

LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
CONFIG = "application/vnd.oci.image.config.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_LAYER = "application/vnd.docker.image.rootfs.diff.tar.gzip"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
REF_NAME = "org.opencontainers.image.ref.name"
MEDIA_TYPES = {"gzip": LAYER_GZIP, "zstd": LAYER_ZSTD, "none": LAYER_TAR}
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"
MTIME = 1_700_000_000  # every entry's, unless given: the same bytes every run
CHUNK = 1 << 20
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
PUSH_TIMEOUT = 600


# -- layer entries -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One tar member. `path` is relative ("etc/hostname"); `target` a symlink's text or a
    hardlink's member path; `data` a file's bytes, or `size` bytes of `seed`'s pseudo-random
    stream (big files for the benchmark, never held in memory whole)."""

    path: str
    kind: str  # "file" | "dir" | "symlink" | "hardlink"
    data: bytes = b""
    target: str = ""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    mtime: int = MTIME
    size: int | None = None
    seed: int = 0
    text_share: float = 0.0  # of each MiB of a `size` file: repeated text (compresses well)

    @property
    def length(self) -> int:
        return self.size if self.size is not None else len(self.data)

    def chunks(self) -> Iterable[bytes]:
        if self.size is None:
            yield self.data
            return
        stream = random.Random(self.seed)
        text_bytes = int(CHUNK * self.text_share)
        line = f"shoal benchmark text, seed {self.seed}\n".encode()
        text = (line * (text_bytes // len(line) + 1))[:text_bytes]
        left = self.size
        while left > 0:
            n = min(CHUNK, left)
            yield (stream.randbytes(CHUNK - text_bytes) + text)[:n]
            left -= n

    def content(self) -> bytes:
        return b"".join(self.chunks())


def file(
    path: str, data: bytes | str = b"", mode: int = 0o644, uid: int = 0, gid: int = 0
) -> Entry:
    raw = data.encode() if isinstance(data, str) else data
    return Entry(path, "file", raw, mode=mode, uid=uid, gid=gid)


def random_file(
    path: str, size: int, seed: int, mode: int = 0o644, text_share: float = 0.0
) -> Entry:
    """A file of `size` incompressible bytes (a seeded stream: the same every run), but for
    `text_share` of each MiB, which is repeated text."""
    return Entry(path, "file", size=size, seed=seed, mode=mode, text_share=text_share)


def directory(path: str, mode: int = 0o755, uid: int = 0, gid: int = 0) -> Entry:
    return Entry(path, "dir", mode=mode, uid=uid, gid=gid)


def symlink(path: str, target: str) -> Entry:
    return Entry(path, "symlink", target=target, mode=0o777)


def hardlink(path: str, target: str) -> Entry:
    """A hard link to the member `target` (an earlier file of the same layer)."""
    return Entry(path, "hardlink", target=target)


def whiteout(path: str) -> Entry:
    """Deletes `path` (file or directory) of the lower layers: `DIR/.wh.NAME`."""
    parent, name = posixpath.split(path.strip("/"))
    return file(posixpath.join(parent, WHITEOUT + name), mode=0o600)


def opaque(path: str) -> Entry:
    """Hides everything the lower layers have in directory `path`."""
    return file(posixpath.join(path.strip("/"), OPAQUE), mode=0o600)


# -- what a set of layers makes --------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """A path of the expected root filesystem. A hardlink's `target` is the path it shares an
    inode with (its `data` is that file's); a directory made only as some entry's parent has
    mode None (the extractor's default)."""

    kind: str  # "file" | "dir" | "symlink" | "hardlink"
    data: bytes = b""
    target: str = ""
    mode: int | None = None
    uid: int = 0
    gid: int = 0


def apply_layers(layers: Iterable[Sequence[Entry]]) -> dict[str, Node]:
    """The root filesystem `layers` make when applied in order as the OCI image spec says: a
    layer's whiteouts delete from the layers below it only, whatever their place in the tar."""
    tree: dict[str, Node] = {}
    for entries in layers:
        for entry in entries:
            parent, name = posixpath.split(entry.path)
            if name == OPAQUE:
                for path in [p for p in tree if p.startswith(parent + "/")]:
                    del tree[path]
            elif name.startswith(WHITEOUT):
                _remove(tree, posixpath.join(parent, name[len(WHITEOUT) :]))
        for entry in entries:
            name = posixpath.basename(entry.path)
            if name.startswith(WHITEOUT):
                continue
            _make_parents(tree, entry.path)
            existing = tree.get(entry.path)
            if existing is not None and not (existing.kind == "dir" and entry.kind == "dir"):
                _remove(tree, entry.path)
            if entry.kind == "hardlink":
                linked = tree[entry.target]
                tree[entry.path] = Node(
                    "hardlink", linked.data, entry.target, linked.mode, linked.uid, linked.gid
                )
            else:
                tree[entry.path] = Node(
                    entry.kind, entry.content() if entry.kind == "file" else b"",
                    entry.target, entry.mode, entry.uid, entry.gid,
                )  # fmt: skip
    return tree


def _remove(tree: dict[str, Node], path: str) -> None:
    tree.pop(path, None)
    for below in [p for p in tree if p.startswith(path + "/")]:
        del tree[below]


def _make_parents(tree: dict[str, Node], path: str) -> None:
    parent = posixpath.dirname(path)
    while parent and parent not in tree:
        tree[parent] = Node("dir")
        parent = posixpath.dirname(parent)


# -- blobs and layouts -----------------------------------------------------------------------


@dataclass(frozen=True)
class Blob:
    """A blob in a layout: `descriptor()` is what a manifest or index says of it."""

    media_type: str
    digest: str  # "sha256:HEX"
    size: int
    path: Path
    platform: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None

    def read(self) -> bytes:
        return self.path.read_bytes()

    def descriptor(self) -> dict[str, Any]:
        described: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": self.size,
        }
        if self.platform:
            described["platform"] = dict(self.platform)
        if self.annotations:
            described["annotations"] = dict(self.annotations)
        return described


@dataclass(frozen=True)
class Layer:
    """A layer blob, the diff_id of its tar, and the entries it holds."""

    blob: Blob
    diff_id: str
    entries: tuple[Entry, ...]
    compression: str

    @property
    def digest(self) -> str:
        return self.blob.digest

    @property
    def size(self) -> int:
        return self.blob.size

    @property
    def media_type(self) -> str:
        return self.blob.media_type


@dataclass(frozen=True)
class ImageConfig:
    """What goes in the image config (an OCI config's `config` object and platform)."""

    architecture: str = "amd64"
    os: str = "linux"
    variant: str | None = None
    entrypoint: Sequence[str] | None = None
    cmd: Sequence[str] | None = None
    env: Sequence[str] = (PATH_ENV,)
    workdir: str | None = None
    user: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)

    @property
    def platform(self) -> str:
        """ "os/architecture[/variant]", as `--platform` spells it."""
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)

    def document(self, diff_ids: Sequence[str]) -> dict[str, Any]:
        config: dict[str, Any] = {"Env": list(self.env)}
        if self.entrypoint is not None:
            config["Entrypoint"] = list(self.entrypoint)
        if self.cmd is not None:
            config["Cmd"] = list(self.cmd)
        if self.workdir is not None:
            config["WorkingDir"] = self.workdir
        if self.user is not None:
            config["User"] = self.user
        if self.labels:
            config["Labels"] = dict(self.labels)
        document: dict[str, Any] = {
            "created": "2023-11-14T22:13:20Z",
            "architecture": self.architecture,
            "os": self.os,
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": list(diff_ids)},
            "history": [{"created": "2023-11-14T22:13:20Z", "created_by": "shoal tests"}],
        }
        if self.variant:
            document["variant"] = self.variant
        return document


@dataclass(frozen=True)
class Image:
    """An image manifest in a layout, with its config and layers."""

    manifest: Blob
    config: Blob
    config_document: dict[str, Any]
    layers: tuple[Layer, ...]
    image_config: ImageConfig

    @property
    def digest(self) -> str:
        return self.manifest.digest

    @property
    def platform(self) -> str:
        return self.image_config.platform

    @property
    def expected(self) -> dict[str, Node]:
        """The root filesystem its layers make (`apply_layers`)."""
        return apply_layers(layer.entries for layer in self.layers)


@dataclass(frozen=True)
class ImageIndex:
    """A multi-platform index in a layout, with its images."""

    index: Blob
    images: tuple[Image, ...]

    @property
    def digest(self) -> str:
        return self.index.digest

    def for_platform(self, platform: str) -> Image:
        for image in self.images:
            if image.platform == platform:
                return image
        raise KeyError(platform)


class _Hashing(io.RawIOBase):
    """A write-only file that hashes and counts what passes to `sink`."""

    def __init__(self, sink: IO[bytes] | None) -> None:
        self.sink = sink
        self.sha256 = hashlib.sha256()
        self.count = 0

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        self.sha256.update(view)
        self.count += len(view)
        if self.sink is not None:
            self.sink.write(view)
        return len(view)


class Layout:
    """An OCI image layout directory, created empty (`oci-layout`, `blobs/sha256/`)."""

    def __init__(self, dir_: Path) -> None:
        self.dir = Path(dir_)
        self.blobs = self.dir / "blobs" / "sha256"
        self.blobs.mkdir(parents=True, exist_ok=True)
        (self.dir / "oci-layout").write_text('{"imageLayoutVersion":"1.0.0"}')
        self._tags: dict[str, Blob] = {}
        index = self.dir / "index.json"
        if index.exists():  # a layout opened again keeps its tags
            for described in json.loads(index.read_text()).get("manifests", []):
                name = (described.get("annotations") or {}).get(REF_NAME)
                if name:
                    digest = described["digest"]
                    self._tags[name] = Blob(
                        described["mediaType"], digest, described["size"], self.blob_path(digest)
                    )
        else:
            self._write_index()

    def blob_path(self, digest: str) -> Path:
        return self.blobs / digest.removeprefix("sha256:")

    def add_blob(self, data: bytes, media_type: str) -> Blob:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        path = self.blob_path(digest)
        if not path.exists():
            path.write_bytes(data)
        return Blob(media_type, digest, len(data), path)

    def add_json(self, document: Mapping[str, Any], media_type: str, **extra: Any) -> Blob:
        data = json.dumps(document, indent=None, separators=(",", ":")).encode()
        blob = self.add_blob(data, media_type)
        return Blob(blob.media_type, blob.digest, blob.size, blob.path, **extra)

    def add_layer(
        self, entries: Sequence[Entry], compression: str = "gzip", level: int | None = None
    ) -> Layer:
        """Write `entries` as a tar, compressed, straight into the layout (big layers never
        sit in memory)."""
        if compression not in MEDIA_TYPES:
            raise ValueError(f"compression must be one of {sorted(MEDIA_TYPES)}")
        fd, temp = tempfile.mkstemp(dir=self.blobs, prefix=".layer.")
        with os.fdopen(fd, "wb") as out:
            compressed = _Hashing(out)
            closer: Any = None
            if compression == "gzip":
                # mtime 0 and no name: the same bytes every run (and as `docker save` does).
                zipped = gzip.GzipFile(
                    filename="", mode="wb", compresslevel=6 if level is None else level,
                    fileobj=compressed, mtime=0,
                )  # fmt: skip
                sink: Any = zipped
                closer = zipped
            elif compression == "zstd":
                import zstandard

                writer = zstandard.ZstdCompressor(level=3 if level is None else level)
                stream = writer.stream_writer(cast("IO[bytes]", compressed), closefd=False)
                sink = stream
                closer = stream
            else:
                sink = compressed
            uncompressed = _Hashing(sink)
            _write_tar(cast("IO[bytes]", uncompressed), entries)
            if closer is not None:
                closer.close()
        digest = "sha256:" + compressed.sha256.hexdigest()
        path = self.blob_path(digest)
        os.replace(temp, path)
        blob = Blob(MEDIA_TYPES[compression], digest, compressed.count, path)
        diff_id = "sha256:" + uncompressed.sha256.hexdigest()
        return Layer(blob, diff_id, tuple(entries), compression)

    def add_image(
        self,
        layers: Sequence[Layer],
        config: ImageConfig | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Image:
        config = config or ImageConfig()
        document = config.document([layer.diff_id for layer in layers])
        config_blob = self.add_json(document, CONFIG)
        manifest: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": config_blob.descriptor(),
            "layers": [layer.blob.descriptor() for layer in layers],
        }
        if annotations:
            manifest["annotations"] = dict(annotations)
        platform = {"architecture": config.architecture, "os": config.os}
        if config.variant:
            platform["variant"] = config.variant
        blob = self.add_json(manifest, MANIFEST, platform=platform)
        return Image(blob, config_blob, document, tuple(layers), config)

    def add_index(self, images: Sequence[Image]) -> ImageIndex:
        index = {
            "schemaVersion": 2,
            "mediaType": INDEX,
            "manifests": [image.manifest.descriptor() for image in images],
        }
        return ImageIndex(self.add_json(index, INDEX), tuple(images))

    def tag(self, name: str, target: Image | ImageIndex) -> None:
        """Name `target` `name` in index.json (`oci:DIR:NAME`)."""
        blob = target.manifest if isinstance(target, Image) else target.index
        self._tags[name] = Blob(blob.media_type, blob.digest, blob.size, blob.path)
        self._write_index()

    def _write_index(self) -> None:
        manifests = []
        for name, blob in self._tags.items():
            manifests.append({**blob.descriptor(), "annotations": {REF_NAME: name}})
        index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}
        (self.dir / "index.json").write_text(json.dumps(index, indent=2) + "\n")


def _write_tar(out: IO[bytes], entries: Sequence[Entry]) -> None:
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry.path + ("/" if entry.kind == "dir" else ""))
            info.mode, info.uid, info.gid, info.mtime = (
                entry.mode,
                entry.uid,
                entry.gid,
                entry.mtime,
            )
            info.uname = info.gname = ""
            if entry.kind == "file":
                info.type, info.size = tarfile.REGTYPE, entry.length
                tar.addfile(info, _Chunks(entry))
            elif entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.kind == "symlink":
                info.type, info.linkname = tarfile.SYMTYPE, entry.target
                tar.addfile(info)
            elif entry.kind == "hardlink":
                info.type, info.linkname = tarfile.LNKTYPE, entry.target
                tar.addfile(info)
            else:
                raise ValueError(f"unknown entry kind {entry.kind!r}")


class _Chunks(io.RawIOBase):
    """An entry's content as a readable file (tarfile copies from it in small reads)."""

    def __init__(self, entry: Entry) -> None:
        self._chunks = iter(entry.chunks())
        self._chunk = memoryview(b"")
        self._at = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            rest = bytes(self._chunk[self._at :]) + b"".join(self._chunks)
            self._chunk, self._at = memoryview(b""), 0
            return rest
        while self._at >= len(self._chunk):
            piece = next(self._chunks, None)
            if piece is None:
                return b""
            self._chunk, self._at = memoryview(piece), 0
        out = bytes(self._chunk[self._at : self._at + size])
        self._at += len(out)
        return out


# -- ready-made images ------------------------------------------------------------------------

SAMPLE_CONFIG = ImageConfig(
    entrypoint=["/app/main.sh"],
    cmd=["--serve", "8080"],
    env=[PATH_ENV, "GREETING=hello world", "EMPTY="],
    workdir="/app",
    user="1000:1000",
    labels={"org.opencontainers.image.title": "shoal sample"},
)
MAIN_SH = b'#!/bin/sh\necho "$GREETING" "$@"\n'

BASE_LAYER = (
    directory("etc"),
    file("etc/hostname", "base\n"),
    file("etc/os-release", 'NAME="shoal test"\nID=shoaltest\n'),
    file("etc/removed.conf", "deleted by the second layer\n"),
    directory("bin"),
    file("bin/tool", "#!/bin/sh\necho tool\n", mode=0o755),
    symlink("bin/sh", "tool"),
    hardlink("bin/tool-hard", "bin/tool"),
    directory("var"),
    directory("var/lib"),
    directory("var/lib/old"),
    file("var/lib/old/a", "a\n"),
    file("var/lib/old/b", "b\n"),
    directory("opt"),
    directory("opt/gone"),
    file("opt/gone/x", "x\n"),
    directory("tmp", mode=0o1777),
)
UPDATE_LAYER = (
    whiteout("etc/removed.conf"),
    opaque("var/lib/old"),
    file("var/lib/old/c", "c\n"),
    whiteout("opt/gone"),
    file("etc/hostname", "updated\n"),
    directory("app"),
    file("app/main.sh", MAIN_SH, mode=0o755),
)
CONFIG_LAYER = (
    directory("app/data"),
    file("app/data/hello.txt", "hello from the third layer\n"),
    directory("etc/alternatives"),
    symlink("etc/alternatives/main", "/app/main.sh"),
    directory("home"),
    directory("home/user", mode=0o700, uid=1000, gid=1000),
    file("home/user/.profile", "export GREETING\n", mode=0o600, uid=1000, gid=1000),
)


def sample_image(layout: Layout, tag: str | None = "1.0", zstd: bool = True) -> Image:
    """Three layers (gzip, zstd, gzip) with files, directories, a symlink (relative and
    absolute), a hardlink, a whiteout of a file and of a directory, an opaque directory, a
    file owned by uid 1000; `SAMPLE_CONFIG`; tagged `tag` (None: untagged). `zstd=False`:
    gzip only (Docker's schema 2 has no zstd: `push(format="v2s2")`)."""
    layers = [
        layout.add_layer(BASE_LAYER, "gzip"),
        layout.add_layer(UPDATE_LAYER, "zstd" if zstd else "gzip"),
        layout.add_layer(CONFIG_LAYER, "gzip"),
    ]
    image = layout.add_image(layers, SAMPLE_CONFIG)
    if tag:
        layout.tag(tag, image)
    return image


PLATFORMS = (("amd64", None), ("arm64", "v8"))


def sample_index(layout: Layout, tag: str | None = "multi", zstd: bool = True) -> ImageIndex:
    """linux/amd64 and linux/arm64/v8 images sharing their base layer (one blob), each with a
    layer of its own (zstd, or gzip with `zstd=False`) writing `etc/platform`
    ("linux/amd64\\n"); tagged `tag`."""
    base = layout.add_layer(BASE_LAYER, "gzip")
    images = []
    for architecture, variant in PLATFORMS:
        config = ImageConfig(
            architecture=architecture,
            variant=variant,
            entrypoint=["/bin/tool"],
            env=[PATH_ENV, f"ARCH={architecture}"],
        )
        own = layout.add_layer(
            [file("etc/platform", config.platform + "\n")], "zstd" if zstd else "gzip"
        )
        images.append(layout.add_image([base, own], config))
    index = layout.add_index(images)
    if tag:
        layout.tag(tag, index)
    return index


def sized_image(
    layout: Layout,
    total_bytes: int,
    tag: str | None = "bench",
    layers: int = 5,
    compression: str = "gzip",
    file_bytes: int = 8 << 20,
    level: int | None = None,
    text_share: float = 0.0,
) -> Image:
    """`layers` layers of incompressible files (`file_bytes` each, a layer's last smaller)
    totalling `total_bytes` of content, plus a file the first layer adds and the last whites
    out (a baseline must apply whiteouts too). `text_share` of each MiB may be text instead.
    `level`: the compressor's (default: gzip 0 when all is random, since deflate stores
    incompressible blocks whatever the level and level 1 only takes 10x longer to find that
    out; 1 with text; zstd 3)."""
    if level is None and compression == "gzip":
        level = 0 if text_share == 0 else 1
    per_layer = max(1, total_bytes // layers)
    built = []
    for n in range(layers):
        size = per_layer if n < layers - 1 else total_bytes - per_layer * (layers - 1)
        entries: list[Entry] = [directory(f"data{n}")]
        offset = 0
        while offset < size:
            part = min(file_bytes, size - offset)
            name = f"data{n}/blob{offset // file_bytes:04d}"
            entries.append(random_file(name, part, n * 1_000_003 + offset, text_share=text_share))
            offset += part
        if n == 0:
            entries.append(file("data0/removed-later", "gone\n"))
        if n == layers - 1 and layers > 1:
            entries.append(whiteout("data0/removed-later"))
        built.append(layout.add_layer(entries, compression, level))
    image = layout.add_image(built, ImageConfig(entrypoint=["/bin/true"]))
    if tag:
        layout.tag(tag, image)
    return image


# -- pushing -----------------------------------------------------------------------------------


class PushFailed(RuntimeError):
    """skopeo copy failed; the message is its stderr (credentials masked)."""


def skopeo_env(home: Path) -> dict[str, str]:
    """skopeo's environment: a HOME and auth file of its own, so the machine's or the user's
    registries.conf additions and stored logins play no part."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REGISTRY_AUTH", "DOCKER_"))}
    env["HOME"] = str(home)
    env["XDG_RUNTIME_DIR"] = str(home)
    env["XDG_CONFIG_HOME"] = str(home / ".config")
    env["REGISTRY_AUTH_FILE"] = str(home / "auth.json")
    return env


def push(
    layout_dir: Path | Layout,
    ref: str,
    registry: Registry,
    creds: str | None = None,
    *,
    anonymous: bool = False,
    format: str | None = None,
    tag: str | None = None,
) -> str:
    """`skopeo copy --all oci:DIR:TAG docker://HOST/NAME:TAG`: push the layout's image tagged
    `tag` (default: `ref`'s tag) as `ref` ("NAME:TAG") to `registry`. `creds`: "user:password"
    (default: the registry's pushing user; `anonymous` sends none). `format`: "v2s2" converts
    to Docker's schema 2 (gzip layers only). Returns the reference pushed,
    "127.0.0.1:PORT/NAME:TAG"."""
    from .server import find_tool

    skopeo = find_tool("skopeo")
    directory_ = layout_dir.dir if isinstance(layout_dir, Layout) else Path(layout_dir)
    name, _, ref_tag = ref.rpartition(":")
    if not name or "/" in ref_tag:
        name, ref_tag = ref, "latest"
    source_tag = tag or ref_tag
    target = f"{registry.host}/{name}:{ref_tag}"
    argv = [skopeo, "--insecure-policy", "copy", "--all", "--retry-times", "0"]
    if format:
        argv += ["--format", format]
    if registry.cert_dir is not None:
        argv += ["--dest-cert-dir", str(registry.cert_dir), "--dest-tls-verify=true"]
    else:
        argv.append("--dest-tls-verify=false")
    given = None if anonymous else (creds or registry.creds)
    if given:
        argv += ["--dest-creds", given]
    else:
        argv.append("--dest-no-creds")
    argv += [f"oci:{directory_}:{source_tag}", f"docker://{target}"]
    with tempfile.TemporaryDirectory(prefix="shoal-skopeo.") as home:
        done = subprocess.run(
            argv,
            env=skopeo_env(Path(home)),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PUSH_TIMEOUT,
            check=False,
        )
    if done.returncode != 0:
        said = " ".join(done.stderr.split())
        for secret in (given or "", given.partition(":")[2] if given else ""):
            if secret:
                said = said.replace(secret, "***")
        raise PushFailed(f"skopeo copy to {target} failed ({done.returncode}): {said[-800:]}")
    return target
