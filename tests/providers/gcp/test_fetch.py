"""GcpFetcher against a loopback Cloud Billing Catalog and Compute Engine API."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from providers.cloud.http import RetryPolicy
from providers.cloud.offers import no_progress
from providers.core.env import (
    ENV_GCP_API_KEY,
    ENV_GCP_BILLING_URL,
    ENV_GCP_COMPUTE_URL,
    ENV_GCP_PROJECT,
    ENV_GCP_TOKEN,
)
from providers.core.errors import (
    CredentialsError,
    ProviderUnreachableError,
    ShoalError,
    UsageError,
)
from providers.core.settings import Paths, Settings
from providers.gcp.fetch import BUILTIN_NOTE, GcpFetcher
from providers.gcp.parse import CORE, RAM, RateBook
from providers.gcp.shapes import builtin_shapes, builtin_table
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.gcp import payloads as p

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=5.0)
FAMILY_NOTE = "priced families without known shapes (not listed)"
GPU_NOTE = "priced GPUs on no known machine type (not listed)"
TOKEN_ENV = {ENV_GCP_TOKEN: p.TOKEN, ENV_GCP_PROJECT: p.PROJECT}


@pytest.fixture(scope="module")
def shared() -> Iterator[ApiServer]:
    # One server for the module, reset between tests.
    with ApiServer() as server:
        yield server


@pytest.fixture
def api(shared: ApiServer) -> ApiServer:
    p.serve(shared)
    return shared


def fetcher_settings(
    tmp_path: Path,
    server: ApiServer,
    config: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Settings:
    base = {
        ENV_GCP_BILLING_URL: server.base,
        ENV_GCP_COMPUTE_URL: server.base,
        ENV_GCP_API_KEY: p.API_KEY,
    }
    return Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
        config=dict(config or {}),
        env={k: v for k, v in (base | dict(env or {})).items() if v},
    )


def fetcher(
    tmp_path: Path,
    server: ApiServer,
    config: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> GcpFetcher:
    return GcpFetcher.from_settings(fetcher_settings(tmp_path, server, config, env), policy=FAST)


def test_pages_once_and_prices_every_region_from_one_list(tmp_path: Path, api: ApiServer) -> None:
    seen: list[tuple[int, int | None, str]] = []
    gcp = fetcher(tmp_path, api)
    snap = gcp.fetch_region("us-central1", lambda d, t, w: seen.append((d, t, w)))
    regions = gcp.list_regions()
    belgium = gcp.fetch_region("europe-west1", no_progress)
    calls = api.requests_to(p.SKUS_PATH)
    assert len(calls) == 6  # 39 SKUs, 7 a page, fetched once for everything
    assert [c.query.get("pageToken") for c in calls] == [None] + [[f"tok-{i}"] for i in range(1, 6)]
    assert seen[-1] == (39, None, "gcp: Compute Engine SKU rows (page 6)")
    assert [(r.name, r.location, r.zones) for r in regions] == [
        ("europe-west1", "Belgium", []),
        ("us-central1", "Iowa", []),
        ("us-east1", "", []),
        ("us-east4", "", []),
    ]
    assert snap.provider == "gcp" and snap.currency == "USD"
    assert snap.source == f"{api.base}/v1/services/6F81-5844-456A/skus"
    # T4 is billed on N1 VMs, which shoal does not list as N1+GPU combinations.
    assert snap.notes == [BUILTIN_NOTE, f"{GPU_NOTE}: nvidia-tesla-t4"]
    assert belgium.notes == [BUILTIN_NOTE]
    assert snap.fetched_at == belgium.fetched_at and snap.fetched_at.tzinfo is not None
    n2 = snap.offers["n2-standard-4"]
    assert (n2.vcpus, n2.memory_gib, n2.arch, n2.gpu_count) == (4, 16, "x86_64", 0)
    assert n2.shape_source == builtin_table().source
    assert builtin_table().as_of in n2.shape_source
    assert n2.on_demand == pytest.approx(0.194236)
    assert n2.spot == pytest.approx(0.04732)
    assert n2.scheduled is None
    a2 = snap.offers["a2-highgpu-1g"]
    assert (a2.gpu, a2.gpu_count, a2.gpu_memory_gib) == ("A100", 1, 40.0)
    assert a2.on_demand == pytest.approx(3.673385)
    assert a2.spot == pytest.approx(12 * 0.01659 + 85 * 0.00222 + 1.5399)
    assert a2.scheduled == pytest.approx(2.02038)
    assert snap.offers["a3-highgpu-8g"].on_demand == pytest.approx(
        208 * 0.029563 + 1872 * 0.002965 + 8 * 11.0612
    )
    assert "c3-standard-4" not in snap.offers  # its only rate is a $0 placeholder
    assert sorted({n.split("-")[0] for n in belgium.offers}) == ["n2"]
    assert belgium.offers["n2-standard-2"].on_demand == pytest.approx(2 * 0.034806 + 8 * 0.004664)


def test_a_missing_key_needs_no_network_until_first_use(tmp_path: Path, api: ApiServer) -> None:
    gcp = fetcher(tmp_path, api, env={ENV_GCP_API_KEY: ""})
    with pytest.raises(CredentialsError, match=ENV_GCP_API_KEY):
        gcp.list_regions()
    with pytest.raises(CredentialsError, match=ENV_GCP_API_KEY):
        gcp.fetch_region("us-central1", no_progress)
    assert api.seen == []


@pytest.mark.parametrize("key", ["wrong-key-789", "blocked-key"])
def test_a_refused_key_names_the_variable_and_never_shows_the_key(
    tmp_path: Path, api: ApiServer, key: str
) -> None:
    gcp = fetcher(tmp_path, api, env={ENV_GCP_API_KEY: key})
    with pytest.raises(CredentialsError) as caught:
        gcp.fetch_region("us-central1", no_progress)
    message = str(caught.value)
    assert ENV_GCP_API_KEY in message and key not in message
    assert "HTTP 400" in message if key.startswith("wrong") else "HTTP 403" in message
    assert "?" not in message  # the URL is shown without its query


def test_throttling_then_success_and_a_dropped_body(tmp_path: Path, api: ApiServer) -> None:
    api.fault(p.SKUS_PATH, "status", status=429, headers={"Retry-After": "0"})
    api.fault(p.SKUS_PATH, "truncate", after=50)
    snap = fetcher(tmp_path, api).fetch_region("us-central1", no_progress)
    assert snap.offers["n2-standard-4"].on_demand == pytest.approx(0.194236)
    assert len(api.requests_to(p.SKUS_PATH)) == 8


def test_server_errors_past_the_retries_are_unreachable(tmp_path: Path, api: ApiServer) -> None:
    api.fault(p.SKUS_PATH, "status", status=503, times=3)
    with pytest.raises(ProviderUnreachableError, match="HTTP 503 after 3 attempts") as caught:
        fetcher(tmp_path, api).fetch_region("us-central1", no_progress)
    assert p.API_KEY not in str(caught.value)


def test_a_connection_dropped_every_time_is_unreachable(tmp_path: Path, api: ApiServer) -> None:
    api.fault(p.SKUS_PATH, "drop", after=10, times=3)
    with pytest.raises(ProviderUnreachableError, match="dropped"):
        fetcher(tmp_path, api).fetch_region("us-central1", no_progress)


def test_malformed_and_misshapen_pages_are_clear_errors(tmp_path: Path, api: ApiServer) -> None:
    api.fault(p.SKUS_PATH, "garbage")
    with pytest.raises(ShoalError, match="malformed JSON"):
        fetcher(tmp_path, api).fetch_region("us-central1", no_progress)
    api.route(p.SKUS_PATH, lambda q, h: Reply.json({"skus": {"not": "a list"}}))
    with pytest.raises(
        ShoalError, match="malformed Cloud Billing SKU list payload: skus: expected a list"
    ):
        fetcher(tmp_path, api).fetch_region("us-central1", no_progress)


def test_a_non_usd_price_names_the_currency(tmp_path: Path, api: ApiServer) -> None:
    p.serve(api, items=[p.core("N2 Instance Core running in Americas", 0.03, currency="EUR")])
    with pytest.raises(ShoalError, match="EUR"):
        fetcher(tmp_path, api).fetch_region("us-central1", no_progress)


def test_paging_is_bounded(tmp_path: Path, api: ApiServer) -> None:
    api.route(p.SKUS_PATH, lambda q, h: Reply.json({"skus": [], "nextPageToken": "again"}))
    with pytest.raises(ShoalError, match="page token repeats"):
        fetcher(tmp_path, api).fetch_region("us-central1", no_progress)
    counter = iter(range(10_000))
    api.route(
        p.SKUS_PATH, lambda q, h: Reply.json({"skus": [], "nextPageToken": str(next(counter))})
    )
    gcp = fetcher(tmp_path, api)
    gcp.max_pages = 3
    with pytest.raises(ShoalError, match="more than 3 pages"):
        gcp.fetch_region("us-central1", no_progress)


def test_an_unknown_region_is_refused_by_the_catalog_with_close_names(
    tmp_path: Path, api: ApiServer
) -> None:
    # The catalog decides the region (CloudCatalog.regions_for); the fetcher is handed only
    # what it decided, and one its list no longer has is a failed fetch, not an empty one.
    from providers.gcp.factory import catalog as gcp_catalog
    from providers.models import RegionSpec

    made = gcp_catalog(fetcher_settings(tmp_path, api))
    with pytest.raises(UsageError, match="did you mean us-central1"):
        made.list_instance_types(RegionSpec(name="us-centrall1"))
    with pytest.raises(ShoalError, match="us-centrall1 is not among the regions") as raised:
        fetcher(tmp_path, api).fetch_region("us-centrall1", no_progress)
    assert not isinstance(raised.value, UsageError)


def test_base_url_from_the_config_file(tmp_path: Path, api: ApiServer) -> None:
    config = {"gcp": {"billing_url": api.base, "compute_url": api.base}}
    gcp = fetcher(tmp_path, api, config, env={ENV_GCP_BILLING_URL: "", ENV_GCP_COMPUTE_URL: ""})
    assert gcp.billing_url == api.base
    assert "n2-standard-4" in gcp.fetch_region("us-central1", no_progress).offers


def test_with_a_token_shapes_and_regions_come_from_the_compute_api(
    tmp_path: Path, api: ApiServer
) -> None:
    gcp = fetcher(tmp_path, api, env={ENV_GCP_TOKEN: p.TOKEN, ENV_GCP_PROJECT: p.PROJECT})
    regions = gcp.list_regions()
    assert [(r.name, r.zones) for r in regions] == [
        ("europe-west1", ["europe-west1-b"]),
        ("us-central1", ["us-central1-a", "us-central1-b", "us-central1-c"]),
    ]
    snap = gcp.fetch_region("us-central1", no_progress)
    belgium = gcp.fetch_region("europe-west1", no_progress)
    # The API knows no a3, e2 or n1 type and no H100/T4 machine here, though the SKUs price
    # them; n2 is known from us-central1, so Belgium's n2 rates are shaped.
    assert snap.notes == [
        f"{FAMILY_NOTE}: a3, e2, n1",
        f"{GPU_NOTE}: nvidia-h100-80gb, nvidia-tesla-t4",
    ]
    assert belgium.notes == []
    # The union over the zones, less c3 (no rates in the catalog).
    assert sorted(snap.offers) == ["a2-highgpu-1g", "g2-standard-8", "n2-standard-4"]
    assert snap.offers["n2-standard-4"].shape_source == (
        f"{api.base}/compute/v1/projects/{p.PROJECT}/aggregated/machineTypes"
    )
    assert snap.offers["a2-highgpu-1g"].on_demand == pytest.approx(3.673385)
    assert snap.offers["g2-standard-8"].on_demand == pytest.approx(
        8 * 0.024988 + 32 * 0.002927 + 0.560040
    )
    calls = api.requests_to(p.MACHINE_TYPES_PATH)
    assert len(calls) == 2  # two pages, once for both regions
    assert calls[1].query["pageToken"] == ["mt-2"]
    assert calls[0].headers["authorization"] == f"Bearer {p.TOKEN}"


def test_a_refused_token_names_the_variable(tmp_path: Path, api: ApiServer) -> None:
    gcp = fetcher(tmp_path, api, env={ENV_GCP_TOKEN: "ya29.expired", ENV_GCP_PROJECT: p.PROJECT})
    with pytest.raises(CredentialsError) as caught:
        gcp.list_regions()
    message = str(caught.value)
    assert ENV_GCP_TOKEN in message and "HTTP 401" in message
    assert "ya29.expired" not in message


def test_a_token_without_a_project_falls_back_to_built_in_shapes(
    tmp_path: Path, api: ApiServer
) -> None:
    snap = fetcher(tmp_path, api, env={ENV_GCP_TOKEN: p.TOKEN}).fetch_region(
        "us-central1", no_progress
    )
    assert snap.notes[0] == BUILTIN_NOTE and "a3-highgpu-8g" in snap.offers
    assert api.requests_to(p.MACHINE_TYPES_PATH) == []


def test_compute_api_payloads_of_the_wrong_shape_and_endless_pages(
    tmp_path: Path, api: ApiServer
) -> None:
    env = {ENV_GCP_TOKEN: p.TOKEN, ENV_GCP_PROJECT: p.PROJECT}
    api.route(p.REGIONS_PATH, p.compute_handler([{"items": {"us-central1": {}}}]))
    with pytest.raises(ShoalError, match="malformed regions payload: items: expected a list"):
        fetcher(tmp_path, api, env=env).list_regions()
    endless = {"items": {}, "nextPageToken": "mt-2"}
    api.route(p.MACHINE_TYPES_PATH, p.compute_handler([endless, endless]))
    gcp = fetcher(tmp_path, api, env=env)
    gcp.max_pages = 2
    with pytest.raises(ShoalError, match="more than 2 pages"):
        gcp.fetch_region("us-central1", no_progress)
    gcp.close()


def test_every_a3_high_size_the_skus_price_is_listed(tmp_path: Path, api: ApiServer) -> None:
    offers = fetcher(tmp_path, api).fetch_region("us-central1", no_progress).offers
    for gpus, vcpus, gib in ((1, 26, 234), (2, 52, 468), (4, 104, 936), (8, 208, 1872)):
        offer = offers[f"a3-highgpu-{gpus}g"]
        assert (offer.vcpus, offer.memory_gib, offer.gpu, offer.gpu_count) == (
            vcpus,
            gib,
            "H100",
            gpus,
        )
        assert offer.on_demand == pytest.approx(vcpus * p.A3_CORE + gib * p.A3_RAM + gpus * p.H100)


@pytest.mark.parametrize("env", [{}, TOKEN_ENV], ids=["built-in", "token"])
def test_every_priced_family_is_listed_or_named_as_unshaped(
    tmp_path: Path, api: ApiServer, env: dict[str, str]
) -> None:
    made_up = [
        p.core("ZZ9 Instance Core running in Americas", 0.05),
        p.ram("ZZ9 Instance Ram running in Americas", 0.006),
        p.core("Spot Preemptible ZZ8 Instance Core running in Americas", 0.01, usage="Preemptible"),
    ]
    items = p.catalog() + made_up
    p.serve(api, items=items)
    snap = fetcher(tmp_path, api, env=env).fetch_region("us-central1", no_progress)
    book = RateBook()
    book.add_page({"skus": items})
    priced = {f for (r, kind, f, _) in book.rates if r == "us-central1" and kind in (CORE, RAM)}
    listed = {name.split("-", 1)[0] for name in snap.offers}
    unshaped = [n.split(": ", 1)[1].split(", ") for n in snap.notes if n.startswith(FAMILY_NOTE)]
    named = set(unshaped[0]) if unshaped else set()
    assert {"zz8", "zz9"} <= named
    assert priced <= listed | named
    assert not named & listed
    if not env:
        assert not named & {shape.family for shape in builtin_shapes()}


def test_the_built_in_table_is_read_on_first_use_only(tmp_path: Path, api: ApiServer) -> None:
    builtin_table.cache_clear()
    gcp = fetcher(tmp_path, api)
    gcp.list_regions()
    assert builtin_table.cache_info().currsize == 0  # regions need no shapes
    gcp.fetch_region("us-central1", no_progress)
    gcp.fetch_region("europe-west1", no_progress)
    assert builtin_table.cache_info().misses == 1
