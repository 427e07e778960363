#!/usr/bin/env python3
"""`shoal alloc -> status -> free` of a container, beside the same lifecycle by podman's CLI.

Starts its own `podman system service` on a socket of its own and imports its own busybox
image (the helpers of tests/drivers/container/conftest.py), then runs interleaved rounds of
three kinds of cycle, sequentially and then --parallel (default 4) at a time:

- shoal: `shoal alloc --json` (three processes in all: alloc, `status ID --json`, `free ID`)
  of the installed `shoal`, with the entry, limits and grace below;
- the same lifecycle by podman's CLI, what a user would type for the same work:
  `podman run -d` of the same entry with the same limits, labels, hostname, environment,
  MAC and stop timeout, `podman inspect`, `podman rm -f -t GRACE` (GRACE: the grace shoal's
  `free` gives, so both stop it the same way: SIGTERM, then SIGKILL after GRACE);
- `podman run --rm IMAGE true`, a reference line only: it runs nothing that lasts, inspects
  nothing and stops nothing;
- with --before SHOAL, another shoal executable (an install of an earlier commit) doing the
  shoal cycle in the same rounds: a before/after pair on a shared machine.

Each round runs one cycle of each kind (--parallel of each at a time in the parallel part),
in an order that rotates from round to round, so that machine noise and drift fall on every
kind alike. Printed per kind: median, quartiles and extremes of the cycles (of the batches in
the parallel part); per round, shoal's time over the lifecycle's in that same round, with its
quartiles; in the sequential part the CPU time (user + system) of each cycle's own processes
(shoal's three or podman's CLI; not the engine's, which serves both, nor the detached
supervisor's); the CPU time of the `podman system service` during each batch ("engine": it
serves shoal's requests and the supervisors' waits, while podman's CLI does its engine work
in its own process, counted in "cpu"); and the machine's load during each part. Targets
(issue 29): shoal at most 1.5x the lifecycle sequentially and four at a time, both by the
median.

The entry traps SIGTERM and exits at once, as a real service does: a shell as PID 1 would
ignore SIGTERM and make both sides wait the whole grace.

Run from a regular `pip install .` of the repository:

    python benchmarks/container.py [--rounds 20] [--parallel-rounds 10] [--parallel 4]
        [--before SHOAL]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the tests' podman helpers; appended, so that `cli` still comes from the install
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import Machine, check_installed, shoal_command

SCRIPT = 'trap "exit 0" TERM; sleep 60 & wait'
ENTRY = shlex.join(["sh", "-c", SCRIPT])
GRACE = 10  # shoal's default grace_seconds, given to both sides
# 4 parallel cycles of --cpu 1 on a 2-core engine: hand out more vCPUs than it has, since the
# point here is the engine round trips, not capacity refusals.
CONFIG = f'[drivers."container/default"]\ncpu_limit = 64\ngrace_seconds = {GRACE}\n'
TARGETS = {"sequential": 1.5, "parallel": 1.5}
SHOAL = "shoal alloc/status/free"
BEFORE = "shoal before (--before)"
LIFECYCLE = "podman run -d/inspect/rm -f"
RUN_RM = "podman run --rm true"


def run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr}")
    return done.stdout


def shoal_cycle(env: dict[str, str], image: str, shoal: list[str]) -> float:
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


def lifecycle_cycle(env: dict[str, str], binary: str, image: str) -> float:
    """What shoal asks of the engine, said to podman's CLI: the container shoal creates (its
    limits, labels, hostname, environment, MAC and stop timeout), its inspection, and its
    stop with the same grace and removal with its anonymous volumes."""
    tag = f"bench-{random.randrange(16**8):08x}"
    mac = "02:" + ":".join(f"{random.randrange(256):02x}" for _ in range(5))
    start = time.perf_counter()
    cid = run(
        [binary, "run", "-d", "--cpus", "1", "--memory", "1g", "--memory-swap", "1g",
         "--label", "dev.shoal.managed-by=shoal", "--label", f"dev.shoal.allocation={tag}",
         "--hostname", f"shoal-{tag}", "--env", f"SHOAL_ALLOCATION_ID={tag}",
         "--mac-address", mac, "--stop-timeout", str(GRACE), image, "sh", "-c", SCRIPT],
        env,
    ).strip()  # fmt: skip
    run([binary, "inspect", cid], env)
    run([binary, "rm", "-f", "-v", "-t", str(GRACE), cid], env)
    return time.perf_counter() - start


def run_rm_cycle(env: dict[str, str], binary: str, image: str) -> float:
    start = time.perf_counter()
    run([binary, "run", "--rm", image, "true"], env)
    return time.perf_counter() - start


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` (all its threads), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batch(
    cycle: Callable[[], float], parallel: int, engine: Callable[[], float]
) -> tuple[float, float, float]:
    """`parallel` cycles at once: the batch's wall seconds, its processes' CPU seconds and the
    engine's CPU seconds meanwhile."""
    cpu, engine_cpu = children_cpu(), engine()
    start = time.perf_counter()
    if parallel == 1:
        cycle()
    else:
        with ThreadPoolExecutor(parallel) as pool:
            list(pool.map(lambda _: cycle(), range(parallel)))
    return time.perf_counter() - start, children_cpu() - cpu, engine() - engine_cpu


def idle_machine(seconds: float = 3.0) -> str:
    """How busy the machine is with this benchmark idle: other people's work."""
    machine = Machine()
    time.sleep(seconds)
    return f"before the rounds, idle for {seconds:.0f} s: {machine.since()}"


Measured = tuple[dict[str, list[float]], dict[str, list[float]], dict[str, list[float]]]


def measure(
    cycles: dict[str, Callable[[], float]], rounds: int, parallel: int, engine: Callable[[], float]
) -> Measured:
    """Per kind, the wall seconds of each round's batch, its CPU seconds and the engine's; the
    kinds take turns within each round, in an order rotated round by round."""
    walls: dict[str, list[float]] = {kind: [] for kind in cycles}
    cpus: dict[str, list[float]] = {kind: [] for kind in cycles}
    engines: dict[str, list[float]] = {kind: [] for kind in cycles}
    kinds = list(cycles)
    for r in range(rounds):
        turn = kinds[r % len(kinds) :] + kinds[: r % len(kinds)]
        for kind in turn:
            wall, cpu, engine_cpu = batch(cycles[kind], parallel, engine)
            walls[kind].append(wall)
            cpus[kind].append(cpu)
            engines[kind].append(engine_cpu)
    return walls, cpus, engines


def quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def report(
    part: str,
    measured: Measured,
    parallel: int,
    machine: str,
) -> None:
    walls, cpus, engines = measured
    what = "cycle" if parallel == 1 else f"batch of {parallel}"
    print(f"{part}: {len(walls[SHOAL])} interleaved rounds, ms per {what}; {machine}")
    print(
        f"  {'':28} {'median':>7} {'q1':>7} {'q3':>7} {'min':>7} {'max':>7} {'cpu':>7} "
        f"{'engine':>7}"
    )
    for kind, values in walls.items():
        q1, median, q3 = (v * 1000 for v in quartiles(values))
        low, high = min(values) * 1000, max(values) * 1000
        cpu = statistics.median(cpus[kind]) * 1000
        engine = statistics.median(engines[kind]) * 1000
        print(
            f"  {kind:28} {median:7.0f} {q1:7.0f} {q3:7.0f} {low:7.0f} {high:7.0f} {cpu:7.0f} "
            f"{engine:7.0f}"
        )
    target = TARGETS["sequential" if parallel == 1 else "parallel"]
    ours = statistics.median(walls[SHOAL])
    paired = [s / b for s, b in zip(walls[SHOAL], walls[LIFECYCLE], strict=True)]
    q1, mid, q3 = quartiles(paired)
    ratio = ours / statistics.median(walls[LIFECYCLE])
    print(
        f"  shoal / the same lifecycle by podman's CLI: {ratio:.2f}x by the medians "
        f"(per round: median {mid:.2f}x, quartiles {q1:.2f}-{q3:.2f}x); target <= "
        f"{target}x: {'met' if ratio <= target else 'NOT MET'}"
    )
    reference = ours / statistics.median(walls[RUN_RM])
    print(f"  shoal / podman run --rm true (reference only): {reference:.2f}x")
    if BEFORE in walls:
        was = statistics.median(walls[BEFORE])
        paired = [s / b for s, b in zip(walls[SHOAL], walls[BEFORE], strict=True)]
        print(
            f"  shoal before: {was / statistics.median(walls[LIFECYCLE]):.2f}x of the lifecycle; "
            f"now {ours / was:.2f}x of before (per round: median {statistics.median(paired):.2f}x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="sequential rounds")
    parser.add_argument("--parallel-rounds", type=int, default=10)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument(
        "--before", metavar="SHOAL", help="another shoal executable, timed in the same rounds"
    )
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
        shoal = shoal_command()
        cycles: dict[str, Callable[[], float]] = {
            SHOAL: lambda: shoal_cycle(env, podman.image, shoal),
            LIFECYCLE: lambda: lifecycle_cycle(env, podman.binary, podman.image),
            RUN_RM: lambda: run_rm_cycle(env, podman.binary, podman.image),
        }
        if args.before:
            earlier = [args.before]
            cycles[BEFORE] = lambda: shoal_cycle(env, podman.image, earlier)
        for _ in range(2):  # warm: page cache, the engine's totals cache, podman's storage
            for cycle in cycles.values():
                cycle()
        print(f"shoal: {' '.join(shoal)}; podman: {podman.run('--version').strip()}")
        print(f"entry: {ENTRY}; grace {GRACE} s on both sides; --cpu 1 --ram 1")
        print(idle_machine())
        assert podman.proc is not None
        service = podman.proc.pid
        machine = Machine()
        sequential = measure(cycles, args.rounds, 1, lambda: process_cpu(service))
        report("sequential", sequential, 1, machine.since())
        machine = Machine()
        parallel = measure(
            cycles, args.parallel_rounds, args.parallel, lambda: process_cpu(service)
        )
        report(f"parallel x{args.parallel}", parallel, args.parallel, machine.since())
    finally:
        podman.cleanup(before)
        podman.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
