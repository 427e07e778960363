"""`pricing`: what instance types cost: on-demand, spot, scheduled."""

from typing import TYPE_CHECKING, Annotated

import typer

from cli import output
from cli.commands.catalog_query import catalog_for, provider_names, query_of
from cli.commands.options import (
    ContextOpt,
    EndOpt,
    JsonOpt,
    LimitOpt,
    MaxAgeOpt,
    NoHeadersOpt,
    OfflineOpt,
    OutputOpt,
    ProvidersOpt,
    QuietOpt,
    RefreshOpt,
    RegionOpt,
    SelectOpt,
    StartOpt,
)
from providers.core.env import DEFAULT_PROVIDER

if TYPE_CHECKING:
    pass


def pricing(
    ctx: typer.Context,
    provider: ProvidersOpt = DEFAULT_PROVIDER,
    region: RegionOpt = None,
    select: SelectOpt = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            help="Sort rows by price, spot_price, scheduled_price, name, region, provider, "
            "vcpus, memory_gib, gpu, gpu_count or gpu_memory_gib; "
            "prefix '-' for descending.",
        ),
    ] = None,
    limit: LimitOpt = None,
    available: Annotated[
        bool,
        typer.Option(
            "--available",
            help="Only types your account has quota to launch now (aws, azure, gcp: "
            "needs credentials, as `resources` does).",
        ),
    ] = False,
    start: StartOpt = None,
    end: EndOpt = None,
    refresh: RefreshOpt = False,
    offline: OfflineOpt = False,
    max_age: MaxAgeOpt = None,
    context: ContextOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Show hourly on-demand, spot and scheduled prices per type.

    Each row has its currency and the time the data was fetched. Several providers
    (-p aws,azure,gcp) share one table; one that fails is reported on stderr and as
    an `error` entry in the JSON.

    \b
    Examples:
      shoal pricing -p aws -r us-east-1 --select gpu=H100 --sort price
      shoal pricing -p aws,azure,gcp --select 'gpu_count>=1,price<10' --limit 20
      shoal pricing -p azure -r eastus --offline --json
      shoal pricing -p aws -r us-east-1 --select gpu=H100 --available
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from cli.pricing_view import render_pricing
    from providers import query

    wanted = query_of(region, select, start, end, sort, limit, available)
    answer = query.pricing(
        provider_names(provider),
        lambda name: catalog_for(ctx, name, refresh, offline, max_age, context),
        wanted,
    )
    if output.names():  # the type names, each once: what a script passes on
        if answer.error is not None:
            raise answer.error
        for failure in answer.failures:
            output.warn(failure.message)
        if answer.window is not None:
            names = [name for point in answer.window.values() for name in sorted(point.items)]
        else:
            names = [row.instance_type for row in answer.rows]
        output.emit_names(dict.fromkeys(names))
        return
    render_pricing(answer, as_json)
