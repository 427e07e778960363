"""`pricing --json` carries each priced type's shape (issue 24, item 6), as its table does:
a top-level `shapes` object keyed like `items`, each the `types --json` object, so a script
picking the cheapest GPU type sees its architecture and GPUs. Through the CLI against the
loopback AWS Price List (tests/cli/test_account_commands.py's rig)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from tests.cli import test_account_commands as rig
from tests.cli.test_account_commands import env
from tests.cli.test_json_schema import check_each
from tests.providers.aws.quotaserver import AwsServer
from tests.providers.aws.test_accounts import US

Cli = Callable[..., Any]
aws = rig.aws  # the fixture: the loopback AWS with its Price List files


def priced(cli: Cli, server: AwsServer, *more: str) -> list[dict[str, Any]]:
    run = cli("pricing", "-p", "aws", "-r", US, "--json", *more, env=env(server))
    assert run.exit_code == 0, run.stderr
    found: list[dict[str, Any]] = json.loads(run.stdout)
    return found


def test_every_priced_type_has_its_shape(cli: Cli, aws: AwsServer) -> None:
    (answer,) = priced(cli, aws, "--select", "gpu_count>=1")
    assert answer["items"] and set(answer["shapes"]) == set(answer["items"])
    p5 = answer["shapes"]["p5.48xlarge"]
    assert (p5["instanceType"], p5["name"], p5["vcpus"], p5["memory_gib"]) == (
        "p5.48xlarge",
        "p5.48xlarge",
        192,
        2048,
    )
    gpus = (p5["gpu"], p5["gpu_count"], p5["gpu_memory_gib"], p5["arch"])
    assert gpus == ("H100", 8, 80, "x86_64")
    for name, shape in answer["shapes"].items():
        assert shape["instanceType"] == name and shape["gpu_count"] >= 1
        assert shape["arch"] in ("x86_64", "arm64")
    check_each([answer], "pricing")
    # The table shows the same shape beside the price.
    table = cli("pricing", "-p", "aws", "-r", US, "--select", "gpu_count>=1", env=env(aws))
    (row,) = [line.split() for line in table.stdout.splitlines() if "p5.48xlarge" in line]
    assert "192" in row and "H100" in " ".join(row)


def test_a_limited_answer_carries_the_shapes_of_its_items_only(cli: Cli, aws: AwsServer) -> None:
    (answer,) = priced(cli, aws, "--sort", "price", "--limit", "3")
    assert len(answer["items"]) == 3 and set(answer["shapes"]) == set(answer["items"])
    (available,) = priced(cli, aws, "--select", "gpu_count>=1", "--available")
    assert set(available["shapes"]) == set(available["items"])  # dropped types go with it
    check_each([answer, available], "pricing")
