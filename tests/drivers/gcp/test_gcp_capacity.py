"""The `gcp` driver's capacity from the project's quotas (regions.get and projects.get of the
stand-in, with live usage), through the CLI: the count, the quota that binds, the count
after our own inserts and deletes, spot's PREEMPTIBLE_* quotas, GPUs, and quotas that
cannot be read."""

from __future__ import annotations

from collections.abc import Callable

from tests.conftest import Run
from tests.drivers.gcp.standin import ComputeStandin

Cli = Callable[..., Run]
REGION = "us-central1"
E2 = ("--cpu", "2", "--ram", "8", "-o", "machine_type=e2-standard-2")


def alloc(cli: Cli, env: dict[str, str], *args: str) -> Run:
    return cli("alloc", "--driver", "gcp", *args, env=env)


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


def test_count_is_the_least_every_cpu_quota_leaves_and_follows_our_own_vms(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.quotas[REGION]["CPUS"] = 6  # e2 counts against the regional CPUS: 3 of 2 vCPUs
    dry = ok(alloc(cli, env, *E2, "--dry-run", "--json")).json()
    assert dry["fits"] == 3
    quotas = {q["quota"]: q for q in dry["choice"]["capacity"]["quotas"]}
    assert quotas["CPUS"]["free"] == 6 and quotas["CPUS"]["fits"] == 3
    assert quotas["CPUS_ALL_REGIONS"]["fits"] == 500  # the project's 1000, 2 each
    made = ok(alloc(cli, env, *E2, "--json")).json()
    # Our insert made the cached snapshot stale: the next count asks Google again.
    assert ok(alloc(cli, env, *E2, "--dry-run")).stdout == "2\n"
    ok(alloc(cli, env, *E2))
    ok(alloc(cli, env, *E2))
    full = alloc(cli, env, *E2)
    assert full.exit_code == 75, full.stderr
    assert "CPUS" in full.stderr and "0 free in us-central1" in full.stderr, full.stderr
    assert len(gce.calls("compute.instances.insert")) == 3  # refused before any insert
    ok(cli("free", made["id"], env=env))
    assert ok(alloc(cli, env, *E2, "--dry-run")).stdout == "1\n"  # the delete is counted


def test_the_project_wide_quota_binds_when_it_leaves_less(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.project_quotas["CPUS_ALL_REGIONS"] = 4
    dry = ok(alloc(cli, env, *E2, "--dry-run", "--json")).json()
    assert dry["fits"] == 2


def test_a_series_with_a_quota_of_its_own_counts_against_it(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.quotas[REGION]["N2_CPUS"] = 16
    gce.quotas[REGION]["CPUS"] = 0  # not n2's: it still launches
    dry = ok(alloc(cli, env, "--cpu", "8", "--ram", "32", "-o", "machine_type=n2-standard-8",
                   "--dry-run", "--json")).json()  # fmt: skip
    assert dry["fits"] == 2
    assert "N2_CPUS" in {q["quota"] for q in dry["choice"]["capacity"]["quotas"]}


def test_spot_counts_against_the_preemptible_quota(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.quotas[REGION]["PREEMPTIBLE_CPUS"] = 4
    spot = ok(alloc(cli, env, *E2, "-o", "spot=true", "--dry-run", "--json")).json()
    assert spot["fits"] == 2
    assert "PREEMPTIBLE_CPUS" in {q["quota"] for q in spot["choice"]["capacity"]["quotas"]}
    on_demand = ok(alloc(cli, env, *E2, "--dry-run", "--json")).json()
    assert on_demand["fits"] > 2


def test_gpus_count_against_the_model_and_all_regions(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    line = ("--cpu", "12", "--ram", "85", "-o", "machine_type=a2-highgpu-1g")
    gce.project_quotas["GPUS_ALL_REGIONS"] = 0
    run = alloc(cli, env, *line)
    assert run.exit_code == 75, run.stderr
    assert "GPUS_ALL_REGIONS" in run.stderr and "0 free in the project" in run.stderr
    assert gce.calls("compute.instances.insert") == []
    gce.project_quotas["GPUS_ALL_REGIONS"] = 32
    gce.quotas[REGION]["NVIDIA_A100_GPUS"] = 1
    dry = ok(alloc(cli, env, *line, "--dry-run", "--json")).json()
    assert dry["fits"] == 1
    assert {"NVIDIA_A100_GPUS", "A2_CPUS", "GPUS_ALL_REGIONS"} <= {
        q["quota"] for q in dry["choice"]["capacity"]["quotas"]
    }


def test_quotas_that_cannot_be_read_do_not_refuse_and_are_noted_once(
    cli: Cli, env: dict[str, str], gce: ComputeStandin
) -> None:
    gce.deny = {"compute.regions.get", "compute.regions.list"}
    first = alloc(cli, env, *E2, "--dry-run")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == "unlimited\n"
    assert first.stderr.count("capacity not checked") == 1, first.stderr
    asked = len(gce.calls("compute.regions.list")) + len(gce.calls("compute.regions.get"))
    again = alloc(cli, env, *E2, "--dry-run")
    assert "noted earlier" in again.stderr
    # Remembered for the quota TTL: the second run does not ask (and wait) again.
    assert len(gce.calls("compute.regions.list")) + len(gce.calls("compute.regions.get")) == asked
    gce.deny = set()
    gce.take_violations()


def test_check_quotas_off_reads_no_quota(
    cli: Cli, env: dict[str, str], gce: ComputeStandin, write_config: Callable[[str], object]
) -> None:
    write_config('[drivers."gcp/lab"]\ncheck_quotas = false\n')
    gce.quotas[REGION]["CPUS"] = 0  # Google would refuse: shoal does not count it
    dry = ok(cli("alloc", "--driver", "gcp/lab", *E2, "--dry-run", "--json", env=env)).json()
    assert dry["choice"]["capacity"] == {"checked": False, "note": "check_quotas is off"}
    assert gce.calls("compute.regions.get") == gce.calls("compute.regions.list") == []
