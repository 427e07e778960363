"""The task use case: run a driver's named task on an ALLOCATED resource."""

from __future__ import annotations

import json
from typing import Any

from drivers.ledger import book as L
from drivers.service.context import Drivers, resource_of
from drivers.service.recovery import recover
from providers.core.errors import UsageError
from providers.core.timeutil import utcnow


def run_task(ctx: Drivers, alloc_id: str, name: str, options: str) -> Any:
    from drivers.spec.types import ApplicationTask

    recover(ctx)
    row = ctx.ledger.get(alloc_id)
    if row.status != L.ALLOCATED:
        raise UsageError(f"{row.id} is {row.status}; tasks run only on ALLOCATED resources")
    if options:
        from providers.core.numbers import reject_constant

        try:
            json.loads(options, parse_constant=reject_constant)
        except ValueError as exc:
            raise UsageError(f"--options: invalid JSON: {exc}") from None
        except RecursionError:
            raise UsageError("--options: invalid JSON: nested too deeply") from None
    task = ctx.driver(row.driver).get_task(name, options)
    if task is None:
        raise UsageError(f"driver {row.driver} has no task {name!r}")
    now = utcnow()
    info = ApplicationTask(
        application_uid=row.id,
        task=name,
        when="ALLOCATED",
        created_at=now,
        updated_at=now,
        options=json.loads(options) if options else {},
    )
    task.set_info(info, resource_of(row))
    result = task.execute()
    try:
        return json.loads(result)
    except ValueError:
        return {"result": result.decode(errors="replace")}
