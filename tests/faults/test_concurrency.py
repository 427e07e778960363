"""Racing shoal processes: a slow remote capacity check holds up nobody, never
oversubscribes; parallel `free --expired` runs all succeed."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import spawn, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ledger_backend")]

CONFIG = (
    '[drivers."test/cloud"]\nis_remote = true\ncpu_limit = 1\nram_limit = 8\n'
    '[drivers."test/default"]\ncpu_limit = 4\nram_limit = 8\n'
)


def remote_alloc(delay: float) -> tuple[str, ...]:
    """An allocation on a remote driver whose capacity check takes `delay` seconds."""
    return ("alloc", "--driver", "test/cloud", "--cpu", "1", "--ram", "1",
            "-o", f"delay_available_capacity={delay}")  # fmt: skip




def test_a_slow_remote_capacity_check_does_not_block_local_allocations(
    home: Path, procs: list[subprocess.Popen[str]], shoal_proc
) -> None:
    (home / "config.toml").write_text(CONFIG)
    assert shoal_proc("status").returncode == 0
    remote = spawn(home, procs, *remote_alloc(8))
    time.sleep(1.5)  # it is inside its (8 s) capacity check now
    assert remote.poll() is None
    local = shoal_proc("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert local.returncode == 0, local.stderr
    # The local allocation was made while the remote check was still running.
    assert remote.poll() is None
    _, err = remote.communicate(timeout=60)
    assert remote.returncode == 0, err
    listed = json.loads(shoal_proc("status", "--json").stdout)
    assert sorted(r["driver"] for r in listed) == ["test/cloud", "test/default"]


def test_racing_remote_allocations_never_oversubscribe(
    home: Path, procs: list[subprocess.Popen[str]], shoal_proc
) -> None:
    (home / "config.toml").write_text(CONFIG)
    assert shoal_proc("status").returncode == 0
    racers = [spawn(home, procs, *remote_alloc(0.5)) for _ in range(4)]
    codes = sorted(p.wait(timeout=60) for p in racers)
    assert codes == [0, 75, 75, 75], [p.communicate() for p in racers]
    listed = json.loads(shoal_proc("status", "--json").stdout)
    assert [r["driver"] for r in listed] == ["test/cloud"]


def test_parallel_free_expired_runs_all_succeed(
    home: Path, procs: list[subprocess.Popen[str]], shoal_proc
) -> None:
    (home / "config.toml").write_text(
        '[drivers."test/default"]\ncpu_limit = 16\nram_limit = 64\n'
    )
    ids = []
    for _ in range(6):
        made = shoal_proc(
            "alloc", "--driver", "test", "--cpu", "1", "--ram", "1", "--lifetime", "1s",
            "-o", "delay_deallocate=0.3",
        )
        assert made.returncode == 0, made.stderr
        ids.append(made.stdout.strip())
    wait_for(lambda: time.sleep(1.1) or True, "the lifetimes to pass")
    runs = [spawn(home, procs, "free", "--expired", "--json") for _ in range(4)]
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert "ERROR" not in out and "is freeing by" not in err
    statuses = {
        r["id"]: r["status"] for r in json.loads(shoal_proc("status", "--all", "--json").stdout)
    }
    assert statuses == {i: "FREED" for i in ids}
