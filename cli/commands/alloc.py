"""`alloc`: allocate now, wait for capacity (--wait), book it ahead (--at) or claim a
booking (--reservation), and report what was allocated or booked."""

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.commands.alloc_definition import build_definition, definition_data, parse_pairs
from cli.commands.alloc_offers import best_offers, check_offers, place_offers
from cli.commands.alloc_report import report_booking, reported, wait_spec, waiting_line
from cli.commands.driver_service import flush_warnings, open_service
from cli.commands.flags import not_empty
from cli.commands.options import JsonOpt, LongOutputOpt
from providers.core.env import ENV_DRIVER
from providers.core.errors import UsageError

if TYPE_CHECKING:
    from drivers.service import Drivers

_BEST = "With --best (the request `shoal offers` takes)"


def alloc(
    ctx: typer.Context,
    definition: Annotated[
        str | None,
        typer.Argument(
            help="A definition file (JSON or YAML), or - to read one from stdin; flags add to "
            "it and override it."
        ),
    ] = None,
    driver: Annotated[
        str | None,
        typer.Option(
            "--driver",
            "-d",
            envvar=ENV_DRIVER,
            help="Driver or driver/instance (see `shoal drivers`).",
        ),
    ] = None,
    cpu: Annotated[int | None, typer.Option("--cpu", help="vCPUs to allocate (>= 1).")] = None,
    ram: Annotated[
        int | None, typer.Option("--ram", help="Memory to allocate in GiB (>= 1).")
    ] = None,
    lifetime: Annotated[
        str | None, typer.Option("--lifetime", help="How long it may live, e.g. 30m or 2h.")
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option(
            "--option", "-o", help="Driver option KEY=VALUE (VALUE as JSON when it parses)."
        ),
    ] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option("--meta", "-m", help="Metadata KEY=VALUE (process: env vars)."),
    ] = None,
    multitenancy: Annotated[
        bool | None,
        typer.Option("--multitenancy/--no-multitenancy", help="Tolerate other tenants."),
    ] = None,
    cpu_overbook: Annotated[
        bool | None,
        typer.Option("--cpu-overbook/--no-cpu-overbook", help="Tolerate CPU overbooking."),
    ] = None,
    ram_overbook: Annotated[
        bool | None,
        typer.Option("--ram-overbook/--no-ram-overbook", help="Tolerate RAM overbooking."),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print how many such definitions fit; allocate nothing."),
    ] = False,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait", help="Wait until it fits (first come, first served), then allocate."
        ),
    ] = False,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="DURATION",
            help="With --wait: give up after this long (e.g. 30s, 10m; exit 75).",
        ),
    ] = None,
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="TIME",
            help="Book the capacity for [TIME, TIME+lifetime) instead of allocating now "
            "(RFC 3339, a date, now, +2h); prints the reservation's id.",
        ),
    ] = None,
    reservation: Annotated[
        str | None,
        typer.Option(
            "--reservation",
            metavar="ID",
            help="Claim this reservation (from its start): allocate with the capacity it "
            "booked; flags and DEFINITION add to the booked definition.",
        ),
    ] = None,
    offers: Annotated[
        str | None,
        typer.Option(
            "--offers",
            metavar="FILE",
            help="Launch the first offer with room from this `shoal offers --json` output "
            "(- for stdin), failing over on no capacity: next zone, region, provider.",
        ),
    ] = None,
    best: Annotated[
        bool,
        typer.Option(
            "--best",
            help="Ask `shoal offers` now (the request flags below, --cpu, --ram) and launch "
            "the first offer with room, as --offers does.",
        ),
    ] = False,
    gpus: Annotated[
        int | None,
        typer.Option("--gpus", min=1, help="With --best: GPUs in total.", rich_help_panel=_BEST),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="With --best: GPU model, e.g. H100.", rich_help_panel=_BEST),
    ] = None,
    count: Annotated[
        int | None,
        typer.Option("--count", min=1, help="With --best: instances.", rich_help_panel=_BEST),
    ] = None,
    market: Annotated[
        str | None,
        typer.Option(
            "--market",
            help="With --best: on-demand, spot, or any (default; spot and on-demand offers, "
            "cheapest first).",
            rich_help_panel=_BEST,
        ),
    ] = None,
    arch: Annotated[
        str | None,
        typer.Option("--arch", help="With --best: x86_64 or arm64.", rich_help_panel=_BEST),
    ] = None,
    max_price: Annotated[
        float | None,
        typer.Option(
            "--max-price", help="With --best: most USD per hour in all.", rich_help_panel=_BEST
        ),
    ] = None,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            "-p",
            help="With --best: providers to ask, comma-separated; default: every configured one.",
            rich_help_panel=_BEST,
        ),
    ] = None,
    region: Annotated[
        list[str] | None,
        typer.Option(
            "--region",
            "-r",
            help="With --best: region (repeatable), or all.",
            rich_help_panel=_BEST,
        ),
    ] = None,
    as_json: JsonOpt = False,
    output_format: LongOutputOpt = None,
) -> None:
    """Allocate a resource from a definition and print its id.

    The definition names the driver, resources and options; flags add to it or override
    it, and flags alone are a definition too. Exits 75 when there is no capacity now
    (saying when it is expected back); --wait waits for it instead, --dry-run prints how
    many such definitions fit. --at books capacity ahead (a reservation, RESERVED), which
    --reservation ID later turns into the allocation; `shoal free ID` cancels it.

    --offers FILE (what `shoal offers --json` prints) or --best (the same query, asked now)
    launch the first offer that has room through its driver, each attempt named on stderr;
    one that finds no room is skipped by the next allocs for a few minutes. -o KEY=VALUE
    goes to every offer's driver, -o DRIVER.KEY=VALUE to that driver's (aws.image=ami-...,
    kubernetes.image=busybox). An offer of N instances prints N ids (--json: a list).

    \b
    Examples:
      shoal alloc --driver process --cpu 1 --ram 1 -o entry='sleep 3600'
      shoal alloc job.yaml --wait --timeout 30m
      shoal alloc job.yaml --at 2026-12-24T18:00:00Z --lifetime 2h
      shoal alloc --best --gpus 8 --gpu H100 -p aws,kubernetes --wait --timeout 1h
    """
    as_json = output.select(as_json, output_format)
    from drivers import service

    _check_values(driver, lifetime, timeout, at, reservation)
    _check_combination(dry_run, wait, timeout, at, reservation)
    asked = {
        "--gpus": gpus, "--gpu": gpu, "--count": count, "--market": market, "--arch": arch,
        "--max-price": max_price, "--provider": provider, "--region": region,
    }  # fmt: skip
    check_offers(offers, best, definition, dry_run, at, reservation, asked)
    waiting = wait_spec(wait, timeout)
    when = None
    if at is not None:
        from providers.core.timeutil import parse_when

        when = parse_when(at, "--at")
    svc = open_service(ctx)
    try:
        if offers is not None or best:
            options = parse_pairs(option, "--option", True)
            data, source = definition_data(
                definition, cpu, ram, lifetime, options, multitenancy, cpu_overbook, ram_overbook
            )
            if best:
                document = best_offers(
                    ctx, gpus, gpu, cpu, ram, count, market, arch, max_price, provider, region
                )
            else:
                from drivers.placement.document import read

                document = read(offers or "-")
            place_offers(svc, document, data, source, driver, parse_pairs(meta, "--meta", False),
                   waiting, as_json)  # fmt: skip
            return
        base = None
        if reservation is not None:
            from drivers.service import queue as scheduling

            base = scheduling.reserved_definition(svc, reservation)
        parsed = build_definition(
            definition,
            driver,
            cpu,
            ram,
            lifetime,
            parse_pairs(option, "--option", True),
            multitenancy,
            cpu_overbook,
            ram_overbook,
            base=base,
        )
        metadata = parse_pairs(meta, "--meta", False)
        if dry_run:
            result = service.dry_run(svc, parsed, at=when)
            if as_json:
                output.emit_json(result.to_json())
            else:
                fits = "unlimited" if result.unlimited else str(result.fits)
                sys.stdout.write(f"{fits}\n")
                span = "then" if when is not None else "now"
                output.message(f"{result.driver}: {fits} such definitions fit {span}")
                if result.choice is not None:
                    _show_choice(result.driver, result.choice, svc)
            return
        if when is not None:
            from drivers.service import queue as scheduling

            report_booking(scheduling.book(svc, parsed, metadata, when), as_json)
            return
        with waiting_line(waiting) as shown:
            report = reported(as_json, shown)
            if reservation is not None:
                from drivers.service import queue as scheduling

                scheduling.claim(svc, reservation, parsed, metadata, report, shown)
            else:
                service.allocate(svc, parsed, metadata, committed=report, wait=shown)
    finally:
        flush_warnings(svc)


CHOICE_ROWS = {"next": 3, "skipped": 10}


def _show_choice(driver: str, choice: dict[str, Any], svc: "Drivers") -> None:
    """What the driver would take and why, on stderr (stdout keeps the count): the choice,
    the next ones a fallback tries, the nearest cheaper ones with why each was skipped.
    A note the driver printed as a warning already is not said again."""
    from cli.commands.driver_service import warned

    def note(text: str) -> None:
        said = f"{driver}: {text}"
        if not warned(svc, said):
            output.message(said)

    def row(item: dict[str, Any], verdict: str) -> list[Any]:
        gpus = (
            f"{item.get('gpu_count')} {item.get('gpu') or ''}".strip()
            if item.get("gpu_count")
            else None
        )
        return [
            item.get("instance_type"),
            item.get("price"),
            item.get("vcpus"),
            item.get("memory_gib"),
            gpus,
            verdict,
        ]

    rows = [row(choice, "chosen")]
    rows += [row(item, "fits: next") for item in (choice.get("next") or [])[: CHOICE_ROWS["next"]]]
    rows += [
        row(item, str(item.get("reason")))
        for item in (choice.get("skipped") or [])[: CHOICE_ROWS["skipped"]]
    ]
    chosen, region, market = choice.get("instance_type"), choice.get("region"), choice.get("market")
    price = choice.get("price")
    priced = f" at {price:g} USD/h" if isinstance(price, (int, float)) else ""
    output.message(f"{driver}: {chosen} in {region}, {market}{priced}: {choice.get('why')}")
    from cli import tables

    columns = ["Type", "USD/h", "vCPUs", "GiB", "GPUs", "Verdict"]
    tables.table(None, columns, rows, stderr=True, wrap=5)
    skipped = choice.get("skipped_count") or 0
    if skipped:
        reasons = ", ".join(
            f"{n} {kind}" for kind, n in (choice.get("skipped_by_reason") or {}).items()
        )
        output.message(
            f"{driver}: {skipped} cheaper type(s) skipped ({reasons}); --json lists the nearest"
        )
    capacity = choice.get("capacity") or {}
    for quota in capacity.get("quotas") or []:
        free = quota.get("free")
        named = f" ({quota['name']})" if quota.get("name") else ""
        left = "unknown" if free is None else f"{free:g}"
        output.message(
            f"{driver}: quota {quota.get('quota')}{named}: {left} vCPUs free, "
            f"{quota.get('needs'):g} each"
        )
    if capacity.get("note"):
        note(str(capacity["note"]))
    for text in choice.get("notes") or []:
        note(str(text))


def _check_values(
    driver: str | None,
    lifetime: str | None,
    timeout: str | None,
    at: str | None,
    reservation: str | None,
) -> None:
    not_empty(driver, "--driver", "give a driver or driver/instance (see `shoal drivers`)")
    not_empty(lifetime, "--lifetime", "give a duration such as 30m or 2h, or leave --lifetime "
              "out for no lifetime")  # fmt: skip
    not_empty(timeout, "--timeout", "give a duration such as 30s or 10m, or leave --timeout "
              "out to wait without a limit")  # fmt: skip
    not_empty(at, "--at", "give a time such as +2h or 2026-12-24T18:00:00Z")
    not_empty(reservation, "--reservation", "give the id `alloc --at` printed")


def _check_combination(
    dry_run: bool, wait: bool, timeout: str | None, at: str | None, reservation: str | None
) -> None:
    if timeout is not None and not wait:
        raise UsageError("--timeout limits --wait: give --wait too (without it, alloc never waits)")
    if at is not None and reservation is not None:
        raise UsageError("--at books a reservation and --reservation claims one: give one of them")
    if at is not None and wait:
        raise UsageError("--at books ahead and returns at once; --wait waits to allocate now")
    if dry_run and (wait or reservation is not None):
        flag = "--wait" if wait else "--reservation"
        raise UsageError(f"--dry-run allocates nothing: drop {flag}")
