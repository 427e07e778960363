"""Blobs by digest: fetched once, resumed, verified, shared; nothing wrong kept."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers.image.registry.cache import BlobStore, DigestMismatchError, split_digest

DATA = os.urandom(3 * 1024 * 1024 + 17)
DIGEST = "sha256:" + hashlib.sha256(DATA).hexdigest()


def opener(data: bytes = DATA, calls: list[int] | None = None, chunk: int = 65536):
    def open_at(offset: int) -> Iterator[bytes]:
        if calls is not None:
            calls.append(offset)
        for at in range(offset, len(data), chunk):
            yield data[at : at + chunk]

    return open_at


def test_a_blob_is_fetched_verified_and_then_reused(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    calls: list[int] = []
    first = store.fetch(DIGEST, len(DATA), opener(calls=calls))
    assert (first.cached, first.downloaded) == (False, len(DATA))
    assert first.path.read_bytes() == DATA and calls == [0]
    again = store.fetch(DIGEST, len(DATA), opener(calls=calls))
    assert (again.cached, again.downloaded, calls) == (True, 0, [0])
    assert b"".join(store.open_verified(DIGEST, len(DATA))) == DATA


def test_a_cut_download_resumes_from_what_it_has(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    final = store.path(DIGEST)
    final.parent.mkdir(parents=True)
    half = len(DATA) // 2
    (final.parent / f".{split_digest(DIGEST)[1]}.partial").write_bytes(DATA[:half])  # kill -9
    calls: list[int] = []
    got = store.fetch(DIGEST, len(DATA), opener(calls=calls))
    assert calls == [half] and got.downloaded == len(DATA) - half and got.resumed_at == half
    assert final.read_bytes() == DATA


@pytest.mark.parametrize(
    "lie", ["other bytes", "more bytes", "fewer bytes", "a partial of other bytes"]
)
def test_bytes_that_lie_are_refused_and_nothing_is_kept(tmp_path: Path, lie: str) -> None:
    store = BlobStore(tmp_path)
    data = {
        "other bytes": os.urandom(len(DATA)),
        "more bytes": DATA + b"x",
        "fewer bytes": DATA[:-1],
        "a partial of other bytes": DATA,
    }[lie]
    if lie == "a partial of other bytes":
        store.path(DIGEST).parent.mkdir(parents=True)
        partial = store.path(DIGEST).parent / f".{split_digest(DIGEST)[1]}.partial"
        partial.write_bytes(os.urandom(1000))
    with pytest.raises(DigestMismatchError, match="nothing of it was kept"):
        store.fetch(DIGEST, len(DATA), opener(data))
    assert not store.has(DIGEST)
    assert [p.name for p in store.path(DIGEST).parent.iterdir()] == [
        f".{split_digest(DIGEST)[1]}.lock"
    ]
    # and the next try starts clean and succeeds
    assert store.fetch(DIGEST, len(DATA), opener()).path.read_bytes() == DATA


def test_a_blob_damaged_on_disk_is_fetched_again(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    path = store.fetch(DIGEST, len(DATA), opener()).path
    os.chmod(path, 0o644)
    with open(path, "r+b") as blob:
        blob.seek(100)
        blob.write(b"\0\0\0")
    calls: list[int] = []
    assert not store.fetch(DIGEST, len(DATA), opener(calls=calls)).cached
    assert calls == [0] and path.read_bytes() == DATA


@pytest.mark.parametrize("digest", ["sha256:../../etc", "md5:abc", "sha256:" + "A" * 64, "x"])
def test_a_digest_never_names_a_path(tmp_path: Path, digest: str) -> None:
    from providers.core.errors import ShoalError

    with pytest.raises(ShoalError, match="not a content digest"):
        BlobStore(tmp_path).path(digest)


def _pull_in_process(root: str, done: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    calls: list[int] = []
    got = BlobStore(Path(root)).fetch(DIGEST, len(DATA), opener(calls=calls, chunk=4096))
    done.put((got.cached, len(calls)))


def test_eight_parallel_pulls_fetch_the_blob_once(tmp_path: Path) -> None:
    done: multiprocessing.Queue = multiprocessing.Queue()  # type: ignore[type-arg]
    procs = [
        multiprocessing.Process(target=_pull_in_process, args=(str(tmp_path), done))
        for _ in range(8)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    results = [done.get(timeout=5) for _ in procs]
    assert sum(calls for _, calls in results) == 1  # one download, seven found it complete
    assert sorted(cached for cached, _ in results) == [False] + [True] * 7


def test_prune_keeps_what_is_used_and_what_a_pull_holds(tmp_path: Path) -> None:
    store = BlobStore(tmp_path)
    kept = store.fetch(DIGEST, len(DATA), opener()).path
    other = b"other"
    other_digest = "sha256:" + hashlib.sha256(other).hexdigest()
    store.fetch(other_digest, len(other), opener(other))
    third = b"held"
    third_digest = "sha256:" + hashlib.sha256(third).hexdigest()
    store.fetch(third_digest, len(third), opener(third))
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with store._locked(third_digest, 10, None):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        assert store.remove_unused({DIGEST}) == [other_digest]
    finally:
        release.set()
        holder.join()
    assert kept.exists() and store.has(third_digest) and not store.has(other_digest)
