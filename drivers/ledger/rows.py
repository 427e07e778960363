"""The ledger's rows as Python sees them: the status values, `Allocation` (one decoded row),
the `status` list's summary rows, and times stored as fixed-width text."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from providers.core.errors import LedgerCorruptError

ALLOCATING = "ALLOCATING"
ALLOCATED = "ALLOCATED"
FREEING = "FREEING"
FREED = "FREED"
FAILED = "FAILED"
ORPHANED = "ORPHANED"
GONE = "GONE"  # the driver no longer has it, though nobody freed it
RESERVED = "RESERVED"  # capacity booked for a window ahead (`alloc --at`); nothing runs yet
LAPSED = "LAPSED"  # a reservation nobody claimed within its grace period: capacity freed
# Its lifetime ended: the workload was stopped (by its supervisor, else the next command);
# it holds nothing, and what it left (workspace, stopped container) stays until `free`.
EXPIRED = "EXPIRED"
# The workload ended by itself (its entry exited, its container stopped) before its lifetime
# and before `free`: a normal end, recorded by its supervisor the moment it happens, with the
# exit code in the note and the outcome in the state. It holds nothing; what it left (the
# workspace and its output, the stopped container) stays until `free`.
EXITED = "EXITED"
# Statuses that hold node resources. ORPHANED does: its workload may still run until a
# later command's cleanup succeeds.
HOLDING = (ALLOCATING, ALLOCATED, FREEING, ORPHANED)
FREEING_FROM = "freeing from "  # the note of a FREEING row: the status to restore
# Rows that hold nothing while they are freed: their workload has ended already. A FREEING
# row counts as usage unless its note says it came from one of these.
ENDED_BEFORE_FREE = (GONE, EXPIRED, EXITED)
IN_FLIGHT = (ALLOCATING, FREEING)
NOT_ENDED = (*HOLDING, GONE, RESERVED, EXPIRED, EXITED)  # what `status` lists without --all
ALL_STATUSES = (
    ALLOCATING, ALLOCATED, FREEING, FREED, FAILED, ORPHANED, GONE, RESERVED, LAPSED, EXPIRED,
    EXITED,
)  # fmt: skip

# The columns a full row is selected with, in the order `Allocation.from_row` reads them.
COLUMNS = (
    "id, driver, status, definition, state, metadata, created, updated, expires, cpu, ram, "
    "multitenancy, cpu_overbook, ram_overbook, is_remote, owner_pid, owner_start, note, "
    "starts, claim_by, host, owner_host, lease"
)


def stamp(value: datetime) -> str:
    """Fixed-width UTC text, so SQL compares times as strings."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def unstamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


@dataclass
class Allocation:
    id: str
    driver: str
    status: str
    definition: dict[str, Any]
    state: dict[str, Any] | None
    metadata: dict[str, Any]
    created: str
    updated: str
    expires: str | None
    cpu: int
    ram: int
    is_remote: bool
    owner_pid: int | None
    owner_start: str | None
    note: str | None
    starts: str | None = None  # a reservation's window start (`alloc --at`)
    claim_by: str | None = None  # a reservation lapses unless claimed before this
    host: str | None = None  # the machine it was made on (None: this one, a SQLite ledger's)
    owner_host: str | None = None  # the machine of `owner_pid` (a team ledger's rows)
    lease: str | None = None  # on a team ledger: until when its owner is known to live

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> Allocation:
        try:
            return cls._from_row(row)
        except ValueError as exc:
            raise LedgerCorruptError(
                f"ledger row {row[0]!r} holds malformed JSON ({exc}); it was left untouched"
            ) from None

    @classmethod
    def _from_row(cls, row: tuple[Any, ...]) -> Allocation:
        return cls(
            id=row[0],
            driver=row[1],
            status=row[2],
            definition=json.loads(row[3]),
            state=json.loads(row[4]) if row[4] else None,
            metadata=json.loads(row[5]),
            created=row[6],
            updated=row[7],
            expires=row[8],
            cpu=row[9],
            ram=row[10],
            is_remote=bool(row[14]),
            owner_pid=row[15],
            owner_start=row[16],
            note=row[17],
            starts=row[18] if len(row) > 18 else None,
            claim_by=row[19] if len(row) > 19 else None,
            host=row[20] if len(row) > 20 else None,
            owner_host=row[21] if len(row) > 21 else None,
            lease=row[22] if len(row) > 22 else None,
        )


def summary_row(row: tuple[Any, ...]) -> dict[str, Any]:
    """A `status` list row (store.SUMMARY_COLUMNS), without decoding the JSON columns."""
    return {
        "id": row[0],
        "driver": row[1],
        "status": row[2],
        "cpu": row[3],
        "ram": row[4],
        "created": row[5],
        "expires": row[6],
        "updated": row[7],
        "note": row[8],
        "starts": row[9],
        "claim_by": row[10],
        "host": row[11] if len(row) > 11 else None,
    }
