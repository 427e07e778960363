"""`offers`: where a request fits cheapest right now, across providers and regions."""

from typing import TYPE_CHECKING, Annotated

import click
import typer

from cli import output
from cli.commands.catalog_query import providers_for
from cli.commands.options import (
    ContextOpt,
    JsonOpt,
    LimitOpt,
    MaxAgeOpt,
    NoHeadersOpt,
    OfflineOpt,
    OutputOpt,
    QuietOpt,
    RefreshOpt,
)

if TYPE_CHECKING:
    pass


def offers(
    ctx: typer.Context,
    gpus: Annotated[
        int | None,
        typer.Option(
            "--gpus",
            min=1,
            help="GPUs in total: a 1-GPU type is offered as N instances, an 8-GPU type as "
            "N/8 (rounded up).",
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="GPU model, e.g. H100, or with memory: A100-80GB."),
    ] = None,
    cpu: Annotated[
        float | None, typer.Option("--cpu", help="Least vCPUs of each instance.")
    ] = None,
    ram: Annotated[
        float | None, typer.Option("--ram", help="Least memory of each instance, GiB.")
    ] = None,
    count: Annotated[
        int | None,
        typer.Option(
            "--count",
            min=1,
            help="Instances (with --gpus: this many, sharing the GPUs); default: as many "
            "as --gpus needs, else 1.",
        ),
    ] = None,
    market: Annotated[
        str,
        typer.Option(
            "--market",
            metavar="MARKET",
            click_type=click.Choice(["on-demand", "spot", "any"]),
            help="on-demand, spot, or any (an offer per market).",
        ),
    ] = "any",
    arch: Annotated[
        str | None,
        typer.Option(
            "--arch",
            metavar="ARCH",
            click_type=click.Choice(["x86_64", "arm64"]),
            help="x86_64 or arm64 (types of other arches are left out).",
        ),
    ] = None,
    max_price: Annotated[
        float | None,
        typer.Option("--max-price", help="Most USD per hour for all the instances together."),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            "-p",
            help="Providers to ask, comma-separated (aws,azure,gcp,kubernetes,local); "
            "default: every one configured here.",
        ),
    ] = None,
    region: Annotated[
        list[str] | None,
        typer.Option(
            "--region",
            "-r",
            help="Region (repeatable; of any provider asked: each takes its own), or all. "
            "None: the regions already cached, or each provider's default.",
        ),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            metavar="ORDER",
            click_type=click.Choice(["total", "gpu-hour", "fit"]),
            help="total (USD per hour, the default), gpu-hour, or fit (most instances "
            "that fit now first); offers that fit now always come first.",
        ),
    ] = None,
    group_by: Annotated[
        str | None,
        typer.Option(
            "--group-by",
            metavar="KEY",
            click_type=click.Choice(["gpu"]),
            help="gpu: the cheapest offer per GPU model ($/GPU-hour).",
        ),
    ] = None,
    explain: Annotated[
        bool,
        typer.Option("--explain", help="Also list the candidates left out, each with why."),
    ] = False,
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
    """Show where GPUs, vCPUs and memory fit cheapest right now.

    Each offer has its instance type's shape, market, instances needed, price per hour,
    per GPU-hour and in total, how many instances fit now (the account's quotas, an open
    reservation, a Kubernetes pool's free nodes, the local host) and the limit that binds.
    Providers are asked at once; one that fails is named and the others still answer.
    The JSON always lists the candidates left out, with why.

    \b
    Examples:
      shoal offers --gpus 8 --gpu H100 -p aws,gcp -r all
      shoal offers --gpus 8 --market spot --sort gpu-hour --limit 10
      shoal offers --gpus 1 --group-by gpu --json
      shoal offers --cpu 8 --ram 32 --arch arm64 --max-price 1 --explain
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from cli.offers_view import render_offers
    from providers.offers import OfferRequest, find_offers
    from providers.offers.request import checked

    request = checked(
        OfferRequest(
            gpus=gpus,
            gpu=gpu,
            cpu=cpu,
            ram=ram,
            count=count,
            market=market,
            arch=arch,
            max_price=max_price,
            regions=tuple(region or ()),
            sort=sort,
            group_by=group_by,
            limit=limit,
        )
    )
    names, open_catalog = providers_for(ctx, provider, refresh, offline, max_age, context)
    answer = find_offers(request, names, open_catalog)
    render_offers(answer, as_json, explain=explain)
