"""A container's supervisor never outlives its allocation: with the engine gone, it leaves
once the ledger says the allocation is over (or the ledger itself is gone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from drivers.ledger.book import FREED, Ledger
from drivers.spec.types import Resources
from drivers.supervisor import supervise


def run_supervisor(spec: dict[str, object]) -> subprocess.CompletedProcess[bytes]:
    """A container-mode supervisor whose engine is nowhere, without a deadline."""
    spec = {"mode": "container", "container": "c1", "deadline": None, "grace": 1, **spec}
    return subprocess.run(
        [sys.executable, "-I", "-S", supervise.__file__],
        input=json.dumps(spec).encode(),
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_without_its_ledger_it_leaves_although_the_engine_is_away(tmp_path: Path) -> None:
    ran = run_supervisor(
        {
            "address": f"unix://{tmp_path}/no-engine.sock",
            "ledger": str(tmp_path / "gone" / "ledger.sqlite"),
            "allocation": "container-1",
        }
    )
    assert ran.returncode == 0, ran.stderr


@pytest.mark.parametrize("freed", [True, False])
def test_a_freed_allocation_lets_it_leave(tmp_path: Path, freed: bool) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite")
    alloc_id = ledger.reserve(
        driver="container", definition={}, resources=Resources(cpu=1, ram=1), metadata={},
        is_remote=False, expires=None, fits=lambda usage: 1,
    )  # fmt: skip
    ledger.set_status(alloc_id, FREED if freed else "FAILED")
    ledger.close()
    ran = run_supervisor(
        {
            "address": f"unix://{tmp_path}/no-engine.sock",
            "ledger": str(tmp_path / "ledger.sqlite"),
            "allocation": alloc_id,
        }
    )
    assert ran.returncode == 0, ran.stderr


def test_a_live_allocation_keeps_it_watching(tmp_path: Path) -> None:
    """The control: an allocation still held keeps its supervisor through an engine restart."""
    ledger = Ledger(tmp_path / "ledger.sqlite")
    alloc_id = ledger.reserve(
        driver="container", definition={}, resources=Resources(cpu=1, ram=1), metadata={},
        is_remote=False, expires=None, fits=lambda usage: 1,
    )  # fmt: skip
    ledger.set_status(alloc_id, "ALLOCATED")
    ledger.close()
    assert supervise.still_held({"ledger": str(tmp_path / "ledger.sqlite"), "allocation": alloc_id})
