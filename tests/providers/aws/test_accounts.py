"""AwsAccounts against a loopback AWS (quotaserver.py: EC2 XML and Service Quotas JSON, with
SigV4 checked on every request) and against moto's EC2 for usage. The tests look at the
snapshots and at what was sent, not at the fetcher's insides."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from providers.accounts.model import AccountSnapshot, Need, Quota
from providers.aws.accounts import AwsAccounts
from providers.aws.api import Endpoint, aws_http
from providers.aws.families import QUOTA_MAP, group_of, quota_gpus, vcpu_quota
from providers.aws.sigv4 import Credentials
from providers.cloud.http import RetryPolicy
from providers.core.env import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_CONFIG_FILE,
    ENV_AWS_EC2_URL,
    ENV_AWS_QUOTAS_URL,
    ENV_AWS_REGION,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_AWS_SESSION_TOKEN,
    ENV_AWS_SHARED_CREDENTIALS_FILE,
)
from providers.core.errors import (
    CredentialsError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
)
from providers.core.settings import Paths, Settings
from tests.providers.apiserver import ApiServer
from tests.providers.aws import moto
from tests.providers.aws.quotaserver import AwsServer, Capacity, Instance, quota

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=10.0)
KEY_ID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "FwoGZXIvYXdzEXAMPLESESSIONTOKEN"
CREDS = Credentials(KEY_ID, SECRET, TOKEN)
NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
US, EU = "us-east-1", "eu-west-1"
P_ON_DEMAND, P_SPOT, P5_SPOT = "L-417A185B", "L-7212CCBC", "L-C4BD4855"
STANDARD, STANDARD_SPOT, G_ON_DEMAND, G_SPOT = (
    "L-1216C47A",
    "L-34B43A08",
    "L-DB2E81BA",
    "L-3819A6DF",
)
ELASTIC_IPS = "L-0263D0A3"


@pytest.fixture
def aws() -> Iterator[AwsServer]:
    with AwsServer(CREDS, (US, EU)) as server:
        yield server


def settings(tmp_path: Path, env: dict[str, str], config: dict[str, Any] | None = None) -> Settings:
    environ = {
        ENV_AWS_SHARED_CREDENTIALS_FILE: str(tmp_path / "no-credentials"),
        ENV_AWS_CONFIG_FILE: str(tmp_path / "no-config"),
        **env,
    }
    paths = Paths.from_env({"SHOAL_HOME": str(tmp_path)})
    return Settings(paths=paths, config=config or {}, env=environ)


def accounts(tmp_path: Path, server: ApiServer, **env: str) -> AwsAccounts:
    environ = {
        ENV_AWS_ACCESS_KEY_ID: KEY_ID,
        ENV_AWS_SECRET_ACCESS_KEY: SECRET,
        ENV_AWS_SESSION_TOKEN: TOKEN,
        ENV_AWS_EC2_URL: server.base + "/ec2/{region}",
        ENV_AWS_QUOTAS_URL: server.base + "/sq/{region}",
        **env,
    }
    made = AwsAccounts.from_settings(settings(tmp_path, environ), policy=FAST)
    made.now = lambda: NOW
    return made


def by_code(snapshot: AccountSnapshot) -> dict[str, Quota]:
    return {q.code: q for q in snapshot.quotas}


def stock(server: AwsServer, region: str = US) -> None:
    """An account: quotas (one over its limit, one only among the defaults, one shoal does
    not know), instances of three groups and both markets, a reservation and a block."""
    data = server.region(region)
    data.applied = [
        quota(STANDARD, 640.0, "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"),
        quota(P_ON_DEMAND, 192.0, "Running On-Demand P instances"),
        quota(STANDARD_SPOT, 100.0),
        quota(ELASTIC_IPS, 5.0, "EC2-VPC Elastic IPs"),
        quota("L-GLOBAL01", 3.0, "Something account-wide", glob=True),
    ]
    data.defaults = [
        quota(STANDARD, 5.0),
        quota(G_SPOT, 64.0, "All G and VT Spot Instance Requests"),
    ]
    data.instances = [
        Instance("p5.48xlarge", "us-east-1a", cores=96, threads=2),
        Instance("p5.48xlarge", "us-east-1a", cores=96, threads=2),
        Instance("g6e.xlarge", "us-east-1b", lifecycle="spot"),
        Instance("m5.large", "us-east-1a", cores=1, threads=1),
        Instance("m5.large", "us-east-1a", cores=1, threads=1),
        Instance("m5.large", "us-east-1c"),
        Instance("m5.large", "us-east-1a", state="stopped"),
    ]
    data.capacity = [
        Capacity("cr-0001", "p5.48xlarge", total=2, available=0),
        Capacity(
            "cr-0002",
            "p5en.48xlarge",
            total=4,
            available=4,
            state="scheduled",
            kind="capacity-block",
            start="2025-07-01T11:30:00.000Z",
            end="2025-07-15T11:30:00.000Z",
        ),
        Capacity("cr-0003", "m5.large", total=9, available=9, state="expired"),
    ]
    server.types = {
        "p5.48xlarge": (192, "H100", 8),
        "g6e.xlarge": (4, "L40S", 1),
        "m5.large": (2, "", 0),
    }


# -- a whole region --------------------------------------------------------------------------


def test_a_region_quotas_usage_and_reservations(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws)
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert (snap.provider, snap.region, snap.fetched_at) == ("aws", US, NOW)
    quotas = by_code(snap)
    p = quotas[P_ON_DEMAND]
    assert (p.group, p.market, p.resource, p.limit, p.used) == (
        "P",
        "onDemand",
        ("cpu", "vcpu"),
        192.0,
        384.0,
    )
    assert "H100" in p.gpus and "A100" in p.gpus  # used above the limit is kept as it is
    standard = quotas[STANDARD]
    assert (standard.limit, standard.used) == (640.0, 4.0)  # applied beats the default 5
    assert quotas[STANDARD_SPOT].used == 0.0
    g_spot = quotas[G_SPOT]  # only among AWS's defaults
    assert (g_spot.limit, g_spot.used, g_spot.market, g_spot.group) == (
        64.0,
        4.0,
        "spot",
        "G and VT",
    )
    ips = quotas[ELASTIC_IPS]
    assert (ips.resource, ips.group, ips.used, ips.name) == (
        ("quota", ELASTIC_IPS),
        "other",
        None,
        "EC2-VPC Elastic IPs",
    )
    assert quotas["L-GLOBAL01"].scope == "global"
    assert any("All G and VT Spot Instance Requests" in n and "default" in n for n in snap.notes)

    usage = {(u.instance_type, u.zone, u.market): u for u in snap.usage}
    p5 = usage["p5.48xlarge", "us-east-1a", "onDemand"]
    assert (p5.count, p5.vcpus, p5.gpu, p5.gpus, p5.group) == (2, 192.0, "H100", 8, "P")
    g6e = usage["g6e.xlarge", "us-east-1b", "spot"]
    assert (g6e.count, g6e.vcpus, g6e.gpu, g6e.gpus) == (1, 4.0, "L40S", 1)
    assert usage["m5.large", "us-east-1a", "onDemand"].vcpus == 1.0  # cpuOptions: 1 core x 1
    assert usage["m5.large", "us-east-1c", "onDemand"].vcpus == 2.0  # the type's default
    assert sum(u.count for u in snap.usage) == 6  # the stopped one is not running

    reservations = {r.id: r for r in snap.reservations}
    assert set(reservations) == {"cr-0001", "cr-0002"}
    held = reservations["cr-0001"]
    assert (held.kind, held.total, held.available, held.start, held.end) == (
        "capacity-reservation",
        2,
        0,
        None,
        None,
    )
    assert (held.vcpus, held.gpu, held.gpus, held.zone, held.state) == (
        192.0,
        "H100",
        8,
        "us-east-1a",
        "active",
    )
    block = reservations["cr-0002"]
    assert block.kind == "capacity-block" and block.state == "scheduled"
    assert block.start == datetime(2025, 7, 1, 11, 30, tzinfo=UTC)
    assert block.end == datetime(2025, 7, 15, 11, 30, tzinfo=UTC)
    assert (
        block.gpu == "H200" and block.vcpus is None
    )  # no DescribeInstanceTypes answer: the family

    assert snap.sources == [
        f"{aws.base}/sq/{US} ListServiceQuotas",
        f"{aws.base}/sq/{US} ListAWSDefaultServiceQuotas",
        f"{aws.base}/ec2/{US} DescribeInstances",
        f"{aws.base}/ec2/{US} DescribeCapacityReservations",
        f"{aws.base}/ec2/{US} DescribeInstanceTypes",
    ]
    assert [n for n in snap.notes if "refused" in n] == []


def test_every_request_is_signed_and_every_list_read_to_its_end(
    tmp_path: Path, aws: AwsServer
) -> None:
    stock(aws)
    accounts(tmp_path, aws).fetch([US])
    assert aws.bad_signatures == 0
    assert aws.calls_to("DescribeInstances") == ["", "2", "4", "6"]  # 7 rows, 2 a page
    assert aws.calls_to("ListServiceQuotas") == ["", "2", "4"]
    assert aws.calls_to("ListAWSDefaultServiceQuotas") == [""]
    assert aws.calls_to("DescribeCapacityReservations") == ["", "2"]
    seen = [s for s in aws.seen if s.path.startswith(("/ec2/", "/sq/"))]
    assert seen and all(s.headers["x-amz-security-token"] == TOKEN for s in seen)
    assert all(
        s.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={KEY_ID}/")
        for s in seen
    )
    posts = [s for s in seen if s.path.startswith("/sq/")]
    assert {s.headers["x-amz-target"] for s in posts} == {
        "ServiceQuotasV20190624.ListServiceQuotas",
        "ServiceQuotasV20190624.ListAWSDefaultServiceQuotas",
    }
    assert all(s.headers["content-type"] == "application/x-amz-json-1.1" for s in posts)
    assert json.loads(aws.bodies[0])["ServiceCode"] == "ec2"
    wanted = [s.query for s in seen if s.query.get("Action") == ["DescribeInstanceTypes"]]
    assert len(wanted) == 1  # once, for the types in use and reserved
    assert sorted(v[0] for k, v in wanted[0].items() if k.startswith("InstanceType.")) == [
        "g6e.xlarge",
        "m5.large",
        "p5.48xlarge",
        "p5en.48xlarge",
    ]


def test_regions_are_fetched_together_one_snapshot_each(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws, US)
    aws.region(EU).applied = [quota(STANDARD, 32.0)]
    snaps = accounts(tmp_path, aws).fetch([EU, US])
    assert [s.region for s in snaps] == [EU, US]
    assert by_code(snaps[0])[STANDARD].limit == 32.0 and snaps[0].usage == []
    assert by_code(snaps[1])[STANDARD].limit == 640.0
    assert aws.calls_to("DescribeInstances", EU) == [""]


def test_the_region_list_is_asked_in_the_default_region(tmp_path: Path, aws: AwsServer) -> None:
    made = accounts(tmp_path, aws, **{ENV_AWS_REGION: EU})
    assert made.regions() == [EU, US]
    assert [s.path for s in aws.seen] == [f"/ec2/{EU}"]
    assert aws.bad_signatures == 0


def test_a_refused_region_list_is_a_credentials_error_with_the_code(
    tmp_path: Path, aws: AwsServer
) -> None:
    aws.refuse[US, "DescribeRegions"] = "UnauthorizedOperation"
    with pytest.raises(CredentialsError) as caught:
        accounts(tmp_path, aws).regions()
    message = str(caught.value)
    assert "HTTP 403" in message and "UnauthorizedOperation" in message
    assert ENV_AWS_ACCESS_KEY_ID in message and SECRET not in message and TOKEN not in message


# -- permissions -----------------------------------------------------------------------------


def test_refused_apis_leave_their_part_unknown_and_say_which_permission(
    tmp_path: Path, aws: AwsServer
) -> None:
    stock(aws)
    aws.refuse[US, "DescribeInstances"] = "UnauthorizedOperation"
    aws.refuse[US, "ListServiceQuotas"] = "AccessDeniedException"
    aws.refuse[US, "DescribeCapacityReservations"] = "UnauthorizedOperation"
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert snap.usage == [] and snap.reservations == []
    quotas = by_code(snap)
    assert set(quotas) == {STANDARD, G_SPOT}  # AWS's defaults, usage unknown
    assert quotas[STANDARD].limit == 5.0 and quotas[STANDARD].used is None
    assert (
        "usage unknown: DescribeInstances was refused in us-east-1 (UnauthorizedOperation); "
        "grant ec2:DescribeInstances"
    ) in snap.notes
    assert any(
        "AWS's defaults" in n
        and "(AccessDeniedException)" in n
        and "servicequotas:ListServiceQuotas" in n
        for n in snap.notes
    )
    assert any("ec2:DescribeCapacityReservations" in n for n in snap.notes)
    assert [s.split()[-1] for s in snap.sources] == ["ListAWSDefaultServiceQuotas"]
    assert aws.calls_to("DescribeInstanceTypes") == []  # nothing to ask it about


def test_refused_instance_types_fall_back_to_the_family_table(
    tmp_path: Path, aws: AwsServer
) -> None:
    stock(aws)
    aws.refuse[US, "DescribeInstanceTypes"] = "UnauthorizedOperation"
    [snap] = accounts(tmp_path, aws).fetch([US])
    usage = {(u.instance_type, u.zone, u.market): u for u in snap.usage}
    assert usage["p5.48xlarge", "us-east-1a", "onDemand"].vcpus == 192.0  # its cpuOptions
    g6e = usage["g6e.xlarge", "us-east-1b", "spot"]
    assert (g6e.vcpus, g6e.gpu) == (None, "L40S")
    assert by_code(snap)[G_SPOT].used is None  # an instance of unknown size counts against it
    assert by_code(snap)[P_ON_DEMAND].used == 384.0
    assert any("ec2:DescribeInstanceTypes" in n for n in snap.notes)


def test_every_api_refused_everywhere_is_a_credentials_error(
    tmp_path: Path, aws: AwsServer
) -> None:
    for region in (US, EU):
        for action in ("DescribeInstances", "DescribeCapacityReservations"):
            aws.refuse[region, action] = "AuthFailure"
        for action in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas"):
            aws.refuse[region, action] = "UnrecognizedClientException"
    with pytest.raises(CredentialsError) as caught:
        accounts(tmp_path, aws).fetch([US, EU])
    message = str(caught.value)
    assert "AuthFailure" in message and "UnrecognizedClientException" in message
    assert ENV_AWS_ACCESS_KEY_ID in message and ENV_AWS_SECRET_ACCESS_KEY in message
    assert SECRET not in message and TOKEN not in message


def test_no_credentials_anywhere_is_77_naming_the_variables(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError) as caught:
        AwsAccounts.from_settings(settings(tmp_path, {}))
    message = str(caught.value)
    assert ENV_AWS_ACCESS_KEY_ID in message and "AWS_PROFILE" in message


# -- throttling and failures -------------------------------------------------------------------


def test_throttling_is_retried_with_backoff(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws)
    aws.throttle[US, "DescribeInstances"] = 2  # EC2: 503 RequestLimitExceeded
    aws.throttle[US, "ListServiceQuotas"] = 2  # Service Quotas: 400 ThrottlingException
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert by_code(snap)[P_ON_DEMAND].used == 384.0 and snap.notes[0].startswith("1 vCPU")
    assert aws.calls_to("DescribeInstances")[:3] == ["throttled", "throttled", ""]
    assert aws.calls_to("ListServiceQuotas")[:3] == ["throttled", "throttled", ""]


@pytest.mark.parametrize(
    "action, said",
    [
        ("DescribeCapacityReservations", "RequestLimitExceeded"),
        ("ListServiceQuotas", "ThrottlingException"),
    ],
)
def test_throttling_past_the_retries_is_retryable(
    tmp_path: Path, aws: AwsServer, action: str, said: str
) -> None:
    stock(aws)
    aws.throttle[US, action] = 10
    with pytest.raises(RetryableError) as caught:
        accounts(tmp_path, aws).fetch([US])
    message = str(caught.value)
    assert said in message and "(throttled) after 3 attempts" in message
    assert message.startswith(f"aws: {US} {action}: http://127.0.0.1:") and "\n" not in message


def test_a_server_echoing_the_credentials_never_shows_them(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws)
    aws.echo.add((US, "DescribeCapacityReservations"))
    with pytest.raises(ShoalError) as caught:
        accounts(tmp_path, aws).fetch([US])
    message = str(caught.value)
    assert "InvalidParameterValue" in message and "DescribeCapacityReservations" in message
    assert SECRET not in message and TOKEN not in message
    signature = aws.seen[-1].headers["authorization"].rsplit("Signature=", 1)[1]
    assert signature not in message


def test_an_unreachable_endpoint_fails_the_fetch(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws)
    with ApiServer() as closed:
        gone = closed.base
    made = accounts(tmp_path, aws, **{ENV_AWS_QUOTAS_URL: gone + "/sq/{region}"})
    with pytest.raises(ProviderUnreachableError, match=r"ConnectError.* after 3 attempts"):
        made.fetch([US])


def test_a_malformed_answer_fails_its_region(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws)
    aws.garbage.add((US, "DescribeInstances"))
    with pytest.raises(
        ShoalError, match=r"aws: us-east-1 DescribeInstances: malformed DescribeInstances response"
    ):
        accounts(tmp_path, aws).fetch([US])


def test_quota_values_no_real_quota_has_are_left_out_and_counted(
    tmp_path: Path, aws: AwsServer
) -> None:
    stock(aws)
    aws.region(US).applied += [
        quota("L-HUGE0001", 10**400),  # decodes as an int no float holds
        quota("L-HUGE0002", 1e300),
        quota("L-NEGATIVE", -5.0),
    ]
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert not {"L-HUGE0001", "L-HUGE0002", "L-NEGATIVE"} & set(by_code(snap))
    assert any("3 ec2 quota(s) left out: their value is not a number" in n for n in snap.notes)


def test_infinity_in_a_quota_answer_is_a_malformed_answer(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws)
    aws.region(US).applied.append(quota("L-INFINITE", float("inf")))  # JSON's `Infinity`
    with pytest.raises(ShoalError, match=r"ListServiceQuotas.*Infinity is not a number"):
        accounts(tmp_path, aws).fetch([US])


def test_a_next_token_that_repeats_ends_the_list(tmp_path: Path, aws: AwsServer) -> None:
    stock(aws)
    aws.loop.add((US, "ListServiceQuotas"))
    aws.loop.add((US, "DescribeInstances"))
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert aws.calls_to("ListServiceQuotas") == ["", "1"]
    assert aws.calls_to("DescribeInstances") == ["", "1"]
    assert STANDARD in by_code(snap)


# -- the quota map -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "instance_type, group, on_demand, spot",
    [
        ("p5.48xlarge", "P", P_ON_DEMAND, P5_SPOT),
        ("p5en.48xlarge", "P", P_ON_DEMAND, P5_SPOT),
        ("p4d.24xlarge", "P", P_ON_DEMAND, P_SPOT),
        ("g6e.xlarge", "G and VT", G_ON_DEMAND, G_SPOT),
        ("vt1.3xlarge", "G and VT", G_ON_DEMAND, G_SPOT),
        ("gr6.4xlarge", "G and VT", G_ON_DEMAND, G_SPOT),
        ("inf2.xlarge", "Inf", "L-1945791B", "L-B5D1601B"),
        ("dl1.24xlarge", "DL", "L-6E869C2A", "L-85EED4F7"),
        ("trn1.32xlarge", "Trn", "L-2C3B7624", "L-6B0D517C"),
        ("hpc7g.16xlarge", "HPC", "L-F7808C92", None),
        ("u-6tb1.metal", "High Memory", "L-43DA4232", None),
        ("u7i-12tb.224xlarge", "High Memory", "L-43DA4232", None),
        ("x2idn.32xlarge", "X", "L-7295265B", "L-E3A00192"),
        ("f1.2xlarge", "F", "L-74FC7D96", "L-88CF9481"),
        ("m7i.large", "Standard", STANDARD, STANDARD_SPOT),
        ("im4gn.large", "Standard", STANDARD, STANDARD_SPOT),
        ("mac2.metal", "Standard", STANDARD, STANDARD_SPOT),
    ],
)
def test_an_instance_type_counts_against_its_groups_quota(
    instance_type: str, group: str, on_demand: str, spot: str | None
) -> None:
    assert group_of(instance_type) == group
    assert QUOTA_MAP.needs(instance_type, 8, "", 0, "onDemand") == [Need(on_demand, 8.0)]
    assert QUOTA_MAP.needs(instance_type, 8, "", 0, "spot") == ([Need(spot, 8.0)] if spot else [])
    quota_ = vcpu_quota(instance_type, "onDemand")
    assert quota_ is not None and quota_.group == group


def test_unknown_vcpus_need_nothing_and_quotas_name_their_gpus() -> None:
    assert QUOTA_MAP.needs("p5.48xlarge", None, "H100", 8, "onDemand") == []
    assert quota_gpus(P5_SPOT) == ("H100", "H200")
    assert "L40S" in quota_gpus(G_ON_DEMAND) and quota_gpus(STANDARD) == ()


# -- moto's EC2 --------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def moto_base() -> Iterator[str]:
    with moto.moto_server() as base:
        yield base


def run_instances(base: str, region: str, instance_type: str, count: int, **extra: str) -> None:
    """RunInstances on moto, signed by shoal's own Query API client."""
    http = aws_http("aws", auth_hint="", credentials=CREDS, policy=FAST)
    api = Endpoint(http, base, region, "ec2", CREDS)
    params = {
        "ImageId": "ami-12c6146b",
        "MinCount": str(count),
        "MaxCount": str(count),
        "InstanceType": instance_type,
        **extra,
    }
    api.query("RunInstances", params)
    http.close()


def test_usage_from_moto(tmp_path: Path, moto_base: str) -> None:
    moto.reset(moto_base)
    run_instances(moto_base, US, "p5.48xlarge", 2, **{"Placement.AvailabilityZone": "us-east-1a"})
    run_instances(moto_base, US, "g6e.xlarge", 1, **{"InstanceMarketOptions.MarketType": "spot"})
    run_instances(moto_base, US, "m5.large", 3)
    run_instances(moto_base, EU, "inf2.xlarge", 1)
    with AwsServer(CREDS, (US, EU)) as aws:
        aws.upstream = moto_base
        aws.page = 1  # moto pages DescribeInstances by reservation with MaxResults
        aws.region(US).applied = [
            quota(P_ON_DEMAND, 384.0),
            quota(STANDARD, 32.0),
            quota(G_SPOT, 8.0),
        ]
        made = accounts(tmp_path, aws)
        made.page_size = 1
        us, eu = made.fetch([US, EU])
        regions = made.regions()
    assert aws.bad_signatures == 0
    usage = {(u.instance_type, u.market): u for u in us.usage}
    p5 = usage["p5.48xlarge", "onDemand"]
    assert (p5.count, p5.vcpus, p5.gpu, p5.gpus, p5.zone) == (2, 192.0, "H100", 8, "us-east-1a")
    g6e = usage["g6e.xlarge", "spot"]
    assert (g6e.count, g6e.vcpus, g6e.gpu, g6e.gpus) == (1, 4.0, "L40S", 1)
    assert usage["m5.large", "onDemand"].count == 3
    quotas = by_code(us)
    assert quotas[P_ON_DEMAND].used == 384.0
    assert quotas[STANDARD].used == 6.0
    assert quotas[G_SPOT].used == 4.0
    [inf2] = eu.usage
    assert (inf2.instance_type, inf2.gpu, inf2.gpus, inf2.group) == (
        "inf2.xlarge",
        "Inferentia2",
        1,
        "Inf",
    )
    assert US in regions and EU in regions
