"""Input checked against pydantic models, in one place: the lazy import and the one-line error.

pydantic (the user's chosen library for data models) is imported by `validate` and by the
model modules its callers load when they have input to check, never at import time here:
commands that check nothing do not pay its ~45 ms (tests/cli/test_imports.py pins that).

A ValidationError becomes shoal's one-line error of the class the input calls for (a
ConfigError for the config file, a UsageError for definitions, options and flags, a
ShoalError for an import file), saying where (`config file PATH: [local.pricing] spot`,
`def.yaml: resources.cpu`, `options.entry`), what was expected, and for an unknown key the
close match and the known ones. A value is quoted capped (`shown`), a credential never.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from providers.core.errors import ConfigError, ShoalError, UsageError, shown

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")
Loc = tuple[int | str, ...]


@dataclass(frozen=True)
class Place:
    """Where checked data sits: `label` names its source (a file, or nothing), `table` the
    config section it is (said TOML's way), else `root` its dotted path in a document."""

    error: type[ShoalError]
    label: str = ""
    table: tuple[str, ...] = ()
    root: str = ""
    noun: str = "field"  # what an unknown key is called: key, field, option
    fix: str = ""  # appended to every message
    # Said as a sentence about the field, in the words of its format's own tools (kubectl's
    # for a kubeconfig): `where must be a mapping, got a list`, `where is missing`.
    sentence: bool = False


def config_place(path: Path, *table: str) -> Place:
    return Place(ConfigError, f"config file {path}", table=table, noun="key")


OPTIONS = Place(UsageError, root="options", noun="option")


def validate(model: type[M], data: Any, place: Place) -> M:
    """`data` as a `model`, or the first thing wrong with it as `place.error`."""
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        raise place.error(_message(model, first, place)) from None


def unknown(
    noun: str, name: object, known: Iterable[str], spell: Callable[[str], str] | None = None
) -> str:
    """`unknown key; did you mean 'x'? known: ...`: the close match, then every known name
    (`spell` writes a name, as `[aws]` for a section)."""
    import difflib

    names = sorted(known)
    listed = ", ".join(map(spell or str, names)) or "none"
    given = str(name)
    close = difflib.get_close_matches(given, names, n=1) or [
        n for n in names if len(given) > 3 and (n.startswith(given) or given.startswith(n))
    ][:1]  # `grace` for grace_seconds: too short for difflib's ratio, still a clear hint
    if close:
        return f"unknown {noun}; did you mean {(spell or repr)(close[0])}? known: {listed}"
    return f"unknown {noun}; known: {listed}"


# -- the message ------------------------------------------------------------------------------

_EXPECTED = {
    "int_type": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "tuple_type": "a list",
    "set_type": "a list",
}
_TABLE_TYPES = frozenset({"dict_type", "model_type", "model_attributes_type"})
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}
_OWN_WORDS = frozenset({"extra_forbidden", "value_error", "assertion_error"})


def _message(model: type[BaseModel], error: Mapping[str, Any], place: Place) -> str:
    loc: Loc = tuple(error["loc"])
    kind: str = error["type"]
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    _, description, secret = _walk(model, loc)
    table = "a mapping" if place.sentence else "a table" if place.table else "an object"
    given = error.get("input")
    got = f", got {_show(given, table)}"
    if secret:  # its kind, never the value
        got = f", got {kind_of(given, table)} (the value is not shown: it may be a credential)"
    if kind == "extra_forbidden":
        holder, _, _ = _walk(model, loc[:-1])
        text = unknown(place.noun, loc[-1], holder.model_fields if _is_model(holder) else ())
    elif kind == "missing":
        text = "is missing" if place.sentence else "required"
    elif kind in _EXPECTED or kind in _TABLE_TYPES:
        expected = "must be" if place.sentence else "expected"
        text = f"{expected} {_EXPECTED.get(kind, table)}{got}"
    elif kind == "finite_number":
        text = f"must be a finite number{got}"
    elif kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        text = f"must be {sign} {_number(ctx[key])}{got}"
    elif kind == "literal_error":
        text = f"must be {ctx['expected']}{got}"
    elif kind in ("too_short", "string_too_short") and ctx.get("min_length") == 1:
        text = "must not be empty"
    elif kind in ("too_short", "too_long"):
        size = ctx.get("min_length", ctx.get("max_length"))
        text = f"must have {'at least' if kind == 'too_short' else 'at most'} {size} items"
    elif kind in ("value_error", "assertion_error") and "error" in ctx:
        text = str(ctx["error"])
    else:
        text = str(error["msg"])
        text = text[:1].lower() + text[1:]
    if description and kind not in _OWN_WORDS:
        text += f" ({description})"
    if place.fix:
        text += f"; {place.fix}"
    glue = " " if place.sentence and text.startswith(("is ", "must ")) else ": "
    return f"{_where(place, loc, kind in _TABLE_TYPES)}{glue}{text}"


def _where(place: Place, loc: Loc, about_a_table: bool) -> str:
    """`LABEL: [TABLE] key` for the config file, `LABEL: root.path[0]` for documents."""
    loc = tuple(part for part in loc if part != "[key]")  # a dict key's own check
    if place.table:
        names = list(place.table)
        rest = list(loc)
        while rest and isinstance(rest[0], str) and (len(rest) > 1 or about_a_table):
            if len(rest) > 1 and not isinstance(rest[1], str):
                break  # `list[0]`: the key of an array, said with its index
            names.append(str(rest.pop(0)))
        header = "[" + ".".join(_key(n) for n in names) + "]"
        return f"{place.label}: {header}" + (f" {_path(rest)}" if rest else "")
    parts = [p for p in (place.label, _path(loc, place.root)) if p]
    return ": ".join(parts)


_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(name: str) -> str:
    return name if _BARE.match(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _path(loc: Iterable[int | str], root: str = "") -> str:
    out = root
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{_key(part)}" if out else _key(part)
    return out


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def kind_of(value: Any, table: str = "a mapping") -> str:
    """What kind of value was given, without the value (a credential's); `table` names a
    mapping."""
    if isinstance(value, Mapping):
        return table
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "nothing (null)"
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return kinds.get(type(value), "a " + type(value).__name__)


def _show(value: Any, table: str) -> str:
    """What was given: its kind, and the value itself capped (never a whole structure)."""
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if value is None or isinstance(value, (Mapping, list, tuple)):
        return kind_of(value, table)
    if isinstance(value, (date, time)):  # TOML's dates and times
        kind = "date-time" if isinstance(value, datetime) else type(value).__name__
        return f"{kind} {value.isoformat()}"
    kind = {int: "integer", float: "number", str: "string"}.get(type(value), type(value).__name__)
    return f"{kind} {shown(value)}"


# -- what the model says about a place in it -------------------------------------------------


def _unwrap(hint: Any) -> tuple[Any, str]:
    """The type under Annotated and Optional, and the description a Field() there gives."""
    from pydantic.fields import FieldInfo

    description = ""
    while True:
        origin = typing.get_origin(hint)
        if origin is typing.Annotated:
            hint, *extras = typing.get_args(hint)
            for extra in extras:
                if isinstance(extra, FieldInfo) and extra.description:
                    description = extra.description
        elif origin in (typing.Union, types.UnionType):
            arms = [a for a in typing.get_args(hint) if a is not type(None)]
            if len(arms) != 1:
                return hint, description
            hint = arms[0]
        else:
            return hint, description


def _is_model(hint: Any) -> bool:
    from pydantic import BaseModel

    return isinstance(hint, type) and issubclass(hint, BaseModel)


def _walk(model: type[BaseModel], loc: Loc) -> tuple[Any, str, bool]:
    """The type at `loc`, the nearest description on the way, whether a secret model (one
    with `secret = True`: credentials) was crossed."""
    hint: Any = model
    description = ""
    secret = False
    for part in loc:
        hint, found = _unwrap(hint)
        description = found or description
        if _is_model(hint):
            secret = secret or bool(getattr(hint, "secret", False))
            field = hint.model_fields.get(part) if isinstance(part, str) else None
            if field is None:
                return None, description, secret
            description = field.description or ""  # a parent's says nothing of its fields
            hint = field.annotation
            continue
        origin, args = typing.get_origin(hint), typing.get_args(hint)
        if origin is dict and len(args) == 2:
            hint = args[0] if part == "[key]" else args[1]
        elif origin is list and args:
            hint = args[0]
        elif origin is tuple and isinstance(part, int) and part < len(args):
            hint = args[part]
        else:
            return None, description, secret
    hint, found = _unwrap(hint)
    if _is_model(hint):
        secret = secret or bool(getattr(hint, "secret", False))
    return hint, found or description, secret


# -- documents checked another way (provider payloads: providers/core/payload.py) -------------


def failure(model: Any, error: Mapping[str, Any], place: Place) -> ShoalError:
    """One failure of `model` (a model, or a type a TypeAdapter checks) as `validate` says it."""
    return place.error(_message(model, error, place))


def given(value: Any) -> str:
    """What was given, as these messages say it (`string 'x'`, `an object`), for a validator
    that words its own failure."""
    return _show(value, "an object")
