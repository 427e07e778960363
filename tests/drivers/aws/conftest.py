"""The `aws` driver's test rig: moto's EC2 and SSM (one server for the session, reset for
each test, with moto's AMI and instance type checks on, so RunInstances refuses what EC2
would), a loopback EC2 in front of it for what moto lacks (ec2server.py), a loopback
Price List host serving a small offer file per region (the aws price catalog fetches it
as it would AWS's), and the environment a user would set."""

from __future__ import annotations

import functools
import json
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.aws.api import Endpoint, aws_http
from providers.aws.sigv4 import Credentials
from providers.cloud.http import RetryPolicy
from tests.conftest import Run
from tests.drivers.aws.ec2server import Ec2Server
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.aws import moto
from tests.providers.aws import payloads as p
from tests.providers.aws.quotaserver import quota

KEY_ID = "AKIDSHOALDRIVERTEST"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYDRIVERKEY"
TOKEN = "FwoGZXIvYXdzEDRIVERSESSIONTOKEN0123"
CREDS = Credentials(KEY_ID, SECRET, TOKEN)
US, EU = "us-east-1", "eu-west-1"
AL2023 = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64"
STANDARD, STANDARD_SPOT, G_ON_DEMAND = "L-1216C47A", "L-34B43A08", "L-DB2E81BA"
FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=10.0)

# The price catalog's types: all known to moto in us-east-1 (moto lacks g6.xlarge in
# eu-west-1, as its offerings data has it).
SHAPES = [
    p.Shape("t3.medium", "2", "4 GiB", "Intel Skylake E5 2686 v5", price=0.0416),
    p.Shape("m5.large", "2", "8 GiB", "Intel Xeon Platinum 8175", price=0.096),
    p.Shape("t4g.xlarge", "4", "16 GiB", "AWS Graviton2 Processor", price=0.1344),
    p.Shape("t3.xlarge", "4", "16 GiB", "Intel Skylake E5 2686 v5", price=0.1664),
    p.Shape("m5.xlarge", "4", "16 GiB", "Intel Xeon Platinum 8175", price=0.192),
    p.Shape("c5.2xlarge", "8", "16 GiB", "Intel Xeon Platinum 8124M", price=0.34),
    p.Shape("m5.2xlarge", "8", "32 GiB", "Intel Xeon Platinum 8175", price=0.384),
    p.Shape("g4dn.xlarge", "4", "16 GiB", "Intel Xeon Family", "1", "16 GB", 0.526),
    p.Shape("g6.xlarge", "4", "16 GiB", "AMD EPYC 7R13 Processor", "1", "24 GB", 0.8048),
    p.Shape("g5.xlarge", "4", "16 GiB", "AMD EPYC 7R32", "1", "24 GB", 1.006),
    p.Shape("g6.12xlarge", "48", "192 GiB", "AMD EPYC 7R13 Processor", "4", "96 GB", 4.6016),
]


@functools.cache
def offer_file(region: str) -> bytes:
    shapes = [s for s in SHAPES if region == US or s.instance_type != "g6.xlarge"]
    products = [p.compute_product(s, region=region) for s in shapes]
    terms = {
        x["sku"]: p.on_demand_term(x["sku"], s.price) for x, s in zip(products, shapes, strict=True)
    }
    return p.offer_file(products, terms)


@pytest.fixture(scope="session")
def moto_base() -> Iterator[str]:
    validate = {
        "MOTO_ENABLE_AMI_VALIDATION": "true",
        "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true",
    }
    with moto.moto_server(env=validate) as base:
        yield base


@pytest.fixture
def aws(moto_base: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Ec2Server]:
    """A clean moto behind the loopback EC2, with vCPU quotas of 64 (standard on-demand and
    spot) and 16 (G on-demand) in both regions; the driver's retries without waiting."""
    from drivers.aws import driver

    monkeypatch.setattr(driver, "RETRY_POLICY", FAST)
    monkeypatch.setattr(driver, "DOUBT_POLL_SECONDS", 0.05)
    monkeypatch.setattr(driver, "WAIT_POLL_SECONDS", 0.05)
    moto.reset(moto_base)
    with Ec2Server(CREDS, (US, EU), moto_base) as server:
        server.page = 100
        for region in (US, EU):
            server.region(region).applied = [
                quota(
                    STANDARD, 64, "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
                ),
                quota(
                    STANDARD_SPOT,
                    64,
                    "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
                ),
                quota(G_ON_DEMAND, 16, "Running On-Demand G and VT instances"),
            ]
        yield server


@pytest.fixture
def prices() -> Iterator[ApiServer]:
    with ApiServer() as server:
        server.route(p.REGION_INDEX_PATH, lambda q, h: Reply.json(p.region_index()))
        for region in (US, EU):
            server.route(p.OFFER_PATH.format(region=region), offer_file(region))
        yield server


@pytest.fixture
def env(aws: Ec2Server, prices: ApiServer, moto_base: str) -> dict[str, str]:
    """What a user of this account would set: keys, region, and the endpoints (EC2 and
    Service Quotas through the loopback EC2, SSM straight to moto, prices from the host)."""
    return {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
        "AWS_REGION": US,
        "SHOAL_AWS_EC2_URL": aws.base + "/ec2/{region}",
        "SHOAL_AWS_QUOTAS_URL": aws.base + "/sq/{region}",
        "SHOAL_AWS_SSM_URL": moto_base,
        "SHOAL_AWS_PRICING_URL": prices.base,
    }


def ec2(moto_base: str, region: str = US) -> Endpoint:
    """moto's EC2 straight, signed by shoal's own client: to look behind the driver."""
    http = aws_http("aws", auth_hint="", credentials=CREDS, policy=FAST)
    return Endpoint(http, moto_base, region, "ec2", CREDS)


def instances(moto_base: str, region: str = US) -> dict[str, dict[str, Any]]:
    """Every instance moto holds: id -> state, type, tags, subnet, zone, spot, user data."""
    from providers.aws.api import items, text

    api = ec2(moto_base, region)
    found: dict[str, dict[str, Any]] = {}
    for reservation in items(api.query("DescribeInstances"), "reservationSet"):
        for item in items(reservation, "instancesSet"):
            found[text(item, "instanceId")] = {
                "state": text(item, "instanceState", "name"),
                "type": text(item, "instanceType"),
                "tags": {text(t, "key"): text(t, "value") for t in items(item, "tagSet")},
                "subnet": text(item, "subnetId"),
                "zone": text(item, "placement", "availabilityZone"),
                "lifecycle": text(item, "instanceLifecycle"),
                "token": text(item, "clientToken"),
                "image": text(item, "imageId"),
            }
    return found


def live(moto_base: str, region: str = US) -> dict[str, dict[str, Any]]:
    return {
        k: v
        for k, v in instances(moto_base, region).items()
        if v["state"] in ("pending", "running")
    }


def by_allocation(moto_base: str, allocation_id: str) -> dict[str, Any]:
    (found,) = [
        i
        for i in instances(moto_base).values()
        if i["tags"].get("shoal:allocation") == allocation_id
    ]
    return found


def subnets(moto_base: str) -> dict[str, str]:
    """moto's default subnets: zone -> subnet id."""
    from providers.aws.api import items, text

    root = ec2(moto_base).query("DescribeSubnets")
    return {text(i, "availabilityZone"): text(i, "subnetId") for i in items(root, "subnetSet")}


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


SMALL = "--cpu 1 --ram 1 -o instance_type=t3.medium"


def alloc(
    cli: Callable[..., Run],
    env: dict[str, str],
    line: str,
    *more: str,
    code: int = 0,
    image: str = f"ssm:{AL2023}",
) -> Run:
    """`shoal alloc --driver aws -o image=IMAGE LINE MORE...` (LINE split as a shell would),
    which must exit with `code`."""
    args = shlex.split(line)
    run = cli("alloc", "--driver", "aws", "-o", f"image={image}", *args, *more, env=env)
    assert run.exit_code == code, (run.exit_code, run.stdout, run.stderr)
    return run


def allocated(cli: Callable[..., Run], env: dict[str, str], line: str) -> dict[str, Any]:
    found: dict[str, Any] = alloc(cli, env, line, "--json").json()
    return found


def config(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)


def dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
