"""Allocation use cases: alloc, status, free, task, over the ledger and the driver list.

The public face the CLI imports (`from drivers import service`); each use case lives in
its own module and is re-exported here:

- drivers.service_context: `Drivers` (the driver list over the ledger) and shared helpers
- drivers.service_alloc: allocate, dry_run, recover, expire
- drivers.service_status: status, Listing, list_allocations, remote_allocations
- drivers.service_free: free, free_expired, free_expired_remote, free_remote
- drivers.service_tasks: run_task

Every use case first cleans up after shoal processes that died mid-operation, so a
`kill -9` never leaves phantom usage past the next command.
"""

from __future__ import annotations

from drivers.service_alloc import (
    ALLOCATION_ID_KEY,
    allocate,
    check_metadata,
    dry_run,
    expire,
    prepare,
    recover,
)
from drivers.service_context import Drivers, describe
from drivers.service_free import (
    OTHER_FREE_WAIT_SECONDS,
    free,
    free_expired,
    free_expired_remote,
    free_remote,
)
from drivers.service_status import (
    SORT_KEYS,
    Listing,
    list_allocations,
    list_allocations_json,
    remote_allocations,
    status,
)
from drivers.service_tasks import run_task

__all__ = [
    "ALLOCATION_ID_KEY",
    "OTHER_FREE_WAIT_SECONDS",
    "SORT_KEYS",
    "Drivers",
    "Listing",
    "allocate",
    "check_metadata",
    "describe",
    "dry_run",
    "expire",
    "free",
    "free_expired",
    "free_expired_remote",
    "free_remote",
    "list_allocations",
    "list_allocations_json",
    "prepare",
    "recover",
    "remote_allocations",
    "run_task",
    "status",
]
