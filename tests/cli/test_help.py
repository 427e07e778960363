"""Help text documents every environment variable and the exit codes."""

from __future__ import annotations

import re
import shlex
from typing import Any

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
    from providers.core import env

    helps = "".join(
        cli(*args, "--help").stdout
        for args in [(), ("regions",), ("pricing",), ("alloc",), ("image", "pull")]
    )
    helps = " ".join(helps.split())  # Rich wraps long lines
    names = {v for k, v in vars(env).items() if k.startswith("ENV_")}
    missing = sorted(n for n in names if n not in helps)
    assert missing == []


# -- every command's --help: examples that parse, arguments described, no internal names ------

ISSUE_COMMANDS = {
    (),
    ("regions",),
    ("types",),
    ("resources",),
    ("pricing",),
    ("offers",),
    ("alloc",),
    ("status",),
    ("free",),
    ("task",),
    ("wait",),
    ("drivers",),
    ("config",),
    ("config", "show"),
    ("config", "check"),
    ("image",),
    ("image", "pull"),
    ("image", "list"),
    ("image", "rm"),
    ("catalog",),
    ("catalog", "status"),
    ("catalog", "export"),
    ("catalog", "import"),
}
# Parameter names that are Python's, not the operator's: never in help.
INTERNAL = {"alloc_id", "alloc_ids", "as_json", "output_format"}


def _root() -> Any:
    import typer.main

    from cli.app import app

    return typer.main.get_command(app)


def _command_paths() -> list[tuple[str, ...]]:
    """Every command and group of the app, the root included: a new one is covered as is."""
    paths: list[tuple[str, ...]] = [()]
    for name, command in sorted(_root().commands.items()):
        paths.append((name,))
        paths += [(name, sub) for sub in sorted(getattr(command, "commands", {}))]
    return paths


PATHS = _command_paths()


def _command(path: tuple[str, ...]) -> Any:
    command = _root()
    for name in path:
        command = command.commands[name]
    return command


def _help(cli, path: tuple[str, ...]) -> str:
    run = cli(*path, "--help", env={"COLUMNS": "80"})
    assert run.exit_code == 0, run.stderr
    return run.stdout


def _examples(text: str) -> list[str]:
    lines = text.splitlines()
    start = [i for i, line in enumerate(lines) if line.strip() == "Examples:"]
    assert len(start) == 1, "no Examples block"
    block = []
    for line in lines[start[0] + 1 :]:
        if not line.strip():
            break
        block.append(line.strip())
    return block


def _invocations(example: str) -> list[list[str]]:
    """The `shoal ...` argument lists of a shell line: pipes, lists and redirections split
    off (`shoal a | ssh host shoal b < f` is two invocations)."""
    lexer = shlex.shlex(example, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    segments: list[list[str]] = [[]]
    tokens = list(lexer)
    skip_next = False
    for token in tokens:
        if skip_next:
            skip_next = False
        elif token in ("<", ">", ">>", "2>"):
            skip_next = True
        elif token in ("|", "||", "&&", ";"):
            segments.append([])
        else:
            segments[-1].append(token)
    found = []
    for words in segments:
        if "shoal" in words:
            found.append(words[words.index("shoal") + 1 :])
    return found


def _parse(args: list[str]) -> tuple[str, ...]:
    """Parse `shoal ARGS` the way shoal does, down to the command it names, running
    nothing: an unknown command or option, a missing or malformed value fails here."""
    import click

    command = _root()
    ctx = command.make_context("shoal", list(args))
    path: list[str] = []
    while isinstance(command, click.Group):
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        name, sub, rest = command.resolve_command(ctx, rest)
        assert name is not None and sub is not None
        path.append(name)
        command = sub
        ctx = command.make_context(name, rest, parent=ctx)
    return tuple(path)


def test_every_command_of_the_issue_is_covered() -> None:
    assert set(PATHS) >= ISSUE_COMMANDS


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "shoal")
def test_help_has_examples_that_parse(cli, path: tuple[str, ...]) -> None:
    examples = _examples(_help(cli, path))
    assert 2 <= len(examples) <= 4, examples
    for example in examples:
        assert example.startswith("shoal "), example
        invocations = _invocations(example)
        assert invocations, example
        # The first invocation is the command whose help this is (or one of a group's).
        assert _parse(invocations[0])[: len(path)] == path, example
        for args in invocations[1:]:
            _parse(args)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "shoal")
def test_help_fits_80_columns_plain(cli, path: tuple[str, ...]) -> None:
    text = _help(cli, path)
    assert all(len(line) <= 80 for line in text.splitlines()), text
    # Piped with NO_COLOR: no escape sequences, no box drawing to strip.
    assert "\x1b" not in text
    assert not re.search(r"[│╭╮╰╯─]", text)
    # Summaries in a group's command list are whole sentences, not cut with "...".
    commands = text.partition("\nCommands:\n")[2].partition("\n\n")[0]
    assert "..." not in commands


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "shoal")
def test_help_shows_no_internal_parameter_names(cli, path: tuple[str, ...]) -> None:
    text = _help(cli, path)
    names = INTERNAL | {p.name for p in _command(path).params if p.name and "_" in p.name}
    shown = sorted(n for n in names if re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text))
    assert shown == []


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "shoal")
def test_every_argument_has_a_description(cli, path: tuple[str, ...]) -> None:
    import click

    arguments = [p for p in _command(path).params if isinstance(p, click.Argument)]
    text = _help(cli, path)
    section = " ".join(text.partition("\nArguments:\n")[2].partition("\n\n")[0].split())
    for argument in arguments:
        described = " ".join((argument.help or "").split())  # type: ignore[attr-defined]
        assert described, argument.name
        assert described in section, (argument.name, section)


def test_definition_says_it_takes_a_file_or_stdin(cli) -> None:
    text = " ".join(_help(cli, ("alloc",)).split())
    assert re.search(r"\[DEFINITION\] A definition file \(JSON or YAML\), or - to read", text)


def test_examples_keep_their_lines_when_wide_and_piped(cli) -> None:
    """A wide terminal does not join the examples into one paragraph."""
    run = cli("free", "--help", env={"COLUMNS": "200"})
    assert "\n    shoal free --expired\n" in run.stdout
