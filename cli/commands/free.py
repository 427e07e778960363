"""`free`: free allocations by id, every expired one, or one in a driver's shared backend."""

from typing import TYPE_CHECKING, Annotated

import typer

from cli import output
from cli.commands.driver_service import flush_warnings, open_service
from cli.commands.flags import not_empty
from cli.commands.options import JsonOpt, OutputOpt
from providers.core.errors import UsageError

if TYPE_CHECKING:
    from drivers.service import Drivers
    from drivers.spec.views import FreeResult


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
            "(see status --remote); with --expired, what it holds past its expiry (aws, gcp).",
        ),
    ] = None,
    as_json: JsonOpt = False,
    output_format: OutputOpt = None,
) -> None:
    """Free allocations and record each; freeing twice is harmless.

    Give IDs or --expired (with --remote DRIVER: what its backend holds past its expiry,
    made by any machine). Every ID is tried even when one fails; the exit code is then the
    first failure's.

    \b
    Examples:
      shoal free process-35473a1e
      shoal free test-4b113fb1 test-e5f2cb7f --json
      shoal free --expired
      shoal free --remote kubernetes kubernetes-9f2c41d0
    """
    as_json = output.select(as_json, output_format)
    from drivers import service

    not_empty(remote, "--remote", "give a driver (see `shoal drivers`), or leave --remote out")
    ids = list(dict.fromkeys(alloc_ids or []))
    if bool(ids) == expired:
        raise UsageError("give allocation IDs or --expired (not both)")
    svc = open_service(ctx)
    try:
        if expired:
            results = (
                service.free_expired_remote(svc, remote) if remote else service.free_expired(svc)
            )
        elif len(ids) == 1 and not as_json:  # one: its error is the command's, as always
            one = ids[0]
            results = [service.free_remote(svc, remote, one) if remote else service.free(svc, one)]
        else:
            results = _free_each(svc, ids, remote)
    finally:
        flush_warnings(svc)
    from cli.exit_codes import exit_code_for

    for r in results:
        if r.error is not None:
            output.error(r.message)  # with --json too: stderr says what failed, in words
        elif not as_json:
            output.message(r.message)
    if output.names():  # -o name: the ids freed, on stdout (docker rm's habit)
        output.emit_names(r.id for r in results if r.error is None)
    if as_json:
        # Always an array, whatever the number of ids: one shape for scripts to read.
        output.emit_json([r.to_json(exit_code_for) for r in results])
    failures = [r.error for r in results if r.error is not None]
    if failures:
        raise typer.Exit(int(exit_code_for(failures[0])))


def _free_each(svc: "Drivers", ids: list[str], remote: str | None) -> "list[FreeResult]":
    """Free every id, going on past failures (each kept with its error)."""
    from drivers import service
    from providers.core.errors import ShoalError

    results: list[FreeResult] = []
    for one in ids:
        try:
            freed = service.free_remote(svc, remote, one) if remote else service.free(svc, one)
        except ShoalError as exc:
            freed = service.free_failed(svc, one, exc)
        results.append(freed)
    return results
