"""`alloc --offers` and `--best`: the offers `shoal offers --json` prints, launched through
their drivers with failover on no capacity (next zone, region, provider), each attempt
named; the unavailable offerings remembered between allocs; `--wait` retrying launches
that found no room; `-o market=auto` and capacity reservations on aws. Real parts: moto's
EC2 behind the loopback EC2 (tests/drivers/aws/ec2server.py, which answers
InsufficientInstanceCapacity as EC2 does and records each request), the fake Kubernetes
API server, the process and test drivers on a real ledger."""

# The aws driver's fixtures (moto, the loopback EC2, the price host) are imported below, and
# taken by name as the tests' arguments.
# ruff: noqa: F811

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_json_schema import check_each
from tests.conftest import Run, wait_for
from tests.drivers.aws.conftest import (  # noqa: F401 (fixtures)
    AL2023,
    EU,
    SMALL,
    US,
    alloc,
    allocated,
    aws,
    by_allocation,
    config,
    env,
    live,
    moto_base,
    prices,
)
from tests.drivers.aws.ec2server import Ec2Server
from tests.providers.aws.quotaserver import Capacity

Cli = Callable[..., Run]
IMAGE = f"aws.image=ssm:{AL2023}"
ICE = "InsufficientInstanceCapacity"


def offer(
    provider: str = "aws",
    *,
    driver: str | None = None,
    region: str = US,
    zones: tuple[str, ...] = (),
    instance_type: str = "t3.medium",
    market: str = "spot",
    instances: int = 1,
    **more: Any,
) -> dict[str, Any]:
    """One offer as `shoal offers --json` writes it (the fields placement reads, and some
    it does not)."""
    return {
        "provider": provider,
        "driver": driver or provider,
        "region": {"name": region, provider: {"region": region}},
        "zones": list(zones),
        "instanceType": instance_type,
        "shape": {"vcpus": 2, "memoryGiB": 4, "gpu": None, "gpuCount": 0, "arch": "x86_64"},
        "market": market,
        "instances": instances,
        "pricePerHour": 0.01,
        "totalPerHour": 0.01 * instances,
        "pricePerGpuHour": None,
        "currency": "USD",
        "fitsNow": None,
        "binding": None,
        "reservation": None,
        "pool": None,
        "asOf": "2026-03-07T03:29:00Z",
        "stale": False,
        **more,
    }


def local(instances: int = 1, driver: str = "process") -> dict[str, Any]:
    return offer("local", driver=driver, region="local", instance_type="host",
                 market="onDemand", instances=instances)  # fmt: skip


def document(*offers: dict[str, Any], **more: Any) -> str:
    request = {"gpus": None, "gpu": None, "cpu": 1, "ram": 1, "market": "any"}
    return json.dumps(
        {"request": request, "offers": list(offers), "rejected": [], "failures": [], **more}
    )


def place(cli: Cli, doc: str, *args: str, env: dict[str, str] | None = None, code: int = 0) -> Run:
    run = cli("alloc", "--offers", "-", *args, input=doc, env=env)
    assert run.exit_code == code, (run.exit_code, run.stdout, run.stderr)
    return run


def lines(run: Run, start: str) -> list[str]:
    return [line for line in run.stderr.splitlines() if line.startswith(start)]


def ledger(home: Path, sql: str) -> list[tuple[Any, ...]]:
    """Rows of the ledger ([] while it has none)."""
    path = home / "state" / "ledger.sqlite"
    if not path.exists():
        return []
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []  # no table yet
    finally:
        conn.close()


@pytest.fixture
def fast_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    from drivers.service import alloc as service_alloc

    monkeypatch.setattr(service_alloc, "RETRY_SECONDS", (0.05, 0.2))


# -- aws: failover across zones and regions ---------------------------------------------------


def two_regions() -> str:
    return document(
        offer(zones=("us-east-1a", "us-east-1b")),
        offer(region=EU, zones=("eu-west-1a",), instance_type="m5.large", market="onDemand"),
    )


def test_no_room_in_a_zone_tries_the_next_zone_then_the_next_region_each_named(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, home: Path
) -> None:
    aws.no_capacity = {("t3.medium", "us-east-1a"), ("t3.medium", "us-east-1b")}
    run = place(cli, two_regions(), "-o", IMAGE, "--lifetime", "1h", "--json", env=env)
    assert lines(run, "tried ") == [
        f"tried aws us-east-1a t3.medium spot: {ICE}",
        f"tried aws us-east-1b t3.medium spot: {ICE}",
    ]
    [made] = run.json()  # always a list: an offer may launch several
    meta = made["resource"]["metadata"]
    assert (meta["region"], meta["zone"], meta["instance_type"], meta["market"]) == (
        EU, "eu-west-1a", "m5.large", "on-demand",
    )  # fmt: skip
    assert [i["type"] for i in live(moto_base, EU).values()] == ["m5.large"]
    assert not live(moto_base, US)
    sent = aws.requests("RunInstances")
    assert [(r.get("Placement.AvailabilityZone"), r.get("InstanceMarketOptions.MarketType"))
            for r in sent] == [("us-east-1a", "spot"), ("us-east-1b", "spot"),
                               ("eu-west-1a", None)]  # fmt: skip
    # Each attempt is an allocation of its own: the two that found no room are FAILED.
    statuses = sorted(r[0] for r in ledger(home, "SELECT status FROM allocations"))
    assert statuses == ["ALLOCATED", "FAILED", "FAILED"]


def test_a_second_alloc_skips_what_just_found_no_room_until_it_is_forgotten(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.placement import unavailable

    monkeypatch.setattr(unavailable, "TTL_SECONDS", 3.0)
    aws.no_capacity = {("t3.medium", "us-east-1a"), ("t3.medium", "us-east-1b")}
    place(cli, two_regions(), "-o", IMAGE, env=env)
    assert len(aws.requests("RunInstances")) == 3
    run = place(cli, two_regions(), "-o", IMAGE, env=env)
    skipped = lines(run, "skipped ")
    assert [line.partition(": ")[0] for line in skipped] == [
        "skipped aws us-east-1a t3.medium spot",
        "skipped aws us-east-1b t3.medium spot",
    ]
    assert all(f": {ICE} " in line and "(remembered for " in line for line in skipped)
    assert not lines(run, "tried ")
    assert len(aws.requests("RunInstances")) == 4  # only the one that had room
    # Once forgotten, the zones are asked again.
    time.sleep(3.2)
    run = place(cli, two_regions(), "-o", IMAGE, env=env)
    assert len(lines(run, "tried ")) == 2 and not lines(run, "skipped ")


def test_when_every_offer_has_no_room_one_error_lists_every_attempt(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.no_capacity = {("t3.medium", "us-east-1a"), ("t3.medium", "us-east-1b"),
                       ("m5.large", "eu-west-1a")}  # fmt: skip
    run = place(cli, two_regions(), "-o", IMAGE, env=env, code=75)
    (error,) = lines(run, "shoal: error: ")
    assert error == (
        f"shoal: error: no offer could be launched: tried aws us-east-1a t3.medium spot: {ICE}; "
        f"tried aws us-east-1b t3.medium spot: {ICE}; tried aws eu-west-1a m5.large on-demand: "
        f"{ICE}"
    )
    assert run.stdout == ""
    assert not live(moto_base, US) and not live(moto_base, EU)


def test_the_accounts_limit_at_launch_skips_the_other_zones_of_the_region(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.launch_errors = [
        (400, "VcpuLimitExceeded", "You have requested more vCPU capacity than your current "
         "vCPU limit of 0 allows for the instance bucket that the specified instance type "
         "belongs to.")
    ]  # fmt: skip
    run = place(cli, two_regions(), "-o", IMAGE, env=env)
    assert lines(run, "tried ") == ["tried aws us-east-1a t3.medium spot: VcpuLimitExceeded"]
    assert [r.get("Placement.AvailabilityZone") for r in aws.requests("RunInstances")] == [
        "us-east-1a", "eu-west-1a",
    ]  # fmt: skip


def test_wait_tries_the_offers_again_after_a_backoff_until_one_has_room(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, fast_retries: None
) -> None:
    aws.no_capacity = {("t3.medium", "us-east-1a")}
    doc = document(offer(zones=("us-east-1a",)))

    def room_after_three() -> None:
        wait_for(lambda: len(aws.requests("RunInstances")) >= 3, "three launches", timeout=60)
        aws.no_capacity.clear()

    helper = threading.Thread(target=room_after_three, daemon=True)
    helper.start()
    run = place(cli, doc, "-o", IMAGE, "--wait", "--timeout", "60s", env=env)
    helper.join(timeout=10)
    assert len(lines(run, "tried ")) >= 3
    assert run.stdout.strip().startswith("aws-")
    assert len(live(moto_base)) == 1


def test_wait_gives_up_at_its_timeout_naming_the_last_round(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, fast_retries: None
) -> None:
    aws.no_capacity = {("t3.medium", "us-east-1a")}
    run = place(cli, document(offer(zones=("us-east-1a",))), "-o", IMAGE, "--wait",
                "--timeout", "1s", env=env, code=75)  # fmt: skip
    assert "waiting for an offer with room; the last round: tried aws us-east-1a" in run.stderr
    assert len(aws.requests("RunInstances")) >= 2


def test_an_error_that_is_not_about_room_ends_the_failover_at_once(
    cli: Cli, env: dict[str, str], aws: Ec2Server, home: Path
) -> None:
    no_keys = {k: v for k, v in env.items() if not k.startswith("AWS_")}
    run = place(cli, document(offer(zones=("us-east-1a",)), local()), "-o", IMAGE,
                "-o", "process.entry=sleep 60", env=no_keys, code=77)  # fmt: skip
    assert "AWS_ACCESS_KEY_ID" in run.stderr
    assert not lines(run, "tried ")
    # The local offer after it was not launched.
    assert not [r for r in ledger(home, "SELECT driver FROM allocations") if r[0] != "aws/default"]


def test_a_definition_at_fault_is_refused_before_anything_is_launched(
    cli: Cli, env: dict[str, str], aws: Ec2Server, home: Path, reap_workloads: None
) -> None:
    run = place(cli, document(local(), offer(zones=("us-east-1a",))), "-o", "entry=sleep 60",
                env=env, code=2)  # fmt: skip
    assert "the aws offers: options.image: required" in run.stderr
    assert "-o aws.KEY=VALUE" in run.stderr
    assert not ledger(home, "SELECT id FROM allocations")


def test_an_offer_covered_by_a_reservation_launches_into_it_in_its_zone(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    reserved = {"id": "cr-0123456789abcdef0", "kind": "capacity-reservation", "available": 2,
                "zone": "us-east-1c", "start": None, "end": None}  # fmt: skip
    doc = document(offer(market="onDemand", zones=("us-east-1a", "us-east-1c"),
                         reservation=reserved))  # fmt: skip
    [made] = place(cli, doc, "-o", IMAGE, "--json", env=env).json()
    (sent,) = aws.requests("RunInstances")
    target = "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"
    assert sent[target] == "cr-0123456789abcdef0"
    assert sent["Placement.AvailabilityZone"] == "us-east-1c"
    assert "InstanceMarketOptions.MarketType" not in sent
    assert made["resource"]["metadata"]["reservation"] == "cr-0123456789abcdef0"


def test_a_capacity_block_is_launched_into_from_its_start(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    block = {"id": "cr-0fedcba9876543210", "kind": "capacity-block", "available": 1,
             "zone": "us-east-1b", "start": "2099-01-01T00:00:00Z", "end": None}  # fmt: skip
    run = place(cli, document(offer(market="onDemand", reservation=block)), "-o", IMAGE,
                env=env, code=75)  # fmt: skip
    assert lines(run, "skipped ") == [
        "skipped aws us-east-1b t3.medium on-demand: capacity block cr-0fedcba9876543210 "
        "starts at 2099-01-01T00:00:00Z"
    ]
    assert not aws.requests("RunInstances")
    block["start"] = "2026-01-01T00:00:00Z"
    [made] = place(cli, document(offer(market="onDemand", reservation=block)), "-o", IMAGE,
                   "--json", env=env).json()  # fmt: skip
    (sent,) = aws.requests("RunInstances")
    assert sent["InstanceMarketOptions.MarketType"] == "capacity-block"
    assert sent[
        "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"
    ] == "cr-0fedcba9876543210"
    assert sent["Placement.AvailabilityZone"] == "us-east-1b"
    assert made["resource"]["metadata"]["market"] == "capacity-block"


def test_an_offer_that_does_not_fit_now_is_skipped_with_its_binding_limit(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    binding = {"code": "L-34B43A08", "name": "All Standard Spot Instance Requests", "limit": 64,
               "used": 64, "free": 0, "perInstance": 2, "scope": "region"}  # fmt: skip
    doc = document(offer(zones=("us-east-1a",), fitsNow=0, binding=binding),
                   offer(market="onDemand", zones=("us-east-1b",)))  # fmt: skip
    run = place(cli, doc, "-o", IMAGE, env=env)
    assert lines(run, "skipped ") == [
        "skipped aws us-east-1a t3.medium spot: 0 of 1 fit now (L-34B43A08 All Standard Spot "
        "Instance Requests: 0 free, 2 each)"
    ]
    assert [r["Placement.AvailabilityZone"] for r in aws.requests("RunInstances")] == [
        "us-east-1b"
    ]


# -- aws without offers: market=auto, reservations, --wait ------------------------------------


def test_market_auto_tries_spot_then_on_demand_as_two_named_attempts(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.no_spot_capacity = {("t3.medium", "")}
    run = alloc(cli, env, SMALL, "-o", "market=auto", "--json")
    made = run.json()
    assert made["resource"]["metadata"]["market"] == "on-demand"
    assert by_allocation(moto_base, made["id"])["lifecycle"] == ""
    spot, on_demand = aws.requests("RunInstances")
    assert spot["InstanceMarketOptions.MarketType"] == "spot"
    assert "InstanceMarketOptions.MarketType" not in on_demand
    assert [spot["ClientToken"], on_demand["ClientToken"]] == [made["id"], f"{made['id']}-1"]
    assert f"no spot capacity in {US} (t3.medium in any zone ({ICE})); trying on-demand" in (
        run.stderr
    )
    # Neither market with room: 75, both attempts named.
    aws.no_capacity = {("t3.medium", "")}
    run = alloc(cli, env, SMALL, "-o", "market=auto", code=75)
    assert (
        f"no capacity in either market; tried t3.medium in any zone ({ICE}) spot; t3.medium in "
        f"any zone ({ICE}) on-demand"
    ) in run.stderr


def test_market_auto_with_spot_room_launches_spot(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    made = allocated(cli, env, f"{SMALL} -o market=auto")
    assert made["resource"]["metadata"]["market"] == "spot"
    assert by_allocation(moto_base, made["id"])["lifecycle"] == "spot"
    assert len(aws.requests("RunInstances")) == 1


def test_a_market_that_disagrees_with_spot_is_refused(
    cli: Cli, env: dict[str, str], aws: Ec2Server
) -> None:
    run = alloc(cli, env, SMALL, "-o", "market=auto", "-o", "spot=false", code=2)
    assert "spot=false and market=auto disagree" in run.stderr
    run = alloc(cli, env, SMALL, "-o", "reservation=cr-0123456789abcdef0", "-o", "spot=true",
                code=2)  # fmt: skip
    assert "holds on-demand capacity" in run.stderr
    assert not aws.requests("RunInstances")


def test_on_demand_goes_to_the_zone_of_an_open_reservation_with_room(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.region(US).capacity = [
        Capacity("cr-0aaaaaaaaaaaaaaa1", "m5.large", total=4, available=0, zone="us-east-1a"),
        Capacity("cr-0aaaaaaaaaaaaaaa2", "t3.medium", total=2, available=1, zone="us-east-1c"),
    ]
    made = allocated(cli, env, SMALL)
    (sent,) = aws.requests("RunInstances")
    assert sent["Placement.AvailabilityZone"] == "us-east-1c"
    # EC2's default preference (open) puts it in the reservation: nothing opts out.
    assert not any(k.startswith("CapacityReservationSpecification") for k in sent)
    assert by_allocation(moto_base, made["id"])["zone"] == "us-east-1c"
    # Spot never runs in a reservation: EC2 picks its zone.
    allocated(cli, env, f"{SMALL} -o spot=true")
    assert "Placement.AvailabilityZone" not in aws.requests("RunInstances")[-1]


def test_a_named_reservation_is_targeted(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    made = allocated(cli, env, f"{SMALL} -o reservation=cr-0123456789abcdef0")
    (sent,) = aws.requests("RunInstances")
    assert sent[
        "CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId"
    ] == "cr-0123456789abcdef0"
    assert made["resource"]["metadata"]["reservation"] == "cr-0123456789abcdef0"
    allocated(cli, env, f"{SMALL} -o reservation=none")
    assert aws.requests("RunInstances")[-1][
        "CapacityReservationSpecification.CapacityReservationPreference"
    ] == "none"


def test_a_full_reservation_is_no_room(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str
) -> None:
    aws.launch_errors = [
        (400, "ReservationCapacityExceeded", "There is no capacity available in the "
         "specified Capacity Reservation.")
    ]  # fmt: skip
    run = alloc(cli, env, SMALL, "-o", "reservation=cr-0123456789abcdef0", code=75)
    assert "ReservationCapacityExceeded" in run.stderr


def test_wait_retries_a_launch_that_found_no_room_until_there_is_some(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, home: Path,
    fast_retries: None,
) -> None:  # fmt: skip
    aws.no_capacity = {("t3.medium", "")}

    def room_after_two() -> None:
        wait_for(lambda: len(aws.requests("RunInstances")) >= 2, "two launches", timeout=60)
        aws.no_capacity.clear()

    helper = threading.Thread(target=room_after_two, daemon=True)
    helper.start()
    made = allocated(cli, env, f"{SMALL} --wait --timeout 60s")
    helper.join(timeout=10)
    assert by_allocation(moto_base, made["id"])["state"] == "running"
    assert len(aws.requests("RunInstances")) >= 3
    statuses = [r[0] for r in ledger(home, "SELECT status FROM allocations ORDER BY created")]
    assert statuses[-1] == "ALLOCATED" and set(statuses[:-1]) == {"FAILED"}


def test_wait_gives_up_retrying_launches_at_its_timeout(
    cli: Cli, env: dict[str, str], aws: Ec2Server, moto_base: str, fast_retries: None
) -> None:
    aws.no_capacity = {("t3.medium", "")}
    run = alloc(cli, env, SMALL, "--wait", "--timeout", "1s", code=75)
    assert "waiting for capacity on aws/default; the last launch found none" in run.stderr
    assert len(aws.requests("RunInstances")) >= 2
    assert not live(moto_base)


# -- other drivers -----------------------------------------------------------------------------


def test_an_offer_of_several_instances_launches_all_or_none(
    cli: Cli, write_config: Callable[[str], Path], home: Path
) -> None:
    write_config('[drivers."test/default"]\ncpu_limit = 2\nram_limit = 8\n')
    doc = document(local(instances=3, driver="test"), local(instances=2, driver="test"))
    run = place(cli, doc, "--cpu", "1", "--ram", "1", "--json")
    made = run.json()
    assert isinstance(made, list) and len(made) == 2
    assert lines(run, "tried ") == [
        "tried local local host on-demand: cpu=1 ram=1GiB does not fit now after 2 of 3 "
        "(those freed)"
    ]
    rows = ledger(home, "SELECT status, note FROM allocations ORDER BY created")
    # The third found no room in the ledger (no row); the two made before it were freed.
    assert [r[0] for r in rows] == ["FREED", "FREED", "ALLOCATED", "ALLOCATED"]
    # Text: one id per line.
    write_config('[drivers."test/default"]\ncpu_limit = 4\nram_limit = 8\n')
    run = place(cli, document(local(instances=2, driver="test")), "--cpu", "1", "--ram", "1")
    assert len(run.stdout.split()) == 2


def test_offers_of_providers_without_a_driver_are_named_and_skipped(
    cli: Cli, reap_workloads: None
) -> None:
    other = offer("lambda", region="us-east-1", instance_type="gpu_8x_h100_sxm5")
    # gcp has a driver: an offer of it without zones is skipped (its VM must go to a zone of
    # the offer's region, which the driver's own default zone may not be in).
    gcp = offer("gcp", region="us-central1", instance_type="a3-highgpu-8g")
    run = place(cli, document(other, gcp, local()), "-o", "entry=sleep 60", "--cpu", "1",
                "--ram", "1")  # fmt: skip
    assert lines(run, "skipped ") == [
        "skipped lambda us-east-1 gpu_8x_h100_sxm5 spot: no lambda driver yet",
        "skipped gcp us-central1 a3-highgpu-8g spot: its zones are unknown (`shoal offers` "
        "lists the zones of gcp's GPU series with credentials), and a VM must be placed in a "
        "zone of its region",
    ]
    assert run.stdout.strip().startswith("process-")
    run = place(cli, document(other), code=2)
    assert "no offer can be launched: skipped lambda us-east-1 gpu_8x_h100_sxm5 spot: no " in (
        run.stderr
    )


def test_options_scoped_to_a_driver_go_to_its_offers_only(
    cli: Cli, reap_workloads: None
) -> None:
    gcp = offer("gcp", region="us-central1")
    run = place(cli, document(gcp, local()), "-o", "process.entry=sleep 60",
                "-o", "gcp.machine=x", "--cpu", "1", "--ram", "1", "--json")  # fmt: skip
    assert run.json()[0]["definition"]["options"] == {"entry": "sleep 60"}
    run = place(cli, document(local()), "-o", "nodriver.entry=x", code=2)
    assert "-o nodriver.entry: an option for one driver's offers is DRIVER.KEY" in run.stderr


# -- kubernetes: a pod that finds no node is no room --------------------------------------------


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Any, dict[str, str]]]:
    from tests.drivers.kubernetes.test_kubernetes_driver import TOKEN, kubeconfig
    from tests.providers.kubernetes.apiserver import ApiServer
    from tests.providers.kubernetes.objects import karpenter_node

    with ApiServer(tokens=[TOKEN]) as api:
        api.add(
            "nodes",
            karpenter_node("gpu-1", nodepool="gpu", instance_type="p5.48xlarge", spot=True,
                           gpus=8, product="NVIDIA-H100-80GB-HBM3", cpu="191450m",
                           memory="2002Gi"),
        )  # fmt: skip
        yield api, {"KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", api.base))}


def pool_offer() -> dict[str, Any]:
    return offer("kubernetes", region="test", instance_type="p5.48xlarge",
                 pool={"key": "karpenter.sh/nodepool", "value": "gpu", "nodes": 1, "fitting": 1},
                 gpusPerInstance=2)  # fmt: skip


@pytest.fixture
def quick_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    from drivers.placement import scheduled

    monkeypatch.setattr(scheduled, "SCHEDULE_SECONDS", 0.5)
    monkeypatch.setattr(scheduled, "POLL_SECONDS", 0.05)


def test_a_pod_unscheduled_past_the_timeout_is_freed_and_the_next_offer_taken(
    cli: Cli, cluster: tuple[Any, dict[str, str]], quick_schedule: None, reap_workloads: None
) -> None:
    api, kube = cluster

    def unschedulable() -> None:
        name = wait_for(lambda: api.names("pods"), "the pod")[0].partition("/")[2]
        api.update("pods", "team-a", name, {"status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]}})  # fmt: skip

    helper = threading.Thread(target=unschedulable, daemon=True)
    helper.start()
    run = place(cli, document(pool_offer(), local()), "-o", "kubernetes.image=trainer:1",
                "-o", "process.entry=sleep 60", env=kube)  # fmt: skip
    helper.join(timeout=10)
    (tried,) = lines(run, "tried ")
    assert tried.startswith("tried kubernetes test p5.48xlarge spot: Unschedulable after ")
    assert tried.endswith(": 0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    assert run.stdout.strip().startswith("process-")
    assert [d[0] for d in api.deletions] == ["pods"]
    # The pod asked what the offer says: the pool, spot, its share of the GPUs.
    (created,) = [s for s in api.seen if s.method == "POST"]
    spec = json.loads(created.body)["spec"]
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "gpu"}
    assert spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2"
    # Remembered: the next alloc goes straight to the local offer.
    run = place(cli, document(pool_offer(), local()), "-o", "kubernetes.image=trainer:1",
                "-o", "process.entry=sleep 60", env=kube)  # fmt: skip
    assert lines(run, "skipped ")[0].startswith(
        "skipped kubernetes test p5.48xlarge spot: Unschedulable after "
    )


def test_a_pod_given_a_node_is_the_allocation(
    cli: Cli, cluster: tuple[Any, dict[str, str]], quick_schedule: None
) -> None:
    api, kube = cluster

    def schedule() -> None:
        name = wait_for(lambda: api.names("pods"), "the pod")[0].partition("/")[2]
        api.update("pods", "team-a", name, {"spec": {"nodeName": "gpu-1"},
                                            "status": {"phase": "Running"}})  # fmt: skip

    helper = threading.Thread(target=schedule, daemon=True)
    helper.start()
    run = place(cli, document(pool_offer(), local()), "-o", "kubernetes.image=trainer:1",
                "-o", "process.entry=sleep 60", "--json", env=kube)  # fmt: skip
    helper.join(timeout=10)
    [made] = run.json()
    assert made["driver"] == "kubernetes/default" and made["status"] == "ALLOCATED"
    assert not lines(run, "tried ")


# -- the document -------------------------------------------------------------------------------


def test_a_malformed_document_is_one_line_naming_the_field(cli: Cli, tmp_path: Path) -> None:
    bad = json.loads(document(local()))
    bad["offers"][0]["market"] = "ondemand"
    run = place(cli, json.dumps(bad), code=2)
    assert run.stderr.strip() == (
        "shoal: error: --offers <stdin>: offers[0].market: must be 'onDemand' or 'spot', got "
        "string 'ondemand'; give what `shoal offers --json` prints"
    )
    run = place(cli, "[1, 2]", code=2)
    assert "--offers <stdin>: expected an object, got a list" in run.stderr
    run = place(cli, '{"offers": ', code=2)
    assert "--offers <stdin>:1:" in run.stderr and "not JSON" in run.stderr
    missing = cli("alloc", "--offers", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2 and "no such file" in missing.stderr


def test_a_document_without_offers_is_75_saying_why_each_was_rejected(cli: Cli) -> None:
    rejected = [
        {"provider": "aws", "region": {"name": US}, "instanceType": "p5.48xlarge",
         "market": "onDemand", "reason": "quota binds at 0 of 1 (L-417A185B: 0 vCPUs free)",
         "code": "quota-binds"},
        {"provider": "aws", "region": {"name": EU}, "instanceType": "p5.48xlarge",
         "market": "spot", "reason": "quota binds at 0 of 1", "code": "quota-binds"},
        {"provider": "gcp", "region": {"name": "us-central1"}, "instanceType": "a3-highgpu-8g",
         "market": None, "reason": "not offered in us-central1", "code": "not-offered"},
    ]  # fmt: skip
    failures = [{"provider": "azure", "error": "azure: AZURE_CLIENT_ID is not set"}]
    doc = json.dumps({"offers": [], "rejected": rejected, "failures": failures})
    run = place(cli, doc, code=75)
    assert run.stderr.strip() == (
        "shoal: error: no offer fits now: 3 rejected: 2 quota-binds (e.g. aws us-east-1 "
        "p5.48xlarge on-demand: quota binds at 0 of 1 (L-417A185B: 0 vCPUs free)); 1 "
        "not-offered (e.g. gcp us-central1 a3-highgpu-8g: not offered in us-central1); azure "
        "failed: azure: AZURE_CLIENT_ID is not set"
    )


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("alloc", "--gpus", "8"), "--gpus is part of the request --best asks"),
        (("alloc", "--offers", "-", "--best"), "give one"),
        (("alloc", "--offers", "-", "--dry-run"), "drop --dry-run"),
        (("alloc", "--offers", "x.json", "--at", "+1h"), "drop --at"),
        (("alloc", "-", "--offers", "-"), "both read stdin"),
    ],
)
def test_offers_flags_that_do_not_go_together(cli: Cli, args: tuple[str, ...], said: str) -> None:
    run = cli(*args)
    assert run.exit_code == 2 and said in run.stderr, run.stderr


# -- what `shoal offers` prints, piped; and --best asking it --------------------------------------


def test_what_shoal_offers_prints_is_what_alloc_offers_reads(
    cli: Cli, reap_workloads: None
) -> None:
    found = cli("offers", "-p", "local", "--cpu", "1", "--ram", "1", "--json")
    assert found.exit_code == 0, found.stderr
    assert found.json()["offers"][0]["driver"] == "process"
    run = place(cli, found.stdout, "-o", "entry=sleep 60", "--lifetime", "1m", "--json")
    # A list of allocation objects whatever the count (an offer may launch several).
    check_each(run.json(), "allocation")
    [made] = run.json()
    assert made["driver"] == "process/default" and made["status"] == "ALLOCATED"
    assert (made["cpu"], made["ram"]) == (1, 1)


def test_best_asks_the_same_query_and_launches_its_first_offer(
    cli: Cli, reap_workloads: None
) -> None:
    run = cli("alloc", "--best", "-p", "local", "--cpu", "1", "--ram", "1", "-o",
              "entry=sleep 60", "--json")  # fmt: skip
    assert run.exit_code == 0, run.stderr
    assert run.json()[0]["driver"] == "process/default"
    # A request no offer fits: "no offer fits now", with why.
    run = cli("alloc", "--best", "-p", "local", "--cpu", "100000", "--ram", "1", "-o",
              "entry=sleep 60")  # fmt: skip
    assert run.exit_code == 75, run.stderr
    assert "no offer fits now: 1 rejected: 1 " in run.stderr
