"""AzureAccounts and AzureQuotaMap against a loopback Resource Manager (account_payloads.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from providers.accounts.model import AccountSnapshot, Need, Quota
from providers.azure import quota_map, sizes
from providers.azure.accounts import AzureAccounts
from providers.azure.quota_map import AzureQuotaMap, family_of, gpus_of_family, series_key
from providers.cloud.http import RetryPolicy
from providers.core.errors import (
    CredentialsError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.settings import Paths, Settings
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.azure import account_payloads as a
from tests.providers.azure.payloads import LOCATIONS_PATH, SUBSCRIPTION, TOKEN

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=5.0)
ENV = {"SHOAL_AZURE_TOKEN": TOKEN, "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION}


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer() as running:
        yield running


@pytest.fixture
def api(server: ApiServer) -> ApiServer:
    server.reset()
    return server


def accounts(tmp_path: Path, api: ApiServer, env: dict[str, str] | None = None) -> AzureAccounts:
    settings = Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
        config={},
        env={"SHOAL_AZURE_MANAGEMENT_URL": api.base, **(ENV if env is None else env)},
    )
    return AzureAccounts.from_settings(settings, policy=FAST)


def serve(api: ApiServer, **changes: Any) -> a.SubscriptionApi:
    sub = a.standard(api.base)
    for key, value in changes.items():
        setattr(sub, key, value)
    sub.serve(api)
    return sub


def by_code(snapshot: AccountSnapshot) -> dict[str, Quota]:
    return {q.code: q for q in snapshot.quotas}


# -- credentials -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({}, "credentials and a subscription"),
        ({"SHOAL_AZURE_TOKEN": TOKEN}, "a subscription"),
        ({"AZURE_SUBSCRIPTION_ID": SUBSCRIPTION, "SHOAL_AZURE_TOKEN": "  "}, "credentials"),
    ],
)
def test_missing_credentials_name_the_variables_and_ask_nothing(
    tmp_path: Path, api: ApiServer, env: dict[str, str], named: str
) -> None:
    with pytest.raises(CredentialsError) as caught:
        accounts(tmp_path, api, env)
    message = str(caught.value)
    assert f"need {named}, and none w" in message
    assert "SHOAL_AZURE_TOKEN" in message  # to set, or where the credentials came from
    assert ("AZURE_SUBSCRIPTION_ID" in message) == ("subscription" in named)
    assert api.seen == []


def test_the_subscription_comes_from_the_config_file_too(tmp_path: Path, api: ApiServer) -> None:
    settings = Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
        config={"azure": {"subscription_id": "sub-from-config"}},
        env={"SHOAL_AZURE_TOKEN": TOKEN},
    )
    fetcher = AzureAccounts.from_settings(settings)
    assert (fetcher.provider, fetcher.account) == ("azure", "sub-from-config")
    assert fetcher.management_url == "https://management.azure.com"


# -- regions and quotas ------------------------------------------------------------------


def test_regions_are_the_physical_locations(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    assert accounts(tmp_path, api).regions() == ["eastus", "westus"]
    seen = api.requests_to(LOCATIONS_PATH)  # 4 locations, 3 a page
    assert [s.query.get("$skiptoken") for s in seen] == [None, ["3"]]
    assert all(s.query["api-version"] == ["2022-12-01"] for s in seen)
    assert all(s.headers["authorization"] == f"Bearer {TOKEN}" for s in seen)


def test_a_region_the_subscription_lacks_is_a_usage_error(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    fetcher = accounts(tmp_path, api)
    fetcher.regions()
    with pytest.raises(UsageError, match="did you mean eastus"):
        fetcher.fetch(["eastsu"])
    assert api.requests_to(a.usages_path("eastsu")) == []


def test_usages_become_quotas_page_by_page_for_each_region(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    fetcher = accounts(tmp_path, api)
    fetcher.regions()  # gives the snapshots their display names and zones
    east, west = fetcher.fetch(["eastus", "westus"])
    assert (east.provider, east.region, west.region) == ("azure", "eastus", "westus")
    assert east.fetched_at == west.fetched_at and east.fetched_at.tzinfo is not None
    assert (east.location, east.zones) == ("East US", ["1", "2", "3"])
    assert east.usage == [] and west.usage == []
    quotas = by_code(east)
    assert len(east.quotas) == len(a.eastus_usages())  # nothing dropped
    regional = quotas["cores"]
    assert (regional.name, regional.group, regional.market, regional.resource) == (
        "Total Regional vCPUs",
        "regional",
        "onDemand",
        ("cpu", "vcpu"),
    )
    assert (regional.limit, regional.used, regional.scope) == (350, 112, "region")
    spot = quotas["lowPriorityCores"]
    assert (spot.group, spot.market, spot.resource, spot.limit) == (
        "regional",
        "spot",
        ("cpu", "vcpu"),
        100,
    )
    h100 = quotas["StandardNCadsH100v5Family"]
    assert (h100.group, h100.market, h100.resource, h100.gpus) == (
        "StandardNCadsH100v5Family",
        "onDemand",
        ("cpu", "vcpu"),
        ("H100",),
    )
    assert quotas["Standard NCASv3_T4 Family"].gpus == ("T4",)
    assert quotas["standardNDSH100v5Family"].gpus == ("H100",)
    assert quotas["standardDSv5Family"].gpus == ()
    # Over its limit: kept as Azure says (the overview makes allocatable 0 of it).
    a100 = quotas["StandardNCADSA100v4Family"]
    assert (a100.limit, a100.used, a100.gpus) == (24, 48, ("A100",))
    # A family shoal has never heard of is still a family; other entries are kept as quotas.
    assert quotas["standardQZv9Family"].group == "standardQZv9Family"
    for code in (
        "availabilitySets",
        "virtualMachines",
        "virtualMachineScaleSets",
        "dedicatedCores",
    ):
        assert (quotas[code].group, quotas[code].resource) == ("other", ("quota", code))
    assert quotas["virtualMachines"].name == "Virtual Machines"
    # Page size 3: eastus' 12 usages are 4 pages, westus' 3 one; all GETs with the token.
    east_calls = api.requests_to(a.usages_path("eastus"))
    assert [c.query.get("$skiptoken") for c in east_calls] == [None, ["3"], ["6"], ["9"]]
    assert len(api.requests_to(a.usages_path("westus"))) == 1
    for call in api.seen:
        assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert all(c.query["api-version"] == ["2023-07-01"] for c in east_calls)
    assert east.sources[0].startswith(f"Azure Compute Usage API ({api.base}")
    assert SUBSCRIPTION not in " ".join(east.sources)


def test_capacity_reservations_of_the_regions_asked(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    east, west = accounts(tmp_path, api).fetch(["eastus", "westus"])
    found = {r.id: r for r in east.reservations}
    assert sorted(found) == [
        "crg-block/cr-h100-week",
        "crg-gpu/cr-a100",
        "crg-gpu/cr-d4",
        "crg-gpu/cr-new",
    ]
    a100 = found["crg-gpu/cr-a100"]
    assert (a100.kind, a100.instance_type, a100.total, a100.available) == (
        "capacity-reservation",
        "Standard_NC24ads_A100_v4",
        4,
        1,  # 3 VMs allocated of 4
    )
    assert a100.start == datetime(2021, 6, 27, 1, 2, 38, 313846, tzinfo=UTC)
    assert (a100.end, a100.zone, a100.state) == (None, "1", "Succeeded")
    assert (a100.vcpus, a100.gpu, a100.gpus) == (24, "A100", 1)
    assert (found["crg-gpu/cr-d4"].total, found["crg-gpu/cr-d4"].available) == (2, 2)
    assert found["crg-gpu/cr-d4"].zone == ""
    # Not in the group's instance view: its one associated VM counts as using it.
    assert (found["crg-gpu/cr-new"].total, found["crg-gpu/cr-new"].available) == (5, 4)
    assert any("crg-gpu/cr-new" in note and "associated" in note for note in east.notes)
    week = found["crg-block/cr-h100-week"]
    assert (week.kind, week.total, week.available, week.gpu, week.gpus) == (
        "capacity-block",
        2,
        2,
        "H100",
        8,
    )
    assert (week.start, week.end) == tuple(
        datetime(d.year, d.month, d.day, tzinfo=UTC) for d in a.WEEK
    )
    assert west.reservations == [] and west.notes == []  # eastus' notes stay there
    # The group list once for the subscription (4 groups: 2 pages); only the groups of the
    # regions asked are read.
    groups = api.requests_to(a.GROUPS_PATH)
    assert [c.query.get("$skiptoken") for c in groups] == [None, ["3"]]
    assert api.requests_to(a.group_path("crg-far")) == []
    (view,) = api.requests_to(a.group_path("crg-gpu"))
    assert (view.query["$expand"], view.query["api-version"]) == (["instanceView"], ["2025-04-01"])
    listed = api.requests_to(a.group_path("crg-gpu") + "/capacityReservations")
    assert [c.query.get("$skiptoken") for c in listed] == [None]


def test_reservation_lists_are_paged(tmp_path: Path, api: ApiServer) -> None:
    extra = [a.reservation(f"cr-{i}", "crg-gpu", "Standard_D4s_v5", 1) for i in range(7)]
    sub = a.standard(api.base)
    sub.reservations[a.group_path("crg-gpu")] = extra
    sub.groups = [a.group(f"crg-{i}", "westus") for i in range(4)] + [a.group("crg-gpu", "eastus")]
    sub.serve(api)
    for i in range(4):
        api.route(
            a.group_path(f"crg-{i}"), sub.single(a.group_path(f"crg-{i}"), {"properties": {}})
        )
        listed = a.group_path(f"crg-{i}") + "/capacityReservations"
        api.route(listed, sub.handler(listed, [], "2025-04-01"))
    (east,) = accounts(tmp_path, api).fetch(["eastus"])
    assert sorted(r.id for r in east.reservations) == [f"crg-gpu/cr-{i}" for i in range(7)]
    assert len(api.requests_to(a.GROUPS_PATH)) == 2  # 5 groups, 3 a page
    pages = api.requests_to(a.group_path("crg-gpu") + "/capacityReservations")
    assert [c.query.get("$skiptoken") for c in pages] == [None, ["3"], ["6"]]


# -- partial permissions -----------------------------------------------------------------


def test_a_refused_group_list_is_a_note_and_the_quotas_stay(tmp_path: Path, api: ApiServer) -> None:
    serve(api, refused={a.GROUPS_PATH})
    (east,) = accounts(tmp_path, api).fetch(["eastus"])
    assert east.reservations == []
    assert east.notes == [
        "reservations unknown: the capacity reservation groups list was refused; grant "
        "Microsoft.Compute/capacityReservationGroups/read"
    ]
    assert by_code(east)["cores"].limit == 350


def test_refused_reservation_reads_are_notes(tmp_path: Path, api: ApiServer) -> None:
    gpu, block = a.group_path("crg-gpu"), a.group_path("crg-block")
    serve(api, refused={gpu + "/capacityReservations", block})
    (east,) = accounts(tmp_path, api).fetch(["eastus"])
    assert [r.id for r in east.reservations] == ["crg-block/cr-h100-week"]
    assert any("crg-gpu unknown" in n and "capacityReservations/read" in n for n in east.notes), (
        east.notes
    )
    assert any("crg-block: its instance view was refused" in n for n in east.notes), east.notes
    assert all(TOKEN not in n for n in east.notes)


def test_refused_usages_are_credentials_errors_without_the_token(
    tmp_path: Path, api: ApiServer
) -> None:
    serve(api, refused={a.usages_path("eastus")})
    with pytest.raises(CredentialsError) as caught:
        accounts(tmp_path, api).fetch(["eastus", "westus"])
    message = str(caught.value)
    assert "HTTP 403" in message and "SHOAL_AZURE_TOKEN" in message
    assert "AZURE_SUBSCRIPTION_ID" in message
    assert TOKEN not in message and "\n" not in message


def test_a_rejected_token_is_a_credentials_error(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    env = {**ENV, "SHOAL_AZURE_TOKEN": "expired-token-abc"}
    with pytest.raises(CredentialsError) as caught:
        accounts(tmp_path, api, env).fetch(["eastus"])
    assert "HTTP 401" in str(caught.value) and "SHOAL_AZURE_TOKEN" in str(caught.value)
    assert "expired-token-abc" not in str(caught.value)


# -- throttling and failures -------------------------------------------------------------


def test_throttling_is_retried_with_backoff(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    path = a.usages_path("eastus")
    api.fault(path, "status", status=429, headers={"Retry-After": "0"})
    api.fault(path, "status", status=503)
    (east,) = accounts(tmp_path, api).fetch(["eastus"])
    assert by_code(east)["cores"].used == 112
    assert [c.query.get("$skiptoken") for c in api.requests_to(path)] == [
        None,
        None,
        None,
        ["3"],
        ["6"],
        ["9"],
    ]


def test_throttling_that_outlasts_the_retries_is_retryable(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.fault(a.usages_path("westus"), "status", status=429, times=3)
    with pytest.raises(RetryableError, match="HTTP 429"):
        accounts(tmp_path, api).fetch(["eastus", "westus"])


def test_a_failing_reservation_api_fails_the_fetch(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.fault(a.GROUPS_PATH, "status", status=503, times=3)
    with pytest.raises(ProviderUnreachableError, match="HTTP 503"):
        accounts(tmp_path, api).fetch(["eastus"])


def test_a_next_link_that_repeats_is_stopped(tmp_path: Path, api: ApiServer) -> None:
    path = a.usages_path("eastus")
    link = f"{api.base}{path}?api-version=2023-07-01&$skiptoken=1"
    api.route(path, lambda q, h: Reply.json({"value": [], "nextLink": link}))
    with pytest.raises(ShoalError, match="nextLink repeats"):
        accounts(tmp_path, api)._usages("eastus")


# -- malformed payloads ------------------------------------------------------------------


def _one_usage(**fields: Any) -> dict[str, Any]:
    return {**a.usage("cores", "Total Regional vCPUs", 1, 10), **fields}


MALFORMED: list[tuple[str, Any, str]] = [
    ("not an object", [1, 2], "payload: expected an object, got a list;"),
    ("no value list", {"value": {"cores": 1}}, "payload: value: expected a list, got an object;"),
    ("a usage is a string", {"value": ["cores"]}, "value[0]: expected an object, got string"),
    ("no name", {"value": [{"currentValue": 1, "limit": 2}]}, "value[0].name: required;"),
    ("no name value", {"value": [_one_usage(name={"value": ""})]}, "name.value: must not be"),
    ("a NaN string", {"value": [_one_usage(limit="NaN")]}, "limit: expected a number, got string"),
    (
        "a bool",
        {"value": [_one_usage(currentValue=True)]},
        "currentValue: expected a number, got b",
    ),
    ("a huge number", {"value": [_one_usage(limit=10**40)]}, "limit: must be <= 1000000000000000"),
    ("a null limit", {"value": [_one_usage(limit=None)]}, "limit: expected a number, got nothing"),
    ("a non-string nextLink", {"value": [], "nextLink": 7}, "nextLink: expected a string, got int"),
]


@pytest.mark.parametrize(("case", "payload", "said"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_usages_are_one_line_errors(
    tmp_path: Path, api: ApiServer, case: str, payload: Any, said: str
) -> None:
    serve(api)
    api.route(a.usages_path("eastus"), lambda q, h: Reply.json(payload))
    with pytest.raises(ShoalError) as caught:
        accounts(tmp_path, api).fetch(["eastus"])
    assert type(caught.value) is ShoalError
    message = str(caught.value)
    assert "/eastus/usages: malformed usages payload: " in message
    assert said in message and message.endswith("; nothing was cached from it")
    assert "\n" not in message


@pytest.mark.parametrize("literal", [b"NaN", b"Infinity", b"-Infinity", b"1e400"])
def test_non_finite_json_numbers_are_malformed(
    tmp_path: Path, api: ApiServer, literal: bytes
) -> None:
    serve(api)
    body = (
        b'{"value": [{"currentValue": 1, "limit": ' + literal + b', "name": {"value": "cores"}}]}'
    )
    api.route(
        a.usages_path("eastus"), lambda q, h: Reply(200, body, {"Content-Type": "application/json"})
    )
    with pytest.raises(ShoalError, match=r"value\[0\]\.limit: must be a finite number, got"):
        accounts(tmp_path, api).fetch(["eastus"])


def test_broken_json_is_a_one_line_error(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.fault(a.usages_path("eastus"), "garbage")
    with pytest.raises(ShoalError, match="malformed JSON") as caught:
        accounts(tmp_path, api).fetch(["eastus"])
    assert "\n" not in str(caught.value)


def test_a_payload_quoting_the_token_never_shows_it(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.route(
        a.usages_path("eastus"), lambda q, h: Reply.json({"value": [_one_usage(limit=TOKEN)]})
    )
    with pytest.raises(ShoalError) as caught:
        accounts(tmp_path, api).fetch(["eastus"])
    assert TOKEN not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize(
    ("item", "said"),
    [
        (
            a.reservation("cr-x", "crg-gpu", "Standard_D4s_v5", "lots"),
            "value[0].sku.capacity: expected a number, got string 'lots'",
        ),
        (
            {**a.reservation("cr-x", "crg-gpu", "Standard_D4s_v5", 1), "sku": None},
            "value[0].sku: expected an object, got nothing (null)",
        ),
        (
            a.reservation("cr-x", "crg-gpu", "Standard_D4s_v5", 1, schedule={"start": "soon"}),
            "value[0].properties.scheduleProfile.start: expected an ISO 8601 date or time "
            "(2025-06-27T09:00:00Z), got string 'soon'",
        ),
    ],
)
def test_malformed_reservations_are_one_line_errors(
    tmp_path: Path, api: ApiServer, item: dict[str, Any], said: str
) -> None:
    sub = a.standard(api.base)
    sub.reservations[a.group_path("crg-gpu")] = [item]
    sub.serve(api)
    with pytest.raises(ShoalError) as caught:
        accounts(tmp_path, api).fetch(["eastus"])
    assert said in str(caught.value) and "\n" not in str(caught.value)


def test_a_group_id_that_is_not_a_group_path_is_refused(tmp_path: Path, api: ApiServer) -> None:
    sub = a.standard(api.base)
    sub.groups = [{**a.group("crg-gpu", "eastus"), "id": "https://elsewhere.example/steal"}]
    sub.serve(api)
    with pytest.raises(ShoalError, match="group's id is"):
        accounts(tmp_path, api).fetch(["eastus"])


# -- the quota map -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "family"),
    [
        # Real pairs: Resource SKUs' `family` (see quota_families.json's source).
        ("Standard_D4s_v5", "standardDSv5Family"),
        ("Standard_D2_v5", "standardDv5Family"),
        ("Standard_D4as_v6", "standardDav6Family"),
        ("Standard_E16-4ds_v5", "standardEDSv5Family"),
        ("Standard_NC24ads_A100_v4", "StandardNCADSA100v4Family"),
        ("Standard_NC40ads_H100_v5", "StandardNCadsH100v5Family"),
        ("Standard_NC4as_T4_v3", "Standard NCASv3_T4 Family"),
        ("Standard_ND96asr_v4", "Standard NDASv4_A100 Family"),
        ("Standard_ND96amsr_A100_v4", "standard NDAMSv4_A100Family"),
        ("Standard_ND96isr_H100_v5", "standardNDSH100v5Family"),
        ("Standard_NV36ads_A10_v5", "StandardNVADSA10v5Family"),
        ("Standard_NC6s_v3", "standardNCSv3Family"),
        ("Standard_HB120rs_v2", "standardHBrsv2Family"),
        ("Standard_M64ms_v2", "standardMSMediumMemoryv2Family"),  # a series two families share
        ("Standard_M416ms_v2", "standardMSv2Family"),
        ("standard_b1ls", "standardBSFamily"),  # ARM names ignore case
    ],
)
def test_families_of_real_sizes(size: str, family: str) -> None:
    assert family_of(size) == (family, True)


def test_an_unknown_series_gets_the_conventional_name() -> None:
    assert series_key("Standard_X16ads_Z9_v9") == "xads_z9_v9"
    assert family_of("Standard_X16ads_Z9_v9") == ("standardXADSZ9v9Family", False)
    assert family_of("not a size") == ("", False)


def test_every_size_of_the_builtin_size_table_has_a_known_family() -> None:
    unknown = [name for name in sizes.table().rows if not family_of(name)[1]]
    assert unknown == ["standard_e64i_v3"]  # the isolated E64i_v3: no family on record


def test_family_gpus_come_from_the_size_table() -> None:
    assert gpus_of_family("standardNVSv3Family") == ("M60",)  # NVv3: no GPU in the name
    assert gpus_of_family("standardncsv3family") == ("V100",)
    assert gpus_of_family("Standard NCASv3_T4 Family") == ("T4",)
    assert gpus_of_family("standardDSv5Family") == ()


def test_the_family_table_is_well_formed() -> None:
    raw = json.loads(
        (Path(quota_map.__file__).parent / quota_map.DATA_FILE).read_text(encoding="utf-8")
    )
    assert raw["asOf"] and "Resource SKUs" in raw["source"]
    assert all(re.fullmatch(r"[a-z0-9_]+", key) for key in raw["series"])
    for family in [*raw["series"].values(), *raw["sizes"].values(), *raw["added"].values()]:
        assert quota_map.family_key(family).startswith("standard"), family
        assert quota_map.family_key(family).endswith("family"), family
    with pytest.raises(ShoalError, match="malformed"):
        quota_map.parse_table('{"asOf": "2026-01-01", "series": {"ds_v5": 3}}')


def test_needs_on_demand_and_spot() -> None:
    plain = AzureQuotaMap()
    assert plain.needs("Standard_NC24ads_A100_v4", 24, "A100", 1, "onDemand") == [
        Need("StandardNCADSA100v4Family", 24),
        Need("cores", 24),
    ]
    assert plain.needs("Standard_NC24ads_A100_v4", 24, "A100", 1, "spot") == [
        Need("lowPriorityCores", 24)
    ]
    assert plain.needs("Standard_D4s_v5", None, "", 0, "onDemand") == []
    assert plain.needs("no-such-size", 4, "", 0, "onDemand") == [Need("cores", 4)]
    # With a snapshot's codes, the snapshot's own spelling (Azure's case and spaces vary).
    spelled = AzureQuotaMap(["standardNCADSA100v4Family", "Cores", "LowPriorityCores"])
    assert spelled.needs("Standard_NC48ads_A100_v4", 48, "A100", 2, "onDemand") == [
        Need("standardNCADSA100v4Family", 48),
        Need("Cores", 48),
    ]
    assert spelled.needs("Standard_NC48ads_A100_v4", 48, "A100", 2, "spot") == [
        Need("LowPriorityCores", 48)
    ]
