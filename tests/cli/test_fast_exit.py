"""The console script leaves without the interpreter's teardown (cli.main.run): what exit
must still do is done, and the exit status is the command's."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

Shoal = Callable[..., subprocess.CompletedProcess[str]]


def test_the_ledger_is_closed_at_exit_leaving_no_wal(shoal_proc: Shoal, home: Path) -> None:
    """Closed by its atexit function, the ledger's last connection checkpoints the WAL into
    the file and removes -wal and -shm: nothing is left for a copy or a backup to miss."""
    made = shoal_proc("alloc", "--driver", "test", "--cpu", "1", "--ram", "1", "--json")
    assert made.returncode == 0, made.stderr
    alloc_id = json.loads(made.stdout)["id"]
    state = home / "state"
    assert sorted(p.name for p in state.glob("ledger.sqlite*")) == ["ledger.sqlite"]
    listed = shoal_proc("status", "--json")
    assert [row["id"] for row in json.loads(listed.stdout)] == [alloc_id]
    freed = shoal_proc("free", alloc_id)
    assert freed.returncode == 0 and f"{alloc_id}: freed" in freed.stderr
    assert sorted(p.name for p in state.glob("ledger.sqlite*")) == ["ledger.sqlite"]


def test_exit_statuses_and_output_survive_the_fast_exit(shoal_proc: Shoal) -> None:
    usage = shoal_proc("alloc", "--driver", "test", "--ram", "1")
    assert usage.returncode == 2 and "resources.cpu" in usage.stderr
    unknown = shoal_proc("status", "nope-123", "--json")
    assert unknown.returncode == 1 and unknown.stderr.startswith("shoal: error:")
    # A large JSON answer reaches a slow pipe whole: stdout is flushed before the exit.
    regions = shoal_proc("regions", "--json")
    assert regions.returncode == 0 and json.loads(regions.stdout)
