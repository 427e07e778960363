"""The `azure` driver through the CLI, as users run it, against the loopback Resource Manager
(standin.py, held to the azure-mgmt SDK models) and a loopback Retail Prices API for the
price catalog: alloc, status, free, the remote listing, the lifetime Azure enforces, and the
errors mapped to exit codes."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from providers.cloud.http import RetryPolicy
from tests.conftest import Run
from tests.drivers.azure.standin import RESOURCE_GROUP, SUBSCRIPTION, TOKEN, ArmStandin
from tests.providers.apiserver import ApiServer
from tests.providers.azure import payloads as p

Cli = Callable[..., Run]
FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=10.0)
VM_PATH = (
    f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}/providers/"
    "Microsoft.Compute/virtualMachines/"
)


@pytest.fixture
def prices() -> Iterator[ApiServer]:
    rows = [
        p.price_item("Standard_D2s_v5", 0.096),
        p.price_item("Standard_D4s_v5", 0.192),
        p.price_item("Standard_D4ps_v5", 0.154),
        p.price_item("Standard_E4s_v5", 0.252),
    ]
    with ApiServer() as api:
        api.route(p.PRICES_PATH, p.PricesApi(rows, base=api.base, ignore=("armRegionName",)))
        yield api


@pytest.fixture
def env(
    azure_arm: ArmStandin,
    prices: ApiServer,
    write_config: Callable[[str], object],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    from drivers.azure import driver

    monkeypatch.setattr(driver, "RETRY_POLICY", FAST)
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
    )
    return {
        "SHOAL_AZURE_TOKEN": TOKEN,
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": azure_arm.base,
        "SHOAL_AZURE_PRICES_URL": prices.base,
    }


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


def alloc(cli: Cli, env: dict[str, str], *args: str) -> Run:
    return cli("alloc", "--driver", "azure/lab", "--json", *args, env=env)


def test_alloc_status_free_a_tagged_vm_that_deletes_itself_at_its_lifetime(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    made = ok(alloc(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "2h", "-m", "RUN=7",
                    "-o", "entry=python3 -m http.server 8080")).json()  # fmt: skip
    assert made["status"] == "ALLOCATED"
    meta = made["resource"]["metadata"]
    assert meta["size"] == "Standard_D2s_v5" and meta["location"] == "eastus"
    vm = azure_arm.compute.vm(RESOURCE_GROUP, meta["vm"])
    assert vm is not None
    tags = vm["tags"]
    assert tags["shoal-allocation"] == made["id"] and tags["shoal-managed-by"] == "shoal"
    assert tags["shoal-expires"].isdigit()
    props = vm["properties"]
    assert props["storageProfile"]["osDisk"]["deleteOption"] == "Delete"
    assert props["networkProfile"]["networkInterfaces"][0]["properties"]["deleteOption"] == "Delete"
    (sent,) = [c.body for c in azure_arm.calls("VirtualMachines_CreateOrUpdate")]
    # customData is never returned by a GET: what the driver sent says it.
    script = base64.b64decode(sent["properties"]["osProfile"]["customData"]).decode()
    assert "export RUN=7" in script and "exec python3 -m http.server 8080" in script
    assert "virtualMachines" not in script  # the VM learns its own id from IMDS at the expiry
    assert "shutdown -h +" not in script  # a halted VM would stay billed
    assert vm["identity"]["type"] == "SystemAssigned"
    # Its identity may delete it, and only it.
    assigned = list(azure_arm.authz.assignments.values())
    assert [a["properties"]["principalId"] for a in assigned] == [vm["identity"]["principalId"]]
    assert assigned[0]["properties"]["scope"].endswith(f"virtualMachines/{meta['vm']}")
    shown = ok(cli("status", made["id"], "--json", env=env)).json()
    assert shown["status"] == "ALLOCATED"
    ok(cli("free", made["id"], env=env))
    assert azure_arm.compute.vm(RESOURCE_GROUP, meta["vm"]) is None
    for kind in (
        "Microsoft.Network/networkInterfaces",
        "Microsoft.Network/publicIPAddresses",
        "Microsoft.Compute/disks",
    ):
        left = [r for r in azure_arm.resources(kind) if meta["vm"] in str(r.get("id"))]
        assert left == [], (kind, left)
    assert azure_arm.authz.assignments == {}


def test_the_vm_identity_deletes_its_own_vm_at_its_lifetime(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    from tests.drivers.azure.standin import Client

    made = ok(alloc(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "1h")).json()
    name = made["resource"]["metadata"]["vm"]
    # What the end script does at the expiry, as the VM: its identity's token, DELETE.
    vm_token = azure_arm.authz.identity_token(RESOURCE_GROUP, name)
    client = Client(azure_arm, token=vm_token)
    try:
        answer = client.delete(VM_PATH + name, api_version="2024-07-01")
        assert answer.status_code in (200, 202, 204), answer.text
    finally:
        client.close()
    azure_arm.advance(60)
    gone = ok(cli("status", made["id"], "--json", env=env)).json()
    assert gone["status"] in ("GONE", "EXPIRED"), gone


def test_self_delete_off_asks_for_no_identity(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin, write_config: Callable[[str], object]
) -> None:
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
        "self_delete = false\n"
    )
    made = ok(alloc(cli, env, "--cpu", "2", "--ram", "8", "--lifetime", "1h")).json()
    vm = azure_arm.compute.vm(RESOURCE_GROUP, made["resource"]["metadata"]["vm"])
    assert vm is not None and "identity" not in vm
    assert azure_arm.authz.assignments == {}


def test_dry_run_says_the_choice_and_checks_the_skus(
    cli: Cli, env: dict[str, str], azure_arm: ArmStandin
) -> None:
    run = ok(alloc(cli, env, "--cpu", "4", "--ram", "16", "--dry-run"))
    choice: dict[str, Any] = run.json()["choice"]
    # D4ps_v5 is cheaper but Arm64, and the image is x64.
    assert choice["instance_type"] == "Standard_D4s_v5"
    skipped = {s["instance_type"]: s["reason"] for s in choice["skipped"]}
    assert "Arm64" in skipped.get("Standard_D4ps_v5", ""), skipped
    assert azure_arm.calls("VirtualMachines_CreateOrUpdate") == []
