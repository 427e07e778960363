"""The Typer application: global options, subcommands, and error -> exit code mapping."""

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from cli import output
from cli.exit_codes import ExitCode, exit_code_for
from cli.state import state
from providers.core import env
from providers.core.env import ENV_CONFIG, ENV_DEBUG, ENV_HOME
from providers.core.errors import ShoalError

_CLOUD_ENV = ", ".join(
    value
    for name, value in vars(env).items()
    if name.startswith(("ENV_AWS", "ENV_AZURE", "ENV_GCP"))
)
EPILOG = (
    "Exit codes: 0 ok, 1 error, 2 usage, 69 provider unreachable, 75 retry later "
    "(no capacity, timeout), 77 credentials, 78 config, 130 interrupted. "
    "NO_COLOR disables colour; SHOAL_DEBUG=1 shows tracebacks of unexpected errors. "
    f"Cloud catalogs read {_CLOUD_ENV} (README: Cloud providers); kubernetes reads "
    f"{env.ENV_KUBECONFIG} and {env.ENV_KUBE_CONTEXT}; the container driver {env.ENV_DOCKER_HOST}. "
    f"{env.ENV_LEDGER_URL}: a postgresql:// URL for the team ledger (empty: this machine's "
    f"SQLite ledger); {env.ENV_HOST_ID}: this machine's name in it."
)


class ShoalGroup(TyperGroup):
    """Maps shoal's typed errors to exit codes and one-line messages, for every command."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        """The framework's own errors (unknown command or option, a bad integer, a missing
        value) in shoal's style: `shoal: error: ...` and one hint line, exit 2, on a terminal
        or piped alike; never the framework's box."""
        import click

        undecodable = _first_undecodable(sys.argv[1:] if args is None else list(args))
        if undecodable is not None:
            output.error(
                f"argument {undecodable!a} is not UTF-8 text; pass names and paths as UTF-8"
            )
            if standalone_mode:
                sys.exit(ExitCode.USAGE)
            return ExitCode.USAGE
        try:
            self._finished = False
            result = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
            code = result if isinstance(result, int) else 0
            if code == ExitCode.INTERRUPTED and self._finished:
                # The command had finished (its output is out) when a Ctrl-C reached Typer's
                # wrapper, which makes it a silent Exit(130): the outcome stands.
                code = ExitCode.OK
        except click.exceptions.NoArgsIsHelpError as exc:
            sys.stderr.write(exc.ctx.get_help() + "\n" if exc.ctx else "")
            code = ExitCode.USAGE
        except click.exceptions.UsageError as exc:
            from cli.usage import hint, one_line

            output.error(one_line(exc))
            sys.stderr.write(f"shoal: hint: {hint(exc)}\n")
            code = ExitCode.USAGE
        except click.exceptions.Abort:
            output.error("interrupted")
            code = ExitCode.INTERRUPTED
        except click.ClickException as exc:
            output.error(exc.format_message())
            code = exc.exit_code
        if standalone_mode:
            sys.exit(code)
        return code

    def make_context(self, info_name: str | None, args: list[str], *a: Any, **kw: Any) -> Any:
        """Typer turns a Ctrl-C while the arguments are parsed into a silent Exit(130); as an
        Abort it is answered like any other (`shoal: error: interrupted`)."""
        import click

        try:
            return super().make_context(info_name, args, *a, **kw)
        except KeyboardInterrupt:
            raise click.exceptions.Abort() from None

    _finished = False  # the invoked command returned (set per run by `main`)

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            done = super().invoke(ctx)
            self._finished = True
            return done
        except ShoalError as exc:
            for earlier in exc.earlier:
                output.error(earlier)
            output.error(str(exc))
            ctx.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            output.error("interrupted")
            ctx.exit(ExitCode.INTERRUPTED)
        except Exception as exc:
            if _interrupted(exc):
                output.error("interrupted")
                ctx.exit(ExitCode.INTERRUPTED)
            # The framework's own usage errors and exits (click's, as Typer re-exports them;
            # a Typer that vendors click raises them from typer.*): click maps them to 2/0.
            module = type(exc).__module__
            if isinstance(exc, (typer.Exit, typer.Abort)) or module.startswith(
                ("click.", "typer.")
            ):
                raise
            if os.environ.get(ENV_DEBUG):
                raise
            # A bug, or a failure nobody foresaw: still one line, and the way to see more.
            # Its text was checked by nobody: credentials from the environment are scrubbed
            # and its length capped.
            from providers.core.errors import environment_secrets, one_line

            said = one_line(str(exc), environment_secrets(os.environ), 200)
            output.error(
                f"unexpected {type(exc).__name__}: {said} (set {ENV_DEBUG}=1 for the "
                "traceback; please report it)"
            )
            ctx.exit(ExitCode.ERROR)


def _interrupted(exc: BaseException) -> bool:
    """Ctrl-C that Python wrapped on its way out: a KeyboardInterrupt raised while a class
    was being built (a dataclass field's __set_name__ during an import) surfaces as the
    RuntimeError whose cause it is."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return True
        # pydantic-core builds a validator partly by calling back into Python; a Ctrl-C
        # there comes out as its SchemaError, which names the interrupt only in its text.
        if type(current).__name__ == "SchemaError" and "KeyboardInterrupt" in str(current):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _first_undecodable(args: Sequence[str]) -> str | None:
    """An argument with bytes that are not UTF-8 (Python keeps them as lone surrogates,
    which no output stream can print): named once here rather than failing later."""
    for arg in args:
        if any("\udc80" <= ch <= "\udcff" for ch in arg):
            return arg
    return None


# Each subcommand, declared once: name -> "module:function". Only the invoked one is
# imported and converted by Typer, which keeps cold start flat as commands grow.
COMMANDS: dict[str, str] = {
    "regions": "cli.commands.regions:regions",
    "types": "cli.commands.types:types",
    "resources": "cli.commands.resources:resources",
    "pricing": "cli.commands.pricing:pricing",
    "offers": "cli.commands.offers:offers",
    "alloc": "cli.commands.alloc:alloc",
    "status": "cli.commands.status:status",
    "free": "cli.commands.free:free",
    "wait": "cli.commands.wait:wait",
    "task": "cli.commands.task:task",
    "logs": "cli.commands.logs:logs",
    "drivers": "cli.commands.drivers:drivers",
    "image": "cli.commands.image:app",
    "catalog": "cli.commands.catalog:app",
    "config": "cli.commands.config:app",
    "ledger": "cli.commands.ledger:app",
    "completion": "cli.commands.completion:completion",
    "version": "cli.commands.version:version",
}
_GLOBAL_VALUED = ("--home", "--config")


def print_version() -> None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        shown = version("shoal")
    except PackageNotFoundError:  # run from a source tree that was never installed
        shown = "unknown (not installed)"
    sys.stdout.write(f"shoal {shown}\n")


def _print_version(value: bool) -> None:
    if value:
        print_version()
        raise typer.Exit()


def main_options(
    ctx: typer.Context,
    home: Annotated[
        Path | None,
        typer.Option("--home", envvar=ENV_HOME, help="Keep config, state, cache and data here."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", envvar=ENV_CONFIG, help="Config file (TOML).")
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", is_eager=True, callback=_print_version, help="Print the version."
        ),
    ] = False,
) -> None:
    overrides = state(ctx).env_overrides
    if home is not None:
        overrides[ENV_HOME] = str(home)
    if config is not None:
        overrides[ENV_CONFIG] = str(config)


def invoked_command(argv: list[str]) -> str | None:
    """The subcommand `argv` names, skipping global options; None if there is none."""
    skip = False
    for token in argv:
        if skip:
            skip = False
        elif token in _GLOBAL_VALUED:
            skip = True
        elif not token.startswith("-"):
            return token if token in COMMANDS else None
    return None


def build_app(argv: list[str] | None = None) -> typer.Typer:
    """The app with every command, or only the one `argv` invokes (what `main` runs)."""
    from providers.core.plugins import import_string

    built = typer.Typer(
        cls=ShoalGroup,
        name="shoal",
        help=(
            "Which compute exists, what it costs, how much is free; allocate and free it.\n\n"
            "Every data command takes --json (or --output json|yaml); tables go to stdout, "
            "messages to stderr. `shoal COMMAND --help` shows each command's examples.\n\n"
            "\b\n"
            "Examples:\n"
            "  shoal resources\n"
            "  shoal pricing -p aws -r us-east-1 --select gpu=H100 --sort price\n"
            "  shoal alloc --driver process --cpu 1 --ram 1 -o entry='sleep 3600'\n"
            "  shoal free --expired"
        ),
        # Plain click help: an Examples block marked with \b keeps its lines, arguments show
        # by their metavar (ID, not the parameter's name), and piped or NO_COLOR output has
        # no box drawing or markup to strip.
        rich_markup_mode=None,
        epilog=EPILOG,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    built.callback()(main_options)
    only = invoked_command(argv) if argv is not None else None
    for name, target in COMMANDS.items():
        if only is None or name == only:
            command = import_string(target)
            if isinstance(command, typer.Typer):
                built.add_typer(command, name=name)
            else:
                built.command(name)(command)
    return built


def __getattr__(name: str) -> typer.Typer:
    # `from cli.app import app` (tests, completion) gets the full app, built on demand so
    # that importing this module for `main` does not import every command.
    if name == "app":
        return build_app()
    raise AttributeError(name)
