"""`regions`, `types`, `resources`, `pricing`: the provider catalog."""

from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.state import state
from providers.core.env import DEFAULT_PROVIDER, ENV_KUBE_CONTEXT, ENV_PROVIDER
from providers.selector_keys import HELP as SELECT_HELP

if TYPE_CHECKING:
    from providers.catalog import Catalog
    from providers.models import InstanceTypeSpec
    from providers.query import Query

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
        "--region",
        "-r",
        help="Region name (repeatable); 'all' for every region. None: the regions already "
        "cached (prices), or the provider's default region.",
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
        "--start",
        help="Window start: RFC 3339, a date (midnight UTC), now, or +2h / -1d: predictions.",
    ),
]
EndOpt = Annotated[
    str | None,
    typer.Option("--end", help="Window end, in the forms --start takes; defaults to --start."),
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
    from cli.commands.flags import not_empty

    not_empty(max_age, "--max-age", "give a duration such as 6h or 2d, or leave --max-age out")
    not_empty(context, "--context", "give a kubeconfig context, or leave --context out")
    if context:
        state(ctx).env_overrides[ENV_KUBE_CONTEXT] = context

    return wiring.catalog(
        provider, wiring.with_freshness(state(ctx).settings(), refresh, offline, max_age)
    )


def _provider_names(provider: str) -> list[str]:
    return [n.strip() for n in provider.split(",") if n.strip()]


def _query(
    region: list[str] | None,
    select: list[str] | None,
    start: str | None = None,
    end: str | None = None,
    sort: str | None = None,
    limit: int | None = None,
    available: bool = False,
) -> "Query":
    """The flags as a catalog query; malformed selectors and times fail here, before any
    provider is asked anything."""
    from cli.commands.flags import not_empty
    from providers import selectors
    from providers.core.timeutil import parse_when, utcnow
    from providers.query import Query, check_window

    # A script's unset variable must not turn into the flag left out (every cached region,
    # no filter, now, the cache however old).
    not_empty(start, "--start", "give a time such as now, +2h or 2026-12-01T00:00:00Z")
    not_empty(end, "--end", "give a time such as +2h, or leave --end out")
    not_empty(sort, "--sort", "give a selector key such as vcpus or -price")
    for name in region or []:
        not_empty(name, "--region", "give a region name or all, or leave --region out")
    for given in select or []:
        not_empty(given, "--select", "give a selector such as gpu=H100 or 'vcpus>=32'")
    now = utcnow()  # one instant for both ends: `--start now --end +2h` is two hours
    start_time = parse_when(start, "--start", now) if start else None
    end_time = parse_when(end, "--end", now) if end else None
    check_window(start_time, end_time)
    return Query(
        regions=region or [],
        selectors=selectors.parse(select or []),
        start=start_time,
        end=end_time,
        sort=sort,
        limit=limit,
        available=available,
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
    """List the provider's regions (kubernetes: kubeconfig contexts).

    \b
    Examples:
      shoal regions
      shoal regions -p aws --json
      shoal regions -p kubernetes
    """
    as_json = output.select(as_json, output_format)
    from providers.core.wire import to_wire

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
    """List the provider's instance types: vCPUs, memory and GPUs.

    --select filters on provider-neutral keys, --sort orders by one (prefix - for
    descending) and --limit keeps the first rows. Prices are in `shoal pricing`.

    \b
    Examples:
      shoal types
      shoal types -p aws -r us-east-1 --select gpu=H100 --sort -vcpus --limit 5
      shoal types -p gcp -r europe-west4 --select 'vcpus>=32' --json
    """
    as_json = output.select(as_json, output_format)
    from providers import query
    from providers.core.wire import to_wire

    wanted = _query(region, select, sort=sort, limit=limit)
    catalog = _catalog(ctx, provider, refresh, offline, max_age, context)
    answer = query.types(catalog, provider, wanted)
    specs = answer.types
    for note in answer.notes:
        output.warn(note)
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


def _region_name(res: Any) -> str:
    return str(res.region.name) if res.region else ""


def resources(
    ctx: typer.Context,
    provider: ProviderOpt = DEFAULT_PROVIDER,
    region: RegionOpt = None,
    select: SelectOpt = None,
    start: StartOpt = None,
    end: EndOpt = None,
    refresh: RefreshOpt = False,
    offline: OfflineOpt = False,
    max_age: MaxAgeOpt = None,
    context: ContextOpt = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Show supply, allocated and allocatable resources.

    local and kubernetes: the machine's or cluster's capacity. aws, azure, gcp: your
    account's quotas (supply), usage (allocated) and what is left (allocatable), on
    demand and spot, with reservations ahead as `scheduled` (credentials needed; cached
    for [provider] quota_ttl_minutes, default 5).

    With --start (and --end) the answer is a prediction over that window: a point at
    the start, at each allocation's expiry inside it, and at the end.

    \b
    Examples:
      shoal resources --json
      shoal resources --start 2026-12-01T00:00:00Z --end 2026-12-02T00:00:00Z
      shoal resources -p kubernetes --context prod
      shoal resources -p gcp --region all --select gpu=H100
    """
    as_json = output.select(as_json, output_format)
    from providers import query
    from providers.core.wire import to_wire

    wanted = _query(region, select, start, end)
    answer = query.resources(
        _catalog(ctx, provider, refresh, offline, max_age, context=context), wanted
    )
    seen: set[str] = set()
    for res in answer.now:  # what is missing and why, once each (JSON carries them too)
        for note in res.notes:
            if note not in seen and not as_json:
                seen.add(note)
                output.message(f"{res.provider} {_region_name(res)}: {note}")
    if as_json:
        output.emit_json(to_wire(answer.window if answer.window is not None else answer.now))
        return
    from cli.render import resource_rows

    columns = ["At", "Region", "Level", "Class", "Resource", "Supply", "Allocated", "Allocatable"]
    if answer.window is not None:
        rows = [
            [at, _region_name(res), *row]
            for at, res in answer.window.items()
            for row in resource_rows(res)
        ]
    else:
        rows = [[_region_name(res), *row] for res in answer.now for row in resource_rows(res)]
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
    as_json = output.select(as_json, output_format)
    from cli.pricing_view import render_pricing
    from providers import query

    wanted = _query(region, select, start, end, sort, limit, available)
    answer = query.pricing(
        _provider_names(provider),
        lambda name: _catalog(ctx, name, refresh, offline, max_age, context),
        wanted,
    )
    render_pricing(answer, as_json)
