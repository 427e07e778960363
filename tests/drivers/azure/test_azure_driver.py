"""The `azure` driver through the CLI, as users run it, against the loopback Resource Manager
(standin.py, held to the azure-mgmt SDK models) and a loopback Retail Prices API for the
price catalog (conftest.py): what alloc asks of Azure (the size, image, zone, public IP,
disk, tags, spot, the boot script), a retried PUT, the lifetime Azure enforces through the
VM's identity, status from the instance view, and free."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.drivers.azure.runs import (
    PARTS,
    VM_PATH,
    Cli,
    alloc,
    allocated,
    left,
    nothing_left,
    ok,
    one_line,
    vm_name,
)
from tests.drivers.azure.standin import RESOURCE_GROUP, ArmStandin, Client

SMALL = ("--cpu", "2", "--ram", "8")
GEN1 = "Canonical:ubuntu-24_04-lts:server-gen1:latest"
ARM64 = "Canonical:ubuntu-24_04-lts:server-arm64:latest"
VM_CONTRIBUTOR = "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"


def sent_vms(azure_arm: ArmStandin) -> list[dict[str, Any]]:
    return [c.body for c in azure_arm.calls("VirtualMachines_CreateOrUpdate")]


def the_vm(azure_arm: ArmStandin, made: dict[str, Any]) -> dict[str, Any]:
    vm = azure_arm.compute.vm(RESOURCE_GROUP, vm_name(made))
    assert vm is not None, made
    return vm


def boot_script(azure_arm: ArmStandin) -> str:
    # customData is never returned by a GET: what the driver sent says it.
    *_, sent = sent_vms(azure_arm)
    return base64.b64decode(sent["properties"]["osProfile"]["customData"]).decode()


def dry_choice(cli: Cli, env: dict[str, str], *args: str) -> dict[str, Any]:
    choice: dict[str, Any] = ok(alloc(cli, env, *args, "--dry-run")).json()["choice"]
    return choice


# -- alloc: what is asked of Azure -------------------------------------------------------------


def test_alloc_status_free_a_tagged_vm_that_deletes_itself_at_its_lifetime(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "--lifetime", "2h", "-m", "RUN=7",
                     "-o", "entry=python3 -m http.server 8080")  # fmt: skip
    assert made["status"] == "ALLOCATED"
    meta = made["resource"]["metadata"]
    assert meta["size"] == "Standard_D2s_v5" and meta["location"] == "eastus"
    vm = the_vm(azure_arm, made)
    tags = vm["tags"]
    assert tags["shoal-allocation"] == made["id"] and tags["shoal-managed-by"] == "shoal"
    assert tags["shoal-expires"].isdigit()
    # Its NIC and OS disk carry them too (Azure gives a disk the VM makes none of its tags).
    for kind in ("Microsoft.Network/networkInterfaces", "Microsoft.Compute/disks"):
        (part,) = azure_arm.resources(kind)
        assert part.get("tags") == tags, (kind, part.get("tags"))
    props = vm["properties"]
    assert props["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    assert props["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] == "Delete"
    script = boot_script(azure_arm)
    assert "export RUN=7" in script and "exec python3 -m http.server 8080" in script
    assert "virtualMachines" not in script  # the VM learns its own id from IMDS at the expiry
    assert "shutdown -h +" not in script  # a halted VM would stay billed
    assert vm["identity"]["type"] == "SystemAssigned"
    shown = ok(cli("status", made["id"], "--json", env=env)).json()
    assert shown["status"] == "ALLOCATED"
    ok(cli("free", made["id"], env=env))
    nothing_left(azure_arm)
    assert azure_arm.authz.assignments == {}


def test_a_named_size_needs_no_cpu_or_ram_and_refusals_name_the_size_option(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, "-o", "size=Standard_D4s_v5")
    assert (made["cpu"], made["ram"]) == (4, 16)  # the size's shape
    (body,) = sent_vms(azure_arm)
    assert body["properties"]["hardwareProfile"]["vmSize"] == "Standard_D4s_v5"
    assert dry_choice(cli, env, "-o", "size=Standard_D4s_v5")["why"] == "named by -o size"
    small = alloc(cli, env, "--cpu", "8", "--ram", "8", "-o", "size=Standard_D2s_v5")
    assert small.exit_code == 2
    assert one_line(small).startswith("shoal: error: options.size: Standard_D2s_v5"), small.stderr
    unknown = alloc(cli, env, "-o", "size=Standard_X9")
    assert unknown.exit_code == 2 and "options.size: Standard_X9" in one_line(unknown)
    assert len(sent_vms(azure_arm)) == 1


def test_the_cheapest_fitting_size_and_a_gpu_size_for_a_gpu(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    cheap = dry_choice(cli, env, "--cpu", "4", "--ram", "16")
    # D4ps_v5 is cheaper but Arm64, and the image is x64; the T4 size is no cheap CPU box.
    assert cheap["instance_type"] == "Standard_D4s_v5"
    made = allocated(cli, env, "--cpu", "4", "--ram", "16", "-o", "gpus=1", "-o", "gpu=T4")
    assert made["resource"]["metadata"]["size"] == "Standard_NC4as_T4_v3"
    (body,) = sent_vms(azure_arm)
    assert body["properties"]["hardwareProfile"]["vmSize"] == "Standard_NC4as_T4_v3"


def test_an_image_by_urn_is_sent_as_its_parts_and_a_missing_one_is_2(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    urn = "Canonical:0001-com-ubuntu-server-jammy:22_04-lts-gen2:latest"
    made = allocated(cli, env, *SMALL, "-o", f"image={urn}")
    (body,) = sent_vms(azure_arm)
    assert body["properties"]["storageProfile"]["imageReference"] == {
        "publisher": "Canonical",
        "offer": "0001-com-ubuntu-server-jammy",
        "sku": "22_04-lts-gen2",
        "version": "latest",
    }
    image = the_vm(azure_arm, made)["properties"]["storageProfile"]["imageReference"]
    assert image["exactVersion"] == "22.04.202411010"  # Azure's newest of "latest"
    missing = alloc(cli, env, *SMALL, "-o", "image=Canonical:nonesuch:server:latest")
    assert missing.exit_code == 2 and "options.image" in one_line(missing)
    version = alloc(cli, env, *SMALL, "-o", "image=Canonical:ubuntu-24_04-lts:server:24.04.1")
    assert version.exit_code == 2 and "options.image" in one_line(version)
    assert len(sent_vms(azure_arm)) == 1


def test_a_restricted_size_is_never_chosen_and_refused_when_named(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.compute.restrict_sku("Standard_D2s_v5", "eastus")
    choice = dry_choice(cli, env, *SMALL)
    # The price catalog reads the subscription's Resource SKUs too: not offered, not priced.
    assert choice["instance_type"] == "Standard_D2s_v6"
    named = alloc(cli, env, "-o", "size=Standard_D2s_v5")
    assert named.exit_code == 2, named.stderr
    said = one_line(named)
    assert "options.size: Standard_D2s_v5" in said and "NotAvailableForSubscription" in said
    assert sent_vms(azure_arm) == []


def test_a_size_restricted_in_the_zone_asked_is_skipped_there_with_its_reason(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.compute.restrict_sku("Standard_D2s_v5", "eastus", ("2",))
    choice = dry_choice(cli, env, *SMALL, "-o", "zone=2")
    assert choice["instance_type"] == "Standard_D2s_v6"
    skipped = {s["instance_type"]: s["reason"] for s in choice["skipped"]}
    assert skipped["Standard_D2s_v5"] == "is not available in zone(s) 2", skipped
    assert dry_choice(cli, env, *SMALL, "-o", "zone=1")["instance_type"] == "Standard_D2s_v5"
    named = alloc(cli, env, "-o", "size=Standard_D2s_v5", "-o", "zone=2")
    assert named.exit_code == 2 and "options.size" in one_line(named)
    gpu = ("--cpu", "4", "--ram", "16", "-o", "gpus=1", "-o", "gpu=T4")
    # The stand-in's subscription may not have the T4 size in eastus zone 3.
    refused = alloc(cli, env, *gpu, "-o", "zone=3", "--dry-run")
    assert refused.exit_code == 2 and "zone" in one_line(refused), refused.stderr
    made = allocated(cli, env, *gpu, "-o", "zone=2")
    assert the_vm(azure_arm, made)["zones"] == ["2"]
    assert made["resource"]["metadata"]["zone"] == "2"


@pytest.mark.parametrize(
    ("image", "size", "generation"),
    [(GEN1, "Standard_D2s_v6", "V2"), ("", "Standard_A1_v2", "V1")],
    ids=["gen1-image-v2-size", "gen2-image-v1-size"],
)
def test_a_size_of_another_hyper_v_generation_than_the_image_is_refused_naming_it(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, image: str, size: str, generation: str
) -> None:
    args = ["-o", f"size={size}"] + (["-o", f"image={image}"] if image else [])
    run = alloc(cli, env, *args)
    assert run.exit_code == 2, run.stderr
    said = one_line(run)
    assert f"options.size: {size} runs Hyper-V generation {generation}" in said, said
    assert sent_vms(azure_arm) == []


def test_the_cheapest_choice_for_a_generation_1_image_skips_generation_2_sizes(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, "--cpu", "1", "--ram", "2", "-o", f"image={GEN1}")
    assert made["resource"]["metadata"]["size"] == "Standard_A1_v2"
    choice = dry_choice(cli, env, "--cpu", "2", "--ram", "8", "-o", f"image={GEN1}")
    assert choice["instance_type"] == "Standard_D2s_v5"
    skipped = {s["instance_type"]: s["reason"] for s in choice["skipped"]}
    assert "Hyper-V generation V2" in skipped["Standard_D2s_v6"], skipped


def test_an_arm64_image_gets_an_arm64_size(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "-o", f"image={ARM64}")
    assert made["resource"]["metadata"]["size"] == "Standard_D2ps_v5"
    (body,) = sent_vms(azure_arm)
    assert body["properties"]["storageProfile"]["imageReference"]["sku"] == "server-arm64"
    x64 = alloc(cli, env, "-o", "size=Standard_D2s_v5", "-o", f"image={ARM64}")
    assert x64.exit_code == 2 and "is x64 and the image is Arm64" in one_line(x64)


def test_zone_public_ip_disk_and_tags_on_the_vm_nic_ip_and_disk(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    tags = 'tags={"team": "ml", "cost-center": "42"}'
    made = allocated(cli, env, *SMALL, "--lifetime", "1h", "-o", "zone=2", "-o", "public_ip=true",
                     "-o", "disk_gb=64", "-o", tags)  # fmt: skip
    meta = made["resource"]["metadata"]
    assert meta["zone"] == "2" and meta["public_ip"].startswith("203.0.113.")
    assert made["resource"]["ip_addr"] == meta["public_ip"] != meta["private_ip"]
    vm = the_vm(azure_arm, made)
    assert vm["zones"] == ["2"]
    assert vm["properties"]["storageProfile"]["osDisk"]["diskSizeGB"] == 64
    expected = {
        "team": "ml",
        "cost-center": "42",
        "shoal-allocation": made["id"],
        "shoal-managed-by": "shoal",
        "shoal-expires": vm["tags"]["shoal-expires"],
    }
    for kind in PARTS:
        (part,) = azure_arm.resources(kind)
        assert part["tags"] == expected, (kind, part.get("tags"))
    # The VM made its NIC and IP: deleting it deletes them, the IP included.
    (config,) = vm["properties"]["networkProfile"]["networkInterfaceConfigurations"]
    assert config["properties"]["deleteOption"] == "Delete"
    ip_config = config["properties"]["ipConfigurations"][0]["properties"]
    assert ip_config["publicIPAddressConfiguration"]["properties"]["deleteOption"] == "Delete"
    ok(cli("free", made["id"], env=env))
    nothing_left(azure_arm)


def test_refused_options_name_the_option(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    for args, where in [
        (('tags={"shoal-x": "y"}',), "options.tags"),
        (('tags={"api_key": "y"}',), "options.tags"),
        (("zone=4",), "options.zone"),
        (("disk_gb=-1",), "options.disk_gb"),
        (("max_price=0",), "options.max_price"),
        (("nonesuch=1",), "nonesuch"),
    ]:
        run = alloc(cli, env, *SMALL, *(x for a in args for x in ("-o", a)))
        assert run.exit_code == 2 and where in one_line(run), (args, run.stderr)
    assert "shoal- names are reserved" in one_line(alloc(cli, env, *SMALL, "-o",
                                                         'tags={"shoal-x": "y"}'))  # fmt: skip
    assert sent_vms(azure_arm) == []


def test_entry_and_env_go_to_the_vm_in_custom_data(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    allocated(cli, env, *SMALL, "-o", 'env={"MODE": "ci"}', "-m", "RUN=7",
              "-o", 'entry=["sh", "-c", "echo hi"]')  # fmt: skip
    script = boot_script(azure_arm)
    assert script.startswith("#!")
    assert "export MODE=ci" in script and "export RUN=7" in script
    assert "echo hi" in script
    assert "shoal-no-login" in str(sent_vms(azure_arm)[0]["properties"]["osProfile"])


def test_secrets_are_refused_before_anything_is_sent(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, tmp_path: Path
) -> None:
    variable = alloc(cli, env, *SMALL, "-o", 'env={"API_TOKEN": "hunter2"}')
    assert variable.exit_code == 2
    said = one_line(variable)
    assert "options.env.API_TOKEN" in said and "Key Vault" in said and "hunter2" not in said
    meta = alloc(cli, env, *SMALL, "-m", "GITHUB_TOKEN=hunter2")
    assert meta.exit_code == 2 and "--meta GITHUB_TOKEN" in one_line(meta)
    path = tmp_path / "def.yaml"
    path.write_text(
        "driver: azure/lab\nresources: {cpu: 2, ram: 8}\n"
        "authentication: {username: ci, password: hunter2}\n"
    )
    auth = cli("alloc", str(path), env=env)
    assert auth.exit_code == 2 and "authentication" in one_line(auth), auth.stderr
    assert "hunter2" not in auth.stderr + auth.stdout
    assert sent_vms(azure_arm) == []


def test_spot_asks_for_spot_deleted_on_eviction_at_a_max_price(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "-o", "spot=true", "-o", "max_price=0.05")
    (body,) = sent_vms(azure_arm)
    props = body["properties"]
    assert props["priority"] == "Spot" and props["evictionPolicy"] == "Delete"
    assert props["billingProfile"] == {"maxPrice": 0.05}
    assert made["resource"]["metadata"]["market"] == "spot"
    # Up to the on-demand price: -1, which Azure never evicts for price.
    allocated(cli, env, *SMALL, "-o", "spot=true")
    assert sent_vms(azure_arm)[1]["properties"]["billingProfile"] == {"maxPrice": -1}
    # A max_price under every spot price of the catalog fits nothing.
    run = alloc(cli, env, *SMALL, "-o", "spot=true", "-o", "max_price=0.001")
    assert run.exit_code == 2 and "max_price" in one_line(run), run.stderr


# -- a retried PUT --------------------------------------------------------------------------


@pytest.mark.parametrize("status", [0, 503], ids=["dropped", "503"])
def test_a_retried_vm_put_whose_answer_was_lost_is_the_same_vm(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, status: int
) -> None:
    # The first PUT is carried out, its answer lost: the retry names the same VM.
    azure_arm.fail_http(status, operation="VirtualMachines_CreateOrUpdate", apply=True)
    made = allocated(cli, env, *SMALL, "--lifetime", "1h")
    assert len(sent_vms(azure_arm)) == 2
    assert left(azure_arm)["virtualMachines"] == [vm_name(made)]
    assert len(azure_arm.authz.assignments) == 1
    ok(cli("free", made["id"], env=env))
    nothing_left(azure_arm)


def test_a_retried_nic_put_is_the_same_nic(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.fail_http(0, operation="NetworkInterfaces_CreateOrUpdate", apply=True)
    made = allocated(cli, env, *SMALL)
    assert len(azure_arm.calls("NetworkInterfaces_CreateOrUpdate")) == 2
    assert left(azure_arm)["networkInterfaces"] == [f"{vm_name(made)}-nic"]


# -- the lifetime --------------------------------------------------------------------------


def test_the_vm_identity_may_delete_its_vm_and_nothing_else(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "--lifetime", "1h")
    vm = the_vm(azure_arm, made)
    (assigned,) = azure_arm.authz.assignments.values()
    props = assigned["properties"]
    assert props["principalId"] == vm["identity"]["principalId"]
    assert props["roleDefinitionId"].endswith(f"/roleDefinitions/{VM_CONTRIBUTOR}")
    assert props["scope"] == vm["id"]  # the VM's scope: not its group, not the subscription
    other = allocated(cli, env, *SMALL, "--lifetime", "1h")
    client = Client(azure_arm, token=azure_arm.authz.identity_token(RESOURCE_GROUP, vm_name(made)))
    try:
        assert client.delete(VM_PATH + vm_name(other), api_version="2024-07-01").status_code == 403
    finally:
        client.close()
    azure_arm.take_violations()


def test_the_vm_identity_deletes_its_own_vm_at_its_lifetime_leaving_nothing_billed(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, monkeypatch: pytest.MonkeyPatch
) -> None:
    from drivers.azure import driver

    made = allocated(cli, env, *SMALL, "--lifetime", "2m", "-o", "public_ip=true")
    # What the end script does at the expiry, as the VM: its identity's token, DELETE.
    client = Client(azure_arm, token=azure_arm.authz.identity_token(RESOURCE_GROUP, vm_name(made)))
    try:
        answer = client.delete(VM_PATH + vm_name(made), api_version="2024-07-01")
        assert answer.status_code in (200, 202, 204), answer.text
    finally:
        client.close()
    azure_arm.advance(60)
    nothing_left(azure_arm)  # the NIC, the public IP and the disk went with it
    later = driver._now() + 3600
    monkeypatch.setattr(driver, "_now", lambda: later)
    gone = ok(cli("status", made["id"], "--json", env=env)).json()
    assert gone["status"] == "GONE", gone
    assert gone["detail"]["reason"] == "expired", gone["detail"]
    # What the VM could not delete, its own role assignment, `free` ends.
    assert len(azure_arm.authz.assignments) == 1
    ok(cli("free", made["id"], env=env))
    assert azure_arm.authz.assignments == {}


def test_a_refused_role_assignment_is_77_naming_the_fix_and_the_vm_is_deleted(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    azure_arm.deny = {"Microsoft.Authorization/roleAssignments/write"}
    run = alloc(cli, env, *SMALL, "--lifetime", "1h", "-o", "public_ip=true")
    assert run.exit_code == 77, run.stderr
    said = one_line(run)
    assert "self_delete = false" in said and "roleAssignments/write" in said, said
    assert "the VM was deleted" in said and env["SHOAL_AZURE_TOKEN"] not in said
    # The token was good, the caller's role short: no advice to change the token.
    assert "SHOAL_AZURE_TOKEN" not in said and "http" not in said, said
    assert len(sent_vms(azure_arm)) == 1
    nothing_left(azure_arm)  # nothing billed runs past a lifetime nobody enforces
    azure_arm.take_violations()


def test_self_delete_off_asks_for_no_identity(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, write_config: Callable[[str], object]
) -> None:
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
        "self_delete = false\n"
    )
    azure_arm.deny = {"Microsoft.Authorization/roleAssignments/write"}
    made = allocated(cli, env, *SMALL, "--lifetime", "1h")
    assert "identity" not in the_vm(azure_arm, made)
    assert azure_arm.authz.assignments == {}
    assert "self_delete" not in made["resource"]["metadata"]


def test_a_spot_vm_evicted_is_gone_with_the_reason(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "--lifetime", "1h", "-o", "spot=true")
    azure_arm.compute.evict(RESOURCE_GROUP, vm_name(made))
    nothing_left(azure_arm)  # evictionPolicy Delete: the disk and NIC went with it
    gone = ok(cli("status", made["id"], "--json", env=env)).json()
    assert gone["status"] == "GONE"
    assert gone["detail"]["reason"] == "evicted", gone["detail"]
    ok(cli("free", made["id"], env=env))
    assert azure_arm.authz.assignments == {}


# -- status from the instance view, and free --------------------------------------------------


def test_status_of_a_running_vm_says_its_addresses(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "-o", "public_ip=true")
    shown = ok(cli("status", made["id"], "--json", env=env)).json()
    assert shown["status"] == "ALLOCATED" and shown["driver_status"] == "ALLOCATED"
    detail = shown["detail"]
    assert detail["state"] == "running" and detail["size"] == "Standard_D2s_v5"
    assert detail["private_ip"] == "10.0.0.4" and detail["public_ip"].startswith("203.0.113.")
    # `status ID` reads the VM once: status() and describe() share what was read.
    assert len(azure_arm.calls("VirtualMachines_Get")) == 2  # the create's, the status's


def test_a_vm_stopped_from_inside_is_said_to_be_still_billed_and_free_deletes_it(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "--lifetime", "1h")
    azure_arm.compute.shutdown(RESOURCE_GROUP, vm_name(made))
    shown = ok(cli("status", made["id"], "--json", env=env)).json()
    assert shown["driver_status"] != "ALLOCATED"
    detail = shown["detail"]
    assert detail["state"] == "stopped" and detail["reason"] == "stopped"
    assert "still billed" in detail["message"], detail
    assert left(azure_arm)["virtualMachines"] == [vm_name(made)]
    ok(cli("free", made["id"], env=env))
    nothing_left(azure_arm)


def test_status_of_a_vm_deleted_outside_shoal_says_so(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, arm: Client
) -> None:
    made = allocated(cli, env, *SMALL, "--lifetime", "2h")
    arm.act("DELETE", VM_PATH + vm_name(made))
    gone = ok(cli("status", made["id"], "--json", env=env)).json()
    assert gone["status"] == "GONE" and gone["driver_status"] == "NONE"
    assert gone["detail"]["reason"] == "deleted", gone["detail"]
    assert gone["detail"]["message"] == "deleted outside shoal"


def test_free_waits_for_the_delete_is_recorded_and_is_idempotent(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = allocated(cli, env, *SMALL, "--lifetime", "1h")
    first = ok(cli("free", made["id"], env=env))
    assert first.stderr.strip() == f"{made['id']}: freed"
    # Waited for: Azure had deleted the VM (and its parts) when free returned.
    deleted = [rid for what, rid, _ in azure_arm.events if what == "deleted"]
    assert any(rid.endswith(f"virtualMachines/{vm_name(made)}") for rid in deleted)
    assert any(rid.endswith(f"disks/{vm_name(made)}-os") for rid in deleted)
    nothing_left(azure_arm)
    row = ok(cli("status", made["id"], "--json", env=env)).json()
    assert row["status"] == "FREED" and row["note"] == "freed"
    again = ok(cli("free", made["id"], env=env))
    assert "already freed" in again.stderr
    assert len(azure_arm.calls("VirtualMachines_Delete")) == 1


def test_dry_run_says_the_choice_and_checks_the_skus(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    choice = dry_choice(cli, env, "--cpu", "4", "--ram", "16")
    assert choice["instance_type"] == "Standard_D4s_v5"
    skipped = {s["instance_type"]: s["reason"] for s in choice["skipped"]}
    assert "Arm64" in skipped.get("Standard_D4ps_v5", ""), skipped
    assert sent_vms(azure_arm) == []
