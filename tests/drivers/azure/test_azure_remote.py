"""What the `azure` driver shares through Azure itself, through the CLI: `status --remote`
lists the VMs tagged by shoal from any machine, `free --expired --remote` and `free --remote
ID` end them from a machine whose ledger never had them (another SHOAL_HOME)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.drivers.azure.runs import Cli, allocated, left, nothing_left, ok, vm_name
from tests.drivers.azure.standin import RESOURCE_GROUP, ArmStandin

SMALL = ("--cpu", "2", "--ram", "8")


def other_machine(tmp_path: Path, home: Path, env: dict[str, str]) -> dict[str, str]:
    """Another SHOAL_HOME, with the same driver instance in its config and an empty ledger."""
    other = tmp_path / "other-machine"
    other.mkdir()
    (other / "config.toml").write_text((home / "config.toml").read_text())
    return {**env, "SHOAL_HOME": str(other)}


def rows(cli: Cli, env: dict[str, str]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = ok(cli("status", "--remote", "azure", "--json", env=env)).json()
    return found


def test_remote_listing_sees_shoal_vms_from_any_machine(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, tmp_path: Path, home: Path
) -> None:
    made = allocated(cli, env, *SMALL, "--lifetime", "2h", "-o", "spot=true")
    elsewhere = other_machine(tmp_path, home, env)
    (row,) = rows(cli, elsewhere)
    assert row["id"] == made["id"] and row["driver"] == "azure/lab"
    detail = row["detail"]
    assert detail["vm"] == vm_name(made) and detail["resource_group"] == RESOURCE_GROUP
    assert detail["size"] == "Standard_D2s_v5" and detail["market"] == "spot"
    assert detail["expired"] is False and row["expires"].endswith("Z")
    # ARM says `...T08:06:50.7479490+00:00`; shoal's JSON says UTC with a Z, as everywhere.
    assert row["created"].endswith("Z"), row["created"]
    created = datetime.fromisoformat(row["created"].replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - created).total_seconds()) < 600
    assert rows(cli, env) == [row]


def test_free_expired_remote_from_another_machine_ends_what_is_past_its_expiry(
    cli: Cli,
    env: dict[str, str],
    azure_arm: ArmStandin,
    tmp_path: Path,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from drivers.azure import driver

    old = allocated(cli, env, *SMALL, "--lifetime", "2m", "-o", "public_ip=true")
    young = allocated(cli, env, *SMALL, "--lifetime", "3h")
    # The old VM did not delete itself (its OS was stopped from inside, say): shoal's next
    # command from any machine ends it.
    later = driver._now() + 3600
    monkeypatch.setattr(driver, "_now", lambda: later)
    elsewhere = other_machine(tmp_path, home, env)
    expired = {r["id"]: r["detail"]["expired"] for r in rows(cli, elsewhere)}
    assert expired == {old["id"]: True, young["id"]: False}
    freed = ok(cli("free", "--expired", "--remote", "azure", env=elsewhere))
    assert f"{old['id']}: expired at" in freed.stderr and "another machine" in freed.stderr
    held = left(azure_arm)
    assert held["virtualMachines"] == [vm_name(young)]
    assert held["publicIPAddresses"] == []  # the old one's IP went with its VM
    # Its role assignment too: only the young VM's identity may still delete anything.
    scopes = [a["properties"]["scope"] for a in azure_arm.authz.assignments.values()]
    assert [s.rsplit("/", 1)[-1] for s in scopes] == [vm_name(young)]


def test_free_remote_of_another_machines_vm_finds_it_in_its_own_resource_group(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, tmp_path: Path, home: Path
) -> None:
    azure_arm.add_resource_group("team-rg")
    made = allocated(cli, env, *SMALL, "--lifetime", "1h", "-o", "resource_group=team-rg")
    vm = azure_arm.compute.vm("team-rg", vm_name(made))
    assert vm is not None
    elsewhere = other_machine(tmp_path, home, env)
    (row,) = rows(cli, elsewhere)
    assert row["detail"]["resource_group"] == "team-rg"
    freed = ok(cli("free", "--remote", "azure", made["id"], env=elsewhere))
    assert "made on another machine" in freed.stderr
    nothing_left(azure_arm)
    assert azure_arm.authz.assignments == {}
    assert rows(cli, elsewhere) == []
    # This machine's ledger learns it at its next look.
    gone = ok(cli("status", made["id"], "--json", env=env)).json()
    assert gone["status"] == "GONE" and gone["detail"]["reason"] == "deleted"


def test_free_remote_of_an_id_azure_does_not_hold_is_1_naming_the_listing(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    run = cli("free", "--remote", "azure", "azure-00000000", env=env)
    assert run.exit_code != 0
    assert "status --remote azure" in run.stderr
    assert azure_arm.calls("VirtualMachines_Delete") == []
