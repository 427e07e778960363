"""Definitions from JSON or YAML text (with line and column on errors) or from flags."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from drivers.types import LabelDefinition
from providers.errors import UsageError
from providers.numbers import non_finite, reject_constant
from providers.timeutil import parse_duration, utcnow
from providers.wire import WireError, from_wire


def parse_document(text: str, source: str) -> Any:
    """JSON when it looks like JSON (better messages), else YAML; errors carry line:column."""
    stripped = text.lstrip()
    if not stripped:
        raise UsageError(f"{source}: the definition is empty; give a JSON or YAML object")
    if stripped[0] in "{[" or source.endswith(".json"):
        try:
            return json.loads(text, parse_constant=reject_constant)
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}"
            ) from None
        except ValueError as exc:  # NaN or Infinity
            raise UsageError(f"{source}: invalid JSON: {exc}") from None
        except RecursionError:
            raise UsageError(f"{source}: invalid JSON: nested too deeply") from None
    import yaml

    from providers import yamlsafe

    try:
        return yamlsafe.load(text)
    except yamlsafe.YamlRefused as exc:
        raise UsageError(f"{source}: {exc}; write the values out") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise UsageError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None


def build(data: Any, source: str) -> LabelDefinition:
    """Validate a decoded document into a LabelDefinition; errors name the field."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a definition is an object with driver, resources, options")
    for path in non_finite(data):  # YAML's .nan and .inf
        raise UsageError(f"{source}: {path}: must be a finite number")
    try:
        definition = from_wire(LabelDefinition, data)
    except WireError as exc:
        if exc.path.startswith("authentication"):
            # The message would quote the value: a credential must not reach stderr.
            raise UsageError(
                f"{source}: {exc.path}: invalid value (not shown: it is a credential); "
                "username, password and key are strings, port an integer"
            ) from None
        raise UsageError(f"{source}: {exc}") from None
    except UsageError as exc:
        raise UsageError(f"{source}: {exc}") from None
    check(definition, source)
    return definition


# Past these, SQLite integers and datetime overflow; no machine comes near them.
MAX_CPU = 1_000_000
MAX_RAM_GIB = 1_000_000_000
MAX_LIFETIME = timedelta(days=36_525)


def check(definition: LabelDefinition, source: str) -> None:
    res = definition.resources
    if not definition.driver:
        raise UsageError(f'{source}: driver is required, e.g. "driver": "process" or --driver')
    if res.cpu < 1 or res.cpu > MAX_CPU:
        raise UsageError(f"{source}: resources.cpu must be 1 to {MAX_CPU}, got {res.cpu}")
    if res.ram < 1 or res.ram > MAX_RAM_GIB:
        raise UsageError(f"{source}: resources.ram must be 1 to {MAX_RAM_GIB} (GiB), got {res.ram}")
    if res.slots < 0:
        raise UsageError(f"{source}: resources.slots must not be negative, got {res.slots}")
    for name, disk in res.disks.items():
        if disk.size < 0:
            raise UsageError(f"{source}: resources.disks.{name}.size must not be negative")
    if res.lifetime:
        life = parse_duration(res.lifetime, f"{source}: resources.lifetime")
        if life > MAX_LIFETIME:
            raise UsageError(
                f"{source}: resources.lifetime {res.lifetime!r} is over 100 years; "
                "leave it out for no lifetime"
            )


def load(text: str, source: str) -> LabelDefinition:
    return build(parse_document(text, source), source)


def expires_at(definition: LabelDefinition, now: datetime | None = None) -> datetime | None:
    if not definition.resources.lifetime:
        return None
    life: timedelta = parse_duration(definition.resources.lifetime, "resources.lifetime")
    return (now or utcnow()) + life
