"""`alloc --offers` / `alloc --best`: the flags checked together, the offers asked now
(--best, the query `shoal offers` runs) and handed to placement's failover."""

from typing import TYPE_CHECKING, Any

import typer

from cli import output
from cli.commands.alloc_report import report as report_allocation
from cli.commands.alloc_report import waiting_line
from cli.commands.flags import not_empty
from providers.core.errors import UsageError

if TYPE_CHECKING:
    from drivers.placement.document import Document
    from drivers.placement.failover import Attempt
    from drivers.service import Drivers
    from drivers.service.queue import Wait
    from drivers.spec.views import AllocationView


def check_offers(
    offers: str | None,
    best: bool,
    definition: str | None,
    dry_run: bool,
    at: str | None,
    reservation: str | None,
    asked: dict[str, Any],
) -> None:
    not_empty(offers, "--offers", "give the file `shoal offers --json` wrote, or - for stdin")
    given = [flag for flag, value in asked.items() if value is not None]
    if given and not best:
        raise UsageError(
            f"{given[0]} is part of the request --best asks `shoal offers`; add --best (or "
            "drop it)"
        )
    if offers is None and not best:
        return
    if offers is not None and best:
        raise UsageError("--offers launches offers already found, --best finds them: give one")
    flag = "--offers" if offers is not None else "--best"
    for other, value in (("--dry-run", dry_run), ("--at", at), ("--reservation", reservation)):
        if value:
            fix = "`shoal offers` shows what fits now" if other == "--dry-run" else (
                "offers are launched now"
            )  # fmt: skip
            raise UsageError(f"{flag} with {other}: {fix}; drop {other}")
    if offers == "-" and definition == "-":
        raise UsageError("DEFINITION - and --offers - both read stdin; give one as a file")


def best_offers(
    ctx: typer.Context,
    gpus: int | None,
    gpu: str | None,
    cpu: int | None,
    ram: int | None,
    count: int | None,
    market: str | None,
    arch: str | None,
    max_price: float | None,
    provider: str | None,
    region: list[str] | None,
) -> "Document":
    """`shoal offers` asked now with these flags, as its command asks it."""
    from dataclasses import replace

    from cli.commands.catalog_query import providers_for
    from drivers.placement.document import of
    from providers.offers import OfferRequest, find_offers
    from providers.offers.request import checked

    request = checked(
        OfferRequest(
            gpus=gpus, gpu=gpu, cpu=cpu, ram=ram, count=count, market=market or "any",
            arch=arch, max_price=max_price, regions=tuple(region or ()),
        )
    )  # fmt: skip
    names, open_catalog = providers_for(ctx, provider, False, False, None, None)
    answer = find_offers(replace(request, providers=tuple(names)), names, open_catalog)
    if answer.error is not None:
        raise answer.error
    if answer.offers:  # else "no offer fits now" names them
        for failure in answer.failures:
            output.warn(failure.message)
    return of(answer.wire(), "alloc --best")


def place_offers(
    svc: "Drivers",
    document: "Document",
    data: dict[str, Any],
    source: str,
    driver: str | None,
    metadata: dict[str, Any],
    waiting: "Wait | None",
    as_json: bool,
) -> None:
    """Launch the first offer with room; the attempts on stderr, the allocations on
    stdout (one id per line; --json: a list of the allocations, one or more)."""
    from drivers import placement
    from drivers.placement.failover import place
    from drivers.placement.targets import Base

    # `--driver KIND/INSTANCE`: that instance launches KIND's offers (a bare KIND, as
    # SHOAL_DRIVER may give, changes nothing).
    instances = {}
    if driver and "/" in driver:
        from drivers.registry import canonical

        full = canonical(driver)
        instances[full.partition("/")[0]] = full
    made: list[AllocationView] = []

    def committed(view: "AllocationView") -> None:
        made.append(view)
        if not as_json:
            report_allocation(view, False)

    def tell(attempt: "Attempt") -> None:
        output.message(str(attempt))

    with waiting_line(waiting) as shown:
        place(
            svc,
            document,
            Base(data, source, instances),
            metadata,
            report=tell,
            committed=committed,
            wait=shown,
            memory=placement.memory(svc.settings),
        )
    if as_json:
        # Always a list, whatever the count: an offer may need several instances.
        output.emit_json([v.to_json() for v in made])
