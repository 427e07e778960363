"""`shoal offers ... --json | shoal alloc --offers -` on aws: each offer tried in exactly the
zones `shoal offers` says offer its type (DescribeInstanceTypeOfferings, from moto's EC2
behind the loopback EC2 of tests/drivers/aws/ec2server.py, which answers
InsufficientInstanceCapacity as EC2 does and records each RunInstances)."""

# The aws driver's fixtures (moto, the loopback EC2, the price host) are imported below, and
# taken by name as the tests' arguments.
# ruff: noqa: F811

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Run
from tests.drivers.aws.conftest import (  # noqa: F401 (fixtures)
    AL2023,
    US,
    aws,
    env,
    live,
    moto_base,
    prices,
)
from tests.drivers.aws.ec2server import Ec2Server

Cli = Callable[..., Run]
ICE = "InsufficientInstanceCapacity"
# One T4: g4dn.xlarge alone (4 vCPUs of the G quota's 16). moto offers it in us-east-1a, b,
# c, d and f (not e).
REQUEST = ("-p", "aws", "-r", US, "--gpus", "1", "--gpu", "T4", "--market", "on-demand",
           "--json")  # fmt: skip
TYPE = "g4dn.xlarge"
ZONES = [f"us-east-1{z}" for z in "abcdf"]


def found(cli: Cli, env: dict[str, str]) -> str:
    run = cli("offers", *REQUEST, env=env)
    assert run.exit_code == 0, run.stderr
    (offer,) = run.json()["offers"]
    assert (offer["instanceType"], offer["zones"]) == (TYPE, ZONES)
    return run.stdout


def test_the_zones_shoal_offers_names_are_tried_in_turn_until_one_has_room(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    offers = found(cli, env)
    aws.no_capacity = {(TYPE, "us-east-1a")}
    run = cli("alloc", "--offers", "-", "-o", f"aws.image=ssm:{AL2023}", "--json",
              input=offers, env=env)  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert [line for line in run.stderr.splitlines() if line.startswith("tried ")] == [
        f"tried aws us-east-1a {TYPE} on-demand: {ICE}"
    ]
    (made,) = run.json()
    assert made["resource"]["metadata"]["zone"] == "us-east-1b"
    launched = [r.get("Placement.AvailabilityZone") for r in aws.requests("RunInstances")]
    assert launched == ["us-east-1a", "us-east-1b"]
    assert [i["zone"] for i in live(moto_base).values()] == ["us-east-1b"]


def test_an_offer_with_zones_tries_exactly_those_zones(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    offers = found(cli, env)
    aws.no_capacity = {(TYPE, zone) for zone in [*ZONES, "us-east-1e", ""]}
    run = cli("alloc", "--offers", "-", "-o", f"aws.image=ssm:{AL2023}", input=offers, env=env)
    assert run.exit_code == 75, run.stderr
    launched = [r.get("Placement.AvailabilityZone") for r in aws.requests("RunInstances")]
    assert launched == ZONES  # us-east-1e does not offer it: never asked
    assert not live(moto_base)
