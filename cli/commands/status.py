"""`status`: one allocation reconciled with its driver, or the list of them as a table
(filtered, sorted, --remote, or redrawn in place with --watch)."""

import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.commands.driver_service import flush_warnings, open_service
from cli.commands.flags import not_empty
from cli.commands.options import JsonOpt, OutputOpt
from providers.core.errors import UsageError

if TYPE_CHECKING:
    from drivers.service import Drivers, Listing
    from drivers.spec.views import Summary


def status(
    ctx: typer.Context,
    alloc_id: Annotated[
        str | None,
        typer.Argument(metavar="[ID]", help="Allocation id; without one, list allocations."),
    ] = None,
    include_ended: Annotated[
        bool, typer.Option("--all", help="Also list freed and failed ones.")
    ] = False,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            metavar="DRIVER",
            help="List what DRIVER's shared backend holds for shoal, from any machine "
            "(kubernetes: pods and jobs; container: the engine's containers; aws: the "
            "region's instances).",
        ),
    ] = None,
    driver: Annotated[
        str | None,
        typer.Option("--driver", "-d", help="Only this driver (test) or instance (test/dev)."),
    ] = None,
    statuses: Annotated[
        list[str] | None,
        typer.Option(
            "--status", help="Only these statuses (repeat or comma-separate; implies --all)."
        ),
    ] = None,
    sort: Annotated[
        str | None,
        typer.Option(
            "--sort",
            help="Sort by id, driver, status, cpu, ram, created, expires or updated; "
            "prefix '-' for descending.",
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option("--watch", "-w", help="Refresh the list in place every 2 s (a terminal)."),
    ] = False,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Show one allocation, reconciled with its driver, or list them.

    With an ID: its fields, the driver's own status and any drift between the two.
    Without: the allocations that have not ended (--all adds freed and failed ones),
    filtered by --driver and --status and ordered by --sort.

    \b
    Examples:
      shoal status
      shoal status process-35473a1e
      shoal status --driver test --status allocated,failed --sort -created
      shoal status --remote kubernetes --json
    """
    as_json = output.select(as_json, output_format)
    from drivers import service

    not_empty(remote, "--remote", "give a driver (see `shoal drivers`), or leave --remote out")
    not_empty(driver, "--driver", "give a driver or driver/instance, or leave --driver out")
    for given in statuses or []:
        not_empty(given, "--status", "give statuses such as allocated,failed")
    listing = service.Listing.parse(driver, statuses, sort)
    if alloc_id is not None and not listing.is_plain():
        raise UsageError("--driver, --status and --sort filter a list; give no ID with them")
    svc = open_service(ctx)
    if watch:
        if as_json or alloc_id is not None or remote is not None or not sys.stdout.isatty():
            raise UsageError("--watch refreshes the list table on a terminal; drop --json/ID")
        _watch(svc, include_ended, listing)
        return
    if remote is not None:
        found = service.remote_allocations(svc, remote)
        if as_json:
            output.emit_json(found)
        else:
            from drivers.spec.views import Summary

            shown = [Summary.from_json(row) for row in found]
            _allocation_table(f"{remote}: shoal's allocations (any machine)", shown)
        return
    try:
        if alloc_id is None and as_json and listing.is_plain():
            output.emit_json_rows(service.list_allocations_json(svc, include_ended=include_ended))
            return
        if alloc_id is None:
            rows = service.list_allocations(svc, include_ended=include_ended, listing=listing)
        else:
            one = service.status(svc, alloc_id)
    finally:
        flush_warnings(svc)
    if alloc_id is None:
        if as_json:
            output.emit_json([row.to_json() for row in rows])
        else:
            _allocation_table("allocations", rows)
        return
    if as_json:
        output.emit_json(one.to_json())
        return
    described = one.to_json()
    fields = ["id", "driver", "status", "driver_status", "cpu", "ram", "created", "expires", "note"]
    table_rows: list[list[Any]] = [[f, described.get(f)] for f in fields]
    table_rows += [
        [f"detail.{k}", v] for k, v in (one.detail or {}).items() if v not in ("", None)
    ]
    output.table(None, ["Field", "Value"], table_rows)
    if one.drift:
        output.warn(f"drift: {one.drift}")


WATCH_SECONDS = 2.0


def _watch(svc: "Drivers", include_ended: bool, listing: "Listing") -> None:
    """Redraw the list until Ctrl-C, which ends the watch (exit 0: nothing was interrupted)."""
    import time

    from drivers import service

    try:
        while True:
            rows = service.list_allocations(svc, include_ended=include_ended, listing=listing)
            sys.stdout.write("\x1b[H\x1b[2J")  # home, clear: the table redrawn in place
            _allocation_table(f"allocations (every {WATCH_SECONDS:g}s; Ctrl-C ends)", rows)
            flush_warnings(svc)
            svc.warnings.clear()
            sys.stdout.flush()
            time.sleep(WATCH_SECONDS)
    except KeyboardInterrupt:
        sys.stdout.write("\n")


def _allocation_table(title: str, rows: "list[Summary]") -> None:
    from cli.render import ALLOCATION_COLUMNS, WIDE_COLUMNS, allocation_rows

    if not rows:
        output.message("no allocations")
        return
    wide = output.wide()
    output.table(
        title,
        ALLOCATION_COLUMNS + (WIDE_COLUMNS if wide else []),
        allocation_rows(rows, wide),
        keep=(0, 1, 2),
        wrap=7,
    )
