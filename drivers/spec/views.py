"""What the allocation use cases answer, typed; `to_json()` gives the documented JSON.

The CLI reads attributes for tables and prints `to_json()` for `--json`, so the JSON field
names live here once (README "JSON shapes": `id`, `driver`, `status`, `cpu`, `ram`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

FREED = "FREED"
ERROR = "ERROR"


class _Flat:
    """A view whose JSON is its fields, named and ordered as declared."""

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class AllocationView(_Flat):
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


@dataclass(frozen=True)
class StatusView:
    """An allocation reconciled with its driver: what the driver says (`ALLOCATED`,
    `NONE`, `ERROR`), what was reconciled (`drift`), and the workload's `detail`."""

    allocation: AllocationView
    driver_status: str | None = None
    drift: str | None = None
    detail: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        out = {
            **self.allocation.to_json(),
            "driver_status": self.driver_status,
            "drift": self.drift,
        }
        if self.detail is not None:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True)
class Summary(_Flat):
    """A row of the `status` list (no definition or state: long lists stay cheap)."""

    id: str
    driver: str
    status: str
    cpu: int | None
    ram: int | None
    created: str | None
    expires: str | None
    updated: str | None
    note: str | None

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
        )


@dataclass(frozen=True)
class FreeResult(_Flat):
    id: str
    status: str  # FREED, FAILED (nothing was held) or ERROR (this id could not be freed)
    changed: bool  # whether this command changed it
    message: str


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
