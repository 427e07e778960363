"""Account capacity through CloudCatalog over a real SQLite cache: the spec's Resource built
from quotas, usage and reservations; freshness (TTL, --refresh, --offline, --max-age, a
failed refresh serving the old answer); accounts kept apart; selection; --available.

The network side is a scripted AccountFetcher here: each cloud's real fetcher is tested
against loopback servers (and moto) in tests/providers/<cloud>/test_accounts.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.accounts.model import (
    AccountSnapshot,
    InstanceUsage,
    Market,
    Need,
    Quota,
    Reservation,
)
from providers.cloud.catalog import CloudCatalog
from providers.cloud.offers import Offer, Progress, Snapshot
from providers.core.errors import CredentialsError, ProviderUnreachableError, ShoalError, UsageError
from providers.core.settings import Freshness, Paths, Settings
from providers.core.wire import to_wire
from providers.models import ListResourceFilter, RegionSpec, ResourceListOptions
from providers.selectors import parse

NOW = datetime.now(UTC).replace(microsecond=0)


def quotas(standard_used: float = 12, p_used: float = 192) -> list[Quota]:
    vcpu = ("cpu", "vcpu")
    return [
        Quota("L-STD", "On-Demand Standard", "Standard", "onDemand", vcpu, 640, standard_used),
        Quota("L-P", "On-Demand P", "P", "onDemand", vcpu, 384, p_used, gpus=("H100",)),
        Quota("L-PS", "P Spot", "P", "spot", vcpu, 96, 100, gpus=("H100",)),
        Quota(
            "L-NEW", "a quota shoal does not know", "other", "onDemand", ("quota", "L-NEW"), 7, 1
        ),
    ]


def snapshot(region: str, at: datetime | None = None, **kw: Any) -> AccountSnapshot:
    return AccountSnapshot(
        provider="testcloud",
        region=region,
        # Fetched now, not at NOW: a long suite run moves past the 5-minute TTL from NOW.
        fetched_at=at or datetime.now(UTC),
        quotas=quotas(**kw),
        usage=[
            InstanceUsage("p5.48xlarge", "onDemand", 1, "P", f"{region}a", 192, "H100", 8),
            InstanceUsage("m5.large", "onDemand", 6, "Standard", f"{region}b", 2),
        ],
        reservations=[
            Reservation(
                "cr-1", "capacity-block", "p5.48xlarge", 2, 2,
                start=NOW + timedelta(days=1), end=NOW + timedelta(days=3),
                zone=f"{region}a", vcpus=192, gpu="H100", gpus=8,
            ),
            Reservation(
                "cr-old", "capacity-reservation", "m5.large", 1, 0, end=NOW - timedelta(hours=1)
            ),
        ],
        sources=[f"http://127.0.0.1/ec2/{region}"],
        notes=[],
    )  # fmt: skip


@dataclass
class Accounts:
    """A scripted account: answers `fetch` from a queue of per-call answers and counts calls."""

    provider: str = "testcloud"
    account: str = "AKIDEXAMPLE"
    names: list[str] = field(default_factory=lambda: ["eu-west-1", "us-east-1"])
    queue: list[list[AccountSnapshot] | Exception] = field(default_factory=list)
    calls: list[list[str]] = field(default_factory=list)

    def regions(self) -> list[str]:
        return list(self.names)

    def fetch(self, regions: Sequence[str]) -> list[AccountSnapshot]:
        self.calls.append(list(regions))
        if self.queue:
            item = self.queue.pop(0)
            if isinstance(item, Exception):
                raise item
            return item
        return [snapshot(r) for r in regions]


class Map:
    """The scripted cloud's rules: a type's family by its first letter, vCPUs per instance."""

    def __init__(self, quotas: Sequence[Quota] = ()) -> None:
        self.quotas = quotas

    def needs(
        self, instance_type: str, vcpus: float | None, gpu: str, gpu_count: int, market: Market
    ) -> list[Need]:
        family = "P" if instance_type.startswith("p") else "STD"
        code = {"P": {"onDemand": "L-P", "spot": "L-PS"}, "STD": {"onDemand": "L-STD"}}
        found = code[family].get(market)
        return [Need(found, vcpus or 0)] if found else [Need("L-UNKNOWN", 1)]


class PriceFetcher:
    def list_regions(self) -> list[RegionSpec]:
        return [RegionSpec(name="us-east-1")]

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        offers = {
            "p5.48xlarge": Offer("p5.48xlarge", vcpus=192, memory_gib=2048, arch="x86_64",
                                 gpu="H100", gpu_count=8, on_demand=98.0, spot=40.0),
            "p4d.24xlarge": Offer("p4d.24xlarge", vcpus=96, memory_gib=1152, arch="x86_64",
                                  gpu="A100", gpu_count=8, on_demand=32.0, spot=12.0),
            "m5.large": Offer("m5.large", vcpus=2, memory_gib=8, arch="x86_64", on_demand=0.096),
            "m5.metal": Offer("m5.metal", vcpus=96, memory_gib=384, arch="x86_64", on_demand=4.6),
        }  # fmt: skip
        return Snapshot("testcloud", region, NOW, "http://127.0.0.1/prices", "USD", offers)


Make = Callable[..., tuple[CloudCatalog, Accounts, list[str]]]


@pytest.fixture
def make(tmp_path: Path) -> Make:
    def build(
        accounts: Accounts | CredentialsError | None = None,
        config: dict[str, object] | None = None,
        **freshness: Any,
    ) -> tuple[CloudCatalog, Any, list[str]]:
        fetcher = accounts or Accounts()

        def build_accounts() -> Accounts:
            if isinstance(fetcher, Exception):
                raise fetcher
            return fetcher

        warnings: list[str] = []
        settings = Settings(
            paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
            config=dict(config or {}),
            env={},
            freshness=Freshness(**freshness),
            warn=warnings.append,
        )
        catalog = CloudCatalog(
            "testcloud",
            settings,
            PriceFetcher,  # type: ignore[arg-type]
            "us-east-1",
            accounts=build_accounts,
            quota_map=f"{__name__}:Map",
        )
        return catalog, fetcher, warnings

    return build


def resources(catalog: CloudCatalog, *regions: str, select: str = "") -> list[dict[str, Any]]:
    opts = ResourceListOptions(
        filter=ListResourceFilter(resource_selectors=parse([select])) if select else None
    )
    wire: list[dict[str, Any]] = to_wire(catalog.list_resources_in(list(regions), opts))
    return wire


def item(resource: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    (found,) = [i for i in resource["overview"] if i["key"] == key and i["value"] == value]
    return found


def test_quotas_are_supply_usage_allocated_and_the_rest_allocatable(make: Make) -> None:
    catalog, _, _ = make()
    (res,) = resources(catalog, "us-east-1")
    assert res["provider"] == "testcloud" and res["region"]["name"] == "us-east-1"
    standard = item(res, "family", "Standard")["stat"]["onDemand"]
    assert standard["supply"] == {"cpu": {"vcpu": "640"}}
    assert standard["allocated"] == {"cpu": {"vcpu": "12"}, "instance": {"m5.large": "6"}}
    assert standard["allocatable"] == {"cpu": {"vcpu": "628"}}
    p = item(res, "family", "P")
    assert p["stat"]["onDemand"]["allocated"]["gpu"] == {"H100": "8"}
    # One more p5.48xlarge fits the 192 vCPUs left; 8 more H100s with it.
    (child,) = p["nextLevel"]
    assert child["key"] == "instance" and child["value"] == "p5.48xlarge"
    assert child["stat"]["onDemand"]["allocatable"] == {
        "instance": {"p5.48xlarge": "1"},
        "gpu": {"H100": "8"},
    }
    # Usage above a limit: allocatable 0, and a note that says so.
    assert p["stat"]["spot"]["allocatable"] == {"cpu": {"vcpu": "0"}}
    assert any("L-PS" in n and "above its limit" in n for n in res["notes"])
    # A quota shoal cannot place is kept under quota/<code>.
    assert item(res, "family", "other")["stat"]["onDemand"]["supply"] == {"quota": {"L-NEW": "7"}}
    assert res["asOf"] and res["source"] == "http://127.0.0.1/ec2/us-east-1"


def test_reservations_are_the_spec_scheduled_map_from_start_to_end(make: Make) -> None:
    catalog, _, _ = make()
    (res,) = resources(catalog, "us-east-1")
    held = item(res, "reservations", "all")
    scheduled = held["stat"]["scheduled"]
    start = (NOW + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    end = (NOW + timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert list(scheduled["supply"]) == [start, end]  # the ended reservation is gone
    assert scheduled["supply"][start]["instance"] == {"p5.48xlarge": "2"}
    assert scheduled["allocatable"][start]["gpu"] == {"H100": "16"}
    assert scheduled["supply"][end] == {}
    assert [c["value"] for c in held["nextLevel"]] == ["cr-1"]
    zones = {z["value"]: z for z in res["breakdown"]["zone"]}
    assert set(zones) == {"us-east-1a", "us-east-1b"}
    assert "scheduled" in zones["us-east-1a"]["stat"]


def test_a_fresh_answer_is_served_from_the_cache(make: Make) -> None:
    catalog, fetcher, _ = make()
    resources(catalog, "us-east-1")
    again, _, _ = make(fetcher)
    resources(again, "us-east-1")
    assert fetcher.calls == [["us-east-1"]]


def test_all_regions_are_fetched_in_one_call(make: Make) -> None:
    catalog, fetcher, _ = make()
    got = resources(catalog, "all")
    assert [r["region"]["name"] for r in got] == ["eu-west-1", "us-east-1"]
    assert fetcher.calls == [["eu-west-1", "us-east-1"]]


def test_past_the_ttl_a_refresh_is_due_and_its_failure_serves_the_old_answer(make: Make) -> None:
    old = datetime.now(UTC) - timedelta(minutes=30)  # not NOW: a long run moves past it
    fetcher = Accounts(queue=[[snapshot("us-east-1", at=old)]])
    catalog, _, _ = make(fetcher)
    resources(catalog, "us-east-1")  # cached, 30 minutes old (TTL 5)
    fetcher.queue.append(ProviderUnreachableError("testcloud: unreachable"))
    again, _, warnings = make(fetcher)
    (res,) = resources(again, "us-east-1")
    assert res["stale"] is True
    assert any("refreshing the account's capacity failed" in w and "30m" in w for w in warnings)
    assert len(fetcher.calls) == 2


def test_refresh_fails_loudly_and_keeps_the_old_answer(make: Make) -> None:
    fetcher = Accounts()
    catalog, _, _ = make(fetcher)
    resources(catalog, "us-east-1")
    fetcher.queue.append(ProviderUnreachableError("testcloud: unreachable"))
    refreshing, _, _ = make(fetcher, refresh=True)
    with pytest.raises(ProviderUnreachableError):
        resources(refreshing, "us-east-1")
    offline, _, _ = make(fetcher, offline=True)
    assert resources(offline, "us-east-1")[0]["region"]["name"] == "us-east-1"


def test_offline_never_fetches_and_says_what_is_missing(make: Make) -> None:
    catalog, fetcher, _ = make(offline=True)
    with pytest.raises(ShoalError, match="--offline"):
        resources(catalog, "us-east-1")
    assert fetcher.calls == []


def test_max_age_refuses_an_older_answer(make: Make) -> None:
    fetcher = Accounts(queue=[[snapshot("us-east-1", at=NOW - timedelta(hours=2))]])
    catalog, _, _ = make(fetcher)
    resources(catalog, "us-east-1")
    strict, _, _ = make(fetcher, offline=True, max_age=timedelta(hours=1))
    with pytest.raises(ShoalError, match="older than --max-age"):
        resources(strict, "us-east-1")


def test_quota_ttl_comes_from_the_config(make: Make) -> None:
    fetcher = Accounts(queue=[[snapshot("us-east-1", at=NOW - timedelta(minutes=30))]])
    catalog, _, _ = make(fetcher)
    resources(catalog, "us-east-1")
    lenient, _, _ = make(fetcher, config={"testcloud": {"quota_ttl_minutes": 60}})
    resources(lenient, "us-east-1")
    assert len(fetcher.calls) == 1


def test_two_accounts_never_see_each_others_answers(make: Make) -> None:
    first = Accounts(account="AKIDFIRST", queue=[[snapshot("us-east-1", standard_used=1)]])
    catalog, _, _ = make(first)
    resources(catalog, "us-east-1")
    second = Accounts(account="AKIDSECOND", queue=[[snapshot("us-east-1", standard_used=2)]])
    other, _, _ = make(second)
    (res,) = resources(other, "us-east-1")
    assert second.calls == [["us-east-1"]]
    assert item(res, "family", "Standard")["stat"]["onDemand"]["allocated"]["cpu"]["vcpu"] == "2"


def test_offline_without_credentials_reads_the_latest_cached_account(make: Make) -> None:
    catalog, _, _ = make()
    resources(catalog, "us-east-1")

    refused = CredentialsError("testcloud: no credentials")  # as from_settings raises it
    offline, _, _ = make(refused, offline=True)
    assert resources(offline, "us-east-1")
    online, _, _ = make(refused)
    with pytest.raises(CredentialsError):
        resources(online, "us-east-1")


def test_gpu_selection_keeps_the_families_that_can_launch_it(make: Make) -> None:
    catalog, _, warnings = make()
    (res,) = resources(catalog, "us-east-1", select="gpu=H100")
    assert [(i["key"], i["value"]) for i in res["overview"]] == [
        ("family", "P"),
        ("reservations", "all"),
    ]
    # A region with nothing allocatable for the selection is left out, and said.
    full = Accounts(queue=[[snapshot("us-east-1", p_used=384)]])
    catalog, _, warnings = make(full, refresh=True)
    only_h100 = [r for r in resources(catalog, "us-east-1", select="gpu=A100")]
    assert only_h100 == []
    assert any("nothing allocatable" in w for w in warnings)


def test_unknown_selector_keys_are_refused_naming_the_ones_that_work(make: Make) -> None:
    catalog, fetcher, _ = make()
    with pytest.raises(UsageError, match="selected by gpu, instance_type"):
        resources(catalog, "us-east-1", select="vcpus>=8")
    assert fetcher.calls == []


def test_a_cache_payload_that_does_not_read_says_to_refresh(make: Make, tmp_path: Path) -> None:
    catalog, _, _ = make()
    resources(catalog, "us-east-1")
    catalog.cache._db.execute("UPDATE account_snapshot SET payload = '{\"quotas\": 3}'")
    again, _, _ = make(offline=True)
    with pytest.raises(ShoalError, match="--refresh"):
        resources(again, "us-east-1")


def test_available_keeps_what_the_quota_can_launch(make: Make) -> None:
    catalog, _, _ = make()
    opts = ResourceListOptions(region=RegionSpec(name="us-east-1"))
    pricings = catalog.list_pricing(opts)
    catalog.keep_launchable(pricings)
    (pricing,) = pricings
    items = pricing.items
    # P on demand: 192 vCPUs left: p5.48xlarge (192) fits, p4d.24xlarge (96) fits;
    # P spot is over its limit: spot prices hidden. Standard: 628 left, m5.metal (96) fits.
    assert set(items) == {"p5.48xlarge", "p4d.24xlarge", "m5.large", "m5.metal"}
    assert items["p5.48xlarge"].spot_price is None and items["p5.48xlarge"].on_demand_price == 98.0
    assert any("spot price(s) hidden" in n for n in pricing.notes)
    full = Accounts(queue=[[snapshot("us-east-1", p_used=250)]])
    catalog, _, _ = make(full, refresh=True)
    pricings = catalog.list_pricing(opts)
    catalog.keep_launchable(pricings)
    assert set(pricings[0].items) == {"p4d.24xlarge", "m5.large", "m5.metal"}
    assert any("1 type(s) dropped" in n and "p5.48xlarge" in n for n in pricings[0].notes)


def test_a_reservation_never_shows_more_free_than_it_holds(make: Make) -> None:
    broken = snapshot("us-east-1")
    broken.reservations = [Reservation("cr-x", "capacity-reservation", "m5.large", 1, 5)]
    catalog, _, _ = make(Accounts(queue=[[broken]]))
    (res,) = resources(catalog, "us-east-1")
    scheduled = item(res, "reservations", "all")["stat"]["scheduled"]
    (at,) = scheduled["allocated"]
    assert scheduled["allocated"][at]["instance"] == {"m5.large": "0"}  # never negative
    assert scheduled["allocatable"][at]["instance"] == {"m5.large": "1"}
