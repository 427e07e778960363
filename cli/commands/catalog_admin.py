"""`catalog status`, `catalog export`, `catalog import`: the cloud catalogs' cache."""

import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli import output
from cli.commands.catalog import JsonOpt, OutputOpt
from cli.state import state

if TYPE_CHECKING:
    from providers.cloud.cache import CatalogCache

app = typer.Typer(
    help="Show, export and import the cached cloud catalogs (refresh once, share the file).",
    no_args_is_help=True,
)


def _cache(ctx: typer.Context) -> "CatalogCache":
    from providers.cloud.catalog import open_cache

    return open_cache(state(ctx).settings())


@app.command()
def status(ctx: typer.Context, as_json: JsonOpt = False, output_format: OutputOpt = None) -> None:
    """What is cached: provider, region, fetch time, age, instance types, staleness."""
    as_json = output.select(as_json, output_format)
    from providers.cloud import config
    from providers.cloud.catalog import human_age
    from providers.timeutil import utcnow
    from providers.wire import format_time

    settings = state(ctx).settings()
    cache = _cache(ctx)
    now = utcnow()
    rows = []
    for provider in cache.providers():
        ttl = config.ttl(settings, provider)
        for info in cache.snapshots(provider).values():
            age = now - info.fetched_at
            rows.append(
                {
                    "provider": provider,
                    "region": info.region,
                    "fetchedAt": format_time(info.fetched_at),
                    "ageSeconds": int(age.total_seconds()),
                    "stale": age > ttl,
                    "instanceTypes": len(cache.offers(provider, info.region)),
                    "source": info.source,
                    "notes": list(info.notes),
                }
            )
    if as_json:
        output.emit_json(rows)
        return
    output.table(
        "cached catalogs",
        ["Provider", "Region", "Fetched (UTC)", "Age", "Stale", "Types", "Source"],
        [
            [
                r["provider"],
                r["region"],
                output.short_time(str(r["fetchedAt"])),
                human_age(timedelta(seconds=int(str(r["ageSeconds"])))),
                "yes" if r["stale"] else "no",
                r["instanceTypes"],
                r["source"],
            ]
            for r in rows
        ],
    )
    if not rows:
        output.message("nothing cached yet: `shoal pricing --provider aws` fetches and caches")


@app.command("export")
def export_(
    ctx: typer.Context,
    provider: Annotated[str, typer.Option("--provider", "-p", help="Provider to export.")],
    output_file: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="File to write (.gz compresses); default stdout."),
    ] = None,
) -> None:
    """Write a provider's cached catalog (latest prices and history) to a file."""
    from providers.cloud import share

    document = share.export(_cache(ctx), provider)
    share.write(document, output_file, sys.stdout)
    if output_file is not None:
        output.message(
            f"{provider}: {len(document['snapshots'])} regions, "
            f"{len(document['history'])} history points -> {output_file}"
        )


@app.command("import")
def import_(
    ctx: typer.Context,
    files: Annotated[list[Path], typer.Argument(help="Files written by `catalog export`.")],
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Load exported catalogs; local data newer than the file's is kept."""
    as_json = output.select(as_json, output_format)
    from providers.cloud import share

    cache = _cache(ctx)
    reports = [share.load(cache, path) for path in files]
    if as_json:
        output.emit_json(
            [
                {
                    "provider": r.provider,
                    "imported": r.imported,
                    "kept": r.kept,
                    "historyAdded": r.history_added,
                }
                for r in reports
            ]
        )
        return
    for r in reports:
        kept = f", {len(r.kept)} kept (local data newer)" if r.kept else ""
        output.message(
            f"{r.provider}: {len(r.imported)} regions imported{kept}, "
            f"{r.history_added} history points added"
        )
