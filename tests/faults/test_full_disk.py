"""A full disk under SHOAL_HOME: a one-line error with the table's code, and `free` frees.

A real tmpfs of a few MiB is mounted for the test (root only; skipped with the reason
otherwise) and filled with a file until ENOSPC, so SQLite meets a real full disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import shoal_argv, shoal_env

pytestmark = pytest.mark.slow


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as out:
        while True:
            out.write(b"\0" * 65536)
            out.flush()
    # Whatever blocks are left: fill them byte by byte.
    with contextlib.suppress(OSError), filler.open("ab") as out:
        for _ in range(70000):
            out.write(b"\0")
            out.flush()
            os.fsync(out.fileno())
    return filler


def shoal(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        shoal_argv(*args),
        env=shoal_env(home, {"SHOAL_DEBUG": ""}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def one_clear_line(run: subprocess.CompletedProcess[str]) -> None:
    assert "unexpected" not in run.stderr and "Traceback" not in run.stderr, run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr


def test_a_full_disk_is_a_clear_error_and_free_still_frees(small_disk: Path, tmp_path: Path):
    home = small_disk / "home"
    home.mkdir()
    workspaces = tmp_path / "workspaces"  # the workload's files live elsewhere
    (home / "config.toml").write_text(
        f'[drivers."process/default"]\ncpu_limit = 4\nram_limit = 4\ngrace_seconds = 1\n'
        f'workspace = "{workspaces}"\n'
    )
    made = shoal(home, "alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "--json",
                 "-o", "entry=sleep 300")
    assert made.returncode == 0, made.stderr
    allocation = json.loads(made.stdout)
    pid = allocation["resource"]["metadata"]["pid"]
    assert alive(pid)

    filler = fill(small_disk)
    try:
        refused = shoal(home, "alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
        assert refused.returncode == 1, refused.stderr
        one_clear_line(refused)
        assert "full" in refused.stderr and str(home) in refused.stderr

        listed = shoal(home, "status", "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["id"] for r in json.loads(listed.stdout)] == [allocation["id"]]

        freed = shoal(home, "free", allocation["id"])
        # The workload is stopped first; the record may have to wait for space.
        deadline = time.monotonic() + 20
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(pid), freed.stderr
        if freed.returncode != 0:
            assert freed.returncode == 1
            one_clear_line(freed)
            assert "freed" in freed.stderr and "full" in freed.stderr
    finally:
        filler.unlink()

    shown = shoal(home, "status", allocation["id"], "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["status"] in ("FREED", "GONE")
    assert shoal(home, "alloc", "--driver", "test", "--cpu", "1", "--ram", "1").returncode == 0
