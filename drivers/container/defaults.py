"""The container driver's settings as it reads them, and their defaults: shared by the driver
and the pydantic model of its config table (model.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """[drivers."container/INSTANCE"] as the driver reads it: a table checked by its pydantic
    model (model.py, whose defaults these are), or these defaults when there is none."""

    socket: str = ""
    cpu_limit: int = 0
    ram_limit: int = 0
    cpu_overbook: int = 0
    ram_overbook: int = 0
    grace_seconds: int = 10


DEFAULTS = Config()
