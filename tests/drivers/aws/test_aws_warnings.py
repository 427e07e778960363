"""Warnings of the `aws` driver print once, with one `aws/default: ` prefix: the quota note
of a dry run is a warning as it happens and a line of the dry run's report, which said it
again (`aws/default: aws/default: ...`). Against moto behind the loopback EC2."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Run
from tests.drivers.aws.conftest import SMALL, US, alloc
from tests.drivers.aws.ec2server import Ec2Server

Cli = Callable[..., Run]
NOTE = "capacity not checked"


def said(run: Run) -> list[str]:
    return [line for line in run.stderr.splitlines() if NOTE in line]


def test_the_quota_note_of_a_dry_run_is_one_warning_with_one_prefix(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    aws.garbage.add((US, "DescribeInstances"))  # a malformed answer: quotas unreadable
    for run in (alloc(cli, env, f"{SMALL} --dry-run"), alloc(cli, env, f"{SMALL} --dry-run")):
        (line,) = said(run)  # the second run: "(noted earlier)", still once
        assert line.startswith("shoal: warning: aws/default: the account's quotas in us-east-1")
        assert "aws/default: aws/default" not in run.stderr
    listed = alloc(cli, env, f"{SMALL} --dry-run", "--json")
    (line,) = said(listed)
    assert line.startswith("shoal: warning: aws/default: ")
    note = listed.json()["choice"]["capacity"]["note"]
    assert note.startswith("the account's quotas in us-east-1") and NOTE in note  # no prefix
    made = alloc(cli, env, SMALL)
    assert len(said(made)) == 1 and "aws/default: aws/default" not in made.stderr
