"""`pricing --available`: keep the instance types the account has quota to launch now.

Each priced type is checked against the quotas it counts against (the cloud's QuotaMap:
a family's vCPUs, the region's vCPUs, a GPU model's count, a project-wide GPU count): its
on-demand price is kept when one more instance fits every on-demand quota, its spot price
when one fits every spot quota; a type that fits neither is dropped. A quota whose usage is
unknown cannot say no: the price is kept and the notes say so.
"""

from __future__ import annotations

from collections.abc import Sequence

from providers.accounts.fit import type_fit
from providers.accounts.model import AccountSnapshot, Market, QuotaMap
from providers.accounts.resource import unknown_note
from providers.models import InstanceTypeSpec, ResourcePricing, quantity


def _fits(
    snapshot: AccountSnapshot,
    quota_map: QuotaMap,
    name: str,
    spec: InstanceTypeSpec | None,
    market: Market,
    unknown: set[str],
) -> bool:
    vcpus = spec.vcpus if spec else None
    gpu = spec.gpu if spec else ""
    gpu_count = spec.gpu_count if spec else 0
    found = type_fit(snapshot, quota_map, name, vcpus, gpu, gpu_count, market)
    unknown.update(found.unknown)
    return found.instances != 0  # unknown (None) cannot say no


def keep_launchable(
    pricing: ResourcePricing, snapshot: AccountSnapshot, quota_map: QuotaMap
) -> None:
    """Drop from `pricing` what the account cannot launch now; say what was dropped."""
    dropped: list[str] = []
    spot_hidden = 0
    unknown: set[str] = set()
    for name, item in list(pricing.items.items()):
        spec = pricing.shapes.get(name)
        on_demand = item.on_demand_price is not None and _fits(
            snapshot, quota_map, name, spec, "onDemand", unknown
        )
        spot = item.spot_price is not None and _fits(
            snapshot, quota_map, name, spec, "spot", unknown
        )
        if not on_demand and not spot:
            dropped.append(name)
            del pricing.items[name]
            pricing.shapes.pop(name, None)
            continue
        if not on_demand:
            item.on_demand_price = None
        if not spot and item.spot_price is not None:
            item.spot_price = None
            spot_hidden += 1
    notes = []
    if dropped:
        notes.append(
            f"--available: {len(dropped)} type(s) dropped, no quota left to launch one now "
            f"({_few(dropped)})"
        )
    if spot_hidden:
        notes.append(f"--available: {spot_hidden} spot price(s) hidden, no spot quota left")
    if snapshot.quotas_unknown:
        notes.append(f"--available: {unknown_note(snapshot)}")
    elif unknown:
        notes.append(
            f"--available: usage of {_few(sorted(unknown))} unknown; types counting against "
            "them are kept"
        )
    pricing.notes.extend(notes)


def _few(names: Sequence[str], most: int = 5) -> str:
    shown = ", ".join(names[:most])
    return shown + (f" and {quantity(len(names) - most)} more" if len(names) > most else "")
