"""What the allocation use cases share: the driver list over the ledger (`Drivers`), views
of ledger rows, and holding off Ctrl-C while a half-done operation is undone or finished.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drivers.ledger.book import Allocation, Ledger
from drivers.spec.views import AllocationView
from providers.core.errors import RetryableError
from providers.core.wire import from_wire

if TYPE_CHECKING:
    # Driver code, types and the registry are imported where used: `status` listing a
    # large ledger should not pay for them (cold start).
    from drivers.spec.base import ResourceDriver
    from drivers.spec.types import LabelDefinition, Resource, Resources
    from providers.core.settings import Settings


@dataclass
class Drivers:
    settings: Settings
    ledger: Ledger
    warnings: list[str] = field(default_factory=list)
    _open: dict[str, ResourceDriver] = field(default_factory=dict)

    def driver(self, name: str) -> ResourceDriver:
        if name not in self._open:
            from drivers.registry import open_driver

            self._open[name] = open_driver(self.settings, name)
        return self._open[name]

    @classmethod
    def from_settings(cls, settings: Settings) -> Drivers:
        from drivers.ledger.open import open_ledger

        return cls(settings=settings, ledger=open_ledger(settings))


@contextlib.contextmanager
def no_interrupts() -> Iterator[None]:
    """Hold off Ctrl-C while undoing a half-done operation, so the undo itself completes."""
    try:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def ignore_interrupts() -> Any:
    """Ignore Ctrl-C from here; returns what restore_interrupts needs."""
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: signals are not ours to change
        return None


def restore_interrupts(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGINT, previous)


def resource_of(row: Allocation) -> Resource:
    from drivers.spec.types import Resource

    if row.state:
        return from_wire(Resource, row.state, strict=False)
    return Resource(identifier=row.id)


def capacity(driver: ResourceDriver, usage: Resources, definition: LabelDefinition) -> int:
    """`usage` is the node's (local drivers) or, for a remote driver, its own holdings."""
    count = driver.available_capacity(usage, definition)
    if count < 0:
        raise RetryableError(f"driver {driver.name()} could not tell its capacity; try again")
    return count


def describe(row: Allocation) -> AllocationView:
    return AllocationView(
        id=row.id,
        driver=row.driver,
        status=row.status,
        cpu=row.cpu,
        ram=row.ram,
        created=row.created,
        expires=row.expires,
        updated=row.updated,
        note=row.note,
        resource=public_state(row.state),
        definition=public_definition(row.definition),
        metadata=row.metadata,
        starts=row.starts,
        claim_by=row.claim_by,
        host=row.host,
    )


def public_state(state: dict[str, Any] | None) -> dict[str, Any] | None:
    if state is None:
        return None
    return {k: v for k, v in state.items() if k != "authentication"}


def public_definition(definition: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in definition.items() if k != "authentication"}


def with_outcome(row: Allocation, outcome: dict[str, Any]) -> dict[str, Any] | None:
    """The row's state with how its workload ended (`resource.metadata.outcome`), as `free`
    and `status` record it (drivers.supervisor.supervise writes the same shape)."""
    if row.state is None:
        return None
    meta = row.state.get("metadata")
    return {
        **row.state,
        "metadata": {**(meta if isinstance(meta, dict) else {}), "outcome": outcome},
    }
