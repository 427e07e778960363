"""Help text documents every environment variable and the exit codes."""

from __future__ import annotations

import pytest


def test_top_level_help_shows_env_vars_commands_and_exit_codes(cli) -> None:
    result = cli("--help")
    assert result.exit_code == 0
    for text in ("SHOAL_HOME", "SHOAL_CONFIG", "regions", "alloc", "free", "status", "130"):
        assert text in result.stdout, text


@pytest.mark.parametrize(
    ("command", "env_var"),
    [("regions", "SHOAL_PROVIDER"), ("resources", "SHOAL_PROVIDER"), ("alloc", "SHOAL_DRIVER")],
)
def test_command_help_shows_its_env_var(cli, command: str, env_var: str) -> None:
    result = cli(command, "--help")
    assert result.exit_code == 0
    assert f"env var: {env_var}" in result.stdout


def test_no_arguments_prints_help_and_usage_exit_code(cli) -> None:
    result = cli()
    assert result.exit_code == 2
    assert "Usage" in result.stdout + result.stderr


def test_every_environment_variable_shows_in_some_help(cli) -> None:
    from providers import env

    helps = "".join(
        cli(*args, "--help").stdout
        for args in [(), ("regions",), ("pricing",), ("alloc",), ("image", "pull")]
    )
    helps = " ".join(helps.split())  # Rich wraps long lines
    names = {v for k, v in vars(env).items() if k.startswith("ENV_")}
    missing = sorted(n for n in names if n not in helps)
    assert missing == []
