#!/usr/bin/env python3
"""`shoal alloc -> status -> free` of an EC2 instance, beside the same lifecycle by the AWS
CLI (`aws ec2 run-instances`, `describe-instances`, `terminate-instances`), on one moto
server.

Starts moto's server on 127.0.0.1 (tests/providers/aws/moto.py) and, in front of it, the
loopback Service Quotas of tests/providers/aws/quotaserver.py (moto has no EC2 quotas), then
runs --rounds interleaved rounds (default 10, the order rotated each round), each one
sequential cycle of every kind:

- `shoal`: three processes of the installed `shoal` (alloc --json, status ID --json,
  free ID), as a user runs them, with the account's vCPU quotas checked: its EC2 and
  Service Quotas calls go through the loopback server (which passes EC2's to moto);
- `shoal, check_quotas = false`: the same, straight to moto, without the quota check;
- `aws ec2`: three `aws` processes against moto, asked for what shoal asks: the same
  type, image, ClientToken, tags (instance and volumes), user-data, shutdown behaviour
  and IMDSv2 setting, then describe-instances of the instance and terminate-instances.

Both name the instance type and the AMI (no price catalog, no SSM lookup). Target: shoal
at most 1.0x the AWS CLI.

Run from a regular install with the test extras (moto[server]) and the AWS CLI:

    pip install '.[test]' awscli
    python benchmarks/aws_driver.py [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the tests' moto and loopback helpers; appended, so that `cli` still comes from the install
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import check_installed, shoal_command
from container import run

KEY_ID, SECRET = "AKIDBENCHMARK0000001", "benchmark/secret/key/000000000000000001"
REGION = "us-east-1"
AMI_PARAMETER = "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-6.1-x86_64"
TYPE = "t3.medium"
SHOAL, DIRECT, AWS = "shoal", "shoal, check_quotas = false", "aws ec2"
TARGET = 1.0
# What shoal's boot script for a 1h lifetime looks like, for the AWS CLI's request.
USER_DATA = "#!/bin/sh\nshutdown -h +60 'lifetime over'\n"


def timed(steps: list[float], argv: list[str], env: dict[str, str]) -> str:
    start = time.perf_counter()
    out = run(argv, env)
    steps.append(time.perf_counter() - start)
    return out


def shoal_cycle(env: dict[str, str], ami: str) -> list[float]:
    shoal = shoal_command()
    steps: list[float] = []
    out = timed(
        steps,
        [*shoal, "alloc", "--driver", "aws", "--cpu", "1", "--ram", "1", "--lifetime", "1h",
         "-o", f"instance_type={TYPE}", "-o", f"image={ami}", "--json"],
        env,
    )  # fmt: skip
    alloc_id = json.loads(out)["id"]
    status = json.loads(timed(steps, [*shoal, "status", alloc_id, "--json"], env))
    if status["driver_status"] != "ALLOCATED":
        raise SystemExit(f"{alloc_id}: driver reports {status['driver_status']}")
    timed(steps, [*shoal, "free", alloc_id], env)
    return steps


def aws_cycle(env: dict[str, str], binary: str, endpoint: str, ami: str) -> list[float]:
    """What shoal asks of EC2, said to the AWS CLI."""
    token = f"aws-{uuid.uuid4().hex[:8]}"
    tags = (
        f"{{Key=Name,Value=shoal-{token}}},{{Key=shoal:allocation,Value={token}}},"
        "{Key=shoal:managed-by,Value=shoal}"
    )
    aws = [binary, "--endpoint-url", endpoint, "--output", "json", "ec2"]
    steps: list[float] = []
    out = timed(
        steps,
        [*aws, "run-instances", "--image-id", ami, "--instance-type", TYPE, "--count", "1",
         "--client-token", token, "--instance-initiated-shutdown-behavior", "terminate",
         "--metadata-options", "HttpTokens=required,HttpEndpoint=enabled",
         "--user-data", USER_DATA,
         "--tag-specifications", f"ResourceType=instance,Tags=[{tags}]",
         f"ResourceType=volume,Tags=[{tags}]"],
        env,
    )  # fmt: skip
    instance = json.loads(out)["Instances"][0]["InstanceId"]
    seen = json.loads(timed(steps, [*aws, "describe-instances", "--instance-ids", instance], env))
    state = seen["Reservations"][0]["Instances"][0]["State"]["Name"]
    if state not in ("pending", "running"):
        raise SystemExit(f"{instance} is {state}")
    timed(steps, [*aws, "terminate-instances", "--instance-ids", instance], env)
    return steps


def quartiles(values: list[float]) -> tuple[float, float, float]:
    q1, median, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q1, median, q3


def load() -> str:
    """The 1-minute load average, and the CPUs: how much else this machine is doing."""
    return f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def measure(
    cycles: dict[str, Callable[[], list[float]]], rounds: int
) -> dict[str, list[list[float]]]:
    """Per kind, each round's step times; the kinds take turns, the order rotated."""
    taken: dict[str, list[list[float]]] = {kind: [] for kind in cycles}
    kinds = list(cycles)
    for r in range(rounds):
        for kind in kinds[r % len(kinds) :] + kinds[: r % len(kinds)]:
            taken[kind].append(cycles[kind]())
    return taken


def report(taken: dict[str, list[list[float]]], machine: str) -> None:
    rounds = len(taken[SHOAL])
    print(f"{rounds} interleaved rounds, ms per alloc -> status -> free cycle; {machine}")
    print(f"  {'':28} {'median':>7} {'q1':>7} {'q3':>7} {'min':>7} {'max':>7}   steps (medians)")
    walls = {kind: [sum(steps) for steps in values] for kind, values in taken.items()}
    for kind, values in walls.items():
        q1, median, q3 = (v * 1000 for v in quartiles(values))
        low, high = min(values) * 1000, max(values) * 1000
        steps = " + ".join(
            f"{statistics.median(s[i] for s in taken[kind]) * 1000:.0f}" for i in range(3)
        )
        print(f"  {kind:28} {median:7.0f} {q1:7.0f} {q3:7.0f} {low:7.0f} {high:7.0f}   {steps}")
    for kind in (SHOAL, DIRECT):
        ratio = statistics.median(walls[kind]) / statistics.median(walls[AWS])
        paired = [s / a for s, a in zip(walls[kind], walls[AWS], strict=True)]
        q1, mid, q3 = quartiles(paired)
        verdict = "met" if ratio <= TARGET else "NOT MET"
        print(
            f"  {kind} / the AWS CLI: {ratio:.2f}x by the medians (per round: median "
            f"{mid:.2f}x, quartiles {q1:.2f}-{q3:.2f}x); target <= {TARGET}x: {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    check_installed()
    binary = shutil.which("aws")
    if binary is None:
        raise SystemExit("no `aws` on PATH: pip install awscli")
    from providers.aws.sigv4 import Credentials
    from tests.providers.aws.moto import moto_server
    from tests.providers.aws.quotaserver import AwsServer, quota

    work = Path(tempfile.mkdtemp(prefix="shoal-bench-aws-"))
    checks = {
        "MOTO_ENABLE_AMI_VALIDATION": "true",
        "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true",
    }
    try:
        with (
            moto_server(env=checks) as moto,
            AwsServer(Credentials(KEY_ID, SECRET), (REGION,)) as sq,
        ):
            sq.upstream, sq.page = moto, 100
            sq.region(REGION).applied = [quota("L-1216C47A", 100000, "Running On-Demand Standard")]
            base = {
                **{k: v for k, v in os.environ.items() if not k.startswith(("SHOAL_", "AWS_"))},
                "AWS_ACCESS_KEY_ID": KEY_ID,
                "AWS_SECRET_ACCESS_KEY": SECRET,
                "AWS_CONFIG_FILE": str(work / "none"),
                "AWS_SHARED_CREDENTIALS_FILE": str(work / "none"),
            }
            aws_env = {**base, "AWS_DEFAULT_REGION": REGION}
            ami = json.loads(
                run(
                    [
                        binary,
                        "--endpoint-url",
                        moto,
                        "ssm",
                        "get-parameter",
                        "--name",
                        AMI_PARAMETER,
                    ],
                    aws_env,
                )
            )["Parameter"]["Value"]
            homes = {SHOAL: work / "checked", DIRECT: work / "direct"}
            for home in homes.values():
                home.mkdir()
            (homes[DIRECT] / "config.toml").write_text(
                '[drivers."aws/default"]\ncheck_quotas = false\n'
            )
            shoal_env = {**base, "AWS_REGION": REGION, "SHOAL_AWS_SSM_URL": moto}
            checked = {
                **shoal_env,
                "SHOAL_HOME": str(homes[SHOAL]),
                "SHOAL_AWS_EC2_URL": sq.base + "/ec2/{region}",
                "SHOAL_AWS_QUOTAS_URL": sq.base + "/sq/{region}",
            }
            direct = {**shoal_env, "SHOAL_HOME": str(homes[DIRECT]), "SHOAL_AWS_EC2_URL": moto}
            cycles: dict[str, Callable[[], list[float]]] = {
                SHOAL: lambda: shoal_cycle(checked, ami),
                DIRECT: lambda: shoal_cycle(direct, ami),
                AWS: lambda: aws_cycle(aws_env, binary, moto, ami),
            }
            for cycle in cycles.values():  # warm: page cache, moto's first answers
                cycle()
            version = run([binary, "--version"], aws_env).strip() or "aws"
            print(f"shoal: {' '.join(shoal_command())}; {version}; moto at {moto}")
            print(f"{TYPE}, {ami}, --cpu 1 --ram 1 --lifetime 1h on both sides")
            before = load()
            taken = measure(cycles, args.rounds)
            report(taken, f"{before} before, {load()} after")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
