"""What the process driver's helpers (outcome, stop) need of the driver: where an
allocation's workspace is and who its workload and supervisor are. A protocol, so that those
helpers sit below the driver that uses them."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from drivers.spec.types import Resource


class ProcessSettings(Protocol):
    @property
    def grace_seconds(self) -> float: ...


class Workloads(Protocol):
    @property
    def cfg(self) -> ProcessSettings: ...

    def workspace(self, identifier: str) -> Path: ...
    def workload_identity(self, res: Resource) -> tuple[int, str | None] | None: ...
    def supervisor_identity(self, res: Resource) -> tuple[int, str | None] | None: ...
    def supervisor_alive(self, res: Resource) -> bool: ...
    def status(self, res: Resource) -> str: ...
    def running(self, res: Resource) -> bool: ...
