"""Allocation use cases: alloc, status, free, task, over the ledger and the driver list.

The public face the CLI imports (`from drivers import service`); each use case lives in
its own module and is re-exported here:

- drivers.service.context: `Drivers` (the driver list over the ledger) and shared helpers
- drivers.service.recovery: recover, expire (every use case runs them first)
- drivers.service.bring_up: prepare, check_metadata, bring_up (allocate in the driver, record)
- drivers.service.alloc: allocate, dry_run
- drivers.service.queue: `alloc --wait`, `--at` and `--reservation` (wait, book, claim)
- drivers.service.status: status, Listing, list_allocations, remote_allocations
- drivers.service.wait: wait (until allocations end or are allocated)
- drivers.service.free: free, free_expired, free_expired_remote, free_remote, free_failed
- drivers.service.tasks: run_task

Every use case first cleans up after shoal processes that died mid-operation, so a
`kill -9` never leaves phantom usage past the next command.
"""

from __future__ import annotations

from drivers.service.alloc import allocate, dry_run
from drivers.service.bring_up import check_metadata, prepare
from drivers.service.context import Drivers, describe
from drivers.service.free import (
    OTHER_FREE_WAIT_SECONDS,
    free,
    free_expired,
    free_expired_remote,
    free_failed,
    free_remote,
)
from drivers.service.recovery import expire, recover
from drivers.service.status import (
    SORT_KEYS,
    Listing,
    list_allocation_objects,
    list_allocations,
    list_allocations_json,
    remote_allocations,
    status,
)
from drivers.service.tasks import run_task
from drivers.service.wait import Waited, wait
from drivers.spec.types import ALLOCATION_ID_KEY

__all__ = [
    "ALLOCATION_ID_KEY",
    "OTHER_FREE_WAIT_SECONDS",
    "SORT_KEYS",
    "Drivers",
    "Listing",
    "Waited",
    "allocate",
    "check_metadata",
    "describe",
    "dry_run",
    "expire",
    "free",
    "free_expired",
    "free_expired_remote",
    "free_failed",
    "free_remote",
    "list_allocation_objects",
    "list_allocations",
    "list_allocations_json",
    "prepare",
    "recover",
    "remote_allocations",
    "run_task",
    "status",
    "wait",
]
