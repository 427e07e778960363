#!/usr/bin/env python3
"""Ledger scaling: `status --json` and `alloc --dry-run` with 10,000 allocations vs none.

Two full ledgers are measured: 10,000 rows of history (9,990 freed, 10 live: a ledger after
months of use) and 10,000 live allocations (every row listed and summed). Target: each stays
within 1.2x of an empty ledger. Run from a regular `pip install .` (not editable).

    python benchmarks/ledger.py [--runs N] [--rows N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import check_installed, interleaved_medians, shoal_command

TARGET_RATIO = 1.2
DRY_RUN = ["alloc", "--driver", "test", "--cpu", "1", "--ram", "1", "--dry-run"]


def fill(home: Path, rows: int, live: int) -> None:
    from drivers.ledger import book as L
    from drivers.paths import ledger_file
    from drivers.spec.types import LabelDefinition, Resources
    from providers.core.settings import Paths
    from providers.core.wire import to_wire

    paths = Paths.from_env({"SHOAL_HOME": str(home)})
    paths.ensure_dir(paths.state_dir)
    ledger = L.Ledger(ledger_file(paths))
    definition = LabelDefinition(driver="test/default", resources=Resources(cpu=1, ram=1))
    for i in range(rows):
        alloc_id = ledger.reserve(
            driver="test/default",
            definition=to_wire(definition),
            resources=definition.resources,
            metadata={"n": str(i)},
            is_remote=False,
            expires=None,
            fits=lambda usage: 1,
        )
        status = L.ALLOCATED if i < live else L.FREED
        ledger.set_status(alloc_id, status, state={"identifier": alloc_id})
    ledger.close()


def cases_for(label: str, home: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    env = {**os.environ, "SHOAL_HOME": str(home)}
    shoal = shoal_command()
    return {
        f"{label}|status --json": ([*shoal, "status", "--json"], env),
        f"{label}|alloc --dry-run": ([*shoal, *DRY_RUN], env),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rows", type=int, default=10_000)
    args = parser.parse_args()
    check_installed()
    cases: dict[str, tuple[list[str], dict[str, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, live in (("empty", None), ("history", 10), ("all live", args.rows)):
            home = Path(tmp) / label.replace(" ", "-")
            home.mkdir()
            if live is not None:
                fill(home, args.rows, live)
            cases.update(cases_for(label, home))
        medians = interleaved_medians(cases, args.runs)
    results: dict[str, dict[str, float]] = {}
    for key, value in medians.items():
        label, command = key.split("|")
        results.setdefault(label, {})[command] = value
    print(f"{args.runs} runs, median wall ms; {args.rows} rows per full ledger")
    header = ("command", "empty", "history", "ratio", "all live", "ratio")
    print("{:18s} {:>8s} {:>9s} {:>6s} {:>9s} {:>6s}".format(*header))
    worst = 0.0
    for command in ("status --json", "alloc --dry-run"):
        empty = results["empty"][command]
        hist = results["history"][command]
        live = results["all live"][command]
        worst = max(worst, hist / empty, live / empty)
        print(
            f"{command:18s} {empty:8.1f} {hist:9.1f} {hist / empty:5.2f}x {live:9.1f} "
            f"{live / empty:5.2f}x"
        )
    verdict = "meets" if worst <= TARGET_RATIO else "MISSES"
    print(f"worst ratio to the empty ledger: {worst:.2f}x ({verdict} the {TARGET_RATIO}x target)")


if __name__ == "__main__":
    main()
