"""The Typer option declarations the commands share (`--json`, `--output`, `--provider`,
`--region`, `--select`, freshness and window flags), declared once."""

from typing import Annotated

import typer

from providers.core.env import ENV_KUBE_CONTEXT, ENV_PROVIDER
from providers.selector_keys import HELP as SELECT_HELP

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
        "-o",
        metavar="FORMAT",
        help="table, wide (more columns), json (as --json), yaml, or name (one id per line).",
    ),
]
# alloc keeps `-o KEY=VALUE` for driver options (the ssh/mount habit): --output is long only.
LongOutputOpt = Annotated[
    str | None,
    typer.Option(
        "--output",
        metavar="FORMAT",
        help="table, json (as --json) or yaml.",
    ),
]
NoHeadersOpt = Annotated[
    bool, typer.Option("--no-headers", help="Tables without their header line (for awk, cut).")
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Only ids, one per line (as -o name).")
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
