"""Completion scripts: generated from the app, committed, never stale, and what each shell
offers is what the command takes (nothing of another command's), with descriptions intact."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli.completion import GENERATORS, SHELLS
from tests.cli.shells import (
    COMPLETIONS,
    bash_complete,
    fake_shoal,
    fish_complete,
    shell_env,
    zsh_complete,
)


def _root() -> Any:
    import typer.main

    from cli.app import app

    return typer.main.get_command(app)


def _paths() -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = [()]
    for name, command in sorted(_root().commands.items()):
        paths.append((name,))
        paths += [(name, sub) for sub in sorted(getattr(command, "commands", {}))]
    return paths


def _command(path: tuple[str, ...]) -> Any:
    command = _root()
    for name in path:
        command = command.commands[name]
    return command


def _long_options(path: tuple[str, ...]) -> set[str]:
    params = _command(path).params
    names = {n for p in params if p.param_type_name == "option" for n in p.opts + p.secondary_opts}
    return {n for n in names | {"--help"} if n.startswith("--")}


def _needs(shell: str) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed (.ci/run installs it)")


@pytest.fixture
def env(home: Path, tmp_path: Path) -> dict[str, str]:
    """An empty SHOAL_HOME: no machine-local values, only what the scripts know."""
    fake_shoal(tmp_path / "bin")
    return shell_env(home, tmp_path / "bin")


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_committed_script_matches_the_app(shell: str) -> None:
    committed = (COMPLETIONS / SHELLS[shell]).read_text()
    assert committed == GENERATORS[shell](), (
        f"completions/{SHELLS[shell]} is stale: run `python -m cli.completion` and commit"
    )


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_script_is_valid_shell_syntax(shell: str) -> None:
    _needs(shell)
    done = subprocess.run(
        [shell, "-n", str(COMPLETIONS / SHELLS[shell])], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_bash_completes_subcommands_options_and_values(env: dict[str, str]) -> None:
    assert set(bash_complete("shoal re", env)) == {"regions", "resources"}
    assert "resources" in bash_complete("shoal res", env)
    assert "--dry-run" in bash_complete("shoal alloc --dr", env)
    assert bash_complete("shoal --home /tmp/x types --so", env) == ["--sort"]
    assert bash_complete("shoal alloc --driver pro", env) == ["process"]
    assert bash_complete("shoal alloc --driver pod", env) == ["podman"]
    assert bash_complete("shoal pricing --provider ", env) == [
        "aws",
        "azure",
        "gcp",
        "kubernetes",
        "local",
    ]
    # A group offers its subcommands; its options come with a dash.
    assert bash_complete("shoal image ", env) == ["list", "prune", "pull", "rm"]
    assert bash_complete("shoal image -", env) == ["--help", "-h"]
    assert "--sum" in bash_complete("shoal image pull --s", env)
    assert bash_complete("shoal catalog export --prov", env) == ["--provider"]
    # bash splits `--driver=pro` at the `=`; the value is still --driver's.
    assert bash_complete("shoal alloc --driver = pro", env) == ["process"]


@pytest.mark.parametrize("path", _paths(), ids=lambda p: " ".join(p) or "shoal")
def test_bash_offers_exactly_the_commands_own_options(env: dict[str, str], path: tuple) -> None:
    line = " ".join(("shoal", *path, "--"))
    assert set(bash_complete(line, env)) == _long_options(path)


def test_no_provider_option_where_the_command_has_none(env: dict[str, str]) -> None:
    assert "--provider" not in bash_complete("shoal free --", env)
    assert "--provider" not in bash_complete("shoal free --p", env)
    # An option's values belong to the command: `-p` is a provider only where it is one.
    assert bash_complete("shoal free --remote ", env)[:1] == ["aws"]
    assert bash_complete("shoal status --output ", env) == ["table", "wide", "json", "yaml", "name"]
    assert bash_complete("shoal task test-1 snapshot --output ", env) == ["json", "yaml"]
    # catalog export's --file: nothing offered, so bash falls back to files.
    assert bash_complete("shoal catalog export --file ", env) == []


def test_bash_leaves_file_arguments_to_file_completion(env: dict[str, str]) -> None:
    assert bash_complete("shoal alloc ", env) == []
    assert bash_complete("shoal catalog import ", env) == []


def test_fish_completes_subcommands_options_and_values(env: dict[str, str]) -> None:
    _needs("fish")
    assert list(fish_complete("shoal res", env)) == ["resources"]
    assert set(fish_complete("shoal alloc --dr", env)) == {"--driver", "--dry-run"}
    assert list(fish_complete("shoal pricing --provider ", env)) == [
        "aws",
        "azure",
        "gcp",
        "kubernetes",
        "local",
    ]
    assert list(fish_complete("shoal image ", env)) == ["list", "prune", "pull", "rm"]
    assert "--sum" in fish_complete("shoal image pull --s", env)


@pytest.mark.parametrize("path", _paths(), ids=lambda p: " ".join(p) or "shoal")
def test_fish_offers_exactly_the_commands_own_options(env: dict[str, str], path: tuple) -> None:
    """`catalog status` is not `status`: none of the top-level command's options leak in."""
    _needs("fish")
    line = " ".join(("shoal", *path, "--"))
    assert set(fish_complete(line, env)) == _long_options(path)


def test_fish_descriptions_keep_their_punctuation(env: dict[str, str]) -> None:
    _needs("fish")
    offered = fish_complete("shoal re", env)
    assert offered["regions"] == "List the provider's regions (kubernetes: kubeconfig contexts)"
    assert fish_complete("shoal regions --off", env) == {
        "--offline": "Never fetch: answer from the cache only"
    }


# -- zsh ---------------------------------------------------------------------------------------

# Stubs in place of compsys: `_arguments` prints its specs and steers the script into the
# branch of one command path; `_describe` prints its items. What they print is what zsh
# itself parsed out of the script's quoting.
_ZSH_STUBS = r"""
_arguments() {
    print -r -- ARGS
    print -rl -- "$@"
    (( ++calls ))
    if (( calls == 1 )); then
        if (( $#want )); then state=args; line=($want[1]); else state=command; fi
    elif (( calls == 2 && $#want == 2 )); then state=subargs; line=($want[2])
    elif (( calls == 2 )); then state=sub
    else state=
    fi
    return 0
}
_describe() { print -r -- DESCRIBE; print -rl -- "${(@P)4}" }
integer calls=0
want=(${=1})
source $2
"""
_SPEC = re.compile(r"^(?P<name>-[^\[:]+)\[(?P<desc>(?:\\.|[^\]\\])*)\]")


def _zsh_parsed(path: tuple[str, ...]) -> tuple[dict[str, str], dict[str, str]]:
    """Option descriptions and (sub)command descriptions the script gives zsh on `path`."""
    done = subprocess.run(
        ["zsh", "-f", "-c", _ZSH_STUBS, "zsh", " ".join(path), str(COMPLETIONS / "_shoal")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    options: dict[str, str] = {}
    described: dict[str, str] = {}
    section = ""
    for row in done.stdout.splitlines():
        if row in ("ARGS", "DESCRIBE"):
            section = row
        elif section == "DESCRIBE":
            name, _, text = row.partition(":")
            described[name] = text
        elif (spec := _SPEC.match(row)) is not None:
            options[spec["name"]] = re.sub(r"\\(.)", r"\1", spec["desc"])
    return options, described


def _said(text: str | None) -> str:
    return " ".join((text or "").split()).rstrip(".")


@pytest.mark.parametrize("path", _paths(), ids=lambda p: " ".join(p) or "shoal")
def test_zsh_descriptions_keep_their_punctuation(path: tuple[str, ...]) -> None:
    """Every option's and subcommand's description reaches zsh as the help says it:
    apostrophes, colons, brackets and backquotes survive the script's quoting."""
    _needs("zsh")
    options, described = _zsh_parsed(path)
    command = _command(path)
    for param in command.params:
        if param.param_type_name == "option":
            for name in param.opts + param.secondary_opts:
                assert options[name] == _said(param.help), name
    for name, sub in getattr(command, "commands", {}).items():
        summary = _said(sub.help.split("\n\n")[0])
        assert described[name] == summary, name


def test_zsh_offers_options_with_descriptions_intact(env: dict[str, str], tmp_path: Path) -> None:
    """A real interactive zsh (in a pty) completing the line."""
    _needs("zsh")
    offered = zsh_complete("shoal re", env, tmp_path)
    assert set(offered) == {"regions", "resources"}
    assert offered["regions"].endswith(
        "-- List the provider's regions (kubernetes: kubeconfig contexts)"
    )
    offered = zsh_complete("shoal regions --", env, tmp_path)
    assert offered["--offline"].endswith("-- Never fetch: answer from the cache only")
    assert offered["--json"].endswith("-- Print JSON (the spec's shapes) instead of a table")
    assert "--provider" not in zsh_complete("shoal free --", env, tmp_path)
    assert set(zsh_complete("shoal catalog status --", env, tmp_path)) == {
        "--json",
        "--output",
        "--no-headers",
        "--quiet",
        "--help",
    }


@pytest.mark.parametrize("shell", sorted(SHELLS))
def test_shoal_completion_prints_the_script_pip_does_not_install(cli: Any, shell: str) -> None:
    """`pip install .` installs no shell files: `shoal completion SHELL` prints the same
    script the repository ships in completions/."""
    run = cli("completion", shell)
    assert run.exit_code == 0, run.stderr
    shipped = Path(__file__).resolve().parents[2] / "completions" / SHELLS[shell]
    assert run.stdout == shipped.read_text()
    assert run.stderr == ""


def test_shoal_completion_of_an_unknown_shell_is_a_usage_error(cli: Any) -> None:
    run = cli("completion", "tcsh")
    assert run.exit_code == 2
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in run.stderr
    assert run.stdout == ""


def test_shoal_version_is_shoal_dash_dash_version(cli: Any) -> None:
    said = cli("version")
    assert said.exit_code == 0
    assert said.stdout == cli("--version").stdout
    assert said.stdout.startswith("shoal ")
