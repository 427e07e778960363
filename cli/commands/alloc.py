"""`alloc`, `status`, `free`, `task`, `drivers`: resources through the driver list."""

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from cli import output
from cli.commands.catalog import JsonOpt, OutputOpt
from cli.state import state
from providers.core.env import ENV_DRIVER
from providers.core.errors import UsageError

if TYPE_CHECKING:
    from drivers.scheduling import Wait
    from drivers.service import Drivers, Listing
    from drivers.types import LabelDefinition
    from drivers.views import AllocationView, FreeResult, Summary


def _drivers(ctx: typer.Context) -> "Drivers":
    from cli import wiring

    return wiring.drivers(state(ctx).settings())


def _flush_warnings(service: "Drivers") -> None:
    for text in service.warnings:
        output.warn(text)


def _pairs(values: list[str] | None, flag: str, parse_json: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw in values or []:
        key, sep, value = raw.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {raw!r}: use KEY=VALUE")
        if parse_json:
            from providers.core.numbers import reject_constant

            try:
                # NaN/Infinity stay strings, which the option's type check then refuses.
                out[key] = json.loads(value, parse_constant=reject_constant)
            except (ValueError, RecursionError):
                out[key] = value
        else:
            out[key] = value
    return out


def _utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "save the definition as UTF-8"
        ) from None


def _read_definition(path: str) -> tuple[str, str]:
    if path == "-":
        return _utf8(sys.stdin.buffer.read(), "<stdin>"), "<stdin>"
    try:
        with open(path, "rb") as fh:
            return _utf8(fh.read(), path), path
    except FileNotFoundError:
        raise UsageError(
            f"DEFINITION {path!r}: no such file; give a JSON/YAML file or - for stdin"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"DEFINITION {path!r}: cannot read: {exc}") from None


def _definition(
    path: str | None,
    driver: str | None,
    cpu: int | None,
    ram: int | None,
    lifetime: str | None,
    options: dict[str, Any],
    multitenancy: bool | None,
    cpu_overbook: bool | None,
    ram_overbook: bool | None,
    base: dict[str, Any] | None = None,
) -> "LabelDefinition":
    """The definition from a file (or stdin) and flags; `base` (a reservation's booked
    definition) is what they add to and override."""
    from drivers import definition as defs

    if path is not None:
        text, source = _read_definition(path)
        data = defs.parse_document(text, source)
        if not isinstance(data, dict):
            raise UsageError(f"{source}: a definition is an object with driver, resources, options")
    else:
        data, source = {}, "definition"
    if base is not None:
        data = _overlay(base, data)
    resources = data.setdefault("resources", {})
    if not isinstance(resources, dict):
        raise UsageError(f"{source}: resources must be an object")
    flags = {
        "cpu": cpu,
        "ram": ram,
        "lifetime": lifetime,
        "multitenancy": multitenancy,
        "cpu_overbook": cpu_overbook,
        "ram_overbook": ram_overbook,
    }
    resources.update({k: v for k, v in flags.items() if v is not None})
    if driver:
        data["driver"] = driver
    if options:
        merged = data.setdefault("options", {})
        if not isinstance(merged, dict):
            raise UsageError(f"{source}: options must be an object")
        merged.update(options)
    return defs.build(data, source)


def _overlay(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`, one level into `resources` and `options` (as flags over a file)."""
    merged = {**base, **top}
    for key in ("resources", "options"):
        below, above = base.get(key), top.get(key)
        if isinstance(below, dict) and isinstance(above, dict):
            merged[key] = {**below, **above}
    return merged


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
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Allocate a resource from a definition and print its id.

    The definition names the driver, resources and options; flags add to it or override
    it, and flags alone are a definition too. Exits 75 when there is no capacity now
    (saying when it is expected back); --wait waits for it instead, --dry-run prints how
    many such definitions fit. --at books capacity ahead (a reservation, RESERVED), which
    --reservation ID later turns into the allocation; `shoal free ID` cancels it.

    \b
    Examples:
      shoal alloc --driver process --cpu 1 --ram 1 -o entry='sleep 3600'
      shoal alloc job.yaml --wait --timeout 30m
      shoal alloc job.yaml --at 2026-12-24T18:00:00Z --lifetime 2h
      shoal alloc --reservation process-1a2b3c4d -o entry='make test'
    """
    as_json = output.select(as_json, output_format)
    from drivers import service

    _check_combination(dry_run, wait, timeout, at, reservation)
    waiting = _wait_spec(wait, timeout)
    when = None
    if at is not None:
        from providers.core.timeutil import parse_when

        when = parse_when(at, "--at")
    svc = _drivers(ctx)
    try:
        base = None
        if reservation is not None:
            from drivers import scheduling

            base = scheduling.reserved_definition(svc, reservation)
        parsed = _definition(
            definition,
            driver,
            cpu,
            ram,
            lifetime,
            _pairs(option, "--option", True),
            multitenancy,
            cpu_overbook,
            ram_overbook,
            base=base,
        )
        metadata = _pairs(meta, "--meta", False)
        if dry_run:
            result = service.dry_run(svc, parsed, at=when)
            if as_json:
                output.emit_json(result.to_json())
            else:
                fits = "unlimited" if result.unlimited else str(result.fits)
                sys.stdout.write(f"{fits}\n")
                span = "then" if when is not None else "now"
                output.message(f"{result.driver}: {fits} such definitions fit {span}")
            return
        if when is not None:
            from drivers import scheduling

            _report_booking(scheduling.book(svc, parsed, metadata, when), as_json)
            return
        with _progress(waiting) as shown:
            report = _reported(as_json, shown)
            if reservation is not None:
                from drivers import scheduling

                scheduling.claim(svc, reservation, parsed, metadata, report, shown)
            else:
                service.allocate(svc, parsed, metadata, committed=report, wait=shown)
    finally:
        _flush_warnings(svc)


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


def _wait_spec(wait: bool, timeout: str | None) -> "Wait | None":
    if not wait:
        return None
    from drivers.scheduling import Wait
    from providers.core.timeutil import parse_duration

    seconds = parse_duration(timeout, "--timeout").total_seconds() if timeout else None
    return Wait(timeout=seconds)


@contextlib.contextmanager
def _progress(waiting: "Wait | None") -> "Iterator[Wait | None]":
    """On a terminal, a waiter shows on stderr what it waits for and for how long, on one
    line redrawn in place and cleared when the wait ends; off one it says so once."""
    if waiting is None:
        yield None
        return
    from dataclasses import replace

    from drivers.scheduling import WaitState

    terminal = sys.stderr.isatty()
    said: list[bool] = []

    def show(state: WaitState) -> None:
        ahead = f"{state.ahead} ahead, " if state.ahead else ""
        left = (
            f"; gives up in {output.duration(state.remaining)}"
            if state.remaining is not None
            else ""
        )
        line = f"waiting for {state.what}: {ahead}{output.duration(state.waited)} so far{left}"
        if terminal:
            sys.stderr.write(f"\r\x1b[2K{line} (Ctrl-C gives up)")
            sys.stderr.flush()
            said[:] = [True]
        elif not said:
            queued = f" ({state.ahead} ahead)" if state.ahead else ""
            output.message(f"waiting for {state.what}{queued}")
            said.append(True)

    try:
        yield replace(waiting, progress=show, redraw=terminal)
    finally:
        if terminal and said:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def _reported(as_json: bool, waiting: "Wait | None") -> "Callable[[AllocationView], None]":
    def report(got: "AllocationView") -> None:
        if waiting is not None and waiting.progress is not None and sys.stderr.isatty():
            sys.stderr.write("\r\x1b[2K")
        _report(got, as_json)

    return report


def _report_booking(booked: "AllocationView", as_json: bool) -> None:
    if as_json:
        output.emit_json(booked.to_json())
        return
    sys.stdout.write(f"{booked.id}\n")
    sys.stdout.flush()
    def when(stamp: str | None) -> str:
        return f"{stamp[:19]}Z" if stamp else "?"

    output.message(
        f"reserved {booked.id} on {booked.driver} from {when(booked.starts)} to "
        f"{when(booked.expires)}; claim it with `shoal alloc --reservation {booked.id}` "
        f"by {when(booked.claim_by)}"
    )


def _report(result: "AllocationView", as_json: bool) -> None:
    """Print a committed allocation (the service runs this with Ctrl-C held off)."""
    if as_json:
        output.emit_json(result.to_json())
        return
    sys.stdout.write(f"{result.id}\n")
    sys.stdout.flush()
    output.message(f"allocated {result.id} on {result.driver}")


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
            "(kubernetes: pods and jobs; container: the engine's containers).",
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

    listing = service.Listing.parse(driver, statuses, sort)
    if alloc_id is not None and not listing.is_plain():
        raise UsageError("--driver, --status and --sort filter a list; give no ID with them")
    svc = _drivers(ctx)
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
            from drivers.views import Summary

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
        _flush_warnings(svc)
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
            _flush_warnings(svc)
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


def free(
    ctx: typer.Context,
    alloc_ids: Annotated[
        list[str] | None,
        typer.Argument(metavar="[ID]...", help="Allocation id(s) to free.", show_default=False),
    ] = None,
    expired: Annotated[
        bool, typer.Option("--expired", help="Free every allocation past its lifetime.")
    ] = False,
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            metavar="DRIVER",
            help="Free ID in DRIVER's shared backend even if another machine made it "
            "(see status --remote).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Free allocations and record each; freeing twice is harmless.

    Give IDs or --expired. Every ID is tried even when one fails; the exit code is then
    the first failure's.

    \b
    Examples:
      shoal free process-35473a1e
      shoal free test-4b113fb1 test-e5f2cb7f --json
      shoal free --expired
      shoal free --remote kubernetes kubernetes-9f2c41d0
    """
    as_json = output.select(as_json, output_format)
    from drivers import service

    ids = list(dict.fromkeys(alloc_ids or []))
    if bool(ids) == expired:
        raise UsageError("give allocation IDs or --expired (not both)")
    if remote is not None and not ids:
        raise UsageError("--remote frees the allocations you name: give their IDs")
    svc = _drivers(ctx)
    code = 0
    try:
        if expired:
            results = service.free_expired(svc)
        elif len(ids) == 1:  # one: its error is the command's, as it always was
            one = ids[0]
            freed = service.free_remote(svc, remote, one) if remote else service.free(svc, one)
            results = [freed]
        else:
            results, code = _free_each(svc, ids, remote)
    finally:
        _flush_warnings(svc)
    from drivers.views import ERROR

    if as_json:
        shown = [r.to_json() for r in results]
        output.emit_json(shown if expired or len(ids) > 1 else shown[0])
    else:
        for r in results:
            (output.error if r.status == ERROR else output.message)(r.message)
    if code or any(r.status == ERROR for r in results):
        raise typer.Exit(code or 1)


def _free_each(
    svc: "Drivers", ids: list[str], remote: str | None
) -> "tuple[list[FreeResult], int]":
    """Free every id, going on past failures; the first failure's exit code."""
    from cli.exit_codes import exit_code_for
    from drivers import service
    from drivers.views import ERROR, FreeResult
    from providers.core.errors import ShoalError

    results: list[FreeResult] = []
    code = 0
    for one in ids:
        try:
            freed = service.free_remote(svc, remote, one) if remote else service.free(svc, one)
        except ShoalError as exc:
            code = code or int(exit_code_for(exc))
            freed = FreeResult(one, ERROR, False, str(exc))
        results.append(freed)
    return results, code


def task(
    ctx: typer.Context,
    alloc_id: Annotated[
        str, typer.Argument(metavar="ID", help="Allocation id to run the task on.")
    ],
    name: Annotated[
        str,
        typer.Argument(metavar="NAME", help="Task name; each driver has its own (test: snapshot)."),
    ],
    options: Annotated[str, typer.Option("--options", help="Task options as a JSON object.")] = "",
    as_json: Annotated[
        bool, typer.Option("--json", help="Accepted for symmetry: a task's result is always JSON.")
    ] = False,
    output_format: Annotated[
        str | None, typer.Option("--output", metavar="FORMAT", help="json (default) or yaml.")
    ] = None,
) -> None:
    """Run a driver task on an allocation and print its JSON result.

    \b
    Examples:
      shoal task test-4b113fb1 snapshot
      shoal task test-4b113fb1 snapshot --options '{"label": "before-upgrade"}'
      shoal task test-4b113fb1 snapshot --output yaml
    """
    output.select(output_format is None, output_format)
    from drivers import service

    svc = _drivers(ctx)
    try:
        result = service.run_task(svc, alloc_id, name, options)
    finally:
        _flush_warnings(svc)
    output.emit_json(result)


def drivers(ctx: typer.Context, as_json: JsonOpt = False, output_format: OutputOpt = None) -> None:
    """List the driver instances (name/instance) to allocate on.

    Instances come from the config's [drivers] tables; a built-in driver with none
    configured has one called default. --driver takes either form (test, test/dev).

    \b
    Examples:
      shoal drivers
      shoal --config ./ci.toml drivers --json
    """
    as_json = output.select(as_json, output_format)
    from drivers.registry import driver_list
    from providers.core.errors import is_secret_name

    # A token or password in a driver's table is configuration, not output.
    listed = {
        name: {k: "(hidden)" if is_secret_name(k) else v for k, v in cfg.items()}
        for name, cfg in driver_list(state(ctx).settings()).items()
    }
    if as_json:
        output.emit_json([{"name": name, "config": cfg} for name, cfg in listed.items()])
        return
    output.table(
        "drivers",
        ["Driver", "Config"],
        [[n, json.dumps(c) if c else None] for n, c in listed.items()],
    )
