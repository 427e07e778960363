#!/usr/bin/env python3
"""`shoal alloc -> status -> free` of a minimal container, beside `podman run --rm IMAGE true`.

Starts its own `podman system service` on a socket of its own and imports its own busybox
image (the helpers of tests/drivers/container/conftest.py), then runs --cycles cycles (default
20) sequentially and again --parallel (default 4) at a time, for shoal and for the engine's own
CLI, in the same run. A shoal cycle is three processes (alloc, status, free) of the installed
`shoal`; a podman cycle is one `podman run --rm` that creates, starts, waits for and removes
its container. Target: shoal at most 1.2x of the engine's CLI.

Run from a regular `pip install .` of the repository:

    python benchmarks/container.py [--cycles 20] [--parallel 4]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the tests' podman helpers; appended, so that `cli` still comes from the install
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import check_installed, shoal_command

# Traps SIGTERM: busybox sleep as PID 1 would ignore it and make every free wait the grace.
SCRIPT = 'trap "exit 0" TERM; sleep 60 & wait'
ENTRY = shlex.join(["sh", "-c", SCRIPT])
# 4 parallel cycles of --cpu 1 on a 2-core engine: hand out more vCPUs than it has, since the
# point here is the engine round trips, not capacity refusals.
CONFIG = '[drivers."container/default"]\ncpu_limit = 64\n'


def run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def shoal_cycle(env: dict[str, str], image: str) -> float:
    shoal = shoal_command()
    start = time.perf_counter()
    out = run(
        [*shoal, "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
         "-o", f"image={image}", "-o", f"entry={ENTRY}", "--json"],
        env,
    )  # fmt: skip
    alloc_id = json.loads(out)["id"]
    status = json.loads(run([*shoal, "status", alloc_id, "--json"], env))
    if status["driver_status"] != "ALLOCATED":
        raise SystemExit(f"{alloc_id}: driver reports {status['driver_status']}")
    run([*shoal, "free", alloc_id], env)
    return time.perf_counter() - start


def podman_cycle(env: dict[str, str], binary: str, image: str) -> float:
    start = time.perf_counter()
    run([binary, "run", "--rm", image, "true"], env)
    return time.perf_counter() - start


def podman_lifecycle(env: dict[str, str], binary: str, image: str) -> float:
    """The same lifecycle as shoal's cycle through the engine's CLI: start detached with the
    same limits, inspect, stop with grace and remove."""
    start = time.perf_counter()
    cid = run(
        [binary, "run", "-d", "--cpus", "1", "--memory", "1g", "--memory-swap", "1g",
         "--label", "dev.shoal.managed-by=shoal", image, "sh", "-c", SCRIPT],
        env,
    ).strip()  # fmt: skip
    run([binary, "inspect", cid], env)
    run([binary, "rm", "-f", "-v", "-t", "10", cid], env)
    return time.perf_counter() - start


def measure(cycle: Callable[[], float], cycles: int, parallel: int) -> tuple[list[float], float]:
    """Per-cycle seconds and the wall total, `parallel` at a time (1 = sequential)."""
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        times = list(pool.map(lambda _: cycle(), range(cycles)))
    return times, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    check_installed()
    from tests.drivers.container.conftest import EngineUnavailable, start_podman

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-ctr-"))
    try:
        podman = start_podman(work)
    except EngineUnavailable as exc:
        shutil.rmtree(work, ignore_errors=True)
        raise SystemExit(f"no container engine: {exc}") from None
    before = podman.shoal_containers()
    try:
        home = work / "home"
        home.mkdir()
        (home / "config.toml").write_text(CONFIG)
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")},
            **podman.env,
            "SHOAL_HOME": str(home),
        }

        def shoal() -> float:
            return shoal_cycle(env, podman.image)

        def engine() -> float:
            return podman_cycle(env, podman.binary, podman.image)

        def lifecycle() -> float:
            return podman_lifecycle(env, podman.binary, podman.image)

        for warm in (shoal, engine, lifecycle, shoal, engine, lifecycle):
            warm()
        results = {}
        for mode, parallel in (("sequential", 1), (f"parallel x{args.parallel}", args.parallel)):
            results[("podman run --rm", mode)] = measure(engine, args.cycles, parallel)
            results[("podman run -d/inspect/rm", mode)] = measure(lifecycle, args.cycles, parallel)
            results[("shoal alloc/status/free", mode)] = measure(shoal, args.cycles, parallel)
        report(args.cycles, results)
    finally:
        podman.cleanup(before)
        podman.stop()
        shutil.rmtree(work, ignore_errors=True)


def report(cycles: int, results: dict[tuple[str, str], tuple[list[float], float]]) -> None:
    print(f"{cycles} cycles per row; per-cycle median and wall total")
    for (who, mode), (times, total) in results.items():
        median = statistics.median(times) * 1000
        print(f"  {mode:12} {who:24} median {median:7.0f} ms   total {total:6.2f} s")
    for mode in dict.fromkeys(m for _, m in results):
        ours = results[("shoal alloc/status/free", mode)]
        theirs = results[("podman run --rm", mode)]
        ratio = statistics.median(ours[0]) / statistics.median(theirs[0])
        total_ratio = ours[1] / theirs[1]
        verdict = "ok" if max(ratio, total_ratio) <= 1.2 else "OVER"
        print(
            f"  {mode:12} ratio {ratio:.2f}x median, {total_ratio:.2f}x total of podman run "
            f"--rm (target <= 1.2x): {verdict}"
        )
        alike = results[("podman run -d/inspect/rm", mode)]
        print(
            f"  {mode:12} ratio {statistics.median(ours[0]) / statistics.median(alike[0]):.2f}x "
            f"median, {ours[1] / alike[1]:.2f}x total of the same lifecycle by podman's CLI"
        )


if __name__ == "__main__":
    main()
