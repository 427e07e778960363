"""`shoal resources` tells the quota truth (issue 24, item 5), through the CLI against the
loopback AWS and Compute Engine APIs serving payloads written for these tests
(tests/providers/aws/test_spot_pools.py, tests/providers/gcp/quota_truth_payloads.py)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.providers.apiserver import ApiServer
from tests.providers.aws.quotaserver import AwsServer, Instance
from tests.providers.aws.test_accounts import CREDS, KEY_ID, SECRET, TOKEN
from tests.providers.aws.test_spot_pools import APPLIED, REGION
from tests.providers.gcp import quota_truth_payloads as t
from tests.providers.gcp.payloads import PROJECT, REGIONS_PATH
from tests.providers.gcp.payloads import TOKEN as GCP_TOKEN

Cli = Callable[..., Any]


def ok(run: Any) -> Any:
    assert run.exit_code == 0, run.stderr
    return run


def overview(resource: dict[str, Any], key: str, value: str) -> Any:
    (found,) = [i for i in resource["overview"] if (i["key"], i["value"]) == (key, value)]
    return found


def vcpus(item: dict[str, Any], market: str) -> tuple[str, ...]:
    stat = item["stat"][market]
    return tuple(stat[k]["cpu"]["vcpu"] for k in ("supply", "allocated", "allocatable"))


# -- aws -------------------------------------------------------------------------------------


@pytest.fixture
def aws() -> Iterator[AwsServer]:
    with AwsServer(CREDS, (REGION,)) as server:
        server.region(REGION).applied = [dict(q) for q in APPLIED]
        server.region(REGION).instances = [
            Instance("p5.48xlarge", f"{REGION}a", lifecycle="spot", cores=96, threads=2),
        ]
        yield server


def aws_env(server: AwsServer) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
        "SHOAL_AWS_EC2_URL": server.base + "/ec2/{region}",
        "SHOAL_AWS_QUOTAS_URL": server.base + "/sq/{region}",
    }


def test_each_spot_quota_code_is_a_line_of_its_own(cli: Cli, aws: AwsServer) -> None:
    run = ok(cli("resources", "-p", "aws", "-r", REGION, "--json", env=aws_env(aws)))
    (res,) = json.loads(run.stdout)
    assert vcpus(overview(res, "family", "P"), "spot") == ("64", "0", "64")
    assert vcpus(overview(res, "family", "P5"), "spot") == ("192", "192", "0")
    table = ok(cli("resources", "-p", "aws", "-r", REGION, env=aws_env(aws))).stdout
    p5 = [line.split() for line in table.splitlines() if "family=P5" in line]
    assert p5 and p5[0][-3:] == ["192", "192", "0"]
    selected = ("resources", "-p", "aws", "-r", REGION, "-s", "gpu=H100", "--json")
    (h100,) = json.loads(ok(cli(*selected, env=aws_env(aws))).stdout)
    assert {(i["key"], i["value"]) for i in h100["overview"]} >= {("family", "P5")}


# -- gcp -------------------------------------------------------------------------------------


@pytest.fixture
def gcp() -> Iterator[ApiServer]:
    with ApiServer() as server:
        t.api().serve(server)
        yield server


def gcp_env(server: ApiServer) -> dict[str, str]:
    return {
        "SHOAL_GCP_TOKEN": GCP_TOKEN,
        "SHOAL_GCP_PROJECT": PROJECT,
        "SHOAL_GCP_COMPUTE_URL": server.base,
    }


def test_the_h100_line_shows_what_gpus_all_regions_leaves(cli: Cli, gcp: ApiServer) -> None:
    wanted = ("resources", "-p", "gcp", "-r", "us-central1")
    (res,) = json.loads(ok(cli(*wanted, "--json", env=gcp_env(gcp))).stdout)
    gpu = overview(res, "family", "gpu")["stat"]["onDemand"]
    assert (gpu["supply"]["gpu"]["H100"], gpu["allocatable"]["gpu"]["H100"]) == ("8", "2")
    said = [n for n in res["notes"] if "binds before NVIDIA_H100_GPUS" in n]
    assert said and said[0].startswith("GPUS_ALL_REGIONS")
    run = ok(cli(*wanted, env=gcp_env(gcp)))
    assert "binds before NVIDIA_H100_GPUS" in run.stderr
    assert GCP_TOKEN not in run.stdout + run.stderr


def test_an_unknown_region_is_marked_and_asked_again(cli: Cli, gcp: ApiServer) -> None:
    env = gcp_env(gcp)
    east = ("resources", "-p", "gcp", "-r", "us-east5", "--json")
    (res,) = json.loads(ok(cli(*east, env=env)).stdout)
    assert (res["overview"][0]["key"], res["overview"][0]["value"]) == ("quotas", "unknown")
    assert not [i for i in res["overview"] if i["key"] == "family"]
    assert any("quotas unknown in us-east5" in n and "UNREACHABLE" in n for n in res["notes"])
    asked = len(gcp.requests_to(REGIONS_PATH))
    ok(cli(*east, env=env))
    assert len(gcp.requests_to(REGIONS_PATH)) > asked  # not served from the cache as known
    central = ("resources", "-p", "gcp", "-r", "us-central1", "--json")
    ok(cli(*central, env=env))
    asked = len(gcp.requests_to(REGIONS_PATH))
    ok(cli(*central, env=env))
    assert len(gcp.requests_to(REGIONS_PATH)) == asked  # a known region is
    # Offline, the cached answer is still unknown, never zero.
    (offline,) = json.loads(ok(cli(*east, "--offline", env=env)).stdout)
    assert offline["overview"][0]["value"] == "unknown"
    # A selection keeps it: unknown is not "nothing allocatable".
    every = ("resources", "-p", "gcp", "-r", "all", "-s", "gpu=H100", "--json")
    names = [r["region"]["name"] for r in json.loads(ok(cli(*every, env=env)).stdout)]
    assert "us-east5" in names and "us-central1" in names
