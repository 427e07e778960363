"""What the catalog commands (`regions`, `types`, `resources`, `pricing`, `offers` and
`alloc --best`) share: the catalog a provider flag names, with the freshness flags wired
in, the providers several are asked of, and the flags as one query."""

from typing import TYPE_CHECKING

import typer

from cli.state import state
from providers.core.env import ENV_KUBE_CONTEXT

if TYPE_CHECKING:
    from providers.offers import OpenCatalog
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


def providers_for(
    ctx: typer.Context,
    provider: str | None,
    refresh: bool,
    offline: bool,
    max_age: str | None,
    context: str | None,
) -> tuple[list[str], "OpenCatalog"]:
    """The providers to ask (checked by name), and how each opens its catalog: with the
    freshness flags, on the thread that asks it, one progress display for them all."""
    import threading

    from cli import wiring
    from cli.commands.flags import not_empty
    from cli.state import state
    from providers.core.env import ENV_KUBE_CONTEXT
    from providers.core.errors import UsageError

    not_empty(max_age, "--max-age", "give a duration such as 6h or 2d, or leave --max-age out")
    not_empty(context, "--context", "give a kubeconfig context, or leave --context out")
    not_empty(provider, "--provider", "name providers such as aws,gcp, or leave -p out")
    if context:
        state(ctx).env_overrides[ENV_KUBE_CONTEXT] = context
    base = wiring.with_freshness(state(ctx).settings(), refresh, offline, max_age)
    if provider is None:
        from providers.offers.configured import configured_providers

        def cached() -> list[str]:
            from providers.cloud.catalog import open_cache

            cache = open_cache(base)
            try:
                return cache.providers()
            finally:
                cache.close()

        names = configured_providers(base.env, cached)
    else:
        names = provider_names(provider)
        if not names:
            raise UsageError("--provider is empty; name one, e.g. --provider aws,gcp")
        from providers.registry import builtin_provider_names

        # Before any thread starts: an unknown name is the user's error (2), not a failure
        # among others. Entry points are scanned (~25 ms) only for a name not built in.
        if set(names) - set(builtin_provider_names()):
            from providers.core.errors import UnknownNameError
            from providers.registry import provider_names as known

            listed = known()
            for name in names:
                if name not in listed:
                    raise UnknownNameError("provider", name, listed)
    lock = threading.Lock()
    progress = base.progress

    def shared(done: int, total: int | None, what: str) -> None:
        with lock:
            progress(done, total, what)

    def open_catalog(name: str) -> "Catalog":
        settings = wiring.with_freshness(state(ctx).settings(), refresh, offline, max_age)
        settings.progress = shared
        return wiring.catalog(name, settings)

    return names, open_catalog
