"""`pricing` across providers, freshness flags, and `catalog status/export/import`, through
the CLI, over cloud catalogs registered with scripted fetchers (each real fetcher is tested
against its loopback server in tests/providers/<provider>/)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.cloud.catalog import CloudCatalog
from providers.cloud.offers import Offer, Progress, Snapshot
from providers.core.errors import CredentialsError, ShoalError
from providers.core.settings import Settings
from providers.models import RegionSpec
from providers.registry import register

NOW = datetime.now(UTC).replace(microsecond=0)


class Fetcher:
    def __init__(self, provider: str, prices: dict[str, float], fail: ShoalError | None) -> None:
        self.provider = provider
        self.prices = prices
        self.fail = fail
        self.age = timedelta(0)
        self.fetched: list[str] = []

    def list_regions(self) -> list[RegionSpec]:
        if self.fail:
            raise self.fail
        return [RegionSpec(name="r1", location="Here"), RegionSpec(name="r2")]

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        if self.fail:
            raise self.fail
        self.fetched.append(region)
        progress(10, 10, f"{self.provider} {region}")
        bump = 0.5 if region == "r2" else 0.0
        offers = {
            name: Offer(
                name,
                vcpus=4,
                memory_gib=16,
                gpu_count=int("gpu" in name),
                on_demand=price + bump,
                spot=price / 2,
            )
            for name, price in self.prices.items()
        }
        return Snapshot(
            self.provider,
            region,
            NOW - self.age,
            f"http://127.0.0.1/{self.provider}",
            offers=offers,
            notes=[f"{self.provider} note"],
        )


@pytest.fixture
def clouds() -> Iterator[dict[str, Fetcher]]:
    fetchers = {
        "cloud-a": Fetcher("cloud-a", {"a.small": 1.0, "a.gpu": 9.0}, None),
        "cloud-b": Fetcher("cloud-b", {"b.small": 0.5}, None),
        "cloud-down": Fetcher("cloud-down", {}, CredentialsError("cloud-down: set CLOUD_DOWN_KEY")),
    }
    for name, fetcher in fetchers.items():

        def factory(settings: Settings, fetcher: Fetcher = fetcher) -> CloudCatalog:
            return CloudCatalog(fetcher.provider, settings, lambda: fetcher, "r1")

        register(name, factory)
    yield fetchers


def ok(run: Any) -> Any:
    assert run.exit_code == 0, run.stderr
    return run


def test_pricing_compares_providers_in_one_sorted_table(cli: Callable[..., Any], clouds) -> None:
    run = ok(cli("pricing", "-p", "cloud-a,cloud-b", "--sort", "price"))
    lines = [line for line in run.stdout.splitlines() if "small" in line or "gpu" in line]
    assert [line.split()[2] for line in lines] == ["b.small", "a.small", "a.gpu"]
    assert "USD" in run.stdout
    assert "cloud-a: cloud-a note" in run.stderr and "note" not in run.stdout


def test_pricing_json_sorted_and_limited_keeps_the_spec_shape(cli, clouds) -> None:
    data = ok(
        cli("pricing", "-p", "cloud-a,cloud-b", "--sort", "-price", "--limit", "2", "--json")
    ).json()
    assert [(d["provider"], list(d["items"])) for d in data] == [("cloud-a", ["a.gpu", "a.small"])]
    (entry,) = data
    assert entry["region"] == {"name": "r1"}
    assert entry["items"]["a.gpu"] == {"onDemandPrice": 9.0, "spotPrice": 4.5}
    assert entry["currency"] == "USD" and entry["source"] == "http://127.0.0.1/cloud-a"
    assert entry["asOf"] == NOW.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert "stale" not in entry and "error" not in entry


def test_one_failing_provider_does_not_hide_the_others(cli, clouds) -> None:
    run = ok(cli("pricing", "-p", "cloud-a,cloud-down", "--json"))
    data = run.json()
    assert [d["provider"] for d in data] == ["cloud-a", "cloud-down"]
    assert data[1]["error"] == "cloud-down: set CLOUD_DOWN_KEY" and data[1]["items"] == {}
    # The provider is named once, and the failure said once.
    assert run.stderr == "shoal: warning: cloud-down: set CLOUD_DOWN_KEY\n"


def test_every_provider_failing_exits_with_the_error_code(cli, clouds) -> None:
    run = cli("pricing", "-p", "cloud-down")
    assert run.exit_code == 77
    assert "CLOUD_DOWN_KEY" in run.stderr and run.stdout == ""


def test_when_every_provider_fails_each_failure_is_printed_once(cli, clouds) -> None:
    register_failing("cloud-off", ShoalError("cannot reach the price list"))
    run = cli("pricing", "-p", "cloud-down,cloud-off")
    assert run.exit_code == 1 and run.stdout == ""
    lines = run.stderr.splitlines()
    assert lines == [
        "shoal: error: cloud-down: set CLOUD_DOWN_KEY",
        "shoal: error: cloud-off: cannot reach the price list",
    ]


def register_failing(name: str, error: ShoalError) -> None:
    fetcher = Fetcher(name, {}, error)

    def factory(settings: Settings) -> CloudCatalog:
        return CloudCatalog(name, settings, lambda: fetcher, "r1")

    register(name, factory)


def test_max_age_refusing_old_data_does_not_first_say_it_serves_it(cli, clouds) -> None:
    clouds["cloud-a"].age = timedelta(days=3)
    ok(cli("pricing", "-p", "cloud-a"))
    clouds["cloud-a"].fail = ShoalError("network is gone")
    run = cli("pricing", "-p", "cloud-a", "--max-age", "1d")
    assert run.exit_code == 1 and run.stdout == ""
    assert "serving" not in run.stderr
    assert "network is gone" in run.stderr and "older than --max-age 24h" in run.stderr
    assert len(run.stderr.splitlines()) == 1


def test_window_errors_are_found_before_any_request(cli, clouds) -> None:
    clouds["cloud-a"].fail = ShoalError("must not be asked")
    for argv in (
        ["--start", "2026-03-07T10:00:00Z", "--end", "2026-03-07T09:00:00Z"],
        ["--region", "all", "--start", "2026-03-07T10:00:00Z", "--end", "2026-03-06T00:00:00Z"],
        ["--start", "not-a-time"],
    ):
        run = cli("pricing", "-p", "cloud-a", *argv)
        assert run.exit_code == 2, run.stderr
        assert "must not be asked" not in run.stderr
    run = cli("pricing", "-p", "cloud-a", "--start", "2026-03-07T10:00:00Z", "--end",
              "2026-03-07T09:00:00Z")
    assert "--end 2026-03-07T09:00:00Z is before --start 2026-03-07T10:00:00Z" in run.stderr


def test_region_all_asks_every_region(cli, clouds) -> None:
    data = ok(cli("pricing", "-p", "cloud-b", "--region", "all", "--json")).json()
    assert [(d["region"]["name"], d["items"]["b.small"]["onDemandPrice"]) for d in data] == [
        ("r1", 0.5),
        ("r2", 1.0),
    ]
    regions = ok(cli("regions", "-p", "cloud-b", "--json")).json()
    assert regions == [{"name": "r1", "location": "Here"}, {"name": "r2"}]


def test_unknown_region_is_a_usage_error_with_suggestions(cli, clouds) -> None:
    run = cli("pricing", "-p", "cloud-a", "--region", "r3")
    assert run.exit_code == 2
    assert "did you mean" in run.stderr


def test_the_regions_named_are_decided_before_any_price_is_fetched(cli, clouds) -> None:
    run = cli("pricing", "-p", "cloud-a", "--region", "r1", "--region", "r3")
    assert run.exit_code == 2 and run.stdout == ""
    assert "--region 'r3': provider cloud-a has no such region; did you mean" in run.stderr
    assert clouds["cloud-a"].fetched == []
    data = ok(cli("types", "-p", "cloud-a", "--region", "r2", "--region", "r1", "--json")).json()
    assert [t["region"] for t in data] == ["r2", "r2", "r1", "r1"]
    assert clouds["cloud-a"].fetched == ["r2", "r1"]


def test_types_select_and_offline_after_a_fetch(cli, clouds) -> None:
    ok(cli("pricing", "-p", "cloud-a"))
    clouds["cloud-a"].fail = ShoalError("network is gone")
    data = ok(
        cli("types", "-p", "cloud-a", "--offline", "--select", "gpu_count>=1", "--json")
    ).json()
    assert [t["name"] for t in data] == ["a.gpu"]


def test_flag_conflicts_and_bad_durations_are_usage_errors(cli, clouds) -> None:
    assert cli("pricing", "-p", "cloud-a", "--refresh", "--offline").exit_code == 2
    run = cli("pricing", "-p", "cloud-a", "--max-age", "soon")
    assert run.exit_code == 2 and "--max-age" in run.stderr
    run = cli("pricing", "-p", "cloud-a,cloud-b", "--start", NOW.isoformat())
    assert run.exit_code == 2 and "one provider" in run.stderr
    run = cli("pricing", "-p", "cloud-a", "--sort", "arch")
    assert run.exit_code == 2 and "price" in run.stderr


def test_stale_data_is_served_with_a_warning_and_marked(cli, clouds) -> None:
    clouds["cloud-a"].age = timedelta(days=3)
    ok(cli("pricing", "-p", "cloud-a"))
    clouds["cloud-a"].fail = ShoalError("host down")
    run = ok(cli("pricing", "-p", "cloud-a", "--json"))
    assert run.json()[0]["stale"] is True
    assert "refresh failed (host down)" in run.stderr and "3d ago" in run.stderr
    run = cli("pricing", "-p", "cloud-a", "--offline", "--max-age", "1d")
    assert run.exit_code == 1 and "older than --max-age" in run.stderr


def test_resources_is_not_a_cloud_view(cli, clouds) -> None:
    run = cli("resources", "-p", "cloud-a")
    assert run.exit_code == 2 and "shoal pricing" in run.stderr


def test_catalog_status_export_and_import(cli, clouds, home: Path, tmp_path: Path) -> None:
    ok(cli("pricing", "-p", "cloud-a", "--region", "all"))
    status = ok(cli("catalog", "status", "--json")).json()
    assert [(s["provider"], s["region"], s["instanceTypes"]) for s in status] == [
        ("cloud-a", "r1", 2),
        ("cloud-a", "r2", 2),
    ]
    path = tmp_path / "cloud-a.json.gz"
    run = ok(cli("catalog", "export", "-p", "cloud-a", "--file", str(path)))
    assert "2 regions" in run.stderr and run.stdout == ""
    exported = json.loads(ok(cli("catalog", "export", "-p", "cloud-a")).stdout)
    assert exported["format"] == "shoal-catalog" and len(exported["snapshots"]) == 2
    for cache_file in (home / "cache").glob("catalog.sqlite*"):
        cache_file.unlink()
    clouds["cloud-a"].fail = ShoalError("no network here")
    report = ok(cli("catalog", "import", str(path), "--json")).json()
    assert report == [
        {"provider": "cloud-a", "imported": ["r1", "r2"], "kept": [], "historyAdded": 4}
    ]
    data = ok(cli("pricing", "-p", "cloud-a", "--offline", "--json")).json()
    assert [d["region"]["name"] for d in data] == ["r1", "r2"]


def test_import_of_a_bad_file_is_one_line_and_changes_nothing(cli, clouds, tmp_path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "shoal-catalog", "version": 1, "provider": "x", "snapshots": 3}')
    run = cli("catalog", "import", str(bad))
    assert run.exit_code == 1
    assert "snapshots: expected a list" in run.stderr and len(run.stderr.splitlines()) == 1
    assert ok(cli("catalog", "status", "--json")).json() == []


def test_azure_end_to_end_over_loopback(cli, tmp_path: Path) -> None:
    """The real Azure fetcher behind the CLI: env base URL, cache, then offline."""
    from tests.providers.apiserver import ApiServer
    from tests.providers.azure import payloads

    with ApiServer() as api:
        api.route(payloads.PRICES_PATH, payloads.PricesApi(payloads.catalog(), base=api.base))
        env = {"SHOAL_AZURE_PRICES_URL": api.base}
        data = ok(cli("pricing", "-p", "azure", "-r", "eastus", "--json", env=env)).json()
        run = ok(cli("pricing", "-p", "azure", "-r", "eastus", "--sort", "price", env=env))
    (eastus,) = data
    assert {
        k: (v.get("onDemandPrice"), v.get("spotPrice")) for k, v in eastus["items"].items()
    } == (payloads.EASTUS_OFFERS)
    assert (
        eastus["source"].startswith("http://127.0.0.1:")
        and "SHOAL_AZURE_TOKEN" in (eastus["notes"][0])
    )
    assert run.stdout.index("Standard_D4ps_v5") < run.stdout.index("Standard_NC24ads_A100_v4")
    assert "SHOAL_AZURE_TOKEN" in run.stderr  # the note, on stderr
    types = ok(cli("types", "-p", "azure", "--offline", "--select", "gpu=A100", "--json")).json()
    assert [(t["name"], t["vcpus"], t["gpu_count"]) for t in types] == [
        ("Standard_NC24ads_A100_v4", 24, 1)
    ]


class ShapeFetcher(Fetcher):
    """One type whose shape the provider gives, one whose memory nobody knows."""

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        offers = {
            "u.known": Offer("u.known", vcpus=4, memory_gib=16, on_demand=1.0),
            "u.unknown": Offer(
                "u.unknown", vcpus=8, on_demand=2.0, shape_source="a built-in table (2026-11)"
            ),
        }
        return Snapshot(self.provider, region, NOW, "http://127.0.0.1/cloud-u", offers=offers)


@pytest.fixture
def unknown_shapes() -> None:
    fetcher = ShapeFetcher("cloud-u", {}, None)
    register("cloud-u", lambda settings: CloudCatalog("cloud-u", settings, lambda: fetcher, "r1"))


def test_an_unknown_memory_is_null_never_zero(cli, unknown_shapes) -> None:
    data = ok(cli("types", "-p", "cloud-u", "--json")).json()
    by_name = {d["name"]: d for d in data}
    assert by_name["u.unknown"]["memory_gib"] is None
    assert by_name["u.known"]["memory_gib"] == 16
    # Where each shape came from: the provider's data, or the table named by the fetcher.
    assert by_name["u.known"]["source"] == "http://127.0.0.1/cloud-u"
    assert by_name["u.unknown"]["source"] == "a built-in table (2026-11)"
    table = ok(cli("types", "-p", "cloud-u"))
    assert "u.unknown" in table.stdout and "0.0" not in table.stdout
    assert "shapes of 1 type(s) from a built-in table (2026-11)" in table.stderr
    assert "shapes of 1 type(s) from http://127.0.0.1/cloud-u" in table.stderr


def test_a_selector_on_an_unknown_value_says_how_many_rows_it_could_not_judge(
    cli, unknown_shapes
) -> None:
    run = ok(cli("types", "-p", "cloud-u", "--select", "memory_gib>=8", "--json"))
    assert [d["name"] for d in run.json()] == ["u.known"]
    assert "could not judge 1 row(s) with no known memory_gib" in run.stderr
    # A selector that does not need the unknown value judges every row: nothing to say.
    quiet = ok(cli("types", "-p", "cloud-u", "--select", "vcpus>=8", "--json"))
    assert [d["name"] for d in quiet.json()] == ["u.unknown"] and quiet.stderr == ""
    listed = ok(cli("types", "-p", "cloud-u", "--select", "!memory_gib", "--json")).json()
    assert [d["name"] for d in listed] == ["u.unknown"]
    (entry,) = ok(cli("pricing", "-p", "cloud-u", "--select", "memory_gib>=8", "--json")).json()
    assert list(entry["items"]) == ["u.known"]
    assert any("could not judge 1 row(s) with no known memory_gib" in n for n in entry["notes"])


def test_pricing_table_shows_shapes_and_sorts_by_them(cli, clouds) -> None:
    run = ok(cli("pricing", "-p", "cloud-a", "--sort", "-gpu_count"))
    lines = [line.split() for line in run.stdout.splitlines() if line.startswith(" cloud-a")]
    # Type, vCPUs, GiB, GPU (model x count), then the prices.
    assert [line[2:6] for line in lines] == [["a.gpu", "4", "16", "?"], ["a.small", "4", "16", "—"]]
    assert "vCPUs" in run.stdout and "GiB" in run.stdout and "GPU" in run.stdout
    data = ok(cli("pricing", "-p", "cloud-a", "--sort", "memory_gib", "--json")).json()
    assert set(data[0]["items"]["a.gpu"]) == {"onDemandPrice", "spotPrice"}  # the spec's shape
    bad = cli("pricing", "-p", "cloud-a", "--sort", "colour", env={"SHOAL_DEBUG": ""})
    assert bad.exit_code == 2 and "gpu_memory_gib" in bad.stderr


def test_export_to_stdin_of_import_and_json_says_where(
    cli, clouds, home: Path, tmp_path: Path
) -> None:
    ok(cli("pricing", "-p", "cloud-a"))
    exported = ok(cli("catalog", "export", "-p", "cloud-a"))
    other = tmp_path / "other-home"
    other.mkdir()
    run = ok(cli("catalog", "import", "-", "--json", input=exported.stdout,
                 env={"SHOAL_HOME": str(other)}))  # fmt: skip
    assert run.json()[0]["provider"] == "cloud-a" and run.json()[0]["imported"] == ["r1"]
    target = tmp_path / "a.json.gz"
    said = ok(cli("catalog", "export", "-p", "cloud-a", "--file", str(target), "--json")).json()
    assert said == {"provider": "cloud-a", "path": str(target.resolve()), "regions": 1,
                    "historyPoints": 2}  # fmt: skip
    assert target.exists()


def test_export_of_a_provider_without_a_cache_gives_no_useless_advice(cli) -> None:
    run = cli("catalog", "export", "-p", "local", env={"SHOAL_DEBUG": ""})
    assert run.exit_code == 2
    assert "keeps no cached catalog" in run.stderr and "shoal pricing" not in run.stderr
