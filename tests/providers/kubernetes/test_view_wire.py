"""`to_wire` (providers/core/wire.py), which every command's JSON goes through, against its
rules written plainly (the walk as it was before it dispatched on exact types): the same
JSON, byte for byte, for a cluster's view and for values of every kind the walk can meet,
subclasses of the containers and of the JSON types included.

Here because the cluster's view is the walk's largest input (~27,000 values at 1,000
nodes); the model round trips are in tests/providers/test_wire_models.py."""

from __future__ import annotations

import dataclasses
import enum
import json
from collections import OrderedDict, defaultdict, namedtuple
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from providers.core.wire import _fields, _is_empty, field, format_time, to_wire
from providers.kubernetes.capacity import compute
from providers.models import (
    AWSRegion,
    InstanceTypeSpec,
    KubernetesRegion,
    RegionSpec,
    ResourceListOptions,
    ResourcePricingItem,
    ResourceStat,
    Selector,
)
from tests.providers.kubernetes.objects import synthetic_cluster
from tests.providers.kubernetes.test_capacity import T0


def reference(obj: Any) -> Any:
    """The walk's rules in their plain order: a dataclass instance, then any dict, list or
    tuple (subclasses too), then a time, else the value as it is."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for info in _fields(type(obj)):
            value = getattr(obj, info.name)
            if info.omitempty and (value is None if info.nullable else _is_empty(value)):
                continue
            out[info.wire] = reference(value)
            for name in info.also:
                out[name] = out[info.wire]
        return out
    if isinstance(obj, dict):
        return {str(k): reference(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [reference(v) for v in obj]
    if isinstance(obj, datetime):
        return format_time(obj)
    return obj


def text(value: Any) -> str:
    """As `cli.output.emit_json` prints for a program (and sorted, which would hide an order
    changed, is not used)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class Color(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Name(str):
    pass


class Count(int):
    pass


Pair = namedtuple("Pair", "left right")


class Items(list[Any]):
    pass


@dataclasses.dataclass
class Inner:
    when: datetime | None = field(omitempty=True, default=None)
    flag: bool = field(omitempty=True, default=False)
    ratio: float = field(omitempty=True, default=0.0)
    count: int = field(omitempty=True, default=0)
    label: str = field("labelName", omitempty=True, default="")
    note: str | None = field(omitempty=True, default=None)  # a pointer: "" is kept
    tags: list[str] = field(omitempty=True, default_factory=list)
    extra: dict[str, Any] = field(omitempty=True, default_factory=dict)
    pair: tuple[int, ...] = field(omitempty=True, default=())
    hidden: str = field(internal=True, default="not on the wire")


@dataclasses.dataclass
class Outer:
    name: str = field(default="", also=("alias", "other"))
    inner: Inner | None = field(omitempty=True, default=None)
    items: list[Any] = field(default_factory=list)
    table: dict[Any, Any] = field(default_factory=dict)
    anything: Any = field(default=None)


@dataclasses.dataclass
class Sub(Outer):
    more: int = field(default=7)


class ModelDict(dict[str, Any]):
    pass


@dataclasses.dataclass
class DictModel(ModelDict):
    """A dataclass that is also a dict: the dataclass rule comes first."""

    x: int = field(default=1)


WHEN = datetime(2026, 3, 7, 3, 29, tzinfo=timezone(timedelta(hours=2)))
VALUES: list[Any] = [
    None,
    True,
    0,
    -3,
    2**70,
    1.5,
    -0.0,
    "",
    "h\u00e9llo \u2603",
    WHEN,
    Color.RED,
    Level.HIGH,
    Name("sub"),
    Count(0),
    Pair(1, [WHEN]),
    Items([1, Inner(count=2)]),
    OrderedDict([(2, "b"), ("a", WHEN)]),
    defaultdict(list, {"k": [Inner()]}),
    {1: "int key", "1": "str key", 2.5: "float key"},
    {None: "none key", False: "bool key"},
    {Name("k"): Color.RED, Color.RED: 1},
    [[], {}, (), [None]],
    (1, (2, (3,))),
    Inner(),
    Inner(
        when=WHEN,
        flag=True,
        ratio=0.25,
        count=-1,
        label="x",
        note="",
        tags=["a"],
        extra={"n": Inner(note=None)},
        pair=(0,),
    ),
    Inner(ratio=float("-0.0"), count=Count(0), label=Name(""), tags=Items(), extra=ModelDict()),
    Outer(name="n", inner=Inner(), items=[Inner(), WHEN, Pair(0, 0)], table={3: Inner()}),
    Outer(anything=Outer(anything=[Outer()])),
    Sub(name="s", more=0),
    DictModel(x=5),
    Selector(key="gpu", operator="Exists"),
    InstanceTypeSpec(name="t", vcpus=2, memory_gib=None, gpu_memory_gib=0.0),
    ResourcePricingItem(on_demand_price=0.0),
    ResourceListOptions(start_time=WHEN),
    ResourceStat(),
    RegionSpec(
        name="r",
        zones=["a"],
        aws=AWSRegion(region="r"),
        kubernetes=KubernetesRegion(context="c"),
    ),
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_every_kind_of_value_is_written_as_the_rules_write_it(value: Any) -> None:
    assert text(to_wire(value)) == text(reference(value))
    assert text(to_wire([value, {"v": value}])) == text(reference([value, {"v": value}]))


def test_a_value_of_no_json_type_is_handed_on_as_it_is() -> None:
    """Left for the encoder to refuse (or a caller's `default=str`), as before."""
    odd = {1, 2}
    assert to_wire([odd])[0] is odd
    assert to_wire(Outer(anything=odd))["anything"] is odd
    assert to_wire([Outer, Inner])[0] is Outer  # a dataclass itself, not an instance
    assert to_wire({"k": Outer})["k"] is Outer


def test_the_walk_returns_new_containers() -> None:
    """Callers may change what they get without changing the model."""
    model = Outer(items=["a"], table={"k": ["v"]})
    wire = to_wire(model)
    wire["items"].append("b")
    wire["table"]["k"].append("w")
    assert model.items == ["a"] and model.table == {"k": ["v"]}


def test_a_clusters_view_is_written_as_the_rules_write_it() -> None:
    nodes, pods = synthetic_cluster(40, 400)
    summary = compute(nodes, list(pods), region_name="bench", now=T0)
    assert text(to_wire([summary.resource])) == text(reference([summary.resource]))
    assert len(summary.resource.overview) > 1


def test_times_are_written_in_utc_whole_seconds() -> None:
    at = datetime(2026, 3, 7, 1, 29, 0, 999_999, tzinfo=UTC)
    assert to_wire({"at": at, "in": Inner(when=WHEN)}) == {
        "at": "2026-03-07T01:29:00Z",
        "in": {"when": "2026-03-07T01:29:00Z"},
    }
