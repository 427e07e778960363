"""The `aws` driver's parts on their own: the type choice, the boot script (run for real
with a stand-in `shutdown`), RunInstances' parameters and its fallbacks, how an ended
instance is explained, EC2's XML read."""

from __future__ import annotations

import os
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from xml.etree import ElementTree

import pytest

from drivers.aws.ec2 import ApiError, Instance, _instance, _type_shape
from drivers.aws.launch import Place, Request, launch
from drivers.aws.state import detail as _detail
from drivers.aws.tasks import _new_part
from drivers.vm import choice as C
from drivers.vm.userdata import MAX_BYTES, user_data
from providers.core.errors import ConfigError, NoCapacityError, UsageError
from providers.models import InstanceTypeSpec, RegionSpec, ResourcePricing, ResourcePricingItem

# -- the type choice --------------------------------------------------------------------------


def spec(
    name: str,
    vcpus: float,
    memory: float,
    arch: str = "x86_64",
    gpu: str = "",
    gpu_count: int = 0,
    gpu_memory_gib: float = 0.0,
) -> InstanceTypeSpec:
    return InstanceTypeSpec(
        name=name, vcpus=vcpus, memory_gib=memory, arch=arch, gpu=gpu, gpu_count=gpu_count,
        gpu_memory_gib=gpu_memory_gib,
    )  # fmt: skip


def pricing(*rows: tuple[InstanceTypeSpec, float | None, float | None]) -> ResourcePricing:
    return ResourcePricing(
        region=RegionSpec(name="us-east-1"),
        items={
            s.name: ResourcePricingItem(on_demand_price=od, spot_price=sp) for s, od, sp in rows
        },
        shapes={s.name: s for s, _, _ in rows},
        as_of=datetime(2026, 12, 1, tzinfo=UTC),
    )


CATALOG = pricing(
    (spec("t3.medium", 2, 4), 0.0416, 0.015),
    (spec("t4g.xlarge", 4, 16, arch="arm64"), 0.1344, 0.04),
    (spec("t3.xlarge", 4, 16), 0.1664, 0.06),
    (spec("m5.xlarge", 4, 16), 0.192, 0.05),
    (spec("r5.large", 2, 16), 0.126, None),
    (spec("g4dn.xlarge", 4, 16, gpu="T4", gpu_count=1, gpu_memory_gib=16), 0.526, 0.2),
    (spec("g6.xlarge", 4, 16, gpu="L4", gpu_count=1, gpu_memory_gib=24), 0.8048, 0.3),
    (spec("p4d.24xlarge", 96, 1152, gpu="A100", gpu_count=8, gpu_memory_gib=40), 32.77, None),
    (spec("p4de.24xlarge", 96, 1152, gpu="A100", gpu_count=8, gpu_memory_gib=80), 40.96, None),
    (InstanceTypeSpec(name="x9.odd"), 0.001, None),
)


def test_the_cheapest_fitting_type_and_why_the_cheaper_were_skipped() -> None:
    chosen = C.from_catalog(CATALOG, C.Want(cpu=4, ram=16, arch="x86_64"))
    assert [c.name for c in chosen.fitting] == ["t3.xlarge", "m5.xlarge"]
    assert [(s.candidate.name, s.reason) for s in chosen.skipped] == [
        ("x9.odd", "its vCPUs are unknown"),
        ("t3.medium", "2 vCPUs < 4"),
        ("r5.large", "2 vCPUs < 4"),
        ("t4g.xlarge", "is arm64; the image is x86_64"),
    ]
    shown = chosen.to_json()
    assert shown["instance_type"] == "t3.xlarge" and shown["price"] == 0.1664
    assert shown["skipped"][0]["instance_type"] == "t4g.xlarge"  # the nearest first
    assert shown["skipped_by_reason"] == {"arch": 1, "vcpus": 3}
    # An image of unknown architecture takes the Graviton type.
    assert C.from_catalog(CATALOG, C.Want(cpu=4, ram=16)).first.name == "t4g.xlarge"


def test_spot_orders_by_spot_price_and_max_price_filters() -> None:
    spot = C.from_catalog(CATALOG, C.Want(cpu=4, ram=16, spot=True, arch="x86_64"))
    assert [c.name for c in spot.fitting] == ["m5.xlarge", "t3.xlarge"]
    assert spot.first.price == 0.05 and spot.first.on_demand == 0.192
    capped = C.from_catalog(
        CATALOG, C.Want(cpu=4, ram=16, spot=True, max_price=0.055, arch="x86_64")
    )
    assert [c.name for c in capped.fitting] == ["m5.xlarge"]
    with pytest.raises(
        UsageError, match=r"no spot instance type .* fits cpu=4 ram=16GiB .*max_price"
    ):
        C.from_catalog(CATALOG, C.Want(cpu=4, ram=16, spot=True, max_price=0.01, arch="x86_64"))


def test_gpus_by_count_model_and_memory_and_none_when_none_asked() -> None:
    assert C.from_catalog(CATALOG, C.Want(cpu=2, ram=8, gpus=1)).first.name == "g4dn.xlarge"
    l4 = C.from_catalog(CATALOG, C.Want(cpu=2, ram=8, gpus=1, gpu="L4"))
    assert l4.first.name == "g6.xlarge"
    assert ("g4dn.xlarge", "has T4 GPUs, not L4") in [
        (s.candidate.name, s.reason) for s in l4.skipped
    ]
    big = C.from_catalog(CATALOG, C.Want(cpu=8, ram=64, gpus=8, gpu="A100-80GB"))
    assert big.first.name == "p4de.24xlarge"
    assert ("p4d.24xlarge", "has 40 GiB per GPU, not 80") in [
        (s.candidate.name, s.reason) for s in big.skipped
    ]
    # 96 vCPUs only come with 8 GPUs here: no CPU-only definition gets them.
    with pytest.raises(UsageError, match=r"ruled out .*by accelerator"):
        C.from_catalog(CATALOG, C.Want(cpu=96, ram=64))


def test_allowed_types_patterns() -> None:
    chosen = C.from_catalog(CATALOG, C.Want(cpu=4, ram=16, allowed=("m5.*", "c5.*")))
    assert chosen.first.name == "m5.xlarge"
    assert all(s.kind == "allowed" for s in chosen.skipped if s.candidate.name.startswith("t"))


def test_named_types_are_checked_against_the_definition() -> None:
    shapes = {
        "m5.large": spec("m5.large", 2, 8),
        "g4dn.xlarge": spec("g4dn.xlarge", 4, 16, gpu="T4", gpu_count=1),
    }
    ok = C.named(
        "us-east-1", ["m5.large"], shapes, {"m5.large": (0.096, None)}, C.Want(cpu=2, ram=8)
    )
    assert ok.first.price == 0.096 and ok.why() == "named by -o instance_type"
    with pytest.raises(
        UsageError,
        match=r"m5\.large does not fit the definition \(cpu=4 ram=8GiB\): m5\.large 2 vCPUs < 4",
    ):
        C.named("us-east-1", ["m5.large"], shapes, {}, C.Want(cpu=4, ram=8))
    with pytest.raises(UsageError, match=r"m5\.large has no GPU"):
        C.named("us-east-1", ["m5.large"], shapes, {}, C.Want(cpu=1, ram=1, gpus=1))
    # A named GPU type serves a CPU-only definition: the user asked for it.
    assert C.named("us-east-1", ["g4dn.xlarge"], shapes, {}, C.Want(cpu=1, ram=1)).first.gpu == "T4"


# -- the boot script ----------------------------------------------------------------------------


def expiry_script(script: bytes) -> str:
    text = script.decode()
    return text.split("<<'SHOAL_EXPIRY'\n", 1)[1].split("\nSHOAL_EXPIRY\n", 1)[0] + "\n"


def run_with_stub_shutdown(tmp_path: Path, body: str) -> list[str]:
    """Run `body` with a `shutdown` on PATH that records its arguments."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    log = tmp_path / "shutdown.log"
    stub = bin_dir / "shutdown"
    stub.write_text(f'#!/bin/sh\necho "$*" >> {log}\n')
    stub.chmod(0o755)
    script = tmp_path / "expiry.sh"
    script.write_text(body)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    subprocess.run(["sh", str(script)], env=env, check=True, timeout=10)
    return log.read_text().splitlines() if log.exists() else []


def test_the_boot_script_is_valid_shell_and_quotes_everything() -> None:
    expires = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    script = user_data(
        "aws-1a2b3c4d",
        expires=expires,
        environment={"MODE": "it's $(rm -rf /) `x`", "SHOAL_ALLOCATION_ID": "aws-1a2b3c4d"},
        entry=["python3", "-c", "print('hi; there')"],
    )
    assert subprocess.run(["sh", "-n"], input=script, check=False).returncode == 0
    text = script.decode()
    assert str(int(expires.timestamp())) in text and "2026-12-01T12:00:00Z" in text
    assert "exec python3 -c 'print('\"'\"'hi; there'\"'\"')'" in text
    # The exports set the values as given, nothing expanded.
    exports = "\n".join(line for line in text.splitlines() if line.startswith("export "))
    shown = subprocess.run(
        ["sh", "-c", exports + '\nprintf %s "$MODE"'], capture_output=True, text=True, check=True
    )
    assert shown.stdout == "it's $(rm -rf /) `x`"
    bare = user_data("aws-1", expires=None, environment={}, entry=[]).decode()
    assert "shutdown" not in bare and "exec" not in bare


def test_the_expiry_arms_a_shutdown_and_a_past_one_shuts_down_now(tmp_path: Path) -> None:
    past = datetime.now(UTC) - timedelta(minutes=1)
    body = expiry_script(user_data("aws-1", expires=past, environment={}, entry=[]))
    assert run_with_stub_shutdown(tmp_path, body) == [
        f"-h now shoal: the lifetime of aws-1 ends at {_stamp(past)}"
    ]
    (tmp_path / "shutdown.log").unlink()
    soon = datetime.now(UTC) + timedelta(seconds=90)
    body = expiry_script(user_data("aws-2", expires=soon, environment={}, entry=[]))
    armed = run_with_stub_shutdown(tmp_path, body.replace("sleep $left", "sleep 0"))
    assert armed[0] == f"-h +2 shoal: the lifetime of aws-2 ends at {_stamp(soon)}"
    # The detached sleeper shuts down at the second (here: at once, its sleep cut short).
    deadline = time.monotonic() + 10
    while (
        len((tmp_path / "shutdown.log").read_text().splitlines()) < 2
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    assert (tmp_path / "shutdown.log").read_text().splitlines()[1] == "-h now"


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_boot_script_over_16_kib_is_refused() -> None:
    with pytest.raises(UsageError, match=f"more than EC2's {MAX_BYTES}"):
        user_data("aws-1", expires=None, environment={"BIG": "x" * MAX_BYTES}, entry=[])


# -- RunInstances ------------------------------------------------------------------------------


def request(**more: object) -> Request:
    base: dict[str, object] = {
        "allocation_id": "aws-1",
        "image": "ami-0123456789abcdef0",
        "user_data": b"#!/bin/sh\n",
        "tags": {"shoal:allocation": "aws-1"},
    }
    return Request(**{**base, **more})  # type: ignore[arg-type]


def test_run_instances_parameters() -> None:
    profile = "arn:aws:iam::1:instance-profile/ci"
    params = request(
        security_groups=["sg-1", "sg-2"], key_name="ci", instance_profile=profile,
        root_device="/dev/xvda", root_disk_gib=40, spot=True, max_price=0.5,
    ).params("m5.large", Place(subnet="subnet-1"), 2)  # fmt: skip
    assert params["ClientToken"] == "aws-1-2" and params["SubnetId"] == "subnet-1"
    assert params["SecurityGroupId.2"] == "sg-2" and params["KeyName"] == "ci"
    assert params["IamInstanceProfile.Arn"].endswith("/ci")
    assert params["BlockDeviceMapping.1.Ebs.VolumeSize"] == "40"
    assert params["InstanceMarketOptions.SpotOptions.MaxPrice"] == "0.5"
    assert params["TagSpecification.1.Tag.1.Key"] == "shoal:allocation"
    zone = request(instance_profile="ci").params("m5.large", Place(zone="us-east-1c"), 0)
    assert zone["ClientToken"] == "aws-1" and zone["Placement.AvailabilityZone"] == "us-east-1c"
    assert (
        zone["IamInstanceProfile.Name"] == "ci" and "InstanceMarketOptions.MarketType" not in zone
    )


def test_fallbacks_try_places_then_types_and_say_what_was_tried() -> None:
    types = [C.Candidate("t3.xlarge", 0.16), C.Candidate("m5.xlarge", 0.19)]
    full = {("t3.xlarge", ""), ("t3.xlarge", "us-east-1a"), ("t3.xlarge", "us-east-1b")}
    asked: list[tuple[str, str]] = []

    def run(params: dict[str, str]) -> list[Instance]:
        key = (params["InstanceType"], params.get("Placement.AvailabilityZone", ""))
        asked.append(key)
        if key in full:
            raise ApiError("InsufficientInstanceCapacity\x1fInsufficientInstanceCapacity: none")
        return [Instance("i-1", "pending")]

    def places(every: bool) -> list[Place]:
        return [Place(), Place(zone="us-east-1a"), Place(zone="us-east-1b")] if every else [Place()]

    got = launch(
        run,
        request(),
        types,
        places,
        fallback="types",
        where="aws/default: us-east-1",
        image_source="options.image",
    )
    assert got[1].name == "m5.xlarge" and asked[-1] == ("m5.xlarge", "")
    assert asked[:3] == sorted(full, key=lambda k: k[1])
    asked.clear()
    with pytest.raises(
        NoCapacityError, match=r"tried t3\.xlarge in any zone .*us-east-1a .*us-east-1b"
    ):
        launch(run, request(), types, places, fallback="zones", where="w", image_source="i")
    asked.clear()
    with pytest.raises(NoCapacityError, match="-o fallback=types"):
        launch(run, request(), types, places, fallback="off", where="w", image_source="i")
    assert asked == [("t3.xlarge", "")]


@pytest.mark.parametrize(
    ("code", "error", "says"),
    [
        ("InvalidAMIID.NotFound", UsageError, "options.image"),
        ("InvalidParameterValue", UsageError, "RunInstances refused"),
        ("VcpuLimitExceeded", NoCapacityError, "limit"),
        ("InvalidSubnetID.NotFound", ConfigError, "subnets"),
        ("SpotMaxPriceTooLow", UsageError, "options.max_price"),
    ],
)
def test_what_run_instances_refusals_become(code: str, error: type[Exception], says: str) -> None:
    def run(params: dict[str, str]) -> list[Instance]:
        raise ApiError(f"{code}\x1f{code}: no")

    with pytest.raises(error, match=says):
        launch(
            run,
            request(),
            [C.Candidate("m5.large", 0.1)],
            lambda every: [Place()],
            fallback="off",
            where="w",
            image_source="options.image",
        )


# -- what EC2 says ------------------------------------------------------------------------------


def ended(code: str, expires: str = "") -> Instance:
    tags = {"shoal:expires": expires} if expires else {}
    return Instance(
        "i-1", "terminated", reason_code=code, reason_message=f"{code}: said", tags=tags
    )


def test_why_an_instance_ended() -> None:
    assert (
        _detail(ended("Server.SpotInstanceTermination"), "aws-1")["reason"] == "spot-interruption"
    )
    past = (datetime.now(UTC) - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    expired = _detail(ended("Client.InstanceInitiatedShutdown", past), "aws-1")
    assert expired["reason"] == "expired" and past in expired["message"]
    early = _detail(ended("Client.InstanceInitiatedShutdown", "2999-01-01T00:00:00Z"), "aws-1")
    assert early["reason"] == "shutdown-from-inside"
    assert _detail(ended("Client.UserInitiatedShutdown"), "aws-1")["reason"] == "terminated"
    assert _detail(None, "aws-1")["state"] == "gone"
    running = _detail(Instance("i-1", "running", lifecycle="spot"), "aws-1")
    assert running["market"] == "spot" and "reason" not in running


def test_reading_ec2_xml() -> None:
    item = ElementTree.fromstring(
        "<item><instanceType>g6.xlarge</instanceType><vCpuInfo><defaultVCpus>4</defaultVCpus>"
        "</vCpuInfo><memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo><processorInfo>"
        "<supportedArchitectures><item>x86_64</item></supportedArchitectures></processorInfo>"
        "<gpuInfo><gpus><item><name>L4</name><manufacturer>NVIDIA</manufacturer><count>1</count>"
        "<memoryInfo><sizeInMiB>22888</sizeInMiB></memoryInfo></item></gpus></gpuInfo></item>"
    )
    shape = _type_shape(item)
    assert (shape.vcpus, shape.memory_gib, shape.arch, shape.gpu, shape.gpu_count) == (
        4,
        16,
        "x86_64",
        "L4",
        1,
    )
    assert shape.gpu_memory_gib == pytest.approx(22.35, abs=0.01)
    inst = _instance(
        ElementTree.fromstring(
            "<item><instanceId>i-1</instanceId><instanceState><name>running</name></instanceState>"
            "<networkInterfaceSet><item><attachment><deviceIndex>0</deviceIndex></attachment>"
            "<macAddress>02:00:00:aa:bb:cc</macAddress></item></networkInterfaceSet>"
            "<tagSet><item><key>shoal:allocation</key><value>aws-1</value></item></tagSet>"
            "<ipAddress>54.1.2.3</ipAddress></item>"
        )
    )
    assert (
        inst.holds
        and inst.mac == "02:00:00:aa:bb:cc"
        and inst.tags == {"shoal:allocation": "aws-1"}
    )
    error = ApiError("InvalidAMIID.NotFound\x1fInvalidAMIID.NotFound: The image id does not exist")
    assert error.code == "InvalidAMIID.NotFound" and error.detail == "The image id does not exist"
    assert str(error.where("us-east-1", "RunInstances")).startswith(
        "aws: us-east-1 RunInstances: InvalidAMIID"
    )


def test_console_follow_prints_only_what_is_new() -> None:
    assert _new_part(b"a\nb\n", b"a\nb\nc\n") == b"c\n"
    assert _new_part(b"x\ny\nz\n", b"y\nz\nw\n") == b"w\n"  # the window slid
    assert _new_part(b"", b"q") == b"q"
    assert _new_part(b"old", b"new") == b"new"


