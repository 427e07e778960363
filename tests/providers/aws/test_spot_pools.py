"""EC2's vCPU quotas of different codes are separate pools (issue 24, item 5): a P5 spot
quota beside the P4/P3/P2 one is two lines, never one sum, and a type counts against the
code that covers it. The quota pages here are written afresh in ListServiceQuotas' documented
shape (https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html:
Quotas[] of ServiceQuota with UsageMetric, Period, QuotaAppliedAtLevel, ...), served by the
loopback AWS (quotaserver.py), with the running instances from moto's EC2 (RunInstances
with InstanceMarketOptions spot) or the loopback's DescribeInstances XML."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from providers.accounts.fit import fit, type_fit
from providers.accounts.model import AccountSnapshot
from providers.accounts.resource import to_resource
from providers.aws.families import AwsQuotaMap, vcpu_quota
from providers.models import RegionResourceItem, Resource
from tests.providers.aws import moto
from tests.providers.aws.quotaserver import AwsServer, Instance
from tests.providers.aws.test_accounts import CREDS, accounts, run_instances

REGION = "us-west-2"
ACCOUNT = "444455556666"
P_ON_DEMAND, P_SPOT, P5_SPOT = "L-417A185B", "L-7212CCBC", "L-C4BD4855"
G_SPOT = "L-3819A6DF"
NOW = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


def service_quota(code: str, name: str, value: float, *, metric: str) -> dict[str, Any]:
    """One Quotas[] entry as ListServiceQuotas returns it for ec2 (vCPU quotas report their
    usage through the AWS/Usage ResourceCount metric of their class)."""
    return {
        "ServiceCode": "ec2",
        "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
        "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/{code}",
        "QuotaCode": code,
        "QuotaName": name,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
        "UsageMetric": {
            "MetricNamespace": "AWS/Usage",
            "MetricName": "ResourceCount",
            "MetricDimensions": {
                "Class": metric,
                "Resource": "vCPU",
                "Service": "EC2",
                "Type": "Resource",
            },
            "MetricStatisticRecommendation": "Maximum",
        },
        "QuotaAppliedAtLevel": "ACCOUNT",
        "Description": f"Maximum number of vCPUs: {name}",
    }


APPLIED = [
    service_quota(P_ON_DEMAND, "Running On-Demand P instances", 384.0, metric="P/OnDemand"),
    service_quota(P_SPOT, "All P4, P3 and P2 Spot Instance Requests", 64.0, metric="P/Spot"),
    service_quota(P5_SPOT, "All P5 Spot Instance Requests", 192.0, metric="P5/Spot"),
    service_quota(G_SPOT, "All G and VT Spot Instance Requests", 32.0, metric="G/Spot"),
]


@pytest.fixture
def aws() -> Iterator[AwsServer]:
    with AwsServer(CREDS, (REGION,)) as server:
        server.page = 3  # ListServiceQuotas read over two pages
        server.region(REGION).applied = [dict(q) for q in APPLIED]
        yield server


def item(resource: Resource, key: str, value: str) -> RegionResourceItem:
    (found,) = [i for i in resource.overview if (i.key, i.value) == (key, value)]
    return found


def figures(item: RegionResourceItem, market: str) -> tuple[str, str, str]:
    stat = item.stat.spot if market == "spot" else item.stat.on_demand
    assert stat is not None
    return (
        stat.supply["cpu"]["vcpu"],
        stat.allocated["cpu"]["vcpu"],
        stat.allocatable["cpu"]["vcpu"],
    )


def check_pools(snapshot: AccountSnapshot) -> None:
    quotas = {q.code: q for q in snapshot.quotas}
    assert (quotas[P_SPOT].limit, quotas[P_SPOT].used) == (64.0, 0.0)
    assert (quotas[P5_SPOT].limit, quotas[P5_SPOT].used) == (192.0, 192.0)
    res = to_resource(snapshot, now=NOW)
    # Never 256/192/64 on one line: each code its own.
    assert figures(item(res, "family", "P"), "spot") == ("64", "0", "64")
    assert figures(item(res, "family", "P5"), "spot") == ("192", "192", "0")
    assert quotas[P5_SPOT].group == "P5" and quotas[P_SPOT].group == "P"
    assert figures(item(res, "family", "P"), "onDemand") == ("384", "96", "288")
    assert item(res, "family", "P5").stat.on_demand is None  # p5 on demand is L-417A185B's
    spot_p5 = [c.value for c in item(res, "family", "P5").next_level]
    assert spot_p5 == ["p5.48xlarge"]
    assert [c.value for c in item(res, "family", "P").next_level] == ["p4d.24xlarge"]


def test_p5_spot_and_p4_p3_p2_spot_are_separate_pools(tmp_path: Path, aws: AwsServer) -> None:
    aws.region(REGION).instances = [
        Instance("p5.48xlarge", f"{REGION}a", lifecycle="spot", cores=96, threads=2),
        Instance("p4d.24xlarge", f"{REGION}b", cores=48, threads=2),
    ]
    [snapshot] = accounts(tmp_path, aws).fetch([REGION])
    assert aws.calls_to("ListServiceQuotas", REGION) == ["", "3"]
    check_pools(snapshot)


def test_a_type_counts_against_the_code_that_covers_it(tmp_path: Path, aws: AwsServer) -> None:
    aws.region(REGION).instances = [
        Instance("p5.48xlarge", f"{REGION}a", lifecycle="spot", cores=96, threads=2),
        Instance("p4d.24xlarge", f"{REGION}b", cores=48, threads=2),
    ]
    [snapshot] = accounts(tmp_path, aws).fetch([REGION])
    rules = AwsQuotaMap(snapshot.quotas)
    # p5 spot: L-C4BD4855 is full, whatever L-7212CCBC has left.
    p5 = type_fit(snapshot, rules, "p5.48xlarge", 192, "H100", 8, "spot")
    assert p5.instances == 0 and p5.binding is not None
    assert (p5.binding.code, p5.binding.free, p5.binding.per_instance) == (P5_SPOT, 0.0, 192.0)
    assert p5.binding.describe() == (
        "L-C4BD4855 All P5 Spot Instance Requests: 0 free of 192, 192 per instance"
    )
    # p3 spot: the 64 vCPUs of L-7212CCBC take two 32-vCPU p3.8xlarge; p4d (96) none.
    p3 = type_fit(snapshot, rules, "p3.8xlarge", 32, "V100", 4, "spot")
    assert (p3.instances, p3.binding and p3.binding.code) == (2, P_SPOT)
    p4d = type_fit(snapshot, rules, "p4d.24xlarge", 96, "A100", 8, "spot")
    assert (p4d.instances, p4d.binding and p4d.binding.code) == (0, P_SPOT)
    # p5 on demand: L-417A185B, 288 of 384 vCPUs free: one.
    on_demand = type_fit(snapshot, rules, "p5.48xlarge", 192, "H100", 8, "onDemand")
    assert (on_demand.instances, on_demand.binding and on_demand.binding.code) == (1, P_ON_DEMAND)
    codes = [vcpu_quota(t, "spot") for t in ("p5en.48xlarge", "p4de.24xlarge", "p2.xlarge")]
    assert [q.code if q else None for q in codes] == [P5_SPOT, P_SPOT, P_SPOT]


def test_a_quota_the_account_does_not_list_is_unknown_never_zero(
    tmp_path: Path, aws: AwsServer
) -> None:
    aws.region(REGION).applied = [q for q in APPLIED if q["QuotaCode"] != P5_SPOT]
    [snapshot] = accounts(tmp_path, aws).fetch([REGION])
    found = type_fit(snapshot, AwsQuotaMap(), "p5.48xlarge", 192, "H100", 8, "spot")
    assert (found.instances, found.at_most, found.unknown) == (None, None, (P5_SPOT,))
    assert fit(snapshot, []).instances is None  # nothing applies: nothing claimed


@pytest.fixture(scope="module")
def moto_base() -> Iterator[str]:
    with moto.moto_server() as base:
        yield base


def test_pools_with_usage_from_moto(tmp_path: Path, moto_base: str) -> None:
    moto.reset(moto_base)
    spot = {"InstanceMarketOptions.MarketType": "spot"}
    run_instances(moto_base, REGION, "p5.48xlarge", 1, **spot)
    run_instances(moto_base, REGION, "p4d.24xlarge", 1)
    with AwsServer(CREDS, (REGION,)) as aws:
        aws.upstream = moto_base
        aws.page = 1
        aws.region(REGION).applied = [dict(q) for q in APPLIED]
        made = accounts(tmp_path, aws)
        made.page_size = 5
        [snapshot] = made.fetch([REGION])
    assert aws.bad_signatures == 0
    usage = {(u.instance_type, u.market): u for u in snapshot.usage}
    assert usage["p5.48xlarge", "spot"].vcpus == 192.0
    check_pools(snapshot)
