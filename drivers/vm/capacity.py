"""How many instances of a chosen type a cloud account's quotas still take in a region:
the quotas that apply to the type and market (the provider's QuotaMap: AWS's family vCPU
quotas, GCP's series CPUs, GPU model, CPUS_ALL_REGIONS, GPUS_ALL_REGIONS, PREEMPTIBLE_*),
counted against the account's snapshot in the catalog cache. A quota held in two scopes
(a region's and the project's) counts as two limits. Quotas that cannot be read are no
refusal: the count is unlimited, with a note (the cloud's own check at launch has the last
word), and the failure is remembered for the quota TTL so that every `alloc` does not wait
out the retries again. Used by the aws and gcp drivers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drivers.spec.base import UNLIMITED
from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from drivers.vm.choice import Candidate
    from providers.accounts.model import AccountSnapshot, Quota, QuotaMap
    from providers.cloud.catalog import CloudCatalog
    from providers.core.settings import Settings
    from providers.core.ttlcache import TtlCache


@dataclass(frozen=True)
class Account:
    """Whose quotas, and where they are read: `provider` names the catalog and the quota TTL,
    `cloud` the one that still refuses what is over, in the note."""

    provider: str
    cloud: str
    driver: str
    account: str
    catalog: CloudCatalog
    memo: TtlCache
    settings: Settings
    quota_map: Callable[[Iterable[Quota]], QuotaMap]
    warn: Callable[[str], None]


def quota_count(
    who: Account, region: str, candidate: Candidate, *, spot: bool
) -> tuple[int, dict[str, Any]]:
    """The count and what it was counted from (`alloc --dry-run`'s `capacity`): each quota
    that applies with what one instance needs of it, what is free and how many that fits.
    A cached snapshot that leaves room for none is read again before it refuses: a quota
    raised or an instance ended elsewhere since is room."""
    key = f"{who.account}/{region}"
    down = who.memo.get("quotas_down", key)
    if down:
        return unchecked(who, f"{down} (noted earlier)")
    for fresh in (False, True):
        try:
            if fresh:
                who.catalog.cache.forget_account(who.provider, who.account, region)
            ((snapshot, _stale),) = who.catalog.capacity().snapshots([region])
        except (ShoalError, OSError) as exc:
            from providers.config import quota_ttl

            reason = f"the account's quotas in {region} could not be read ({exc})"
            ttl = quota_ttl(who.settings, who.provider).total_seconds()
            who.memo.put("quotas_down", key, reason, ttl)
            return unchecked(who, reason)
        count, said, short = _count(who, snapshot, region, candidate, spot)
        if count >= 1:
            break
    for text in short:
        who.warn(text)
    return count, said


def _count(
    who: Account, snapshot: AccountSnapshot, region: str, candidate: Candidate, spot: bool
) -> tuple[int, dict[str, Any], list[str]]:
    """(count, what it was counted from, a warning per quota that leaves room for none)."""
    needs = who.quota_map(snapshot.quotas).needs(
        candidate.name,
        candidate.vcpus,
        candidate.gpu,
        candidate.gpu_count,
        "spot" if spot else "onDemand",
    )
    quotas: list[dict[str, Any]] = []
    counts: list[int] = []
    short: list[str] = []
    for need in needs:
        if need.amount <= 0:
            continue
        found = [q for q in snapshot.quotas if q.code == need.code]
        if not found:
            quotas.append({"quota": need.code, "name": "", "needs": need.amount, "free": None})
            continue
        for quota in found:
            free = None if quota.used is None else max(0.0, quota.limit - quota.used)
            entry: dict[str, Any] = {
                "quota": need.code,
                "name": quota.name,
                "needs": need.amount,
                "free": free,
            }
            if len(found) > 1:
                entry["scope"] = quota.scope
            if free is not None:
                entry["fits"] = math.floor(free / need.amount + 1e-9)
                counts.append(entry["fits"])
                if entry["fits"] < 1:
                    scope = region if quota.scope == "region" else "the project"
                    short.append(
                        f"{who.driver}: {need.code} ({quota.name or need.code}) has {free:g} "
                        f"free in {scope}; {candidate.name} needs {need.amount:g}: free "
                        f"instances, or ask {who.cloud} for a higher quota"
                    )
            quotas.append(entry)
    count = min(counts) if counts else UNLIMITED
    said: dict[str, Any] = {"checked": bool(counts), "region": region, "quotas": quotas}
    if snapshot.notes:
        said["notes"] = list(snapshot.notes)
    if not counts:
        what = "no quota applies" if not needs else "the quota's usage is unknown"
        said["note"] = f"{what}: not counted"
    return count, said, short


def unchecked(who: Account, reason: str) -> tuple[int, dict[str, Any]]:
    # The note is the plan's (its JSON says whose); the warning names the driver, once.
    note = f"{reason}; capacity not checked ({who.cloud} still refuses what is over)"
    who.warn(f"{who.driver}: {note}")
    return UNLIMITED, {"checked": False, "note": note}


def forget(
    provider: str, region: str, account: Callable[[], str], catalog: Callable[[], CloudCatalog]
) -> None:
    """Our launch or deletion changed the region's usage: ask again next time. Best effort,
    and lazy: a `free` in a fresh run may have opened neither the credentials nor the
    catalog, and failing to open them must not fail the deletion that was done."""
    try:
        who = account()
        catalog().cache.forget_account(provider, who, region)
    except (ShoalError, OSError):
        pass
