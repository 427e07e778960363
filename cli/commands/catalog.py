"""`catalog status`, `catalog export`, `catalog import`: the cloud catalogs' cache."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from cli import output, tables
from cli.commands.options import JsonOpt, NoHeadersOpt, OutputOpt, QuietOpt
from cli.state import state

if TYPE_CHECKING:
    from providers.cloud.cache import CatalogCache

app = typer.Typer(
    help="""Show, export and import the cached cloud catalogs.

    Refresh a catalog once where there is network (and credentials), then share the
    file with machines that have neither.

    \b
    Examples:
      shoal catalog status
      shoal catalog export -p aws --file aws.json.gz
      shoal catalog import aws.json.gz
    """,
    no_args_is_help=True,
)


def _cache(ctx: typer.Context) -> "CatalogCache":
    from providers.cloud.catalog import open_cache

    return open_cache(state(ctx).settings())


@app.command()
def status(
    ctx: typer.Context,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Show what is cached: provider, region, fetch time, age, staleness.

    -q (-o name) prints PROVIDER/REGION, one per line.

    \b
    Examples:
      shoal catalog status
      shoal catalog status --json
      shoal catalog status -q
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from providers import config
    from providers.core.timeutil import human_duration, utcnow
    from providers.core.wire import format_time

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
    if output.names():
        output.emit_names(f"{r['provider']}/{r['region']}" for r in rows)
        return
    tables.table(
        "cached catalogs",
        ["Provider", "Region", "Fetched (UTC)", "Age", "Stale", "Types", "Source"],
        [
            [
                r["provider"],
                r["region"],
                output.short_time(str(r["fetchedAt"])),
                human_duration(int(str(r["ageSeconds"]))),
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
        typer.Option(
            "--file", metavar="FILE", help="File to write (.gz compresses); default stdout."
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="With --file: print what was written where, as JSON."),
    ] = False,
) -> None:
    """Write a provider's cached catalog (prices and history) to a file.

    Without --file the export goes to stdout (it is JSON), so a pipe to another
    machine's `shoal catalog import -` moves it.

    \b
    Examples:
      shoal catalog export -p aws --file aws.json.gz
      shoal catalog export -p aws --file aws.json --json
      shoal catalog export -p aws | ssh runner shoal catalog import -
    """
    from providers.cloud import share
    from providers.core.errors import UsageError

    if as_json and output_file is None:
        raise UsageError("--json reports a written file: add --file FILE (stdout is the export)")
    document = share.export(_cache(ctx), provider)
    share.write(document, output_file, sys.stdout)
    if output_file is None:
        return
    summary = {
        "provider": provider,
        "path": str(output_file.resolve()),
        "regions": len(document["snapshots"]),
        "historyPoints": len(document["history"]),
    }
    if as_json:
        output.emit_json(summary)
    else:
        output.message(
            f"{provider}: {summary['regions']} regions, {summary['historyPoints']} history "
            f"points -> {summary['path']}"
        )


@app.command("import")
def import_(
    ctx: typer.Context,
    files: Annotated[
        list[Path],
        typer.Argument(
            help="Files written by `catalog export`, or - for stdin.", metavar="FILE..."
        ),
    ],
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Load exported catalogs; local data newer than the file's is kept.

    \b
    Examples:
      shoal catalog import aws.json.gz
      shoal catalog import aws.json.gz azure.json.gz --json
      shoal catalog import - < gcp.json
    """
    as_json = output.select(as_json, output_format)
    from providers.cloud import share

    cache = _cache(ctx)
    reports = [
        share.load(cache, Path("<stdin>"), sys.stdin.buffer.read())
        if str(path) == "-"
        else share.load(cache, path)
        for path in files
    ]
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
