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
    NoHeadersOpt,
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
    no_headers: NoHeadersOpt = False,
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
    as_json = output.select(as_json, output_format, no_headers=no_headers)
    if output.names():
        from providers.core.errors import UsageError

        raise UsageError("resources lists figures, not named things: use -o json or a table")
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

    if answer.window is not None:
        found = [
            [at, _region_name(res), *row]
            for at, res in answer.window.items()
            for row in resource_rows(res)
        ]
    else:
        found = [[_region_name(res), *row] for res in answer.now for row in resource_rows(res)]
    _resource_table(f"{provider} resources", found, window=answer.window is not None)


def _resource_table(title: str, found: list[list[Any]], window: bool) -> None:
    """Rows of [at (window), region, level, class, scheduled at, resource, figures...]. The
    region and level head their rows on a narrow terminal; a scheduled point says when it
    comes (`in 2h`), and `-o wide` its time."""
    from cli import tables
    from cli.render import SCHEDULED, starts_in
    from cli.tables import Col
    from providers.core.timeutil import utcnow

    now = utcnow()
    lead = 1 if window else 0  # the window's point in time, first
    scheduled = any(row[lead + 2] == SCHEDULED for row in found)
    wide = output.wide()
    columns = [
        *([Col("At", group="at {}")] if window else []),
        Col("Region", group="{}"),
        Col("Level", group="{}"),
        Col("Class"),
        *([Col("When")] if scheduled else []),
        Col("Resource"),
        Col("Supply"),
        Col("Allocated"),
        Col("Allocatable"),
        *([Col("When (UTC)")] if scheduled and wide else []),
    ]
    rows = []
    for row in found:
        head, (cls, at, *rest) = row[: lead + 2], row[lead + 2 :]
        when = starts_in(at, now) if at else (None if window else "now")
        rows.append(
            [
                *head,
                cls,
                *([when] if scheduled else []),
                *rest,
                *([at] if scheduled and wide else []),
            ]
        )
    tables.table(title, columns, rows)


def _region_name(res: Any) -> str:
    return str(res.region.name) if res.region else ""
