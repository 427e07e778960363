"""`config`: what this shoal would use and where each value comes from."""

import typer

from cli import output
from cli.commands.options import JsonOpt, OutputOpt
from cli.state import state


def config(
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
      shoal config
      shoal --home /tmp/ci-home config --json
    """
    as_json = output.select(as_json, output_format)
    from drivers.service.setup_info import effective

    items = effective(state(ctx).settings())
    if as_json:
        output.emit_json([{"name": i.name, "value": i.value, "source": i.source} for i in items])
        return
    output.table("shoal config", ["Setting", "Value", "From"], [
        [i.name, i.value, i.source] for i in items
    ])  # fmt: skip
