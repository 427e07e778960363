"""The `gcp` driver through the CLI, as users run it, against the loopback Compute Engine
(standin.py, held to the discovery document) and a loopback Cloud Billing SKU list for the
price catalog: alloc, status, free, the remote listing, and the errors mapped to exit codes."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run
from tests.drivers.gcp.standin import ComputeStandin

Cli = Callable[..., Run]
ZONE = "us-central1-a"


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


def alloc(cli: Cli, env: dict[str, str], *args: str) -> Run:
    return cli("alloc", "--driver", "gcp", "--json", *args, env=env)


def allocated(cli: Cli, env: dict[str, str], *args: str) -> dict[str, Any]:
    made: dict[str, Any] = ok(alloc(cli, env, *args)).json()
    return made


def inserts(gce: ComputeStandin) -> list[dict[str, Any]]:
    return [s.body for s in gce.calls("compute.instances.insert")]


def test_alloc_status_free_a_labelled_vm_with_google_enforcing_its_lifetime(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    made = allocated(
        cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "2h", "-m", "RUN=7",
        "-o", "entry=python3 -m http.server 8080", "-o", 'env={"MODE": "ci"}',
    )  # fmt: skip
    assert made["status"] == "ALLOCATED"
    meta = made["resource"]["metadata"]
    assert meta["zone"] == ZONE and meta["machine_type"] == "e2-standard-2"
    assert made["resource"]["ip_addr"] == meta["external_ip"]
    (body,) = inserts(gce)
    (seen,) = gce.calls("compute.instances.insert")
    assert seen.query["requestId"] == [str(uuid.uuid5(uuid.UUID(
        "6d0f3c52-7a0e-4f0e-9c55-5b1f2d3c6a11"), made["id"] + "/0"))]  # fmt: skip
    labels = body["labels"]
    assert labels["shoal-allocation"] == made["id"] and labels["shoal-managed-by"] == "shoal"
    assert labels["shoal-expires"].isdigit()
    inst = gce.instance(ZONE, meta["instance"])
    assert inst is not None
    disk = gce.disk(ZONE, inst["disks"][0]["source"].rsplit("/", 1)[-1])
    assert disk is not None and disk["labels"]["shoal-allocation"] == made["id"]
    scheduling = body["scheduling"]
    assert scheduling["instanceTerminationAction"] == "DELETE"
    assert 7100 <= int(scheduling["maxRunDuration"]["seconds"]) <= 7201
    script = body["metadata"]["items"][0]
    assert script["key"] == "startup-script"
    assert "export RUN=7" in script["value"] and "export MODE=ci" in script["value"]
    assert script["value"].rstrip().endswith("exec python3 -m http.server 8080")
    assert "debian-12" in body["disks"][0]["initializeParams"]["sourceImage"]

    status = ok(cli("status", made["id"], "--json", env=env)).json()
    assert status["driver_status"] == "ALLOCATED"
    assert status["detail"]["zone"] == ZONE and status["detail"]["external_ip"]

    ok(cli("free", made["id"], env=env))
    assert gce.instances() == []
    ok(cli("free", made["id"], env=env))  # idempotent


@pytest.mark.parametrize("status", [0, 503], ids=["dropped", "503"])
def test_a_retried_insert_makes_one_vm(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, status: int
) -> None:
    # The first insert is carried out, its answer lost: the retry carries the same
    # requestId, and Google answers it with the first one's operation.
    gce.fail_http(status, method="compute.instances.insert", apply=True)
    made = allocated(cli, env, "--cpu", "2", "--ram", "8")
    assert len(gce.calls("compute.instances.insert")) == 2
    assert len(gce.instances()) == 1
    assert made["status"] == "ALLOCATED"


def test_429_is_retried(cli: Cli, env: dict[str, str], gce: ComputeStandin) -> None:
    gce.fail_http(429, method="compute.instances.insert")
    allocated(cli, env, "--cpu", "2", "--ram", "8")
    assert len(gce.instances()) == 1


def test_spot_sends_spot_and_delete(cli: Cli, env: dict[str, str], gce: ComputeStandin) -> None:
    allocated(cli, env, "--cpu", "2", "--ram", "8", "-o", "spot=true")
    (body,) = inserts(gce)
    assert body["scheduling"]["provisioningModel"] == "SPOT"
    assert body["scheduling"]["instanceTerminationAction"] == "DELETE"


def test_a_gpu_type_terminates_on_host_maintenance(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    made = allocated(cli, env, "--cpu", "4", "--ram", "16", "-o", "gpus=1", "-o", "gpu=L4")
    assert made["resource"]["metadata"]["machine_type"].startswith("g2-")
    (body,) = inserts(gce)
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_n1_takes_guest_accelerators(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    allocated(cli, env, "-o", "machine_type=n1-standard-4", "-o", "gpu=T4")
    (body,) = inserts(gce)
    (acc,) = body["guestAccelerators"]
    assert acc["acceleratorType"].endswith("/nvidia-tesla-t4") and acc["acceleratorCount"] == 1
    assert body["scheduling"]["onHostMaintenance"] == "TERMINATE"


def test_pool_exhausted_is_75_naming_the_zone_and_fallback_takes_the_next(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.fail_insert("ZONE_RESOURCE_POOL_EXHAUSTED", zone=ZONE, times=None)
    run = alloc(cli, env, "--cpu", "2", "--ram", "8")
    assert run.exit_code == 75 and ZONE in run.stderr, run.stderr
    made = allocated(cli, env, "--cpu", "2", "--ram", "8", "-o", "fallback=zones")
    assert made["resource"]["metadata"]["zone"] == "us-central1-b"
    assert len(gce.instances()) == 1


def test_fallback_names_every_attempt_when_all_fail(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.fail_insert("ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", times=None)
    run = alloc(cli, env, "--cpu", "2", "--ram", "8", "-o", "fallback=zones")
    assert run.exit_code == 75
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
        assert zone in run.stderr


def test_quota_exceeded_is_75_naming_quota_and_region(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.fail_insert("QUOTA_EXCEEDED", metric="CPUS", limit=8.0, times=None)
    run = alloc(cli, env, "--cpu", "2", "--ram", "8", "-o", "fallback=zones")
    assert run.exit_code == 75, run.stderr
    assert "cpus" in run.stderr.lower() and "region us-central1" in run.stderr
    # A regional quota: the other zones of the region are not tried.
    assert len(gce.calls("compute.instances.insert")) == 1


def test_unknown_machine_type_is_2_naming_the_option(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    run = alloc(cli, env, "-o", "machine_type=n9-nonesuch-4")
    assert run.exit_code == 2 and "options.machine_type" in run.stderr, run.stderr
    assert gce.instances() == []


def test_unknown_image_is_2_naming_the_option(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    run = alloc(
        cli, env, "--cpu", "2", "--ram", "8",
        "-o", "image=projects/debian-cloud/global/images/family/debian-99",
    )  # fmt: skip
    assert run.exit_code == 2 and "options.image" in run.stderr, run.stderr


def test_a_refused_token_is_77_without_the_token(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    bad = "ya29.not-the-right-one"
    run = alloc(cli, {**env, "SHOAL_GCP_TOKEN": bad}, "-o", "machine_type=e2-standard-2")
    assert run.exit_code == 77, run.stderr
    assert bad not in run.stderr and bad not in run.stdout


def test_status_of_a_preempted_vm_is_gone_with_the_reason(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    made = allocated(cli, env, "--cpu", "2", "--ram", "8", "-o", "spot=true")
    gce.preempt(ZONE, made["resource"]["metadata"]["instance"])
    gce.advance(60)
    status = ok(cli("status", made["id"], "--json", env=env)).json()
    assert status["driver_status"] != "ALLOCATED"
    assert status["detail"]["reason"] == "preempted"


def test_status_of_a_vm_past_its_lifetime_is_gone_expired(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.gcp import driver

    made = allocated(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "2m")
    gce.advance(3600)  # Google deletes it at its maxRunDuration
    later = driver._now() + 3600
    monkeypatch.setattr(driver, "_now", lambda: later)
    detail = cli("status", made["id"], "--json", env=env).json()["detail"]
    assert detail["state"] == "gone" and detail["reason"] == "expired", detail
    assert "maxRunDuration" in detail["message"]


def test_status_of_a_vm_deleted_outside_shoal_says_so(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, api: Any
) -> None:
    made = allocated(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "2h")
    name = made["resource"]["metadata"]["instance"]
    api.wait(api.delete(api.zonal(ZONE, f"instances/{name}")).json())
    status = ok(cli("status", made["id"], "--json", env=env)).json()
    assert status["driver_status"] != "ALLOCATED"
    assert status["detail"]["reason"] == "deleted", status["detail"]


def test_remote_listing_sees_shoal_vms(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    made = allocated(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "2h")
    rows = ok(cli("status", "--remote", "gcp", "--json", env=env)).json()
    (row,) = [r for r in rows if r["id"] == made["id"]]
    assert row["driver"] == "gcp/default"
    assert row["detail"]["instance"] == made["resource"]["metadata"]["instance"]
    # Google says Pacific time (-08:00 / -07:00); shoal's JSON says UTC, as everywhere.
    assert row["created"].endswith("Z"), row["created"]
    from datetime import UTC, datetime

    created = datetime.fromisoformat(row["created"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - created).total_seconds()) < 600


def test_free_expired_remote_from_another_machine_ends_what_is_past_its_expiry(
    cli: Cli,
    env: dict[str, str],
    gce: ComputeStandin,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from drivers.gcp import driver

    old = allocated(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "2m")
    young = allocated(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "3h")
    later = driver._now() + 3600  # Google has not ended it yet: the stand-in's clock stands
    monkeypatch.setattr(driver, "_now", lambda: later)
    other = tmp_path / "other-machine"
    other.mkdir()
    elsewhere = {**env, "SHOAL_HOME": str(other)}
    rows = ok(cli("status", "--remote", "gcp", "--json", env=elsewhere)).json()
    expired = {r["id"]: r["detail"]["expired"] for r in rows}
    assert expired == {old["id"]: True, young["id"]: False}
    ok(cli("free", "--expired", "--remote", "gcp", env=elsewhere))
    names = [i["name"] for i in gce.instances()]
    assert names == [young["resource"]["metadata"]["instance"]]


def test_refusals_name_the_option(cli: Cli, env: dict[str, str], gce: ComputeStandin) -> None:
    run = alloc(cli, env, "--cpu", "2", "--ram", "8", "-o", 'env={"API_TOKEN": "x"}')
    assert run.exit_code == 2 and "options.env.API_TOKEN" in run.stderr, run.stderr
    run = alloc(cli, env, "--cpu", "2", "--ram", "8", "-o", "zone=moon-base")
    assert run.exit_code == 2 and "zone" in run.stderr, run.stderr
    run = alloc(cli, env, "--cpu", "2", "--ram", "8", "-o", "labels={\"Bad\": \"x\"}")
    assert run.exit_code == 2 and "labels" in run.stderr, run.stderr
    run = alloc(cli, env, "--cpu", "2", "--ram", "8", "-o", "nonesuch=1")
    assert run.exit_code == 2 and "nonesuch" in run.stderr, run.stderr
    assert gce.calls("compute.instances.insert") == []


def test_dry_run_through_the_gce_alias_says_the_choice(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    run = ok(cli("alloc", "--driver", "gce", "--cpu", "8", "--ram", "32", "--dry-run",
                 "--json", env=env))  # fmt: skip
    assert "e2-standard-8" in run.stdout + run.stderr
    assert gce.calls("compute.instances.insert") == []


def test_refused_credentials_are_77_naming_the_role_once(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    run = alloc(cli, {**env, "SHOAL_GCP_TOKEN": "ya29.not-the-one"}, "--cpu", "2", "--ram", "8",
                "-o", "machine_type=e2-standard-2")  # fmt: skip
    assert run.exit_code == 77, run.stderr
    assert run.stderr.count("roles/compute.instanceAdmin.v1") == 1, run.stderr
    assert "manage VMs" in run.stderr and "ya29" not in run.stderr
    gce.take_violations()
