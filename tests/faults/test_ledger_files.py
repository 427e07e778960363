"""Ledger files shoal did not make itself: an empty file in place, a read-only disk."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.test_full_disk import one_clear_line, shoal


def test_an_empty_ledger_file_is_adopted_private_and_in_wal_mode(cli, home: Path) -> None:
    ledger = home / "state" / "ledger.sqlite"
    ledger.parent.mkdir(parents=True)
    ledger.touch(mode=0o644)  # as a run killed at its first moment, or a `touch`, leaves it
    ledger.chmod(0o644)
    assert cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1").exit_code == 0
    assert stat.S_IMODE(ledger.stat().st_mode) == 0o600
    db = sqlite3.connect(ledger)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db.close()


def test_a_ledger_made_readable_to_others_is_made_private_again(cli, home: Path) -> None:
    assert cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1").exit_code == 0
    ledger = home / "state" / "ledger.sqlite"
    ledger.chmod(0o644)
    assert cli("status").exit_code == 0
    assert stat.S_IMODE(ledger.stat().st_mode) == 0o600


@pytest.fixture
def read_only_home(tmp_path: Path) -> Iterator[Path]:
    """A home whose ledger file (only) is read-only, through a read-only bind mount: root
    ignores file modes, so chmod would not make it read-only for the root CI runs as."""
    import os

    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root")
    home = tmp_path / "home"
    home.mkdir()
    made = shoal(home, "alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert made.returncode == 0, made.stderr
    ledger = home / "state" / "ledger.sqlite"
    bind = subprocess.run(["mount", "--bind", str(ledger), str(ledger)], capture_output=True)
    if bind.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {bind.stderr.decode().strip()}")
    try:
        remount = subprocess.run(
            ["mount", "-o", "remount,ro,bind", str(ledger)], capture_output=True, text=True
        )
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only: {remount.stderr.strip()}")
        yield home
    finally:
        subprocess.run(["umount", "-l", str(ledger)], check=False)


@pytest.mark.slow
def test_a_read_only_ledger_is_a_one_line_error_with_the_file_and_the_fix(
    read_only_home: Path,
) -> None:
    run = shoal(read_only_home, "alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
    assert run.returncode == 1, run.stderr
    one_clear_line(run)
    assert "ledger.sqlite" in run.stderr and "read-only" in run.stderr
    assert "SHOAL_HOME" in run.stderr
    listed = shoal(read_only_home, "status", "--json")  # reading still works
    assert listed.returncode == 0, listed.stderr
