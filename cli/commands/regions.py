"""`regions`: the regions a provider has."""

from typing import TYPE_CHECKING

import typer

from cli import output
from cli.commands.catalog_query import catalog_for
from cli.commands.options import ContextOpt, JsonOpt, OfflineOpt, OutputOpt, ProviderOpt, RefreshOpt
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
) -> None:
    """List the provider's regions (kubernetes: kubeconfig contexts).

    \b
    Examples:
      shoal regions
      shoal regions -p aws --json
      shoal regions -p kubernetes
    """
    as_json = output.select(as_json, output_format)
    from providers.core.wire import to_wire

    found = catalog_for(ctx, provider, refresh, offline, context=context).list_regions()
    if as_json:
        output.emit_json(to_wire(found))
        return
    output.table(
        f"{provider} regions",
        ["Region", "Location", "Zones"],
        [[r.name, r.location or None, ", ".join(r.zones) or None] for r in found],
    )
