"""The README's contract: its first two command lines, exit codes and env vars stay true."""

from __future__ import annotations

import re

from cli.exit_codes import ExitCode
from providers import env
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
