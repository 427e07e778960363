"""`logs`: a workload's output, as bytes on stdout."""

import sys
from typing import Annotated

import typer

from cli.state import state


def logs(
    ctx: typer.Context,
    alloc_id: Annotated[str, typer.Argument(metavar="ID", help="Allocation id.")],
    follow: Annotated[
        bool,
        typer.Option(
            "--follow", "-f", help="Keep printing what it writes until it ends (or Ctrl-C)."
        ),
    ] = False,
    tail: Annotated[
        int | None,
        typer.Option(
            "--tail", "-n", min=0, metavar="N", help="Only the last N lines (default: all)."
        ),
    ] = None,
) -> None:
    """Print a workload's output, or follow it as it comes.

    process: its output.log; container: the engine's log; kubernetes: the pod's log;
    aws: the console output; gcp: the serial console.
    The bytes go to stdout as the workload wrote them. With --follow it keeps printing
    until the workload ends; Ctrl-C ends it too (exit 0). The output of a freed
    allocation is gone with it (exit 1).

    \b
    Examples:
      shoal logs process-35473a1e
      shoal logs process-35473a1e --tail 20
      shoal logs container-4b113fb1 -f
    """
    from cli import output, wiring
    from drivers.service.logs import workload_logs

    svc = wiring.drivers(state(ctx).settings())
    out = sys.stdout.buffer
    stream = workload_logs(svc, alloc_id, tail=tail, follow=follow)
    try:
        for chunk in stream:
            out.write(chunk)
            out.flush()
    except KeyboardInterrupt:
        if not follow:
            raise
        # Ctrl-C is how a follow ends: nothing was interrupted.
    except BrokenPipeError:
        # The reader went (`| head`): nothing more to say, and nothing to flush at exit.
        import contextlib
        import os

        with contextlib.suppress(OSError, ValueError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    finally:
        close = getattr(stream, "close", None)
        if close is not None:
            close()  # a stream to the engine or the API server is closed now
        for text in svc.warnings:
            output.warn(text)
