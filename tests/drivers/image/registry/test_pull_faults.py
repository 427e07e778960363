"""`shoal image pull REF` against a real registry (Debian's docker-registry on loopback) behind
a fault-injecting proxy (faults.py): what a pull must refuse (a blob whose digest lies, a
manifest lying about a layer's size, a full disk) with one error line, exit 1 and nothing of
the image visible; what it must ride out (blobs redirected to storage that never sees the
credentials, a token expiring mid-pull, 429 with Retry-After, a connection cut mid-blob,
kill -9 mid-blob, eight pulls of one image at once)."""

from __future__ import annotations

import contextlib
import hashlib
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import spawn, wait_for
from tests.drivers.image.registry.faults import (
    Corrupt,
    Cut,
    Delay,
    FaultProxy,
    Hold,
    LieSize,
    Redirect,
    Stall,
    Throttle,
    Unauthorized,
)
from tests.drivers.image.registry.layouts import (
    BASE_LAYER,
    Image,
    ImageConfig,
    Layer,
    directory,
    file,
    random_file,
)
from tests.drivers.image.registry.server import Registry

Cli = Callable[..., Any]
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
PARALLEL = 8


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No docker or podman login of the machine's: an empty HOME of the test's own."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("REGISTRY_AUTH_FILE", "DOCKER_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    return home


@pytest.fixture(autouse=True)
def quick_retries(write_config: Callable[[str], Path]) -> None:
    """Retries after a drop pause 50 ms, not 0.5 s (a Retry-After is honoured whatever)."""
    write_config("[image]\nbackoff_seconds = 0.05\n")


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "images"


@pytest.fixture
def make_proxy() -> Iterator[Callable[[Registry], FaultProxy]]:
    started: list[FaultProxy] = []

    def make(registry: Registry) -> FaultProxy:
        proxy = FaultProxy(registry.host).start()
        started.append(proxy)
        return proxy

    yield make
    for proxy in started:
        proxy.stop()


@dataclass
class Faulty:
    """The images these tests pull, in the session's layout."""

    samples: Any
    image: Image  # a base layer, 1 MiB of random bytes (stored, not compressed), a zstd one
    huge: Image  # a 3 MiB layer: more than the full-disk tests' 2 MiB
    expands: Image  # a small blob that unpacks to 3 MiB

    @property
    def big(self) -> Layer:
        return self.image.layers[1]

    def push(self, registry: Registry, tag: str = "faults") -> str:
        """The image tagged `tag` on `registry` as faults/TAG:1; its name there."""
        self.samples.push(registry, f"faults/{tag}:1", tag=tag)
        return f"faults/{tag}"

    def blobs(self) -> dict[str, bytes]:
        """Every blob of these images by digest (what a partial may be a prefix of)."""
        found: dict[str, bytes] = {}
        for image in (self.image, self.huge, self.expands):
            found[image.config.digest] = image.config.read()
            for layer in image.layers:
                found[layer.digest] = layer.blob.read()
        return found


@pytest.fixture(scope="module")
def faulty(samples: Any) -> Faulty:
    layout = samples.layout
    big = layout.add_layer(
        [directory("data"), random_file("data/big.bin", 1 << 20, seed=28)], "gzip", level=0
    )
    top = layout.add_layer([file("data/top.txt", "the top layer\n")], "zstd")
    image = layout.add_image(
        [layout.add_layer(BASE_LAYER, "gzip"), big, top], ImageConfig(entrypoint=["/bin/tool"])
    )
    layout.tag("faults", image)
    huge = layout.add_image(
        [layout.add_layer([random_file("huge.bin", 3 << 20, seed=29)], "gzip", level=0)]
    )
    layout.tag("huge", huge)
    zeros = file("zeros.bin", bytes(3 << 20))
    expands = layout.add_image([layout.add_layer([zeros], "gzip", level=9)])
    layout.tag("expands", expands)
    assert expands.layers[0].size < 64 << 10  # it is the unpacking that fills the disk
    return Faulty(samples, image, huge, expands)


# -- what a user sees ------------------------------------------------------------------------


def pull(cli: Cli, ref: str, out: Path, *args: str, **kw: Any) -> Any:
    return cli("image", "pull", ref, "--out", str(out), *args, **kw)


def error_line(run: Any) -> str:
    """The one `shoal: error:` line of a failed run; no traceback, no unexpected error."""
    lines: list[str] = run.stderr.splitlines()
    errors = [line for line in lines if line.startswith("shoal: error:")]
    assert len(errors) == 1, run.stderr
    assert "Traceback" not in run.stderr and "unexpected" not in errors[0], run.stderr
    return errors[0]


def nothing_visible(cli: Cli, out: Path, blobs: dict[str, bytes]) -> None:
    """No image in place, none half-made: `image list` names no registry image, oci/ holds
    nothing but lock files (no image dir, no temp dir), every complete blob hashes to its
    name, every partial is a prefix of the true blob."""
    listed = cli("image", "list", "--out", str(out), "--json")
    assert listed.exit_code == 0, listed.stderr
    assert [i for i in listed.json() if i["kind"] == "registry"] == []
    oci = out / "oci"
    if oci.is_dir():
        left = [p.name for p in oci.iterdir() if not p.name.endswith(".lock")]
        assert left == [], f"left in {oci}: {left}"
    store = out / "blobs" / "sha256"
    if store.is_dir():
        for path in store.iterdir():
            if not path.name.startswith("."):
                actual = hashlib.sha256(path.read_bytes()).hexdigest()
                assert actual == path.name, f"{path} holds bytes of another digest"
            elif path.name.endswith(".partial"):
                true = blobs.get("sha256:" + path.name[1:].removesuffix(".partial"))
                assert true is not None and true.startswith(path.read_bytes()), path


def has_blob(out: Path, digest: str) -> bool:
    return (out / "blobs" / "sha256" / digest.removeprefix("sha256:")).exists()


def partial(out: Path, digest: str) -> Path:
    return out / "blobs" / "sha256" / f".{digest.removeprefix('sha256:')}.partial"


def rootfs_file(run: Any, rel: str) -> bytes:
    return (Path(run.json()["path"]) / rel).read_bytes()


# -- refused: nothing of it kept ---------------------------------------------------------------


def test_a_blob_whose_digest_lies_is_refused_and_nothing_of_it_kept(
    cli: Cli, registry_plain: Registry, faulty: Faulty, out: Path,
    make_proxy: Callable[[Registry], FaultProxy],
) -> None:  # fmt: skip
    name = faulty.push(registry_plain)
    proxy = make_proxy(registry_plain)
    proxy.add(Corrupt(faulty.big.digest))
    run = pull(cli, proxy.ref(name, "1"), out, "--json")
    assert run.exit_code == 1, run.stderr
    line = error_line(run)
    assert faulty.big.digest in line and "nothing of it was kept" in line, line
    assert any(s.fault == "Corrupt" for s in proxy.blob_gets(faulty.big.digest))
    assert not has_blob(out, faulty.big.digest) and not partial(out, faulty.big.digest).exists()
    nothing_visible(cli, out, faulty.blobs())
    # The registry mended, the next pull is whole: nothing wrong was kept to poison it.
    proxy.clear()
    again = pull(cli, proxy.ref(name, "1"), out, "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["digest"] == faulty.image.digest
    assert rootfs_file(again, "data/big.bin") == faulty.big.entries[1].content()


@pytest.mark.parametrize("delta", [-100, 100], ids=["fewer-bytes", "more-bytes"])
def test_a_manifest_that_lies_about_a_layer_size_is_refused(
    cli: Cli, registry_plain: Registry, faulty: Faulty, out: Path,
    make_proxy: Callable[[Registry], FaultProxy], delta: int,
) -> None:  # fmt: skip
    name = faulty.push(registry_plain)
    proxy = make_proxy(registry_plain)
    proxy.add(LieSize(faulty.big.digest, delta=delta))
    run = pull(cli, proxy.ref(name, "1"), out, "--json")
    assert run.exit_code == 1, run.stderr
    line = error_line(run)
    assert any(s.fault == "LieSize" for s in proxy.manifest_gets())
    assert faulty.big.digest in line and str(faulty.big.size + delta) in line, line
    assert "nothing of it was" in line, line
    assert not has_blob(out, faulty.big.digest)
    nothing_visible(cli, out, faulty.blobs())  # a partial left is the blob's true start


@contextlib.contextmanager
def small_disk(where: Path, size: str = "2m") -> Iterator[Path]:
    """A tmpfs of `size` at `where` (root only: skips with the reason otherwise)."""
    where.mkdir()
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(where)],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
    except OSError as exc:
        pytest.skip(f"cannot mount a small tmpfs for a full disk: {exc}")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs for a full disk: {done.stderr.strip()}")
    try:
        yield where
    finally:
        if subprocess.run(["umount", str(where)], capture_output=True, check=False).returncode:
            subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)


@pytest.mark.parametrize("tag", ["huge", "expands"], ids=["blob-fills-it", "unpacking-fills-it"])
def test_a_full_disk_is_one_line_and_nothing_half_written(
    cli: Cli, registry_plain: Registry, faulty: Faulty, tmp_path: Path, tag: str,
) -> None:  # fmt: skip
    name = faulty.push(registry_plain, tag)
    with small_disk(tmp_path / "small") as disk:
        # Not SHOAL_DEBUG: the user's view, where a failure nobody foresaw is still one line.
        run = pull(cli, registry_plain.ref(name, "1"), disk, "--json", env={"SHOAL_DEBUG": ""})
        assert run.exit_code == 1, run.stderr
        nothing_visible(cli, disk, faulty.blobs())
        line = error_line(run)
        assert "no space left" in line.lower(), line


# -- ridden out ---------------------------------------------------------------------------------


@pytest.mark.parametrize("auth", ["basic", "token"])
def test_a_blob_redirected_to_storage_is_followed_without_credentials(
    cli: Cli, request: pytest.FixtureRequest, faulty: Faulty, out: Path,
    make_proxy: Callable[[Registry], FaultProxy], auth: str,
) -> None:  # fmt: skip
    registry: Registry = request.getfixturevalue(f"registry_{auth}")
    user = "reader" if auth == "token" else registry.username
    assert user is not None
    password = registry.users[user]
    name = faulty.push(registry)
    proxy = make_proxy(registry)
    proxy.add(Redirect())
    run = pull(
        cli, proxy.ref(name, "1"), out, "--json", "--user", user, "--password-stdin",
        input=password + "\n",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert run.json()["digest"] == faulty.image.digest
    assert rootfs_file(run, "data/big.bin") == faulty.big.entries[1].content()
    # Every blob came from the storage; the registry got the credentials, the storage none.
    served = {s.serves for s in proxy.storage.seen if s.status in (200, 206)}
    assert {layer.digest for layer in faulty.image.layers} <= served
    redirected = [s for s in proxy.blob_gets() if s.fault == "Redirect"]
    assert redirected and all("authorization" in s.headers for s in redirected)
    for seen in proxy.storage.seen:  # (what it got is not printed: it may be a secret)
        assert "authorization" not in seen.headers, f"the storage got one for {seen.serves}"
        sent = seen.path + " " + " ".join(seen.headers.values())
        leaked = password in sent or "Bearer" in sent or "Basic" in sent
        assert not leaked, f"the storage got a credential for {seen.serves}"
    assert password not in run.stdout + run.stderr


def test_a_token_that_expires_mid_pull_is_renewed(
    cli: Cli, make_registry: Callable[..., Registry], faulty: Faulty, out: Path,
    make_proxy: Callable[[Registry], FaultProxy],
) -> None:  # fmt: skip
    registry = make_registry("token")
    token = registry.token
    assert token is not None
    name = faulty.push(registry)
    # From now on the registry takes a token for 2 to 3 s while the answer still says 300 s:
    # the client has no reason to renew it before the registry refuses it. The last layer is
    # asked for after 3.2 s of silence, with a token that has died on the way.
    token.lifetime = 2
    token.reset()
    proxy = make_proxy(registry)
    last = faulty.image.layers[-1].digest
    proxy.add(Delay(last, seconds=3.2))
    run = pull(
        cli, proxy.ref(name, "1"), out, "--json", "--user", "reader", "--password-stdin",
        input=registry.users["reader"] + "\n",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert run.json()["digest"] == faulty.image.digest
    statuses = [s.status for s in proxy.blob_gets(last)]
    assert statuses[:1] == [401] and statuses[-1] == 200, statuses  # the registry's own 401
    granted = [r for r in token.requests if r.status == 200 and r.user == "reader"]
    assert len(granted) >= 2, [(r.user, r.status) for r in token.requests]


def test_a_401_mid_pull_asks_the_token_service_again(
    cli: Cli, registry_token: Registry, faulty: Faulty, out: Path,
    make_proxy: Callable[[Registry], FaultProxy],
) -> None:  # fmt: skip
    token = registry_token.token
    assert token is not None
    name = faulty.push(registry_token)
    proxy = make_proxy(registry_token)
    proxy.add(Unauthorized(faulty.big.digest))
    from drivers.image.registry.client import clear_token_cache

    clear_token_cache()  # no token from an earlier pull of this process: one at the start
    token.reset()
    run = pull(
        cli, proxy.ref(name, "1"), out, "--json", "--user", "reader", "--password-stdin",
        input=registry_token.users["reader"] + "\n",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert [s.status for s in proxy.blob_gets(faulty.big.digest)] == [401, 200]
    # One token at the start, a new one after the 401 (not the refused one sent again).
    granted = [r for r in token.requests if r.status == 200 and r.user == "reader"]
    assert len(granted) == 2, [(r.user, r.status) for r in token.requests]


def test_429_with_retry_after_is_waited_out_and_said(
    cli: Cli, registry_plain: Registry, faulty: Faulty, out: Path,
    make_proxy: Callable[[Registry], FaultProxy],
) -> None:  # fmt: skip
    name = faulty.push(registry_plain)
    proxy = make_proxy(registry_plain)
    proxy.add(Throttle(faulty.big.digest, retry_after=1))
    run = pull(cli, proxy.ref(name, "1"), out)
    assert run.exit_code == 0, run.stderr
    gets = proxy.blob_gets(faulty.big.digest)
    assert [s.status for s in gets] == [429, 200]
    assert gets[1].at - gets[0].at >= 0.9  # Retry-After: 1 honoured (the backoff is 50 ms)
    assert faulty.image.digest in run.stderr
    # A CI log must say why nothing moved for a while.
    assert re.search(r"\bretry", run.stderr, re.I), run.stderr


def test_a_connection_cut_mid_blob_is_resumed_with_range(
    cli: Cli, registry_plain: Registry, faulty: Faulty, out: Path,
    make_proxy: Callable[[Registry], FaultProxy],
) -> None:  # fmt: skip
    name = faulty.push(registry_plain)
    proxy = make_proxy(registry_plain)
    half = faulty.big.size // 2
    proxy.add(Cut(faulty.big.digest, after=half))
    run = pull(cli, proxy.ref(name, "1"), out, "--json")
    if run.exit_code != 0:  # resumed by the next run, if not by this one
        error_line(run)
        nothing_visible(cli, out, faulty.blobs())
        run = pull(cli, proxy.ref(name, "1"), out, "--json")
    assert run.exit_code == 0, run.stderr
    gets = proxy.blob_gets(faulty.big.digest)
    assert gets[0].fault == "Cut" and gets[0].sent == half
    assert [s.range_start for s in gets[1:]] == [half], [(s.status, s.headers) for s in gets]
    assert gets[1].status == 206
    assert proxy.bytes_sent(faulty.big.digest) == faulty.big.size  # the blob once, no more
    assert rootfs_file(run, "data/big.bin") == faulty.big.entries[1].content()


def test_kill_9_mid_blob_then_the_next_pull_resumes_from_the_partial(
    cli: Cli, home: Path, procs: list[subprocess.Popen[str]], registry_plain: Registry,
    faulty: Faulty, out: Path, make_proxy: Callable[[Registry], FaultProxy],
) -> None:  # fmt: skip
    name = faulty.push(registry_plain)
    proxy = make_proxy(registry_plain)
    half = faulty.big.size // 2
    stall = proxy.add(Stall(faulty.big.digest, after=half))
    ref = proxy.ref(name, "1")
    first = spawn(home, procs, "image", "pull", ref, "--out", str(out))
    assert stall.reached.wait(60), f"the pull never got half the blob (exit {first.poll()})"
    held = partial(out, faulty.big.digest)
    wait_for(lambda: held.exists() and held.stat().st_size == half, "the partial blob")
    first.kill()
    first.wait(timeout=30)
    stall.release()
    # In between: nothing half-made is visible, the partial is the blob's first half.
    assert not has_blob(out, faulty.big.digest)
    nothing_visible(cli, out, faulty.blobs())
    second = pull(cli, ref, out)
    assert second.exit_code == 0, second.stderr
    gets = proxy.blob_gets(faulty.big.digest)
    assert [s.range_start for s in gets] == [None, half], [(s.status, s.headers) for s in gets]
    assert proxy.bytes_sent(faulty.big.digest) == faulty.big.size  # the blob once, no more
    assert "resuming at" in second.stderr, second.stderr
    path = Path(second.stdout.strip())
    assert (path / "data" / "big.bin").read_bytes() == faulty.big.entries[1].content()


def test_eight_parallel_pulls_fetch_each_blob_once(
    home: Path, procs: list[subprocess.Popen[str]], registry_plain: Registry, faulty: Faulty,
    out: Path, make_proxy: Callable[[Registry], FaultProxy],
) -> None:  # fmt: skip
    name = faulty.push(registry_plain)
    proxy = make_proxy(registry_plain)
    # The first pull to reach a layer is held there until every pull has started (asked for
    # the manifest) and had time to find the image or its blobs busy.
    hold = proxy.add(Hold(faulty.image.layers[0].digest))
    ref = proxy.ref(name, "1")
    started = [spawn(home, procs, "image", "pull", ref, "--out", str(out)) for _ in range(PARALLEL)]
    try:
        wait_for(lambda: len(proxy.manifest_gets()) >= PARALLEL, "every pull to start", 60)
        assert hold.arrived.wait(30)
        time.sleep(1.0)
    finally:
        hold.release()
    results = [proc.communicate(timeout=60) for proc in started]
    problems: list[str] = []
    codes = [proc.returncode for proc in started]
    if codes != [0] * PARALLEL:
        problems.append(f"exit codes {codes}: {[err for _, err in results]}")
    paths = {stdout.strip() for stdout, _ in results}
    if len(paths) != 1:
        problems.append(f"paths {paths}")
    digests = [set(DIGEST.findall(err.splitlines()[-1] if err else "")) for _, err in results]
    if any(found != {faulty.image.digest} for found in digests):
        problems.append(f"digests {digests}")
    for n, layer in enumerate(faulty.image.layers):
        count = len(proxy.blob_gets(layer.digest))
        if count != 1:
            problems.append(f"layer {n} ({layer.digest}) fetched {count} times")
    config = len(proxy.blob_gets(faulty.image.config.digest))
    if config != 1:
        problems.append(f"the config blob fetched {config} times")
    waited = [err for _, err in results if "waiting for another pull" in err]
    if len(waited) < PARALLEL - 1:
        problems.append(
            f"{len(waited)} of {PARALLEL} pulls said they waited for another: "
            + " | ".join(err.strip().replace("\n", " / ") for _, err in results)
        )
    assert not problems, "\n".join(problems)
