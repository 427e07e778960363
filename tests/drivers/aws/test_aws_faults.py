"""What EC2 does that moto will not: throttling, refusals, no capacity, answers that never
come, an error echoing the request's credentials; from the loopback EC2 (ec2server.py),
in EC2's own XML, in front of moto. Through the CLI, as users meet them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.conftest import Run
from tests.drivers.aws.conftest import (
    KEY_ID,
    SECRET,
    SMALL,
    TOKEN,
    US,
    alloc,
    allocated,
    by_allocation,
    config,
    instances,
    live,
    subnets,
)
from tests.drivers.aws.ec2server import Ec2Server

Cli = Callable[..., Run]


def clean(run: Run) -> None:
    """No credential in anything shoal printed."""
    text = run.stdout + run.stderr
    assert SECRET not in text and TOKEN not in text and KEY_ID not in text, text


def test_throttling_is_retried_and_launches_once(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.throttle[(US, "RunInstances")] = 2
    made = allocated(cli, env, SMALL)
    assert len(live(moto_base)) == 1
    assert aws.calls_to("RunInstances").count("throttled") == 2
    assert by_allocation(moto_base, made["id"])["state"] == "running"


def test_throttling_past_the_retries_is_75(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.throttle[(US, "RunInstances")] = 10
    run = alloc(cli, env, SMALL, code=75)
    assert "RequestLimitExceeded" in run.stderr and "throttled" in run.stderr
    clean(run)
    assert not live(moto_base)
    listed = cli("status", "--all", "--json", env=env).json()
    assert [r["status"] for r in listed] == ["FAILED"]


def test_an_answer_that_never_came_is_asked_again_with_the_same_token(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    # The request reached EC2 and launched; the connection dropped before the answer. The
    # retry carries the same ClientToken, which EC2 answers with that instance.
    aws.drop["RunInstances"] = 1
    made = allocated(cli, env, SMALL)
    tokens = [r["ClientToken"] for r in aws.requests("RunInstances")]
    assert tokens == [made["id"], made["id"]]
    assert list(live(moto_base)) == [made["resource"]["metadata"]["instance_id"]]


def test_refused_credentials_are_77_and_never_shown(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    for code in ("AuthFailure", "UnauthorizedOperation"):
        aws.refuse[(US, "RunInstances")] = code
        run = alloc(cli, env, SMALL, code=77)
        assert code in run.stderr and "AWS_ACCESS_KEY_ID" in run.stderr
        clean(run)
    aws.refuse.clear()
    aws.refuse[(US, "DescribeInstances")] = "UnauthorizedOperation"
    run = cli("status", "--remote", "aws", env=env)
    assert run.exit_code == 77 and "UnauthorizedOperation" in run.stderr
    clean(run)


def test_a_server_echoing_the_credentials_never_shows_them(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    aws.echo.add((US, "RunInstances"))
    run = alloc(cli, env, SMALL, code=2)
    assert "InvalidParameterValue" in run.stderr and "bad request" in run.stderr
    assert "***" in run.stderr
    clean(run)
    aws.echo.clear()
    aws.echo.add((US, "DescribeInstances"))
    listing = cli("status", "--remote", "aws", "--json", env=env)
    assert (
        listing.exit_code == 1
        and "us-east-1 DescribeInstances: InvalidParameterValue" in listing.stderr
    )
    clean(listing)


def test_an_unreachable_endpoint_is_69(cli: Cli, env: dict[str, str]) -> None:
    down = {**env, "SHOAL_AWS_EC2_URL": "http://127.0.0.1:9/ec2/{region}"}
    run = alloc(cli, down, SMALL, code=69)
    assert "127.0.0.1:9" in run.stderr
    clean(run)
    assert cli("status", "--remote", "aws", env=down).exit_code == 69


def test_no_capacity_is_75_naming_what_was_tried(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.no_capacity = {("t3.medium", "")}
    run = alloc(cli, env, SMALL, code=75)
    assert "t3.medium in any zone (InsufficientInstanceCapacity)" in run.stderr
    assert "-o fallback=types" in run.stderr
    assert len(aws.requests("RunInstances")) == 1  # off by default, and never retried on 500
    assert not live(moto_base)


def test_fallback_zones_tries_the_next_configured_subnet(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, home: Path
) -> None:
    zones = subnets(moto_base)
    first, second = zones["us-east-1a"], zones["us-east-1c"]
    config(
        home, f'[drivers."aws/default"]\nsubnets = ["{first}", "{second}"]\nfallback = "zones"\n'
    )
    aws.no_capacity = {("t3.medium", first)}
    made = allocated(cli, env, SMALL)
    assert by_allocation(moto_base, made["id"])["subnet"] == second
    assert [r["SubnetId"] for r in aws.requests("RunInstances")] == [first, second]
    assert [r["ClientToken"] for r in aws.requests("RunInstances")] == [
        made["id"],
        f"{made['id']}-1",
    ]
    # Every subnet full: 75, each named.
    aws.no_capacity.add(("t3.medium", second))
    run = alloc(cli, env, SMALL, code=75)
    assert f"t3.medium in {first}" in run.stderr and f"t3.medium in {second}" in run.stderr


def test_fallback_zones_without_configured_ones_tries_the_regions_zones(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.no_capacity = {("t3.medium", ""), ("t3.medium", "us-east-1a")}
    made = allocated(cli, env, f"{SMALL} -o fallback=zones")
    assert by_allocation(moto_base, made["id"])["zone"] == "us-east-1b"


def test_fallback_types_takes_the_next_cheapest_fitting_type(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.no_capacity = {("t3.xlarge", ""), *(("t3.xlarge", f"us-east-1{z}") for z in "abcdef")}
    made = allocated(cli, env, "--cpu 4 --ram 16 -o fallback=types")
    assert made["resource"]["metadata"]["instance_type"] == "m5.xlarge"
    assert by_allocation(moto_base, made["id"])["type"] == "m5.xlarge"
    assert len(live(moto_base)) == 1
    # A list of named types is tried in order too.
    listed = allocated(
        cli,
        env,
        '--cpu 4 --ram 16 -o \'instance_type=["t3.xlarge","c5.2xlarge"]\' -o fallback=types',
    )
    assert listed["resource"]["metadata"]["instance_type"] == "c5.2xlarge"


def test_config_the_account_refuses_is_78_naming_the_key(
    cli: Cli, env: dict[str, str], home: Path, moto_base: str
) -> None:
    config(home, '[drivers."aws/default"]\nsubnets = ["subnet-0123456789abcdef0"]\n')
    run = alloc(cli, env, SMALL, code=78)
    assert "subnets" in run.stderr and "InvalidSubnetID.NotFound" in run.stderr
    config(home, '[drivers."aws/default"]\nsecurity_groups = ["sg-0123456789abcdef0"]\n')
    run = alloc(cli, env, SMALL, code=78)
    assert "security_groups" in run.stderr
    config(home, '[drivers."aws/default"]\nregion = "moon-1"\n')
    run = alloc(cli, env, SMALL, code=78)
    assert "region" in run.stderr and "moon-1" in run.stderr
    assert not [i for i in instances(moto_base).values() if i["state"] == "running"]


def test_a_failed_alloc_leaves_nothing_running(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    # The launch succeeded, then waiting for it to run failed: the cleanup ends it.
    aws.refuse[(US, "DescribeInstances")] = "UnauthorizedOperation"
    run = alloc(cli, env, f"{SMALL} -o wait=true", code=77)
    assert "UnauthorizedOperation" in run.stderr
    aws.refuse.clear()
    assert not live(moto_base)
