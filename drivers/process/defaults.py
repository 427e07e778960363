"""The process driver's settings as it reads them, and their defaults: shared by the driver
and the pydantic model of its config table (model.py). `status`, `free` and `logs` with no
table for the instance read these and never import pydantic (no input of theirs to check)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Config:
    """[drivers."process/INSTANCE"] as the driver reads it: a table checked by its pydantic
    model (model.py, whose defaults these are), or these defaults when there is none."""

    cpu_limit: int = 0
    ram_limit: int = 0
    cpu_overbook: int = 0
    ram_overbook: int = 0
    grace_seconds: float = 10.0
    workspace: str = ""
    env_passthrough: list[str] = field(default_factory=list)


DEFAULTS = Config()
