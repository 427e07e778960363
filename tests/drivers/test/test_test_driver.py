"""The `test` driver, driven through the CLI as a user would."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
TWO_INSTANCES = """
[drivers."test/dev"]
cpu_limit = 2
ram_limit = 8

[drivers."test/prod"]
cpu_limit = 5
ram_limit = 8
"""

pytestmark = pytest.mark.usefixtures("ledger_backend")


@pytest.fixture
def limited(write_config: Callable[[str], Path]) -> None:
    write_config('[drivers."test/default"]\ncpu_limit = 3\nram_limit = 10\n')


def listed(cli) -> dict[str, str]:
    run = cli("status", "--all", "--json")
    assert run.exit_code == 0, run
    return {row["id"]: row["status"] for row in run.json()}


def alloc_id(cli, *extra: str) -> str:
    run = cli(*ALLOC, *extra)
    assert run.exit_code == 0, run
    return run.stdout.strip()


def test_alloc_status_free_round_trip(cli, limited: None, home: Path) -> None:
    run = cli(*ALLOC)
    assert run.exit_code == 0, run
    ident = run.stdout.strip()
    assert ident.startswith("test-")
    assert ident in run.stderr  # "allocated ID on test/default"
    assert "test/default" in run.stderr

    one = cli("status", ident, "--json")
    assert one.exit_code == 0, one
    shown = one.json()
    assert shown["status"] == "ALLOCATED"
    assert shown["driver_status"] == "ALLOCATED"
    assert shown["drift"] is None
    assert shown["driver"] == "test/default"
    assert (shown["cpu"], shown["ram"]) == (1, 1)
    assert shown["resource"]["identifier"] == ident

    table = cli("status")
    assert table.exit_code == 0
    assert ident in table.stdout and "ALLOCATED" in table.stdout

    freed = cli("free", ident)
    assert freed.exit_code == 0, freed
    assert listed(cli) == {ident: "FREED"}
    after = cli("status", ident, "--json").json()
    assert after["status"] == "FREED"


def test_allocations_count_against_the_configured_limit(cli, limited: None) -> None:
    ids = [alloc_id(cli) for _ in range(3)]
    full = cli(*ALLOC)
    assert full.exit_code == 75
    assert "no capacity" in full.stderr
    cli("free", ids[0])
    assert cli(*ALLOC).exit_code == 0


def test_snapshot_task(cli, limited: None) -> None:
    ident = alloc_id(cli)
    run = cli("task", ident, "snapshot", "--options", '{"label": "before-upgrade"}')
    assert run.exit_code == 0, run
    result = run.json()
    assert result["identifier"] == ident
    assert result["label"] == "before-upgrade"
    assert result["snapshot"].startswith(f"{ident}-snap-")
    bare = cli("task", ident, "snapshot")
    assert bare.exit_code == 0, bare
    assert bare.json()["label"] == ""


def test_task_on_a_freed_allocation_is_refused(cli, limited: None) -> None:
    ident = alloc_id(cli)
    cli("free", ident)
    run = cli("task", ident, "snapshot")
    assert run.exit_code == 2
    assert "FREED" in run.stderr


def test_unknown_task_is_a_usage_error(cli, limited: None) -> None:
    ident = alloc_id(cli)
    run = cli("task", ident, "reboot")
    assert run.exit_code == 2
    assert "reboot" in run.stderr
    assert run.stdout == ""


def test_unknown_task_option_is_a_usage_error(cli, limited: None) -> None:
    ident = alloc_id(cli)
    run = cli("task", ident, "snapshot", "--options", '{"colour": "red"}')
    assert run.exit_code == 2
    assert "colour" in run.stderr
    assert "label" in run.stderr  # the known ones are listed
    bad_json = cli("task", ident, "snapshot", "--options", "{nope")
    assert bad_json.exit_code == 2
    assert "--options" in bad_json.stderr


def test_injected_allocate_failure_leaves_no_allocated_row(cli, limited: None) -> None:
    run = cli(*ALLOC, "-o", "fail_allocate=255")
    assert run.exit_code == 1
    assert "allocate failed" in run.stderr
    rows = cli("status", "--all", "--json").json()
    assert [r["status"] for r in rows] == ["FAILED"]
    assert "allocate failed" in rows[0]["note"]
    assert cli("status", "--json").json() == []
    # Nothing is held: the full limit is still there.
    dry = cli(*ALLOC, "--dry-run")
    assert dry.stdout.strip() == "3"


def test_injected_capacity_failure_exits_75_and_writes_nothing(cli, limited: None) -> None:
    run = cli(*ALLOC, "-o", "fail_available_capacity=255")
    assert run.exit_code == 75  # the driver could not tell: try again later
    assert "capacity" in run.stderr
    assert listed(cli) == {}
    dry = cli(*ALLOC, "--dry-run", "-o", "fail_available_capacity=255")
    assert dry.exit_code == 75


def test_injected_deallocate_failure_keeps_the_allocation(cli, limited: None) -> None:
    ident = alloc_id(cli, "-o", "fail_deallocate=255")
    run = cli("free", ident)
    assert run.exit_code == 1
    assert "deallocate" in run.stderr
    shown = cli("status", ident, "--json").json()
    assert shown["status"] == "ALLOCATED"
    assert shown["driver_status"] == "ALLOCATED"  # the resource itself is still there
    assert shown["drift"] is None
    # Still counted: 2 of 3 left.
    assert cli(*ALLOC, "--dry-run").stdout.strip() == "2"
    # A second try fails the same way and still loses nothing.
    assert cli("free", ident).exit_code == 1
    assert listed(cli) == {ident: "ALLOCATED"}


def test_instance_config_deallocate_failure_keeps_the_allocation(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config('[drivers."test/default"]\nfail_deallocate = 255\n')
    ident = alloc_id(cli)
    assert cli("free", ident).exit_code == 1
    assert listed(cli) == {ident: "ALLOCATED"}


def test_unknown_option_names_it_and_lists_known(cli, limited: None) -> None:
    run = cli(*ALLOC, "-o", "fail_everything=255")
    assert run.exit_code == 2
    assert "fail_everything" in run.stderr
    for known in ("fail_allocate", "delay_allocate", "fail_deallocate"):
        assert known in run.stderr
    assert listed(cli) == {}


def test_option_out_of_range_is_a_usage_error(cli, limited: None) -> None:
    run = cli(*ALLOC, "-o", "fail_allocate=256")
    assert run.exit_code == 2
    assert "fail_allocate" in run.stderr
    assert listed(cli) == {}


@pytest.mark.parametrize("option", ["delay_allocate", "delay_available_capacity",
                                    "delay_deallocate"])
@pytest.mark.parametrize("value", ["1e18", "1e308", "-1"])
def test_a_stall_past_a_day_is_a_usage_error_naming_the_range(
    cli, limited: None, option: str, value: str
) -> None:
    # 1e18 s overflowed time.sleep ("unexpected OverflowError"), delay_deallocate only when
    # the allocation it was stored with was freed.
    run = cli(*ALLOC, "-o", f"{option}={value}", env={"SHOAL_DEBUG": ""})
    assert run.exit_code == 2, run
    assert f"options.{option}: must be" in run.stderr
    assert "0 to 86400" in run.stderr
    assert "unexpected" not in run.stderr
    assert listed(cli) == {}


def test_a_stall_within_a_day_is_taken(cli, limited: None) -> None:
    assert alloc_id(cli, "-o", "delay_allocate=0.01", "-o", "delay_deallocate=0.01")


def test_unknown_instance_config_key_is_a_config_error(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config('[drivers."test/default"]\ncpu_limt = 3\n')
    run = cli(*ALLOC)
    assert run.exit_code == 78
    assert "cpu_limt" in run.stderr
    assert "cpu_limit" in run.stderr


def test_instances_each_have_their_own_config(
    cli, write_config: Callable[[str], Path], home: Path
) -> None:
    write_config(TWO_INSTANCES)
    dev = cli("alloc", "--driver", "test/dev", "--cpu", "1", "--ram", "1", "--dry-run")
    prod = cli("alloc", "--driver", "test/prod", "--cpu", "1", "--ram", "1", "--dry-run")
    assert (dev.exit_code, prod.exit_code) == (0, 0)
    assert dev.stdout.strip() == "2"
    assert prod.stdout.strip() == "5"
    ident = cli("alloc", "--driver", "test/dev", "--cpu", "1", "--ram", "1")
    assert ident.exit_code == 0, ident
    shown = cli("status", ident.stdout.strip(), "--json").json()
    assert shown["driver"] == "test/dev"
    drivers = cli("drivers", "--json").json()
    by_name = {d["name"]: d["config"] for d in drivers}
    assert by_name["test/dev"]["cpu_limit"] == 2
    assert by_name["test/prod"]["cpu_limit"] == 5
    assert "test/default" not in by_name


def test_bare_driver_name_with_several_instances_is_ambiguous(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(TWO_INSTANCES)
    run = cli(*ALLOC)
    assert run.exit_code == 2
    assert "test/dev" in run.stderr and "test/prod" in run.stderr
    assert listed(cli) == {}


def test_unknown_driver_lists_known_drivers(cli) -> None:
    run = cli("alloc", "--driver", "nosuch", "--cpu", "1", "--ram", "1")
    assert run.exit_code == 2
    assert "nosuch" in run.stderr
    assert "process" in run.stderr and "test" in run.stderr
    run = cli("alloc", "--driver", "test/nosuch", "--cpu", "1", "--ram", "1")
    assert run.exit_code == 2
    assert "test/nosuch" in run.stderr
    assert "test/default" in run.stderr


def test_remote_instance_does_not_count_against_the_node(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config(
        '[drivers."test/default"]\ncpu_limit = 1\n\n'
        '[drivers."test/far"]\nis_remote = true\ncpu_limit = 1\n'
    )
    assert cli(*ALLOC).exit_code == 0
    far = cli("alloc", "--driver", "test/far", "--cpu", "1", "--ram", "1")
    assert far.exit_code == 0, far
    assert cli(*ALLOC).exit_code == 75


def test_remote_instance_limits_count_its_own_allocations(
    cli, write_config: Callable[[str], Path]
) -> None:
    write_config('[drivers."test/far"]\nis_remote = true\ncpu_limit = 2\nram_limit = 8\n')
    far = ("alloc", "--driver", "test/far", "--cpu", "1", "--ram", "1")
    assert [cli(*far).exit_code for _ in range(3)] == [0, 0, 75]
    dry = cli(*far, "--dry-run", "--json").json()
    assert dry["fits"] == 0 and dry["node_usage"] == {"cpu": 2, "ram": 2}
    # The node itself holds nothing: remote allocations are not local usage.
    node = cli("resources", "--json").json()[0]["overview"][0]["stat"]["onDemand"]
    assert node["allocated"]["cpu"] == {"vcpu": "0"}


def test_status_reports_drift_when_the_resource_vanished(cli, limited: None, home: Path) -> None:
    ident = alloc_id(cli)
    marker = home / "state" / "workspaces" / "test" / "default" / ident
    assert marker.exists()
    marker.unlink()  # gone behind shoal's back
    run = cli("status", ident)
    assert run.exit_code == 0
    assert "drift" in run.stderr
    shown = cli("status", ident, "--json").json()
    assert shown["status"] == "GONE"
    # Coming back is drift too.
    marker.write_text(json.dumps({}))
    back = cli("status", ident, "--json").json()
    assert back["status"] == "ALLOCATED"
    assert back["drift"] is not None
