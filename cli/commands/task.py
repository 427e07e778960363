"""`task`: run a driver's named task on an allocation and print its JSON result."""

from typing import Annotated

import typer

from cli import output
from cli.commands.driver_service import flush_warnings, open_service


def task(
    ctx: typer.Context,
    alloc_id: Annotated[
        str, typer.Argument(metavar="ID", help="Allocation id to run the task on.")
    ],
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="Task name; each driver has its own (test: snapshot; aws: snapshot, "
            "console; gcp: snapshot, image, console).",
        ),
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

    svc = open_service(ctx)
    try:
        result = service.run_task(svc, alloc_id, name, options)
    finally:
        flush_warnings(svc)
    output.emit_json(result)
