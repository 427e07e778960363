"""Shared timing helpers for the benchmark scripts (wall time of whole processes)."""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

# The floor the CLI benchmarks compare start-up with: a minimal Typer app of the same Typer
# version, two commands, one with an option (what any Typer CLI pays before its work).
FLOOR_APP = """
import typer

app = typer.Typer()


@app.command()
def hello(name: str = "world", as_json: bool = typer.Option(False, "--json")) -> None:
    print(name)


@app.command()
def other() -> None:
    pass


if __name__ == "__main__":
    app()
"""


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


def interleaved_medians(
    cases: dict[str, tuple[Sequence[str], dict[str, str]]], runs: int, warmup: int = 3
) -> dict[str, float]:
    """Median ms per case, sampling the cases round-robin so that machine noise and drift
    (a shared VM's neighbours, CPU frequency) fall on every case alike."""
    for argv, env in cases.values():
        for _ in range(warmup):
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (argv, env) in cases.items():
            start = time.perf_counter()
            done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            samples[name].append((time.perf_counter() - start) * 1000)
            if done.returncode != 0:
                raise SystemExit(
                    f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()}"
                )
    return {name: statistics.median(values) for name, values in samples.items()}


MEASURE = """
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.stderr.write(done.stderr.decode())
print(done.returncode, seconds, peak)
"""


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and peak RSS in MiB of the largest process in the command's tree.

    A fresh measuring process runs the command, so its children's peak is this command's
    alone (and its own start-up is outside the timed span).
    """
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *argv], env=env, capture_output=True, text=True, check=False
    )
    code, seconds, peak = done.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({code}): {done.stderr}")
    return float(seconds), int(peak) // 1024


class Machine:
    """The load on this machine over a span: the 1-minute load average at its start and end,
    and how busy all CPUs were (/proc/stat: every process's work, this run's too)."""

    def __init__(self) -> None:
        self.load = os.getloadavg()[0]
        self.busy, self.total = _cpu_times()

    def since(self) -> str:
        busy, total = _cpu_times()
        share = (busy - self.busy) / max(total - self.total, 1)
        return (
            f"load {self.load:.2f} -> {os.getloadavg()[0]:.2f}, "
            f"{os.cpu_count()} CPUs {share:.0%} busy"
        )


def _cpu_times() -> tuple[int, int]:
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)
