"""`regions`, `types`, `resources`, `pricing`: the provider catalog."""

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.state import state
from providers.env import DEFAULT_PROVIDER, ENV_KUBE_CONTEXT, ENV_PROVIDER
from providers.selector_keys import HELP as SELECT_HELP

if TYPE_CHECKING:
    from providers.catalog import Catalog
    from providers.models import InstanceTypeSpec, RegionSpec, ResourceListOptions, Selector

ProviderOpt = Annotated[
    str,
    typer.Option("--provider", "-p", envvar=ENV_PROVIDER, help="Catalog provider to ask."),
]
ProvidersOpt = Annotated[
    str,
    typer.Option(
        "--provider",
        "-p",
        envvar=ENV_PROVIDER,
        help="Catalog provider(s) to ask; comma-separate to compare, e.g. aws,azure,gcp.",
    ),
]
ContextOpt = Annotated[
    str | None,
    typer.Option(
        "--context", envvar=ENV_KUBE_CONTEXT, help="kubeconfig context (kubernetes provider)."
    ),
]
RefreshOpt = Annotated[
    bool, typer.Option("--refresh", help="Fetch provider data now, even if the cache is fresh.")
]
OfflineOpt = Annotated[
    bool, typer.Option("--offline", help="Never fetch: answer from the cache only.")
]
MaxAgeOpt = Annotated[
    str | None,
    typer.Option("--max-age", help="Refuse cached data older than this (e.g. 6h, 2d)."),
]
SortOpt = Annotated[
    str | None,
    typer.Option("--sort", help="Sort by a selector key; prefix '-' for descending."),
]
LimitOpt = Annotated[int | None, typer.Option("--limit", min=1, help="Show at most N rows.")]
RegionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--region", "-r", help="Region name (repeatable); 'all' or none for every region."
    ),
]
SelectOpt = Annotated[list[str] | None, typer.Option("--select", "-s", help=SELECT_HELP)]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print JSON (the spec's shapes) instead of a table.")
]
OutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        metavar="FORMAT",
        help="table, wide (more columns), json (as --json) or yaml.",
    ),
]
StartOpt = Annotated[
    str | None,
    typer.Option(
        "--start", help="Window start, RFC 3339 (e.g. 2026-03-07T03:29:00Z): predictions."
    ),
]
EndOpt = Annotated[
    str | None, typer.Option("--end", help="Window end, RFC 3339; defaults to --start.")
]


def _catalog(
    ctx: typer.Context,
    provider: str,
    refresh: bool = False,
    offline: bool = False,
    max_age: str | None = None,
    context: str | None = None,
) -> "Catalog":
    from cli import wiring

    if context:
        state(ctx).env_overrides[ENV_KUBE_CONTEXT] = context

    return wiring.catalog(
        provider, wiring.with_freshness(state(ctx).settings(), refresh, offline, max_age)
    )


def _regions(catalog: "Catalog", names: list[str] | None) -> "list[RegionSpec | None]":
    """None: the provider's default set; 'all': every region the provider lists."""
    from providers.models import RegionSpec

    if not names:
        return [None]
    if "all" in names:
        return list(catalog.list_regions())
    return [RegionSpec(name=n) for n in names]


def _provider_names(provider: str) -> list[str]:
    names = list(dict.fromkeys(n.strip() for n in provider.split(",") if n.strip()))
    if not names:
        from providers.errors import UsageError

        raise UsageError("--provider is empty; name one, e.g. --provider local")
    return names


def _options(
    region: "RegionSpec | None", select: list[str] | None, start: str | None, end: str | None
) -> "ResourceListOptions":
    from providers.models import ListResourceFilter, RegionSpec, ResourceListOptions
    from providers.timeutil import parse_time

    selected = []
    if select:
        from providers import selectors

        selected = selectors.parse(select)
    start_time = parse_time(start, "--start") if start else None
    end_time = parse_time(end, "--end") if end else None
    if start_time is not None and end_time is not None and end_time < start_time:
        from providers.errors import UsageError

        raise UsageError(f"--end {end} is before --start {start}; swap them")
    return ResourceListOptions(
        region=region or RegionSpec(),
        start_time=start_time,
        end_time=end_time,
        filter=ListResourceFilter(resource_selectors=selected) if selected else None,
    )


def regions(
    ctx: typer.Context,
    provider: ProviderOpt = DEFAULT_PROVIDER,
    refresh: RefreshOpt = False,
    offline: OfflineOpt = False,
    context: ContextOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """List the provider's regions (kubernetes: the kubeconfig's contexts)."""
    as_json = output.select(as_json, output_format)
    from providers.wire import to_wire

    found = _catalog(ctx, provider, refresh, offline, context=context).list_regions()
    if as_json:
        output.emit_json(to_wire(found))
        return
    output.table(
        f"{provider} regions",
        ["Region", "Location", "Zones"],
        [[r.name, r.location or None, ", ".join(r.zones) or None] for r in found],
    )


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
) -> None:
    """List instance types (vCPUs, memory, GPUs) of the provider."""
    as_json = output.select(as_json, output_format)
    from providers import selectors
    from providers.models import selector_record
    from providers.wire import to_wire

    catalog = _catalog(ctx, provider, refresh, offline, max_age, context)
    chosen = selectors.parse(select or [])
    _refuse_price_keys(chosen, sort)
    found = []
    unjudged = selectors.UnjudgedCount()
    for r in _regions(catalog, region):
        for spec in catalog.list_instance_types(r):
            record = selector_record(spec, provider=provider)
            if selectors.matches(chosen, record):
                found.append((record, spec))
            else:
                unjudged.add(chosen, record)
    if sort:
        key = sort.lstrip("-")
        if key not in selectors.KNOWN_KEYS:
            from providers.errors import UsageError

            raise UsageError(
                f"--sort {sort!r}: unknown key; known: {', '.join(sorted(selectors.KNOWN_KEYS))}"
            )
        found.sort(key=lambda pair: _sort_key(pair[0].get(key)), reverse=sort.startswith("-"))
    specs = [spec for _, spec in found][:limit]
    for note in unjudged.notes():
        output.warn(f"{provider}: {note}")
    if as_json:
        output.emit_json(to_wire(specs))
        return
    output.table(
        f"{provider} instance types",
        ["Type", "Region", "vCPUs", "Memory GiB", "Arch", "GPU", "GPUs", "GPU GiB"],
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


def _refuse_price_keys(chosen: "list[Selector]", sort: str | None) -> None:
    """Instance types carry no prices: a price filter here would silently match nothing."""
    from providers.errors import UsageError

    keys = [s.key for s in chosen] + ([sort.lstrip("-")] if sort else [])
    for key in keys:
        if key in ("price", "spot_price"):
            raise UsageError(f"{key!r} is a pricing key; use `shoal pricing --select` for prices")


def _region_name(res: Any) -> str:
    return str(res.region.name) if res.region else ""


def _sort_key(value: Any) -> tuple[int, Any]:
    if value is None:
        return (2, 0)
    if isinstance(value, (int, float)):
        return (0, value)
    return (1, str(value).lower())


def _gather(
    catalog: "Catalog",
    region: list[str] | None,
    select: list[str] | None,
    start: str | None,
    end: str | None,
    listing: Callable[["Catalog", "ResourceListOptions"], list[Any]],
    predicting: Callable[["Catalog", "ResourceListOptions"], dict[str, Any]],
) -> tuple[bool, Any]:
    """Ask every chosen region: a list now, or (with --start/--end) the spec's map of
    timestamps, which is one region's answer."""
    from providers.errors import UsageError

    if end is not None and start is None:
        raise UsageError("--end needs --start; give the window's start too")
    _options(None, select, start, end)  # a bad window or selector fails before any request
    windowed = start is not None
    chosen = _regions(catalog, region)
    if windowed:
        if len(chosen) != 1:
            raise UsageError("a window (--start/--end) is for one region; give one --region")
        return True, predicting(catalog, _options(chosen[0], select, start, end))
    results: list[Any] = []
    for r in chosen:
        results.extend(listing(catalog, _options(r, select, start, end)))
    return False, results


def resources(
    ctx: typer.Context,
    provider: ProviderOpt = DEFAULT_PROVIDER,
    region: RegionOpt = None,
    select: SelectOpt = None,
    start: StartOpt = None,
    end: EndOpt = None,
    context: ContextOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Show supply, allocated and allocatable resources; with --start/--end, over a window."""
    as_json = output.select(as_json, output_format)
    from providers.wire import to_wire

    windowed, results = _gather(
        _catalog(ctx, provider, context=context),
        region,
        select,
        start,
        end,
        lambda catalog, opts: catalog.list_resources(opts),
        lambda catalog, opts: catalog.list_resource_predictions(opts),
    )
    if as_json:
        output.emit_json(to_wire(results))
        return
    from cli.render import resource_rows

    columns = ["At", "Region", "Level", "Class", "Resource", "Supply", "Allocated", "Allocatable"]
    if windowed:
        rows = [
            [at, _region_name(res), *row]
            for at, res in results.items()
            for row in resource_rows(res)
        ]
    else:
        rows = [[_region_name(res), *row] for res in results for row in resource_rows(res)]
        columns = columns[1:]
    output.table(f"{provider} resources", columns, rows)


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
    start: StartOpt = None,
    end: EndOpt = None,
    refresh: RefreshOpt = False,
    offline: OfflineOpt = False,
    max_age: MaxAgeOpt = None,
    context: ContextOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Show hourly prices per instance type: on-demand, spot and scheduled, with the currency
    and the time the data was fetched. Several providers (aws,azure,gcp) share one table; one
    that fails is reported on stderr and as an `error` entry in the JSON."""
    as_json = output.select(as_json, output_format)
    from cli.pricing_view import gather_pricing, render_pricing

    names = _provider_names(provider)
    if len(names) > 1 and start is not None:
        from providers.errors import UsageError

        raise UsageError("a window (--start/--end) is for one provider; give one --provider")
    windowed, results, failed = gather_pricing(
        names,
        lambda name: _catalog(ctx, name, refresh, offline, max_age, context),
        lambda catalog: _gather(
            catalog,
            region,
            select,
            start,
            end,
            lambda c, opts: c.list_pricing(opts),
            lambda c, opts: c.list_pricing_predictions(opts),
        ),
    )
    render_pricing(windowed, results, failed, sort, limit, as_json)
