"""Quota truth in the provider-neutral account layer (issue 24, item 5), through CloudCatalog
over a real SQLite cache with a scripted fetcher (test_account_capacity.py's rig): codes
never summed, broader quotas capping what is allocatable, how many of a type fit and which
quota binds, and a region whose quotas are unknown (fail-open, never cached as known)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from providers.accounts.fit import Binding, fit
from providers.accounts.model import AccountSnapshot, InstanceUsage, Need, Quota
from providers.models import RegionSpec, ResourceListOptions
from tests.providers.accounts import test_account_capacity as rig
from tests.providers.accounts.test_account_capacity import (
    Accounts,
    Make,
    item,
    resources,
    snapshot,
)

make = rig.make  # the fixture: a CloudCatalog over a real SQLite cache, scripted accounts

VCPU, REGION = ("cpu", "vcpu"), "us-east-1"
GALL = Quota(
    "GALL", "GPUs, all regions", "project", "onDemand", ("quota", "GALL"), 8, 6, scope="global"
)


def unknown(region: str = REGION, at: datetime | None = None) -> AccountSnapshot:
    """A region whose own quotas the provider could not read; the project's still known."""
    return AccountSnapshot(
        provider="testcloud",
        region=region,
        fetched_at=at or datetime.now(UTC),
        quotas=[GALL],
        notes=[],
        quotas_unknown="regions.list could not read the region's quotas (UNREACHABLE)",
    )


def test_an_unknown_region_is_marked_never_zero_and_asked_again(make: Make) -> None:
    fetcher = Accounts(queue=[[unknown()], [unknown()]])
    catalog, _, _ = make(fetcher)
    (res,) = resources(catalog, REGION)
    assert (res["overview"][0]["key"], res["overview"][0]["value"]) == ("quotas", "unknown")
    assert "stat" in res["overview"][0] and res["overview"][0]["stat"] == {}
    assert not [i for i in res["overview"] if i["key"] == "family"]
    assert any(n.startswith(f"quotas unknown in {REGION}: regions.list") for n in res["notes"])
    again, _, _ = make(fetcher)
    resources(again, REGION)
    assert len(fetcher.calls) == 2  # cached, but not as known: asked again
    resources(make(fetcher)[0], REGION)  # this answer is known (the default snapshot)
    resources(make(fetcher)[0], REGION)
    assert len(fetcher.calls) == 3  # a known answer is served from the cache
    fetcher.queue.append([unknown()])
    resources(make(fetcher, refresh=True)[0], REGION)
    offline, _, _ = make(fetcher, offline=True)
    (cached,) = resources(offline, REGION)
    assert cached["overview"][0]["value"] == "unknown"  # offline: the cached, still unknown


def test_a_selection_keeps_an_unknown_region(make: Make) -> None:
    catalog, _, _ = make(Accounts(queue=[[unknown()]]))
    (res,) = resources(catalog, REGION, select="gpu=H100")
    assert res["overview"][0]["value"] == "unknown"


def test_available_refuses_nothing_for_an_unknown_region(make: Make) -> None:
    catalog, _, _ = make(Accounts(queue=[[unknown()]]))
    (pricing,) = catalog.list_pricing(ResourceListOptions(region=RegionSpec(name=REGION)))
    every = set(pricing.items)
    catalog.keep_launchable([pricing])
    assert set(pricing.items) == every and pricing.items["p5.48xlarge"].spot_price == 40.0
    assert any(n.startswith("--available: quotas unknown in us-east-1") for n in pricing.notes)


def test_two_codes_of_one_group_and_market_are_never_summed(make: Make) -> None:
    # As a cache written before AWS's P5 spot quota had a group of its own holds them.
    old = snapshot(REGION)
    old.quotas = [
        Quota("L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests", "P", "spot", VCPU, 64, 0),
        Quota("L-C4BD4855", "All P5 Spot Instance Requests", "P", "spot", VCPU, 192, 192),
    ]
    old.usage = [InstanceUsage("p5.48xlarge", "spot", 1, "P", f"{REGION}a", 192, "H100", 8)]
    catalog, _, _ = make(Accounts(queue=[[old]]))
    (res,) = resources(catalog, REGION)
    spot = item(res, "family", "P")["stat"]["spot"]
    assert spot["supply"] == spot["allocatable"] == {"cpu": {"vcpu": "64"}}
    apart = item(res, "family", "All P5 Spot Instance Requests")["stat"]["spot"]
    assert (apart["supply"], apart["allocated"], apart["allocatable"]) == (
        {"cpu": {"vcpu": "192"}},
        {"cpu": {"vcpu": "192"}},
        {"cpu": {"vcpu": "0"}},
    )


def test_a_broader_quota_caps_allocatable_and_is_named(make: Make) -> None:
    capped = snapshot(REGION)
    capped.quotas = [
        Quota("H100S", "H100 GPUs", "gpu", "onDemand", ("gpu", "H100"), 16, 0, within=("GALL",)),
        GALL,
        Quota("L4S", "L4 GPUs", "gpu", "onDemand", ("gpu", "L4"), 4, 3, within=("GALL",)),
    ]
    capped.usage = []
    catalog, _, _ = make(Accounts(queue=[[capped]]))
    (res,) = resources(catalog, REGION)
    gpu = item(res, "family", "gpu")["stat"]["onDemand"]
    assert gpu["supply"]["gpu"] == {"H100": "16", "L4": "4"}
    assert gpu["allocatable"]["gpu"] == {"H100": "2", "L4": "1"}  # L4's own is the tighter
    assert (
        "GALL (account-wide: 8, 6 used) binds before H100S in us-east-1 (16, 0 used): "
        "gpu/H100 on demand allocatable 2, not 16"
    ) in res["notes"]
    assert not any("before L4S" in n for n in res["notes"])


def test_fit_counts_every_quota_and_names_the_binding_one() -> None:
    snap = snapshot(REGION)
    snap.quotas = [
        Quota("CPUS", "CPUS", "regional", "onDemand", VCPU, 100, 4),
        Quota("GPUS", "GPUS", "gpu", "onDemand", ("gpu", "H100"), 16, 0),
        Quota("GPUS", "GPUS", "project", "onDemand", ("gpu", "H100"), 24, 20, scope="global"),
        Quota("USAGE?", "usage unknown", "other", "onDemand", ("quota", "USAGE?"), 5, None),
    ]
    two = fit(snap, [Need("CPUS", 24), Need("GPUS", 2)])
    assert two.instances == 2 and two.at_most == 2 and two.unknown == ()
    assert two.binding == Binding("GPUS", "GPUS", 24, 20, 4, 2, "global")  # the project's
    cpus = fit(snap, [Need("CPUS", 48), Need("GPUS", 1)])
    assert (cpus.instances, cpus.binding and cpus.binding.code) == (2, "CPUS")
    open_ = fit(snap, [Need("CPUS", 8), Need("USAGE?", 1), Need("MISSING", 1)])
    assert (open_.instances, open_.at_most, open_.unknown) == (None, 12, ("USAGE?", "MISSING"))
    none = fit(snap, [Need("CPUS", 200), Need("MISSING", 1)])
    assert (none.instances, none.at_most) == (0, 0)  # a known "none" stands
    over = Quota("OVER", "over its limit", "regional", "onDemand", VCPU, 10, 12)
    snap.quotas.append(over)
    assert fit(snap, [Need("OVER", 1)]).instances == 0
    assert fit(snap, [Need("CPUS", 0)]).instances is None  # takes nothing: nothing said
    stale = snapshot(REGION, at=datetime.now(UTC) - timedelta(hours=1))
    assert fit(stale, [Need("L-P", 192)]).instances == 1  # 384 - 192 used
