"""Azure's machine-readable contract for the ARM stand-in: the Python management SDKs
Microsoft generates from its REST specifications, used as data, never as a client
(azure-mgmt-compute, -network, -authorization, and -resource-subscriptions for Subscriptions -
List Locations).

- Routes: every operation of the operation groups named in `GROUPS` (VirtualMachines,
  NetworkInterfaces, RoleAssignments, ...), read from the SDK itself: the request builder
  each operation method calls is called with placeholder arguments, which gives the HTTP
  method, the path template, the api-version the SDK sends and the query parameters'
  wire names (`expand` -> `$expand`); the method's annotations give the body model
  (`parameters: VirtualMachine`) and the answer (`VirtualMachine`, `ItemPaged[...]`, a
  long-running `LROPoller[...]` or none). Operation ids are Azure's (`VirtualMachines_
  CreateOrUpdate`): the group class without `Operations`, `_`, the method in PascalCase.
- Bodies: a strict walk of the models. azure-mgmt-compute (>= 38) and azure-mgmt-network
  (>= 31) generate "hybrid" models (`rest_field`s with a wire name, a visibility and a typed
  annotation: `Optional[...]` for an optional field, `Union[str, SomeEnum]` for an
  extensible enum); azure-mgmt-authorization 4 still generates msrest models
  (`_attribute_map` with flattened `properties.x` keys, `_validation` readonly/required).
  Both are walked the same way. A violation is: a key the model does not have (at any
  depth), a value of the wrong JSON type, an enum value outside the model's enum (Azure's
  enums are extensible and compared without case, so case differences pass), a read-only
  field sent in a request (ARM ignores it, the driver should not send it), a required
  field missing, and in a response a field the model never returns.

Importing the SDKs costs ~0.5 s once; `load()` caches the contract per process.
"""

from __future__ import annotations

import enum
import functools
import importlib
import inspect
import re
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

# (SDK name, operations module, operation group classes) whose operations the stand-in
# routes. An operation of these groups that the stand-in does not serve is "unserved"; a
# path no operation has is a violation.
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "compute",
        "azure.mgmt.compute.operations._operations",
        (
            "VirtualMachinesOperations",
            "DisksOperations",
            "SnapshotsOperations",
            "ImagesOperations",
            "ResourceSkusOperations",
            "UsageOperations",
            "VirtualMachineImagesOperations",
            "VirtualMachineSizesOperations",
            "CapacityReservationGroupsOperations",
            "CapacityReservationsOperations",
        ),
    ),
    (
        "network",
        "azure.mgmt.network.operations._operations",
        (
            "NetworkInterfacesOperations",
            "PublicIPAddressesOperations",
            "VirtualNetworksOperations",
            "SubnetsOperations",
            "NetworkSecurityGroupsOperations",
        ),
    ),
    (
        "authorization",
        "azure.mgmt.authorization.v2022_04_01.operations._role_assignments_operations",
        ("RoleAssignmentsOperations",),
    ),
    (
        "authorization",
        "azure.mgmt.authorization.v2022_04_01.operations._role_definitions_operations",
        ("RoleDefinitionsOperations",),
    ),
    (
        "resources",
        "azure.mgmt.resource.subscriptions.operations._operations",
        ("SubscriptionsOperations",),
    ),
)
# The models each SDK answers errors with (what its operations deserialize a failure into).
ERROR_MODELS = {
    "compute": ("azure.mgmt.compute.models", "CloudError"),
    "network": ("azure.mgmt.network.models", "CloudError"),
    "authorization": ("azure.mgmt.authorization.v2022_04_01.models", "ErrorResponse"),
    # Not its CloudError: the generator typed CloudError.error as ErrorResponse, one level
    # deeper than ARM's wire `{"error": {code, message}}`, which ErrorResponse is.
    "resources": ("azure.mgmt.resource.subscriptions.models", "ErrorResponse"),
}
MODELS = {
    "compute": "azure.mgmt.compute.models",
    "network": "azure.mgmt.network.models",
    "authorization": "azure.mgmt.authorization.v2022_04_01.models",
    "resources": "azure.mgmt.resource.subscriptions.models",
}
# Enums that are catalogs, not contracts: VirtualMachineSizeTypes is frozen at 2016's sizes
# and documented as deprecated ("use the Resource SKUs API for the sizes of a region"); the
# stand-in checks a size against its own SKU table instead.
OPEN_ENUMS = frozenset({"VirtualMachineSizeTypes"})
# Path parameters that hold a path of their own (ARM scopes).
_SCOPES = {"scope", "resourceUri"}
_MARK = "zq"


def sdk_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {
        name: version(name)
        for name in (
            "azure-mgmt-compute",
            "azure-mgmt-network",
            "azure-mgmt-authorization",
            "azure-mgmt-resource-subscriptions",
        )
    }


# --- types ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class T:
    """A JSON type the walk checks: kind in str int float bool datetime duration bytes any
    list dict enum model schema union; `arg` is the item type, the enum, the model class or
    the inline schema (msrest's flattened `properties`)."""

    kind: str
    arg: Any = None


@dataclass(frozen=True)
class Field:
    name: str  # wire name
    type: T
    readonly: bool = False
    writeonly: bool = False  # never in a response
    required: bool = False  # in a request
    required_out: bool = False  # in a response


@dataclass
class Schema:
    name: str
    fields: dict[str, Field] = field(default_factory=dict)
    discriminator: str | None = None
    mapping: dict[str, type] = field(default_factory=dict)


@dataclass(frozen=True)
class Violation:
    where: str  # VirtualMachine.properties.hardwareProfile
    problem: str
    kind: str  # unknown type enum readonly required writeonly
    model: str = ""  # the model the bad key or value sits in
    key: str = ""

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


ANY = T("any")


def _is_model(obj: Any) -> bool:
    return isinstance(obj, type) and (
        hasattr(obj, "_attribute_map") or hasattr(obj, "_attr_to_rest_field") or _hybrid(obj)
    )


def _hybrid(cls: type) -> bool:
    return hasattr(cls, "_calculated") and hasattr(cls, "_is_model")


class Types:
    """Turns SDK annotations into `T`s and models into `Schema`s, cached."""

    def __init__(self) -> None:
        self._schemas: dict[type, Schema] = {}

    def of(self, annotation: Any, package: str) -> T:
        if annotation is None or annotation is Any:
            return ANY
        if isinstance(annotation, typing.ForwardRef):
            annotation = annotation.__forward_arg__
        if isinstance(annotation, str):
            return self.of(_resolve(annotation, package), package)
        origin = typing.get_origin(annotation)
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if origin is typing.Union:
            kinds = [self.of(a, package) for a in args]
            enums = [k for k in kinds if k.kind == "enum"]
            if enums:  # Union[str, SomeEnum]: Azure's extensible enum
                return enums[0]
            return kinds[0] if len(kinds) == 1 else T("union", tuple(kinds))
        if origin in (list, typing.List, Iterable) or annotation in (list,):  # noqa: UP006
            return T("list", self.of(args[0], package) if args else ANY)
        if origin in (dict, typing.Dict) or annotation in (dict,):  # noqa: UP006
            return T("dict", self.of(args[1], package) if len(args) > 1 else ANY)
        if origin is typing.Literal:
            return T("str")
        if isinstance(annotation, type):
            if issubclass(annotation, enum.Enum):
                return T("enum", annotation)
            if _is_model(annotation):
                return T("model", annotation)
            simple = {str: "str", int: "int", float: "float", bool: "bool", bytes: "bytes"}
            if annotation in simple:
                return T(simple[annotation])
            if annotation is datetime:
                return T("datetime")
            if annotation.__name__ == "timedelta":
                return T("duration")
        return ANY

    def msrest(self, text: str, module: Any) -> T:
        if text.startswith("[") and text.endswith("]"):
            return T("list", self.msrest(text[1:-1], module))
        if text.startswith("{") and text.endswith("}"):
            return T("dict", self.msrest(text[1:-1], module))
        simple = {
            "str": "str",
            "int": "int",
            "long": "int",
            "float": "float",
            "bool": "bool",
            "iso-8601": "datetime",
            "rfc-1123": "str",
            "duration": "duration",
            "bytearray": "bytes",
            "base64": "bytes",
            "object": "any",
        }
        if text in simple:
            return T(simple[text])
        found = getattr(module, text, None)
        if isinstance(found, type) and issubclass(found, enum.Enum):
            return T("enum", found)
        return T("model", found) if _is_model(found) else ANY

    def schema(self, cls: type) -> Schema:
        found = self._schemas.get(cls)
        if found is None:
            found = Schema(cls.__name__)
            self._schemas[cls] = found  # before filling: models refer to themselves
            if _hybrid(cls):
                self._fill_hybrid(cls, found)
            else:
                self._fill_msrest(cls, found)
        return found

    def _fill_hybrid(self, cls: type, schema: Schema) -> None:
        # The SDK computes a model's `_attr_to_rest_field` when it first constructs one.
        cls.__new__(cls)  # type: ignore[call-overload]
        package = cls.__module__.rsplit(".", 1)[0]
        annotations: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            annotations.update(inspect.get_annotations(klass))
        rest_fields: dict[str, Any] = cls._attr_to_rest_field  # type: ignore[attr-defined]
        for attr, rf in rest_fields.items():
            annotation = annotations.get(attr)
            visibility = set(rf._visibility or ("read", "create", "update"))
            optional = annotation is None or type(None) in typing.get_args(annotation)
            readonly = visibility == {"read"}
            kind = self.of(annotation, package)
            if rf._is_discriminator:
                schema.discriminator = rf._rest_name
            schema.fields[rf._rest_name] = Field(
                rf._rest_name,
                kind,
                readonly=readonly,
                writeonly="read" not in visibility,
                required=not optional and not readonly,
                required_out=not optional and "read" in visibility,
            )
        mapping = cls.__dict__.get("__mapping__")
        if mapping:
            schema.mapping = dict(mapping)

    def _fill_msrest(self, cls: type, schema: Schema) -> None:
        module = importlib.import_module(cls.__module__)
        validation: dict[str, dict[str, Any]] = getattr(cls, "_validation", {})
        attribute_map: dict[str, dict[str, Any]] = getattr(cls, "_attribute_map", {})
        for attr, spec in attribute_map.items():
            parts = [p.replace("\\.", ".") for p in re.split(r"(?<!\\)\.", spec["key"])]
            rules = validation.get(attr, {})
            readonly = bool(rules.get("readonly"))
            target = schema
            for part in parts[:-1]:  # flattened `properties.x`: an inline object
                holder = target.fields.get(part)
                if holder is None:
                    holder = Field(part, T("schema", Schema(f"{target.name}.{part}")))
                    target.fields[part] = holder
                target = holder.type.arg
            target.fields[parts[-1]] = Field(
                parts[-1],
                self.msrest(spec["type"], module),
                readonly=readonly,
                required=bool(rules.get("required")) and not readonly,
                required_out=bool(rules.get("required")),
            )
        mapping = getattr(cls, "_subtype_map", None)
        if mapping:
            (key, values), *_ = mapping.items()
            schema.discriminator = key
            schema.mapping = {k: getattr(module, v) for k, v in values.items()}


def _resolve(name: str, package: str) -> Any:
    name = name.removeprefix("_models.")
    module = importlib.import_module(package)
    found = getattr(module, name, None)
    if found is None and not package.endswith(".models"):
        found = getattr(importlib.import_module(package + ".models"), name, None)
    return found


# --- operations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    id: str  # VirtualMachines_CreateOrUpdate
    sdk: str  # compute / network / authorization / resources
    http_method: str
    path: str  # /subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/...
    api_version: str  # what the SDK sends
    path_params: tuple[str, ...]
    query: dict[str, str]  # wire name -> SDK keyword
    request: type | None  # the body's model
    response: type | None  # the answer's model (the item's, for a page)
    kind: str  # model | page (value + nextLink) | array | lro | none
    regex: re.Pattern[str] = field(compare=False)
    literals: int = 0


@dataclass(frozen=True)
class Route:
    operation: Operation
    params: dict[str, str]  # path parameter -> value, as sent (URL-decoded)


class Contract:
    def __init__(self, operations: list[Operation]) -> None:
        # More literal segments first: .../virtualMachines/{vmName}/instanceView is not a VM
        # named "instanceView".
        self.operations = sorted(operations, key=lambda o: (-o.literals, o.id))
        self.by_id = {o.id: o for o in self.operations}
        self.types = Types()

    def route(self, http_method: str, path: str) -> Route | None:
        for op in self.operations:
            if op.http_method != http_method:
                continue
            match = op.regex.fullmatch(path)
            if match:
                return Route(op, dict(match.groupdict()))
        return None

    def model(self, sdk: str, name: str) -> type:
        found = getattr(importlib.import_module(MODELS[sdk]), name)
        assert isinstance(found, type)
        return found

    def validate(self, value: Any, model: type, *, request: bool) -> list[Violation]:
        out: list[Violation] = []
        self._check(value, T("model", model), model.__name__, out, request)
        return out

    def validate_error(self, body: Any, sdk: str) -> list[Violation]:
        package, name = ERROR_MODELS.get(sdk, ERROR_MODELS["compute"])
        model = getattr(importlib.import_module(package), name)
        return self.validate(body, model, request=False)

    def error_detail_model(self, sdk: str) -> type:
        """The model of the `error` inside an error body (an async operation's too)."""
        package, name = ERROR_MODELS.get(sdk, ERROR_MODELS["compute"])
        schema = self.types.schema(getattr(importlib.import_module(package), name))
        arg = schema.fields["error"].type.arg
        assert isinstance(arg, type)
        return arg

    # the walk

    def _check(self, value: Any, t: T, where: str, out: list[Violation], request: bool) -> None:
        if value is None:
            return  # ARM's JSON takes null for "not given"
        kind = t.kind
        if kind == "any":
            return
        if kind == "str":
            if not isinstance(value, str):
                out.append(Violation(where, f"expected a string, got {_show(value)}", "type"))
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                out.append(Violation(where, f"expected an integer, got {_show(value)}", "type"))
        elif kind == "float":
            if isinstance(value, bool) or not isinstance(value, int | float):
                out.append(Violation(where, f"expected a number, got {_show(value)}", "type"))
        elif kind == "bool":
            if not isinstance(value, bool):
                out.append(Violation(where, f"expected a boolean, got {_show(value)}", "type"))
        elif kind == "datetime":
            if not isinstance(value, str) or not _rfc3339(value):
                out.append(
                    Violation(where, f"expected an RFC 3339 time, got {_show(value)}", "type")
                )
        elif kind in ("duration", "bytes"):
            if not isinstance(value, str):
                out.append(Violation(where, f"expected a string, got {_show(value)}", "type"))
        elif kind == "enum":
            self._enum(value, t.arg, where, out)
        elif kind == "list":
            if not isinstance(value, list):
                out.append(Violation(where, f"expected an array, got {_show(value)}", "type"))
                return
            for i, item in enumerate(value):
                self._check(item, t.arg, f"{where}[{i}]", out, request)
        elif kind == "dict":
            if not isinstance(value, dict):
                out.append(Violation(where, f"expected an object, got {_show(value)}", "type"))
                return
            for key, item in value.items():
                self._check(item, t.arg, f"{where}[{key!r}]", out, request)
        elif kind == "union":
            trials: list[list[Violation]] = []
            for option in t.arg:
                found: list[Violation] = []
                self._check(value, option, where, found, request)
                if not found:
                    return
                trials.append(found)
            fewest = min(range(len(trials)), key=lambda i: len(trials[i]))
            out.extend(trials[fewest])
        elif kind in ("model", "schema"):
            schema = self.types.schema(t.arg) if kind == "model" else t.arg
            self._object(value, schema, where, out, request)

    def _object(
        self, value: Any, schema: Schema, where: str, out: list[Violation], request: bool
    ) -> None:
        if not isinstance(value, dict):
            out.append(Violation(where, f"expected an object, got {_show(value)}", "type"))
            return
        if schema.discriminator and schema.mapping:
            sub = schema.mapping.get(str(value.get(schema.discriminator)))
            if sub is not None:
                schema = self.types.schema(sub)
        for key, item in value.items():
            spec = schema.fields.get(key)
            if spec is None:
                out.append(
                    Violation(where, f"unknown property {key!r}", "unknown", schema.name, key)
                )
                continue
            at = f"{where}.{key}"
            if request and spec.readonly:
                out.append(
                    Violation(
                        at, "read-only: ARM ignores it in a request", "readonly", schema.name, key
                    )
                )
                continue
            if not request and spec.writeonly and item is not None:
                out.append(Violation(at, "never returned by Azure", "writeonly", schema.name, key))
            self._check(item, spec.type, at, out, request)
        for key, spec in schema.fields.items():
            needed = spec.required if request else spec.required_out
            if needed and value.get(key) is None:
                out.append(
                    Violation(f"{where}.{key}", "required, missing", "required", schema.name, key)
                )

    @staticmethod
    def _enum(value: Any, members: type[enum.Enum], where: str, out: list[Violation]) -> None:
        if not isinstance(value, str):
            out.append(Violation(where, f"expected a string, got {_show(value)}", "type"))
            return
        if members.__name__ in OPEN_ENUMS:
            return
        known = [str(m.value) for m in members]
        if value.lower() not in {k.lower() for k in known}:
            shown = ", ".join(known[:8]) + (", ..." if len(known) > 8 else "")
            out.append(
                Violation(
                    where,
                    f"{value!r} is not a value of {members.__name__} ({shown})",
                    "enum",
                    members.__name__,
                )
            )


# --- building the routing table ------------------------------------------------------------


@functools.cache
def load() -> Contract:
    try:
        operations = [
            op
            for sdk, module_name, groups in GROUPS
            for op in _operations(sdk, importlib.import_module(module_name), groups)
        ]
    except ImportError as e:
        raise RuntimeError(
            f"{e.name} is not installed: pip install '.[test]' brings azure-mgmt-compute, "
            "azure-mgmt-network, azure-mgmt-authorization and azure-mgmt-resource-subscriptions, "
            "whose models the Azure stand-in is held to"
        ) from None
    return Contract(operations)


def _operations(sdk: str, module: Any, groups: Iterable[str]) -> Iterable[Operation]:
    types = Types()
    for group in groups:
        cls = getattr(module, group)
        prefix = group.removesuffix("Operations")
        for name, method in inspect.getmembers(cls, inspect.isfunction):
            if name.startswith("_"):
                continue
            builder = _builder(module, cls, name)
            if builder is None:
                continue
            op_name = "".join(p.capitalize() for p in name.removeprefix("begin_").split("_"))
            op = _operation(f"{prefix}_{op_name}", sdk, module, builder, method, types)
            # `/{roleAssignmentId}` (the ById twins) would match any path: ARM routes those
            # by the id's own shape, which the scoped twin already covers.
            if re.fullmatch(r"/\{\w+\}", op.path) is None:
                yield op


def _builder(module: Any, cls: type, name: str) -> Callable[..., Any] | None:
    """The request builder the method calls (for a long-running one, its `_x_initial`)."""
    target = getattr(cls, f"_{name.removeprefix('begin_')}_initial", None)
    source = inspect.getsource(
        target if name.startswith("begin_") and target else getattr(cls, name)
    )
    found = re.findall(r"(build_\w+_request)\(", source)
    if not found:
        return None
    builder = getattr(module, found[0], None)
    return builder if callable(builder) else None


def _operation(
    op_id: str,
    sdk: str,
    module: Any,
    builder: Callable[..., Any],
    method: Callable[..., Any],
    types: Types,
) -> Operation:
    signature = inspect.signature(builder)
    positional = [
        p.name
        for p in signature.parameters.values()
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    marked = [f"{_MARK}{n}{_MARK}" for n in positional]
    required = {
        p.name: _probe(p.annotation)
        for p in signature.parameters.values()
        if p.kind is p.KEYWORD_ONLY and p.default is inspect.Parameter.empty
    }
    base = builder(*marked, **required)
    url, _, query_text = base.url.partition("?")
    pairs = dict(pair.split("=", 1) for pair in query_text.split("&") if pair)
    api_version = pairs.pop("api-version", "")
    query: dict[str, str] = {wire: next(iter(required), "") for wire in pairs}
    for p in signature.parameters.values():
        if p.name in positional or p.name in required:
            continue
        if p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        probe = _probe(p.annotation)
        if probe is None:
            continue
        try:
            request = builder(*marked, **required, **{p.name: probe})
        except Exception:  # a header parameter of a type the probe does not fit
            continue
        for pair in request.url.partition("?")[2].split("&"):
            wire = pair.split("=", 1)[0]
            if wire and wire != "api-version" and wire not in pairs:
                query[wire] = p.name
    # The template's own names ({vmName}), from the SDK's names in the marked URL.
    template = url
    params: list[str] = []
    for piece in re.findall(rf"{_MARK}(\w+?){_MARK}", url):
        params.append(_camel(piece))
        template = template.replace(f"{_MARK}{piece}{_MARK}", "{" + _camel(piece) + "}")
    regex, literals = _regex(template)
    method_sig = inspect.signature(method)
    request_model = None
    for param in method_sig.parameters.values():
        request_model = _first_model(param.annotation, sdk)
        if request_model is not None:
            break
    answer = method_sig.return_annotation
    kind, response = _answer(answer, sdk)
    return Operation(
        id=op_id,
        sdk=sdk,
        http_method=base.method,
        path=template,
        api_version=api_version,
        path_params=tuple(params),
        query=query,
        request=request_model,
        response=response,
        kind=kind,
        regex=regex,
        literals=literals,
    )


def _probe(annotation: Any) -> Any:
    text = str(annotation)
    if "MatchConditions" in text:
        return None
    if "bool" in text:
        return True
    if "int" in text and "str" not in text:
        return 1
    return "x"


def _camel(name: str) -> str:
    """The SDK's `resource_group_name` -> the REST reference's `resourceGroupName`; the
    SDK renames a few (`vm_name` stays `vmName`)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _regex(template: str) -> tuple[re.Pattern[str], int]:
    parts = []
    literals = 0
    for segment in template.split("/"):
        named = re.fullmatch(r"\{(\w+)\}", segment)
        if named:
            name = named.group(1)
            parts.append(f"(?P<{name}>{'.+?' if name in _SCOPES else '[^/]+'})")
        else:
            literals += 1 if segment else 0
            # ARM compares resource types and the fixed segments without case.
            parts.append(
                "".join(
                    f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in segment
                )
            )
    return re.compile("/".join(parts)), literals


def _first_model(annotation: Any, sdk: str) -> type | None:
    for arg in typing.get_args(annotation) or (annotation,):
        if isinstance(arg, typing.ForwardRef | str):
            arg = _resolve(arg if isinstance(arg, str) else arg.__forward_arg__, MODELS[sdk])
        if _is_model(arg):
            return typing.cast(type, arg)
    return None


def _answer(annotation: Any, sdk: str) -> tuple[str, type | None]:
    if annotation in (None, inspect.Signature.empty, type(None)):
        return "none", None
    origin = typing.get_origin(annotation)
    name = getattr(origin, "__name__", "") if origin else ""
    args = typing.get_args(annotation)
    if name == "LROPoller":
        model = _first_model(args[0], sdk) if args else None
        return "lro", model
    if name in ("ItemPaged", "Iterable"):
        return "page", _first_model(args[0], sdk) if args else None
    if origin is list:  # a bare JSON array (VirtualMachineImages_List)
        return "array", _first_model(args[0], sdk) if args else None
    model = _first_model(annotation, sdk)
    return ("model", model) if model else ("none", None)


def _rfc3339(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text


def _show(value: Any) -> str:
    import json

    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."
