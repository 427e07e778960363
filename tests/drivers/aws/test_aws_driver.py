"""The `aws` driver through the CLI, as users run it, against moto's EC2 and SSM (behind
the loopback EC2 of ec2server.py, which adds what moto lacks): alloc, status, free, the
remote listing from another machine, the dry run's choice, tasks, logs, capacity from the
account's quotas, and the inputs that are refused."""

from __future__ import annotations

import base64
import time
from collections.abc import Callable
from pathlib import Path

from providers.aws.api import items, text
from tests.conftest import Run
from tests.drivers.aws.conftest import (
    AL2023,
    EU,
    SECRET,
    SMALL,
    STANDARD,
    TOKEN,
    US,
    alloc,
    allocated,
    by_allocation,
    config,
    ec2,
    instances,
    live,
    ok,
    subnets,
)
from tests.drivers.aws.ec2server import Ec2Server

Cli = Callable[..., Run]


def elsewhere(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The same account from another machine: a SHOAL_HOME (and ledger) of its own."""
    other = tmp_path / "other-machine"
    other.mkdir(exist_ok=True)
    return {**env, "SHOAL_HOME": str(other)}


def test_alloc_status_free_a_tagged_instance_with_its_lifetime_armed(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    made = allocated(
        cli,
        env,
        "--cpu 2 --ram 8 -o instance_type=m5.large --lifetime 2h -m RUN=7 "
        "-o 'entry=python3 -m http.server 8080' -o 'env={\"MODE\": \"ci\"}'",
    )
    assert made["status"] == "ALLOCATED" and made["id"].startswith("aws-")
    meta = made["resource"]["metadata"]
    assert meta["instance_type"] == "m5.large" and meta["region"] == US
    assert meta["instance_id"].startswith("i-") and meta["market"] == "on-demand"
    assert made["resource"]["ip_addr"] in (meta["public_ip"], meta["private_ip"])
    seen = by_allocation(moto_base, made["id"])
    assert seen["state"] == "running" and seen["type"] == "m5.large"
    assert seen["token"] == made["id"]  # ClientToken: a resent RunInstances launches nothing
    tags = seen["tags"]
    assert tags["shoal:managed-by"] == "shoal" and tags["shoal:driver"] == "aws/default"
    assert tags["shoal:expires"] >= made["expires"][:19] + "Z"
    (sent,) = aws.requests("RunInstances")
    assert sent["InstanceInitiatedShutdownBehavior"] == "terminate"
    assert sent["MetadataOptions.HttpTokens"] == "required"
    assert sent["TagSpecification.2.ResourceType"] == "volume"  # the volumes are tagged too
    script = base64.b64decode(sent["UserData"]).decode()
    assert "shutdown -h" in script and "export RUN=7" in script and "export MODE=ci" in script
    assert f"export SHOAL_ALLOCATION_ID={made['id']}" in script
    assert script.rstrip().endswith("exec python3 -m http.server 8080")
    assert sent["ImageId"] == seen["image"]  # the SSM parameter, resolved

    status = ok(cli("status", made["id"], "--json", env=env)).json()
    assert status["driver_status"] == "ALLOCATED" and status["drift"] is None
    detail = status["detail"]
    assert detail["state"] == "running" and detail["instance_id"] == meta["instance_id"]
    assert detail["expires"] == tags["shoal:expires"]

    assert "freed" in ok(cli("free", made["id"], env=env)).stderr
    assert instances(moto_base)[meta["instance_id"]]["state"] in ("shutting-down", "terminated")
    assert "already freed" in ok(cli("free", made["id"], env=env)).stderr
    after = ok(cli("status", made["id"], "--json", env=env)).json()
    assert after["status"] == "FREED" and after["detail"]["by"] == "shoal"


def test_an_instance_ended_behind_shoals_back_turns_gone_with_the_reason(
    cli: Cli, env: dict[str, str], moto_base: str
) -> None:
    made = allocated(cli, env, SMALL)
    instance = made["resource"]["metadata"]["instance_id"]
    ec2(moto_base).query("TerminateInstances", {"InstanceId.1": instance})
    status = ok(cli("status", made["id"], "--json", env=env)).json()
    assert status["status"] == "GONE" and status["driver_status"] == "NONE"
    assert status["detail"]["reason"] == "terminated"
    assert "UserInitiatedShutdown" in status["detail"]["message"]
    ok(cli("free", made["id"], env=env))  # freeing what is gone is harmless


def test_the_remote_listing_and_free_from_another_machine(
    cli: Cli, env: dict[str, str], moto_base: str, tmp_path: Path
) -> None:
    made = allocated(cli, env, SMALL)
    other = elsewhere(env, tmp_path)
    assert ok(cli("status", "--json", env=other)).json() == []  # its ledger has nothing
    (row,) = ok(cli("status", "--remote", "aws", "--json", env=other)).json()
    assert row["id"] == made["id"] and row["status"] == "running" and row["detail"]["holds"]
    assert row["detail"]["instance_id"] == made["resource"]["metadata"]["instance_id"]
    assert row["expires"] is None and row["detail"]["expired"] is False
    table = ok(cli("status", "--remote", "aws", env=other)).stdout
    assert made["id"] in table and "t3.medium" in table
    freed = ok(cli("free", made["id"], "--remote", "aws", env=other))
    assert "made on another machine" in freed.stderr
    assert not live(moto_base)
    # The machine that made it finds it gone.
    assert ok(cli("status", made["id"], "--json", env=env)).json()["status"] == "GONE"


def test_expiry_is_honoured_by_free_expired_here_and_remotely(
    cli: Cli, env: dict[str, str], moto_base: str, tmp_path: Path
) -> None:
    # moto runs no user-data: the instances stay up past their lifetime, as they would on an
    # image without cloud-init; shoal ends them.
    other = elsewhere(env, tmp_path)
    mine = allocated(cli, env, f"{SMALL} --lifetime 1s")
    theirs = allocated(cli, other, f"{SMALL} --lifetime 1s")
    keep = allocated(cli, env, f"{SMALL} --lifetime 1h")
    time.sleep(2.1)  # 1 s, and the tag's whole second
    rows = {r["id"]: r for r in ok(cli("status", "--remote", "aws", "--json", env=env)).json()}
    assert rows[theirs["id"]]["detail"]["expired"] is True
    assert rows[keep["id"]]["detail"]["expired"] is False
    assert "past its expiry" in rows[theirs["id"]]["note"]
    table = ok(cli("status", "--remote", "aws", env=env)).stdout
    assert "expired" in table
    # This machine's: the next command finds it past its lifetime and ends it (EXPIRED).
    assert ok(cli("status", mine["id"], "--json", env=env)).json()["status"] == "EXPIRED"
    assert by_allocation(moto_base, mine["id"])["state"] in ("shutting-down", "terminated")
    # The other machine's: `free --expired --remote aws` ends it from here.
    freed = ok(cli("free", "--expired", "--remote", "aws", "--json", env=env)).json()
    assert [f["id"] for f in freed] == [theirs["id"]]
    assert by_allocation(moto_base, theirs["id"])["state"] in ("shutting-down", "terminated")
    assert by_allocation(moto_base, keep["id"])["state"] == "running"
    assert [f["id"] for f in ok(cli("free", "--expired", "--json", env=env)).json()] == [mine["id"]]


def test_dry_run_shows_the_cheapest_fitting_type_its_price_and_the_skipped(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    result = alloc(cli, env, "--cpu 4 --ram 16 --dry-run --json").json()
    choice = result["choice"]
    assert choice["instance_type"] == "t3.xlarge" and choice["price"] == 0.1664
    assert choice["market"] == "on-demand" and choice["region"] == US
    assert choice["image_arch"] == "x86_64"
    assert {s["instance_type"]: s["reason"] for s in choice["skipped"]} == {
        "t3.medium": "2 vCPUs < 4",
        "m5.large": "2 vCPUs < 4",
        "t4g.xlarge": "is arm64; the image is x86_64",
    }
    assert choice["skipped_by_reason"] == {"arch": 1, "vcpus": 2}
    assert [n["instance_type"] for n in choice["next"]][:2] == ["m5.xlarge", "c5.2xlarge"]
    # 64 standard vCPUs free: 16 instances of 4 vCPUs.
    assert result["fits"] == 16 and choice["capacity"]["quotas"][0]["quota"] == STANDARD
    assert not aws.requests("RunInstances")
    table = alloc(cli, env, "--cpu 4 --ram 16 --dry-run")
    assert table.stdout == "16\n"  # stdout keeps the count; the why is on stderr
    assert "t3.xlarge" in table.stderr and "is arm64; the image is x86_64" in table.stderr
    assert "0.1664" in table.stderr


def test_the_choice_follows_gpus_spot_and_allowed_types(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    # Spot prices as the catalog reads them (the lowest zone's), fetched with the prices.
    aws.spot = {
        "t3.xlarge": {"us-east-1a": 0.07},
        "m5.xlarge": {"us-east-1b": 0.05, "us-east-1a": 0.09},
    }
    gpu = alloc(cli, env, "--cpu 4 --ram 16 -o gpus=1 -o gpu=L4 --dry-run --json").json()
    choice = gpu["choice"]
    assert choice["instance_type"] == "g6.xlarge" and choice["gpu"] == "L4"
    skipped = {s["instance_type"]: s["reason"] for s in choice["skipped"]}
    assert skipped["g4dn.xlarge"] == "has T4 GPUs, not L4"
    assert gpu["fits"] == 4  # G on-demand: 16 vCPUs
    allowed = alloc(cli, env, "--cpu 4 --ram 16 -o 'allowed_types=[\"m5.*\"]' --dry-run --json")
    assert allowed.json()["choice"]["instance_type"] == "m5.xlarge"
    spot = alloc(cli, env, "--cpu 4 --ram 16 -o spot=true --dry-run --json").json()["choice"]
    assert spot["instance_type"] == "m5.xlarge" and spot["price"] == 0.05
    assert spot["market"] == "spot"


def test_alloc_launches_the_choice_and_spot_asks_for_spot(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    made = allocated(cli, env, "--cpu 4 --ram 16 -o spot=true")
    assert made["resource"]["metadata"]["instance_type"] == "t3.xlarge"  # moto's spot: one price
    seen = by_allocation(moto_base, made["id"])
    assert seen["type"] == "t3.xlarge" and seen["lifecycle"] == "spot"
    (sent,) = aws.requests("RunInstances")
    assert sent["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"


def test_capacity_is_what_the_vcpu_quota_still_takes(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.region(US).applied[0]["Value"] = 8  # standard on-demand: 8 vCPUs
    line = "--cpu 4 --ram 16 -o instance_type=m5.xlarge"
    assert alloc(cli, env, f"{line} --dry-run").stdout == "2\n"
    allocated(cli, env, line)
    assert alloc(cli, env, f"{line} --dry-run").stdout == "1\n"  # its own launch is counted
    allocated(cli, env, line)
    full = alloc(cli, env, line, code=75)
    assert "no capacity" in full.stderr and STANDARD in full.stderr
    assert len(live(moto_base)) == 2


def test_quotas_that_cannot_be_read_are_unlimited_with_a_note(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    aws.refuse[(US, "ListServiceQuotas")] = "AccessDeniedException"
    aws.refuse[(US, "ListAWSDefaultServiceQuotas")] = "AccessDeniedException"
    result = alloc(cli, env, f"{SMALL} --dry-run --json").json()
    assert result["unlimited"] is True
    assert "not counted" in result["choice"]["capacity"]["note"]
    assert any("servicequotas:" in n for n in result["choice"]["capacity"]["notes"])


def test_quotas_that_fail_are_unlimited_with_a_note_remembered_for_a_while(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    aws.garbage.add((US, "DescribeInstances"))  # a malformed answer: the snapshot fails
    broken = alloc(cli, env, f"{SMALL} --dry-run")
    assert broken.stdout == "unlimited\n" and "capacity not checked" in broken.stderr
    asked = len(aws.calls_to("ListServiceQuotas"))
    again = alloc(cli, env, f"{SMALL} --dry-run")  # not asked again until the quota TTL
    assert "noted earlier" in again.stderr and len(aws.calls_to("ListServiceQuotas")) == asked


def test_tasks_snapshot_and_console_and_logs(cli: Cli, env: dict[str, str], moto_base: str) -> None:
    made = allocated(cli, env, SMALL)
    snap = ok(cli("task", made["id"], "snapshot", "--options", '{"name": "ci-cache"}', env=env))
    image = snap.json()["image"]
    assert image.startswith("ami-") and snap.json()["name"] == "ci-cache"
    (found,) = items(ec2(moto_base).query("DescribeImages", {"ImageId.1": image}), "imagesSet")
    assert text(found, "name") == "ci-cache"
    console = ok(cli("task", made["id"], "console", "--options", '{"lines": 2}', env=env)).json()
    assert len(console["output"].splitlines()) == 2  # moto's console text, base64-decoded
    logs = ok(cli("logs", made["id"], "--tail", "1", env=env))
    assert logs.stdout.strip() == console["output"].splitlines()[-1].strip()
    bad = cli("task", made["id"], "console", "--options", '{"lines": 0}', env=env)
    assert bad.exit_code == 2 and "lines" in bad.stderr


def test_credentials_and_region_from_an_aws_profile_and_wait_for_running(
    cli: Cli, env: dict[str, str], moto_base: str, tmp_path: Path
) -> None:
    (tmp_path / "credentials").write_text(
        f"[ci]\naws_access_key_id = {env['AWS_ACCESS_KEY_ID']}\n"
        f"aws_secret_access_key = {SECRET}\naws_session_token = {TOKEN}\n"
    )
    (tmp_path / "config").write_text(f"[profile ci]\nregion = {EU}\n")
    profile = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    profile.update(
        AWS_PROFILE="ci",
        AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "credentials"),
        AWS_CONFIG_FILE=str(tmp_path / "config"),
    )
    made = allocated(cli, profile, f"{SMALL} -o wait=true")
    meta = made["resource"]["metadata"]
    assert meta["region"] == EU and meta["zone"].startswith(EU)
    assert made["resource"]["ip_addr"] == meta["public_ip"]  # known once it runs
    assert live(moto_base, EU) and not live(moto_base, US)
    ok(cli("free", made["id"], env=profile))
    assert not live(moto_base, EU)


def test_the_ec2_alias_and_the_config_of_an_instance(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, home: Path
) -> None:
    subnet = subnets(moto_base)["us-east-1b"]
    config(
        home,
        f'[drivers."ec2/ci"]\nregion = "{US}"\nimage = "ssm:{AL2023}"\nsubnets = ["{subnet}"]\n'
        'root_disk_gib = 40\ntags = { team = "infra" }\n',
    )
    run = cli("alloc", "--driver", "ec2", *SMALL.split(), "--json", env={**env, "AWS_REGION": EU})
    made = ok(run).json()
    # An alias is the driver: its table and its allocations are aws's.
    assert made["driver"] == "aws/ci" and made["resource"]["metadata"]["region"] == US
    seen = by_allocation(moto_base, made["id"])
    assert seen["subnet"] == subnet and seen["tags"]["team"] == "infra"
    (sent,) = aws.requests("RunInstances")
    assert sent["BlockDeviceMapping.1.Ebs.VolumeSize"] == "40"
    assert sent["BlockDeviceMapping.1.DeviceName"] == "/dev/xvda"  # the AMI's root device


# -- what is refused --------------------------------------------------------------------------


def refused(run: Run, *needles: str) -> None:
    for needle in needles:
        assert needle in run.stderr, (needle, run.stderr)
    assert SECRET not in run.stderr + run.stdout and TOKEN not in run.stderr + run.stdout


def test_no_credentials_is_77_naming_the_variables(cli: Cli, env: dict[str, str]) -> None:
    bare = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    refused(alloc(cli, bare, SMALL, code=77), "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def test_unknown_instance_type_or_ami_is_2_naming_it(
    cli: Cli, env: dict[str, str], moto_base: str
) -> None:
    one = "--cpu 1 --ram 1"
    unknown = alloc(cli, env, f"{one} -o instance_type=m5.bogus", code=2)
    refused(unknown, "options.instance_type", "m5.bogus")
    refused(alloc(cli, env, f"{one} -o instance_type=bogus", code=2), "'bogus'")
    ami = "ami-0123456789abcdef0"
    # Named type: RunInstances refuses the AMI. Chosen type: DescribeImages does, first.
    for line in (SMALL, one):
        refused(alloc(cli, env, line, image=ami, code=2), "options.image", ami, "InvalidAMIID")
    missing = alloc(cli, env, one, image="ssm:/aws/service/none", code=2)
    refused(missing, "options.image", "/aws/service/none", "ParameterNotFound")
    assert not live(moto_base)


def test_a_type_that_does_not_fit_or_lacks_the_gpus_is_2(cli: Cli, env: dict[str, str]) -> None:
    small = alloc(cli, env, "--cpu 8 --ram 32 -o instance_type=m5.large", code=2)
    refused(small, "m5.large does not fit", "2 vCPUs < 8")
    no_gpu = alloc(cli, env, "--cpu 2 --ram 8 -o instance_type=m5.xlarge -o gpus=1", code=2)
    refused(no_gpu, "m5.xlarge has no GPU")
    other = alloc(cli, env, "--cpu 2 --ram 8 -o instance_type=g4dn.xlarge -o gpu=L4", code=2)
    refused(other, "has T4 GPUs, not L4")
    refused(alloc(cli, env, "--cpu 512 --ram 8", code=2), "no on-demand instance type", "cpu=512")


def test_a_region_without_the_type_is_2(cli: Cli, env: dict[str, str]) -> None:
    line = "--cpu 1 --ram 1 -o instance_type=g6.xlarge"
    refused(
        alloc(cli, {**env, "AWS_REGION": EU}, line, code=2), "g6.xlarge is not offered in " + EU
    )


def test_spot_below_the_current_price_is_2_saying_the_price(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    aws.spot = {"m5.xlarge": {"us-east-1a": 0.0812, "us-east-1b": 0.0799}}
    line = "--cpu 2 --ram 8 -o instance_type=m5.xlarge -o spot=true -o max_price=0.05"
    refused(alloc(cli, env, line, code=2), "options.max_price", "0.0799 USD/h", "us-east-1b")
    assert not aws.requests("RunInstances")
    refused(alloc(cli, env, "--cpu 2 --ram 8 -o max_price=0.05", code=2), "spot=true")


def test_secrets_never_go_into_user_data_or_tags(cli: Cli, env: dict[str, str]) -> None:
    meta = alloc(cli, env, f"{SMALL} -m GITHUB_TOKEN=abc", code=2)
    refused(meta, "--meta GITHUB_TOKEN", "instance_profile")
    variable = alloc(cli, env, f'{SMALL} -o \'env={{"DB_PASSWORD": "x"}}\'', code=2)
    refused(variable, "options.env.DB_PASSWORD")
    tag = alloc(cli, env, f'{SMALL} -o \'tags={{"api_key": "x"}}\'', code=2)
    refused(tag, "looks like a credential")
    refused(alloc(cli, env, f'{SMALL} -o \'tags={{"shoal:x": "y"}}\'', code=2), "reserved")


def test_authentication_in_a_definition_is_refused(
    cli: Cli, env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "def.yaml"
    path.write_text(
        "driver: aws\nresources: {cpu: 1, ram: 1}\n"
        f"options: {{image: 'ssm:{AL2023}', instance_type: t3.medium}}\n"
        "authentication: {username: ci, password: hunter2}\n"
    )
    run = cli("alloc", str(path), env=env)
    assert run.exit_code == 2
    refused(run, "authentication", "key_name")
    assert "hunter2" not in run.stderr
