#!/usr/bin/env python3
"""The allocate path where a user pays shoal's start-up several times (issue 29, items 1 and 3).

Process cycle: interleaved rounds of a real `process` allocation's whole life in three shoal
processes, `alloc --driver process --cpu 1 --ram 1 -o entry='sleep 600'` (prints its id),
`status ID` (the table a user reads) and `free ID` (SIGTERM through the supervisor, the
outcome recorded, the workspace removed), each step timed apart; beside it the same life by
the shell's own tools as a reference line (`setsid -f sleep 600`, `ps -p PID`, `kill PID`
and waiting for it to be gone: no checks, no ledger, no supervisor), and a bare
`shoal status --json` (the start-up every step pays). Target: the cycle at most 400 ms, each
step within ~40 ms of `status --json`.

Dry run: `shoal alloc --dry-run --driver process --cpu 1 --ram 1 -o entry=sleep` beside a
minimal Typer app of the same Typer version (`hello --json`, one option: what any Typer
CLI pays before its first line of work) and `python -c pass`. Target: at most 1.6x of the
minimal app. The dry run checks its definition and options (pydantic, the user's choice for
input): the script also times `import pydantic` plus one small model's first validation (a
list and a bounded int), in a process of its own: the part of the dry run that no rewrite
of shoal's own code removes.

Run from a regular `pip install .` (not editable):

    python benchmarks/alloc_path.py [--rounds 20] [--only cycle|dry-run] [--before SHOAL]

`--before SHOAL` times another build (say, a `pip install` of an earlier commit into a venv
of its own) in the same interleaved rounds, on a ledger of its own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import FLOOR_APP, Machine, check_installed, shoal_command

CYCLE_TARGET_MS = 400.0
DRY_RUN_TARGET = 1.6
PYDANTIC_PART = """
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Options(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    entry: list[str]
    cpu: Annotated[int, Field(ge=1)]


Options.model_validate({"entry": ["sleep"], "cpu": 1})
"""


def timed(argv: Sequence[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    ms = (time.perf_counter() - start) * 1000
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return ms, done.stdout


def shoal_cycle(shoal: list[str], env: dict[str, str]) -> dict[str, float]:
    alloc, out = timed(
        [*shoal, "alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "-o",
         "entry=sleep 600"],
        env,
    )  # fmt: skip
    alloc_id = out.split()[0]
    status, table = timed([*shoal, "status", alloc_id], env)
    if "ALLOCATED" not in table:
        raise SystemExit(f"status {alloc_id} did not say ALLOCATED:\n{table}")
    free, _ = timed([*shoal, "free", alloc_id], env)
    return {"alloc": alloc, "status": status, "free": free}


def shell_cycle(env: dict[str, str], tmp: Path) -> dict[str, float]:
    """setsid -f (the workload in a session of its own, its pid written before it execs, as
    shoal's is), ps -p, kill + wait until it is gone."""
    pid_file = tmp / "shell.pid"
    pid_file.unlink(missing_ok=True)
    begin = time.perf_counter()
    subprocess.run(
        ["setsid", "-f", "sh", "-c", f"echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; "
         "exec sleep 600"],
        env=env,
        check=True,
    )  # fmt: skip
    while not pid_file.exists():  # setsid -f returns at its fork: wait for the start
        time.sleep(0.0005)
    start = (time.perf_counter() - begin) * 1000
    pid = pid_file.read_text().strip()
    check, _ = timed(["ps", "-p", pid], env)
    begin = time.perf_counter()
    subprocess.run(["kill", pid], env=env, check=True)
    while Path(f"/proc/{pid}/stat").exists() and " Z " not in _stat(pid):
        time.sleep(0.0005)
    stop = (time.perf_counter() - begin) * 1000
    return {"alloc": start, "status": check, "free": stop}


def _stat(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return " Z "


def summary(values: list[float]) -> str:
    return f"{statistics.median(values):7.1f} ms  ({min(values):.0f}-{max(values):.0f})"


def run_cycle(
    rounds: int, shoal: list[str], env: dict[str, str], tmp: Path, before: list[str] | None
) -> None:
    # The build before, when given, on a ledger of its own (its schema may be older).
    before_env = {**env, "SHOAL_HOME": str(tmp / "before-home")}
    Path(before_env["SHOAL_HOME"]).mkdir(exist_ok=True)
    for _ in range(2):  # warm-up: caches, the ledger's schema, the host's shape
        shoal_cycle(shoal, env)
        shell_cycle(env, tmp)
        if before:
            shoal_cycle(before, before_env)
    machine = Machine()
    walls: dict[str, list[dict[str, float]]] = {"shoal": [], "shell": [], "before": []}
    json_ms: list[float] = []
    parts = ["shoal", "shell", "json", *(["before"] if before else [])]
    for index in range(rounds):
        for part in parts[index % len(parts) :] + parts[: index % len(parts)]:
            if part == "shoal":
                walls["shoal"].append(shoal_cycle(shoal, env))
            elif part == "before" and before:
                walls["before"].append(shoal_cycle(before, before_env))
            elif part == "shell":
                walls["shell"].append(shell_cycle(env, tmp))
            else:
                json_ms.append(timed([*shoal, "status", "--json"], env)[0])
    load = machine.since()
    print(f"process cycle, {rounds} interleaved rounds, median (min-max); {load}")
    totals = {name: [sum(r.values()) for r in runs] for name, runs in walls.items()}
    yardstick = statistics.median(json_ms)
    labels = [("shoal", "shoal alloc/status/free"), ("shell", "setsid/ps/kill")]
    if before:
        labels.append(("before", "the same, shoal before"))
    for name, label in labels:
        steps = " + ".join(
            f"{statistics.median([r[s] for r in walls[name]]):.0f}"
            for s in ("alloc", "status", "free")
        )
        print(f"  {label:28s} {summary(totals[name])}  steps {steps}")
    print(f"  {'shoal status --json':28s} {summary(json_ms)}  (the start-up every step pays)")
    cycle = statistics.median(totals["shoal"])
    worst = max(
        statistics.median([r[s] for r in walls["shoal"]]) - yardstick
        for s in ("alloc", "status", "free")
    )
    ratio = [s / b for s, b in zip(totals["shoal"], totals["shell"], strict=True)]
    verdict = "met" if cycle <= CYCLE_TARGET_MS else "NOT met"
    print(
        f"  cycle {cycle:.0f} ms (target <= {CYCLE_TARGET_MS:.0f} ms: {verdict}); slowest step "
        f"{worst:+.0f} ms over status --json; {statistics.median(ratio):.2f}x of the shell's "
        "reference line"
    )
    if before:
        gain = [s / b for s, b in zip(totals["shoal"], totals["before"], strict=True)]
        print(f"  per round {statistics.median(gain):.2f}x of the build before")


def run_dry_run(
    rounds: int, shoal: list[str], env: dict[str, str], tmp: Path, before: list[str] | None
) -> None:
    floor = tmp / "floor.py"
    floor.write_text(FLOOR_APP)
    part = tmp / "pydantic_part.py"
    part.write_text(PYDANTIC_PART)
    py = sys.executable
    cases = {
        "python -c pass": [py, "-c", "pass"],
        "minimal Typer app": [py, str(floor), "hello", "--json"],
        "import pydantic + a model": [py, str(part)],
        "shoal alloc --dry-run": [
            *shoal, "alloc", "--dry-run", "--driver", "process", "--cpu", "1", "--ram", "1",
            "-o", "entry=sleep",
        ],
    }  # fmt: skip
    if before:
        cases["the same, shoal before"] = [*before, *cases["shoal alloc --dry-run"][len(shoal) :]]
    for argv in cases.values():
        for _ in range(2):
            timed(argv, env)
    machine = Machine()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for index in range(rounds):
        for name in names[index % len(names) :] + names[: index % len(names)]:
            samples[name].append(timed(cases[name], env)[0])
    print(f"alloc --dry-run, {rounds} interleaved rounds, median (min-max); {machine.since()}")
    for name in names:
        print(f"  {name:28s} {summary(samples[name])}")
    ratios = [
        s / f
        for s, f in zip(samples["shoal alloc --dry-run"], samples["minimal Typer app"], strict=True)
    ]
    ratio = statistics.median(ratios)
    verdict = "met" if ratio <= DRY_RUN_TARGET else "NOT met"
    pyd = statistics.median(samples["import pydantic + a model"])
    bare = statistics.median(samples["python -c pass"])
    floor_ms = statistics.median(samples["minimal Typer app"])
    print(
        f"  ratio {ratio:.2f}x of the minimal Typer app (per round; target <= "
        f"{DRY_RUN_TARGET}x: {verdict}); pydantic's import and first model alone add "
        f"{pyd - bare:.0f} ms to a bare interpreter, {(floor_ms + pyd - bare) / floor_ms:.2f}x "
        "of the app before any shoal code"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--only", choices=("cycle", "dry-run"))
    parser.add_argument("--before", metavar="SHOAL", help="another build's shoal, timed alike")
    args = parser.parse_args()
    check_installed()
    import typer

    print(f"typer {typer.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        env = {**os.environ, "SHOAL_HOME": str(home), "NO_COLOR": "1", "COLUMNS": "120"}
        shoal = shoal_command()
        before = [args.before] if args.before else None
        if args.only in (None, "cycle"):
            run_cycle(args.rounds, shoal, env, Path(tmp), before)
        if args.only in (None, "dry-run"):
            run_dry_run(args.rounds, shoal, env, Path(tmp), before)


if __name__ == "__main__":
    main()
