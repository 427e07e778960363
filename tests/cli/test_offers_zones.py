"""`shoal offers`' zones: the zones of the region that offer each offer's type, as the
providers say it (AWS DescribeInstanceTypeOfferings, GCP's GPU machine types per zone, a
Kubernetes pool's nodes' zone labels), [] with a note saying why where they cannot. The
real fetchers behind the CLI against the loopback clouds of tests/cli/test_offers.py; every
JSON answer checked against cli/schemas/offers.schema.json."""

# The fixtures of test_offers.py are imported below and taken by name as arguments.
# ruff: noqa: F811

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.cli.test_account_commands import env as aws_env
from tests.cli.test_offers import (  # noqa: F401 (fixtures)
    Cli,
    Gcp,
    aws,
    by_type,
    gcp,
    ok,
    rejected,
)
from tests.providers.aws.quotaserver import AwsServer
from tests.providers.aws.test_accounts import US
from tests.providers.gcp import account_payloads as g

H100 = ("--gpus", "8", "--gpu", "H100", "--market", "on-demand", "--json")


def test_aws_offers_name_the_zones_that_offer_their_type(cli: Cli, aws: AwsServer) -> None:
    aws.region(US).offered = {
        "p5.48xlarge": ["us-east-1b", "us-east-1a"],
        "g5.xlarge": ["us-east-1a", "us-east-1c"],
        "m5.large": ["us-east-1a"],
    }
    answer = ok(cli("offers", "-p", "aws", "-r", US, "--gpus", "8", "--market", "on-demand",
                    "--json", env=aws_env(aws)))  # fmt: skip
    offers = by_type(answer)
    assert offers[("p5.48xlarge", "onDemand")]["zones"] == ["us-east-1a", "us-east-1b"]
    assert offers[("g5.xlarge", "onDemand")]["zones"] == ["us-east-1a", "us-east-1c"]
    assert not any("zones unknown" in n for o in answer["offers"] for n in o["notes"])
    # A GPU type priced in the region but offered in none of its zones: no offer, and why.
    (g6,) = rejected(answer, "g6.xlarge")
    assert (g6["code"], g6["reason"]) == (
        "not-offered", f"no zone of {US} offers it (the account's list of zones per type)"
    )  # fmt: skip
    # Other types' zones are not asked: [] and why.
    cpus = ok(cli("offers", "-p", "aws", "-r", US, "--cpu", "2", "--ram", "8", "--market",
                  "on-demand", "--json", env=aws_env(aws)))  # fmt: skip
    m5 = by_type(cpus)[("m5.large", "onDemand")]
    assert m5["zones"] == [] and m5["fitsNow"] is not None
    assert "zones unknown: aws lists the zones of its GPU types only (dl*, g*, inf*, p*, trn*)" in (
        m5["notes"]
    )


def test_without_credentials_zones_are_unknown_and_said_so(cli: Cli, aws: AwsServer) -> None:
    aws.region(US).offered = {"p5.48xlarge": ["us-east-1a"]}
    no_keys = {k: v for k, v in aws_env(aws).items() if not k.startswith("AWS_")}
    answer = ok(cli("offers", "-p", "aws", "-r", US, *H100, env=no_keys))
    (p5,) = answer["offers"]
    assert p5["zones"] == [] and "zones unknown without credentials" in p5["notes"]


def test_a_refused_zone_list_leaves_zones_unknown_with_the_permission(
    cli: Cli, aws: AwsServer
) -> None:
    aws.region(US).offered = {"p5.48xlarge": ["us-east-1a"]}
    aws.refuse[US, "DescribeInstanceTypeOfferings"] = "UnauthorizedOperation"
    answer = ok(cli("offers", "-p", "aws", "-r", US, *H100, env=aws_env(aws)))
    (p5,) = answer["offers"]
    assert p5["zones"] == [] and p5["fitsNow"] == 1  # the quotas are known all the same
    assert any(
        n.startswith("zones unknown: DescribeInstanceTypeOfferings was refused")
        and "ec2:DescribeInstanceTypeOfferings" in n
        for n in p5["notes"]
    )


def test_gcp_offers_name_the_zones_of_their_machine_type(cli: Cli, gcp: Gcp) -> None:
    gcp.project.machine_types = g.gpu_machine_type_pages()
    gcp.serve()
    answer = ok(cli("offers", "-p", "gcp", "-r", "us-central1", "--gpus", "8", "--gpu", "H100",
                    "--market", "on-demand", "--json", env=gcp.env()))  # fmt: skip
    (a3,) = answer["offers"]
    assert a3["instanceType"] == "a3-highgpu-8g"
    assert a3["zones"] == ["us-central1-a", "us-central1-c"]
    assert not any("zones unknown" in n for n in a3["notes"])
    # A type whose zones gcp does not read: [] and why.
    cpus = ok(cli("offers", "-p", "gcp", "-r", "us-central1", "--cpu", "4", "--ram", "16",
                  "--market", "on-demand", "--json", env=gcp.env()))  # fmt: skip
    n2 = by_type(cpus, "gcp")[("n2-standard-4", "onDemand")]
    assert n2["zones"] == []
    assert "zones unknown: gcp lists the zones of its GPU machine types only" in n2["notes"][-1]


def test_a_kubernetes_pool_offers_the_zones_of_its_nodes(
    cli: Cli, home: Path, tmp_path: Path
) -> None:
    from tests.providers.kubernetes import objects as k8s
    from tests.providers.kubernetes.apiserver import ApiServer as KubeApi
    from tests.providers.kubernetes.test_catalog import TOKEN, write_kubeconfig

    def gpu_node(name: str, zone: str) -> dict[str, Any]:
        return k8s.eks_node(name, nodegroup="gpu", instance_type="p5.48xlarge", gpus=8,
                            product="NVIDIA-H100-80GB-HBM3", cpu="191450m", memory="2000Gi",
                            zone=zone)  # fmt: skip

    nodes = [
        gpu_node("gpu-1", "us-east-1b"),
        gpu_node("gpu-2", "us-east-1a"),
        gpu_node("gpu-3", "us-east-1b"),
        k8s.eks_node("cpu-1", nodegroup="general", instance_type="m5.xlarge", zone="us-east-1f"),
        k8s.eks_node("cpu-2", nodegroup="bare", instance_type="m5.large", zone=""),
    ]
    with KubeApi(tokens=[TOKEN]) as api:
        api.add_many("nodes", nodes)
        env = {"KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", api.base))}
        gpus = ok(cli("offers", "-p", "kubernetes", "--gpus", "8", "--gpu", "H100", "--json",
                      env=env))  # fmt: skip
        cpus = ok(cli("offers", "-p", "kubernetes", "--cpu", "1", "--ram", "1", "--json",
                      env=env))  # fmt: skip
    (offer,) = gpus["offers"]
    assert offer["pool"]["value"] == "gpu" and offer["zones"] == ["us-east-1a", "us-east-1b"]
    pools = {o["pool"]["value"]: o for o in cpus["offers"]}
    assert pools["general"]["zones"] == ["us-east-1f"]
    bare = pools["bare"]
    assert bare["zones"] == []
    assert "zones unknown: no node of the pool has a topology.kubernetes.io/zone label" in (
        bare["notes"]
    )
