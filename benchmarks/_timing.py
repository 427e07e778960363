"""Shared timing helpers for the benchmark scripts (wall time of whole processes)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence


def shoal_command() -> list[str]:
    """The installed `shoal` beside this interpreter, else `python -m cli`."""
    beside = os.path.join(os.path.dirname(sys.executable), "shoal")
    if os.path.exists(beside):
        return [beside]
    found = shutil.which("shoal")
    return [found] if found else [sys.executable, "-m", "cli"]


def check_installed() -> None:
    import cli

    where = os.path.dirname(cli.__file__)
    if "site-packages" not in where:
        print(
            f"warning: cli is imported from {where}, not an installed copy; run `pip install .` "
            "first (PYTHONDONTWRITEBYTECODE=1 makes source runs recompile every time)",
            file=sys.stderr,
        )


def median_ms(argv: Sequence[str], env: dict[str, str], runs: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
        )
        samples.append((time.perf_counter() - start) * 1000)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}")
    return statistics.median(samples)
