"""The Typer application: global options, subcommands, and error -> exit code mapping."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from cli import output
from cli.commands import alloc as alloc_cmds
from cli.commands import catalog as catalog_cmds
from cli.exit_codes import ExitCode, exit_code_for
from cli.state import state
from providers.env import ENV_CONFIG, ENV_HOME
from providers.errors import ShoalError

EPILOG = (
    "Exit codes: 0 ok, 1 error, 2 usage, 69 provider unreachable, 75 retry later "
    "(no capacity, timeout), 77 credentials, 78 config, 130 interrupted. "
    "NO_COLOR disables colour."
)


class ShoalGroup(TyperGroup):
    """Maps shoal's typed errors to exit codes and one-line messages, for every command."""

    def invoke(self, ctx: Any) -> Any:  # typer's own (vendored) click Context
        try:
            return super().invoke(ctx)
        except ShoalError as exc:
            output.error(str(exc))
            ctx.exit(exit_code_for(exc))
        except KeyboardInterrupt:
            output.error("interrupted")
            ctx.exit(ExitCode.INTERRUPTED)


app = typer.Typer(
    cls=ShoalGroup,
    name="shoal",
    help="Which compute exists, what it costs, how much is free; allocate and free it.",
    epilog=EPILOG,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def main_options(
    ctx: typer.Context,
    home: Annotated[
        Path | None,
        typer.Option("--home", envvar=ENV_HOME, help="Keep config, state, cache and data here."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", envvar=ENV_CONFIG, help="Config file (TOML).")
    ] = None,
) -> None:
    overrides = state(ctx).env_overrides
    if home is not None:
        overrides[ENV_HOME] = str(home)
    if config is not None:
        overrides[ENV_CONFIG] = str(config)


app.command()(catalog_cmds.regions)
app.command()(catalog_cmds.types)
app.command()(catalog_cmds.resources)
app.command()(catalog_cmds.pricing)
app.command()(alloc_cmds.alloc)
app.command()(alloc_cmds.status)
app.command()(alloc_cmds.free)
app.command()(alloc_cmds.task)
app.command()(alloc_cmds.drivers)
