"""The driver service a command works through, and printing the warnings it gathered."""

from typing import TYPE_CHECKING

import typer

from cli import output
from cli.state import state

if TYPE_CHECKING:
    from drivers.service import Drivers


def open_service(ctx: typer.Context) -> "Drivers":
    from cli import wiring

    return wiring.drivers(state(ctx).settings())


def flush_warnings(service: "Drivers") -> None:
    for text in service.warnings:
        output.warn(text)
