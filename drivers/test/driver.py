"""The `test` driver: a simulated driver for tests and demos.

It allocates nothing but a marker file in its workspace, counts capacity from its configured
limits, and can fail or stall on demand, with a 0..255 probability per operation, so that
callers' error paths can be exercised for real.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers.definitions.limits import MAX_DELAY_SECONDS
from drivers.definitions.options import InstanceConfig, ensure_workspace, parse_options, roll
from drivers.spec.base import CAPACITY_ERROR, ResourceDriverTask
from drivers.spec.capacity import Totals, fit_count
from drivers.spec.types import (
    ALLOCATION_ID_KEY,
    STATUS_ALLOCATED,
    STATUS_NONE,
    ApplicationTask,
    LabelDefinition,
    Resource,
    Resources,
)
from drivers.test.defaults import DEFAULTS, Config
from providers.core import schema
from providers.core.errors import ShoalError, UsageError
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.wire import format_time

if TYPE_CHECKING:
    from drivers.test.model import TestOptions


class InjectedFailure(ShoalError):
    """A failure the test driver was asked to produce."""


class TestDriver:
    __test__ = False  # not a pytest class

    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._paths = settings.paths
        self._cfg = InstanceConfig("drivers.test.model:TestConfig", Config, DEFAULTS, full_name)
        self._workspace: Path | None = None

    def name(self) -> str:
        return self._name

    def is_remote(self) -> bool:
        return self.cfg.is_remote

    def prepare(self, config: bytes) -> None:
        """The table is checked (pydantic) where it is first read, `cfg`: `status` and
        `free` of an instance without one import no pydantic."""
        self._cfg.prepare(config, self._paths.config_file)
        self._workspace = None

    @property
    def cfg(self) -> Config:
        return self._cfg.get()

    @property
    def workspace(self) -> Path:
        """The markers' directory (created on first use)."""
        if self._workspace is None:
            self._workspace = ensure_workspace(self._paths, self.cfg.workspace, self._name)
        return self._workspace

    def _options(self, definition: LabelDefinition) -> TestOptions:
        from drivers.test.model import TestOptions

        _ = self.cfg  # the instance's table first (78), as every command that reads it did
        return parse_options(TestOptions, definition.options)

    def _fail(self, what: str, chance: int) -> None:
        if roll(chance):
            raise InjectedFailure(
                f"test driver {self._name}: {what} failed (injected, {chance}/255)"
            )

    def validate_definition(self, definition: LabelDefinition) -> None:
        opts = self._options(definition)
        self._fail("validate", opts.fail_validate)

    def totals(self) -> Totals:
        cpu, ram = self.cfg.cpu_limit, self.cfg.ram_limit
        table = f'[drivers."{self._name}"]'
        return Totals(cpu or None, ram or None, table=table, configured=("cpu", "ram"))

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        try:
            opts = self._options(req)
        except UsageError:
            return CAPACITY_ERROR
        if roll(opts.fail_available_capacity):
            return CAPACITY_ERROR
        if opts.delay_available_capacity:
            time.sleep(opts.delay_available_capacity)
        return fit_count(
            self.cfg.cpu_limit,
            self.cfg.ram_limit,
            self.cfg.cpu_overbook,
            self.cfg.ram_overbook,
            node_usage,
            req.resources,
        )

    def _marker(self, identifier: str) -> Path:
        if not identifier or "/" in identifier or identifier.startswith("."):
            raise ShoalError(
                f"test driver {self._name}: invalid resource identifier {identifier!r}"
            )
        return self.workspace / identifier

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        opts = self._options(definition)
        self._fail("allocate", opts.fail_allocate)
        if opts.delay_allocate:
            time.sleep(opts.delay_allocate)
        identifier = str(metadata.get(ALLOCATION_ID_KEY) or f"test-{os.urandom(3).hex()}")
        marker = self._marker(identifier)
        stored = opts.model_dump()
        payload = {"options": stored, "created": format_time(utcnow())}
        tmp = marker.with_name(f".{identifier}.tmp")
        tmp.write_text(json.dumps(payload))
        os.replace(tmp, marker)  # a marker exists whole or not at all
        return Resource(
            identifier=identifier,
            ip_addr="127.0.0.1",
            authentication=definition.authentication,
            metadata={"options": stored},
        )

    def _stored_options(self, res: Resource) -> dict[str, Any]:
        stored = res.metadata.get("options")
        return stored if isinstance(stored, dict) else {}

    def status(self, res: Resource) -> str:
        chance = max(self.cfg.fail_status, self._stored_options(res).get("fail_status", 0))
        self._fail(f"status {res.identifier}", chance)
        return STATUS_ALLOCATED if self._marker(res.identifier).exists() else STATUS_NONE

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        if task != SnapshotTask.NAME:
            return None
        parsed = json.loads(options) if options else {}
        from drivers.test.model import SnapshotOptions

        place = schema.Place(UsageError, "--options", noun="option of task snapshot")
        checked = schema.validate(SnapshotOptions, parsed, place)
        return SnapshotTask(driver=self, label=checked.label)

    def deallocate(self, res: Resource) -> None:
        opts = self._stored_options(res)
        self._fail(
            f"deallocate {res.identifier}",
            max(self.cfg.fail_deallocate, opts.get("fail_deallocate", 0)),
        )
        if opts.get("delay_deallocate"):
            # Bounded again: a row stored before the option was (1e18 overflowed the sleep).
            time.sleep(min(float(opts["delay_deallocate"]), MAX_DELAY_SECONDS))
        # Already gone is what deallocate wants, so it is not an error.
        self._marker(res.identifier).unlink(missing_ok=True)


@dataclass
class SnapshotTask:
    """Record a snapshot of the resource; returns its name and time as JSON."""

    NAME = "snapshot"

    driver: TestDriver
    label: str = ""
    task: ApplicationTask | None = None
    res: Resource | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def name(self) -> str:
        return self.NAME

    def clone(self) -> SnapshotTask:
        return SnapshotTask(driver=self.driver, label=self.label)

    def set_info(self, task: ApplicationTask, res: Resource) -> None:
        self.task = task
        self.res = res

    def execute(self) -> bytes:
        if self.res is None:
            raise ShoalError("snapshot: no resource given")
        opts = self.driver._stored_options(self.res)
        chance = max(self.driver.cfg.fail_snapshot, opts.get("fail_snapshot", 0))
        self.driver._fail(f"snapshot {self.res.identifier}", chance)
        marker = self.driver._marker(self.res.identifier)
        if not marker.exists():
            raise ShoalError(f"snapshot: resource {self.res.identifier} is not allocated")
        when = utcnow()
        snapshot = f"{self.res.identifier}-snap-{when.strftime('%Y%m%dT%H%M%S%f')}"
        (self.driver.workspace / f".{snapshot}").write_text(json.dumps({"label": self.label}))
        return json.dumps(
            {
                "snapshot": snapshot,
                "identifier": self.res.identifier,
                "label": self.label,
                "created": format_time(when),
            }
        ).encode()
