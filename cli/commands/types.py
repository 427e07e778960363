"""`types`: the instance types a provider has, with their shapes."""

from typing import TYPE_CHECKING

import typer

from cli import output
from cli.commands.catalog_query import catalog_for, query_of
from cli.commands.options import (
    ContextOpt,
    JsonOpt,
    LimitOpt,
    MaxAgeOpt,
    NoHeadersOpt,
    OfflineOpt,
    OutputOpt,
    ProviderOpt,
    QuietOpt,
    RefreshOpt,
    RegionOpt,
    SelectOpt,
    SortOpt,
)
from providers.core.env import DEFAULT_PROVIDER

if TYPE_CHECKING:
    from providers.models import InstanceTypeSpec


def types(
    ctx: typer.Context,
    provider: ProviderOpt = DEFAULT_PROVIDER,
    region: RegionOpt = None,
    select: SelectOpt = None,
    sort: SortOpt = None,
    limit: LimitOpt = None,
    refresh: RefreshOpt = False,
    offline: OfflineOpt = False,
    max_age: MaxAgeOpt = None,
    context: ContextOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """List the provider's instance types: vCPUs, memory and GPUs.

    --select filters on provider-neutral keys, --sort orders by one (prefix - for
    descending) and --limit keeps the first rows. Prices are in `shoal pricing`.

    \b
    Examples:
      shoal types
      shoal types -p aws -r us-east-1 --select gpu=H100 --sort -vcpus --limit 5
      shoal types -p gcp -r europe-west4 --select 'vcpus>=32' --json
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from providers import query
    from providers.core.wire import to_wire

    wanted = query_of(region, select, sort=sort, limit=limit)
    catalog = catalog_for(ctx, provider, refresh, offline, max_age, context)
    answer = query.types(catalog, provider, wanted)
    specs = answer.types
    for note in answer.notes:
        output.warn(note)
    if as_json:
        output.emit_json(to_wire(specs))
        return
    if output.names():  # a type in several regions is named once
        output.emit_names(dict.fromkeys(s.name for s in specs))
        return
    from cli import tables
    from cli.tables import Col

    # A narrow terminal heads the rows of a region with its name, then leaves out GPU
    # memory and the architecture; never a type or a figure of its shape.
    tables.table(
        f"{provider} instance types",
        [
            Col("Type"),
            Col("Region", group="{}"),
            Col("vCPUs"),
            Col("Memory GiB"),
            Col("Arch", drop=2),
            Col("GPU"),
            Col("GPUs"),
            Col("GPU GiB", drop=1),
        ],
        [
            [
                s.name,
                s.region or None,
                s.vcpus,
                s.memory_gib,
                s.arch,
                s.gpu or None,
                s.gpu_count,
                s.gpu_memory_gib or None,
            ]
            for s in specs
        ],
    )
    for source, count in _shape_sources(specs):
        output.message(f"{provider}: shapes of {count} type(s) from {source}")


def _shape_sources(specs: "list[InstanceTypeSpec]") -> list[tuple[str, int]]:
    """Where the listed shapes came from, most rows first (JSON carries it per row)."""
    counts: dict[str, int] = {}
    for spec in specs:
        if spec.source:
            counts[spec.source] = counts.get(spec.source, 0) + 1
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))
