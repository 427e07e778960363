"""What the allocation use cases answer, typed; `to_json()` gives the documented JSON.

The CLI reads attributes for tables and prints `to_json()` for `--json`, so the JSON field
names live here once. An allocation is one object wherever it is printed (`alloc`, `alloc
--at`, `status`, `status ID`, `status --remote`, the items of `free` and `wait`): the keys
of ALLOCATION_KEYS, always all of them, null where that command does not know the value
(README "JSON shapes"; the schema cli/schemas/allocation.schema.json). The ledger builds
the same object in SQL for long lists (drivers/ledger/store.py, LISTED_JSON).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from providers.core.errors import ShoalError

# The allocation object's keys, in the order they are printed.
ALLOCATION_KEYS = (
    "id",
    "driver",
    "status",
    "cpu",
    "ram",
    "created",
    "expires",
    "updated",
    "starts",
    "claim_by",
    "host",
    "note",
    "metadata",
    "definition",
    "resource",
    "driver_status",
    "drift",
    "detail",
)
# What only reconciling a row with its driver (`status ID`) tells.
RECONCILED_KEYS = ("driver_status", "drift", "detail")
# The fields every driver's remote listing shares (drivers.spec.base.ListsRemote); the rest
# of a listed row is the driver's own, and goes in `detail`.
REMOTE_SHARED_KEYS = ("id", "driver", "status", "created", "expires", "note")


class _Flat:
    """A view whose JSON is its fields, named and ordered as declared."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


def unknown_allocation(alloc_id: str) -> dict[str, Any]:
    """The allocation object of an id nothing knows: every key but `id` null."""
    return {**dict.fromkeys(ALLOCATION_KEYS), "id": alloc_id}


def remote_allocation(row: dict[str, Any]) -> dict[str, Any]:
    """A row of a driver's remote listing as the allocation object: its shared fields in
    their places (`status` is the backend's own word, `running`, `Pending`), the driver's
    own fields in `detail`, and null for what a backend does not keep (cpu, ram, times
    but `created`, the definition)."""
    out = unknown_allocation(str(row.get("id", "")))
    for key in REMOTE_SHARED_KEYS[1:]:
        out[key] = row.get(key)
    out["detail"] = {k: v for k, v in row.items() if k not in REMOTE_SHARED_KEYS}
    return out


@dataclass(frozen=True)
class AllocationView:
    """One ledger row as users see it: times are RFC 3339 text, the definition and the
    resource state without credentials."""

    id: str
    driver: str
    status: str
    cpu: int
    ram: int  # GiB
    created: str
    expires: str | None
    updated: str
    note: str | None
    resource: dict[str, Any] | None = None
    definition: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    starts: str | None = None  # a reservation's window start (it ends at `expires`)
    claim_by: str | None = None  # an unclaimed reservation lapses then
    host: str | None = None  # the machine it was made on (a team ledger; else null)

    def to_json(self) -> dict[str, Any]:
        """The allocation object; not reconciled with its driver, so those keys are null."""
        out = {key: getattr(self, key) for key in ALLOCATION_KEYS[:-3]}
        out.update(dict.fromkeys(RECONCILED_KEYS))
        return out


@dataclass(frozen=True)
class StatusView:
    """An allocation reconciled with its driver: what the driver says (`ALLOCATED`,
    `NONE`, `ERROR`), what was reconciled (`drift`), and the workload's `detail`."""

    allocation: AllocationView
    driver_status: str | None = None
    drift: str | None = None
    detail: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.allocation.to_json(),
            "driver_status": self.driver_status,
            "drift": self.drift,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class Summary:
    """A row of the `status` table: the ledger's list (its JSON is built by the ledger
    itself, drivers.service.list_allocations_json) or a driver's remote listing."""

    id: str
    driver: str
    status: str
    cpu: int | None
    ram: int | None
    created: str | None
    expires: str | None
    updated: str | None
    note: str | None
    starts: str | None = None
    claim_by: str | None = None
    host: str | None = None

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Summary:
        return cls(
            id=str(row.get("id", "")),
            driver=str(row.get("driver", "")),
            status=str(row.get("status", "")),
            cpu=row.get("cpu"),
            ram=row.get("ram"),
            created=row.get("created"),
            expires=row.get("expires"),
            updated=row.get("updated"),
            note=row.get("note"),
            starts=row.get("starts"),
            claim_by=row.get("claim_by"),
            host=row.get("host"),
        )


@dataclass(frozen=True)
class FreeResult:
    """What `free` did to one id: the allocation object as the ledger holds it afterwards
    (an id nothing knows: `unknown_allocation`), whether this command changed it, the line
    people read, and the error that kept it from being freed (its row keeps its status)."""

    allocation: dict[str, Any]
    changed: bool
    message: str
    error: ShoalError | None = None

    @property
    def id(self) -> str:
        return str(self.allocation["id"])

    @property
    def status(self) -> str | None:
        """The status the ledger holds now (a failure keeps its own); None: an unknown id."""
        return self.allocation.get("status")

    def to_json(self, exit_code: Callable[[BaseException], int]) -> dict[str, Any]:
        """A `free --json` item: the allocation object, `changed`, and `error` (null, or
        the message and the exit code it maps to: `exit_code` is the CLI's mapping)."""
        error = (
            None
            if self.error is None
            else {"message": str(self.error), "exit_code": int(exit_code(self.error))}
        )
        return {**self.allocation, "changed": self.changed, "error": error}


@dataclass(frozen=True)
class DryRun(_Flat):
    driver: str
    fits: int | None  # None: unlimited
    unlimited: bool
    node_usage: dict[str, int]
    definition: dict[str, Any]
    choice: dict[str, Any] | None = None  # what a driver that explains its choice would take

    def to_json(self) -> dict[str, Any]:
        out = super().to_json()
        if self.choice is None:
            del out["choice"]
        return out
