"""CloudCatalog over a real SQLite cache: freshness, failures that keep the old data,
offline use, region checks, history windows with forecasts, export and import.

The network side is a scripted fetcher here (each provider's real fetcher is tested against
a loopback server in tests/providers/<provider>/).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.cloud import forecast, share
from providers.cloud.catalog import CloudCatalog
from providers.cloud.offers import Offer, Progress, Snapshot
from providers.core.errors import ProviderUnreachableError, ShoalError, UsageError
from providers.core.settings import Freshness, Paths, Settings
from providers.models import ListResourceFilter, RegionSpec, ResourceListOptions
from providers.selectors import parse

NOW = datetime.now(UTC).replace(microsecond=0)


def offers(price: float, spot: float | None = None) -> dict[str, Offer]:
    return {
        "small.1": Offer("small.1", vcpus=2, memory_gib=4, arch="x86_64", on_demand=price),
        "gpu.8": Offer(
            "gpu.8",
            vcpus=96,
            memory_gib=1024,
            arch="x86_64",
            gpu="H100",
            gpu_count=8,
            gpu_memory_gib=80,
            on_demand=price * 40,
            spot=spot,
        ),
    }


@dataclass
class Scripted:
    """Answers fetch_region from a queue of snapshots or errors, and counts the calls."""

    provider: str = "testcloud"
    regions: list[str] = field(default_factory=lambda: ["us-east-1", "eu-west-1"])
    queue: list[Snapshot | Exception] = field(default_factory=list)
    fetches: list[str] = field(default_factory=list)
    listed: int = 0  # region lists asked for

    def list_regions(self) -> list[RegionSpec]:
        self.listed += 1
        return [RegionSpec(name=n) for n in self.regions]

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        self.fetches.append(region)
        item = self.queue.pop(0)
        if isinstance(item, Exception):
            raise item
        item.region = region
        return item


def snap(price: float, at: datetime = NOW, currency: str = "USD", **kw: Any) -> Snapshot:
    return Snapshot("testcloud", "", at, "http://127.0.0.1/prices", currency, offers(price, **kw))


@pytest.fixture
def make(tmp_path: Path) -> Callable[..., tuple[CloudCatalog, Scripted, list[str]]]:
    fetcher = Scripted()

    def build(
        config: dict[str, object] | None = None, **freshness: object
    ) -> tuple[CloudCatalog, Scripted, list[str]]:
        warnings: list[str] = []
        settings = Settings(
            paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
            config=dict(config or {}),
            env={},
            freshness=Freshness(**freshness),
            warn=warnings.append,
        )
        return CloudCatalog("testcloud", settings, lambda: fetcher, "us-east-1"), fetcher, warnings

    return build


def pricing(catalog: CloudCatalog, region: str = "", select: str = "") -> dict[str, float | None]:
    opts = ResourceListOptions(
        region=RegionSpec(name=region),
        filter=ListResourceFilter(resource_selectors=parse([select])) if select else None,
    )
    (result,) = catalog.list_pricing(opts)
    return {name: item.on_demand_price for name, item in result.items.items()}


def test_first_query_fetches_the_default_region_and_the_next_one_is_cached(make) -> None:
    catalog, fetcher, warnings = make()
    fetcher.queue = [snap(1.0)]
    assert pricing(catalog) == {"gpu.8": 40.0, "small.1": 1.0}
    assert fetcher.fetches == ["us-east-1"]
    again, _, _ = make()
    assert pricing(again) == {"gpu.8": 40.0, "small.1": 1.0}
    assert fetcher.fetches == ["us-east-1"]  # fresh: no second fetch
    (result,) = again.list_pricing(ResourceListOptions())
    assert result.provider == "testcloud" and result.currency == "USD"
    assert result.as_of == NOW and result.source == "http://127.0.0.1/prices"
    assert not result.stale and warnings == []


def test_past_its_ttl_a_failed_refresh_serves_the_old_data_with_a_warning(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW - timedelta(hours=30))]
    pricing(catalog, "us-east-1")
    catalog, fetcher, warnings = make()
    fetcher.queue = [ProviderUnreachableError("testcloud: host down")]
    assert pricing(catalog, "us-east-1")["small.1"] == 1.0
    (result,) = catalog.list_pricing(ResourceListOptions(region=RegionSpec(name="us-east-1")))
    assert result.stale
    assert any("refresh failed (testcloud: host down)" in w and "30h ago" in w for w in warnings)
    assert len(warnings) == 1  # one warning says it all


def test_the_ttl_comes_from_the_config(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW - timedelta(hours=2))]
    pricing(catalog)
    catalog, fetcher, _ = make({"testcloud": {"ttl_hours": 1}})
    fetcher.queue = [snap(2.0)]
    assert pricing(catalog)["small.1"] == 2.0
    assert len(fetcher.fetches) == 2


def test_explicit_refresh_that_fails_is_an_error_and_keeps_the_cache(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0)]
    pricing(catalog)
    catalog, fetcher, _ = make(refresh=True)
    fetcher.queue = [ShoalError("testcloud: malformed JSON")]
    with pytest.raises(ShoalError, match="malformed"):
        pricing(catalog)
    catalog, _, _ = make(offline=True)
    assert pricing(catalog)["small.1"] == 1.0


def test_offline_never_fetches(make) -> None:
    catalog, fetcher, _ = make(offline=True)
    with pytest.raises(ShoalError, match="--offline forbids fetching"):
        catalog.list_regions()
    with pytest.raises(ShoalError, match="catalog import"):
        pricing(catalog, "us-east-1")
    assert fetcher.fetches == []


def test_max_age_refuses_old_data(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW - timedelta(hours=3))]
    pricing(catalog)
    catalog, _, _ = make(offline=True, max_age=timedelta(hours=1))
    with pytest.raises(ShoalError, match="older than --max-age 60m"):
        pricing(catalog)
    catalog, _, _ = make(offline=True, max_age=timedelta(hours=4))
    assert pricing(catalog)["small.1"] == 1.0


def test_unknown_region_suggests_close_names(make) -> None:
    catalog, fetcher, _ = make()
    with pytest.raises(UsageError, match="did you mean us-east-1"):
        pricing(catalog, "us-east-2x")
    assert fetcher.fetches == []


def test_other_currencies_are_refused_and_the_cache_kept(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW - timedelta(days=2)), snap(9.0, currency="EUR")]
    pricing(catalog)
    with pytest.raises(ShoalError, match="in EUR"):
        make(refresh=True)[0].list_pricing(ResourceListOptions())
    assert pricing(make(offline=True)[0])["small.1"] == 1.0


def test_selectors_filter_prices(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0)]
    assert pricing(catalog, select="gpu_count>=1") == {"gpu.8": 40.0}
    assert pricing(catalog, select="gpu=h100,price<10") == {}
    assert pricing(catalog, select="price<10") == {"small.1": 1.0}


def test_without_a_region_the_cached_regions_answer(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0), snap(2.0)]
    pricing(catalog, "us-east-1")
    pricing(catalog, "eu-west-1")
    results = make()[0].list_pricing(ResourceListOptions())
    assert [r.region.name for r in results] == ["eu-west-1", "us-east-1"]


def test_window_returns_observations_and_a_marked_forecast(make) -> None:
    catalog, fetcher, _ = make({"testcloud": {"ttl_hours": 0.001}})
    days = [NOW - timedelta(days=3), NOW - timedelta(days=2), NOW - timedelta(days=1)]
    fetcher.queue = [snap(1.0, days[0], spot=10.0), snap(1.0, days[1], spot=12.0)]
    fetcher.queue += [snap(1.0, days[2], spot=14.0), snap(1.0, NOW, spot=16.0)]
    for _ in days:
        pricing(catalog, "us-east-1")
    future = NOW + timedelta(days=1)
    opts = ResourceListOptions(
        region=RegionSpec(name="us-east-1"), start_time=days[0], end_time=future
    )
    points = catalog.list_pricing_predictions(opts)
    kinds = [p.kind for p in points.values()]
    assert kinds == ["observed"] * 4 + ["forecast"]
    last = list(points.values())[-1]
    assert last.method == forecast.TREND
    assert last.items["gpu.8"].spot_price == pytest.approx(18.0, abs=0.01)  # +2 a day
    assert last.items["small.1"].on_demand_price == pytest.approx(1.0)
    assert last.items["small.1"].spot_price is None


def test_forecast_from_one_observation_carries_it_forward() -> None:
    from providers.cloud.cache import Observation

    prices, method = forecast.forecast(
        [Observation("a", NOW, 1.5, None, None)], NOW + timedelta(days=5)
    )
    assert method == forecast.LAST_VALUE and prices == {"a": (1.5, None, None)}


def test_export_then_import_elsewhere(make, tmp_path: Path) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW - timedelta(hours=1)), snap(2.0)]
    pricing(catalog, "us-east-1")
    pricing(catalog, "eu-west-1")
    path = tmp_path / "shared.json.gz"
    share.write(share.export(catalog.cache, "testcloud"), path, None)
    other_home = tmp_path / "other"
    other_home.mkdir()
    settings = Settings(paths=Paths.from_env({"SHOAL_HOME": str(other_home)}), env={})
    settings.freshness = Freshness(offline=True)
    elsewhere = CloudCatalog("testcloud", settings, lambda: Scripted(), "us-east-1")
    report = share.load(elsewhere.cache, path)
    assert sorted(report.imported) == ["eu-west-1", "us-east-1"]
    assert report.history_added == 4
    assert pricing(elsewhere, "eu-west-1") == {"gpu.8": 80.0, "small.1": 2.0}
    types = elsewhere.list_instance_types(RegionSpec(name="us-east-1"))
    (gpu,) = [s for s in types if s.gpu_count]
    assert (gpu.gpu, gpu.gpu_memory_gib, gpu.vcpus) == ("H100", 80, 96)
    again = share.load(elsewhere.cache, path)
    assert again.imported == [] and sorted(again.kept) == ["eu-west-1", "us-east-1"]
    assert again.history_added == 0


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format="other"), "not a catalog export"),
        (lambda d: d.update(version=9), "version 9"),
        (lambda d: d["snapshots"][0]["offers"][0].update(vcpus="many"), r"offers\[0\].vcpus"),
        (lambda d: d["snapshots"][0]["offers"][0].update(onDemand=-1), "finite number >= 0"),
        (
            lambda d: d["snapshots"][0]["offers"][0].update(onDemand=float("inf")),
            "finite number >= 0",
        ),
        (lambda d: d["snapshots"][0]["offers"][0].update(gpuCount=10**30), "integer from 0"),
        (lambda d: d["snapshots"][0].update(region="../../etc"), "not a region"),
        (lambda d: d["snapshots"].append(dict(d["snapshots"][0])), "appears twice"),
        (lambda d: d["snapshots"][0].update(fetchedAt="2099-01-01T00:00:00Z"), "in the future"),
        (lambda d: d["snapshots"][0].update(fetchedAt="yesterday"), "fetchedAt"),
        (lambda d: d["snapshots"][0].update(currency="EUR"), "only USD"),
        (lambda d: d["history"].append([1, 2]), r"history\[\d+\]"),
    ],
)
def test_import_refuses_bad_files_and_writes_nothing(
    make, tmp_path: Path, mutate, message: str
) -> None:
    import json

    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0)]
    pricing(catalog)
    document = share.export(catalog.cache, "testcloud")
    mutate(document)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    other_home = tmp_path / "other"
    other_home.mkdir()
    target = CloudCatalog(
        "testcloud",
        Settings(paths=Paths.from_env({"SHOAL_HOME": str(other_home)}), env={}),
        lambda: Scripted(),
        "us-east-1",
    )
    with pytest.raises(ShoalError, match=message):
        share.load(target.cache, path)
    assert target.cache.snapshots("testcloud") == {}


def test_a_parser_tripped_by_a_strange_payload_is_a_failed_refresh(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW - timedelta(days=2))]
    pricing(catalog, "us-east-1")
    catalog, fetcher, warnings = make()
    fetcher.queue = [AttributeError("'list' object has no attribute 'get'")]
    assert pricing(catalog, "us-east-1")["small.1"] == 1.0  # the old data, with a warning
    assert any("malformed us-east-1 prices payload (AttributeError" in w for w in warnings)
    catalog, fetcher, _ = make(refresh=True)
    fetcher.queue = [TypeError("unhashable")]
    with pytest.raises(ShoalError, match="malformed"):
        pricing(catalog, "us-east-1")


def test_max_age_online_refreshes_first(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW - timedelta(hours=10))]
    pricing(catalog, "us-east-1")
    catalog, fetcher, _ = make(max_age=timedelta(hours=6))
    fetcher.queue = [snap(2.0)]
    assert pricing(catalog, "us-east-1")["small.1"] == 2.0
    assert len(fetcher.fetches) == 2


def test_data_from_the_future_is_refreshed(make) -> None:
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0, at=NOW + timedelta(days=365))]
    pricing(catalog, "us-east-1")
    catalog, fetcher, _ = make()
    fetcher.queue = [snap(3.0)]
    assert pricing(catalog, "us-east-1")["small.1"] == 3.0


def test_import_strips_control_characters_and_survives_a_gzip_bomb(
    make, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gzip
    import json

    catalog, fetcher, _ = make()
    fetcher.queue = [snap(1.0)]
    pricing(catalog)
    document = share.export(catalog.cache, "testcloud")
    document["snapshots"][0]["source"] = "http://mirror\x1b]0;pwned\x07/prices"
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(document))
    other = tmp_path / "other"
    other.mkdir()
    target = CloudCatalog(
        "testcloud",
        Settings(paths=Paths.from_env({"SHOAL_HOME": str(other)}), env={}),
        lambda: Scripted(),
        "us-east-1",
    )
    share.load(target.cache, path)
    (info,) = target.cache.snapshots("testcloud").values()
    assert info.source == "http://mirror]0;pwned/prices"
    monkeypatch.setattr(share, "MAX_IMPORT_BYTES", 1 << 20)  # the cap, not its size, is tested
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b" " * (2 << 20), 9))
    with pytest.raises(ShoalError, match="unpacks past"):
        share.load(target.cache, bomb)


def test_a_version_1_cache_is_migrated_with_zero_shapes_read_as_unknown(tmp_path: Path) -> None:
    import sqlite3

    from providers.cloud.cache import CatalogCache

    path = tmp_path / "catalog.sqlite"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE region_list(provider TEXT NOT NULL, name TEXT NOT NULL,
            location TEXT NOT NULL, zones TEXT NOT NULL, fetched_at REAL NOT NULL,
            PRIMARY KEY(provider, name)) WITHOUT ROWID;
        CREATE TABLE snapshot(provider TEXT NOT NULL, region TEXT NOT NULL,
            fetched_at REAL NOT NULL, source TEXT NOT NULL, currency TEXT NOT NULL,
            notes TEXT NOT NULL, PRIMARY KEY(provider, region)) WITHOUT ROWID;
        CREATE TABLE offer(provider TEXT NOT NULL, region TEXT NOT NULL,
            instance_type TEXT NOT NULL, vcpus REAL NOT NULL, memory_gib REAL NOT NULL,
            arch TEXT NOT NULL, gpu TEXT NOT NULL, gpu_count INTEGER NOT NULL,
            gpu_memory_gib REAL NOT NULL, on_demand REAL, spot REAL, scheduled REAL,
            PRIMARY KEY(provider, region, instance_type)) WITHOUT ROWID;
        CREATE TABLE history(provider TEXT NOT NULL, region TEXT NOT NULL,
            instance_type TEXT NOT NULL, observed_at REAL NOT NULL, on_demand REAL, spot REAL,
            scheduled REAL, PRIMARY KEY(provider, region, instance_type, observed_at))
            WITHOUT ROWID;
        INSERT INTO snapshot VALUES ('azure', 'eastus', 1.0e9, 'http://x', 'USD', '[]');
        INSERT INTO offer VALUES ('azure', 'eastus', 'Standard_X4', 4, 0, 'x86_64', '', 0, 0,
            0.2, NULL, NULL);
        INSERT INTO offer VALUES ('azure', 'eastus', 'Standard_D4s_v5', 4, 16, 'x86_64', '', 0,
            0, 0.19, NULL, NULL);
        INSERT INTO history VALUES ('azure', 'eastus', 'Standard_X4', 1.0e9, 0.2, NULL, NULL);
        PRAGMA user_version=1;
        """
    )
    db.close()
    cache = CatalogCache(path)
    got = {o.instance_type: o for o in cache.offers("azure", "eastus")}
    assert got["Standard_X4"].memory_gib is None and got["Standard_X4"].vcpus == 4
    assert got["Standard_D4s_v5"].memory_gib == 16
    assert cache.history_count("azure") == 1
    cache.close()
    assert CatalogCache(path).offers("azure", "eastus")[0].shape_source == ""  # reopens as v2


# -- which regions: decided once, by CloudCatalog.regions_for ---------------------------------


def cloud(
    tmp_path: Path, fetcher: Scripted, env: dict[str, str], config: dict[str, Any], **fresh: Any
) -> CloudCatalog:
    settings = Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
        config=config,
        env=env,
        freshness=Freshness(**fresh),
        warn=lambda message: None,
    )
    return CloudCatalog(
        "testcloud", settings, lambda: fetcher, "us-east-1", region_env=("TESTCLOUD_REGION",)
    )


@pytest.mark.parametrize(
    ("env", "config", "fetched"),
    [
        ({}, {}, "us-east-1"),  # the provider's default
        ({}, {"testcloud": {"default_region": "eu-west-1"}}, "eu-west-1"),
        ({"TESTCLOUD_REGION": "ap-south-1"}, {"testcloud": {"default_region": "x"}}, "ap-south-1"),
    ],
)
def test_without_a_region_the_default_is_the_variable_then_the_config_then_the_provider(
    tmp_path: Path, env: dict[str, str], config: dict[str, Any], fetched: str
) -> None:
    from providers import query

    fetcher = Scripted(regions=["ap-south-1", "eu-west-1", "us-east-1"], queue=[snap(1.0)])
    catalog = cloud(tmp_path, fetcher, env, config)
    answer = query.pricing(["testcloud"], lambda name: catalog, query.Query())
    assert [p.region.name for p in answer.now] == [fetched] and fetcher.fetches == [fetched]
    # The flag comes first: a named region is the one asked.
    fetcher.queue = [snap(2.0)]
    named = query.pricing(["testcloud"], lambda name: catalog, query.Query(regions=["us-east-1"]))
    assert [p.region.name for p in named.now] == ["us-east-1"]


def test_the_regions_named_are_decided_once_before_anything_is_fetched(tmp_path: Path) -> None:
    from providers import query

    fetcher = Scripted(queue=[snap(1.0), snap(2.0)])
    catalog = cloud(tmp_path, fetcher, {}, {}, refresh=True)
    asked = query.Query(regions=["us-east-1", "eu-west-1", "us-east-1"])
    answer = query.pricing(["testcloud"], lambda name: catalog, asked)
    assert [p.region.name for p in answer.now] == ["us-east-1", "eu-west-1"]
    # One look at the region list (--refresh fetches it each time it is asked), not one a
    # region: the query's regions are not checked again where the prices are read.
    assert fetcher.listed == 1 and fetcher.fetches == ["us-east-1", "eu-west-1"]
    other = Scripted()
    (tmp_path / "other").mkdir()
    catalog = cloud(tmp_path / "other", other, {}, {})
    with pytest.raises(UsageError, match=r"'us-east-2x'.*did you mean us-east-1"):
        query.pricing(
            ["testcloud"], lambda name: catalog, query.Query(regions=["eu-west-1", "us-east-2x"])
        )
    assert other.fetches == []  # refused before the first region's prices were fetched
