"""What the catalog commands (`regions`, `types`, `resources`, `pricing`) share: the catalog
a provider flag names, with the freshness flags wired in, and the flags as one query."""

from typing import TYPE_CHECKING

import typer

from cli.state import state
from providers.core.env import ENV_KUBE_CONTEXT

if TYPE_CHECKING:
    from providers.query import Query
    from providers.registry import Catalog


def catalog_for(
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


def provider_names(provider: str) -> list[str]:
    return [n.strip() for n in provider.split(",") if n.strip()]


def query_of(
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
