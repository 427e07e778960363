"""`regions`: the regions a provider has."""

from typing import TYPE_CHECKING

import typer

from cli import output
from cli.commands.catalog_query import catalog_for
from cli.commands.options import (
    ContextOpt,
    JsonOpt,
    NoHeadersOpt,
    OfflineOpt,
    OutputOpt,
    ProviderOpt,
    QuietOpt,
    RefreshOpt,
)
from providers.core.env import DEFAULT_PROVIDER

if TYPE_CHECKING:
    pass


def regions(
    ctx: typer.Context,
    provider: ProviderOpt = DEFAULT_PROVIDER,
    refresh: RefreshOpt = False,
    offline: OfflineOpt = False,
    context: ContextOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """List the provider's regions (kubernetes: kubeconfig contexts).

    \b
    Examples:
      shoal regions
      shoal regions -p aws --json
      shoal regions -p kubernetes
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from providers.core.wire import to_wire

    found = catalog_for(ctx, provider, refresh, offline, context=context).list_regions()
    if as_json:
        output.emit_json(to_wire(found))
        return
    if output.names():
        output.emit_names(r.name for r in found)
        return
    from cli import tables
    from cli.tables import Col

    # Zones, a list, go under their region on a narrow terminal, wrapped between names.
    tables.table(
        f"{provider} regions",
        ["Region", "Location", Col("Zones", below=True)],
        [[r.name, r.location or None, ", ".join(r.zones) or None] for r in found],
    )
