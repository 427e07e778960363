"""The spec's ResourceDriver and ResourceDriverTask interfaces."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from drivers.spec.types import ApplicationTask, LabelDefinition, Resource, Resources

if TYPE_CHECKING:
    from drivers.spec.capacity import Totals

UNLIMITED = 2**63 - 1  # the spec's math.MaxInt64: capacity with no limits configured
CAPACITY_ERROR = -1


class ResourceDriverTask(Protocol):
    def name(self) -> str: ...

    def clone(self) -> ResourceDriverTask: ...

    def set_info(self, task: ApplicationTask, res: Resource) -> None: ...

    def execute(self) -> bytes:
        """Run the task; the result is JSON."""
        ...


def counted_by_team(driver: ResourceDriver) -> bool:
    """Whether the ledger counts the driver's capacity over every machine's rows (a team
    scope: clouds, clusters, `scope = "team"` in its table) or over this machine's."""
    scope = getattr(driver, "ledger_scope", None)
    return driver.is_remote() if scope is None else scope == "team"


def team_pool(driver: ResourceDriver) -> str | None:
    """The ledger's capacity pool of a team-scoped driver (its name), None for this
    machine's pool."""
    return driver.name() if counted_by_team(driver) else None


class ResourceDriver(Protocol):
    def name(self) -> str:
        """`name/instance`, as in the driver list (`test/dev`)."""
        ...

    def is_remote(self) -> bool:
        """Remote drivers do not count against this node's CPU and RAM."""
        ...

    def prepare(self, config: bytes) -> None:
        """Apply the instance's JSON config; raise ConfigError when it is wrong."""
        ...

    def validate_definition(self, definition: LabelDefinition) -> None:
        """Raise UsageError naming the field or option the driver cannot take."""
        ...

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        """How many such definitions fit now; -1 when the driver failed to tell."""
        ...

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource: ...

    def status(self, res: Resource) -> str:
        """STATUS_ALLOCATED or STATUS_NONE."""
        ...

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None: ...

    def deallocate(self, res: Resource) -> None: ...


# -- optional abilities beyond the spec's interface: a driver has them or not ----------------


@runtime_checkable
class ChecksMetadata(Protocol):
    """Refuses metadata it cannot carry before anything is reserved."""

    def validate_metadata(self, metadata: dict[str, Any]) -> None: ...


@runtime_checkable
class DescribesWorkload(Protocol):
    """Tells what a workload is doing (kubernetes: phase and reason; container: exit code)."""

    def describe(self, res: Resource) -> dict[str, Any]: ...


@runtime_checkable
class ListsRemote(Protocol):
    """Lists what its shared backend holds for shoal, whichever machine made it. Each row
    has `id`, `driver`, `status`, `created` (RFC 3339) and `note`, then its own fields."""

    def remote_allocations(self) -> list[dict[str, Any]]: ...


@runtime_checkable
class ExplainsChoice(Protocol):
    """Says what an allocation of the definition would get and why (aws: the instance type
    chosen, its price, why the cheaper ones were skipped), for `alloc --dry-run`; called
    after `available_capacity` with the same definition."""

    def explain(self, definition: LabelDefinition) -> dict[str, Any]: ...


@runtime_checkable
class FinishesWorkload(Protocol):
    """Stops its workload but keeps what it left (a workspace, a stopped container) until
    `deallocate`, and tells how it ended (exit code, log tail, ...). An allocation past its
    lifetime is finished this way (EXPIRED) when its supervisor could not; `free` records
    the outcome before `deallocate` removes the rest."""

    def finish(self, res: Resource) -> dict[str, Any]: ...


@runtime_checkable
class ShowsLogs(Protocol):
    """A workload's output as bytes (process: output.log; container: the engine's log;
    kubernetes: the pod's log): its last `tail` lines (all when None); with `follow`, what
    comes next, ending when the workload ends."""

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]: ...


@runtime_checkable
class EndsLeftovers(Protocol):
    """A driver whose backend may still run something for an allocation recorded FAILED
    (aws: a launch whose answer was lost, found by the allocation's tag): ends it and names
    what it ended. Other drivers' failed allocations hold nothing."""

    def end_leftovers(self, res: Resource) -> list[str]: ...


@runtime_checkable
class HasTotals(Protocol):
    """Has totals no single definition may exceed however much is freed (the host's, the
    engine's, configured limits): a request over them is refused as one that can never fit
    (exit 2), not as "no capacity now" (75), for `alloc`, `alloc --wait` and `alloc --at`."""

    def totals(self) -> Totals: ...


@runtime_checkable
class BooksAhead(Protocol):
    """Checks a definition for a booking (`alloc --at`): what it gives is checked as
    `validate_definition` would, but options only a running workload needs (the command
    to run) may be left to the claim (`alloc --reservation ID -o entry=...`), which is
    checked in full."""

    def validate_booking(self, definition: LabelDefinition) -> None: ...
