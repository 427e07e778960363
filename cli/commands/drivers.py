"""`drivers`: list the configured driver instances, secrets in their config hidden."""

import json

import typer

from cli import output, tables
from cli.commands.options import JsonOpt, NoHeadersOpt, OutputOpt, QuietOpt
from cli.state import state


def drivers(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """List the driver instances (name/instance) to allocate on.

    Instances come from the config's [drivers] tables; a built-in driver with none
    configured has one called default. --driver takes either form (test, test/dev), and
    a driver's aliases (podman and docker are the container driver, ec2 is aws).

    \b
    Examples:
      shoal drivers
      shoal --config ./ci.toml drivers --json
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from drivers.registry import aliases_of, driver_list
    from providers.core.errors import is_secret_name

    # A token or password in a driver's table is configuration, not output.
    listed = {
        name: {k: "(hidden)" if is_secret_name(k) else v for k, v in cfg.items()}
        for name, cfg in driver_list(state(ctx).settings()).items()
    }
    aliases = {name: aliases_of(name.partition("/")[0]) for name in listed}
    if as_json:
        output.emit_json(
            [
                {"name": name, "aliases": aliases[name], "config": cfg}
                for name, cfg in listed.items()
            ]
        )
        return
    if output.names():
        output.emit_names(listed)
        return
    tables.table(
        "drivers",
        ["Driver", "Aliases", "Config"],
        [
            [n, ", ".join(aliases[n]) or None, json.dumps(c) if c else None]
            for n, c in listed.items()
        ],
    )
