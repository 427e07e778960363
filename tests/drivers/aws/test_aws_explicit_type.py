"""`alloc --driver aws -o instance_type=X` (issue 24, item 6): a type of another
architecture than the image is refused (2) before any launch, naming both (the image's
from DescribeImages, the type's from the price catalog or DescribeInstanceTypes); a named
type needs no --cpu/--ram (its shape says them, and the allocation records them). Against
moto's EC2 and SSM behind the loopback EC2 (conftest.py)."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Run
from tests.drivers.aws.conftest import AL2023, alloc, allocated, live, ok
from tests.drivers.aws.ec2server import Ec2Server

Cli = Callable[..., Run]
AL2023_ARM = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-arm64"


def refused_before_launch(run: Run, aws: Ec2Server, moto_base: str, *needles: str) -> None:
    for needle in needles:
        assert needle in run.stderr, (needle, run.stderr)
    assert len(run.stderr.strip().splitlines()) == 1 and run.stdout == ""
    assert not aws.requests("RunInstances") and not live(moto_base)


def test_a_graviton_type_with_an_x86_image_is_2_naming_both(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    # t4g.xlarge is in the region's price catalog (AWS Graviton2: arm64); AL2023 x86_64.
    run = alloc(cli, env, "-o instance_type=t4g.xlarge", code=2)
    refused_before_launch(
        run, aws, moto_base, "options.instance_type", "t4g.xlarge is arm64", "image is x86_64"
    )


def test_an_x86_type_with_an_arm_image_is_2_naming_both(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    line = "--cpu 1 --ram 1 -o instance_type=m5.large"
    run = alloc(cli, env, line, code=2, image=f"ssm:{AL2023_ARM}")
    refused_before_launch(run, aws, moto_base, "m5.large is x86_64", "the image is arm64")


def test_a_type_only_ec2_knows_is_checked_by_its_described_architecture(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    # c6g.large is not in the price catalog: DescribeInstanceTypes says arm64.
    run = alloc(cli, env, "--cpu 1 --ram 1 -o instance_type=c6g.large", code=2)
    refused_before_launch(run, aws, moto_base, "c6g.large is arm64", "image is x86_64")
    assert aws.requests("DescribeInstanceTypes")


def test_a_named_type_needs_no_cpu_or_ram(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    made = allocated(cli, env, "-o instance_type=m5.large")
    assert made["status"] == "ALLOCATED"
    assert (made["cpu"], made["ram"]) == (2, 8)  # m5.large's shape, as the row records it
    assert made["definition"]["resources"]["cpu"] == 2
    (sent,) = aws.requests("RunInstances")
    assert sent["InstanceType"] == "m5.large"
    assert [i["type"] for i in live(moto_base).values()] == ["m5.large"]
    # An arm64 image with an arm64 type: the pair that boots.
    arm = alloc(cli, env, "-o instance_type=t4g.xlarge --json", image=f"ssm:{AL2023_ARM}")
    assert (arm.json()["cpu"], arm.json()["ram"]) == (4, 16)
    dry = ok(cli("alloc", "--driver", "aws", "-o", f"image=ssm:{AL2023}", "-o",
                 "instance_type=m5.xlarge", "--dry-run", "--json", env=env)).json()  # fmt: skip
    assert dry["choice"]["instance_type"] == "m5.xlarge" and dry["choice"]["image_arch"] == "x86_64"
    assert dry["definition"]["resources"]["cpu"] == 4


def test_without_a_type_cpu_and_ram_are_still_required(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    run = alloc(cli, env, "--ram 4", code=2)
    assert "resources.cpu: required" in run.stderr and "-o instance_type" in run.stderr
    run = cli("alloc", "--driver", "process", "-o", "entry=true", env=env)
    assert run.exit_code == 2 and "resources.cpu" in run.stderr
    # The process driver takes no instance type: it is not offered as the way round.
    assert "instance_type" not in run.stderr
    assert not aws.requests("RunInstances")
