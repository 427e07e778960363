"""Google's machine-readable contract of Compute Engine v1: the discovery document that
google-api-python-client ships (googleapiclient/discovery_cache/documents/compute.v1.json),
its methods as a routing table, and a validator of its schemas.

The validator knows what the document uses: `type` string / integer / number / boolean /
object / array / any, `$ref`, `properties`, `additionalProperties`, `items`, `enum`,
`pattern`, and the formats Google's JSON mapping gives (int64, uint64 and fixed64 as JSON
strings of decimal digits, int32 and uint32 as numbers in range, `byte` as base64,
`google-datetime` as RFC 3339, `google-duration` as "3.5s"). A property a schema does not
name is a violation: Google answers it with 400 "Invalid JSON payload received. Unknown
name". Request bodies also check `annotations.required` for the method they are sent to.
`readOnly` fields in a request are accepted, as Google ignores them.
"""

from __future__ import annotations

import base64
import binascii
import functools
import importlib.util
import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "fixed64": (0, 2**64 - 1),
}
_INT64 = re.compile(r"-?[0-9]+")
_DURATION = re.compile(r"-?[0-9]+(\.[0-9]{1,9})?s")


def document_path() -> Path:
    """The discovery document inside the installed google-api-python-client, found without
    importing the package (its import pulls in httplib2 and google-auth)."""
    spec = importlib.util.find_spec("googleapiclient")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            "google-api-python-client is not installed: pip install '.[test]' brings the "
            "Compute Engine discovery document the GCP stand-in is held to"
        )
    base = Path(next(iter(spec.submodule_search_locations)))
    return base / "discovery_cache" / "documents" / "compute.v1.json"


@functools.cache
def load() -> Contract:
    return Contract(json.loads(document_path().read_text()))


@dataclass(frozen=True)
class Method:
    id: str  # compute.instances.insert
    http_method: str
    path: str  # projects/{project}/zones/{zone}/instances
    parameters: dict[str, dict[str, Any]]
    request: str | None  # schema name of the body
    response: str | None
    regex: re.Pattern[str] = field(compare=False)
    literals: int = 0


@dataclass(frozen=True)
class Route:
    method: Method
    params: dict[str, str]


class Contract:
    def __init__(self, doc: dict[str, Any]) -> None:
        self.doc = doc
        self.schemas: dict[str, dict[str, Any]] = doc["schemas"]
        self.global_parameters: dict[str, dict[str, Any]] = doc["parameters"]
        self.base_path: str = doc["basePath"]  # /compute/v1/
        self.revision: str = doc.get("revision", "")
        methods: list[Method] = []
        self._collect(doc["resources"], methods)
        # A template with more literal segments wins: images/family/{family} is getFromFamily,
        # not images.get of an image called "family".
        methods.sort(key=lambda m: -m.literals)
        self.methods = methods
        self.by_id = {m.id: m for m in methods}

    def _collect(self, resources: dict[str, Any], out: list[Method]) -> None:
        for resource in resources.values():
            for spec in resource.get("methods", {}).values():
                out.append(_method(spec))
            self._collect(resource.get("resources", {}), out)

    def route(self, http_method: str, path: str) -> Route | None:
        """The method a request reaches; `path` is what follows the base path."""
        for method in self.methods:
            if method.http_method != http_method:
                continue
            match = method.regex.fullmatch(path)
            if match:
                return Route(method, dict(match.groupdict()))
        return None

    def validate(self, value: Any, schema: str, *, method_id: str = "") -> list[str]:
        """Violations of the named schema by `value`, each naming where (`Instance.disks[0].
        initializeParams.diskSizeGb: ...`). `method_id`: a request body sent to this
        method, whose `annotations.required` fields must be present."""
        out: list[str] = []
        self._check(value, {"$ref": schema}, schema, out, method_id, set())
        return out

    def _check(
        self,
        value: Any,
        schema: dict[str, Any],
        where: str,
        out: list[str],
        method_id: str,
        seen: set[int],
    ) -> None:
        if "$ref" in schema:
            ref = schema["$ref"]
            target = self.schemas.get(ref)
            if target is None:
                out.append(f"{where}: the document has no schema {ref!r}")
                return
            schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
        kind = schema.get("type")
        if value is None:
            out.append(f"{where}: null (leave the field out instead)")
            return
        if kind == "any" or (kind is None and not schema.get("properties")):
            return
        if kind == "string":
            self._string(value, schema, where, out)
        elif kind == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                out.append(f"{where}: expected an integer, got {_show(value)}")
            else:
                self._range(value, schema.get("format", "int32"), where, out)
        elif kind == "number":
            if isinstance(value, bool) or not isinstance(value, int | float):
                out.append(f"{where}: expected a number, got {_show(value)}")
        elif kind == "boolean":
            if not isinstance(value, bool):
                out.append(f"{where}: expected a boolean, got {_show(value)}")
        elif kind == "array":
            if not isinstance(value, list):
                out.append(f"{where}: expected an array, got {_show(value)}")
                return
            for i, item in enumerate(value):
                self._check(item, schema.get("items", {}), f"{where}[{i}]", out, method_id, seen)
        elif kind == "object" or kind is None:
            self._object(value, schema, where, out, method_id, seen)
        else:
            out.append(f"{where}: the schema has a type this validator does not know: {kind!r}")

    def _object(
        self,
        value: Any,
        schema: dict[str, Any],
        where: str,
        out: list[str],
        method_id: str,
        seen: set[int],
    ) -> None:
        if not isinstance(value, dict):
            out.append(f"{where}: expected an object, got {_show(value)}")
            return
        if schema.get("format") == "google.protobuf.Any":
            return
        props: dict[str, Any] = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if name in props:
                self._check(item, props[name], f"{where}.{name}", out, method_id, seen)
            elif extra is not None:
                self._check(item, extra, f"{where}[{name!r}]", out, method_id, seen)
            elif props or "additionalProperties" in schema:
                out.append(f"{where}: unknown property {name!r}")
        if method_id:
            for name, prop in props.items():
                required = prop.get("annotations", {}).get("required", [])
                if method_id in required and name not in value:
                    out.append(f"{where}.{name}: required by {method_id}")

    def _string(self, value: Any, schema: dict[str, Any], where: str, out: list[str]) -> None:
        fmt = schema.get("format", "")
        if not isinstance(value, str):
            hint = " (Google's JSON carries 64-bit integers as strings)" * (fmt in INT_RANGES)
            out.append(f"{where}: expected a string{hint}, got {_show(value)}")
            return
        if fmt in INT_RANGES:
            if not _INT64.fullmatch(value):
                out.append(f"{where}: {fmt} must be a decimal string, got {value!r}")
            else:
                self._range(int(value), fmt, where, out)
        elif fmt == "byte":
            try:
                padded = value + "=" * (-len(value) % 4)
                base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
            except (binascii.Error, ValueError):
                out.append(f"{where}: byte must be base64, got {value!r}")
        elif fmt == "google-datetime" and not _rfc3339(value):
            out.append(f"{where}: google-datetime must be RFC 3339, got {value!r}")
        elif fmt == "google-duration" and not _DURATION.fullmatch(value):
            out.append(f"{where}: google-duration must be like '3.5s', got {value!r}")
        enum = schema.get("enum")
        if enum is not None and value not in enum:
            out.append(f"{where}: {value!r} is not a value of the enum")
        pattern = schema.get("pattern")
        if pattern is not None and not re.fullmatch(pattern, value):
            out.append(f"{where}: {value!r} does not match the pattern {pattern!r}")

    @staticmethod
    def _range(value: int, fmt: str, where: str, out: list[str]) -> None:
        low, high = INT_RANGES.get(fmt, INT_RANGES["int64"])
        if not low <= value <= high:
            out.append(f"{where}: {value} is out of the {fmt} range")

    def check_parameter(self, name: str, spec: dict[str, Any], raw: str) -> str:
        """Why a query or path parameter's text is not what `spec` allows ("" when fine)."""
        kind, fmt = spec.get("type", "string"), spec.get("format", "")
        if kind == "boolean" and raw not in ("true", "false"):
            return f"Invalid value for boolean parameter {name!r}: {raw!r}"
        if kind == "integer" or fmt in INT_RANGES:
            if not _INT64.fullmatch(raw):
                return f"Invalid value for integer parameter {name!r}: {raw!r}"
            low, high = INT_RANGES.get(fmt or "int32", INT_RANGES["int64"])
            if not low <= int(raw) <= high:
                return f"Value out of range for parameter {name!r}: {raw!r}"
        if kind == "number":
            try:
                float(raw)
            except ValueError:
                return f"Invalid value for number parameter {name!r}: {raw!r}"
        if "enum" in spec and raw not in spec["enum"]:
            return f"Invalid value for parameter {name!r}: {raw!r}"
        pattern = spec.get("pattern")
        if pattern and not re.fullmatch(pattern, raw):
            return (
                f"Invalid value '{raw}'. Values must match the following regular expression: "
                f"'{pattern}'"
            )
        return ""


def _method(spec: dict[str, Any]) -> Method:
    path: str = spec["path"]
    parts: list[str] = []
    literals = 0
    for segment in path.split("/"):
        names = re.fullmatch(r"\{(\+?)(\w+)\}", segment)
        if names:
            parts.append(f"(?P<{names.group(2)}>{'.+' if names.group(1) else '[^/]+'})")
        else:
            literals += 1
            parts.append(re.escape(segment))
    return Method(
        id=spec["id"],
        http_method=spec["httpMethod"],
        path=path,
        parameters=spec.get("parameters", {}),
        request=spec.get("request", {}).get("$ref"),
        response=spec.get("response", {}).get("$ref"),
        regex=re.compile("/".join(parts)),
        literals=literals,
    )


def _rfc3339(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
