#!/usr/bin/env python3
"""Cold start of `shoal` beside the framework floor.

Prints the median wall time of `shoal --help`, `regions --json`, `resources --json` and
`status --json`, of a minimal Typer app of the same Typer version (the floor: its `--help`,
and a command with one option), and of `python -c pass`; then shoal's overhead over the floor.
The JSON commands run again with a config file: `+config` has [aws], [kubernetes] and a
driver table (which the local provider does not read, so nothing is validated), `+[local]`
adds the [local] table they do read (validated: pydantic is imported).
Target: at most 30 ms over the floor. Run from a regular `pip install .` (not editable).

    python benchmarks/cold_start.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import FLOOR_APP, check_installed, interleaved_medians, shoal_command

TARGET_MS = 30.0


CONFIG = """
[aws]
ttl_hours = 12
default_region = "eu-west-1"

[kubernetes]
pool_label = "team"

[drivers."process/dev"]
grace_seconds = 5
"""
LOCAL = """
[local]
reserve_cpu = 1
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    check_installed()
    import typer

    with tempfile.TemporaryDirectory() as tmp:
        homes = {"": "", " +config": CONFIG, " +[local]": CONFIG + LOCAL}
        envs: dict[str, dict[str, str]] = {}
        for suffix, config in homes.items():
            home = Path(tmp) / f"home{len(envs)}"
            home.mkdir()
            if config:
                (home / "config.toml").write_text(config)
            envs[suffix] = {**os.environ, "SHOAL_HOME": str(home)}
        env = envs[""]
        floor = Path(tmp) / "floor.py"
        floor.write_text(FLOOR_APP)
        shoal = shoal_command()
        py = sys.executable
        cases: dict[str, tuple[list[str], str, dict[str, str]]] = {
            "shoal --help": (["--help"], "floor --help", env)
        }
        for suffix, home_env in envs.items():
            for argv in (["regions", "--json"], ["resources", "--json"], ["status", "--json"]):
                name = f"shoal {' '.join(argv)}{suffix}"
                cases[name] = (argv, "floor hello --json", home_env)
        runs: dict[str, tuple[Sequence[str], dict[str, str]]] = {
            "python -c pass": ([py, "-c", "pass"], env),
            "floor --help": ([py, str(floor), "--help"], env),
            "floor hello --json": ([py, str(floor), "hello", "--json"], env),
            **{name: ([*shoal, *argv], case_env) for name, (argv, _, case_env) in cases.items()},
        }
        figures = interleaved_medians(runs, args.runs)

    print(f"typer {typer.__version__}, python {sys.version.split()[0]}, {args.runs} runs, median")
    print(f"{'command':36s} {'ms':>8s} {'floor ms':>9s} {'over':>8s} {'ratio':>6s}")
    for name in ("python -c pass", "floor --help", "floor hello --json"):
        print(f"{name:36s} {figures[name]:8.1f}")
    worst = 0.0
    for name, (_, floor_name, _) in cases.items():
        over = figures[name] - figures[floor_name]
        if "[local]" not in name:  # checking a table is the price of having one: said below
            worst = max(worst, over)
        ratio = figures[name] / figures[floor_name]
        print(
            f"{name:36s} {figures[name]:8.1f} {figures[floor_name]:9.1f} {over:+8.1f} {ratio:6.2f}x"
        )
    checking = max(
        figures[name] - figures[name.removesuffix(" +[local]")]
        for name in cases
        if name.endswith(" +[local]")
    )
    print(f"checking a table the command reads (+[local]): up to {checking:+.1f} ms")
    verdict = "meets" if worst <= TARGET_MS else "MISSES"
    print(
        f"worst overhead over the floor: {worst:+.1f} ms ({verdict} the {TARGET_MS:.0f} ms target)"
    )


if __name__ == "__main__":
    main()
