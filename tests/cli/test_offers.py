"""`shoal offers` as users run it: the real AWS and GCP fetchers behind the CLI against
loopback clouds (AWS: the Price List files, EC2 XML and Service Quotas JSON with SigV4
checked; GCP: the Billing Catalog SKUs, machine types, regions.list with quotas, the
project), a loopback Kubernetes API server, and the local host with a fake nvidia-smi.
Every JSON answer is checked against cli/schemas/offers.schema.json."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_account_commands import env as aws_env
from tests.cli.test_json_schema import check
from tests.conftest import Run
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.aws import payloads
from tests.providers.aws.quotaserver import AwsServer, Capacity, Instance, quota
from tests.providers.aws.test_accounts import CREDS, EU, G_ON_DEMAND, P_ON_DEMAND, STANDARD, US
from tests.providers.gcp import account_payloads as g
from tests.providers.gcp import payloads as gcp_prices

Cli = Callable[..., Run]
P_NAME = "Running On-Demand P instances"


def ok(run: Run, code: int = 0) -> dict[str, Any]:
    assert run.exit_code == code, run.stderr
    answer: dict[str, Any] = json.loads(run.stdout)
    check(answer, "offers")
    return answer


def by_type(answer: dict[str, Any], provider: str = "aws") -> dict[tuple[str, str], Any]:
    return {
        (o["instanceType"], o["market"]): o for o in answer["offers"] if o["provider"] == provider
    }


def rejected(answer: dict[str, Any], instance_type: str) -> list[dict[str, Any]]:
    return [r for r in answer["rejected"] if r["instanceType"] == instance_type]


# -- aws ---------------------------------------------------------------------------------------


@pytest.fixture
def aws() -> Iterator[AwsServer]:
    """us-east-1: P on demand 384 vCPUs with one p5.48xlarge (192) running, G on demand 64
    vCPUs, Standard 640; the Price List's offer file (no spot prices: EC2 here has none)."""
    with AwsServer(CREDS, (US, EU)) as server:
        data = server.region(US)
        data.applied = [
            quota(
                STANDARD, 640.0, "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
            ),
            quota(P_ON_DEMAND, 384.0, P_NAME),
            quota(G_ON_DEMAND, 64.0, "Running On-Demand G and VT instances"),
        ]
        data.instances = [Instance("p5.48xlarge", "us-east-1a", cores=96, threads=2)]
        server.types = {"p5.48xlarge": (192, "H100", 8)}
        products, on_demand, reserved = payloads.catalog_products(US, "USD")
        offer = payloads.offer_file(products, on_demand, reserved)
        server.route(payloads.REGION_INDEX_PATH, lambda q, h: Reply.json(payloads.region_index()))
        server.route(payloads.OFFER_PATH.format(region=US), offer)
        yield server


def test_eight_gpus_as_eight_1_gpu_instances_or_one_8_gpu_instance(
    cli: Cli, aws: AwsServer
) -> None:
    run = cli("offers", "-p", "aws", "-r", US, "--gpus", "8", "--market", "on-demand", "--json",
              env=aws_env(aws))  # fmt: skip
    answer = ok(run)
    offers = by_type(answer)
    p5 = offers[("p5.48xlarge", "onDemand")]
    assert (p5["instances"], p5["pricePerHour"], p5["totalPerHour"]) == (1, 98.32, 98.32)
    assert p5["pricePerGpuHour"] == 12.29 and p5["shape"]["gpu"] == "H100"
    assert p5["shape"] == {
        "vcpus": 192, "memoryGiB": 2048, "gpu": "H100", "gpuCount": 8, "gpuMemoryGiB": 80,
        "arch": "x86_64",
    }  # fmt: skip
    # The family's vCPU quota, named with its numbers: 192 of 384 used, 192 per p5.
    assert p5["fitsNow"] == 1
    assert p5["binding"] == {
        "code": P_ON_DEMAND, "name": P_NAME, "limit": 384, "used": 192, "free": 192,
        "perInstance": 192, "scope": "region",
    }  # fmt: skip
    g5 = offers[("g5.xlarge", "onDemand")]
    assert (g5["instances"], g5["totalPerHour"]) == (8, round(8 * 1.006, 6))
    assert g5["fitsNow"] == 16 and g5["binding"]["code"] == G_ON_DEMAND  # 64 vCPUs / 4
    assert p5["driver"] == "aws" and p5["region"] == {"name": US, "aws": {"region": US}}
    # Ranked by total among those that fit: every total is at least the one before it.
    totals = [o["totalPerHour"] for o in answer["offers"]]
    assert totals == sorted(totals)
    assert answer["failures"] == [] and answer["request"]["gpus"] == 8


def test_a_quota_that_binds_part_way_is_named_with_its_numbers(cli: Cli, aws: AwsServer) -> None:
    run = cli("offers", "-p", "aws", "-r", US, "--gpus", "16", "--gpu", "H100", "--market",
              "on-demand", "--json", env=aws_env(aws))  # fmt: skip
    answer = ok(run)
    assert answer["offers"] == []
    (p5,) = rejected(answer, "p5.48xlarge")
    assert p5["code"] == "quota-binds"
    assert p5["reason"] == (
        f"quota binds at 1 of 2 ({P_ON_DEMAND} {P_NAME}: 192 free of 384, 192 each)"
    )
    aws.region(US).instances.append(Instance("p5.48xlarge", "us-east-1b", cores=96, threads=2))
    again = ok(cli("offers", "-p", "aws", "-r", US, "--gpus", "8", "--gpu", "H100", "--market",
                   "on-demand", "--refresh", "--json", env=aws_env(aws)))  # fmt: skip
    (p5,) = rejected(again, "p5.48xlarge")
    assert p5["code"] == "no-quota" and p5["reason"].startswith(f"no quota ({P_ON_DEMAND}")


def test_an_open_reservation_comes_first_and_lets_its_instances_launch(
    cli: Cli, aws: AwsServer
) -> None:
    data = aws.region(US)
    data.instances.append(Instance("p5.48xlarge", "us-east-1b", cores=96, threads=2))  # P full
    start = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    data.capacity = [
        Capacity("cr-0abc", "p5.48xlarge", total=2, available=1, start=start, zone="us-east-1b")
    ]
    run = cli("offers", "-p", "aws", "-r", US, "--gpus", "8", "--market", "on-demand", "--json",
              env=aws_env(aws))  # fmt: skip
    answer = ok(run)
    first = answer["offers"][0]
    # The dearest per hour, but held already: it adds nothing while the reservation lasts.
    assert first["instanceType"] == "p5.48xlarge" and first["totalPerHour"] == 98.32
    assert first["marginalPerHour"] == 0 and first["fitsNow"] == 1
    assert first["reservation"]["id"] == "cr-0abc" and first["reservation"]["available"] == 1
    assert first["zones"] == ["us-east-1b"]
    assert first["binding"]["free"] == 0  # the quota alone would not let it launch
    assert all(o["reservation"] is None for o in answer["offers"][1:])


def test_arch_and_max_price_leave_candidates_out_with_why(cli: Cli, aws: AwsServer) -> None:
    base = ("offers", "-p", "aws", "-r", US, "--gpus", "1", "--market", "on-demand")
    answer = ok(cli(*base, "--arch", "arm64", "--json", env=aws_env(aws)))
    assert [o["instanceType"] for o in answer["offers"]] == ["g5g.xlarge"]
    assert answer["offers"][0]["shape"]["arch"] == "arm64"
    (g5,) = rejected(answer, "g5.xlarge")
    assert (g5["code"], g5["reason"]) == ("arch", "arch x86_64, arm64 asked")
    priced = ok(cli(*base, "--max-price", "0.6", "--json", env=aws_env(aws)))
    assert {o["instanceType"] for o in priced["offers"]} == {"g4dn.xlarge", "g5g.xlarge"}
    (g6,) = rejected(priced, "g6.xlarge")
    assert g6["code"] == "over-max-price" and "--max-price 0.6" in g6["reason"]
    # The table says the same with --explain, and a script can take the names.
    table = cli(*base, "--max-price", "0.6", "--explain", env=aws_env(aws))
    assert table.exit_code == 0 and "over-max-price" in table.stdout
    names = cli(*base, "--max-price", "0.6", "-o", "name", env=aws_env(aws)).stdout.split()
    assert names == [f"aws/{US}/g5g.xlarge/onDemand", f"aws/{US}/g4dn.xlarge/onDemand"]


def test_without_credentials_the_quotas_are_unknown_and_said_so(cli: Cli, aws: AwsServer) -> None:
    no_keys = {k: v for k, v in aws_env(aws).items() if not k.startswith("AWS_")}
    answer = ok(cli("offers", "-p", "aws", "-r", US, "--gpus", "8", "--gpu", "H100", "--json",
                    env=no_keys))  # fmt: skip
    (p5,) = [o for o in answer["offers"] if o["market"] == "onDemand"]
    assert p5["fitsNow"] is None and p5["binding"] is None
    assert any("quotas unknown" in n and "AWS_ACCESS_KEY_ID" in n for n in p5["notes"])
    assert any("AWS_ACCESS_KEY_ID" in n for n in answer["notes"])
    # No spot price without credentials: the spot candidate is left out, saying so.
    (spot,) = [r for r in rejected(answer, "p5.48xlarge") if r["market"] == "spot"]
    assert spot["code"] == "not-offered"


# -- gcp ---------------------------------------------------------------------------------------


def _machine_types() -> list[dict[str, Any]]:
    mt = gcp_prices.machine_type
    zone = "us-central1-a"
    return [
        {
            "kind": "compute#machineTypeAggregatedList",
            "items": {
                f"zones/{zone}": {
                    "machineTypes": [
                        mt("a3-highgpu-8g", 208, 1872 * 1024, zone, "nvidia-h100-80gb", 8),
                        mt("g2-standard-8", 8, 32768, zone, "nvidia-l4", 1),
                        mt("n2-standard-4", 4, 16384, zone),
                    ]
                },
            },
        }
    ]


class Gcp:
    """Billing SKUs on one server; machine types and the project's regions, quotas and
    reservations on another (the Compute Engine API)."""

    def __init__(self, billing: ApiServer, compute: ApiServer, project: g.ProjectApi) -> None:
        self.billing, self.compute, self.project = billing, compute, project

    def serve(self) -> None:
        self.project.serve(self.compute)

    def env(self) -> dict[str, str]:
        return {
            "SHOAL_GCP_API_KEY": gcp_prices.API_KEY,
            "SHOAL_GCP_TOKEN": gcp_prices.TOKEN,
            "SHOAL_GCP_PROJECT": gcp_prices.PROJECT,
            "SHOAL_GCP_BILLING_URL": self.billing.base,
            "SHOAL_GCP_COMPUTE_URL": self.compute.base,
        }


def _quotas(region: dict[str, Any], h100: tuple[float, float]) -> dict[str, Any]:
    region["quotas"] = [
        g.quota("CPUS", 2400.0, 0.0),
        g.quota("A3_CPUS", 2400.0, 0.0),
        g.quota("G2_CPUS", 96.0, 0.0),
        g.quota("NVIDIA_H100_GPUS", *h100),
        g.quota("NVIDIA_L4_GPUS", 8.0, 0.0),
    ]
    return region


@pytest.fixture
def gcp() -> Iterator[Gcp]:
    with ApiServer() as billing, ApiServer() as compute:
        billing.route(gcp_prices.SKUS_PATH, gcp_prices.skus_handler([gcp_prices.catalog()]))
        compute.route(gcp_prices.MACHINE_TYPES_PATH, gcp_prices.compute_handler(_machine_types()))
        project = g.ProjectApi(regions=[_quotas(g.us_central1(), (16.0, 8.0)), g.us_east1()])
        project.project["quotas"] = [
            g.quota("CPUS_ALL_REGIONS", 4000.0, 0.0),
            g.quota("GPUS_ALL_REGIONS", 64.0, 8.0),
        ]
        made = Gcp(billing, compute, project)
        made.serve()
        yield made


def test_gcp_regional_gpu_quota_binds(cli: Cli, gcp: Gcp) -> None:
    # 16 H100s in us-central1, 8 used: one a3-highgpu-8g of the two 16 GPUs need.
    run = cli("offers", "-p", "gcp", "-r", "us-central1", "--gpus", "16", "--gpu", "H100",
              "--market", "on-demand", "--json", env=gcp.env())  # fmt: skip
    answer = ok(run)
    (a3,) = rejected(answer, "a3-highgpu-8g")
    assert a3["code"] == "quota-binds" and a3["reason"].startswith(
        "quota binds at 1 of 2 (NVIDIA_H100_GPUS: 8 free of 16, 8 each"
    )


def test_gcp_project_wide_gpu_quota_binds_before_the_regional_one(cli: Cli, gcp: Gcp) -> None:
    # The region has 8 H100s free, but the project only 2 GPUs in all: none launches.
    gcp.project.project["quotas"][1] = g.quota("GPUS_ALL_REGIONS", 8.0, 6.0)
    gcp.serve()
    run = cli("offers", "-p", "gcp", "-r", "us-central1", "--gpus", "8", "--gpu", "H100",
              "--market", "on-demand", "--json", env=gcp.env())  # fmt: skip
    answer = ok(run)
    (a3,) = rejected(answer, "a3-highgpu-8g")
    assert a3["code"] == "no-quota" and "GPUS_ALL_REGIONS" in a3["reason"]
    assert "2 free of 8, 8 each" in a3["reason"]
    # L4s fit: 8 x g2-standard-8 within both the region's L4s and the project's GPUs? No:
    # the project leaves 2 GPUs, so 2 of 8 instances.
    l4 = ok(cli("offers", "-p", "gcp", "-r", "us-central1", "--gpus", "8", "--gpu", "L4",
                "--market", "on-demand", "--json", env=gcp.env()))  # fmt: skip
    (g2,) = rejected(l4, "g2-standard-8")
    assert g2["code"] == "quota-binds" and "at 2 of 8 (GPUS_ALL_REGIONS" in g2["reason"]


def test_regions_of_two_providers_each_go_to_their_own(cli: Cli, aws: AwsServer, gcp: Gcp) -> None:
    env = {**aws_env(aws), **gcp.env()}
    run = cli("offers", "-p", "aws,gcp", "-r", US, "-r", "us-central1", "--gpus", "8",
              "--gpu", "H100", "--json", env=env)  # fmt: skip
    answer = ok(run)
    seen = {(o["provider"], o["region"]["name"]) for o in answer["offers"] + answer["rejected"]}
    assert seen == {("aws", US), ("gcp", "us-central1")}
    assert answer["failures"] == []
    assert answer["request"]["regions"] == [US, "us-central1"]


def test_a_region_no_provider_has_is_a_usage_error_naming_close_ones(
    cli: Cli, aws: AwsServer, gcp: Gcp
) -> None:
    env = {**aws_env(aws), **gcp.env()}
    run = cli("offers", "-p", "aws,gcp", "-r", US, "-r", "us-centrl1", "--gpus", "8", "--json",
              env=env)  # fmt: skip
    assert run.exit_code == 2 and run.stdout == ""
    assert "'us-centrl1'" in run.stderr and "did you mean us-central1" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_failing_provider_is_named_and_the_others_answer(cli: Cli, aws: AwsServer) -> None:
    # gcp without its price list's API key: it fails; aws still answers (exit 0).
    run = cli("offers", "-p", "aws,gcp", "-r", US, "--gpus", "8", "--gpu", "H100", "--json",
              env=aws_env(aws))  # fmt: skip
    answer = ok(run)
    assert [f["provider"] for f in answer["failures"]] == ["gcp"]
    assert "SHOAL_GCP_API_KEY" in answer["failures"][0]["error"]
    assert {o["provider"] for o in answer["offers"]} == {"aws"}
    assert "shoal: warning: gcp:" in run.stderr
    # Every provider failing: the entries are printed, and the exit code is the last one's.
    down = {"SHOAL_AZURE_PRICES_URL": "http://127.0.0.1:9"}
    both = cli("offers", "-p", "gcp,azure", "--gpus", "8", "--json", env=down)
    answer = ok(both, code=69)
    assert [f["provider"] for f in answer["failures"]] == ["gcp", "azure"]
    assert both.stderr.count("shoal: error:") == 2
    one = cli("offers", "-p", "gcp", "--gpus", "8", "--json")
    assert ok(one, code=77)["failures"][0]["provider"] == "gcp"


# -- kubernetes and the local host -------------------------------------------------------------


def test_a_kubernetes_pool_with_nodes_that_fit(cli: Cli, home: Path, tmp_path: Path) -> None:
    from tests.providers.kubernetes import objects as k8s
    from tests.providers.kubernetes.apiserver import ApiServer as KubeApi
    from tests.providers.kubernetes.test_catalog import TOKEN, write_kubeconfig

    _cache_p5_price(home)
    product = "NVIDIA-H100-80GB-HBM3"
    nodes = [
        k8s.eks_node(f"gpu-{n}", nodegroup="gpu", instance_type="p5.48xlarge", gpus=8,
                     product=product, cpu="191450m", memory="2000Gi")
        for n in (1, 2)
    ]  # fmt: skip
    for node in nodes:
        node["spec"]["providerID"] = f"aws:///us-east-1a/i-{node['metadata']['name']}"
    wants = {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "4"}
    busy = k8s.pod("train-1", "gpu-2", containers=[k8s.container(requests=wants, limits=wants)])
    with KubeApi(tokens=[TOKEN]) as api:
        api.add_many("nodes", [*nodes, k8s.eks_node("cpu-1", nodegroup="general",
                                                      instance_type="m5.xlarge")])  # fmt: skip
        api.add_many("pods", [busy])
        env = {"KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", api.base))}
        answer = ok(cli("offers", "-p", "kubernetes", "--gpus", "4", "--gpu", "H100", "--json",
                        env=env))  # fmt: skip
    (offer,) = answer["offers"]
    assert offer["driver"] == "kubernetes" and offer["region"]["name"] == "prod"
    assert offer["pool"] == {"key": "eks.amazonaws.com/nodegroup", "value": "gpu", "nodes": 2,
                             "fitting": 2}  # fmt: skip
    assert (offer["instances"], offer["gpusPerInstance"], offer["fitsNow"]) == (1, 4, 3)
    assert offer["pricePerHour"] == 49.16  # half of the node's cached p5 price
    assert offer["binding"]["scope"] == "pool" and offer["binding"]["free"] == 12


def _cache_p5_price(home: Path) -> None:
    from providers.cloud.cache import CatalogCache
    from providers.cloud.catalog import CACHE_FILE
    from providers.cloud.offers import Offer, Snapshot

    (home / "cache").mkdir(exist_ok=True)
    cache = CatalogCache(home / "cache" / CACHE_FILE)
    try:
        p5 = Offer("p5.48xlarge", 192, 2048, "x86_64", "H100", 8, 80, 98.32)
        cache.save(Snapshot("aws", US, datetime.now(UTC), "https://pricing.example", offers={
            "p5.48xlarge": p5}))  # fmt: skip
    finally:
        cache.close()


@pytest.fixture
def two_h100s(tmp_path: Path) -> dict[str, str]:
    """A PATH whose nvidia-smi reports two H100s."""
    folder = tmp_path / "bin"
    folder.mkdir()
    smi = folder / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\necho 'NVIDIA H100 80GB HBM3, 81559'\necho 'NVIDIA H100 80GB HBM3, 81559'\n"
    )
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return {"PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_the_local_host_is_an_offer_with_its_free_gpus(
    cli: Cli, two_h100s: dict[str, str], write_config: Callable[[str], Path]
) -> None:
    answer = ok(cli("offers", "-p", "local", "--gpus", "2", "--gpu", "H100", "--json",
                    env=two_h100s))  # fmt: skip
    (host,) = answer["offers"]
    assert (host["driver"], host["instanceType"], host["market"]) == ("process", "host", "onDemand")
    assert host["shape"]["gpuCount"] == 2 and host["shape"]["gpu"] == "H100"
    assert (host["instances"], host["fitsNow"], host["pricePerHour"]) == (1, 1, None)
    assert any("[local.pricing]" in n for n in host["notes"])
    write_config("[local.pricing]\non_demand = 3.5\n")
    priced = ok(cli("offers", "-p", "local", "--gpus", "4", "--json", env=two_h100s))
    assert priced["offers"] == []
    (too_many,) = priced["rejected"]
    # Two processes of two GPUs each: the host has room for one.
    assert too_many["code"] == "no-capacity" and too_many["reason"].startswith("fits 1 of 2 now")
    one = ok(cli("offers", "-p", "local", "--gpus", "1", "--json", env=two_h100s))
    (host,) = one["offers"]
    assert (host["pricePerHour"], host["fitsNow"], host["pricePerGpuHour"]) == (3.5, 2, 3.5)


@pytest.mark.parametrize("args", [(), ("--group-by", "gpu"), ("--explain", "--gpu", "H100")])
def test_the_tables_fit_80_columns_with_every_type_and_price_whole(
    home: Path, aws: AwsServer, args: tuple[str, ...]
) -> None:
    from cli.tables import number_text
    from tests.cli.test_tables_80 import fits, on_terminal, piped

    ask = ("offers", "-p", "aws", "-r", US, "--gpus", "8", "--market", "on-demand", *args)
    answer = json.loads(piped(home, *ask, "--json", env=aws_env(aws)).stdout)
    out, err = on_terminal(home, *ask, columns=80, env=aws_env(aws))
    lines = fits(out, 80)
    fits(err, 80)
    assert "…" not in out
    shown = " ".join(lines)
    for offer in answer["offers"]:
        assert offer["instanceType"] in shown
        assert number_text(round(offer["totalPerHour"], 4)) in shown
    for left in answer["rejected"] if "--explain" in args else []:
        assert left["code"] in shown
