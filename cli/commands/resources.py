"""`resources`: supply, allocated and allocatable, now and over a window."""

from typing import TYPE_CHECKING, Any

import typer

from cli import output
from cli.commands.catalog_query import catalog_for, query_of
from cli.commands.options import (
    ContextOpt,
    EndOpt,
    JsonOpt,
    MaxAgeOpt,
    OfflineOpt,
    OutputOpt,
    ProviderOpt,
    RefreshOpt,
    RegionOpt,
    SelectOpt,
    StartOpt,
)
from providers.core.env import DEFAULT_PROVIDER

if TYPE_CHECKING:
    pass


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

    wanted = query_of(region, select, start, end)
    answer = query.resources(
        catalog_for(ctx, provider, refresh, offline, max_age, context=context), wanted
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


def _region_name(res: Any) -> str:
    return str(res.region.name) if res.region else ""
