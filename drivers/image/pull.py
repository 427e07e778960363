"""`Image.download_unpack`: one pass from the network into a verified image directory.

    lock OUT/.NAME-VERSION.lock (flock: a killed holder releases it)
    -> already in place? done (unless forced)
    -> HTTP body --hash--> decompress (bounded) --> tar reader --> OUT/.NAME-VERSION.tmp-XXXX/
    -> stream ended cleanly and the checksum matches? rename the temp dir to OUT/NAME-VERSION

Nothing is visible before it is verified; on any failure, the temp dir is removed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from drivers.image import checksum, decompress, extract
from drivers.image.extractor import Caps
from drivers.image.filesource import FileSource, local_path
from drivers.image.naming import check_component, check_url, split_file_name, split_name_version
from drivers.image.source import HttpSource, Policy, RestartRequired, Resume
from drivers.image.tarstream import UnsafeArchiveError
from providers.core.errors import ConfigError, ProviderUnreachableError, RetryableError, ShoalError
from providers.core.urls import display

GIB = 2**30
META_SUFFIX = ".json"
TRAILING_ALLOWANCE = 1024 * 1024  # padding after the tar's end (tar -b 2048) is not unpacked


class ChecksumMismatchError(ShoalError):
    """The bytes received do not have the checksum asked for or announced."""


@dataclass
class PullOptions:
    out_dir: Path
    user: str = ""
    password: str = ""
    force: bool = False
    max_unpacked_bytes: int = 64 * GIB
    max_entries: int = 1_000_000
    lock_timeout_seconds: float = 600.0
    policy: Policy = field(default_factory=Policy)
    on_bytes: Callable[[int, int | None], None] | None = None
    on_resume: Callable[[Resume], None] | None = None
    warn: Callable[[str], None] = lambda text: None

    @classmethod
    def from_config(cls, config: dict[str, Any], out_dir: Path, **overrides: Any) -> PullOptions:
        """[image] max_unpacked_gib, max_entries, attempts, backoff_seconds,
        read_timeout_seconds, lock_timeout_seconds."""
        known = {
            "max_unpacked_gib",
            "max_entries",
            "attempts",
            "backoff_seconds",
            "read_timeout_seconds",
            "lock_timeout_seconds",
            "dir",
            "insecure_registries",
        }
        for key, value in config.items():
            if key not in known:
                raise ConfigError(
                    f"config [image] has unknown key {key!r}; known: {', '.join(sorted(known))}"
                )
            if key not in ("dir", "insecure_registries") and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0
            ):
                raise ConfigError(f"config [image].{key} must be a number > 0, got {value!r}")
        policy = Policy(
            attempts=int(config.get("attempts", Policy.attempts)),
            backoff_seconds=float(config.get("backoff_seconds", Policy.backoff_seconds)),
            read_timeout_seconds=float(
                config.get("read_timeout_seconds", Policy.read_timeout_seconds)
            ),
        )
        return cls(
            out_dir=out_dir,
            max_unpacked_bytes=int(float(config.get("max_unpacked_gib", 64)) * GIB),
            max_entries=int(config.get("max_entries", 1_000_000)),
            lock_timeout_seconds=float(config.get("lock_timeout_seconds", 600)),
            policy=policy,
            **overrides,
        )


@dataclass
class PullResult:
    path: str
    name: str
    version: str
    tag: str
    bytes_downloaded: int
    bytes_unpacked: int
    checksum: str
    seconds: float
    cached: bool
    # The URL as it may be printed (no user info, no query string: a signed URL's carries
    # secrets), for the spec's Image `url`.
    url: str = ""
    # For the summary line only: the --json fields are documented and stay as they are.
    entries: int = field(default=0, metadata={"json": False})
    verified: bool = field(default=False, metadata={"json": False})

    def to_json(self) -> dict[str, Any]:
        """The fields above, a superset of the spec's `Image` (url, sum, name, version,
        tag): `sum` is the image's checksum as `<algo>:<checksum>` (as `checksum`)."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("json", True)}
        out["sum"] = self.checksum
        return out


@dataclass
class _Fetched:
    downloaded: int
    unpacked: int
    entries: int
    checksum: str
    verified: bool


@contextlib.contextmanager
def locked(
    lock_path: Path,
    timeout: float,
    on_wait: Callable[[float], None] | None = None,
    busy: str | None = None,
) -> Iterator[None]:
    """An exclusive flock; the kernel drops it when its holder dies, so none is ever stale.
    `on_wait(seconds waited)` is told while another holds it; `busy` is the message when
    it is held past `timeout` (default: the lock file's name)."""
    try:
        # O_NOFOLLOW: in a shared images dir, a planted symlink must not be opened for us.
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        raise ShoalError(
            f"lock file {lock_path}: {exc.strerror}; remove it if it is a link"
        ) from None
    try:
        began = time.monotonic()
        deadline = began + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise RetryableError(
                        busy
                        or f"another shoal has held {lock_path.name} for {timeout:g}s "
                        "(pulling the same image); try again later"
                    ) from None
                if on_wait is not None:
                    on_wait(time.monotonic() - began)
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


def _check_private(out_dir: Path) -> None:
    """Refuse an images dir anyone may rename or replace entries in (no sticky bit).

    The verified temp dir is renamed into place by name; in such a dir another user could
    swap it between the check and the rename. A group-writable dir is a deliberate share
    (and what umask 002 makes), so it is trusted.
    """
    info = os.stat(out_dir)
    if info.st_mode & 0o002 and not info.st_mode & stat.S_ISVTX:
        raise ConfigError(
            f"images dir {out_dir} is writable by everyone without the sticky bit; "
            f"chmod o-w (or +t) it, or choose another with --out"
        )


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _meta_path(out_dir: Path, dirname: str) -> Path:
    return out_dir / f".{dirname}{META_SUFFIX}"


def _cached(
    target: Path, meta_path: Path, wanted: checksum.Sum | None, source: str
) -> dict[str, Any] | None:
    """The record of the image in place, when it is provably the one asked for: the same
    checksum as --sum, or (without one) pulled from the same source. A file name alone is
    no identity: another server's `base-1.tar` is another image."""
    try:
        if not stat.S_ISDIR(os.lstat(target).st_mode):  # a planted symlink is not our image
            return None
    except FileNotFoundError:
        return None
    meta: dict[str, Any] = {}
    try:
        loaded = json.loads(meta_path.read_text())
        meta = loaded if isinstance(loaded, dict) else {}
    except (OSError, ValueError):
        pass
    if wanted is not None and meta.get("checksum") != str(wanted):
        # Not provably the build asked for (another sum, another algorithm, no record):
        # pull it, rather than answer "in place" unverified.
        return None
    if wanted is None and meta.get("url") != source:
        return None  # the same name from another source: pulled, and it replaces this one
    return meta


def _sweep_temps(out_dir: Path, dirname: str) -> None:
    """Remove what a killed pull of this image left; we hold its lock, so none is in use.

    Exact names only (mkdtemp's 8-character suffix): `.a-1.tmp-*` would also match the temp
    dir of a concurrent pull of an image named `a-1.tmp-x`, which holds another lock.
    """
    own = re.compile(rf"\.{re.escape(dirname)}\.(tmp|old)-[A-Za-z0-9_]{{8}}")
    for stale in out_dir.iterdir():
        if own.fullmatch(stale.name):
            shutil.rmtree(stale, ignore_errors=True)


def _expected(
    wanted: checksum.Sum | None, announced: list[checksum.Sum], where: str
) -> checksum.Sum | None:
    """The checksum to verify; a server announcing another one for --sum's algorithm fails."""
    for claim in announced:
        if wanted is not None and claim.algo == wanted.algo and claim.hex != wanted.hex:
            raise ChecksumMismatchError(
                f"{where}: the server announces {claim} but --sum expects {wanted}; "
                "nothing was unpacked"
            )
    if wanted is not None:
        return wanted
    strongest = sorted(announced, key=lambda s: checksum.ALGORITHMS[s.algo], reverse=True)
    if not strongest:
        return None
    rivals = {c.hex for c in strongest if c.algo == strongest[0].algo}
    if len(rivals) > 1:
        listed = ", ".join(f"{strongest[0].algo}:{hex_}" for hex_ in sorted(rivals))
        raise ChecksumMismatchError(
            f"{where}: checksum mismatch between the checksums the server announces "
            f"({listed}); nothing was unpacked"
        )
    return strongest[0]


def pull(
    url: str, sum_text: str, name: str, version: str, tag: str, opts: PullOptions
) -> PullResult:
    started = time.monotonic()
    local = local_path(url)
    if local is None:
        check_url(url)
    source = local.resolve().as_uri() if local is not None else display(url)
    wanted = checksum.parse(sum_text) if sum_text else None
    if wanted is not None and wanted.algo in checksum.WEAK:
        opts.warn(f"{wanted.algo} is weak; prefer sha256 or sha512 in --sum")
    if not name or not version:
        derived_name, derived_version = (
            split_file_name(local.name) if local is not None else split_name_version(url)
        )
        name = name or derived_name
        version = version or derived_version
    check_component(name, "--name")
    check_component(version, "--version")
    dirname = f"{name}-{version}"
    out_dir = opts.out_dir
    try:
        out_dir.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"images dir {out_dir}: {exc.strerror}; choose another with --out"
        ) from None
    _check_private(out_dir)
    target = out_dir / dirname
    meta_path = _meta_path(out_dir, dirname)
    with locked(out_dir / f".{dirname}.lock", opts.lock_timeout_seconds):
        if not opts.force:
            meta = _cached(target, meta_path, wanted, source)
            if meta is not None:
                return PullResult(
                    path=str(target),
                    name=name,
                    version=version,
                    tag=tag or meta.get("tag", ""),
                    bytes_downloaded=0,
                    bytes_unpacked=int(meta.get("bytes_unpacked", 0)),
                    checksum=str(meta.get("checksum", "")),
                    seconds=round(time.monotonic() - started, 3),
                    cached=True,
                    url=source,
                )
        _sweep_temps(out_dir, dirname)
        fetched = _download_into(url, wanted, out_dir, dirname, opts, local)
        meta = {
            "url": source,
            "checksum": fetched.checksum,
            "tag": tag,
            "bytes_unpacked": fetched.unpacked,
            "pulled": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        _write_meta(meta_path, meta)
    return PullResult(
        path=str(target),
        name=name,
        version=version,
        tag=tag,
        bytes_downloaded=fetched.downloaded,
        bytes_unpacked=fetched.unpacked,
        checksum=fetched.checksum,
        seconds=round(time.monotonic() - started, 3),
        cached=False,
        url=source,
        entries=fetched.entries,
        verified=fetched.verified,
    )


def _download_into(
    url: str,
    wanted: checksum.Sum | None,
    out_dir: Path,
    dirname: str,
    opts: PullOptions,
    local: Path | None = None,
) -> _Fetched:
    """Download, verify and move into place."""
    auth = (opts.user, opts.password) if opts.user else None
    restarts = 0
    downloaded = 0
    while True:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dirname}.tmp-", dir=out_dir))
        try:
            algo = wanted.algo if wanted else checksum.DEFAULT
            source: HttpSource | FileSource = (
                FileSource(local, hasher=checksum.new_hasher(algo), on_bytes=opts.on_bytes)
                if local is not None
                else HttpSource(
                    url,
                    auth=auth,
                    hasher=checksum.new_hasher(algo),
                    policy=opts.policy,
                    on_bytes=opts.on_bytes,
                    on_resume=opts.on_resume,
                )
            )
            with source:
                source.open()
                expected = _expected(wanted, source.announced(), display(url))
                if expected is not None and expected.algo != algo:
                    # Verify what the server announced, in its own algorithm.
                    source.hasher = checksum.new_hasher(expected.algo)
                    algo = expected.algo
                _, tar_bytes = decompress.open_stream(source)
                result = extract.extract(
                    tar_bytes, tmp, Caps(opts.max_unpacked_bytes, opts.max_entries)
                )
                _read_trailing(tar_bytes, opts.max_unpacked_bytes - result.bytes_unpacked)
                source.drain()
                downloaded += source.received
                actual = checksum.Sum(algo, source.hasher.hexdigest())
            if expected is not None and actual.hex != expected.hex:
                raise ChecksumMismatchError(
                    f"{display(url)}: checksum mismatch: expected {expected}, got {actual}; "
                    "nothing was unpacked"
                )
            _place(tmp, out_dir / dirname, out_dir)
            return _Fetched(
                downloaded, result.bytes_unpacked, result.entries, str(actual), expected is not None
            )
        except RestartRequired as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            downloaded += source.received  # the abandoned attempt came over the wire too
            restarts += 1
            if restarts >= opts.policy.attempts:
                raise ProviderUnreachableError(
                    f"{display(url)}: {exc}; gave up after {restarts} restarts"
                ) from None
            opts.warn(f"{exc}; starting the download over")
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if exc.errno == errno.ENOSPC:
                raise ShoalError(
                    f"no space left in {out_dir} while unpacking; nothing was kept"
                ) from None
            raise ShoalError(f"unpacking into {out_dir} failed: {exc.strerror or exc}") from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _read_trailing(tar_bytes: decompress.Reader, budget: int) -> None:
    """Read what follows the end-of-archive blocks (padding), so the compressed stream is
    checked to its end; what goes on past the unpack cap is a bomb hidden after the tar."""
    seen, limit = 0, budget + TRAILING_ALLOWANCE
    while chunk := tar_bytes.read(decompress.INPUT_CHUNK):
        seen += len(chunk)
        if seen > limit:
            raise UnsafeArchiveError(
                f"unsafe archive: more than {limit} bytes after the end of the tar "
                "(a decompression bomb?; raise [image] max_unpacked_gib if expected)"
            )


def _write_meta(meta_path: Path, meta: dict[str, Any]) -> None:
    """Atomically, through a new file of our own (O_EXCL|O_NOFOLLOW: never through a link)."""
    tmp = meta_path.with_name(f"{meta_path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(
            tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644
        )
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(meta))
        os.replace(tmp, meta_path)
    finally:
        tmp.unlink(missing_ok=True)


def _place(tmp: Path, target: Path, out_dir: Path) -> None:
    """Rename the verified temp dir into place; a forced re-pull swaps out the old one.

    The old record goes first, so an interruption can leave an image without a record
    (the next `--sum` pull re-verifies it by pulling) but never one described by another.
    """
    os.chmod(tmp, 0o755 & ~_umask())
    _meta_path(out_dir, target.name).unlink(missing_ok=True)
    old: Path | None = None
    moved = False
    try:
        if os.path.lexists(target):
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=out_dir))
            os.replace(target, old / "image")
            moved = True
        os.replace(tmp, target)
    except BaseException:
        if moved and old is not None and not os.path.lexists(target):
            os.replace(old / "image", target)  # put the previous image back
        raise
    dir_fd = os.open(out_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
