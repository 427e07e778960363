"""What `alloc` says while and after it allocates: the waiting line of `--wait` (fitted to
the terminal), the id (or the allocation's JSON) on stdout, the booking's claim hint."""

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from cli import output, progress

if TYPE_CHECKING:
    from drivers.service.queue import Wait
    from drivers.spec.views import AllocationView


def wait_spec(wait: bool, timeout: str | None) -> "Wait | None":
    if not wait:
        return None
    from drivers.service.queue import Wait
    from providers.core.timeutil import parse_duration

    seconds = None if timeout is None else parse_duration(timeout, "--timeout").total_seconds()
    return Wait(timeout=seconds)


@contextlib.contextmanager
def waiting_line(waiting: "Wait | None") -> "Iterator[Wait | None]":
    """On a terminal, a waiter shows on stderr what it waits for and for how long, on one
    line redrawn in place and cleared when the wait ends; off one it says so once."""
    if waiting is None:
        yield None
        return
    from dataclasses import replace

    from drivers.service.queue import WaitState

    terminal = sys.stderr.isatty()
    said: list[bool] = []

    def show(state: WaitState) -> None:
        from providers.core.timeutil import human_duration

        ahead = f"{state.ahead} ahead, " if state.ahead else ""
        waited = human_duration(state.waited, style="clock")
        remaining = (
            None if state.remaining is None else human_duration(state.remaining, style="clock")
        )
        if terminal:
            # Fitted to the terminal (a line that wraps starts a new line at each redraw):
            # the hint goes first, then words; what it waits for is shortened last.
            left = "" if remaining is None else f"; gives up in {remaining}"
            terse = "" if remaining is None else f", {remaining} left"
            line = progress.status_line(
                "waiting for ",
                state.what,
                [
                    f": {ahead}{waited} so far{left} (Ctrl-C gives up)",
                    f": {ahead}{waited} so far{left}",
                    f": {ahead}{waited}{terse}",
                ],
            )
            sys.stderr.write(f"\r\x1b[2K{line}")
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


def reported(as_json: bool, waiting: "Wait | None") -> "Callable[[AllocationView], None]":
    def after_waiting(got: "AllocationView") -> None:
        if waiting is not None and waiting.progress is not None and sys.stderr.isatty():
            sys.stderr.write("\r\x1b[2K")
        report(got, as_json)

    return after_waiting


def report_booking(booked: "AllocationView", as_json: bool) -> None:
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


def report(result: "AllocationView", as_json: bool) -> None:
    """Print a committed allocation (the service runs this with Ctrl-C held off)."""
    if as_json:
        output.emit_json(result.to_json())
        return
    sys.stdout.write(f"{result.id}\n")
    sys.stdout.flush()
    output.message(f"allocated {result.id} on {result.driver}")
