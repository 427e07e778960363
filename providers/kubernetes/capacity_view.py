"""The spec's Resource from the charged nodes: supply, allocated and allocatable by pool
(down to each node) and by breakdown label, split into on-demand and spot; and the nodes
whose pods hold more than they offer.

Allocatable is what each node has left, never below zero, summed per group. Pods can hold
more than a node now offers (a GPU that failed after they were scheduled: the device
plugin lowers the node's allocatable, the pods keep running); such a node's allocatable
is 0, not negative, so it takes nothing from its neighbours' sum, and `overcommitted`
names it with each resource held beyond the offer, for the caller to report.

Every key of supply is also in allocated and allocatable (`"0"` when nothing is used), so
consumers can diff the maps. Instances (`instance/<type>`) count nodes: supply all of them,
allocated those in use (`pods.marks_busy`), allocatable the rest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from providers.kubernetes.nodes import Key, Node, PoolRules
from providers.kubernetes.quantity import fmt_ratio
from providers.models import (
    RegionResourceItem,
    RegionSpec,
    Resource,
    ResourceItem,
    ResourceStat,
    ResourceStatItem,
)

PROVIDER = "kubernetes"
_GIB_MILLI = 1000 * 2**30


@dataclass(frozen=True)
class Overcommit:
    """A node whose pods hold more than it offers: (key, held, offered) in milli-units."""

    node: str
    excess: tuple[tuple[Key, int, int], ...]


def _value(key: Key, millis: int) -> str:
    return fmt_ratio(millis, _GIB_MILLI if key[0] == "memory" else 1000)


class _Texts(dict[tuple[bool, int], str]):
    """`_value`'s answers within one view: a cluster's nodes repeat a few shapes, so most
    of its ~6,000 figures at 1,000 nodes are ones already written."""

    def of(self, key: Key, millis: int) -> str:
        memory = key[0] == "memory"
        found = self.get((memory, millis))
        if found is None:
            found = self[memory, millis] = fmt_ratio(millis, _GIB_MILLI if memory else 1000)
        return found


def _free(node: Node) -> dict[Key, int]:
    """What the node has left of each resource it offers, never below zero: computed once
    a node, for each group it is summed into."""
    allocated = node.allocated
    return {key: max(0, v - allocated.get(key, 0)) for key, v in node.supply.items()}


class _Totals:
    """Integer sums over a group of nodes of one capacity class."""

    __slots__ = ("allocated", "busy", "free", "instances", "nodes", "supply")

    def __init__(self) -> None:
        self.supply: dict[Key, int] = {}
        self.allocated: dict[Key, int] = {}
        # Clamped per node, then summed: an overcommitted node's excess is not free room
        # taken away from the other nodes of the group.
        self.free: dict[Key, int] = {}
        self.instances: dict[str, int] = {}
        self.busy: dict[str, int] = {}
        self.nodes = 0

    def add(self, node: Node, free: dict[Key, int]) -> None:
        """Add a node and what it has left (`_free`)."""
        self.nodes += 1
        supply, total_free, allocated = self.supply, self.free, self.allocated
        for key, v in node.supply.items():
            supply[key] = supply.get(key, 0) + v
            total_free[key] = total_free.get(key, 0) + free[key]
        for key, v in node.allocated.items():
            allocated[key] = allocated.get(key, 0) + v
        itype = node.instance_type
        self.instances[itype] = self.instances.get(itype, 0) + 1
        self.busy[itype] = self.busy.get(itype, 0) + (1 if node.busy > 0 else 0)

    def item(self, texts: _Texts) -> ResourceStatItem:
        supply: ResourceItem = {}
        allocated: ResourceItem = {}
        allocatable: ResourceItem = {}
        for key in sorted(set(self.supply) | set(self.allocated)):
            rtype, name = key
            have = self.supply.get(key)
            used = max(0, self.allocated.get(key, 0))
            allocated.setdefault(rtype, {})[name] = texts.of(key, used)
            if have is not None:
                supply.setdefault(rtype, {})[name] = texts.of(key, have)
                allocatable.setdefault(rtype, {})[name] = texts.of(key, self.free[key])
        if self.instances:
            supply["instance"] = {}
            allocated["instance"] = {}
            allocatable["instance"] = {}
            for itype in sorted(self.instances):
                total, busy = self.instances[itype], self.busy[itype]
                supply["instance"][itype] = str(total)
                allocated["instance"][itype] = str(busy)
                allocatable["instance"][itype] = str(total - busy)
        return ResourceStatItem(allocated=allocated, supply=supply, allocatable=allocatable)


def _stat(nodes: Iterable[tuple[Node, dict[Key, int]]], texts: _Texts) -> ResourceStat:
    spot, on_demand = _Totals(), _Totals()
    for node, free in nodes:
        (spot if node.spot else on_demand).add(node, free)
    return ResourceStat(
        on_demand=on_demand.item(texts) if on_demand.nodes else None,
        spot=spot.item(texts) if spot.nodes else None,
    )


def view(nodes: dict[str, Node], rules: PoolRules, region_name: str) -> Resource:
    """The nodes as they are charged now: by pool, down to each node, and by each
    breakdown label."""
    texts = _Texts()
    every = [(node, _free(node)) for node in nodes.values()]
    pools: dict[tuple[str, str], list[tuple[Node, dict[Key, int]]]] = {}
    for m in every:
        pools.setdefault((m[0].pool, m[0].pool_key), []).append(m)
    overview = []
    for (pool, pool_key), members in sorted(pools.items(), key=lambda kv: kv[0]):
        members.sort(key=lambda m: m[0].name)
        children = [
            RegionResourceItem(key="node", value=m[0].name, stat=_stat((m,), texts))
            for m in members
        ]
        overview.append(
            RegionResourceItem(
                next_level=children, key=pool_key, value=pool, stat=_stat(members, texts)
            )
        )
    breakdown: dict[str, list[RegionResourceItem]] = {}
    for label in rules.breakdown_labels:
        groups: dict[str, list[tuple[Node, dict[Key, int]]]] = {}
        for m in every:
            groups.setdefault(m[0].labels.get(label, ""), []).append(m)
        breakdown[label] = [
            RegionResourceItem(key=label, value=value, stat=_stat(members, texts))
            for value, members in sorted(groups.items(), key=lambda kv: kv[0])
        ]
    return Resource(
        region=RegionSpec(name=region_name),
        overview=overview,
        breakdown=breakdown,
        provider=PROVIDER,
    )


def overcommitted(nodes: Iterable[Node]) -> list[Overcommit]:
    """The nodes whose pods hold more than they offer, by name, with what they hold."""
    found = []
    for node in sorted(nodes, key=lambda n: n.name):
        excess = tuple(
            (key, held, node.supply.get(key, 0))
            for key, held in sorted(node.allocated.items())
            if held > node.supply.get(key, 0)
        )
        if excess:
            found.append(Overcommit(node=node.name, excess=excess))
    return found


def _excess_text(over: Overcommit) -> str:
    held = (f"{k[0]}/{k[1]} {_value(k, used)}>{_value(k, have)}" for k, used, have in over.excess)
    return " ".join((over.node, *held))


def overcommit_message(found: list[Overcommit], shown: int = 10) -> str:
    """One line naming the first `shown` overcommitted nodes and what each holds too much of."""
    named = ", ".join(_excess_text(o) for o in found[:shown])
    more = f" and {len(found) - shown} more" if len(found) > shown else ""
    return (
        f"{len(found)} node(s) overcommitted (pods hold more than the node offers; "
        f"allocatable shown as 0): {named}{more}"
    )
