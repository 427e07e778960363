"""The container driver's settings as it reads them, and their defaults: shared by the driver
and the pydantic model of its config table (model.py)."""

from __future__ import annotations


class Config:
    """[drivers."container/INSTANCE"] as the driver reads it: a table checked by its pydantic
    model (model.py, whose defaults these are), or these defaults when there is none. Read,
    never changed. A plain class, not a dataclass: building a frozen dataclass runs generated
    code (~1 ms) in every process that imports this module, each `status` and `free` too."""

    __slots__ = (
        "cpu_limit",
        "cpu_overbook",
        "grace_seconds",
        "ram_limit",
        "ram_overbook",
        "socket",
    )

    def __init__(
        self,
        *,
        socket: str = "",
        cpu_limit: int = 0,
        ram_limit: int = 0,
        cpu_overbook: int = 0,
        ram_overbook: int = 0,
        grace_seconds: int = 10,
    ) -> None:
        self.socket = socket
        self.cpu_limit = cpu_limit
        self.ram_limit = ram_limit
        self.cpu_overbook = cpu_overbook
        self.ram_overbook = ram_overbook
        self.grace_seconds = grace_seconds


DEFAULTS = Config()
