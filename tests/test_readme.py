"""The README's contract: its first two command lines, exit codes and env vars stay true."""

from __future__ import annotations

import re

from cli.exit_codes import ExitCode
from providers.core import env
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def test_readme_starts_with_install_and_test_command_lines() -> None:
    block = re.search(r"```sh\n(.*?)```", README, re.S)
    assert block is not None and README.index(block.group(0)) < README.index("\n## ")
    first, second = block.group(1).strip().splitlines()
    assert first == "pip install . && shoal resources"
    assert second.startswith("pip install '.[test]' && ") and second.endswith("python -m pytest")


def test_ci_runs_the_readme_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "grep -m1 \"^pip install '\\.\\[test\\]'\" README.md" in ci
    assert 'eval "$test_command"' in ci


def test_exit_code_table_matches_the_enum() -> None:
    documented = {int(code) for code in re.findall(r"^\| (\d+) \|", README, re.M)}
    assert documented == {int(code) for code in ExitCode}


def test_every_env_var_is_documented() -> None:
    names = {value for key, value in vars(env).items() if key.startswith("ENV_")}
    for name in names:
        assert f"`{name}`" in README, name


# -- the tour ---------------------------------------------------------------------------------

STDERR_MARK = re.compile(r"\s{2,}\(stderr\)$")


def tour() -> list[tuple[str, list[str], list[str]]]:
    """(command, stdout lines, stderr lines) for each `$ command` of the README's tour."""
    section = README[README.index("## Tour") : README.index("## Commands")]
    block = re.search(r"```\n(.*?)```", section, re.S)
    assert block is not None
    steps: list[tuple[str, list[str], list[str]]] = []
    for line in block.group(1).splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], [], []))
        elif line.strip() and steps:
            if STDERR_MARK.search(line):
                steps[-1][2].append(STDERR_MARK.sub("", line))
            else:
                steps[-1][1].append(line)
    return steps


def shape(lines: list[str]) -> list[str]:
    """What must match across machines: words and layout, not numbers, ids, hosts, times."""
    out = []
    for line in lines:
        if line and set(line.strip()) == {"─"}:
            out.append("RULE")
            continue
        line = re.sub(r"process-[0-9a-f]{8}", "process-ID", line)
        line = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z", "TIME", line)
        line = re.sub(r"node=\S+", "node=HOST", line)
        line = re.sub(r"(?<![\w.])\d+(\.\d+)?[smhd]?(?![\w.])", "N", line)
        out.append(" ".join(line.split()))
    return out


def test_every_command_of_the_tour_prints_what_the_readme_shows(tmp_path) -> None:
    import subprocess
    import sys

    from tests.conftest import shoal_env

    home = tmp_path / "home"
    home.mkdir()
    # The tour's machine has 2 vCPUs: with the same limit, the second alloc is refused here too.
    (home / "config.toml").write_text('[drivers."process/default"]\ncpu_limit = 2\n')
    env = shoal_env(home)
    env.pop("COLUMNS")  # piped: tables take their natural width, as in the README
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "shoal"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} -m cli "$@"\n')
    launcher.chmod(0o755)
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    ids: dict[str, str] = {}
    try:
        for command, stdout, stderr in tour():
            for shown, real in ids.items():
                command = command.replace(shown, real)
            run = subprocess.run(
                ["bash", "-c", command], env=env, capture_output=True, text=True, timeout=60
            )
            shown_id = re.fullmatch(r"process-[0-9a-f]{8}", stdout[0]) if stdout else None
            if command.startswith("shoal alloc") and shown_id is not None:
                ids[shown_id.group(0)] = run.stdout.strip()
            assert shape(run.stdout.splitlines()) == shape(stdout), (command, run.stdout)
            assert shape(run.stderr.splitlines()) == shape(stderr), (command, run.stderr)
    finally:
        for real in ids.values():
            subprocess.run(["bash", "-c", f"shoal free {real}"], env=env, capture_output=True)


def test_readme_links_to_headings_that_exist() -> None:
    headings = {
        re.sub(r"[^a-z0-9 -]", "", h.lower()).replace(" ", "-")
        for h in re.findall(r"^#+ (.+)$", README, re.M)
    }
    for target in re.findall(r"\]\(#([^)]+)\)", README):
        assert target in headings, target
