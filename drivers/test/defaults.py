"""The test driver's settings as it reads them, and their defaults: shared by the driver and
the pydantic model of its config table (model.py). `status` and `free` of an instance with
no table read these and never import pydantic."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Config:
    """[drivers."test/INSTANCE"] as the driver reads it: checked by TestConfig (model.py,
    whose defaults these are), or these defaults when there is no table."""

    is_remote: bool = False
    workspace: str = ""
    cpu_limit: int = 0
    ram_limit: int = 0
    cpu_overbook: int = 0
    ram_overbook: int = 0
    fail_status: int = 0
    fail_deallocate: int = 0
    fail_snapshot: int = 0


DEFAULTS = Config()
