"""The `azure` driver: each allocation is an Azure VM, with its NIC, public IP and OS disk.

Names come from the allocation id (VM `shoal-ID`, NIC `shoal-ID-nic`, IP `shoal-ID-ip`,
OS disk `shoal-ID-os`): a retried PUT is the same resource, and a cleanup knows what to
look for. The VM, NIC, IP and disk carry the tags `shoal-allocation=ID`,
`shoal-managed-by=shoal` and `shoal-expires=EPOCH-SECONDS` (the VM's are the shared state
for `status --remote azure` and `free --expired --remote azure` from any machine; Azure
gives what the VM makes none of them, so the disk, and a NIC and IP the VM made, are tagged
by a PATCH once the VM is there). The NIC, IP and OS disk go with `deleteOption: Delete`,
so deleting the VM leaves nothing billed behind: the NIC is made first and named by the VM;
with a public IP the VM makes both its NIC and the IP (networkInterfaceConfigurations), as
Azure deletes a public IP with its VM only when the VM made it (a standalone one would stay
billed after a VM that deleted itself).

The lifetime. On Azure a VM shut down from inside stays allocated and billed, so the boot
script does not shut down at the expiry: it deletes the VM. The VM gets a system-assigned
identity, and that identity the role Virtual Machine Contributor on the VM alone (a role
assignment named from the allocation id); at the expiry the script asks the instance
metadata service for the identity's token and sends DELETE for its own VM (NIC, IP and
disk go with it), retrying for half an hour, and powers off only if that never succeeds.
What is guaranteed without shoal: a VM that runs at its expiry deletes itself, as long as
its OS runs the script (cloud-init) and reaches Azure. What only shoal's next command does:
a VM stopped from inside before its expiry (it cannot run the script) is deleted by
`free --expired --remote azure` (or `free ID`), and the role assignment left by a VM that
deleted itself is removed by `free`. `self_delete = false` skips the identity (the caller
then needs no Microsoft.Authorization/roleAssignments/write): the lifetime is shoal's.
Spot: `priority: Spot`, `evictionPolicy: Delete`, `billingProfile.maxPrice`.

Config (`[drivers."azure/NAME"]`, drivers/azure/config.py): subscription, resource_group,
location, zones, subnet, public_ip, image, disk_gb, admin_user, ssh_key, tags,
allowed_types, spot, self_delete, fallback, check_quotas. Options (`-o`): location, size,
image, gpus, gpu, spot, max_price, subnet, resource_group, zone, public_ip, disk_gb, tags,
allowed_types, fallback, entry, env. The size choice is drivers/vm/choice.py over the azure
price catalog, checked against the Resource SKUs (offered in the location and zone, the
image's Hyper-V generation and architecture); the boot script drivers/vm/userdata.py (as
customData, for cloud-init).
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from drivers.azure.config import DEFAULT_IMAGE, DEFAULT_LOCATION, AzureConfig, AzureOptions
from drivers.definitions.options import check_meta_names, load_config, parse_options
from drivers.spec.base import UNLIMITED, ResourceDriverTask
from drivers.spec.types import (
    ALLOCATION_ID_KEY,
    STATUS_ALLOCATED,
    STATUS_NONE,
    LabelDefinition,
    Resource,
    Resources,
)
from drivers.vm.launches import Launch, Launches, LeftForRecovery
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NoCapacityError,
    NotFoundError,
    RetryableError,
    ShoalError,
    UsageError,
    is_secret_name,
)
from providers.core.http.policy import RetryPolicy
from providers.core.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from drivers.azure.arm import Arm, ArmError
    from drivers.vm.choice import Candidate, Choice
    from providers.cloud.catalog import CloudCatalog
    from providers.core.ttlcache import TtlCache

ALLOCATION_TAG = "shoal-allocation"
EXPIRES_TAG = "shoal-expires"
MANAGED_BY_TAG = "shoal-managed-by"
RETRY_POLICY = RetryPolicy()  # every ARM call of the driver; tests set a faster one
OPERATION_SECONDS = 900.0  # a create or delete not ended by then is left to `status`
SEEN_FOR_SECONDS = 2.0
NOTES_FOLDER = "azure-creates"
# A create noted this recently and not answered may still land: what is not there yet is
# not believed gone (ARM takes a PUT whose client died mid-request a moment later).
DOUBT_WINDOW_SECONDS = 60.0
# A note names the resource group to look in for as long as its allocation is not settled
# (an orphan whose deletes keep failing, a FAILED row `free` ends the leftovers of): kept
# that long, not only through the doubt window.
KEEP_NOTES_SECONDS = 7 * 86400.0
# The cleanup of this run's own create whose PUT was on the wire (Ctrl-C, or a failure
# with no answer read) waits this long for ARM to show what the PUT made, asking every
# POLL_SECONDS; what never shows is in doubt (see DOUBT_WINDOW_SECONDS).
GRACE_SECONDS = 10.0
POLL_SECONDS = 0.25
# Virtual Machine Contributor: lets the VM's identity delete the VM (and nothing else: the
# assignment's scope is the VM).
VM_CONTRIBUTOR = "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"
ROLE_NAMESPACE = uuid.UUID("0b7c54a2-4f7e-4c4e-9d0e-6a5f1c2b9e31")
CAPACITY_CODES = (
    "SkuNotAvailable",
    "AllocationFailed",
    "ZonalAllocationFailed",
    "OverconstrainedAllocationRequest",
    "OverconstrainedZonalAllocationRequest",
)
HOLDING = ("starting", "running")
SECRET_FIX = (
    "customData and tags are readable by anyone who may read the VM, and by every process on "
    "it; give the VM an identity and read secrets from Key Vault at boot"
)


@dataclass(frozen=True)
class SizeShape:
    name: str
    vcpus: float | None
    memory_gib: float | None
    arch: str = "x86_64"
    gpu: str = ""
    gpu_count: int = 0
    gpu_memory_gib: float = 0.0


@dataclass
class Plan:
    opts: AzureOptions
    location: str
    zones: list[str]  # "" = regional
    group: str
    subnet: str
    image: str
    choice: Choice
    spot: bool
    fallback: str
    public_ip: bool
    image_generation: str = ""  # the image's Hyper-V generation (V1, V2), once read
    image_arch: str = ""  # x64 or Arm64, once read
    capacity: dict[str, Any] = field(default_factory=dict)
    reservation_group: str = ""  # the capacity reservation group's resource id


def _now() -> float:
    """The time an expiry is judged by (tests move it on)."""
    return time.time()


def vm_name(allocation_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", f"shoal-{allocation_id}")[:60].rstrip("-")


def role_assignment_name(allocation_id: str) -> str:
    return str(uuid.uuid5(ROLE_NAMESPACE, allocation_id))


def role_path(vm_id: str, allocation_id: str) -> str:
    """The allocation's role assignment, at its VM's scope."""
    return f"{vm_id}/providers/Microsoft.Authorization/roleAssignments/" + (
        role_assignment_name(allocation_id)
    )


class AzureDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self.cfg = AzureConfig()
        self._arm: Arm | None = None
        self._plans: dict[str, Plan] = {}
        self._catalog_made: CloudCatalog | None = None
        self._memo_made: TtlCache | None = None
        self._warned: set[str] = set()
        self._skus: dict[str, list[dict[str, Any]]] = {}
        self._seen: dict[str, tuple[float, dict[str, Any] | None]] = {}
        self._notes = Launches(settings.paths.state_dir / NOTES_FOLDER)
        self._interrupted: set[str] = set()  # Ctrl-C ended their allocate in this run
        self._created: set[str] = set()  # their create was sent by this run
        # allocation id -> (path, api version) of this run's PUT whose answer is not read
        self._unanswered: dict[str, tuple[str, str]] = {}
        # (resource group, VM) of what the remote listing found: `free --remote` of another
        # machine's allocation gives a bare handle, and its VM may be in any group.
        self._listed: dict[str, tuple[str, str]] = {}

    def name(self) -> str:
        return self._name

    def is_remote(self) -> bool:
        return True

    def prepare(self, config: bytes) -> None:
        self.cfg = load_config(AzureConfig, config, self._name, self._settings.paths.config_file)

    # -- the subscription ----------------------------------------------------------------

    def arm(self) -> Arm:
        if self._arm is None:
            from drivers.azure.arm import Arm
            from providers.azure.credentials import find_credentials, find_subscription, missing
            from providers.config import base_url
            from providers.core.env import ENV_AZURE_MANAGEMENT_URL

            settings = self._settings
            credentials = find_credentials(settings, policy=RETRY_POLICY)
            subscription, subscription_from = find_subscription(settings, credentials)
            if self.cfg.subscription:
                subscription = self.cfg.subscription
                subscription_from = f'[drivers."{self._name}"] subscription'
            if credentials is None or not subscription:
                raise CredentialsError(
                    missing(f"{self._name}: launching VMs", credentials, subscription)
                )
            self._arm = Arm(
                base_url(
                    settings,
                    "azure",
                    "management_url",
                    ENV_AZURE_MANAGEMENT_URL,
                    "https://management.azure.com",
                ),
                subscription,
                auth_hint=credentials.hint(
                    subscription,
                    subscription_from,
                    "Virtual Machine Contributor and Network Contributor on the resource "
                    "group (and User Access Administrator for self_delete)",
                ),
                policy=RETRY_POLICY,
            )
            credentials.wire(self._arm.http)
        return self._arm

    def _catalog(self) -> CloudCatalog:
        if self._catalog_made is None:
            from providers.cloud.catalog import CloudCatalog
            from providers.registry import new_catalog

            made = new_catalog("azure", self._settings)
            if not isinstance(made, CloudCatalog):
                raise ShoalError(f"{self._name}: the azure provider is not a cloud catalog")
            self._catalog_made = made
        return self._catalog_made

    def _memo(self) -> TtlCache:
        if self._memo_made is None:
            from providers.core.ttlcache import TtlCache

            self._memo_made = TtlCache(self._settings.paths.cache_dir / "azure-driver.json")
        return self._memo_made

    def _warn_once(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self._settings.warn(text)

    def _group_path(self, group: str) -> str:
        return self.arm().sub(f"resourceGroups/{group}")

    def _vm_path(self, group: str, name: str) -> str:
        return f"{self._group_path(group)}/providers/Microsoft.Compute/virtualMachines/{name}"

    def _network_path(self, group: str, kind: str, name: str) -> str:
        return f"{self._group_path(group)}/providers/Microsoft.Network/{kind}/{name}"

    # -- definitions ---------------------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> AzureOptions:
        return parse_options(AzureOptions, definition.options)

    def validate_definition(self, definition: LabelDefinition) -> None:
        opts = self._options(definition)
        if definition.authentication is not None:
            raise UsageError(
                f"authentication: the azure driver puts nothing secret on a VM: {SECRET_FIX}"
            )
        if definition.resources.disks:
            raise UsageError("resources.disks: the azure driver takes -o disk_gb=N instead")
        for name in opts.env:
            refuse_secret(f"options.env.{name}", name)
        if not (opts.resource_group or self.cfg.resource_group):
            raise ConfigError(
                f'[drivers."{self._name}"] resource_group: name the resource group VMs go to '
                "(or -o resource_group=NAME)"
            )
        if not (opts.subnet or self.cfg.subnet):
            raise ConfigError(
                f'[drivers."{self._name}"] subnet: name the subnet resource id the VMs join '
                "(or -o subnet=ID)"
            )
        res = definition.resources
        if not (res.cpu and res.ram):  # left to the named size: its shape says them
            plan = self._plan(definition)
            first = plan.choice.first
            res.cpu = res.cpu or max(1, math.ceil(first.vcpus or 1))
            res.ram = res.ram or max(1, math.ceil(first.memory_gib or 1))
            self._plans[self._key(definition)] = plan

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        check_meta_names(metadata)
        for name in metadata:
            refuse_secret(f"--meta {name}", name)

    @staticmethod
    def _key(definition: LabelDefinition) -> str:
        from providers.core.wire import to_wire

        return json.dumps(to_wire(definition), sort_keys=True, default=str)

    def _plan(self, definition: LabelDefinition) -> Plan:
        key = self._key(definition)
        if key not in self._plans:
            self._plans[key] = self._make_plan(definition)
        return self._plans[key]

    def _make_plan(self, definition: LabelDefinition) -> Plan:
        from drivers.vm import choice

        opts, cfg = self._options(definition), self.cfg
        location = opts.location or cfg.location or DEFAULT_LOCATION
        spot = cfg.spot if opts.spot is None else opts.spot
        want = choice.Want(
            cpu=definition.resources.cpu,
            ram=definition.resources.ram,
            gpus=opts.gpus or (1 if opts.gpu else 0),
            gpu=opts.gpu,
            spot=spot,
            allowed=tuple(cfg.allowed_types if opts.allowed_types is None else opts.allowed_types),
            max_price=opts.max_price if spot and opts.max_price > 0 else None,
        )
        names = [opts.size] if isinstance(opts.size, str) else opts.size
        try:
            if names:
                shapes: dict[str, choice.Shape] = {}
                for name in names:
                    shape = self._named_shape(name)
                    if shape is not None:
                        shapes[name] = shape
                prices = self._prices(location, names)
                chosen = choice.named(location, names, shapes, prices, want)
            else:
                chosen = choice.from_catalog(self._pricing(location), want)
        except UsageError as exc:
            raise UsageError(as_size(str(exc))) from None
        zones = [opts.zone] if opts.zone else list(cfg.zones) or [""]
        plan = Plan(
            opts=opts,
            location=location,
            zones=zones,
            group=opts.resource_group or cfg.resource_group,
            subnet=opts.subnet or cfg.subnet,
            image=opts.image or cfg.image or DEFAULT_IMAGE,
            choice=chosen,
            spot=spot,
            fallback=opts.fallback or cfg.fallback,
            public_ip=cfg.public_ip if opts.public_ip is None else opts.public_ip,
        )
        self._check_skus(plan)
        if opts.capacity_reservation_group:
            if spot:
                raise UsageError(
                    "options.capacity_reservation_group: spot VMs cannot use capacity "
                    "reservations; drop -o spot=true or the group"
                )
            plan.reservation_group = self._reservation_group(
                opts.capacity_reservation_group, location
            )
        return plan

    def _named_shape(self, name: str) -> SizeShape | None:
        """A named size's shape from shoal's built-in size table (no request)."""
        from providers.azure.sizes import table

        row = table().get(name)
        if row is None:
            return None
        return SizeShape(
            name=name,
            vcpus=row.vcpus,
            memory_gib=row.memory_gib,
            arch="arm64" if re.search(r"_[A-Z]\d+p", name) else "x86_64",
            gpu=row.gpu,
            gpu_count=row.gpu_count,
        )

    def _pricing(self, location: str) -> Any:
        from providers.models import RegionSpec, ResourceListOptions

        found = self._catalog().list_pricing(ResourceListOptions(region=RegionSpec(name=location)))
        if not found:
            raise ShoalError(f"{self._name}: the azure price catalog has nothing for {location}")
        return found[0]

    def _prices(
        self, location: str, names: list[str]
    ) -> dict[str, tuple[float | None, float | None]]:
        """Prices of named sizes when the cached catalog has them; none asked of the net."""
        try:
            cache = self._catalog().cache
            if location not in cache.snapshots("azure"):
                return {}
            wanted = {n.lower(): n for n in names}
            return {
                wanted[o.instance_type.lower()]: (o.on_demand, o.spot)
                for o in cache.offers("azure", location)
                if o.instance_type.lower() in wanted
            }
        except ShoalError:
            return {}

    # -- what Azure itself checks: the Resource SKUs and the image ------------------------

    def _sku_list(self, location: str) -> list[dict[str, Any]]:
        from drivers.azure.arm import SKUS_API

        if location not in self._skus:
            items: list[dict[str, Any]] = []
            path: str | None = self.arm().sub("providers/Microsoft.Compute/skus")
            params: dict[str, str] | None = {"$filter": f"location eq '{location}'"}
            for _ in range(200):
                if path is None:
                    break
                _, _, page = self.arm().call("GET", path, SKUS_API, params=params)
                page = page if isinstance(page, dict) else {}
                items += [
                    i
                    for i in page.get("value") or []
                    if isinstance(i, dict) and i.get("resourceType") == "virtualMachines"
                ]
                path, params = page.get("nextLink") or None, None
            self._skus[location] = items
        return self._skus[location]

    def _image_facts(self, plan: Plan) -> tuple[str, str]:
        """(Hyper-V generation, architecture) of the plan's image ("" when unknown)."""
        from drivers.azure.arm import COMPUTE_API, ArmError

        arm = self.arm()
        if plan.image.startswith("/"):
            found = arm.get(plan.image, COMPUTE_API)
            if found is None:
                raise UsageError(f"options.image: {plan.image} does not exist")
            props = found.get("properties") or {}
            arch = str(props.get("architecture") or "")
            if not arch and "/providers/microsoft.compute/images/" in plan.image.lower():
                arch = "x64"  # a managed image says none: Azure makes them of x64 sources only
            return str(props.get("hyperVGeneration") or ""), arch
        publisher, offer, sku, version = plan.image.split(":")
        base = arm.sub(
            f"providers/Microsoft.Compute/locations/{plan.location}/publishers/{publisher}"
            f"/artifacttypes/vmimage/offers/{offer}/skus/{sku}/versions"
        )
        try:
            if version == "latest":
                _, _, listed = arm.call("GET", base, COMPUTE_API)
                names = [str(v.get("name")) for v in listed or [] if isinstance(v, dict)]
                if not names:
                    raise UsageError(
                        f"options.image: {plan.image} has no version in {plan.location}; "
                        "`az vm image list --all --publisher P --offer O` lists images"
                    )
                version = max(names, key=_version_key)
            found = arm.get(f"{base}/{version}", COMPUTE_API)
        except ArmError as exc:
            raise UsageError(f"options.image: {plan.image}: {exc}") from None
        if found is None:
            raise UsageError(f"options.image: {plan.image} does not exist in {plan.location}")
        props = found.get("properties") or {}
        return str(props.get("hyperVGeneration") or ""), str(props.get("architecture") or "")

    def _reservation_group(self, given: str, location: str) -> str:
        """A capacity reservation group's resource id: as given, or found by its name among
        the subscription's groups in `location` (2 when none or several have it)."""
        from drivers.azure.arm import COMPUTE_API

        if given.startswith("/"):
            return given
        arm = self.arm()
        found: list[str] = []
        path: str | None = arm.sub("providers/Microsoft.Compute/capacityReservationGroups")
        for _ in range(200):
            if path is None:
                break
            _, _, page = arm.call("GET", path, COMPUTE_API)
            page = page if isinstance(page, dict) else {}
            found += [
                str(g.get("id") or "")
                for g in page.get("value") or []
                if isinstance(g, dict)
                and str(g.get("name", "")).lower() == given.lower()
                and str(g.get("location", "")).replace(" ", "").lower() == location
            ]
            path = page.get("nextLink") or None
        if len(found) != 1:
            what = "no" if not found else f"{len(found)}"
            raise UsageError(
                f"options.capacity_reservation_group: {what} group named {given} in {location}; "
                "give its resource id (/subscriptions/.../capacityReservationGroups/NAME)"
            )
        return found[0]

    def _check_skus(self, plan: Plan) -> None:
        """Keep the sizes Azure would take here: offered to the subscription in the location
        (and zone), of the image's Hyper-V generation and architecture. A named size that
        fails says why (2); a chosen one that fails is skipped with the reason."""
        from drivers.vm.choice import Skipped

        plan.image_generation, plan.image_arch = self._image_facts(plan)
        skus = {str(s.get("name", "")).lower(): s for s in self._sku_list(plan.location)}
        kept = []
        for candidate in plan.choice.fitting:
            why = self._refusal(skus.get(candidate.name.lower()), plan)
            if why is None:
                kept.append(candidate)
                continue
            if plan.choice.explicit:
                raise UsageError(f"options.size: {candidate.name} {why}")
            plan.choice.skipped.append(Skipped(candidate, why, "sku"))
        if not kept:
            # Said here, as `--dry-run` ends here too.
            ruled = [f"{s.candidate.name} {s.reason}" for s in plan.choice.skipped[-3:]]
            more = len(plan.choice.fitting) - len(ruled)
            zones = ", ".join(z for z in plan.zones if z)
            raise UsageError(
                f"no size that fits is offered to the subscription in {plan.location}"
                + (f" zone {zones}" if zones else "")
                + f" for image {plan.image}: {'; '.join(ruled)}"
                + (f" (and {more} more)" if more > 0 else "")
            )
        plan.choice.fitting = kept

    @staticmethod
    def _refusal(sku: dict[str, Any] | None, plan: Plan) -> str | None:
        if sku is None:
            return f"is not offered in {plan.location} (Resource SKUs)"
        caps = {str(c.get("name")): str(c.get("value")) for c in sku.get("capabilities") or []}
        for restriction in sku.get("restrictions") or []:
            kind = str(restriction.get("type") or "")
            values = [str(v).lower() for v in restriction.get("values") or []]
            if kind == "Location" and plan.location in values:
                reason = restriction.get("reasonCode") or "restricted"
                return f"is not available to the subscription in {plan.location} ({reason})"
            if kind == "Zone" and any(z for z in plan.zones):
                zones = [
                    str(z)
                    for info in restriction.get("restrictionInfo", {}).get("zones") or []
                    for z in [info]
                ]
                if set(plan.zones) <= set(zones):
                    return f"is not available in zone(s) {', '.join(plan.zones)}"
        offered = {
            str(z) for info in sku.get("locationInfo") or [] for z in info.get("zones") or []
        }
        asked = [z for z in plan.zones if z]
        if asked and offered and not set(asked) <= offered:
            return f"is not offered in zone(s) {', '.join(sorted(set(asked) - offered))}"
        generations = caps.get("HyperVGenerations", "")
        if (
            plan.image_generation
            and generations
            and plan.image_generation not in generations.split(",")
        ):
            return (
                f"runs Hyper-V generation {generations} and the image is "
                f"{plan.image_generation}; name an image of that generation"
            )
        arch = caps.get("CpuArchitectureType", "")
        if plan.image_arch and arch and arch.lower() != plan.image_arch.lower():
            return f"is {arch} and the image is {plan.image_arch}"
        return None

    def explain(self, definition: LabelDefinition) -> dict[str, Any]:
        plan = self._plan(definition)
        out = plan.choice.to_json()
        out["why"] = as_size(str(out.get("why") or ""))
        out.update(location=plan.location, image=plan.image, resource_group=plan.group)
        if plan.zones != [""]:
            out["zones"] = plan.zones
        if plan.reservation_group:
            out["capacity_reservation_group"] = plan.reservation_group
        if plan.capacity:
            out["capacity"] = plan.capacity
        return out

    # -- capacity ------------------------------------------------------------------------

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        """How many VMs of the chosen size the subscription's vCPU quotas still take in the
        location (the family's, the regional total, lowPriorityCores for spot:
        providers/azure/quota_map.py), from the subscription's snapshot in the catalog
        cache; quotas that cannot be read are no refusal (unlimited, with a note)."""
        plan = self._plan(req)
        if not self.cfg.check_quotas:
            plan.capacity = {"checked": False, "note": "check_quotas is off"}
            return UNLIMITED
        if plan.reservation_group:
            # The reservation holds its quota already: a VM placed on it takes none more.
            plan.capacity = {
                "checked": False,
                "note": f"on capacity reservation group {plan.reservation_group.rsplit('/', 1)[-1]}"
                ", whose reservation holds the quota",
            }
            return UNLIMITED
        from drivers.vm import capacity
        from providers.azure.quota_map import AzureQuotaMap

        who = capacity.Account(
            "azure", "Azure", self._name, self.arm().subscription, self._catalog(),
            self._memo(), self._settings, AzureQuotaMap, self._warn_once,
        )  # fmt: skip
        count, plan.capacity = capacity.quota_count(
            who, plan.location, plan.choice.first, spot=plan.spot
        )
        return count

    def _forget_capacity(self, location: str) -> None:
        if self.cfg.check_quotas:
            from drivers.vm import capacity

            capacity.forget("azure", location, lambda: self.arm().subscription, self._catalog)

    # -- lifecycle -----------------------------------------------------------------------

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        plan = self._plan(definition)
        allocation_id = str(metadata.get(ALLOCATION_ID_KEY, ""))
        zones = plan.zones if plan.fallback in ("zones", "types") else plan.zones[:1]
        sizes = plan.choice.fitting if plan.fallback == "types" else plan.choice.fitting[:1]
        tried: list[str] = []
        last: NoCapacityError | None = None
        for candidate in sizes:
            for zone in zones:
                try:
                    vm = self._create(plan, definition, metadata, allocation_id, candidate, zone)
                except KeyboardInterrupt:
                    self._interrupted.add(allocation_id)
                    raise
                except NoCapacityError as exc:
                    where = f"zone {zone}" if zone else plan.location
                    tried.append(f"{candidate.name} in {where} ({capacity_code(exc)})")
                    last = exc
                    continue
                try:
                    self._forget_capacity(plan.location)
                    return self._resource(allocation_id, plan, candidate, vm)
                except KeyboardInterrupt:
                    self._interrupted.add(allocation_id)
                    raise
        assert last is not None
        if len(tried) == 1:
            raise last
        # Each attempt by its code; the last one's words once.
        raise NoCapacityError(
            f"{self._name}: {plan.location}: no capacity; tried {'; '.join(tried)}. Last: "
            f"{last.args[0].removeprefix(f'{self._name}: {plan.location}: ')}"
        )

    def _create(
        self,
        plan: Plan,
        definition: LabelDefinition,
        metadata: dict[str, Any],
        allocation_id: str,
        candidate: Candidate,
        zone: str,
    ) -> dict[str, Any]:
        """The NIC first, then the VM; a VM Azure refuses leaves none of them. With a public
        IP the VM makes its NIC and IP itself (networkInterfaceConfigurations): Azure deletes
        a public IP along with its VM only when the VM made it, and a standalone one would
        stay billed after a VM that deleted itself at its lifetime."""
        from drivers.azure.arm import AUTHORIZATION_API, COMPUTE_API, NETWORK_API, ArmError

        name = vm_name(allocation_id)
        tags = self._tags(plan, definition, allocation_id)
        where = f"{self._name}: {plan.location}"
        # Noted before anything is sent: a cleanup then knows the resource group, and that
        # a create may be on its way (a note that cannot be written sends nothing).
        self._notes.sent(allocation_id, plan.group, window=KEEP_NOTES_SECONDS)
        self._created.add(allocation_id)
        try:
            body = self._vm_body(plan, definition, metadata, allocation_id, candidate, zone)
            body["tags"] = tags
            if plan.public_ip:
                body["properties"]["networkProfile"] = made_network(name, plan.subnet)
            else:
                nic = self._put(
                    allocation_id,
                    self._network_path(plan.group, "networkInterfaces", f"{name}-nic"),
                    NETWORK_API,
                    {
                        "location": plan.location,
                        "tags": tags,
                        "properties": {
                            "ipConfigurations": [
                                {"name": "ipconfig1", "properties": {"subnet": {"id": plan.subnet}}}
                            ]
                        },
                    },
                    where,
                )
                body["properties"]["networkProfile"] = {
                    "networkInterfaces": [
                        {
                            "id": nic.get("id"),
                            "properties": {"primary": True, "deleteOption": "Delete"},
                        }
                    ]
                }
            vm = self._put(allocation_id, self._vm_path(plan.group, name), COMPUTE_API, body, where)
        except ArmError as exc:
            _, failed = self._undo(plan.group, name)
            if not failed:  # refused, and what it made is deleted; else its cleanup tries again
                self._notes.forget(allocation_id)
            raise _mapped(exc, plan, candidate.name, where) from None
        self._tag_parts(plan, name, vm, tags)
        if self.cfg.self_delete and definition.resources.expires is not None:
            # Its PUT on the wire is as much in doubt as the VM's was.
            role = role_path(str(vm.get("id") or self._vm_path(plan.group, name)), allocation_id)
            self._unanswered[allocation_id] = (role, AUTHORIZATION_API)
            try:
                self._grant_self_delete(plan, allocation_id, vm)
            except CredentialsError:  # refused, and the VM deleted
                self._unanswered.pop(allocation_id, None)
                raise
            self._unanswered.pop(allocation_id, None)
        # Answered last: until then a PUT of the create may have been on the wire when
        # shoal died, and ARM may still carry it out.
        self._notes.answered(allocation_id, [str(vm.get("id") or name)])
        return vm

    def _put(
        self, allocation_id: str, path: str, api: str, body: dict[str, Any], what: str
    ) -> dict[str, Any]:
        """A create's PUT, followed to its end: noted as unanswered until ARM has answered
        it (taken or refused), so that this run's cleanup knows what may still land."""
        from drivers.azure.arm import ArmError

        self._unanswered[allocation_id] = (path, api)
        try:
            found = self.arm().put(path, api, body, deadline=OPERATION_SECONDS, what=what)
        except (ArmError, CredentialsError):  # ARM answered: refused (4xx, 401, 403)
            self._unanswered.pop(allocation_id, None)
            raise
        self._unanswered.pop(allocation_id, None)
        return found

    def _tag_parts(self, plan: Plan, name: str, vm: dict[str, Any], tags: dict[str, str]) -> None:
        """The allocation's tags on what the VM made: Azure gives its OS disk (and a NIC and
        IP it made) none of the VM's. Only a help (the VM's own tags are the shared state,
        and the parts go with it), so a refusal is a warning."""
        from drivers.azure.arm import DISKS_API, NETWORK_API

        disk = str(
            ((vm.get("properties") or {}).get("storageProfile") or {})
            .get("osDisk", {})
            .get("managedDisk", {})
            .get("id")
            or f"{self._group_path(plan.group)}/providers/Microsoft.Compute/disks/{name}-os"
        )
        parts = [(disk, DISKS_API)]
        if plan.public_ip:
            parts += [
                (self._network_path(plan.group, "networkInterfaces", f"{name}-nic"), NETWORK_API),
                (self._network_path(plan.group, "publicIPAddresses", f"{name}-ip"), NETWORK_API),
            ]
        for path, api in parts:
            try:
                self.arm().patch(
                    path, api, {"tags": tags}, deadline=OPERATION_SECONDS, what=self._name
                )
            except ShoalError as exc:
                self._warn_once(
                    f"{self._name}: {path.rsplit('/', 1)[-1]} is not tagged ({exc}); it goes "
                    "with its VM all the same"
                )

    def _tags(self, plan: Plan, definition: LabelDefinition, allocation_id: str) -> dict[str, str]:
        tags = {**self.cfg.tags, **plan.opts.tags}
        tags.update({ALLOCATION_TAG: allocation_id, MANAGED_BY_TAG: "shoal"})
        expires = definition.resources.expires
        if expires is not None:
            tags[EXPIRES_TAG] = str(math.ceil(expires.timestamp()))
        return tags

    def _vm_body(
        self,
        plan: Plan,
        definition: LabelDefinition,
        metadata: dict[str, Any],
        allocation_id: str,
        candidate: Candidate,
        zone: str,
    ) -> dict[str, Any]:
        from drivers.vm.userdata import user_data

        opts, cfg = plan.opts, self.cfg
        expires = definition.resources.expires
        self_delete = cfg.self_delete and expires is not None
        environment = opts.env | {str(k): str(v) for k, v in metadata.items()}
        script = user_data(
            allocation_id,
            expires=expires,
            environment=environment,
            entry=opts.entry,
            end=self_delete_script(self._in_vm_management_url()) if self_delete else "",
        )
        image: dict[str, Any]
        if plan.image.startswith("/"):
            image = {"id": plan.image}
        else:
            publisher, offer, sku, version = plan.image.split(":")
            image = {"publisher": publisher, "offer": offer, "sku": sku, "version": version}
        name = vm_name(allocation_id)
        os_disk: dict[str, Any] = {
            "name": f"{name}-os",
            "createOption": "FromImage",
            "deleteOption": "Delete",
            "managedDisk": {"storageAccountType": "StandardSSD_LRS"},
        }
        disk_gb = cfg.disk_gb if opts.disk_gb is None else opts.disk_gb
        if disk_gb:
            os_disk["diskSizeGB"] = disk_gb
        linux: dict[str, Any] = {"disablePasswordAuthentication": True}
        key = cfg.ssh_key or throwaway_ssh_key()
        linux["ssh"] = {
            "publicKeys": [{"path": f"/home/{cfg.admin_user}/.ssh/authorized_keys", "keyData": key}]
        }
        props: dict[str, Any] = {
            "hardwareProfile": {"vmSize": candidate.name},
            "storageProfile": {"imageReference": image, "osDisk": os_disk},
            "osProfile": {
                "computerName": name[:64],
                "adminUsername": cfg.admin_user,
                "customData": base64.b64encode(script).decode(),
                "linuxConfiguration": linux,
            },
            "diagnosticsProfile": {"bootDiagnostics": {"enabled": True}},
        }
        if plan.spot:
            props.update(
                priority="Spot",
                evictionPolicy="Delete",
                billingProfile={"maxPrice": opts.max_price},
            )
        if plan.reservation_group:
            props["capacityReservation"] = {
                "capacityReservationGroup": {"id": plan.reservation_group}
            }
        body: dict[str, Any] = {"location": plan.location, "properties": props}
        if zone:
            body["zones"] = [zone]
        if self_delete:
            body["identity"] = {"type": "SystemAssigned"}
        return body

    def _in_vm_management_url(self) -> str:
        # The VM calls Azure itself; a test's loopback stand-in is not what it would reach.
        return "https://management.azure.com"

    def _grant_self_delete(self, plan: Plan, allocation_id: str, vm: dict[str, Any]) -> None:
        """The VM's identity may delete the VM (and only it): Virtual Machine Contributor at
        the VM's scope. Refused (the caller may not assign roles): the VM is deleted and
        the refusal is 77 naming the fix, so no VM runs past a lifetime nobody enforces."""
        from drivers.azure.arm import AUTHORIZATION_API, ArmError

        arm = self.arm()
        vm_id = str(vm.get("id") or self._vm_path(plan.group, vm_name(allocation_id)))
        principal = str((vm.get("identity") or {}).get("principalId") or "")
        body = {
            "properties": {
                "roleDefinitionId": arm.sub(
                    f"providers/Microsoft.Authorization/roleDefinitions/{VM_CONTRIBUTOR}"
                ),
                "principalId": principal,
                "principalType": "ServicePrincipal",
            }
        }
        path = f"{vm_id}/providers/Microsoft.Authorization/roleAssignments/" + (
            role_assignment_name(allocation_id)
        )
        try:
            arm.put(path, AUTHORIZATION_API, body, deadline=OPERATION_SECONDS, what=self._name)
        except (ArmError, CredentialsError) as exc:
            # The lifetime nobody would enforce: no VM may run on without it.
            self._undo(plan.group, vm_name(allocation_id))
            self._notes.forget(allocation_id)
            why = (
                f"{exc.code}: {exc.message}"
                if isinstance(exc, ArmError)
                else "AuthorizationFailed: the caller may not perform "
                "Microsoft.Authorization/roleAssignments/write"
            )
            raise CredentialsError(
                f"{self._name}: the VM's identity could not be allowed to delete the VM at its "
                f"lifetime ({why}); grant the caller Microsoft.Authorization/roleAssignments/"
                f"write (User Access Administrator) on resource group {plan.group}, or set "
                f'self_delete = false in [drivers."{self._name}"] to leave the lifetime to '
                "shoal; the VM was deleted"
            ) from None

    def _undo(self, group: str, name: str) -> tuple[list[str], list[str]]:
        """Delete what a create left, by name (VM, NIC, IP, disk), each waited for, each tried
        whatever the others did: (the names deleted, those that could not be: each warned)."""
        from drivers.azure.arm import COMPUTE_API, DISKS_API, NETWORK_API

        arm = self.arm()
        steps = (
            (self._vm_path(group, name), COMPUTE_API),
            (self._network_path(group, "networkInterfaces", f"{name}-nic"), NETWORK_API),
            (self._network_path(group, "publicIPAddresses", f"{name}-ip"), NETWORK_API),
            (
                f"{self._group_path(group)}/providers/Microsoft.Compute/disks/{name}-os",
                DISKS_API,
            ),
        )
        deleted: list[str] = []
        failed: list[str] = []
        for path, api in steps:
            try:
                if arm.delete(path, api, deadline=OPERATION_SECONDS, what=self._name):
                    deleted.append(path.rsplit("/", 1)[-1])
            except ShoalError as exc:
                self._settings.warn(f"{self._name}: could not delete {path}: {exc}")
                failed.append(path.rsplit("/", 1)[-1])
        return deleted, failed

    def _await_put(self, allocation_id: str) -> bool:
        """Whether all that this run's create sent is known: a PUT whose answer was not read
        (Ctrl-C, or a failure, while it was on the wire) is waited for, up to GRACE_SECONDS,
        until ARM shows what it made (deleted then with the rest)."""
        pending = self._unanswered.get(allocation_id)
        if pending is None:
            return True
        path, api = pending
        deadline = time.monotonic() + GRACE_SECONDS
        while True:
            with contextlib.suppress(ShoalError):  # not read: no answer either way
                if self.arm().get(path, api) is not None:
                    del self._unanswered[allocation_id]
                    return True
            if time.monotonic() + POLL_SECONDS > deadline:
                return False
            time.sleep(POLL_SECONDS)

    def _resource(
        self, allocation_id: str, plan: Plan, candidate: Candidate, vm: dict[str, Any]
    ) -> Resource:
        private, public = self._addresses(plan.group, vm_name(allocation_id))
        meta = {
            "vm": vm.get("name", vm_name(allocation_id)),
            "vm_id": str(vm.get("id") or ""),
            "subscription": self.arm().subscription,
            "resource_group": plan.group,
            "location": plan.location,
            "zone": ",".join(vm.get("zones") or []),
            "size": candidate.name,
            "market": "spot" if plan.spot else "on-demand",
            "price": candidate.spot if plan.spot else candidate.on_demand,
            "image": plan.image,
            "private_ip": private,
            "public_ip": public,
            "expires_epoch": str((vm.get("tags") or {}).get(EXPIRES_TAG) or ""),
            # Its identity may delete it: `free` ends that role assignment too.
            "self_delete": "true" if self.cfg.self_delete and vm.get("identity") else "",
        }
        return Resource(
            identifier=allocation_id,
            ip_addr=public or private,
            metadata={k: v for k, v in meta.items() if v not in ("", None)},
        )

    def _addresses(self, group: str, name: str) -> tuple[str, str]:
        from drivers.azure.arm import NETWORK_API

        arm = self.arm()
        nic = arm.get(self._network_path(group, "networkInterfaces", f"{name}-nic"), NETWORK_API)
        private = public = ""
        for config in ((nic or {}).get("properties") or {}).get("ipConfigurations") or []:
            props = config.get("properties") or {}
            private = private or str(props.get("privateIPAddress") or "")
            ip_ref = str((props.get("publicIPAddress") or {}).get("id") or "")
            if ip_ref and not public:
                ip = arm.get(ip_ref, NETWORK_API)
                public = str(((ip or {}).get("properties") or {}).get("ipAddress") or "")
        return private, public

    def _located(self, res: Resource) -> tuple[str, str]:
        meta = res.metadata or {}
        group = str(meta.get("resource_group") or self.cfg.resource_group)
        return group, str(meta.get("vm") or vm_name(res.identifier))

    def _vm(self, group: str, name: str) -> dict[str, Any] | None:
        """The VM with its instance view; what was read within SEEN_FOR_SECONDS serves
        again (`status ID` asks status() then describe())."""
        from drivers.azure.arm import COMPUTE_API

        key = f"{group}/{name}"
        seen = self._seen.get(key)
        now = time.monotonic()
        if seen is not None and now - seen[0] < SEEN_FOR_SECONDS:
            return seen[1]
        vm = self.arm().get(self._vm_path(group, name), COMPUTE_API, **{"$expand": "instanceView"})
        self._seen[key] = (now, vm)
        return vm

    def status(self, res: Resource) -> str:
        group, name = self._located(res)
        vm = self._vm(group, name) if group else None
        return STATUS_ALLOCATED if vm is not None and power_state(vm) in HOLDING else STATUS_NONE

    def describe(self, res: Resource) -> dict[str, Any]:
        """The VM's power state, location and addresses; for one gone, why (evicted, its
        lifetime reached, deleted outside shoal), and for one stopped, that it is still
        billed unless deallocated."""
        group, name = self._located(res)
        vm = self._vm(group, name) if group else None
        meta = res.metadata or {}
        if vm is not None:
            state = power_state(vm)
            out = vm_detail(vm)
            # A NIC keeps its private IP, a Static public IP its address, while they exist:
            # what the allocation read of them is still so, without asking again.
            for key in ("private_ip", "public_ip"):
                if meta.get(key):
                    out[key] = meta[key]
            if state not in HOLDING:
                out["reason"] = "stopped"
                out["message"] = f"{state or 'not running'} (from inside?); " + (
                    "still billed until freed" if state == "stopped" else "not billed for compute"
                )
            return out
        out = {"state": "gone", "vm": name, "resource_group": group}
        expires = str(meta.get("expires_epoch") or "")
        past = expires.isdigit() and int(expires) <= _now()
        if meta.get("market") == "spot" and not past:
            out.update(reason="evicted", message="Azure evicted the spot VM (deleted)")
        elif past:
            out.update(reason="expired", message="deleted itself at the end of its lifetime")
        else:
            out.update(reason="deleted", message="deleted outside shoal")
        return out

    def deallocate(self, res: Resource) -> None:
        """DELETE the VM (its NIC, IP and OS disk go with it: deleteOption Delete) and wait,
        then its role assignment (kept while the VM may live: it lets the VM end itself).
        A bare handle (the cleanup of an interrupted or killed alloc) deletes by name
        whatever its create made (VM, NIC, IP, disk, role assignment) in the resource group
        its note names, once this run's PUT still on the wire shows (GRACE_SECONDS); while
        a create was sent lately and never answered, what is not there yet is not believed
        gone (see DOUBT_WINDOW_SECONDS). What is in doubt or could not be deleted: after
        Ctrl-C the allocation is left to the next command (LeftForRecovery), a recovery
        keeps the row (RetryableError or ShoalError). Idempotent: what is gone is fine."""
        self._end(res)

    def end_leftovers(self, res: Resource) -> list[str]:
        """What a FAILED allocation left (a create its cleanup could not end, or a PUT that
        landed after it), found by name in the resource group its note names (else the
        instance's) and deleted: the names deleted now."""
        return self._end(Resource(identifier=res.identifier))

    def _end(self, res: Resource) -> list[str]:
        from drivers.azure.arm import AUTHORIZATION_API, COMPUTE_API, ArmError

        meta = res.metadata or {}
        ident = res.identifier
        bare = not meta.get("vm")
        note = self._notes.get(ident)
        group, name = self._located(res)
        if bare and note is not None:
            group = note.place
        elif bare and ident in self._listed:
            group, name = self._listed[ident]
        if not group:
            return []
        arm = self.arm()
        known = self._await_put(ident) if bare else True
        self._seen.clear()
        vm_path = self._vm_path(group, name)
        deleted: list[str] = []
        failed: list[str] = []
        try:
            if arm.delete(vm_path, COMPUTE_API, deadline=OPERATION_SECONDS, what=self._name):
                deleted.append(name)
        except ShoalError as exc:
            if not bare:
                raise
            self._settings.warn(f"{self._name}: could not delete {vm_path}: {exc}")
            failed.append(name)
        if bare or not deleted:
            more, failed_more = self._undo(group, name)  # what a half-made create left
            deleted += [n for n in more if n not in deleted]
            failed += [n for n in failed_more if n not in failed]
        if bare or meta.get("self_delete"):
            role = role_path(vm_path, ident)
            try:
                if arm.delete(role, AUTHORIZATION_API, deadline=OPERATION_SECONDS, what=self._name):
                    deleted.append(f"role assignment {role_assignment_name(ident)}")
            except (ArmError, CredentialsError):
                pass  # no assignment (the scope is gone), or none the caller could have made
            except ShoalError as exc:
                self._settings.warn(f"{self._name}: could not delete {role}: {exc}")
                failed.append(f"role assignment {role_assignment_name(ident)}")
        location = str(meta.get("location") or "")
        if location:
            self._forget_capacity(location)
        if bare:
            self._settle(ident, note, known, failed)
        elif failed:
            raise ShoalError(f"{self._name}: {ident}: could not delete {', '.join(failed)}")
        self._notes.forget(ident)
        return deleted

    def _settle(self, ident: str, note: Launch | None, known: bool, failed: list[str]) -> None:
        """A bare handle's cleanup is over only when nothing it deleted failed and nothing
        of its create is in doubt: this run knows what it sent (`known`); another run's
        create is in doubt while its note is young and unanswered."""
        if ident in self._created:
            doubt = not known
        else:
            doubt = note is not None and not note.instances and note.age() < DOUBT_WINDOW_SECONDS
        if not (doubt or failed):
            return
        why = (
            f"could not delete {', '.join(failed)}"
            if failed
            else "its create was sent but never answered, and may still land"
        )
        if ident in self._interrupted:
            self._settings.warn(
                f"{self._name}: {ident}: interrupted while creating its VM ({why}); the next "
                "shoal command deletes what it made"
            )
            raise LeftForRecovery
        if ident in self._created:  # its allocate failed: recorded FAILED, not retried
            self._settings.warn(
                f"{self._name}: {ident}: {why}; `shoal free {ident}` deletes what it made"
            )
        if doubt:
            raise RetryableError(f"{self._name}: {ident}: {why}; asked again later")
        raise ShoalError(f"{self._name}: {ident}: {why}")

    # -- what the subscription holds for shoal -------------------------------------------

    def remote_allocations(self) -> list[dict[str, Any]]:
        from drivers.azure.arm import COMPUTE_API

        arm = self.arm()
        now = _now()
        rows = []
        path: str | None = arm.sub("providers/Microsoft.Compute/virtualMachines")
        for _ in range(200):
            if path is None:
                break
            _, _, page = arm.call("GET", path, COMPUTE_API)
            page = page if isinstance(page, dict) else {}
            for vm in page.get("value") or []:
                tags = vm.get("tags") or {}
                ident = str(tags.get(ALLOCATION_TAG) or "")
                if tags.get(MANAGED_BY_TAG) != "shoal" or not ident:
                    continue
                said = vm_detail(vm)
                expires_at = str(tags.get(EXPIRES_TAG) or "")
                overdue = expires_at.isdigit() and int(expires_at) <= now
                self._listed[ident] = (said["resource_group"], str(vm.get("name") or ""))
                rows.append({
                    "id": ident,
                    "driver": self._name,
                    "status": said["provisioning_state"],
                    "created": _utc_stamp(said["created"]),
                    "note": f"{vm.get('name')} {said['size']} in {said['location']}"
                    + (" past its expiry: `shoal free --expired --remote azure` ends it"
                       if overdue else ""),
                    "expires": _epoch_time(expires_at),
                    "holds": True,
                    "expired": overdue,
                    "vm": vm.get("name", ""),
                    "resource_group": said["resource_group"],
                    "size": said["size"],
                    "location": said["location"],
                    "market": said["market"],
                })  # fmt: skip
            path = page.get("nextLink") or None
        return sorted(rows, key=lambda r: (str(r["created"]), str(r["id"])))

    # -- tasks -----------------------------------------------------------------------------

    def vm_of(self, res: Resource) -> tuple[str, str, dict[str, Any]]:
        """(resource group, VM name, the VM) of an allocation whose VM is there."""
        if not (res.metadata or {}).get("vm"):
            raise UsageError(f"{res.identifier}: no VM of its own")
        group, name = self._located(res)
        vm = self._vm(group, name)
        if vm is None:
            raise NotFoundError(
                f"{self._name}: {res.identifier}: its VM {name} is gone; `shoal status "
                f"{res.identifier}` says why"
            )
        return group, name, vm

    def tags_for(self, res: Resource) -> dict[str, str]:
        return {ALLOCATION_TAG: res.identifier, MANAGED_BY_TAG: "shoal"}

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        from drivers.azure.tasks import TASKS, AzureTask
        from drivers.definitions.options import task_options

        checked = task_options(TASKS, task, options)
        return None if checked is None else AzureTask(self, task, checked)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The VM's serial log (boot diagnostics: the boot, cloud-init and the entry's
        output); with `follow`, what is new every few seconds until the VM stops."""
        from drivers.azure.tasks import POLL_SECONDS, console, serial_log

        group, name, vm = self.vm_of(res)
        where = f"{self._name}: {res.identifier}"

        def holds() -> bool:
            self._seen.clear()
            now = self._vm(group, name)
            return now is not None and power_state(now) in HOLDING

        yield from console(
            lambda: serial_log(self.arm(), vm, where),
            tail=tail,
            follow=follow,
            holds=holds,
            poll=POLL_SECONDS,
        )


def made_network(name: str, subnet: str) -> dict[str, Any]:
    """The VM's network profile when it makes its NIC and public IP itself, both deleted
    with it."""
    return {
        "networkApiVersion": "2020-11-01",
        "networkInterfaceConfigurations": [
            {
                "name": f"{name}-nic",
                "properties": {
                    "primary": True,
                    "deleteOption": "Delete",
                    "ipConfigurations": [
                        {
                            "name": "ipconfig1",
                            "properties": {
                                "subnet": {"id": subnet},
                                "primary": True,
                                "publicIPAddressConfiguration": {
                                    "name": f"{name}-ip",
                                    "sku": {"name": "Standard", "tier": "Regional"},
                                    "properties": {
                                        "publicIPAllocationMethod": "Static",
                                        "deleteOption": "Delete",
                                    },
                                },
                            },
                        }
                    ],
                },
            }
        ],
    }


def power_state(vm: dict[str, Any]) -> str:
    """`running`, `stopped`, `deallocated`, ... from the instance view ("" when none)."""
    view = (vm.get("properties") or {}).get("instanceView") or {}
    for status in view.get("statuses") or []:
        code = str(status.get("code") or "")
        if code.startswith("PowerState/"):
            return code.split("/", 1)[1]
    return ""


def vm_detail(vm: dict[str, Any]) -> dict[str, Any]:
    props = vm.get("properties") or {}
    rid = str(vm.get("id") or "")
    group = re.search(r"/resourceGroups/([^/]+)/", rid, re.IGNORECASE)
    return {
        "state": power_state(vm) or str(props.get("provisioningState") or "").lower(),
        "provisioning_state": str(props.get("provisioningState") or ""),
        "vm": vm.get("name", ""),
        "resource_group": group.group(1) if group else "",
        "location": vm.get("location", ""),
        "zone": ",".join(vm.get("zones") or []),
        "size": str((props.get("hardwareProfile") or {}).get("vmSize") or ""),
        "market": "spot" if props.get("priority") == "Spot" else "on-demand",
        "created": str(props.get("timeCreated") or ""),
    }


def self_delete_script(management_url: str) -> str:
    """Run at the expiry, as root, on the VM: its identity's token from the instance
    metadata service, then DELETE of its own VM; retried each minute for half an hour,
    then a power-off (which stops the OS, not the bill: `free --expired --remote azure`)."""
    imds = "http://169.254.169.254/metadata"
    return "\n".join([
        "#!/bin/sh",
        "# Written by shoal: the VM deletes itself at the end of its lifetime.",
        f"vm=$(curl -s -H Metadata:true '{imds}/instance/compute/resourceId"
        "?api-version=2021-02-01&format=text')",
        "for try in $(seq 30); do",
        f"  token=$(curl -s -H Metadata:true '{imds}/identity/oauth2/token"
        f"?api-version=2018-02-01&resource={management_url}/' "
        "| sed -n 's/.*\"access_token\":\"\\([^\"]*\\)\".*/\\1/p')",
        '  if [ -n "$token" ] && [ -n "$vm" ]; then',
        '    code=$(curl -s -o /dev/null -w "%{http_code}" -X DELETE '
        '-H "Authorization: Bearer $token" '
        f'"{management_url}$vm?api-version=2024-07-01")',
        '    case "$code" in 200|202|204) exit 0;; esac',
        "  fi",
        "  sleep 60",
        "done",
        "exec shutdown -h now 'shoal: lifetime over; the VM could not delete itself'",
    ])  # fmt: skip


def throwaway_ssh_key() -> str:
    """An OpenSSH public key whose private half is never kept: Azure requires a login for a
    Linux VM, and shoal asks for none unless `ssh_key` names one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ed25519

    public = ed25519.Ed25519PrivateKey.generate().public_key()
    raw = public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return raw.decode() + " shoal-no-login"


def as_size(text: str) -> str:
    """drivers/vm/choice.py's words for the option naming the type, as this driver calls it."""
    return text.replace("options.instance_type", "options.size").replace(
        "-o instance_type", "-o size"
    )


def refuse_secret(where: str, name: str) -> None:
    if is_secret_name(name):
        raise UsageError(f"{where}: looks like a credential; {SECRET_FIX}")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else -1 for p in version.split("."))


def _utc_stamp(value: str) -> str:
    """ARM's stamps (`2026-12-02T08:06:50.7479490+00:00`) as shoal's JSON says times: UTC
    with a Z (sorting and --sort compare text)."""
    from datetime import UTC, datetime

    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        return value
    if at.tzinfo is None:
        return value
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _epoch_time(value: str) -> str | None:
    if not value.isdigit():
        return None
    from datetime import UTC, datetime

    from providers.core.wire import format_time

    return format_time(datetime.fromtimestamp(int(value), UTC))


# ARM's `target` of a refused field -> the option that sets it.
TARGET_OPTIONS = {
    "vmsize": "options.size",
    "hardwareprofile.vmsize": "options.size",
    "zones": "options.zone",
    "imagereference": "options.image",
    "storageprofile.imagereference": "options.image",
    "disksizegb": "options.disk_gb",
    "storageprofile.osdisk.disksizegb": "options.disk_gb",
    "billingprofile": "options.max_price",
    "billingprofile.maxprice": "options.max_price",
    "evictionpolicy": "options.spot",
    "priority": "options.spot",
    "customdata": "options.entry",
    "subnet": "options.subnet",
}
# Refusals without a target, by code -> the option they are about.
CODE_OPTIONS = {
    "PlatformImageNotFound": "options.image",
    "ImageNotFound": "options.image",
    "InvalidResourceReference": "options.subnet",  # the NIC's subnet is not there
    "ResourceGroupNotFound": "options.resource_group",
    "LocationNotAvailableForResourceType": "options.location",
}
USAGE_CODES = (
    "InvalidParameter", "BadRequest", "NotFound", "ResourceNotFound", "InvalidTemplate",
    *CODE_OPTIONS,
)  # fmt: skip
_QUOTA = re.compile(
    r"exceeding approved (?P<quota>.+?) quota\b.*?Current Limit: (?P<limit>\d+), Current Usage: "
    r"(?P<usage>\d+), Additional Required: (?P<more>\d+)",
    re.IGNORECASE | re.DOTALL,
)


def _mapped(exc: ArmError, plan: Plan, size: str, where: str) -> ShoalError:
    """ARM's refusal as shoal's error: capacity and quota 75, a field 2 naming the option,
    refused credentials 77, else 1."""
    codes = exc.all_codes()
    if any(code in CAPACITY_CODES for code in codes):
        return NoCapacityError(f"{where}: {exc.code}: {exc.message}")
    if "OperationNotAllowed" in codes and "quota" in exc.message.lower():
        return NoCapacityError(f"{where}: {quota_said(exc.message, size)}")
    if exc.code in USAGE_CODES:
        option = TARGET_OPTIONS.get(exc.target.lower()) or CODE_OPTIONS.get(exc.code, "")
        if not option and re.search(r"Hypervisor Generation|CPU architecture", exc.message):
            option = "options.image"  # the image and the size do not go together
        said = f"{option or exc.target or 'options'}: {exc.code}: {exc.message}"
        return UsageError(f"{said} (size {size}, {plan.location}, resource group {plan.group})")
    if exc.status in (401, 403) or exc.code in ("AuthorizationFailed", "LinkedAuthorizationFailed"):
        return CredentialsError(f"{where}: {exc}")
    return ShoalError(f"{where}: {exc}")


def capacity_code(exc: NoCapacityError) -> str:
    """What a refusal for capacity was, in a word: Azure's code, or `quota ...`."""
    text = str(exc.args[0]) if exc.args else ""
    for code in CAPACITY_CODES:
        if f": {code}:" in text:
            return code
    found = re.search(r": (quota [^:]+):", text)
    return found.group(1) if found else text


def quota_said(message: str, size: str) -> str:
    """Azure's quota refusal, short: the quota, its limit, what is used and needed."""
    found = _QUOTA.search(message)
    if found is None:
        return f"quota: {message}"
    limit, usage, more = (int(found.group(k)) for k in ("limit", "usage", "more"))
    return (
        f"quota {found.group('quota')}: limit {limit}, {usage} in use, {size} needs {more} "
        f"more (a limit of {usage + more}); free VMs, or ask Azure for a higher quota"
    )
