"""AwsFetcher against a loopback Price List host and EC2 Query API (payloads.py formats)."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from providers.aws.fetch import REGION_INDEX_PATH, SPOT_NEEDS_CREDENTIALS, AwsFetcher
from providers.aws.sigv4 import Credentials, sign_get
from providers.cloud.http import RetryPolicy
from providers.core.env import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_CONFIG_FILE,
    ENV_AWS_EC2_URL,
    ENV_AWS_PRICING_URL,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_AWS_SESSION_TOKEN,
    ENV_AWS_SHARED_CREDENTIALS_FILE,
)
from providers.core.errors import (
    CredentialsError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.settings import Paths, Settings
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.aws import payloads as p

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=5.0)
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
US = "us-east-1"


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer() as server:
        yield server


@functools.cache
def catalog(region: str = US, currency: str = "USD", terms_first: bool = False) -> bytes:
    products, on_demand, reserved = p.catalog_products(region, currency)
    return p.offer_file(products, on_demand, reserved, terms_first=terms_first)


def serve(api: ApiServer, offer: bytes | None = None, region: str = US) -> str:
    api.route(REGION_INDEX_PATH, lambda q, h: Reply.json(p.region_index()))
    path = p.OFFER_PATH.format(region=region)
    api.route(path, catalog(region) if offer is None else offer)
    return path


def fetcher_settings(
    tmp_path: Path, api: ApiServer, config: dict[str, Any] | None = None, **env: str
) -> Settings:
    environ = {ENV_AWS_PRICING_URL: api.base, ENV_AWS_EC2_URL: api.base + "/ec2/{region}"}
    # Never the machine's own ~/.aws: credentials come from what each test sets.
    environ[ENV_AWS_SHARED_CREDENTIALS_FILE] = str(tmp_path / "no-credentials")
    environ[ENV_AWS_CONFIG_FILE] = str(tmp_path / "no-config")
    environ.update(env)
    return Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}), config=config or {}, env=environ
    )


def fetcher(
    tmp_path: Path, api: ApiServer, config: dict[str, Any] | None = None, **env: str
) -> AwsFetcher:
    made = AwsFetcher.from_settings(fetcher_settings(tmp_path, api, config, **env), policy=FAST)
    made.now = lambda: NOW
    return made


def no_progress(done: int, total: int | None, what: str) -> None:
    pass


def test_regions_come_from_the_region_index(tmp_path: Path, api: ApiServer) -> None:
    index = p.region_index()
    index["regions"]["eu-west-1"]["location"] = "EU (Ireland)"
    index["regions"]["broken"] = "not an object"
    api.route(REGION_INDEX_PATH, lambda q, h: Reply.json(index))
    regions = fetcher(tmp_path, api).list_regions()
    assert [r.name for r in regions] == sorted(p.LOCATIONS)
    assert {r.name: r.location for r in regions}["eu-west-1"] == "EU (Ireland)"
    assert {r.name: r.location for r in regions}[US] == ""


def test_fetch_a_region(tmp_path: Path, api: ApiServer) -> None:
    path = serve(api)
    seen: list[tuple[int, int | None, str]] = []
    snap = fetcher(tmp_path, api).fetch_region(US, lambda d, t, w: seen.append((d, t, w)))
    assert snap.provider == "aws" and snap.region == US and snap.currency == "USD"
    assert snap.source == api.url(path) and snap.fetched_at == NOW
    assert snap.notes == [SPOT_NEEDS_CREDENTIALS]
    assert set(snap.offers) == {s.instance_type for s in p.SHAPES}
    p4d = snap.offers["p4d.24xlarge"]
    assert (p4d.on_demand, p4d.vcpus, p4d.memory_gib, p4d.gpu, p4d.gpu_count) == (
        32.7726,
        96.0,
        1152.0,
        "A100",
        8,
    )
    assert p4d.gpu_memory_gib == 40.0 and p4d.spot is None
    assert snap.offers["m7g.xlarge"].arch == "arm64"
    assert seen and seen[-1][2] == f"aws {US} offer file" and seen[-1][0] > 0


def test_config_table_and_a_mirror_with_absolute_version_urls(
    tmp_path: Path, api: ApiServer
) -> None:
    path = p.OFFER_PATH.format(region=US)
    index = p.region_index({US: "https://pricing.us-east-1.amazonaws.com" + path})
    api.route(REGION_INDEX_PATH, lambda q, h: Reply.json(index))
    api.route(path, catalog())
    settings = Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
        config={"aws": {"pricing_url": api.base + "/"}},
        env={},
    )
    snap = AwsFetcher.from_settings(settings, policy=FAST).fetch_region(US, no_progress)
    assert snap.source == api.url(path) and len(snap.offers) == len(p.SHAPES)


def test_an_unknown_region_is_refused_by_the_catalog_before_any_offer_file(
    tmp_path: Path, api: ApiServer
) -> None:
    # The catalog decides the region (CloudCatalog.regions_for), with close names suggested;
    # the fetcher is handed only what it decided.
    from providers.aws.factory import catalog as aws_catalog
    from providers.models import RegionSpec

    path = serve(api)
    made = aws_catalog(fetcher_settings(tmp_path, api))
    with pytest.raises(UsageError, match="did you mean us-east-1"):
        made.list_instance_types(RegionSpec(name="us-east-9"))
    assert api.requests_to(path) == []


def test_a_region_the_index_no_longer_has_is_a_failed_fetch(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    with pytest.raises(ShoalError, match="region index has no us-east-9") as raised:
        fetcher(tmp_path, api).fetch_region("us-east-9", no_progress)
    assert not isinstance(raised.value, UsageError)


def test_throttling_then_success(tmp_path: Path, api: ApiServer) -> None:
    path = serve(api)
    api.fault(REGION_INDEX_PATH, "status", status=429, headers={"Retry-After": "0"})
    api.fault(path, "status", status=429)
    api.fault(path, "status", status=503)
    assert len(fetcher(tmp_path, api).fetch_region(US, no_progress).offers) == len(p.SHAPES)
    assert len(api.requests_to(path)) == 3


def test_throttled_past_the_retries(tmp_path: Path, api: ApiServer) -> None:
    path = serve(api)
    api.fault(path, "status", status=429, times=3)
    with pytest.raises(RetryableError, match="HTTP 429"):
        fetcher(tmp_path, api).fetch_region(US, no_progress)


def test_5xx_past_the_retries_is_unreachable(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.fault(REGION_INDEX_PATH, "status", status=503, times=3)
    with pytest.raises(ProviderUnreachableError, match="HTTP 503 after 3 attempts"):
        fetcher(tmp_path, api).list_regions()


def test_a_dropped_download_resumes(tmp_path: Path, api: ApiServer) -> None:
    path = serve(api)
    api.fault(path, "drop", after=1_500_000)
    snap = fetcher(tmp_path, api).fetch_region(US, no_progress)
    assert len(snap.offers) == len(p.SHAPES)
    assert api.requests_to(path)[1].headers["range"].startswith("bytes=")


BAD_FILES = {
    "truncated": (catalog(terms_first=True)[:-5000], "ends early"),
    "missing-comma": (catalog().replace(b'},\n    "', b'} @@\n    "', 1), "malformed JSON"),
    "not-ec2": (b'{"offerCode" : "AmazonS3", "products" : {}}', "offer file for 'AmazonS3'"),
    "no-products": (b'{"offerCode" : "AmazonEC2", "terms" : {}}', "no 'products'"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_offer_files_are_clear_errors(tmp_path: Path, api: ApiServer, case: str) -> None:
    body, message = BAD_FILES[case]
    path = serve(api)
    api.route(path, lambda q, h: Reply(200, body))  # no ranges: a plain short body
    with pytest.raises(ShoalError, match=message) as caught:
        fetcher(tmp_path, api).fetch_region(US, no_progress)
    assert path in str(caught.value)


def test_region_index_without_regions(tmp_path: Path, api: ApiServer) -> None:
    api.route(REGION_INDEX_PATH, lambda q, h: Reply.json({"offers": {}}))
    with pytest.raises(ShoalError, match="no 'regions'"):
        fetcher(tmp_path, api).list_regions()


def test_a_price_file_in_another_currency(tmp_path: Path, api: ApiServer) -> None:
    serve(api, catalog("cn-north-1", "CNY"), region="cn-north-1")
    with pytest.raises(ShoalError, match="CNY, not USD"):
        fetcher(tmp_path, api).fetch_region("cn-north-1", no_progress)


def test_the_download_stops_once_on_demand_is_read(tmp_path: Path, api: ApiServer) -> None:
    big = tmp_path / "offer.json"
    size = p.write_offer_file(big, 600)
    path = serve(api, big.read_bytes())
    seen: list[int] = []
    snap = fetcher(tmp_path, api).fetch_region(US, lambda d, t, w: seen.append(d))
    assert snap.offers and all(o.on_demand for o in snap.offers.values())
    assert seen[-1] < size * 0.7  # Reserved (the rest) was never downloaded
    assert len(api.requests_to(path)) == 1


# -- spot prices ---------------------------------------------------------------------------


def ec2_handler(api: ApiServer, pages: list[bytes], creds: Credentials) -> None:
    def handle(query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        params = {k: v[0] for k, v in query.items()}
        assert params["Action"] == "DescribeSpotPriceHistory"
        assert params["Version"] == "2016-11-15"
        assert params["ProductDescription.1"] == "Linux/UNIX"
        assert params["StartTime"] == "2025-01-02T03:04:05Z"
        # The server side of SigV4: the same canonical request gives the same signature.
        expected = sign_get(
            creds,
            host=headers["host"],
            path=f"/ec2/{US}",
            params=params,
            region=US,
            service="ec2",
            now=NOW,
        )
        if headers.get("authorization") != expected["Authorization"]:
            return Reply(
                401,
                b"<Response><Errors><Error><Code>AuthFailure</Code></Error></Errors></Response>",
            )
        page = int(params.get("NextToken", "0"))
        return Reply(200, pages[page], {"Content-Type": "text/xml"})

    api.route(f"/ec2/{US}", handle)


def test_spot_prices_with_credentials_lowest_across_zones(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    creds = Credentials("AKIDEXAMPLE", SECRET, "session-token")
    pages = [
        p.spot_page(
            [("m5.large", "us-east-1a", "0.0400"), ("m5.large", "us-east-1b", "0.0350")], "1"
        ),
        p.spot_page(
            [
                ("m5.large", "us-east-1c", "0.0380"),
                ("p4d.24xlarge", "us-east-1a", "9.8"),
                ("not-offered.large", "us-east-1a", "0.01"),
                ("g5.xlarge", "us-east-1a", "n/a"),
            ],
            extra="<newField>ignored</newField>",
        ),
    ]
    ec2_handler(api, pages, creds)
    env = {
        ENV_AWS_ACCESS_KEY_ID: "AKIDEXAMPLE",
        ENV_AWS_SECRET_ACCESS_KEY: SECRET,
        ENV_AWS_SESSION_TOKEN: "session-token",
    }
    snap = fetcher(tmp_path, api, **env).fetch_region(US, no_progress)
    assert snap.notes == []
    assert snap.offers["m5.large"].spot == 0.035
    assert snap.offers["p4d.24xlarge"].spot == 9.8
    assert snap.offers["g5.xlarge"].spot is None
    assert "not-offered.large" not in snap.offers
    seen = api.requests_to(f"/ec2/{US}")
    assert len(seen) == 2 and seen[1].query["NextToken"] == ["1"]
    assert seen[0].headers["x-amz-security-token"] == "session-token"


def test_refused_credentials_name_the_variables_and_hide_the_secret(
    tmp_path: Path, api: ApiServer
) -> None:
    serve(api)
    ec2_handler(api, [p.spot_page([])], Credentials("AKIDEXAMPLE", "the-right-secret"))
    env = {ENV_AWS_ACCESS_KEY_ID: "AKIDEXAMPLE", ENV_AWS_SECRET_ACCESS_KEY: SECRET}
    with pytest.raises(CredentialsError) as caught:
        fetcher(tmp_path, api, **env).fetch_region(US, no_progress)
    message = str(caught.value)
    assert "HTTP 401" in message
    assert ENV_AWS_ACCESS_KEY_ID in message and ENV_AWS_SECRET_ACCESS_KEY in message
    assert SECRET not in message


@pytest.mark.parametrize(
    "fault, note",
    [
        ("status", "spot prices unavailable: aws: http://127.0.0.1"),
        ("garbage", "spot prices unavailable: malformed DescribeSpotPriceHistory"),
    ],
)
def test_spot_failures_keep_the_on_demand_data(
    tmp_path: Path, api: ApiServer, fault: str, note: str
) -> None:
    serve(api)
    creds = Credentials("AKIDEXAMPLE", SECRET)
    ec2_handler(api, [p.spot_page([("m5.large", "us-east-1a", "0.04")])], creds)
    api.fault(f"/ec2/{US}", fault, status=503, times=3)
    env = {ENV_AWS_ACCESS_KEY_ID: "AKIDEXAMPLE", ENV_AWS_SECRET_ACCESS_KEY: SECRET}
    snap = fetcher(tmp_path, api, **env).fetch_region(US, no_progress)
    assert snap.notes[0].startswith(note)
    assert SECRET not in json.dumps(snap.notes)
    assert snap.offers["m5.large"].on_demand == 0.096 and snap.offers["m5.large"].spot is None


def test_a_wrong_xml_document_is_a_note(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.route(f"/ec2/{US}", lambda q, h: Reply(200, b"<Other/>"))
    env = {ENV_AWS_ACCESS_KEY_ID: "AKID", ENV_AWS_SECRET_ACCESS_KEY: SECRET}
    snap = fetcher(tmp_path, api, **env).fetch_region(US, no_progress)
    assert "unexpected DescribeSpotPriceHistory response <Other>" in snap.notes[0]


@pytest.mark.parametrize(
    "env, missing",
    [
        ({ENV_AWS_ACCESS_KEY_ID: "AKID"}, ENV_AWS_SECRET_ACCESS_KEY),
        ({ENV_AWS_SECRET_ACCESS_KEY: SECRET}, ENV_AWS_ACCESS_KEY_ID),
    ],
)
def test_half_the_credentials_is_a_note(
    tmp_path: Path, api: ApiServer, env: dict[str, str], missing: str
) -> None:
    serve(api)
    snap = fetcher(tmp_path, api, **env).fetch_region(US, no_progress)
    assert snap.notes == [f"spot prices need AWS credentials ({missing} is not set)"]
    assert not api.requests_to(f"/ec2/{US}")


def test_the_endpoint_template_is_filled_per_region(tmp_path: Path, api: ApiServer) -> None:
    made = fetcher(tmp_path, api)
    assert urlsplit(made.ec2_url.replace("{region}", US)).path == f"/ec2/{US}"
