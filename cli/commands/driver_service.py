"""The driver service a command works through, and printing the warnings it gathered.

Each warning is printed once per command, whichever way it came: as it happened (a
driver's `settings.warn`), from the service's list at the end (`flush_warnings`), or as a
note a command's own report would repeat (`warned`).
"""

from typing import TYPE_CHECKING

import typer

from cli import output
from cli.state import state

if TYPE_CHECKING:
    from drivers.service import Drivers


class _Once:
    """A `warn` that prints each text once, and remembers what it printed."""

    def __init__(self) -> None:
        self.said: set[str] = set()

    def __call__(self, text: str) -> None:
        if text not in self.said:
            self.said.add(text)
            output.warn(text)


def open_service(ctx: typer.Context) -> "Drivers":
    from cli import wiring

    settings = state(ctx).settings()
    settings.warn = _Once()
    return wiring.drivers(settings)


def _once(service: "Drivers") -> _Once:
    warn = service.settings.warn
    if not isinstance(warn, _Once):  # a service made elsewhere: from now on, once
        warn = service.settings.warn = _Once()
    return warn


def warned(service: "Drivers", text: str) -> bool:
    """Whether `text` was printed as a warning already (a note not to say twice)."""
    return text in _once(service).said


def flush_warnings(service: "Drivers") -> None:
    warn = _once(service)
    for text in service.warnings:
        warn(text)
