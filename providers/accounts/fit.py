"""How many instances of a type the account's quotas let launch now, and which quota binds.

Every quota a launch counts against (the cloud's QuotaMap.needs: a family's vCPUs per
market, a region's GPUs of a model, GCP's project-wide CPUS_ALL_REGIONS and
GPUS_ALL_REGIONS) caps the count at floor(free / per instance); the count is the least of
them and the binding quota is the one that gives it. A code the snapshot holds in both
scopes (a region's and the project's) is two limits, each counted. A quota that is not
in the snapshot, or whose usage is unknown, cannot say no (fail-open): it is named in
`unknown`, and unless a known quota already leaves room for none, the count is unknown
(None), never a guess.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from providers.accounts.model import AccountSnapshot, Market, Need, QuotaMap


@dataclass(frozen=True)
class Binding:
    """The quota that stops the next instance: its limit and usage in its own unit, what is
    free of it, what one instance takes of it, and its scope ("region" or "global")."""

    code: str
    name: str
    limit: float
    used: float
    free: float
    per_instance: float
    scope: str

    def describe(self, per: str = "per instance") -> str:
        """`L-417A185B Running On-Demand P instances: 64 free of 192, 192 per instance`
        (offers, in a table's narrow column, say `each`)."""
        named = self.code if self.name in ("", self.code) else f"{self.code} {self.name}"
        return f"{named}: {_n(self.free)} free of {_n(self.limit)}, {_n(self.per_instance)} {per}"

    def wire(self) -> dict[str, Any]:
        """As an offer's `binding` (cli/schemas/offers.schema.json)."""
        return {
            "code": self.code,
            "name": self.name,
            "limit": self.limit,
            "used": self.used,
            "free": self.free,
            "perInstance": self.per_instance,
            "scope": self.scope,
        }


@dataclass(frozen=True)
class Fit:
    """`instances`: how many can launch now (None: unknown: a quota that applies is unknown
    and the known ones leave room, or no quota applies). `at_most`: what the known quotas
    allow (None: none known), an upper bound when `unknown` is not empty. `binding`: the
    known quota that gives `at_most`. `unknown`: codes that apply but whose limit or usage
    is not known. `reason`: why the region's quotas are unknown ("" when known)."""

    instances: int | None
    at_most: int | None
    binding: Binding | None
    unknown: tuple[str, ...] = ()
    reason: str = ""


def fit(snapshot: AccountSnapshot, needs: Sequence[Need]) -> Fit:
    """How many instances taking `needs` each fit the quotas of `snapshot` now, and the
    quota that binds (see the module)."""
    best: tuple[int, Binding] | None = None
    unknown: list[str] = []
    for need in needs:
        if need.amount <= 0:
            continue
        found = [q for q in snapshot.quotas if q.code == need.code]
        if not found or any(q.used is None for q in found):
            unknown.append(need.code)
            continue
        for quota in found:
            used = quota.used or 0.0
            free = max(0.0, quota.limit - used)
            count = math.floor(free / need.amount + 1e-9)
            if best is None or count < best[0]:
                binding = Binding(
                    quota.code, quota.name, quota.limit, used, free, need.amount, quota.scope
                )
                best = (count, binding)
    at_most = best[0] if best is not None else None
    # A known "none" stands whatever else is unknown; room is only claimed when all is known.
    known = at_most == 0 or (at_most is not None and not unknown)
    instances = at_most if known else None
    return Fit(
        instances=instances,
        at_most=at_most,
        binding=best[1] if best is not None else None,
        unknown=tuple(dict.fromkeys(unknown)),
        reason=snapshot.quotas_unknown,
    )


def type_fit(
    snapshot: AccountSnapshot,
    quota_map: QuotaMap,
    instance_type: str,
    vcpus: float | None,
    gpu: str,
    gpu_count: int,
    market: Market,
) -> Fit:
    """fit() of one instance type in `market`, its needs from `quota_map` (built with the
    snapshot's quotas: `Class(snapshot.quotas)`)."""
    return fit(snapshot, quota_map.needs(instance_type, vcpus, gpu, gpu_count, market))


def _n(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}".rstrip("0")
