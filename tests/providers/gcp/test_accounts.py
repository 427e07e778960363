"""GcpAccounts and GcpQuotaMap against a loopback Compute Engine API (account_payloads.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from providers.accounts.model import AccountSnapshot, Need, Quota
from providers.accounts.resource import to_resource
from providers.cloud.http import RetryPolicy
from providers.core.env import ENV_GCP_COMPUTE_URL, ENV_GCP_PROJECT, ENV_GCP_TOKEN
from providers.core.errors import CredentialsError, RetryableError, ShoalError, UsageError
from providers.core.settings import Paths, Settings
from providers.gcp.accounts import GcpAccounts
from providers.gcp.quota_map import GcpQuotaMap, classify, cpu_metric, gpu_metric
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.gcp import account_payloads as g
from tests.providers.gcp.payloads import MACHINE_TYPES_PATH, PROJECT, REGIONS_PATH, TOKEN

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=5.0)
ENV = {ENV_GCP_TOKEN: TOKEN, ENV_GCP_PROJECT: PROJECT}
ALL = [REGIONS_PATH, g.PROJECT_PATH, g.RESERVATIONS_PATH, g.FUTURE_PATH, MACHINE_TYPES_PATH]
NOW = datetime(2026, 9, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def server() -> Iterator[ApiServer]:
    with ApiServer() as running:
        yield running


@pytest.fixture
def api(server: ApiServer) -> ApiServer:
    server.reset()
    return server


def accounts(
    tmp_path: Path,
    api: ApiServer,
    env: dict[str, str] | None = None,
    config: dict[str, Any] | None = None,
) -> GcpAccounts:
    settings = Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}),
        config=config or {},
        env={ENV_GCP_COMPUTE_URL: api.base, **(ENV if env is None else env)},
    )
    return GcpAccounts.from_settings(settings, policy=FAST)


def serve(api: ApiServer, **changes: Any) -> g.ProjectApi:
    project = g.ProjectApi(**changes)
    project.serve(api)
    return project


def by_code(snapshot: AccountSnapshot) -> dict[str, Quota]:
    return {q.code: q for q in snapshot.quotas}


# -- credentials -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({}, "credentials and a project"),
        ({ENV_GCP_TOKEN: TOKEN}, "a project"),
        ({ENV_GCP_PROJECT: PROJECT}, "credentials"),
    ],
)
def test_missing_credentials_name_the_variables_and_ask_nothing(
    tmp_path: Path, api: ApiServer, env: dict[str, str], named: str
) -> None:
    with pytest.raises(CredentialsError, match=f"need {named}, and none w") as caught:
        accounts(tmp_path, api, env)
    said = str(caught.value)
    assert (ENV_GCP_TOKEN in said and "GOOGLE_APPLICATION_CREDENTIALS" in said) == (
        "credentials" in named
    )
    assert (ENV_GCP_PROJECT in said) == ("project" in named)
    assert api.seen == []


def test_the_project_comes_from_the_config_file_too(tmp_path: Path, api: ApiServer) -> None:
    fetcher = accounts(tmp_path, api, {ENV_GCP_TOKEN: TOKEN}, {"gcp": {"project": "cfg-proj"}})
    assert (fetcher.provider, fetcher.account) == ("gcp", "cfg-proj")


# -- regions and quotas ------------------------------------------------------------------


def test_one_region_list_answers_regions_and_every_region_quotas(
    tmp_path: Path, api: ApiServer
) -> None:
    serve(api)
    fetcher = accounts(tmp_path, api)
    assert fetcher.regions() == ["europe-west4", "us-central1", "us-east1"]
    central, west = fetcher.fetch(["us-central1", "europe-west4"])
    # regions.list: two pages, asked once for regions() and fetch(); nothing per region.
    listed = api.requests_to(REGIONS_PATH)
    assert [c.query.get("pageToken") for c in listed] == [None, ["page-1"]]
    assert {c.path for c in api.seen} == set(ALL)
    assert len(api.requests_to(g.PROJECT_PATH)) == 1
    for call in api.seen:
        assert call.headers["authorization"] == f"Bearer {TOKEN}"
    assert (central.provider, central.region, central.zones) == (
        "gcp",
        "us-central1",
        ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"],
    )
    assert central.fetched_at == west.fetched_at and central.usage == []
    quotas = by_code(central)
    assert len(central.quotas) == 14 + 4  # the region's and the project's: nothing dropped
    cpus = quotas["CPUS"]
    assert (cpus.group, cpus.market, cpus.resource, cpus.limit, cpus.used, cpus.scope) == (
        "regional",
        "onDemand",
        ("cpu", "vcpu"),
        24,
        8,
        "region",
    )
    assert (quotas["N2_CPUS"].group, quotas["N2_CPUS"].resource) == ("N2", ("cpu", "vcpu"))
    assert quotas["A3_CPUS"].group == "A3"
    assert (quotas["PREEMPTIBLE_CPUS"].market, quotas["PREEMPTIBLE_CPUS"].group) == (
        "spot",
        "regional",
    )
    h100 = quotas["NVIDIA_H100_GPUS"]
    assert (h100.group, h100.market, h100.resource, h100.gpus) == (
        "gpu",
        "onDemand",
        ("gpu", "H100"),
        ("H100",),
    )
    assert quotas["PREEMPTIBLE_NVIDIA_H100_GPUS"].market == "spot"
    assert quotas["NVIDIA_H100_MEGA_GPUS"].resource == ("gpu", "H100-MEGA")
    assert quotas["NVIDIA_A100_80GB_GPUS"].resource == ("gpu", "A100-80GB")
    for code in ("DISKS_TOTAL_GB", "NVIDIA_T4_VWS_GPUS", "COMMITTED_NVIDIA_A100_GPUS"):
        assert (quotas[code].group, quotas[code].resource) == ("other", ("quota", code))
    assert quotas["SOME_FUTURE_THING"].resource == ("quota", "SOME_FUTURE_THING")
    assert (quotas["INSTANCES"].limit, quotas["INSTANCES"].used) == (10, 14)  # kept as is
    project_cpus = quotas["CPUS_ALL_REGIONS"]
    assert (project_cpus.scope, project_cpus.group, project_cpus.limit, project_cpus.used) == (
        "global",
        "project",
        64,
        12,
    )
    assert quotas["GPUS_ALL_REGIONS"].scope == "global"
    assert by_code(west)["GPUS_ALL_REGIONS"].limit == 8  # every region sees the project's
    assert central.sources and all(api.base in s for s in central.sources)


def test_a_second_fetch_reads_the_quotas_again(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    fetcher = accounts(tmp_path, api)
    fetcher.fetch(["us-central1"])
    (again,) = fetcher.fetch(["us-central1"])
    assert fetcher.regions() == ["europe-west4", "us-central1", "us-east1"]
    assert len(api.requests_to(REGIONS_PATH)) == 4  # two fetches, two pages each
    assert len(api.requests_to(g.PROJECT_PATH)) == 2
    assert by_code(again)["CPUS"].used == 8


def test_the_binding_project_limits_cap_allocatable_and_are_noted(
    tmp_path: Path, api: ApiServer
) -> None:
    serve(api)
    central, west = accounts(tmp_path, api).fetch(["us-central1", "europe-west4"])
    res = to_resource(central, now=NOW)
    binding = [n for n in res.notes if "binds before" in n]
    assert binding == [
        "CPUS_ALL_REGIONS (account-wide: 64, 12 used) binds before A3_CPUS in us-central1 "
        "(416, 0 used): cpu/vcpu on demand allocatable 52, not 416",
        "GPUS_ALL_REGIONS (account-wide: 8, 2 used) binds before NVIDIA_H100_GPUS in "
        "us-central1 (16, 0 used): gpu/H100 on demand allocatable 6, not 16",
        "GPUS_ALL_REGIONS (account-wide: 8, 2 used) binds before PREEMPTIBLE_NVIDIA_H100_GPUS "
        "in us-central1 (16, 0 used): gpu/H100 spot allocatable 6, not 16",
        "GPUS_ALL_REGIONS (account-wide: 8, 2 used) binds before NVIDIA_H100_MEGA_GPUS in "
        "us-central1 (8, 0 used): gpu/H100-MEGA on demand allocatable 6, not 8",
    ]
    (gpu,) = [i for i in res.overview if (i.key, i.value) == ("family", "gpu")]
    assert gpu.stat.on_demand is not None
    assert gpu.stat.on_demand.allocatable["gpu"]["H100"] == "6"
    assert gpu.stat.on_demand.supply["gpu"]["H100"] == "16"
    assert [n for n in to_resource(west, now=NOW).notes if "binds before" in n] == [
        "GPUS_ALL_REGIONS (account-wide: 8, 2 used) binds before NVIDIA_L4_GPUS in "
        "europe-west4 (8, 0 used): gpu/L4 on demand allocatable 6, not 8"
    ]


def test_an_unknown_region_is_a_usage_error(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    with pytest.raises(UsageError, match="did you mean us-central1"):
        accounts(tmp_path, api).fetch(["us-centrl1"])


# -- reservations ------------------------------------------------------------------------


def test_reservations_and_future_reservations_by_region(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    central, west, east = accounts(tmp_path, api).fetch(["us-central1", "europe-west4", "us-east1"])
    found = {r.id: r for r in central.reservations}
    assert sorted(found) == ["fr-h200", "fr-mega", "res-h100", "res-t4"]
    h100 = found["res-h100"]
    assert (h100.kind, h100.instance_type, h100.total, h100.available, h100.zone) == (
        "reservation",
        "a3-highgpu-8g",
        4,
        3,
        "us-central1-a",
    )
    assert (h100.start, h100.end, h100.state) == (
        None,
        datetime(2026, 12, 1, tzinfo=UTC),
        "READY",
    )
    assert (h100.vcpus, h100.gpu, h100.gpus) == (208, "H100", 8)  # from the built-in table
    t4 = found["res-t4"]
    assert (t4.total, t4.available, t4.gpu, t4.gpus, t4.end) == (2, 0, "T4", 1, None)
    h200 = found["fr-h200"]
    assert (h200.kind, h200.instance_type, h200.total, h200.available, h200.state) == (
        "future-reservation",
        "a3-ultragpu-8g",
        2,
        2,
        "APPROVED",
    )
    assert (h200.start, h200.end) == (
        datetime(2026, 10, 1, tzinfo=UTC),
        datetime(2026, 10, 15, tzinfo=UTC),
    )
    assert (h200.gpu, h200.gpus) == ("H200", 8)
    mega = found["fr-mega"]  # 1 of 4 delivered (as a reservation); a window by duration
    assert (mega.total, mega.available, mega.end) == (3, 3, datetime(2026, 10, 8, tzinfo=UTC))
    assert "future reservations not approved yet, not counted: fr-asked (PENDING_APPROVAL)" in (
        central.notes
    )
    assert [r.id for r in west.reservations] == ["res-l4"]
    assert not any("not approved" in n for n in west.notes)  # us-central1's own
    assert (west.reservations[0].gpu, west.reservations[0].gpus) == ("L4", 1)
    assert east.reservations == []
    for path in (g.RESERVATIONS_PATH, g.FUTURE_PATH):
        assert len(api.requests_to(path)) == len(
            g.reservation_pages() if path == g.RESERVATIONS_PATH else g.future_pages()
        )
    assert [c.query.get("pageToken") for c in api.requests_to(g.RESERVATIONS_PATH)] == [
        None,
        ["page-1"],
    ]


def test_unreachable_zones_are_noted(tmp_path: Path, api: ApiServer) -> None:
    pages = g.reservation_pages()
    pages[-1]["unreachables"] = ["zones/us-central1-c"]
    serve(api, reservations=pages)
    (central,) = accounts(tmp_path, api).fetch(["us-central1"])
    assert "zones that did not answer (their reservations are missing): us-central1-c" in (
        central.notes
    )


# -- partial permissions and failures ----------------------------------------------------


def test_refused_reservation_lists_are_notes(tmp_path: Path, api: ApiServer) -> None:
    serve(api, refused={g.RESERVATIONS_PATH, g.FUTURE_PATH})
    (central,) = accounts(tmp_path, api).fetch(["us-central1"])
    assert central.reservations == []
    assert central.notes[:2] == [
        "reservations unknown: the reservations list was refused; grant compute.reservations.list",
        "future reservations unknown: the future reservations list was refused; grant "
        "compute.futureReservations.list",
    ]
    assert by_code(central)["CPUS"].limit == 24


@pytest.mark.parametrize("path", [REGIONS_PATH, g.PROJECT_PATH])
def test_refused_quotas_are_credentials_errors_without_the_token(
    tmp_path: Path, api: ApiServer, path: str
) -> None:
    serve(api, refused={path})
    with pytest.raises(CredentialsError) as caught:
        accounts(tmp_path, api).fetch(["us-central1"])
    message = str(caught.value)
    assert "HTTP 403" in message and ENV_GCP_TOKEN in message and ENV_GCP_PROJECT in message
    assert TOKEN not in message and "\n" not in message


def test_a_rejected_token_is_a_credentials_error(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    with pytest.raises(CredentialsError, match="HTTP 401") as caught:
        accounts(tmp_path, api, {**ENV, ENV_GCP_TOKEN: "ya29.stale-token"}).regions()
    assert "ya29.stale-token" not in str(caught.value)


def test_throttling_is_retried(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.fault(REGIONS_PATH, "status", status=429, headers={"Retry-After": "0"})
    api.fault(g.FUTURE_PATH, "status", status=503)
    (central,) = accounts(tmp_path, api).fetch(["us-central1"])
    assert by_code(central)["CPUS"].used == 8
    assert [c.query.get("pageToken") for c in api.requests_to(REGIONS_PATH)] == [
        None,
        None,
        ["page-1"],
    ]
    assert len(api.requests_to(g.FUTURE_PATH)) == 2


def test_throttling_that_outlasts_the_retries_is_retryable(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.fault(g.PROJECT_PATH, "status", status=429, times=3)
    with pytest.raises(RetryableError, match="HTTP 429"):
        accounts(tmp_path, api).fetch(["us-central1"])


def test_a_page_token_that_repeats_is_stopped(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    loop = {"items": [], "nextPageToken": "again"}
    api.route(REGIONS_PATH, lambda q, h: Reply.json(loop))
    with pytest.raises(ShoalError, match="page token repeats"):
        accounts(tmp_path, api).regions()


# -- malformed payloads ------------------------------------------------------------------


def _region_with(*quotas: dict[str, Any]) -> dict[str, Any]:
    return {"items": [g.region("us-central1", ["a"], list(quotas))]}


MALFORMED: list[tuple[str, str, Any, str]] = [
    ("not an object", REGIONS_PATH, [1], "payload: expected an object, got a list;"),
    ("no items", REGIONS_PATH, {"items": "many"}, "items: expected a list, got string 'many'"),
    (
        "a NaN string",
        REGIONS_PATH,
        _region_with(g.quota("CPUS", "NaN")),
        "items[0].quotas[0].limit: expected a number, got string 'NaN'",
    ),
    ("a bool", REGIONS_PATH, _region_with(g.quota("CPUS", 1, True)), "usage: expected a number"),
    ("a huge number", REGIONS_PATH, _region_with(g.quota("CPUS", 1e300)), "limit: must be <="),
    ("no metric", REGIONS_PATH, _region_with({"limit": 1}), "quotas[0].metric: required"),
    (
        "quotas not a list",
        REGIONS_PATH,
        {"items": [{"name": "x", "quotas": {}}]},
        "items[0].quotas: expected a list, got an object",
    ),
    ("project quota", g.PROJECT_PATH, {"quotas": [g.quota("GPUS_ALL_REGIONS", "8x")]}, "'8x'"),
    (
        "a count",
        g.RESERVATIONS_PATH,
        g.aggregated(
            "reservation",
            "reservations",
            {"us-central1-a": [g.reservation("r", "us-central1-a", "n2-standard-2", "∞", "0")]},
        ),
        'items."zones/us-central1-a".reservations[0].specificReservation.count: expected a '
        "number, got string '∞'",
    ),
    (
        "a time",
        g.FUTURE_PATH,
        g.aggregated(
            "futureReservation",
            "futureReservations",
            {
                "us-central1-a": [
                    g.future(
                        "f", "us-central1-a", "n2-standard-2", "1", "APPROVED", start="next week"
                    )
                ]
            },
        ),
        "futureReservations[0].timeWindow.startTime: expected an RFC 3339 time "
        "(2026-10-01T00:00:00Z), got string 'next week'",
    ),
    ("items not a map", g.RESERVATIONS_PATH, {"items": ["zones/a"]}, "items: expected an object"),
    (
        "a page token",
        g.FUTURE_PATH,
        {"items": {}, "nextPageToken": 5},
        "nextPageToken: expected a string, got integer 5",
    ),
    (
        "unreachables",
        g.FUTURE_PATH,
        {"items": {}, "unreachables": [{}]},
        "unreachables[0]: expected a string, got an object",
    ),
]


@pytest.mark.parametrize(
    ("case", "path", "payload", "said"), MALFORMED, ids=[m[0] for m in MALFORMED]
)
def test_malformed_payloads_are_one_line_errors(
    tmp_path: Path, api: ApiServer, case: str, path: str, payload: Any, said: str
) -> None:
    serve(api)
    api.route(path, lambda q, h: Reply.json(payload))
    with pytest.raises(ShoalError) as caught:
        accounts(tmp_path, api).fetch(["us-central1"])
    assert type(caught.value) is ShoalError
    message = str(caught.value)
    assert re.search(r"^gcp: http://\S+: malformed [a-z ]+ payload: ", message), message
    assert said in message and message.endswith("; nothing was cached from it")
    assert "\n" not in message


def test_a_payload_quoting_the_token_never_shows_it(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.route(REGIONS_PATH, lambda q, h: Reply.json(_region_with(g.quota("CPUS", TOKEN))))
    with pytest.raises(ShoalError) as caught:
        accounts(tmp_path, api).fetch(["us-central1"])
    assert TOKEN not in str(caught.value) and "***" in str(caught.value)


def test_broken_json_is_a_one_line_error(tmp_path: Path, api: ApiServer) -> None:
    serve(api)
    api.fault(g.PROJECT_PATH, "garbage")
    with pytest.raises(ShoalError, match="malformed JSON") as caught:
        accounts(tmp_path, api).fetch(["us-central1"])
    assert "\n" not in str(caught.value)


# -- the quota map -----------------------------------------------------------------------


def test_metrics_are_classified() -> None:
    assert classify("C2D_CPUS").group == "C2D"
    assert classify("PREEMPTIBLE_NVIDIA_H100_MEGA_GPUS").market == "spot"
    assert classify("NVIDIA_RTX_PRO_6000_GPUS").resource == ("gpu", "RTX PRO 6000")
    assert classify("COMMITTED_N2_CPUS").resource == ("quota", "COMMITTED_N2_CPUS")
    assert classify("PREEMPTIBLE_LOCAL_SSD_GB").resource == ("quota", "PREEMPTIBLE_LOCAL_SSD_GB")


@pytest.mark.parametrize(
    ("machine_type", "metric"),
    [
        ("n2-standard-8", "N2_CPUS"),
        ("n2d-highmem-4", "N2D_CPUS"),
        ("a2-ultragpu-1g", "A2_CPUS"),
        ("n1-standard-4", "CPUS"),
        ("e2-medium", "CPUS"),
        ("custom-4-8192", "CPUS"),
        ("c4-standard-8", "CPUS"),  # no metric of its own in the enum
    ],
)
def test_cpu_metrics_by_series(machine_type: str, metric: str) -> None:
    assert cpu_metric(machine_type) == metric


def test_a_region_that_reports_a_series_metric_decides() -> None:
    assert cpu_metric("c4-standard-8", ["CPUS", "C4_CPUS"]) == "C4_CPUS"
    assert cpu_metric("n2-standard-8", ["CPUS"]) == "CPUS"
    assert cpu_metric("e2-standard-8", ["CPUS", "E2_CPUS"]) == "CPUS"


@pytest.mark.parametrize(
    ("machine_type", "gpu", "metric"),
    [
        ("a3-highgpu-8g", "H100", "NVIDIA_H100_GPUS"),
        ("a3-megagpu-8g", "H100", "NVIDIA_H100_MEGA_GPUS"),
        ("a3-ultragpu-8g", "H200", "NVIDIA_H200_GPUS"),
        ("a2-highgpu-2g", "A100", "NVIDIA_A100_GPUS"),
        ("a2-ultragpu-8g", "A100", "NVIDIA_A100_80GB_GPUS"),
        ("a2-ultragpu-16g", "A100", "NVIDIA_A100_80GB_GPUS"),  # not in the table: its series
        ("g2-standard-4", "L4", "NVIDIA_L4_GPUS"),
        ("a4-highgpu-8g", "B200", "NVIDIA_B200_GPUS"),
        ("n1-standard-8", "T4", "NVIDIA_T4_GPUS"),
        ("zz-unknown-1", "", ""),
    ],
)
def test_gpu_metrics(machine_type: str, gpu: str, metric: str) -> None:
    assert gpu_metric(machine_type, gpu) == metric


def test_needs_by_the_documented_rules() -> None:
    rules = GcpQuotaMap()
    assert rules.needs("a3-megagpu-8g", 208, "H100", 8, "onDemand") == [
        Need("CPUS", 208),
        Need("CPUS_ALL_REGIONS", 208),
        Need("NVIDIA_H100_MEGA_GPUS", 8),
        Need("GPUS_ALL_REGIONS", 8),
    ]
    assert rules.needs("a2-highgpu-1g", 12, "A100", 1, "spot") == [
        Need("PREEMPTIBLE_CPUS", 12),
        Need("CPUS_ALL_REGIONS", 12),
        Need("PREEMPTIBLE_NVIDIA_A100_GPUS", 1),
        Need("GPUS_ALL_REGIONS", 1),
    ]
    assert rules.needs("n2-standard-2", None, "", 0, "onDemand") == []


def test_needs_follow_a_region_s_quotas() -> None:
    central = g.us_central1()
    quotas = [
        Quota(q["metric"], q["metric"], "", "onDemand", ("quota", q["metric"]), q["limit"], 0)
        for q in central["quotas"]
    ]
    region = GcpQuotaMap(quotas)
    # A3_CPUS is reported: it counts there. PREEMPTIBLE_CPUS is 0: spot takes on-demand CPUs;
    # PREEMPTIBLE_NVIDIA_H100_GPUS is 16: spot GPUs take it.
    assert region.needs("a3-highgpu-8g", 208, "H100", 8, "spot") == [
        Need("A3_CPUS", 208),
        Need("CPUS_ALL_REGIONS", 208),
        Need("PREEMPTIBLE_NVIDIA_H100_GPUS", 8),
        Need("GPUS_ALL_REGIONS", 8),
    ]
    assert region.needs("g2-standard-4", 4, "L4", 1, "spot") == [
        Need("CPUS", 4),
        Need("CPUS_ALL_REGIONS", 4),
        Need("NVIDIA_L4_GPUS", 1),  # no preemptible L4 quota in the region
        Need("GPUS_ALL_REGIONS", 1),
    ]


# -- zones per machine type ---------------------------------------------------------------------


def test_the_zones_of_each_gpu_machine_type_come_with_the_region(
    tmp_path: Path, api: ApiServer
) -> None:
    project = serve(api, machine_types=g.gpu_machine_type_pages())
    fetcher = accounts(tmp_path, api)
    central, west, east = fetcher.fetch(["us-central1", "europe-west4", "us-east1"])
    # One list for every region, filtered to the GPU series; both pages read.
    assert project.filters == ['name eq "(a2|a3|a4|g2|g4)-.*"'] * 2
    assert central.type_zones == {
        "a3-highgpu-8g": ["us-central1-a", "us-central1-c"],
        "g2-standard-8": ["us-central1-b"],
    }
    assert west.type_zones == {"a3-highgpu-8g": ["europe-west4-b"]}
    # The list answers for the GPU series: a type of them not listed (g2 in europe-west4)
    # is offered in none of the region's zones...
    series = ["a2-*", "a3-*", "a4-*", "g2-*", "g4-*"]
    assert central.zones_cover == series and west.zones_cover == series
    # ... unless a zone of the region did not answer: then not listed is not known.
    assert east.type_zones == {} and east.zones_cover == []
    assert "zones that did not answer: us-east1-d" in east.zones_unknown
    # Other series' zones are not read: unknown, and said so.
    assert central.zones_unknown == (
        "gcp lists the zones of its GPU machine types only (a2, a3, a4, g2, g4)"
    )


def test_a_refused_machine_type_list_leaves_the_zones_unknown_and_the_rest_stands(
    tmp_path: Path, api: ApiServer
) -> None:
    serve(api, machine_types=g.gpu_machine_type_pages(), refused={MACHINE_TYPES_PATH})
    [central] = accounts(tmp_path, api).fetch(["us-central1"])
    assert central.type_zones is None
    assert central.zones_unknown == (
        "the machine types list was refused; grant compute.machineTypes.list"
    )
    assert central.quotas and central.reservations  # the capacity is all there
    assert TOKEN not in central.zones_unknown
