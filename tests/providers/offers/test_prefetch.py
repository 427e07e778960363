"""CloudCatalog.prefetch over a real SQLite cache: the regions that are due are downloaded
at once, each worker on a fetcher of its own, and then served by the usual freshness rules;
a provider whose one download serves every region keeps fetching in turn."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from providers.cloud.catalog import CloudCatalog
from providers.cloud.offers import Offer, Progress, Snapshot
from providers.core.errors import ProviderUnreachableError
from providers.core.settings import Freshness, Paths, Settings
from providers.models import RegionSpec, ResourceListOptions

REGIONS = ["r1", "r2", "r3", "r4"]


class Fetcher:
    """A region's prices once every fetcher in `barrier` is fetching at the same time: a
    catalog that fetched in turn would break the barrier (its wait is bounded) and fail."""

    made: list[Fetcher] = []

    def __init__(self, barrier: threading.Barrier | None, fail: set[str] | None = None) -> None:
        self.provider = "cloud"
        self.barrier = barrier
        self.fail = fail or set()
        self.fetched: list[str] = []
        Fetcher.made.append(self)

    def list_regions(self) -> list[RegionSpec]:
        return [RegionSpec(name=n) for n in REGIONS]

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        self.fetched.append(region)
        progress(1, 1, f"cloud {region}")
        if self.barrier is not None:
            self.barrier.wait()
        if region in self.fail:
            raise ProviderUnreachableError(f"cloud: {region} did not answer")
        offer = Offer("gpu.8", vcpus=96, memory_gib=1024, gpu="H100", gpu_count=8, on_demand=40.0)
        return Snapshot("cloud", region, datetime.now(UTC), "http://127.0.0.1", offers={
            "gpu.8": offer})  # fmt: skip


class SharedFetcher(Fetcher):
    shared_download = True


def catalog(
    tmp_path: Path, make: Callable[[], Fetcher], warnings: list[str], **freshness: object
) -> CloudCatalog:
    settings = Settings(paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}), config={}, env={})
    settings.freshness = Freshness(**freshness)  # type: ignore[arg-type]
    settings.warn = warnings.append
    return CloudCatalog("cloud", settings, make, "r1")


def prices(made: CloudCatalog, region: str) -> float | None:
    (pricing,) = made.list_pricing(ResourceListOptions(region=RegionSpec(name=region)))
    return pricing.items["gpu.8"].on_demand_price


@pytest.fixture(autouse=True)
def forget() -> None:
    Fetcher.made.clear()


def test_due_regions_are_fetched_at_once_each_on_its_own_fetcher(tmp_path: Path) -> None:
    barrier = threading.Barrier(len(REGIONS), timeout=20)
    made = catalog(tmp_path, lambda: Fetcher(barrier), [])
    made.regions_for(REGIONS)
    made.prefetch(REGIONS).wait()
    assert not barrier.broken
    assert sorted(r for f in Fetcher.made for r in f.fetched) == REGIONS
    # One fetcher each (the first worker's is the catalog's own), none used by two threads.
    assert [len(f.fetched) for f in Fetcher.made] == [1, 1, 1, 1]
    asked = len(Fetcher.made)
    assert [prices(made, r) for r in REGIONS] == [40.0] * 4  # saved, served from the cache
    assert sum(len(f.fetched) for f in Fetcher.made) == len(REGIONS)
    # A second catalog finds every region fresh in the cache: nothing is due, nothing fetched.
    again = catalog(tmp_path, lambda: Fetcher(None), [])
    again.prefetch(REGIONS).wait()
    assert [prices(again, r) for r in REGIONS] == [40.0] * 4
    assert sum(len(f.fetched) for f in Fetcher.made[asked:]) == 0


def test_a_failed_region_is_a_failed_refresh_the_others_are_served(tmp_path: Path) -> None:
    warnings: list[str] = []
    made = catalog(tmp_path, lambda: Fetcher(None, {"r2"}), warnings)
    made.regions_for(REGIONS)
    made.prefetch(REGIONS).wait()
    assert prices(made, "r1") == 40.0
    with pytest.raises(ProviderUnreachableError, match="r2 did not answer"):
        prices(made, "r2")
    # Cached and past its TTL: the old prices are served, with a warning saying how old.
    stale = catalog(tmp_path, lambda: Fetcher(None, {"r1", "r3"}), warnings)
    old = datetime.now(UTC) - timedelta(days=3)
    for region in REGIONS:  # every region cached, three days ago
        got = Fetcher(None).fetch_region(region, lambda done, total, what: None)
        got.fetched_at = old
        stale.cache.save(got)
    Fetcher.made.clear()
    stale.regions_for(REGIONS)
    stale.prefetch(REGIONS).wait()
    assert prices(stale, "r1") == 40.0 and prices(stale, "r4") == 40.0
    assert any("r1: refresh failed" in w and "did not answer" in w for w in warnings)


def test_one_download_for_every_region_is_fetched_in_turn_on_one_fetcher(tmp_path: Path) -> None:
    made = catalog(tmp_path, lambda: SharedFetcher(None), [])
    made.regions_for(REGIONS)
    made.prefetch(REGIONS).wait()
    assert [prices(made, r) for r in REGIONS] == [40.0] * 4
    (one,) = Fetcher.made  # the catalog's own: it may hold the download already
    assert one.fetched == REGIONS


def test_one_due_region_is_fetched_while_the_caller_goes_on(tmp_path: Path) -> None:
    # The caller (offers: the account's quotas) and the download meet at the barrier: a
    # download that waited for the caller's wait() would break it.
    barrier = threading.Barrier(2, timeout=20)
    made = catalog(tmp_path, lambda: Fetcher(barrier), [])
    made.regions_for(["r1"])
    pending = made.prefetch(["r1"])
    barrier.wait()
    pending.wait()
    assert prices(made, "r1") == 40.0


def test_offline_and_refresh(tmp_path: Path) -> None:
    offline = catalog(tmp_path, lambda: Fetcher(None), [], offline=True)
    offline.prefetch(REGIONS).wait()
    assert Fetcher.made == []  # --offline never builds a fetcher
    fresh = catalog(tmp_path, lambda: Fetcher(None), [])
    fresh.regions_for(REGIONS)
    fresh.prefetch(REGIONS).wait()
    assert prices(fresh, "r3") == 40.0
    fetched = sum(len(f.fetched) for f in Fetcher.made)
    refresh = catalog(tmp_path, lambda: Fetcher(None), [], refresh=True)
    refresh.regions_for(REGIONS)
    refresh.prefetch(REGIONS).wait()  # every region again, even the fresh ones
    assert [prices(refresh, r) for r in REGIONS] == [40.0] * 4
    assert sum(len(f.fetched) for f in Fetcher.made) - fetched == len(REGIONS)
