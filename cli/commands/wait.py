"""`wait`: until allocations end (printing each exit code) or are allocated."""

import sys
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from cli import output
from cli.commands.driver_service import flush_warnings, open_service
from cli.commands.flags import not_empty
from cli.commands.options import JsonOpt, OutputOpt

if TYPE_CHECKING:
    from drivers.service import Waited


class Condition(StrEnum):
    ENDED = "ended"
    ALLOCATED = "allocated"


def wait(
    ctx: typer.Context,
    alloc_ids: Annotated[
        list[str],
        typer.Argument(metavar="ID...", help="Allocation id(s) to wait for.", show_default=False),
    ],
    condition: Annotated[
        Condition,
        typer.Option(
            "--for",
            help="ended (exited, expired, freed, failed...: anything but holding or booked) "
            "or allocated.",
        ),
    ] = Condition.ENDED,
    timeout: Annotated[
        str | None,
        typer.Option(
            "--timeout",
            metavar="DURATION",
            help="Give up after this long (e.g. 30s, 10m; exit 75). Default: no limit.",
        ),
    ] = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Wait until allocations end and print their exit codes.

    As docker wait and kubectl wait; --for allocated waits for the allocation instead.
    For --for ended, one line per ID, in the order given, as soon as it and those
    before it have ended: the workload's exit code when its driver recorded one (128+N
    after signal N), else its status (FREED, EXPIRED...). For --for allocated (or with
    -o name), the ID. --json: an array of the allocations as `status ID --json` shows
    them. Exits 0 when all reached the state, whatever their exit codes; 75 on
    --timeout; 2 for an unknown ID; 1 when an allocation ended before it could be
    allocated.

    \b
    Examples:
      shoal wait process-35473a1e
      shoal wait process-35473a1e process-4b113fb1 --timeout 10m
      shoal wait process-1a2b3c4d --for allocated --json
    """
    as_json = output.select(as_json, output_format)
    from drivers import service

    not_empty(timeout, "--timeout", "give a duration such as 30s or 10m, or leave --timeout "
              "out to wait without a limit")  # fmt: skip
    seconds = None
    if timeout is not None:
        from providers.core.timeutil import parse_duration

        seconds = parse_duration(timeout, "--timeout").total_seconds()

    def each(one: "Waited") -> None:
        if as_json:
            return  # one array at the end
        named = condition is Condition.ALLOCATED or output.names()
        shown = one.view.allocation.id if named else one.shown()
        sys.stdout.write(f"{output.printable(shown)}\n")
        sys.stdout.flush()

    svc = open_service(ctx)
    try:
        reached = service.wait(svc, alloc_ids, condition.value, seconds, each=each)
    finally:
        flush_warnings(svc)
    if as_json:
        output.emit_json([one.view.to_json() for one in reached])
