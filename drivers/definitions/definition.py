"""Definitions from JSON or YAML text (with line and column on errors) or from flags."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from drivers.spec.types import LabelDefinition
from providers.core.errors import UsageError, shown
from providers.core.numbers import non_finite, reject_constant
from providers.core.timeutil import parse_duration
from providers.core.wire import from_wire


def parse_document(text: str, source: str) -> Any:
    """JSON when it looks like JSON (better messages), else YAML; errors carry line:column."""
    stripped = text.lstrip()
    if not stripped:
        raise UsageError(f"{source}: the definition is empty; give a JSON or YAML object")
    if stripped[0] in "{[" or source.endswith(".json"):
        try:
            return json.loads(text, parse_constant=reject_constant, object_pairs_hook=unique_object)
        except DuplicateKey as exc:
            raise UsageError(_json_duplicate(text, exc.key, source)) from None
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
        data = yamlsafe.load(text)
        _yaml_duplicate(text, source)
    except yamlsafe.YamlRefused as exc:
        raise UsageError(f"{source}: {exc}; write the values out") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        raise UsageError(f"{where}: invalid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None
    except ValueError as exc:  # a value no Python object holds: 2020-13-45, 5000 digits
        said = " ".join(str(exc).split()).partition("; use sys.")[0]
        raise UsageError(f"{source}: invalid YAML: {shown(said, 200)[1:-1]}") from None
    return data


# A key given twice: JSON and YAML parsers keep the last silently, so a definition edited by
# appending (or merged by a template) would run with whichever came last. Refused instead.


class DuplicateKey(ValueError):
    """A JSON object that gives `key` twice (from unique_object)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _Found(Exception):
    """The message at the first duplicate key, out of the walk that found it."""


def unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook: the object, or DuplicateKey at a key given twice."""
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return found


def _duplicate(source: str, key: object, at: tuple[int, int], first: int) -> str:
    line, column = at
    return (
        f"{source}:{line}:{column}: duplicate key {shown(key)} (first at line {first}); "
        "give each key once"
    )


def _json_duplicate(text: str, key: str, source: str) -> str:
    """Where the document (valid JSON but for the duplicate) gives a key twice: the first
    such place in reading order. json's hook is told the pairs but not where they were."""
    decoder = json.JSONDecoder(parse_constant=reject_constant)

    def skip(pos: int) -> int:
        while text[pos] in " \t\r\n":
            pos += 1
        return pos

    def where(pos: int) -> tuple[int, int]:
        line = text.count("\n", 0, pos) + 1
        return line, pos - (text.rfind("\n", 0, pos) + 1) + 1

    def value(pos: int) -> int:
        """Past the value at `pos`; raises the message at a key given twice."""
        pos = skip(pos)
        opening = text[pos]
        if opening not in "{[":
            return decoder.raw_decode(text, pos)[1]
        closing = "}" if opening == "{" else "]"
        seen: dict[str, int] = {}
        pos = skip(pos + 1)
        while text[pos] != closing:
            if opening == "{":
                name, after = decoder.raw_decode(text, pos)  # a key is a JSON string
                if name in seen:
                    raise _Found(_duplicate(source, name, where(pos), where(seen[name])[0]))
                seen[name] = pos
                pos = skip(skip(after) + 1)  # past the ":"
            pos = skip(value(pos))
            if text[pos] == ",":
                pos = skip(pos + 1)
        return pos + 1

    try:
        value(0)
    except _Found as found:
        return str(found)
    except (RecursionError, ValueError, IndexError):
        pass
    return f"{source}: duplicate key {shown(key)}; give each key once"


def _yaml_duplicate(text: str, source: str) -> None:
    """A key given twice in any mapping of the document (which loaded: no aliases, not too
    deep) is a UsageError naming it and its line. A merge (<<) is YAML's own override, not a
    duplicate."""
    import yaml

    loader = yaml.SafeLoader(text)
    found: list[tuple[int, str]] = []  # (offset, message): the first in reading order is told
    try:
        stack = [loader.get_single_node()]
        while stack:
            node = stack.pop()
            if isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
            elif isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for key_node, value_node in node.value:
                    stack.append(value_node)
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = loader.construct_object(key_node, deep=True)
                    mark = key_node.start_mark
                    if key in seen:
                        at = (mark.line + 1, mark.column + 1)
                        found.append((mark.index, _duplicate(source, key, at, seen[key])))
                    else:
                        seen[key] = mark.line + 1
    finally:
        loader.dispose()
    if found:
        raise UsageError(min(found)[1])


def build(data: Any, source: str) -> LabelDefinition:
    """Validate a decoded document into a LabelDefinition; errors name the field."""
    if not isinstance(data, dict):
        raise UsageError(f"{source}: a definition is an object with driver, resources, options")
    for path in non_finite(data):  # YAML's .nan and .inf, also among the free-form options
        raise UsageError(f"{source}: {path}: must be a finite number")
    from drivers.definitions import model as definition_model
    from providers.core import schema

    checked = schema.validate(
        definition_model.LabelDefinition, data, schema.Place(UsageError, source)
    )
    _require_size(checked, source)
    dumped = checked.model_dump()
    # Left out with an explicit instance type: 0 until the driver fills it from the type.
    for name in ("cpu", "ram"):
        dumped["resources"][name] = dumped["resources"][name] or 0
    return from_wire(LabelDefinition, dumped)


def _require_size(checked: Any, source: str) -> None:
    """cpu and ram are required, unless the definition names its instance type
    (`options.instance_type`): the type's shape then says them (the driver fills them)."""
    from drivers.definitions.model import MAX_CPU, MAX_RAM_GIB

    # Only a driver that launches named instance types is told of the way round it.
    option = _NAMES_INSTANCE_TYPES.get(checked.driver.partition("/")[0], "")
    if checked.options.get("instance_type") or checked.options.get("machine_type"):
        return
    if option and checked.options.get(option):  # azure's `size`
        return
    hint = f", unless -o {option} names the type, whose shape says it" if option else ""
    for name, unit, most in (("cpu", "vCPUs", MAX_CPU), ("ram", "GiB", MAX_RAM_GIB)):
        if getattr(checked.resources, name) is None:
            raise UsageError(
                f"{source}: resources.{name}: required ({unit}, 1 to {most}; --{name} N){hint}"
            )


# The drivers (and their aliases) whose option naming the type gives the size: that option.
_NAMES_INSTANCE_TYPES = {
    "aws": "instance_type", "ec2": "instance_type", "gcp": "machine_type", "gce": "machine_type",
    "azure": "size",
}


def load(text: str, source: str) -> LabelDefinition:
    return build(parse_document(text, source), source)


def life_of(definition: LabelDefinition) -> timedelta | None:
    """`resources.lifetime` as a duration (None: no lifetime). The service reads it once per
    use case and carries the duration; the expiry it decides from it (expiry) goes to the
    ledger row and, as `resources.expires`, to the driver: nothing downstream parses it again."""
    if not definition.resources.lifetime:
        return None
    return parse_duration(definition.resources.lifetime, "resources.lifetime")


def expiry(life: timedelta | None, now: datetime) -> datetime | None:
    """When an allocation of this lifetime that starts at `now` (the ledger's clock, read
    once) ends: the row's `expires`, and the deadline its driver enforces."""
    return None if life is None else now + life
