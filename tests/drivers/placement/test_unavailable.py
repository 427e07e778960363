"""The unavailable offerings: a real SQLite file, written by real concurrent processes, killed
with SIGKILL mid-write, broken on purpose; never an error, never half-written."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from drivers.placement.unavailable import FILE, Key, Unavailable
from tests.conftest import REPO

ZONE_A = Key("aws", "us-east-1", "us-east-1a", "p5.48xlarge", "spot")
ZONE_B = Key("aws", "us-east-1", "us-east-1b", "p5.48xlarge", "spot")


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_an_entry_keeps_its_zone_out_until_it_expires(tmp_path: Path) -> None:
    clock = Clock()
    memory = Unavailable(tmp_path / FILE, clock)
    assert memory.recall(ZONE_A) is None
    memory.remember(ZONE_A, "InsufficientInstanceCapacity", 180)
    kept = memory.recall(ZONE_A)
    assert kept is not None and kept.reason == "InsufficientInstanceCapacity"
    assert (kept.since, kept.until) == (clock.now, clock.now + 180)
    assert memory.recall(ZONE_B) is None  # another zone may have room
    assert memory.recall(Key("aws", "us-east-1", "us-east-1a", "p5.48xlarge", "onDemand")) is None
    clock.now += 180
    assert memory.recall(ZONE_A) is None


def test_a_region_wide_entry_keeps_every_zone_out(tmp_path: Path) -> None:
    memory = Unavailable(tmp_path / FILE)
    memory.remember(ZONE_A.region_wide(), "VcpuLimitExceeded")
    for key in (ZONE_A, ZONE_B, ZONE_A.region_wide()):
        kept = memory.recall(key)
        assert kept is not None and kept.key.zone == "" and kept.reason == "VcpuLimitExceeded"


def test_expired_entries_are_dropped_by_the_next_write(tmp_path: Path) -> None:
    clock = Clock()
    memory = Unavailable(tmp_path / FILE, clock)
    memory.remember(ZONE_A, "old", 10)
    clock.now += 20
    memory.remember(ZONE_B, "new", 10)
    conn = sqlite3.connect(tmp_path / FILE)
    try:
        assert conn.execute("SELECT zone FROM unavailable").fetchall() == [("us-east-1b",)]
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


@pytest.mark.parametrize(
    "content",
    [
        b"this is not a database" * 50,
        b"SQLite format 3\x00" + b"\xff" * 4000,  # a header, then garbage
        b"",
    ],
)
def test_a_broken_file_is_ignored_and_made_again(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / FILE
    path.write_bytes(content)
    memory = Unavailable(path)
    assert memory.recall(ZONE_A) is None
    memory.remember(ZONE_A, "InsufficientInstanceCapacity")
    kept = memory.recall(ZONE_A)
    assert kept is not None and kept.reason == "InsufficientInstanceCapacity"


def test_a_file_of_another_shape_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / FILE
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE unavailable (key TEXT PRIMARY KEY, until REAL)")
    conn.execute("INSERT INTO unavailable VALUES ('x', 1e12)")
    conn.commit()
    conn.close()
    memory = Unavailable(path)
    assert memory.recall(ZONE_A) is None
    memory.remember(ZONE_A, "InsufficientInstanceCapacity")
    assert memory.recall(ZONE_A) is not None


def test_a_directory_that_cannot_be_written_is_no_error(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        blocked = tmp_path / "a-file-not-a-dir"
        blocked.write_text("")  # root writes anywhere: a path under a file fails for it too
        path = blocked / FILE
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        path = locked / FILE
    memory = Unavailable(path)
    memory.remember(ZONE_A, "InsufficientInstanceCapacity")
    assert memory.recall(ZONE_A) is None


WRITER = """
import sys
from drivers.placement.unavailable import Key, Unavailable
memory = Unavailable(sys.argv[1])
name, count = sys.argv[2], int(sys.argv[3])
for n in range(count):
    memory.remember(Key("aws", "us-east-1", f"{name}-{n}", "p5.48xlarge", "spot"), "ICE", 3600)
    if count > 1000:
        print(n, flush=True)
"""


def writer(path: Path, name: str, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), name, str(count)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def zones(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {str(r[0]) for r in conn.execute("SELECT zone FROM unavailable")}
    finally:
        conn.close()


def test_concurrent_processes_lose_none_of_each_others_entries(tmp_path: Path) -> None:
    path = tmp_path / FILE
    procs = [writer(path, f"w{i}", 40) for i in range(4)]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert zones(path) == {f"w{i}-{n}" for i in range(4) for n in range(40)}


def test_kill_9_mid_writes_leaves_a_whole_file(tmp_path: Path) -> None:
    path = tmp_path / FILE
    for round_ in range(3):
        proc = writer(path, f"k{round_}", 100_000)
        assert proc.stdout is not None
        for line in proc.stdout:  # killed after a few writes, at a moment that varies
            if int(line) >= 5 + 20 * round_:
                break
        time.sleep(0.01 * round_)
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=30)
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        finally:
            conn.close()
        memory = Unavailable(path)
        assert memory.recall(Key("aws", "us-east-1", f"k{round_}-0", "p5.48xlarge", "spot"))
