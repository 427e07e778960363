#!/usr/bin/env python3
"""`shoal alloc -> status -> free` of an Azure VM, beside the same lifecycle by the Azure CLI
(`az vm create`, `az vm show -d`, `az vm delete`), on one loopback Azure Resource Manager.

Starts the ARM stand-in of the azure driver's tests over HTTPS (tests/drivers/azure/
standin.py: every request held to the azure-mgmt SDK models; operations end on its clock,
with the tests' timing), with what the Azure CLI needs besides (benchmarks/azure_loopback.py:
template deployments carried out on the server as ARM does, which `az vm create` uses to make
its NIC, VM and role assignment; Subscriptions - List; the cloud metadata as az reads it),
the tests' loopback Entra token endpoint over TLS, and a loopback Retail Prices API for the
price catalog. Both sides log in as the same service principal with its secret (the client
credentials grant) and keep their token: az through `az cloud register` (the stand-in as its
Resource Manager, whose metadata names the loopback Entra endpoint), `az config set
core.instance_discovery=false` and `az login --service-principal`, with MSAL's token cache;
shoal through AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET and AZURE_AUTHORITY_HOST,
with its token file. Both trust the stand-in's CA alone (REQUESTS_CA_BUNDLE for az,
SSL_CERT_FILE for shoal); every other address goes to a dead loopback port (HTTP(S)_PROXY,
NO_PROXY=127.0.0.1), and az's telemetry is off. Every long-running answer says Retry-After: 1
(--retry-after), which both obey (a 0 would send azure-core to its 30 s default and shoal to
its 0.25 s floor); azure-core polls once at once, then sleeps; shoal sleeps first.

Then --rounds interleaved rounds (default 10, the order rotated each round), each one
sequential cycle of four kinds, in two pairs:

- `shoal, self_delete = false`: three processes of the installed `shoal` (alloc --json,
  status ID --json, free ID), as a user runs them: a NIC, then the VM;
- `az vm`: what shoal asks, said to az: `az vm create` with the same size, image, location,
  subnet (no public IP, no NSG), admin user and SSH key (shoal's), computer name, OS disk
  name, SKU and deleteOption, NIC deleteOption, tags (shoal-allocation, shoal-managed-by,
  shoal-expires) and custom data (shoal's bytes, its allocation id swapped for az's); then
  `az vm show -d` (the VM with its power state and addresses, as `shoal status` reads them)
  and `az vm delete --yes`;
- `shoal` (the default, self_delete = true): the VM also gets a system-assigned identity and
  the role Virtual Machine Contributor on itself (so that it deletes itself at its
  lifetime); `free` deletes the role assignment and the VM;
- `az vm, identity`: the same with `--assign-identity [system] --scope VM --role "Virtual
  Machine Contributor"`, and before `az vm delete`, `az role assignment delete --scope VM
  --assignee-object-id PRINCIPAL`: az leaves the assignment behind otherwise (its free step
  is these two processes).

az cannot ask for managed boot diagnostics at create (shoal enables them); the warm-up
cycles' VM bodies are compared field by field and the differences printed. After every
cycle the stand-in is asked whether the VM was created and whether the VM, its NIC and its
OS disk are gone, and its role assignment with them. Target (issue 26): shoal at most 1.0x
az, for each pair.

Run from a regular install with the test extras, and the Azure CLI in a venv of its own
(its pinned dependencies would fight shoal's):

    pip install '.[test]'
    python -m venv /tmp/azvenv && /tmp/azvenv/bin/pip install azure-cli
    python benchmarks/azure_driver.py [--rounds 10] [--az /tmp/azvenv/bin/az]
        [--retry-after 1] [--profile DIR]

--profile DIR then runs one more `shoal alloc` under -X importtime and one under cProfile
(DIR/alloc.prof) and prints where the time went.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# the tests' stand-ins; appended, so that `cli` still comes from the install
sys.path.append(str(Path(__file__).resolve().parent.parent))
from _timing import Machine, check_installed, shoal_command
from aws_driver import measure, quartiles, timed
from container import run

if TYPE_CHECKING:
    from azure_loopback import Arm

GROUP = "shoal-rg"  # the stand-in's resource group, in eastus
LOCATION = "eastus"
SIZE = "Standard_D2s_v5"
IMAGE = "Canonical:ubuntu-24_04-lts:server:latest"
DRIVER = "azure/bench"
LIFETIME_SECONDS = 3600
ROLE = "Virtual Machine Contributor"
VM_CONTRIBUTOR = "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"
VM_TYPE = "Microsoft.Compute/virtualMachines"
SHOAL_PLAIN, AZ_PLAIN = "shoal, self_delete = false", "az vm"
SHOAL_SELF, AZ_SELF = "shoal (self-delete)", "az vm, identity"
PAIRS = ((SHOAL_PLAIN, AZ_PLAIN), (SHOAL_SELF, AZ_SELF))
IDENTITY = {SHOAL_PLAIN: False, AZ_PLAIN: False, SHOAL_SELF: True, AZ_SELF: True}
TARGET = 1.0
DEAD = "http://127.0.0.1:9"  # the discard port: nothing listens, so nothing leaves


class Cycles:
    """The four lifecycles on one stand-in, and what each asked of it."""

    def __init__(
        self, arm: Arm, az: list[str], envs: dict[str, dict[str, str]], subnet: str
    ) -> None:
        self.arm, self.az, self.envs, self.subnet = arm, az, envs, subnet
        self.scripts: dict[bool, tuple[str, str]] = {}  # per identity: shoal's script, its id
        self.key = ""  # the SSH key shoal sent, given to az too
        self.asked: dict[str, list[str]] = {}  # per kind, the operations of its last cycle
        self.served: dict[str, list[float]] = {}  # per kind, the stand-in's seconds per cycle
        self.vms: dict[str, tuple[str, str]] = {}  # per kind, its last VM and allocation id
        self.root = Path(envs[AZ_PLAIN]["AZURE_CONFIG_DIR"]).parent

    def shoal(self, kind: str) -> list[float]:
        shoal, env = shoal_command(), self.envs[kind]
        steps: list[float] = []
        seen = len(self.arm.client)
        out = timed(
            steps,
            [*shoal, "alloc", "--driver", DRIVER, "--lifetime", "1h",
             "-o", f"size={SIZE}", "-o", f"image={IMAGE}", "--json"],
            env,
        )  # fmt: skip
        made = json.loads(out)
        alloc_id, meta = made["id"], made["resource"]["metadata"]
        if (meta["location"], meta["size"]) != (LOCATION, SIZE):
            raise SystemExit(f"{alloc_id}: allocated {meta['size']} in {meta['location']}")
        status = json.loads(timed(steps, [*shoal, "status", alloc_id, "--json"], env))
        if status["driver_status"] != "ALLOCATED":
            raise SystemExit(f"{alloc_id}: driver reports {status['driver_status']}")
        timed(steps, [*shoal, "free", alloc_id], env)
        name = meta["vm"]
        self._lived(name, f"{name}-nic", f"{name}-os", IDENTITY[kind])
        self.asked[kind], self.vms[kind] = self._operations(kind, seen), (name, alloc_id)
        if IDENTITY[kind] not in self.scripts:
            props = self._create_of(name)["properties"]
            data = base64.b64decode(props["osProfile"]["customData"]).decode()
            self.scripts[IDENTITY[kind]] = (data, alloc_id)
            (key,) = props["osProfile"]["linuxConfiguration"]["ssh"]["publicKeys"]
            self.key = key["keyData"]
        return steps

    def az_cycle(self, kind: str) -> list[float]:
        """What shoal asks of Azure, said to the Azure CLI."""
        identity = IDENTITY[kind]
        if identity not in self.scripts:
            raise SystemExit("shoal's cycle runs first: az is given its custom data and key")
        shoal_script, shoal_id = self.scripts[identity]
        alloc_id = like(shoal_id)
        name = f"shoal-{alloc_id}"
        vm_id = self.arm.rid(GROUP, VM_TYPE, name)
        script = self.root / f"{alloc_id}.sh"
        script.write_text(shoal_script.replace(shoal_id, alloc_id))
        expires = math.ceil(time.time()) + LIFETIME_SECONDS
        env = self.envs[kind]
        steps: list[float] = []
        seen = len(self.arm.client)
        create = [
            *self.az, "vm", "create", "-g", GROUP, "-n", name, "-l", LOCATION,
            "--image", IMAGE, "--size", SIZE, "--subnet", self.subnet,
            "--public-ip-address", "", "--nsg", "", "--nic-delete-option", "Delete",
            "--os-disk-name", f"{name}-os", "--storage-sku", "StandardSSD_LRS",
            "--os-disk-delete-option", "Delete", "--computer-name", name,
            "--admin-username", "shoal", "--ssh-key-values", self.key,
            "--custom-data", str(script),
            "--tags", f"shoal-allocation={alloc_id}", "shoal-managed-by=shoal",
            f"shoal-expires={expires}", "-o", "json",
        ]  # fmt: skip
        if identity:
            create += ["--assign-identity", "[system]", "--scope", vm_id, "--role", ROLE]
        made = json.loads(timed(steps, create, env))
        if made.get("powerState") != "VM running":
            raise SystemExit(f"{name}: az vm create says {made.get('powerState')}")
        shown = json.loads(
            timed(steps, [*self.az, "vm", "show", "-d", "-g", GROUP, "-n", name, "-o", "json"], env)
        )
        if shown.get("powerState") != "VM running" or not shown.get("privateIps"):
            raise SystemExit(f"{name}: az vm show -d says {shown.get('powerState')}")
        delete = [*self.az, "vm", "delete", "-g", GROUP, "-n", name, "--yes"]
        if identity:
            principal = shown["identity"]["principalId"]
            start = time.perf_counter()
            run([*self.az, "role", "assignment", "delete", "--scope", vm_id,
                 "--assignee-object-id", principal], env)  # fmt: skip
            run(delete, env)
            steps.append(time.perf_counter() - start)
        else:
            timed(steps, delete, env)
        script.unlink()
        self._lived(name, f"{name}VMNic", f"{name}-os", identity)
        self.asked[kind], self.vms[kind] = self._operations(kind, seen), (name, alloc_id)
        return steps

    def _lived(self, name: str, nic: str, disk: str, identity: bool) -> None:
        """The stand-in created the VM (with a role assignment on it when `identity`), and
        the VM, its NIC, its OS disk and any role assignment on it are gone."""
        arm = self.arm
        vm_id = arm.rid(GROUP, VM_TYPE, name)
        with arm.lock:
            happened = [what for what, at, _ in arm.events if at.lower() == vm_id.lower()]
            assigned = [
                at for what, at, _ in arm.events
                if what == "role assigned" and at.lower().startswith(vm_id.lower() + "/")
            ]  # fmt: skip
            left = [
                a["id"] for a in arm.authz.assignments.values()
                if a["properties"]["scope"].lower() == vm_id.lower()
            ]  # fmt: skip
        if "created" not in happened or "deleted" not in happened:
            raise SystemExit(f"{vm_id}: the stand-in saw {happened}, not created ... deleted")
        if bool(assigned) != identity:
            raise SystemExit(f"{vm_id}: role assignments made on it: {assigned}")
        if left:
            raise SystemExit(f"{vm_id}: role assignments left on it: {left}")
        nic_id = arm.rid(GROUP, "Microsoft.Network/networkInterfaces", nic)
        disk_id = arm.rid(GROUP, "Microsoft.Compute/disks", disk)
        for rid in (vm_id, nic_id, disk_id):
            if arm.resource(rid) is not None:
                raise SystemExit(f"{rid}: still there after the delete")
        with arm.lock:
            made = {at.lower() for what, at, _ in arm.events if what == "created"}
        if nic_id.lower() not in made or disk_id.lower() not in made:
            raise SystemExit(f"{name}: the stand-in made no {nic} or no {disk}")

    def _operations(self, kind: str, since: int) -> list[str]:
        with self.arm.lock:
            seen = self.arm.client[since:]
            spent = sum(self.arm.spent.get(id(s), 0.0) for s in seen)
        self.served.setdefault(kind, []).append(spent)
        return [s.operation or s.path for s in seen]

    def _create_of(self, name: str) -> dict[str, Any]:
        for seen in reversed(self.arm.calls("VirtualMachines_CreateOrUpdate")):
            if seen.path.rsplit("/", 1)[-1].lower() == name.lower():
                body: dict[str, Any] = seen.body
                return body
        raise SystemExit(f"the stand-in got no create of {name}")

    def compare(self, ours: str, theirs: str) -> list[str]:
        """How the VM creates of two kinds differ (apart from the ids, names and links)."""
        bodies = {
            kind: essentials(self._create_of(name), alloc_id)
            for kind, (name, alloc_id) in self.vms.items()
            if kind in (ours, theirs)
        }
        a, b = bodies[ours], bodies[theirs]
        return [
            f"{key}: shoal {a.get(key)!r}, az {b.get(key)!r}"
            for key in sorted(a.keys() | b.keys())
            if a.get(key) != b.get(key)
        ]


def like(alloc_id: str) -> str:
    """A new id of the same shape (and length) as shoal's `alloc_id`."""
    head, _, tail = alloc_id.rpartition("-")
    fresh = uuid.uuid4().hex * 2
    return f"{head}-{fresh[: len(tail)]}" if head else fresh[: len(alloc_id)]


def essentials(body: dict[str, Any], alloc_id: str) -> dict[str, Any]:
    """What a VM create asks for: the allocation's id replaced, the expiry to the minute."""
    props = body["properties"]
    storage, os_profile = props["storageProfile"], props["osProfile"]
    disk = storage["osDisk"]
    tags = dict(body.get("tags") or {})
    expires = tags.pop("shoal-expires", "0")
    linux = os_profile.get("linuxConfiguration") or {}
    (nic,) = props["networkProfile"]["networkInterfaces"]
    return {
        "location": body.get("location"),
        "zones": body.get("zones"),
        "identity": (body.get("identity") or {}).get("type"),
        "vmSize": props["hardwareProfile"]["vmSize"],
        "imageReference": storage["imageReference"],
        "osDisk": (
            disk.get("name", "").replace(alloc_id, "ID"),
            str(disk.get("createOption")).lower(),  # ARM's enums ignore case
            disk.get("deleteOption"),
            (disk.get("managedDisk") or {}).get("storageAccountType"),
        ),
        "computerName": os_profile.get("computerName", "").replace(alloc_id, "ID"),
        "adminUsername": os_profile.get("adminUsername"),
        "customData": base64.b64decode(os_profile.get("customData") or "")
        .decode()
        .replace(alloc_id, "ID"),
        "disablePasswordAuthentication": linux.get("disablePasswordAuthentication"),
        "ssh keys": [k.get("path") for k in (linux.get("ssh") or {}).get("publicKeys") or []],
        "nic deleteOption": (nic.get("properties") or {}).get("deleteOption"),
        "tags": {k: v.replace(alloc_id, "ID") for k, v in tags.items()},
        "shoal-expires in 1h": abs(int(expires) - time.time() - LIFETIME_SECONDS) < 300,
        "bootDiagnostics": (props.get("diagnosticsProfile") or {}).get("bootDiagnostics"),
        "securityProfile": props.get("securityProfile"),
        "priority": props.get("priority"),
    }


def report(
    taken: dict[str, list[list[float]]], served: dict[str, list[float]], machine: str
) -> None:
    rounds = len(taken[SHOAL_PLAIN])
    print(f"{rounds} interleaved rounds, ms per alloc -> status -> free cycle; {machine}")
    print(
        f"  {'':28} {'median':>7} {'q1':>7} {'q3':>7} {'min':>7} {'max':>7}   steps (medians)"
        "          stand-in"
    )
    walls = {kind: [sum(steps) for steps in values] for kind, values in taken.items()}
    for kind, values in walls.items():
        q1, median, q3 = (v * 1000 for v in quartiles(values))
        low, high = min(values) * 1000, max(values) * 1000
        steps = " + ".join(
            f"{statistics.median(s[i] for s in taken[kind]) * 1000:.0f}" for i in range(3)
        )
        server = statistics.median(served[kind]) * 1000
        print(
            f"  {kind:28} {median:7.0f} {q1:7.0f} {q3:7.0f} {low:7.0f} {high:7.0f}   "
            f"{steps:22} {server:5.0f}"
        )
    for ours, theirs in PAIRS:
        ratio = statistics.median(walls[ours]) / statistics.median(walls[theirs])
        paired = [s / a for s, a in zip(walls[ours], walls[theirs], strict=True)]
        q1, mid, q3 = quartiles(paired)
        verdict = "met" if ratio <= TARGET else "NOT MET"
        print(
            f"  {ours} / {theirs}: {ratio:.2f}x by the medians (per round: median {mid:.2f}x, "
            f"quartiles {q1:.2f}-{q3:.2f}x); target <= {TARGET}x: {verdict}"
        )


def az_login(az: list[str], env: dict[str, str], arm: Arm) -> None:
    """az pointed at the stand-in, logged in as the service principal (its token cached)."""
    from tests.providers.azure import entraserver as entra

    run([*az, "cloud", "register", "-n", "ShoalStandin",
         "--endpoint-resource-manager", arm.base + "/"], env)  # fmt: skip
    run([*az, "cloud", "set", "-n", "ShoalStandin"], env)
    run([*az, "config", "set", "core.instance_discovery=false", "core.collect_telemetry=false",
         "core.survey_message=false", "core.no_color=true", "--only-show-errors"], env)  # fmt: skip
    run([*az, "login", "--service-principal", "-u", entra.CLIENT_ID, "-p", entra.CLIENT_SECRET,
         "--tenant", entra.TENANT, "-o", "none"], env)  # fmt: skip
    account = json.loads(run([*az, "account", "show", "-o", "json"], env))
    if account["id"] != arm.subscription:
        raise SystemExit(f"az logged in to {account['id']}, not {arm.subscription}")


def environments(arm: Arm, prices: str, subnet: str, work: Path) -> dict[str, dict[str, str]]:
    """Per kind, its processes' environment (and each shoal kind's SHOAL_HOME, made)."""
    from tests.providers.azure import entraserver as entra

    assert arm.ca_bundle is not None
    drop = ("SHOAL_", "AZURE_", "ARM_", "MSI_", "IDENTITY_", "REQUESTS_CA", "SSL_CERT")
    common = {
        **{k: v for k, v in os.environ.items() if not k.startswith(drop)},
        # anything but loopback goes to a dead port, not the network
        **{k: DEAD for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")},
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    (work / "az").mkdir()
    az = {
        **common,
        "AZURE_CONFIG_DIR": str(work / "az"),
        "REQUESTS_CA_BUNDLE": arm.ca_bundle,
        "AZURE_CORE_COLLECT_TELEMETRY": "false",
    }
    envs = {AZ_PLAIN: az, AZ_SELF: az}
    for kind, extra in ((SHOAL_PLAIN, "self_delete = false\n"), (SHOAL_SELF, "")):
        home = work / ("plain" if extra else "self")
        home.mkdir()
        (home / "config.toml").write_text(
            f'[drivers."{DRIVER}"]\nresource_group = "{GROUP}"\nsubnet = "{subnet}"\n{extra}'
        )
        envs[kind] = {
            **common,
            "SHOAL_HOME": str(home),
            "SSL_CERT_FILE": arm.ca_bundle,
            "AZURE_TENANT_ID": entra.TENANT,
            "AZURE_CLIENT_ID": entra.CLIENT_ID,
            "AZURE_CLIENT_SECRET": entra.CLIENT_SECRET,
            "AZURE_AUTHORITY_HOST": arm.login,
            "AZURE_SUBSCRIPTION_ID": arm.subscription,
            "AZURE_CONFIG_DIR": str(work / "no-az"),  # not az's login
            "SHOAL_AZURE_MANAGEMENT_URL": arm.base,
            "SHOAL_AZURE_PRICES_URL": prices,
        }
    return envs


def profile(env: dict[str, str], where: Path) -> None:
    """One `shoal alloc` (self_delete = false) under -X importtime, one under cProfile (to
    `where`/alloc.prof), each freed after: what the alloc spends its time on."""
    import pstats
    import subprocess

    where.mkdir(parents=True, exist_ok=True)
    (shoal,) = shoal_command()[-1:]
    alloc = ["alloc", "--driver", DRIVER, "--lifetime", "1h", "-o", f"size={SIZE}",
             "-o", f"image={IMAGE}", "--json"]  # fmt: skip
    runs = {
        "importtime": [sys.executable, "-X", "importtime", shoal],
        "cprofile": [sys.executable, "-m", "cProfile", "-o", str(where / "alloc.prof"), shoal],
    }
    for how, argv in runs.items():
        start = time.perf_counter()
        # elsewhere than the source tree, whose `cli` `-m` would put first on the path
        done = subprocess.run(
            [*argv, *alloc], env=env, cwd=where, capture_output=True, text=True, check=False
        )
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr}")
        run([*shoal_command(), "free", json.loads(done.stdout)["id"]], env)
        if how == "importtime":
            (where / "importtime.txt").write_text(done.stderr)
            rows = []  # the imports the command itself made (its modules' own are inside)
            for line in done.stderr.splitlines():
                fields = line.removeprefix("import time:").split("|")
                if len(fields) == 3 and fields[1].strip().isdigit():
                    name = fields[2].rstrip()
                    if name.startswith(" ") and not name.startswith("  "):
                        rows.append((int(fields[1]), name.strip()))
            top = sorted(rows, reverse=True)[:10]
            print(
                f"profile: alloc under -X importtime {seconds * 1000:.0f} ms; imports "
                f"{sum(us for us, _ in rows) / 1000:.0f} ms, the largest (ms): "
                + ", ".join(f"{n} {us / 1000:.0f}" for us, n in top)
            )
        else:
            stats = pstats.Stats(str(where / "alloc.prof"))
            # total_tt and stats are not in typeshed's Stats
            profiled: float = getattr(stats, "total_tt", 0.0)
            entries: dict[tuple[str, int, str], tuple[Any, ...]] = getattr(stats, "stats", {})
            slept = sum(v[2] for k, v in entries.items() if k[2] == "<built-in method time.sleep>")
            print(
                f"profile: alloc under cProfile {seconds * 1000:.0f} ms, "
                f"{profiled * 1000:.0f} ms profiled, {slept * 1000:.0f} ms of it in "
                f"time.sleep; shoal's own functions by cumulative time ({where}/alloc.prof):"
            )
            stats.sort_stats("cumulative").print_stats(r"(drivers|providers)/", 15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--az", default="az", help="the Azure CLI (default: `az` on PATH)")
    parser.add_argument(
        "--retry-after", type=int, default=1,
        help="the Retry-After (s) of every long-running answer (default 1)",
    )  # fmt: skip
    parser.add_argument("--profile", type=Path, help="then profile one shoal alloc into DIR")
    args = parser.parse_args()
    check_installed()
    from azure_loopback import Arm, entra

    from tests.providers.apiserver import ApiServer
    from tests.providers.azure import entraserver
    from tests.providers.azure import payloads as p

    binary = shutil.which(args.az)
    if binary is None:
        raise SystemExit(
            f"no Azure CLI at {args.az!r}: python -m venv /tmp/azvenv && "
            "/tmp/azvenv/bin/pip install azure-cli, then --az /tmp/azvenv/bin/az"
        )
    work = Path(tempfile.mkdtemp(prefix="shoal-bench-azure-"))
    rows = [p.price_item("Standard_D2s_v5", 0.096), p.price_item("Standard_D4s_v5", 0.192)]
    try:
        with Arm() as arm, ApiServer() as prices:
            tokens = entra(arm)
            arm.tokens = {entraserver.TOKEN}
            arm.retry_after = args.retry_after
            prices.route(
                p.PRICES_PATH, p.PricesApi(rows, base=prices.base, ignore=("armRegionName",))
            )
            subnet = arm.network.add_subnet(GROUP, "shoal-vnet")
            envs = environments(arm, prices.base, subnet, work)
            az = [binary]
            az_login(az, envs[AZ_PLAIN], arm)
            both = Cycles(arm, az, envs, subnet)
            cycles: dict[str, Callable[[], list[float]]] = {
                SHOAL_PLAIN: lambda: both.shoal(SHOAL_PLAIN),
                AZ_PLAIN: lambda: both.az_cycle(AZ_PLAIN),
                SHOAL_SELF: lambda: both.shoal(SHOAL_SELF),
                AZ_SELF: lambda: both.az_cycle(AZ_SELF),
            }
            for cycle in cycles.values():  # warm: page cache, az's command index, tokens
                cycle()
            both.served.clear()
            version = json.loads(run([*az, "version", "-o", "json"], envs[AZ_PLAIN]))
            print(
                f"shoal: {' '.join(shoal_command())}; azure-cli {version['azure-cli']}; "
                f"stand-in at {arm.base}"
            )
            t = arm.timing
            print(
                f"{SIZE} in {LOCATION}, {IMAGE}, --lifetime 1h on every side; on the stand-in "
                f"a NIC takes {t.network:g} s, a VM {t.vm_create:g} s to create and "
                f"{t.vm_delete:g} s to delete; every long-running answer says Retry-After: "
                f"{arm.retry_after}"
            )
            for ours, theirs in PAIRS:
                differ = both.compare(ours, theirs)
                print(
                    f"VM creates of {ours} and {theirs} differ only in: "
                    + ("; ".join(differ) or "nothing")
                )
            for kind, operations in both.asked.items():
                counted = ", ".join(
                    f"{o} x{n}" if n > 1 else o for o, n in Counter(operations).items()
                )
                print(f"requests per {kind} cycle ({len(operations)}): {counted}")
            machine = Machine()
            taken = measure(cycles, args.rounds)
            report(taken, both.served, machine.since())
            print(
                f"price catalog requests by shoal: {len(prices.seen)}; token requests: "
                f"{len(tokens.to(entraserver.token_path()))} (az's login and each shoal "
                "home's first)"
            )
            if args.profile:
                profile(envs[SHOAL_PLAIN], args.profile)
            with arm.lock:
                broken, unserved = list(arm.violations), list(arm.unserved)
            tokens.__exit__(None, None, None)
            if broken or unserved:
                raise SystemExit(f"the stand-in's contract was broken: {broken} {unserved}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
