"""`alloc`'s definition: read from a file or stdin, with flags and KEY=VALUE pairs over it."""

import json
import sys
from typing import TYPE_CHECKING, Any

from providers.core.errors import UsageError, shown

if TYPE_CHECKING:
    from drivers.spec.types import LabelDefinition

# What kubectl's -o takes: a word alone, never a driver option (those are KEY=VALUE).
_FORMATS = ("json", "yaml", "wide", "name", "table")


def parse_pairs(values: list[str] | None, flag: str, parse_json: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw in values or []:
        key, sep, value = raw.partition("=")
        wanted = raw.strip().lower()
        if not sep and flag == "--option" and wanted in _FORMATS:
            # The habit of kubectl's `-o json`, where -o is alloc's driver option (ssh's -o).
            also = " or --json" if wanted == "json" else ""
            raise UsageError(
                f"-o {raw!r}: alloc's -o is a driver option (--option KEY=VALUE); for "
                f"{wanted} output give --output {wanted}{also}"
            )
        if not sep or not key:
            raise UsageError(f"{flag} {raw!r}: use KEY=VALUE")
        if parse_json:
            from drivers.definitions.definition import DuplicateKey, unique_object
            from providers.core.numbers import reject_constant

            try:
                # NaN/Infinity stay strings, which the option's type check then refuses.
                out[key] = json.loads(
                    value, parse_constant=reject_constant, object_pairs_hook=unique_object
                )
            except DuplicateKey as exc:
                raise UsageError(
                    f"{flag} {key}: its JSON value gives the key {shown(exc.key)} twice; give "
                    "each key once"
                ) from None
            except (ValueError, RecursionError):
                out[key] = value
        else:
            out[key] = value
    return out


def _utf8(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "save the definition as UTF-8"
        ) from None


def _read_definition(path: str) -> tuple[str, str]:
    if path == "-":
        return _utf8(sys.stdin.buffer.read(), "<stdin>"), "<stdin>"
    try:
        with open(path, "rb") as fh:
            return _utf8(fh.read(), path), path
    except FileNotFoundError:
        raise UsageError(
            f"DEFINITION {path!r}: no such file; give a JSON/YAML file or - for stdin"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"DEFINITION {path!r}: cannot read: {exc}") from None


def build_definition(
    path: str | None,
    driver: str | None,
    cpu: int | None,
    ram: int | None,
    lifetime: str | None,
    options: dict[str, Any],
    multitenancy: bool | None,
    cpu_overbook: bool | None,
    ram_overbook: bool | None,
    base: dict[str, Any] | None = None,
) -> "LabelDefinition":
    """The definition from a file (or stdin) and flags; `base` (a reservation's booked
    definition) is what they add to and override."""
    from drivers.definitions import definition as defs

    data, source = definition_data(
        path, cpu, ram, lifetime, options, multitenancy, cpu_overbook, ram_overbook, base
    )
    if driver:
        data["driver"] = driver
    return defs.build(data, source)


def definition_data(
    path: str | None,
    cpu: int | None,
    ram: int | None,
    lifetime: str | None,
    options: dict[str, Any],
    multitenancy: bool | None,
    cpu_overbook: bool | None,
    ram_overbook: bool | None,
    base: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], str]:
    """(the definition as a document, where it came from) before it is checked: what
    `alloc --offers` completes for each offer (its driver, options and sizes)."""
    from drivers.definitions import definition as defs

    if path is not None:
        text, source = _read_definition(path)
        data = defs.parse_document(text, source)
        if not isinstance(data, dict):
            raise UsageError(f"{source}: a definition is an object with driver, resources, options")
    else:
        data, source = {}, "definition"
    if base is not None:
        data = _overlay(base, data)
    resources = data.setdefault("resources", {})
    if not isinstance(resources, dict):
        raise UsageError(f"{source}: resources must be an object")
    flags = {
        "cpu": cpu,
        "ram": ram,
        "lifetime": lifetime,
        "multitenancy": multitenancy,
        "cpu_overbook": cpu_overbook,
        "ram_overbook": ram_overbook,
    }
    resources.update({k: v for k, v in flags.items() if v is not None})
    if options:
        merged = data.setdefault("options", {})
        if not isinstance(merged, dict):
            raise UsageError(f"{source}: options must be an object")
        merged.update(options)
    return data, source


def _overlay(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` over `base`, one level into `resources` and `options` (as flags over a file)."""
    merged = {**base, **top}
    for key in ("resources", "options"):
        below, above = base.get(key), top.get(key)
        if isinstance(below, dict) and isinstance(above, dict):
            merged[key] = {**below, **above}
    return merged
