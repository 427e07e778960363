"""AzureFetcher against a loopback Retail Prices / management server (formats: payloads.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.azure import sizes
from providers.azure.fetch import NAME_SOURCE, NO_TOKEN_NOTE, AzureFetcher
from providers.cloud.http import RetryPolicy
from providers.cloud.offers import Offer
from providers.core.errors import (
    CredentialsError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
)
from providers.core.settings import Paths, Settings
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.azure import payloads as p

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=5.0)
SKUS_SOURCE = "the Azure Resource SKUs API ({base})"


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    # One server per module, reset between tests.
    with ApiServer() as running:
        yield running


@pytest.fixture
def api(server: ApiServer) -> ApiServer:
    server.reset()
    return server


def settings(
    tmp_path: Path, env: dict[str, str] | None = None, config: dict[str, Any] | None = None
) -> Settings:
    return Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}), config=config or {}, env=env or {}
    )


def fetcher(tmp_path: Path, api: ApiServer, *, token: bool = False, **kw: Any) -> AzureFetcher:
    env = {"SHOAL_AZURE_PRICES_URL": api.base, "SHOAL_AZURE_MANAGEMENT_URL": api.base}
    if token:
        env |= {"SHOAL_AZURE_TOKEN": p.TOKEN, "AZURE_SUBSCRIPTION_ID": p.SUBSCRIPTION}
    return AzureFetcher.from_settings(settings(tmp_path, env), policy=FAST, **kw)


def serve_prices(api: ApiServer, path: str = p.PRICES_PATH, **kw: Any) -> p.PricesApi:
    handler = p.PricesApi(p.catalog(), base=api.base, **kw)
    api.route(path, handler)
    return handler


def prices(snapshot_offers: dict[str, Offer]) -> dict[str, tuple[float | None, float | None]]:
    return {name: (o.on_demand, o.spot) for name, o in snapshot_offers.items()}


def test_keyless_region_pages_filters_and_derives_specs(tmp_path: Path, api: ApiServer) -> None:
    handler = serve_prices(api)
    seen: list[tuple[int, int | None, str]] = []
    snap = fetcher(tmp_path, api).fetch_region("eastus", lambda *a: seen.append(a))
    assert snap.provider == "azure" and snap.region == "eastus" and snap.currency == "USD"
    assert snap.source == f"{api.base}/api/retail/prices"
    assert snap.fetched_at.tzinfo is not None
    table = sizes.table().source
    assert snap.notes == [
        NO_TOKEN_NOTE,
        f"4 sizes take their shape from {table}: Standard_D4ps_v5, Standard_D4s_v5, "
        "Standard_E4s_v5, Standard_NC24ads_A100_v4",
    ]
    # Memory from the built-in table (Microsoft's size pages), arch from the name.
    assert snap.offers == {
        "Standard_D4ps_v5": Offer(
            "Standard_D4ps_v5", 4, 16, "arm64", on_demand=0.154, spot=0.031, shape_source=table
        ),
        "Standard_D4s_v5": Offer(
            "Standard_D4s_v5", 4, 16, "x86_64", on_demand=0.192, spot=0.0384, shape_source=table
        ),
        "Standard_E4s_v5": Offer(
            "Standard_E4s_v5", 4, 32, "x86_64", on_demand=0.252, shape_source=table
        ),
        "Standard_NC24ads_A100_v4": Offer(
            "Standard_NC24ads_A100_v4",
            24,
            220,
            "x86_64",
            "A100",
            1,
            80.0,
            3.673,
            0.7346,
            shape_source=table,
        ),
    }
    # The server evaluated the filter: 14 eastus Consumption rows, 4 a page.
    assert handler.filters[0] == (
        "serviceName eq 'Virtual Machines' and armRegionName eq 'eastus' "
        "and priceType eq 'Consumption'"
    )
    requests = api.requests_to(p.PRICES_PATH)
    assert [r.query.get("$skip", ["0"])[0] for r in requests] == ["0", "4", "8", "12"]
    assert [s[0] for s in seen] == [4, 8, 12, 14]
    assert all(s[1] is None and "eastus" in s[2] for s in seen)


def test_each_region_gets_its_own_rows(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    snap = fetcher(tmp_path, api).fetch_region("westus", lambda *a: None)
    assert prices(snap.offers) == {"Standard_D4s_v5": (0.208, 0.0416)}


def mixed_chain() -> list[dict[str, Any]]:
    """What a mirror that drops `$filter` serves: every region and service in one chain."""
    return [
        p.price_item("Standard_D4s_v5", 0.192),  # eastus: cheaper than southcentralus
        p.price_item("Standard_D4s_v5", 0.0384, variant="Spot"),
        p.price_item("Standard_D4s_v5", 0.230, region="southcentralus"),
        p.price_item("Standard_E4s_v5", 0.252),  # a size only eastus sells
        p.price_item("Standard_D4s_v5", 0.046, region="southcentralus", variant="Spot"),
        p.price_item(
            "",
            5.28,
            region="southcentralus",
            serviceName="Storage",
            productName="Premium SSD Managed Disks",
            meterName="P10 LRS Disk",
            skuName="P10 LRS",
            unit="1/Month",
        ),
        # A per-hour licence fee under the same size name, cheaper than the VM itself.
        p.price_item(
            "Standard_D4s_v5",
            0.010,
            region="southcentralus",
            serviceName="Virtual Machines Licenses",
            productName="SQL Server Enterprise Linux",
        ),
        p.price_item("Standard_D4s_v5", 812.0, region="southcentralus", kind="Reservation"),
        # Region names compare without case, as Azure does.
        p.price_item("Standard_D2s_v5", 0.115, region="SouthCentralUS"),
        p.price_item("Standard_D2s_v5", 0.096, region="westus"),
    ]


def test_a_source_that_ignores_the_filter_cannot_price_one_region_with_another(
    tmp_path: Path, api: ApiServer
) -> None:
    every_clause = ("serviceName", "armRegionName", "priceType")
    handler = p.PricesApi(mixed_chain(), base=api.base, page_size=3, ignore=every_clause)
    api.route(p.PRICES_PATH, handler)
    snap = fetcher(tmp_path, api).fetch_region("southcentralus", lambda *a: None)
    assert len(api.requests_to(p.PRICES_PATH)) == 4  # 10 items, 3 a page, all of them served
    assert handler.filters[0] == (
        "serviceName eq 'Virtual Machines' and armRegionName eq 'southcentralus' "
        "and priceType eq 'Consumption'"
    )
    assert prices(snap.offers) == {
        "Standard_D2s_v5": (0.115, None),
        "Standard_D4s_v5": (0.230, 0.046),
    }
    assert snap.notes[-1] == (
        "the price source ignored the filter: 7 items for other regions/services were dropped "
        "(1 for other price types, 4 for other regions, 2 for other services)"
    )


def test_a_filtered_source_leaves_no_note(tmp_path: Path, api: ApiServer) -> None:
    api.route(p.PRICES_PATH, p.PricesApi(mixed_chain(), base=api.base, page_size=3))
    snap = fetcher(tmp_path, api).fetch_region("southcentralus", lambda *a: None)
    assert prices(snap.offers) == {"Standard_D4s_v5": (0.230, 0.046)}
    assert not any("ignored the filter" in note for note in snap.notes)


def test_prices_in_another_currency_only_are_named(tmp_path: Path, api: ApiServer) -> None:
    rows = [p.price_item("Standard_D4s_v5", 0.18, currency="EUR")]
    api.route(p.PRICES_PATH, p.PricesApi(rows, base=api.base))
    with pytest.raises(ShoalError, match="'EUR', not USD"):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


def test_without_a_token_shapes_come_from_the_table_and_unknowns_stay_unknown(
    tmp_path: Path, api: ApiServer
) -> None:
    unknown = "Standard_D4xs_v9"  # not a size Microsoft lists: its name says 4 vCPUs only
    assert sizes.table().get(unknown) is None
    rows = [
        p.price_item("Standard_D4s_v5", 0.192),
        p.price_item("Standard_ND96isr_H100_v5", 98.32),
        p.price_item("Standard_NC4as_T4_v3", 0.526),
        p.price_item(unknown, 0.2),
    ]
    api.route(p.PRICES_PATH, p.PricesApi(rows, base=api.base))
    snap = fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)
    table = sizes.table().source
    assert snap.offers == {
        "Standard_D4s_v5": Offer(
            "Standard_D4s_v5", 4, 16, "x86_64", on_demand=0.192, shape_source=table
        ),
        "Standard_NC4as_T4_v3": Offer(
            "Standard_NC4as_T4_v3",
            4,
            28,
            "x86_64",
            "T4",
            1,
            16,
            on_demand=0.526,
            shape_source=table,
        ),
        "Standard_ND96isr_H100_v5": Offer(
            "Standard_ND96isr_H100_v5",
            96,
            1900,
            "x86_64",
            "H100",
            8,
            80,
            on_demand=98.32,
            shape_source=table,
        ),
        unknown: Offer(unknown, 4, None, "x86_64", on_demand=0.2, shape_source=NAME_SOURCE),
    }
    assert snap.notes == [
        NO_TOKEN_NOTE,
        f"3 sizes take their shape from {table}: Standard_D4s_v5, Standard_NC4as_T4_v3, "
        "Standard_ND96isr_H100_v5",
        "1 size has no known memory (not in the built-in table; vCPUs and GPUs read from "
        f"the size name): {unknown}",
    ]


def test_a_mirror_that_ignores_price_type_still_yields_the_same_offers(
    tmp_path: Path, api: ApiServer
) -> None:
    serve_prices(api, ignore=("priceType",), page_size=5)
    snap = fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)
    assert prices(snap.offers) == p.EASTUS_OFFERS
    assert len(api.requests_to(p.PRICES_PATH)) == 4  # 16 rows incl. DevTest and Reservation


def test_unknown_region_is_an_empty_snapshot_with_a_note(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    snap = fetcher(tmp_path, api).fetch_region("mars", lambda *a: None)
    assert snap.offers == {}
    assert snap.notes == [
        "the Retail Prices API returned no Linux pay-as-you-go or Spot VM prices for "
        "region 'mars' (0 rows)"
    ]


def test_azure_links_are_kept_on_the_configured_mirror(tmp_path: Path, api: ApiServer) -> None:
    # A mirror under a path prefix that hands out Azure's own absolute links.
    serve_prices(api, path="/mirror" + p.PRICES_PATH, link_base="https://prices.azure.com:443")
    env = {"SHOAL_AZURE_PRICES_URL": api.url("/mirror")}
    got = AzureFetcher.from_settings(settings(tmp_path, env), policy=FAST)
    assert prices(got.fetch_region("eastus", lambda *a: None).offers) == p.EASTUS_OFFERS
    assert len(api.requests_to("/mirror" + p.PRICES_PATH)) == 4


def test_base_url_from_the_config_file(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    config = {"azure": {"prices_url": api.base + "/"}}
    got = AzureFetcher.from_settings(settings(tmp_path, config=config), policy=FAST)
    assert got.prices_url == api.base
    assert prices(got.fetch_region("eastus", lambda *a: None).offers) == p.EASTUS_OFFERS


def test_throttling_then_success(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    api.fault(p.PRICES_PATH, "status", status=429, headers={"Retry-After": "0"})
    snap = fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)
    assert prices(snap.offers) == p.EASTUS_OFFERS


def test_throttling_past_the_retries(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    api.fault(p.PRICES_PATH, "status", status=429, times=3)
    with pytest.raises(RetryableError, match="HTTP 429"):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


def test_5xx_past_the_retries_is_unreachable(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    api.fault(p.PRICES_PATH, "status", status=503, times=3)
    with pytest.raises(ProviderUnreachableError, match="HTTP 503 after 3 attempts"):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


def test_a_dropped_connection_is_retried(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    api.fault(p.PRICES_PATH, "drop", after=50)
    snap = fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)
    assert prices(snap.offers) == p.EASTUS_OFFERS


def test_connections_that_keep_dropping(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    api.fault(p.PRICES_PATH, "drop", after=50, times=3)
    with pytest.raises(ProviderUnreachableError, match="dropped"):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


def test_a_truncated_page_is_a_clear_error(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    api.fault(p.PRICES_PATH, "garbage")
    with pytest.raises(ShoalError, match=r"malformed JSON.*nothing was cached"):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


def test_a_page_of_the_wrong_shape(tmp_path: Path, api: ApiServer) -> None:
    api.route(p.PRICES_PATH, lambda q, h: Reply.json({"items": []}))
    with pytest.raises(
        ShoalError, match=r"/api/retail/prices: malformed Retail Prices payload: Items: required;"
    ):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


def test_a_non_usd_currency_is_named(tmp_path: Path, api: ApiServer) -> None:
    rows = [p.price_item("Standard_D4s_v5", 0.18, currency="EUR")]
    api.route(p.PRICES_PATH, p.PricesApi(rows, base=api.base))
    with pytest.raises(ShoalError, match="'EUR', not USD"):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


def test_pages_are_bounded(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api, endless=True)
    with pytest.raises(ShoalError, match="more than 3 pages"):
        fetcher(tmp_path, api, max_pages=3).fetch_region("eastus", lambda *a: None)


def test_a_repeating_next_link_stops(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api, repeat=True)
    with pytest.raises(ShoalError, match="next-page link repeats"):
        fetcher(tmp_path, api).fetch_region("eastus", lambda *a: None)


# -- with a token --------------------------------------------------------------------------


def serve_management(api: ApiServer) -> None:
    management = p.ManagementApi(api.base)
    api.route(p.SKUS_PATH, management.skus)
    api.route(p.LOCATIONS_PATH, management.locations)


def test_specs_from_resource_skus(tmp_path: Path, api: ApiServer) -> None:
    serve_prices(api)
    serve_management(api)
    snap = fetcher(tmp_path, api, token=True).fetch_region("eastus", lambda *a: None)
    skus = SKUS_SOURCE.format(base=api.base)
    assert snap.offers == {
        "Standard_D4ps_v5": Offer(
            "Standard_D4ps_v5", 4, 16, "arm64", on_demand=0.154, spot=0.031, shape_source=skus
        ),
        "Standard_D4s_v5": Offer(
            "Standard_D4s_v5", 4, 16, "x86_64", on_demand=0.192, spot=0.0384, shape_source=skus
        ),
        "Standard_NC24ads_A100_v4": Offer(
            "Standard_NC24ads_A100_v4",
            24,
            220,
            "x86_64",
            "A100",
            1,
            80.0,
            3.673,
            0.7346,
            shape_source=skus,
        ),
    }
    assert p.SUBSCRIPTION not in skus  # a shared catalog export should not carry it
    assert snap.notes == [
        "1 sizes restricted for this subscription in eastus were left out: Standard_E4s_v5"
    ]
    skus = api.requests_to(p.SKUS_PATH)
    assert len(skus) == 3  # paged with nextLink, 2 a page
    assert skus[0].query["$filter"] == ["location eq 'eastus'"]
    assert skus[0].headers["authorization"] == f"Bearer {p.TOKEN}"


def test_priced_sizes_missing_from_resource_skus_take_the_built_in_table(
    tmp_path: Path, api: ApiServer
) -> None:
    serve_prices(api)
    api.route(p.SKUS_PATH, lambda q, h: Reply.json({"value": []}))
    snap = fetcher(tmp_path, api, token=True).fetch_region("eastus", lambda *a: None)
    table = sizes.table().source
    assert snap.offers["Standard_D4ps_v5"] == Offer(
        "Standard_D4ps_v5", 4, 16, "arm64", on_demand=0.154, spot=0.031, shape_source=table
    )
    assert snap.notes == [
        "4 priced sizes are not in the Resource SKUs list for eastus; their shapes come from "
        "shoal's built-in Azure size table, else their names",
        f"4 sizes take their shape from {table}: Standard_D4ps_v5, Standard_D4s_v5, "
        "Standard_E4s_v5, Standard_NC24ads_A100_v4",
    ]


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_token_names_the_variable_and_stays_secret(
    tmp_path: Path, api: ApiServer, status: int
) -> None:
    serve_prices(api)
    body = {"error": {"code": "AuthenticationFailed", "message": f"token {p.TOKEN} expired"}}
    api.route(p.SKUS_PATH, lambda q, h: Reply.json(body, status))
    with pytest.raises(CredentialsError) as caught:
        fetcher(tmp_path, api, token=True).fetch_region("eastus", lambda *a: None)
    message = str(caught.value)
    assert f"HTTP {status}" in message and "SHOAL_AZURE_TOKEN" in message
    assert "expired" in message and p.TOKEN not in message


def test_a_token_without_a_subscription(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="set AZURE_SUBSCRIPTION_ID") as caught:
        AzureFetcher.from_settings(settings(tmp_path, {"SHOAL_AZURE_TOKEN": p.TOKEN}))
    assert p.TOKEN not in str(caught.value)


def test_regions_from_the_api_with_a_token(tmp_path: Path, api: ApiServer) -> None:
    serve_management(api)
    regions = fetcher(tmp_path, api, token=True).list_regions()
    assert [(r.name, r.location, r.zones) for r in regions] == [
        ("eastus", "East US", ["1", "2", "3"]),
        ("westus", "West US", []),
    ]


def test_regions_without_a_token_are_the_public_table(tmp_path: Path, api: ApiServer) -> None:
    regions = fetcher(tmp_path, api).list_regions()
    assert len(regions) > 50 and not api.seen
    named = {r.name: r.location for r in regions}
    assert named["eastus"] == "East US" and named["westeurope"] == "West Europe"
    assert [r.name for r in regions] == sorted(named)


def test_regions_with_a_wrong_token(tmp_path: Path, api: ApiServer) -> None:
    serve_management(api)
    env = {
        "SHOAL_AZURE_MANAGEMENT_URL": api.base,
        "SHOAL_AZURE_TOKEN": "tok-wrong-456",
        "AZURE_SUBSCRIPTION_ID": p.SUBSCRIPTION,
    }
    got = AzureFetcher.from_settings(settings(tmp_path, env), policy=FAST)
    with pytest.raises(CredentialsError, match="SHOAL_AZURE_TOKEN") as caught:
        got.list_regions()
    assert "tok-wrong-456" not in str(caught.value)
