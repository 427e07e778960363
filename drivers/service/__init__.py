"""Allocation use cases: alloc, status, free, task, over the ledger and the driver list.

The public face the CLI imports (`from drivers import service`); each use case lives in
its own module and is re-exported here:

- drivers.service.context: `Drivers` (the driver list over the ledger) and shared helpers
- drivers.service.recovery: recover, expire (every use case runs them first)
- drivers.service.bring_up: prepare, check_metadata, bring_up (allocate in the driver, record)
- drivers.service.alloc: allocate, dry_run
- drivers.service.queue: `alloc --wait`, `--at` and `--reservation` (wait, book, claim)
- drivers.service.listing: status, Listing, list_allocations, remote_allocations
- drivers.service.waiting: wait (until allocations end or are allocated)
- drivers.service.freeing: free, free_expired, free_expired_remote, free_remote, free_failed
- drivers.service.tasks: run_task

Every use case first cleans up after shoal processes that died mid-operation, so a
`kill -9` never leaves phantom usage past the next command.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drivers.service.alloc import allocate, dry_run
    from drivers.service.bring_up import check_metadata, prepare
    from drivers.service.context import Drivers, describe
    from drivers.service.freeing import (
        OTHER_FREE_WAIT_SECONDS,
        free,
        free_expired,
        free_expired_remote,
        free_failed,
        free_remote,
    )
    from drivers.service.listing import (
        SORT_KEYS,
        Listing,
        list_allocation_objects,
        list_allocations,
        list_allocations_json,
        remote_allocations,
        status,
    )
    from drivers.service.recovery import expire, recover
    from drivers.service.tasks import run_task
    from drivers.service.waiting import Waited, wait
    from drivers.spec.types import ALLOCATION_ID_KEY

# Each name's module, imported when the name is first asked for (PEP 562): `status ID` and
# `free` load the use cases they run, not alloc, bring_up, queue or tasks.
_HOME = {
    "ALLOCATION_ID_KEY": "drivers.spec.types",
    "Drivers": "drivers.service.context",
    "Listing": "drivers.service.listing",
    "OTHER_FREE_WAIT_SECONDS": "drivers.service.freeing",
    "SORT_KEYS": "drivers.service.listing",
    "Waited": "drivers.service.waiting",
    "allocate": "drivers.service.alloc",
    "check_metadata": "drivers.service.bring_up",
    "describe": "drivers.service.context",
    "dry_run": "drivers.service.alloc",
    "expire": "drivers.service.recovery",
    "free": "drivers.service.freeing",
    "free_expired": "drivers.service.freeing",
    "free_expired_remote": "drivers.service.freeing",
    "free_failed": "drivers.service.freeing",
    "free_remote": "drivers.service.freeing",
    "list_allocation_objects": "drivers.service.listing",
    "list_allocations": "drivers.service.listing",
    "list_allocations_json": "drivers.service.listing",
    "prepare": "drivers.service.bring_up",
    "recover": "drivers.service.recovery",
    "remote_allocations": "drivers.service.listing",
    "run_task": "drivers.service.tasks",
    "status": "drivers.service.listing",
    "wait": "drivers.service.waiting",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
