"""Dataclass <-> JSON codec with Go `encoding/json` semantics.

The spec's types are Go structs with json tags: exact field names (`onDemand`, `nextLevel`)
and `omitempty`. Models here are plain dataclasses (cheap to import: the CLI's cold start has
no room for a validation framework) whose fields carry their wire name and omitempty flag in
metadata; this module turns them into JSON-ready values and back, with errors that name the
field path at fault.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeVar

from providers.core.errors import UsageError

T = TypeVar("T")


class WireError(UsageError):
    """A JSON document does not fit a model; `path` is the dotted field path."""

    def __init__(self, path: str, message: str) -> None:
        self.path = path or "(document)"
        super().__init__(f"{self.path}: {message}")


def field(
    wire: str | None = None,
    *,
    omitempty: bool = False,
    internal: bool = False,
    also: tuple[str, ...] = (),
    default: Any = dataclasses.MISSING,
    default_factory: Any = dataclasses.MISSING,
) -> Any:
    """A dataclass field with its JSON name and Go omitempty flag; `internal` ones are for
    renderers in this process and never on the wire (nor read from it). `also` names more
    JSON members written with the same value: the same thing under another codebase's name
    (upstream Go types), so a client of either reads it; on input any one of them will do."""
    meta = {"wire": wire, "omitempty": omitempty, "internal": internal, "also": also}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class _FieldInfo:
    """A field's wire facts. A plain class: a frozen dataclass costs ~1 ms to build at
    import, in every command that imports the models."""

    __slots__ = ("also", "hint", "name", "nullable", "omitempty", "required", "wire")

    def __init__(
        self,
        *,
        name: str,
        wire: str,
        omitempty: bool,
        hint: Any,
        required: bool,
        nullable: bool,  # a Go pointer: omitempty drops only nil, never a zero value
        also: tuple[str, ...] = (),
    ) -> None:
        self.name, self.wire, self.omitempty, self.hint = name, wire, omitempty, hint
        self.required, self.nullable, self.also = required, nullable, also


@functools.cache
def _fields(cls: type) -> tuple[_FieldInfo, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.metadata.get("internal"):
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(
            _FieldInfo(
                name=f.name,
                wire=f.metadata.get("wire") or f.name,
                omitempty=bool(f.metadata.get("omitempty")),
                hint=hints[f.name],
                required=required,
                nullable=_is_optional(hints[f.name]),
                also=tuple(f.metadata.get("also") or ()),
            )
        )
    return tuple(out)


def _is_optional(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _is_empty(value: Any) -> bool:
    # Go's omitempty: false, 0, "", nil pointer, empty map or slice.
    if value is None or value is False:
        return True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value == 0
    if isinstance(value, (str, list, dict, tuple)):
        return len(value) == 0
    return False


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC, whole seconds, with a `Z`, as the spec's `2026-03-07T03:29:00Z`."""
    from datetime import UTC

    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# Values JSON takes as they are: to_wire returns them unchanged, so a container's members of
# these exact types are copied without a call (subclasses, such as a str enum, take the
# general path, which also returns them unchanged).
_ATOMS = frozenset({str, int, float, bool, type(None)})

# A dataclass's plan: (attribute, wire name, omitempty, nullable, also) per field on the wire.
_Plan = tuple[tuple[str, str, bool, bool, tuple[str, ...]], ...]
# By exact type: the plan, or None for a type that is not a dataclass (general path).
_PLANS: dict[type, _Plan | None] = {}


def _plan(kind: type) -> _Plan | None:
    plan: _Plan | None = None
    if dataclasses.is_dataclass(kind) and not issubclass(kind, type):
        plan = tuple((i.name, i.wire, i.omitempty, i.nullable, i.also) for i in _fields(kind))
    _PLANS[kind] = plan
    return plan


def to_wire(obj: Any) -> Any:
    """Turn a model (or nested containers of models) into JSON-ready values.

    Dispatched on the exact type, with members of exact JSON types copied in place: a
    1,000-node cluster's view is ~27,000 values, and a call plus `is_dataclass` for each was
    ~80% of the walk. Any other type takes `_to_wire`, the rules in their plain order."""
    kind = type(obj)
    if kind in _ATOMS:
        return obj
    if kind is dict:
        return {
            (k if type(k) is str else str(k)): (v if type(v) in _ATOMS else to_wire(v))
            for k, v in obj.items()
        }
    if kind is list or kind is tuple:
        return [v if type(v) in _ATOMS else to_wire(v) for v in obj]
    plan = _PLANS[kind] if kind in _PLANS else _plan(kind)
    if plan is None:
        return _to_wire(obj)
    out: dict[str, Any] = {}
    for name, wire, omitempty, nullable, also in plan:
        value = getattr(obj, name)
        if omitempty and (value is None if nullable else _is_empty(value)):
            continue
        encoded = value if type(value) in _ATOMS else to_wire(value)
        out[wire] = encoded
        for other in also:
            out[other] = encoded
    return out


def _to_wire(obj: Any) -> Any:
    """`to_wire` of a value that is not an exact dict, list, tuple or JSON atom, nor a
    dataclass instance (planned or not, `_plan` asks `is_dataclass` as the rules did):
    subclasses of the containers, times, anything else as it is."""
    if isinstance(obj, dict):
        return {str(k): to_wire(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_wire(v) for v in obj]
    if isinstance(obj, datetime):
        return format_time(obj)
    return obj


def _type_name(value: Any) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "integer",
        float: "number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def from_wire(cls: type[T], data: Any, path: str = "", *, strict: bool = True) -> T:
    """Build `cls` from JSON-decoded `data`; unknown keys are errors when `strict`."""
    return typing.cast(T, _decode(cls, data, path, strict))


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _decode(hint: Any, data: Any, path: str, strict: bool) -> Any:
    if hint is Any:
        return data
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if data is None and type(None) in args:
            return None
        non_none = [a for a in args if a is not type(None)]
        if len(non_none) == 1:
            return _decode(non_none[0], data, path, strict)
        errors = []
        for arg in non_none:
            try:
                return _decode(arg, data, path, strict)
            except WireError as exc:
                errors.append(str(exc))
        raise WireError(path, f"does not match any allowed type ({'; '.join(errors)})")
    if origin is list:
        if not isinstance(data, list):
            raise WireError(path, f"expected an array, got {_type_name(data)}")
        (item,) = typing.get_args(hint)
        return [_decode(item, v, f"{path}[{i}]", strict) for i, v in enumerate(data)]
    if origin is dict:
        if not isinstance(data, Mapping):
            raise WireError(path, f"expected an object, got {_type_name(data)}")
        _, val = typing.get_args(hint)
        return {str(k): _decode(val, v, _join(path, str(k)), strict) for k, v in data.items()}
    if dataclasses.is_dataclass(hint):
        return _decode_dataclass(typing.cast(type, hint), data, path, strict)
    if hint is bool:
        if not isinstance(data, bool):
            raise WireError(path, f"expected true or false, got {_type_name(data)}")
        return data
    if hint is int:
        if isinstance(data, bool) or not isinstance(data, int):
            if isinstance(data, float) and data.is_integer():
                return int(data)
            raise WireError(path, f"expected an integer, got {_type_name(data)} {data!r}")
        return data
    if hint is float:
        if isinstance(data, bool) or not isinstance(data, (int, float)):
            raise WireError(path, f"expected a number, got {_type_name(data)} {data!r}")
        return float(data)
    if hint is str:
        if not isinstance(data, str):
            raise WireError(path, f"expected a string, got {_type_name(data)}")
        return data
    if hint is datetime:
        from providers.core.timeutil import parse_time

        if not isinstance(data, str):
            raise WireError(path, "expected an RFC 3339 time string")
        try:
            return parse_time(data, path or "time")
        except UsageError as exc:
            raise WireError(path, str(exc)) from None
    raise TypeError(f"wire codec cannot decode {hint!r} at {path}")


def _decode_dataclass(cls: type, data: Any, path: str, strict: bool) -> Any:
    if not isinstance(data, Mapping):
        raise WireError(path, f"expected an object, got {_type_name(data)}")
    infos = _fields(cls)
    by_wire = {name: i for i in infos for name in (i.wire, *i.also)}
    if strict:
        for key in data:
            if key not in by_wire:
                known = ", ".join(sorted(by_wire))
                raise WireError(_join(path, str(key)), f"unknown field; known fields: {known}")
    kwargs: dict[str, Any] = {}
    for info in infos:
        given = [name for name in (info.wire, *info.also) if name in data]
        for other in given[1:]:
            if data[other] != data[given[0]]:
                raise WireError(
                    _join(path, other), f"differs from {given[0]}; give one, or the same value"
                )
        if given:
            wire = given[0]
            kwargs[info.name] = _decode(info.hint, data[wire], _join(path, wire), strict)
        elif info.required:
            raise WireError(_join(path, info.wire), "required field is missing")
    return cls(**kwargs)
