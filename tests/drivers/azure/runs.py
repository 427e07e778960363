"""What the `azure` driver's CLI tests share: running `shoal` against the stand-in (the
`env` fixture of conftest.py) and reading what the stand-in holds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.conftest import Run
from tests.drivers.azure.standin import RESOURCE_GROUP, SUBSCRIPTION, ArmStandin

Cli = Callable[..., Run]
DRIVER = "azure/lab"
GROUP_PATH = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{RESOURCE_GROUP}"
VM_PATH = f"{GROUP_PATH}/providers/Microsoft.Compute/virtualMachines/"
# What a VM is made of, and what deleting it must take along.
PARTS = (
    "Microsoft.Compute/virtualMachines",
    "Microsoft.Network/networkInterfaces",
    "Microsoft.Network/publicIPAddresses",
    "Microsoft.Compute/disks",
)


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


def alloc(cli: Cli, env: dict[str, str], *args: str) -> Run:
    return cli("alloc", "--driver", DRIVER, "--json", *args, env=env)


def allocated(cli: Cli, env: dict[str, str], *args: str) -> dict[str, Any]:
    made: dict[str, Any] = ok(alloc(cli, env, *args)).json()
    return made


def vm_name(made: dict[str, Any]) -> str:
    return str(made["resource"]["metadata"]["vm"])


def one_line(run: Run) -> str:
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, run.stderr
    return lines[0]


def left(azure_arm: ArmStandin) -> dict[str, list[str]]:
    """The names of the VMs, NICs, public IPs and disks the subscription holds, by type."""
    return {
        kind.rsplit("/", 1)[-1]: sorted(str(r["name"]) for r in azure_arm.resources(kind))
        for kind in PARTS
    }


def nothing_left(azure_arm: ArmStandin) -> None:
    held = {kind: names for kind, names in left(azure_arm).items() if names}
    assert held == {}, held
