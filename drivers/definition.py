"""Definitions from JSON or YAML text (with line and column on errors) or from flags."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from drivers.types import LabelDefinition
from providers.core.errors import UsageError
from providers.core.numbers import non_finite, reject_constant
from providers.core.timeutil import parse_duration, utcnow
from providers.core.wire import from_wire


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

    from providers.core import yamlsafe

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
    for path in non_finite(data):  # YAML's .nan and .inf, also among the free-form options
        raise UsageError(f"{source}: {path}: must be a finite number")
    from drivers import definition_model
    from providers.core import schema

    checked = schema.validate(
        definition_model.LabelDefinition, data, schema.Place(UsageError, source)
    )
    return from_wire(LabelDefinition, checked.model_dump())


def load(text: str, source: str) -> LabelDefinition:
    return build(parse_document(text, source), source)


def expires_at(definition: LabelDefinition, now: datetime | None = None) -> datetime | None:
    if not definition.resources.lifetime:
        return None
    life: timedelta = parse_duration(definition.resources.lifetime, "resources.lifetime")
    return (now or utcnow()) + life
