"""`status`: one allocation reconciled with its driver, or the list of them as a table
(filtered, by metadata too, sorted, --remote), or followed with --watch: redrawn in place
on a terminal, its changes streamed line by line elsewhere."""

import contextlib
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.commands.driver_service import flush_warnings, open_service
from cli.commands.flags import not_empty
from cli.commands.options import JsonOpt, NoHeadersOpt, OutputOpt, QuietOpt
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
    selectors: Annotated[
        list[str] | None,
        typer.Option(
            "--selector",
            "-l",
            metavar="SELECTOR",
            help="Only allocations whose metadata (alloc --meta) matches: KEY=VALUE, "
            "KEY!=VALUE, KEY in (A,B), KEY notin (A,B), KEY, !KEY (repeat or "
            "comma-separate: all must match).",
        ),
    ] = None,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            "-w",
            help="Follow the list: on a terminal redrawn every 2 s; piped (or with -o "
            "json, -q) printed once, then a line per allocation that changed.",
        ),
    ] = False,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
    no_headers: NoHeadersOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Show one allocation, reconciled with its driver, or list them.

    With an ID: its fields, the driver's own status and any drift between the two.
    Without: the allocations that have not ended (--all adds freed and failed ones),
    filtered by --driver, --status and -l (metadata) and ordered by --sort. --watch
    follows it until Ctrl-C (or the reader of a pipe goes): with -o json one object per
    line, the list first, then each allocation whose status or note changed.

    \b
    Examples:
      shoal status
      shoal status process-35473a1e
      shoal status -l team=ml --status allocated,failed --sort -created
      shoal status -w -o json | jq -r '.id + " " + .status'
    """
    as_json = output.select(as_json, output_format, quiet=quiet, no_headers=no_headers)
    from drivers import service

    not_empty(remote, "--remote", "give a driver (see `shoal drivers`), or leave --remote out")
    not_empty(driver, "--driver", "give a driver or driver/instance, or leave --driver out")
    for given in statuses or []:
        not_empty(given, "--status", "give statuses such as allocated,failed")
    for given in selectors or []:
        not_empty(given, "-l", "give a selector such as team=ml, or leave -l out")
    listing = service.Listing.parse(driver, statuses, sort, selectors)
    if alloc_id is not None and not listing.is_plain():
        raise UsageError("--driver, --status, -l and --sort filter a list; give no ID with them")
    if remote is not None and listing.labels:
        raise UsageError("-l filters this machine's ledger by metadata; drop it with --remote")
    if watch:
        _check_watch(alloc_id, remote, output_format)
    svc = open_service(ctx)
    if watch:
        if as_json or output.names() or not sys.stdout.isatty():
            _stream(svc, include_ended, listing, as_json)
        else:
            _watch(svc, include_ended, listing)
        return
    if remote is not None:
        found = service.remote_allocations(svc, remote)
        if output.names():
            output.emit_names(str(row.get("id", "")) for row in found)
        elif as_json:
            output.emit_json(found)
        else:
            from drivers.spec.views import Summary

            shown = [Summary.from_json(row) for row in found]
            _allocation_table(f"{remote}: shoal's allocations (any machine)", shown)
        return
    try:
        if alloc_id is None and as_json:
            output.emit_json_rows(
                service.list_allocations_json(svc, include_ended=include_ended, listing=listing)
            )
            return
        if alloc_id is None:
            rows = service.list_allocations(svc, include_ended=include_ended, listing=listing)
        else:
            one = service.status(svc, alloc_id)
    finally:
        flush_warnings(svc)
    if alloc_id is None:
        if output.names():
            output.emit_names(row.id for row in rows)
        else:
            _allocation_table("allocations", rows)
        return
    if output.names():
        output.emit_names([one.allocation.id])
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
    from cli import tables  # not for --json: no table, no Rich

    tables.table(None, ["Field", "Value"], table_rows)
    if one.drift:
        output.warn(f"drift: {one.drift}")


WATCH_SECONDS = 2.0


def _check_watch(alloc_id: str | None, remote: str | None, output_format: str | None) -> None:
    if alloc_id is not None:
        raise UsageError(
            "--watch follows the list; for one allocation, `shoal wait ID` waits for it to "
            "end (or `--for allocated`)"
        )
    if remote is not None:
        raise UsageError("--watch follows this machine's ledger; drop --remote")
    if (output_format or "").strip().lower() == "yaml":
        raise UsageError("--watch streams one JSON object per line: use -o json, not yaml")


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


def _stream(svc: "Drivers", include_ended: bool, listing: "Listing", as_json: bool) -> None:
    """--watch piped, or as JSON lines or ids (kubectl get -w): the list once, then each
    allocation whose status or note changed (one that leaves the list, freed, shows its
    last status), until Ctrl-C or the reader of the pipe goes: exit 0 either way, and
    nothing on stderr."""
    import json

    from drivers import service
    from drivers.spec.views import Summary
    from providers.core.errors import NotFoundError

    shown: dict[str, tuple[Any, Any]] = {}
    first = True
    try:
        while True:
            changed = []
            rows = service.list_allocation_objects(
                svc, include_ended=include_ended, listing=listing
            )
            for row in rows:
                now = (row.get("status"), row.get("note"))
                if shown.get(row["id"]) != now:
                    shown[row["id"]] = now
                    changed.append(row)
            listed = {row["id"] for row in rows}
            for gone in [one for one in shown if one not in listed]:
                del shown[gone]  # it left the list (freed, failed): its last word, once
                with contextlib.suppress(NotFoundError):
                    changed.append(service.status(svc, gone).to_json())
            if as_json:
                sys.stdout.writelines(
                    json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"
                    for row in changed
                )
            elif output.names():
                output.emit_names(row["id"] for row in changed)
            elif changed or first:
                _allocation_table("allocations", [Summary.from_json(row) for row in changed])
                if changed:
                    # The rows that follow come without the table's header, as kubectl's do.
                    output.select(False, "wide" if output.wide() else "table", no_headers=True)
            first = False
            sys.stdout.flush()
            flush_warnings(svc)
            svc.warnings.clear()
            if _reader_gone(WATCH_SECONDS):
                break
    except KeyboardInterrupt:
        return  # how a watch ends: nothing was interrupted
    except BrokenPipeError:
        pass
    _stdout_to_devnull()


def _reader_gone(seconds: float) -> bool:
    """Sleep `seconds`, less if the reader of a piped stdout goes (`| head`): True then,
    so a watch with nothing new to print still ends with its reader."""
    import select
    import time

    try:
        fd = sys.stdout.fileno()
    except (OSError, ValueError):  # not a file (a test's capture): a plain sleep
        time.sleep(seconds)
        return False
    poller = select.poll()
    poller.register(fd, 0)  # no event asked: only an error (no reader left) or a hang-up
    return bool(poller.poll(int(seconds * 1000)))


def _stdout_to_devnull() -> None:
    """The reader went: nothing more to say, and nothing for the exit's flush to fail on."""
    import contextlib
    import os

    with contextlib.suppress(OSError, ValueError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def _allocation_table(title: str, rows: "list[Summary]") -> None:
    from cli import tables
    from cli.render import allocation_columns, allocation_rows

    if not rows:
        output.message("no allocations")
        return
    wide = output.wide()
    tables.table(title, allocation_columns(rows, wide), allocation_rows(rows, wide))
