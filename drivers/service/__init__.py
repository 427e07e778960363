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

import importlib
from typing import TYPE_CHECKING, Any

# Imported now: three use cases share their names with their modules, and importing a
# submodule sets the package's attribute of that name to the module; binding the functions
# here, after, is what keeps `service.status`, `service.free` and `service.wait` functions.
from drivers.service.free import free
from drivers.service.status import status
from drivers.service.wait import wait

if TYPE_CHECKING:
    from drivers.service.alloc import allocate, dry_run
    from drivers.service.bring_up import check_metadata, prepare
    from drivers.service.context import Drivers, describe
    from drivers.service.free import (
        OTHER_FREE_WAIT_SECONDS,
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
    )
    from drivers.service.tasks import run_task
    from drivers.service.wait import Waited
    from drivers.spec.types import ALLOCATION_ID_KEY

# Each name's module, imported when the name is first asked for (PEP 562): `status ID` and
# `free` load the use cases they run, not alloc, bring_up, queue or tasks.
_HOME = {
    "ALLOCATION_ID_KEY": "drivers.spec.types",
    "Drivers": "drivers.service.context",
    "Listing": "drivers.service.status",
    "OTHER_FREE_WAIT_SECONDS": "drivers.service.free",
    "SORT_KEYS": "drivers.service.status",
    "Waited": "drivers.service.wait",
    "allocate": "drivers.service.alloc",
    "check_metadata": "drivers.service.bring_up",
    "describe": "drivers.service.context",
    "dry_run": "drivers.service.alloc",
    "expire": "drivers.service.recovery",
    "free_expired": "drivers.service.free",
    "free_expired_remote": "drivers.service.free",
    "free_failed": "drivers.service.free",
    "free_remote": "drivers.service.free",
    "list_allocation_objects": "drivers.service.status",
    "list_allocations": "drivers.service.status",
    "list_allocations_json": "drivers.service.status",
    "prepare": "drivers.service.bring_up",
    "recover": "drivers.service.recovery",
    "remote_allocations": "drivers.service.status",
    "run_task": "drivers.service.tasks",
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
