"""`config` (`config show`): what this shoal would use and where each value comes from;
`config check`: the config file checked, every table, without running anything."""

import typer

from cli import output, tables
from cli.commands.options import JsonOpt, OutputOpt
from cli.state import state
from providers.core.errors import UsageError

app = typer.Typer(
    help="""Show what shoal would use, or check the config file.

    `shoal config` alone is `shoal config show`.

    \b
    Examples:
      shoal config show
      shoal --home /tmp/ci-home config show --json
      shoal --config ./ci.toml config check
    """,
    invoke_without_command=True,
    no_args_is_help=False,
)


@app.callback()
def config(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    if ctx.invoked_subcommand is None:
        _show(ctx, as_json, output_format)
    elif as_json or output_format is not None:
        raise UsageError(
            f"--json and --output are `config show`'s: `shoal config show --json` (not with "
            f"`config {ctx.invoked_subcommand}`)"
        )


@app.command("show")
def show(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Show the files, engine and variables this shoal would use.

    The effective config file, ledger, cache, images dir, container engine, kubeconfig
    context and the shoal environment variables that are set, each with where it came
    from; secret values are never shown.

    \b
    Examples:
      shoal config show
      shoal --home /tmp/ci-home config show --json
    """
    _show(ctx, as_json, output_format)


def _show(ctx: typer.Context, as_json: bool, output_format: str | None) -> None:
    as_json = output.select(as_json, output_format)
    from drivers.service.setup_info import effective

    items = effective(state(ctx).settings())
    if as_json:
        output.emit_json([i.to_json() for i in items])
        return
    if output.names():
        output.emit_names(i.name for i in items)
        return
    tables.table("shoal config", ["Setting", "Value", "From"], [
        [i.name, i.shown, i.source] for i in items
    ])  # fmt: skip


@app.command("check")
def check(ctx: typer.Context) -> None:
    """Check the config file without running anything.

    Exit 0 (`config ok: PATH` on stderr), or 78 naming the file, the table and the key.
    Every table is checked by what reads it, as alloc, pricing, resources and image pull
    check it: unknown tables and keys, wrong types, numbers out of range, unknown
    drivers. Nothing is started or fetched.

    \b
    Examples:
      shoal config check
      shoal --config ./ci.toml config check
    """
    from drivers.service.check_config import check_config

    settings = state(ctx).settings()  # the TOML and its top-level tables: checked as read
    check_config(settings)
    path = settings.paths.config_file
    absent = "" if path.exists() else " (no such file: the defaults apply)"
    output.message(f"config ok: {path}{absent}")
