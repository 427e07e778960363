"""How many instances of a plan the account's vCPU quotas still take in its region: the
quotas that apply to the chosen type and market (providers/aws/families.py), counted
against the account's snapshot in the catalog cache. Quotas that cannot be read are no
refusal: the count is unlimited, with a note (AWS's own check at RunInstances has the
last word), and the failure is remembered for the quota TTL so that every `alloc` does
not wait out the retries again.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from drivers.spec.base import UNLIMITED
from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from drivers.aws.plan import Plan
    from providers.accounts.model import Market, Reservation
    from providers.cloud.catalog import CloudCatalog
    from providers.core.settings import Settings
    from providers.core.ttlcache import TtlCache


def quota_count(
    plan: Plan,
    *,
    driver: str,
    account: str,
    catalog: CloudCatalog,
    memo: TtlCache,
    settings: Settings,
    warn: Callable[[str], None],
) -> int:
    """The count, the quotas behind it noted in `plan.capacity` (`alloc --dry-run`)."""
    from providers.accounts.resource import allocatable
    from providers.aws.families import AwsQuotaMap

    candidate = plan.choice.first
    key = f"{account}/{plan.region}"
    down = memo.get("quotas_down", key)
    if down:
        return unchecked(plan, driver, f"{down} (noted earlier)", warn)
    try:
        capacity = catalog.capacity()
        ((snapshot, _stale),) = capacity.snapshots([plan.region])
    except ShoalError as exc:
        from providers.config import quota_ttl

        reason = f"the account's quotas in {plan.region} could not be read ({exc})"
        memo.put("quotas_down", key, reason, quota_ttl(settings, "aws").total_seconds())
        return unchecked(plan, driver, reason, warn)
    market: Market = "spot" if plan.spot else "onDemand"
    needs = AwsQuotaMap(snapshot.quotas).needs(
        candidate.name, candidate.vcpus, candidate.gpu, candidate.gpu_count, market
    )
    quotas: list[dict[str, Any]] = []
    counts: list[int] = []
    for need in needs:
        free = allocatable(snapshot, need.code)
        names = [q.name for q in snapshot.quotas if q.code == need.code]
        entry: dict[str, Any] = {
            "quota": need.code,
            "name": names[0] if names else "",
            "needs": need.amount,
            "free": free,
        }
        if free is not None:
            entry["fits"] = math.floor(free / need.amount)
            counts.append(entry["fits"])
            if counts[-1] < 1:
                warn(
                    f"{driver}: {need.code} ({entry['name']}) has {free:g} vCPUs free in "
                    f"{plan.region}; {candidate.name} needs {need.amount:g}: free instances, "
                    "or ask AWS for a higher quota"
                )
        quotas.append(entry)
    count = min(counts) if counts else UNLIMITED
    plan.capacity = {"checked": bool(counts), "region": plan.region, "quotas": quotas}
    if snapshot.notes:
        plan.capacity["notes"] = list(snapshot.notes)
    if not counts:
        what = "no vCPU quota applies" if not needs else "the quota's usage is unknown"
        plan.capacity["note"] = f"{what}: not counted"
    return count


def unchecked(plan: Plan, driver: str, reason: str, warn: Callable[[str], None]) -> int:
    # The note is the plan's (its JSON says whose); the warning names the driver, once.
    note = f"{reason}; capacity not checked (AWS still refuses what is over)"
    plan.capacity = {"checked": False, "note": note}
    warn(f"{driver}: {note}")
    return UNLIMITED


def forget(region: str, account: Callable[[], str], catalog: Callable[[], CloudCatalog]) -> None:
    """Our launch or termination changed the region's usage: ask again next time. Best
    effort, and lazy: a `free` in a fresh run may have opened neither the credentials nor
    the catalog, and failing to open them must not fail the termination that was done."""
    try:
        who = account()
        catalog().cache.forget_account("aws", who, region)
    except (ShoalError, OSError):
        pass


def open_reservation(plan: Plan, catalog: CloudCatalog) -> Reservation | None:
    """An active capacity reservation of the chosen type with room in the plan's region, from
    the account's snapshot in the catalog cache: the zone an on-demand launch tries first,
    so that EC2's default (CapacityReservationPreference `open`) runs it there rather than
    beside it. A Capacity Block is not one (it takes its own market and an explicit
    target); a snapshot that cannot be read is none."""
    from providers.core.timeutil import utcnow

    try:
        ((snapshot, _stale),) = catalog.capacity().snapshots([plan.region])
    except ShoalError:
        return None
    now = utcnow()
    name = plan.choice.first.name
    room = [
        r
        for r in snapshot.reservations
        if r.kind == "capacity-reservation"
        and r.instance_type == name
        and r.state == "active"
        and r.available >= 1
        and r.zone
        and (r.start is None or r.start <= now)
        and (r.end is None or r.end > now)
    ]
    return max(room, key=lambda r: (r.available, r.id)) if room else None
