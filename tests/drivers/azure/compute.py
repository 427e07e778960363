"""Microsoft.Compute for the ARM stand-in: virtual machines and what they are made of.

Served: VirtualMachines_CreateOrUpdate / Get / InstanceView / List / ListAll /
ListByLocation / Delete / PowerOff / Deallocate / Start / Restart / Generalize /
SimulateEviction / RetrieveBootDiagnosticsData; Disks_Get / List / ListByResourceGroup /
Update (its tags only, answered at once) / Delete; Snapshots_CreateOrUpdate / Get / List /
ListByResourceGroup / Delete;
Images_CreateOrUpdate / Get / List / ListByResourceGroup / Delete; ResourceSkus_List
(`$filter=location eq 'X'`); Usage_List (live); VirtualMachineSizes_List;
VirtualMachineImages_Get / List / ListSkus / ListOffers / ListPublishers;
CapacityReservationGroups_CreateOrUpdate / Get (`$expand=instanceView`) / ListBySubscription /
ListByResourceGroup (`$expand=virtualMachines/$ref`) / Delete; CapacityReservations_
CreateOrUpdate / Get (`$expand=instanceView`) / ListByCapacityReservationGroup / Delete.

A VM's life: PUT answers 201 with provisioningState Creating and `Azure-AsyncOperation`;
after `timing.vm_create` it is Succeeded and PowerState/running (or Failed, with the
operation's error, when `fail_create` says so). A re-PUT of an existing VM is the same VM
(200, same vmId): tags and the size may change, a property Azure fixes at creation may not
(409 PropertyChangeNotAllowed); a re-PUT while it is still being created answers the VM
and the create's own operation. DELETE answers 202 (Location + Azure-AsyncOperation) and
honours each part's deleteOption: a NIC (networkProfile.networkInterfaces[].properties.
deleteOption, or networkInterfaceConfigurations[].properties.deleteOption for one the VM
made), a public IP the VM made (publicIPAddressConfiguration.properties.deleteOption; a
standalone one stays), the OS and data disks (deleteOption; Detach by default, as the API
defaults): what is not deleted stays, detached and billed. powerOff -> PowerState/stopped
(still allocated and billed), deallocate -> PowerState/deallocated, start -> running.
Spot VMs (`priority: Spot`) are evicted by `evict()` / SimulateEviction: evictionPolicy
Delete deletes the VM and its disks, Deallocate (the default) deallocates it;
`set_spot_price` evicts those whose billingProfile.maxPrice is under the new price.
userData and osProfile.customData are kept (base64 checked, 87,380 characters at most);
userData is answered only with `$expand=userData`, customData and adminPassword never, as
Azure does. `identity: {type: SystemAssigned}` gets a principalId and tenantId.

Checked at PUT, with Azure's errors: the size is one of the region's Resource SKUs
(InvalidParameter, target vmSize); a SKU restricted for the subscription in the location or
zone is 409 SkuNotAvailable; the image's Hyper-V generation must be one the size boots (400
BadRequest "The selected VM size 'X' cannot boot Hypervisor Generation '2'. ..."), and its
CPU architecture the size's (400 BadRequest, text approximated); an unknown image is 404
PlatformImageNotFound; vCPU quotas are enforced with the real 409 OperationNotAllowed text
("Operation could not be completed as it results in exceeding approved standardDSv5Family
Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus,
Current Limit: 10, Current Usage: 8, Additional Required: 4, (Minimum) New Limit Required:
12. ..."): a pay-as-you-go VM counts against its family and `cores`, a Spot VM against
`lowPriorityCores`; every VM that exists counts, whatever its power state (Azure counts
deallocated VMs too).

Capacity reservations, as learn.microsoft.com/azure/virtual-machines/capacity-reservation-*
documents them: a group (zonal or regional; reservationType Block for fixed windows) holds
reservations of one size each, one per size and zone (per window in a Block group), in the
group's location and zones; a reservation PUT answers 201 Creating, then Succeeded, and takes
the quota of its whole quantity (409 OperationNotAllowed past it, as a VM's). A VM naming the
group (`properties.capacityReservation.capacityReservationGroup.id`) counts against the
reservation of its size and zone: allocated while it holds hardware (not deallocated or
failed; `utilizationInfo.virtualMachinesAllocated`), associated while it exists
(`virtualMachinesAssociated`), and takes no quota of its own within the quantity. Past the
quantity a targeted group overallocates (the VM is made and takes quota, as Azure does); a
Block reservation fails the create as an allocation failure, as it does outside its window.
Refused at PUT (texts approximated; Azure publishes none): a group that is not there (404
NotFound), one the caller may not deploy into (403 LinkedAuthorizationFailed, ARM's linked
access check and text), a Spot VM, a
group in another location, no reservation of the VM's size and zone (400 InvalidParameter,
target capacityReservation.capacityReservationGroup.id), and a resize to such a size; a
reservation of a size capacity reservations do not take is 400 NotSupported with Azure's
text. Deleting the VM frees its unit; a reservation with VMs associated, or a group holding
reservations, is not deleted (409 OperationNotAllowed).

Knobs: fail_create(code, size=, location=, zone=, times=, message=) (AllocationFailed,
ZonalAllocationFailed, OverconstrainedAllocationRequest, ... in the create's operation),
quotas[location][name] = limit, restrict_sku(size, location, zones=), add_image(...),
set_spot_price(location, size, price), evict(rg, vm), shutdown(rg, vm) (the guest powers
itself off), console(rg, vm, text) (append to the serial log boot diagnostics serve),
reservation_group(name, location, zones=, block=) and reserve(group, name, size, quantity,
zone=, window=) (made as the API makes them, provisioned at once; their ids).
Observations: vm(rg, name) (with its instance view), usage(location), utilization(reservation)
(currentCapacity, the VMs allocated on it).
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from tests.drivers.azure.network import NIC
from tests.drivers.azure.standin import (
    RESOURCE_GROUP,
    TEST_PRINCIPAL,
    ArmError,
    Reply,
    Res,
    denied,
    invalid,
    not_found,
)

if TYPE_CHECKING:
    from tests.drivers.azure.standin import ArmStandin, AsyncOp

VM = "Microsoft.Compute/virtualMachines"
DISK = "Microsoft.Compute/disks"
SNAPSHOT = "Microsoft.Compute/snapshots"
IMAGE = "Microsoft.Compute/images"
GROUP = "Microsoft.Compute/capacityReservationGroups"
RESERVATION = "Microsoft.Compute/capacityReservationGroups/capacityReservations"
DEPLOY_TO_GROUP = "Microsoft.Compute/capacityReservationGroups/deploy/action"
BLOB_PREFIX = "/bootdiagnostics/"
_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9_.-]{0,62}[A-Za-z0-9_])?")
_CUSTOM_DATA_MAX = 87380


@dataclass(frozen=True)
class SkuSpec:
    """A VM size as Resource SKUs describes it (the figures are Microsoft's, and agree with
    providers/azure/sizes.json and quota_families.json; a test checks it)."""

    name: str
    family: str
    vcpus: int
    memory_gb: float
    generations: tuple[str, ...] = ("V1", "V2")
    arch: str = "x64"
    gpus: int = 0
    locations: tuple[str, ...] = ("eastus", "westeurope")
    max_data_disks: int = 4
    premium: bool = True
    reservable: bool = True  # capacity reservations take it (CapacityReservationSupported)

    @property
    def size(self) -> str:
        return self.name.removeprefix("Standard_")


SKUS = (
    SkuSpec("Standard_A1_v2", "standardAv2Family", 1, 2, ("V1",), premium=False, max_data_disks=2),
    SkuSpec("Standard_B2s", "standardBSFamily", 2, 4),
    SkuSpec("Standard_D2s_v5", "standardDSv5Family", 2, 8),
    SkuSpec("Standard_D4s_v5", "standardDSv5Family", 4, 16, max_data_disks=8),
    SkuSpec("Standard_D8s_v5", "standardDSv5Family", 8, 32, max_data_disks=16),
    SkuSpec("Standard_D2s_v6", "standardDSv6Family", 2, 8, ("V2",)),
    SkuSpec("Standard_D2ps_v5", "standardDPSv5Family", 2, 8, ("V2",), "Arm64"),
    SkuSpec("Standard_D4ps_v5", "standardDPSv5Family", 4, 16, ("V2",), "Arm64", max_data_disks=8),
    SkuSpec("Standard_E4s_v5", "standardESv5Family", 4, 32, max_data_disks=8),
    SkuSpec("Standard_NC4as_T4_v3", "Standard NCASv3_T4 Family", 4, 28, gpus=1, max_data_disks=8),
    SkuSpec(
        "Standard_NC24ads_A100_v4",
        "StandardNCADSA100v4Family",
        24,
        220,
        ("V2",),
        gpus=1,
        locations=("eastus",),
        max_data_disks=8,
    ),
)
# Restricted for the subscription (NotAvailableForSubscription): (size, location) -> the
# zones (None: the whole location).
RESTRICTIONS: dict[tuple[str, str], tuple[str, ...] | None] = {
    ("Standard_E4s_v5", "westeurope"): None,
    ("Standard_NC4as_T4_v3", "eastus"): ("3",),
}


@dataclass(frozen=True)
class MarketImage:
    publisher: str
    offer: str
    sku: str
    versions: tuple[str, ...]
    generation: str = "V2"
    arch: str = "x64"
    os_name: str = "ubuntu"
    os_version: str = "24.04"

    def urn(self, version: str) -> str:
        return f"{self.publisher}:{self.offer}:{self.sku}:{version}"


_NOBLE = ("24.04.202409120", "24.04.202410170", "24.04.202411030")
_JAMMY = ("22.04.202410020", "22.04.202411010")
_BOOKWORM = ("0.20241004.1890", "0.20241110.1942")
IMAGES = (
    MarketImage("Canonical", "ubuntu-24_04-lts", "server", _NOBLE),
    MarketImage("Canonical", "ubuntu-24_04-lts", "server-gen1", _NOBLE, "V1"),
    MarketImage("Canonical", "ubuntu-24_04-lts", "server-arm64", _NOBLE, "V2", "Arm64"),
    MarketImage(
        "Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts", _JAMMY, "V1", os_version="22.04"
    ),
    MarketImage(
        "Canonical", "0001-com-ubuntu-server-jammy", "22_04-lts-gen2", _JAMMY, os_version="22.04"
    ),
    MarketImage(
        "Canonical",
        "0001-com-ubuntu-server-jammy",
        "22_04-lts-arm64",
        _JAMMY,
        "V2",
        "Arm64",
        os_version="22.04",
    ),
    MarketImage("Debian", "debian-12", "12", _BOOKWORM, "V1", os_name="debian", os_version="12"),
    MarketImage("Debian", "debian-12", "12-gen2", _BOOKWORM, os_name="debian", os_version="12"),
    MarketImage(
        "Debian",
        "debian-12",
        "12-arm64",
        _BOOKWORM,
        "V2",
        "Arm64",
        os_name="debian",
        os_version="12",
    ),
)
ALLOCATION = "Read more about improving likelihood of allocation success at http://aka.ms/allocation-guidance"
CREATE_FAILURES = {
    "AllocationFailed": "Allocation failed. We do not have sufficient capacity for the "
    f"requested VM size in this region. {ALLOCATION}",
    "ZonalAllocationFailed": "Allocation failed. We do not have sufficient capacity for the "
    f"requested VM size in this zone. {ALLOCATION}",
    "OverconstrainedAllocationRequest": "Allocation failed. VM(s) with the following "
    "constraints cannot be allocated, because the condition is too restrictive. Please remove "
    "some constraints and try again. Constraints applied are:\n  - Networking Constraints "
    "(such as Accelerated Networking or IPv6)\n  - VM Size\n",
    "OverconstrainedZonalAllocationRequest": "Allocation failed. VM(s) with the following "
    "constraints cannot be allocated, because the condition is too restrictive. Please remove "
    "some constraints and try again. Constraints applied are:\n  - Availability Zone\n  - "
    "Networking Constraints (such as Accelerated Networking or IPv6)\n  - VM Size\n",
}
# Regional limits as a new pay-as-you-go subscription has them (the families' limit is
# FAMILY_LIMIT unless `quotas` says otherwise).
DEFAULT_LIMITS = {
    "availabilitySets": 2500,
    "cores": 100,
    "virtualMachines": 25000,
    "virtualMachineScaleSets": 2500,
    "lowPriorityCores": 100,
}
FAMILY_LIMIT = 100
LOCALIZED = {
    "availabilitySets": "Availability Sets",
    "cores": "Total Regional vCPUs",
    "virtualMachines": "Virtual Machines",
    "virtualMachineScaleSets": "Virtual Machine Scale Sets",
    "lowPriorityCores": "Total Regional Low-priority vCPUs",
}
# The name a quota has in the OperationNotAllowed message.
QUOTA_NAMES = {"cores": "Total Regional Cores", "lowPriorityCores": "Low Priority Cores"}
SPOT_PRICE_PER_VCPU = 0.004  # USD an hour, the default spot price of a size


# A VM as the quotas and reservations see it: (size, Spot, its capacity reservation group's
# id lower-cased or None, zones).
VmKey = tuple[SkuSpec, bool, str | None, tuple[str, ...]]
# A capacity reservation as the quotas see it: (size, quantity, group id lower-cased, zones).
Hold = tuple[SkuSpec, int, str, tuple[str, ...]]


@dataclass
class CreateFault:
    code: str
    size: str | None = None
    location: str | None = None
    zone: str | None = None
    times: int | None = 1  # None: every matching create
    message: str | None = None


def _b64(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


class Compute:
    def __init__(self, standin: ArmStandin) -> None:
        self.s = standin
        self.skus: dict[str, SkuSpec] = {k.name.lower(): k for k in SKUS}
        self.restrictions = dict(RESTRICTIONS)
        self.market: list[MarketImage] = list(IMAGES)
        self.quotas: dict[str, dict[str, int]] = {loc: {} for loc in standin.locations}
        self.spot_prices: dict[tuple[str, str], float] = {}
        self.create_faults: list[CreateFault] = []
        self._blobs: dict[str, tuple[str, bytearray]] = {}  # vmId -> (name, serial log)
        standin.handlers.update(
            {
                "VirtualMachines_CreateOrUpdate": self._vm_put,
                "VirtualMachines_Get": self._vm_get,
                "VirtualMachines_InstanceView": self._vm_instance_view,
                "VirtualMachines_List": self._vm_list,
                "VirtualMachines_ListAll": self._vm_list,
                "VirtualMachines_ListByLocation": self._vm_list,
                "VirtualMachines_Delete": self._vm_delete,
                "VirtualMachines_PowerOff": self._power("powerOff", "stopping", "stopped"),
                "VirtualMachines_Deallocate": self._power(
                    "deallocate", "deallocating", "deallocated"
                ),
                "VirtualMachines_Start": self._power("start", "starting", "running"),
                "VirtualMachines_Restart": self._power("restart", "starting", "running"),
                "VirtualMachines_Generalize": self._generalize,
                "VirtualMachines_SimulateEviction": self._simulate_eviction,
                "VirtualMachines_RetrieveBootDiagnosticsData": self._boot_diagnostics,
                "Disks_Get": self._get(DISK, "diskName"),
                "Disks_List": self._list(DISK),
                "Disks_ListByResourceGroup": self._list(DISK),
                "Disks_Delete": self._disk_delete,
                "Disks_Update": self._disk_update,
                "Snapshots_CreateOrUpdate": self._snapshot_put,
                "Snapshots_Get": self._get(SNAPSHOT, "snapshotName"),
                "Snapshots_List": self._list(SNAPSHOT),
                "Snapshots_ListByResourceGroup": self._list(SNAPSHOT),
                "Snapshots_Delete": self._simple_delete(SNAPSHOT, "snapshotName"),
                "Images_CreateOrUpdate": self._image_put,
                "Images_Get": self._get(IMAGE, "imageName"),
                "Images_List": self._list(IMAGE),
                "Images_ListByResourceGroup": self._list(IMAGE),
                "Images_Delete": self._simple_delete(IMAGE, "imageName"),
                "ResourceSkus_List": self._skus,
                "Usage_List": self._usages,
                "VirtualMachineSizes_List": self._sizes,
                "VirtualMachineImages_Get": self._market_get,
                "VirtualMachineImages_List": self._market_list,
                "VirtualMachineImages_ListSkus": self._market_skus,
                "VirtualMachineImages_ListOffers": self._market_offers,
                "VirtualMachineImages_ListPublishers": self._market_publishers,
                "CapacityReservationGroups_CreateOrUpdate": self._group_put,
                "CapacityReservationGroups_Get": self._group_get,
                "CapacityReservationGroups_ListByResourceGroup": self._group_list,
                "CapacityReservationGroups_ListBySubscription": self._group_list,
                "CapacityReservationGroups_Delete": self._group_delete,
                "CapacityReservations_CreateOrUpdate": self._reservation_put,
                "CapacityReservations_Get": self._reservation_get,
                "CapacityReservations_ListByCapacityReservationGroup": self._reservation_list,
                "CapacityReservations_Delete": self._reservation_delete,
            }
        )

    # --- knobs

    def fail_create(
        self,
        code: str,
        *,
        size: str | None = None,
        location: str | None = None,
        zone: str | None = None,
        times: int | None = 1,
        message: str | None = None,
    ) -> None:
        """The next matching creates are accepted, then fail in their operation (the VM
        stays, provisioningState Failed, as Azure leaves it)."""
        with self.s.lock:
            self.create_faults.append(CreateFault(code, size, location, zone, times, message))

    def restrict_sku(self, size: str, location: str, zones: tuple[str, ...] | None = None) -> None:
        with self.s.lock:
            self.restrictions[(self._sku_name(size), location)] = zones

    def add_image(self, image: MarketImage) -> None:
        with self.s.lock:
            self.market.append(image)

    def set_spot_price(self, location: str, size: str, price: float) -> None:
        """The spot price moves: Spot VMs of that size whose maxPrice is under it are
        evicted (a maxPrice of -1 never is)."""
        with self.s.lock:
            self.s.tick()
            self.spot_prices[(location, size.lower())] = price
            for res in list(self.s.of_type(VM)):
                st = res.state
                max_price = res.props.get("billingProfile", {}).get("maxPrice", -1)
                if (
                    st["spot"]
                    and res.body["location"] == location
                    and st["sku"].name.lower() == size.lower()
                    and max_price != -1
                    and max_price < price
                ):
                    self._evict(res, self.s.now(), "spot price over maxPrice")

    def evict(self, rg: str, name: str) -> None:
        """Azure reclaims a Spot VM now: evictionPolicy Delete deletes it (and its disks),
        Deallocate deallocates it."""
        with self.s.lock:
            self.s.tick()
            res = self.s.find(rg, VM, name)
            if not res.state["spot"]:
                raise ValueError(f"{rg}/{name} is not a Spot VM: Azure evicts only those")
            self._evict(res, self.s.now(), "evicted")

    def shutdown(self, rg: str, name: str) -> None:
        """The guest powers itself off (`shutdown -h now` inside): PowerState/stopped, still
        allocated and billed."""
        with self.s.lock:
            self.s.tick()
            res = self.s.find(rg, VM, name)
            res.state["power"] = "stopped"
            self.s.event("stopped", res.id, "guest shutdown")

    def console(self, rg: str, name: str, text: str) -> None:
        """Append to the VM's serial log (what its cloud-init or a script would print)."""
        with self.s.lock:
            res = self.s.find(rg, VM, name)
            self._blobs[res.props["vmId"]][1].extend(text.encode())

    def reservation_group(
        self,
        name: str,
        location: str = "eastus",
        *,
        rg: str = RESOURCE_GROUP,
        zones: tuple[str, ...] = (),
        block: bool = False,
    ) -> str:
        """A capacity reservation group, as CapacityReservationGroups_CreateOrUpdate makes it
        (`block`: reservationType Block, its reservations fixed windows); its id."""
        body: dict[str, Any] = {"location": location, "properties": {}}
        if zones:
            body["zones"] = list(zones)
        if block:
            body["properties"]["reservationType"] = "Block"
        with self.s.lock:
            self.s.tick()
            return self._make_group(self.s.rg_name(rg), name, body)[0].id

    def reserve(
        self,
        group: str,
        name: str,
        size: str,
        quantity: int,
        *,
        rg: str = RESOURCE_GROUP,
        zone: str | None = None,
        window: tuple[str, str] | None = None,
    ) -> str:
        """A capacity reservation of `quantity` VMs of `size` in `group` (a zone of a zonal
        group; `window` (start, end) for a Block group), checked as the API checks it
        (quota included) and provisioned at once; again, its quantity changes. Its id."""
        with self.s.lock:
            self.s.tick()
            holder = self.s.find(rg, GROUP, group)
            body: dict[str, Any] = {
                "location": holder.body["location"],
                "sku": {"name": size, "capacity": quantity},
            }
            if zone:
                body["zones"] = [zone]
            if window:
                body["properties"] = {"scheduleProfile": {"start": window[0], "end": window[1]}}
            res = self._make_reservation(holder, name, body)[0]
            self._provisioned(res)
            return res.id

    def utilization(self, reservation: str) -> tuple[int, list[str]]:
        """(currentCapacity, the ids of the VMs allocated on it) of a capacity reservation."""
        with self.s.lock:
            self.s.tick()
            res = self.s.get(reservation)
            if res is None or res.type != RESERVATION:
                raise KeyError(reservation)
            return self._current_capacity(res), [v.id for v in self._held(res)]

    def vm(self, rg: str, name: str) -> dict[str, Any] | None:
        """The VM as a GET with `$expand=instanceView` would answer now, or None."""
        with self.s.lock:
            self.s.tick()
            res = self.s.get(self.s.rid(rg, VM, name))
            if res is None:
                return None
            body = copy.deepcopy(res.body)
            body["properties"]["instanceView"] = self.instance_view(res)
            return body

    def usage(self, location: str) -> dict[str, int]:
        """What the VMs that exist in `location` take: cores, lowPriorityCores,
        virtualMachines and each family's vCPUs."""
        with self.s.lock:
            self.s.tick()
            return self._usage(location)

    # --- the catalog

    def _sku_name(self, size: str) -> str:
        found = self.skus.get(size.lower())
        return found.name if found else size

    def _sku(self, size: str, location: str) -> SkuSpec:
        found = self.skus.get(size.lower())
        if found is None or location not in found.locations:
            available = ",".join(k.name for k in self.skus.values() if location in k.locations)
            raise invalid(
                f"The requested VM size {size} is not available in the current region. The "
                f"sizes available in the current region are: {available}. Find out more on "
                "the available VM sizes in each region at https://aka.ms/azure-regions.",
                "vmSize",
            )
        return found

    def _restricted(self, sku: SkuSpec, location: str, zones: list[str]) -> bool:
        key = (sku.name, location)
        if key not in self.restrictions:
            return False
        blocked = self.restrictions[key]
        return blocked is None or any(z in blocked for z in zones)

    def _sku_entry(self, sku: SkuSpec, location: str) -> dict[str, Any]:
        zones = list(self.s.locations.get(location, ()))
        caps = [
            ("MaxResourceVolumeMB", "0"),
            ("OSVhdSizeMB", "1047552"),
            ("vCPUs", str(sku.vcpus)),
            ("MemoryPreservingMaintenanceSupported", "True"),
            ("HyperVGenerations", ",".join(sku.generations)),
            ("MemoryGB", f"{sku.memory_gb:g}"),
            ("MaxDataDiskCount", str(sku.max_data_disks)),
            ("CpuArchitectureType", sku.arch),
            ("LowPriorityCapable", "True"),
            ("PremiumIO", str(sku.premium)),
            ("VMDeploymentTypes", "IaaS"),
            ("vCPUsAvailable", str(sku.vcpus)),
            ("vCPUsPerCore", "1" if sku.arch == "Arm64" else "2"),
            ("EphemeralOSDiskSupported", "False"),
            ("AcceleratedNetworkingEnabled", "True"),
            ("RdmaEnabled", "False"),
            ("MaxNetworkInterfaces", "2"),
            ("CapacityReservationSupported", str(sku.reservable)),
        ]
        if sku.gpus:
            caps.append(("GPUs", str(sku.gpus)))
        restrictions = []
        key = (sku.name, location)
        if key in self.restrictions:
            blocked = self.restrictions[key]
            info: dict[str, Any] = {"locations": [location]}
            if blocked is not None:
                info["zones"] = list(blocked)
            restrictions.append(
                {
                    "type": "Location" if blocked is None else "Zone",
                    "values": [location],
                    "restrictionInfo": info,
                    "reasonCode": "NotAvailableForSubscription",
                }
            )
        return {
            "resourceType": "virtualMachines",
            "name": sku.name,
            "tier": "Standard",
            "size": sku.size,
            "family": sku.family,
            "locations": [location],
            "locationInfo": [{"location": location, "zones": zones, "zoneDetails": []}],
            "capabilities": [{"name": n, "value": v} for n, v in caps],
            "restrictions": restrictions,
        }

    def _skus(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        text = q.get("$filter", "").strip()
        wanted = None
        if text:
            match = re.fullmatch(r"location\s+eq\s+'([^']*)'", text, re.IGNORECASE)
            if match is None:
                raise invalid(
                    f"The filter '{text}' is not supported. Only 'location eq' is supported.",
                    "$filter",
                )  # approximated
            wanted = match.group(1).replace(" ", "").lower()
        items = [
            self._sku_entry(sku, location)
            for sku in self.skus.values()
            for location in sku.locations
            if wanted in (None, location)
        ]
        return Reply(
            200,
            self.s.page(
                items, q, f"/subscriptions/{p['subscriptionId']}/providers/Microsoft.Compute/skus"
            ),
        )

    def _sizes(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        location = self.s.check_location(p["location"], VM)
        items = [
            {
                "name": k.name,
                "numberOfCores": k.vcpus,
                "osDiskSizeInMB": 1047552,
                "resourceDiskSizeInMB": 0,
                "memoryInMB": int(k.memory_gb * 1024),
                "maxDataDiskCount": k.max_data_disks,
            }
            for k in self.skus.values()
            if location in k.locations
        ]
        return Reply(200, {"value": items})

    # --- usages and quotas

    def _usage(
        self,
        location: str,
        *,
        add: VmKey | None = None,
        drop: Res | None = None,
        reservations: dict[str, Hold] | None = None,
    ) -> dict[str, int]:
        """What `location` takes of each quota: every VM that exists (whatever its power
        state), and every capacity reservation its whole quantity, the VMs it holds included
        (Azure takes a reservation's quota when it is made; a VM beyond its quantity,
        overallocated, takes quota of its own). `add` / `drop` / `reservations` (id -> the
        reservation as it would be) ask what a change would make of it."""
        used: dict[str, int] = {}
        holds: dict[str, list[Any]] = {}  # id -> [sku, quantity, group, zones, VMs held]
        for r in self.s.of_type(RESERVATION):
            if r.body["location"] == location:
                holds[r.id.lower()] = [*self._hold(r), 0]
        for rid, hold in (reservations or {}).items():
            holds[rid.lower()] = [*hold, 0]
        keys = [
            self._vm_key(r)
            for r in self.s.of_type(VM)
            if r.body["location"] == location and r is not drop
        ]
        keys += [add] if add is not None else []
        for sku, spot, group, zones in keys:
            used["virtualMachines"] = used.get("virtualMachines", 0) + 1
            if spot:
                used["lowPriorityCores"] = used.get("lowPriorityCores", 0) + sku.vcpus
                continue
            chosen = self._reservation_for(group, sku, zones) if group else None
            held = holds.get(chosen.id.lower()) if chosen is not None else None
            if held is None:  # a reservation `reservations` adds
                held = next(
                    (
                        h
                        for h in holds.values()
                        if group and (h[2], h[0].name, h[3]) == (group, sku.name, zones)
                    ),
                    None,
                )
            if held is not None:
                held[4] += 1
                continue
            for name in ("cores", sku.family):
                used[name] = used.get(name, 0) + sku.vcpus
        for sku, quantity, _, _, count in holds.values():
            for name in ("cores", sku.family):
                used[name] = used.get(name, 0) + max(quantity, count) * sku.vcpus
        return used

    def _limit(self, location: str, name: str) -> int:
        own = self.quotas.setdefault(location, {})
        if name in own:
            return own[name]
        return DEFAULT_LIMITS.get(name, FAMILY_LIMIT)

    def _check_quota(
        self,
        location: str,
        *,
        add: VmKey | None = None,
        drop: Res | None = None,
        reservations: dict[str, Hold] | None = None,
    ) -> None:
        """Refuse a change that takes a vCPU quota past its limit (a family's first, as
        Azure names it first), with Azure's text."""
        before = self._usage(location)
        after = self._usage(location, add=add, drop=drop, reservations=reservations)
        regional = ("cores", "lowPriorityCores", "virtualMachines")
        for name in [n for n in after if n not in regional] + ["cores", "lowPriorityCores"]:
            current, then = before.get(name, 0), after.get(name, 0)
            limit = self._limit(location, name)
            if then <= current or then <= limit:
                continue
            need = then - current
            quota = QUOTA_NAMES.get(name, f"{name} Cores")
            blade = {
                "subscriptionId": self.s.subscription,
                "command": "openQuotaApprovalBlade",
                "quotas": [
                    {
                        "location": location,
                        "providerId": "Microsoft.Compute",
                        "resourceName": name,
                        "quotaRequest": {
                            "properties": {
                                "limit": then,
                                "unit": "Count",
                                "name": {"value": name},
                            }
                        },
                    }
                ],
            }
            request = quote(json.dumps(blade, separators=(",", ":")), safe=":,[]")
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Operation could not be completed as it results in exceeding approved {quota} "
                "quota. Additional details - Deployment Model: Resource Manager, Location: "
                f"{location}, Current Limit: {limit}, Current Usage: {current}, Additional "
                f"Required: {need}, (Minimum) New Limit Required: {then}. Setup "
                "Alerts when Quota reaches threshold. Learn more at "
                "https://aka.ms/quotamonitoringalerting . Submit a request for Quota increase "
                "at https://aka.ms/ProdportalCRP/#blade/Microsoft_Azure_Capacity/"
                f"UsageAndQuota.ReactView/Parameters/{request} by specifying parameters listed "
                "in the \u2018Details\u2019 section for deployment to succeed. Please read more "
                "about "
                "quota limits at https://docs.microsoft.com/en-us/azure/azure-supportability/"
                "per-vm-quota-requests",
            )

    def _usages(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        location = self.s.check_location(p["location"], "Microsoft.Compute/locations/usages")
        used = self._usage(location)
        names = [*DEFAULT_LIMITS, *sorted({k.family for k in self.skus.values()})]
        names += [n for n in self.quotas.get(location, {}) if n not in names]
        items = []
        for name in names:
            localized = LOCALIZED.get(name) or (
                re.sub(r"^standard\s*", "Standard ", name, flags=re.IGNORECASE)
                .replace("Family", " Family")
                .replace("  ", " ")
                + " vCPUs"
            )
            items.append(
                {
                    "unit": "Count",
                    "currentValue": used.get(name, 0),
                    "limit": self._limit(location, name),
                    "name": {"value": name, "localizedValue": localized},
                }
            )
        path = (
            f"/subscriptions/{p['subscriptionId']}/providers/Microsoft.Compute/locations/"
            f"{location}/usages"
        )
        return Reply(200, self.s.page(items, q, path))

    # --- capacity reservation groups and their reservations

    def _hold(self, r: Res) -> Hold:
        return (r.state["sku"], int(r.body["sku"]["capacity"]), r.state["group"], self._zones(r))

    @staticmethod
    def _zones(res: Res) -> tuple[str, ...]:
        return tuple(str(z) for z in res.body.get("zones") or ())

    def _vm_key(self, res: Res) -> VmKey:
        return (res.state["sku"], res.state["spot"], res.state.get("crg"), self._zones(res))

    def _reservations_of(self, group: Res) -> list[Res]:
        key = group.id.lower()
        return [r for r in self.s.of_type(RESERVATION) if r.state["group"] == key]

    def _reservations_for(self, group: str, sku: SkuSpec, zones: tuple[str, ...]) -> list[Res]:
        return [
            r
            for r in self.s.of_type(RESERVATION)
            if (r.state["group"], r.state["sku"].name, self._zones(r)) == (group, sku.name, zones)
        ]

    def _reservation_for(self, group: str, sku: SkuSpec, zones: tuple[str, ...]) -> Res | None:
        """The group's reservation a VM of this size in these zones counts against: a
        group holds one reservation per size and zone (a Block group one per window, the
        one whose window is open counting)."""
        found = self._reservations_for(group, sku, zones)
        open_now = [r for r in found if self._current_capacity(r) > 0]
        return next(iter(open_now or found), None)

    def _associated(self, group: Res, reservation: Res | None = None) -> list[Res]:
        """The VMs that name the group (those that count against the reservation when one
        is given), whatever their power state."""
        key = group.id.lower()
        found = [v for v in self.s.of_type(VM) if v.state.get("crg") == key]
        if reservation is not None:
            found = [
                v
                for v in found
                if self._reservation_for(key, v.state["sku"], self._zones(v)) is reservation
            ]
        return found

    def _held(self, reservation: Res) -> list[Res]:
        """The VMs allocated on a reservation: those associated with it that hold hardware
        (a deallocated or failed VM holds none). More than its quantity is overallocation,
        which Azure allows (learn.microsoft.com/azure/virtual-machines/
        capacity-reservation-overallocate)."""
        group = self.s.get(reservation.state["group"])
        if group is None:
            return []
        return [
            v
            for v in self._associated(group, reservation)
            if v.state["power"] != "deallocated" and v.props["provisioningState"] != "Failed"
        ]

    def _current_capacity(self, r: Res) -> int:
        """What is reserved now: nothing while the reservation is first provisioned, nor
        outside a Block reservation's window."""
        if r.props["provisioningState"] == "Creating":
            return 0
        schedule = r.props.get("scheduleProfile")
        if schedule:
            now = self.s.now()
            if not _when(schedule["start"]) <= now < _when(schedule["end"]):
                return 0
        return int(r.body["sku"]["capacity"])

    def _utilization(self, r: Res) -> dict[str, Any]:
        return {
            "currentCapacity": self._current_capacity(r),
            "virtualMachinesAllocated": [{"id": v.id} for v in self._held(r)],
        }

    def _reservation_statuses(self, r: Res) -> list[dict[str, Any]]:
        state = r.props["provisioningState"]
        display = "Provisioning succeeded" if state == "Succeeded" else state
        return [
            {
                "code": f"ProvisioningState/{state.lower()}",
                "level": "Info",
                "displayStatus": display,
                "time": r.props.get("provisioningTime") or r.props["timeCreated"],
            }
        ]

    def _group_answer(self, group: Res, *, view: bool = False, vms: bool = True) -> dict[str, Any]:
        body = copy.deepcopy(group.body)
        props = body["properties"]
        held = self._reservations_of(group)
        props["capacityReservations"] = [{"id": _shout(r.id)} for r in held]
        if vms:
            props["virtualMachinesAssociated"] = [{"id": v.id} for v in self._associated(group)]
        if view:
            props["instanceView"] = {
                "capacityReservations": [
                    {
                        "name": r.name,
                        "utilizationInfo": self._utilization(r),
                        "statuses": self._reservation_statuses(r),
                    }
                    for r in held
                ]
            }
        return body

    def _reservation_answer(self, r: Res, *, view: bool = False) -> dict[str, Any]:
        body = copy.deepcopy(r.body)
        group = self.s.get(r.state["group"])
        associated = self._associated(group, r) if group is not None else []
        body["properties"]["virtualMachinesAssociated"] = [{"id": v.id} for v in associated]
        if view:
            body["properties"]["instanceView"] = {
                "utilizationInfo": self._utilization(r),
                "statuses": self._reservation_statuses(r),
            }
        return body

    @staticmethod
    def _expand(q: dict[str, str], allowed: tuple[str, ...]) -> set[str]:
        wanted = {e.strip().lower() for e in q.get("$expand", "").split(",") if e.strip()}
        unknown = wanted - {a.lower() for a in allowed}
        if unknown:
            raise invalid(
                f"The value of parameter $expand is invalid: '{sorted(unknown)[0]}'. Allowed "
                f"values are: {', '.join(allowed)}.",
                "$expand",
            )  # approximated
        return wanted

    def _make_group(self, rg: str, name: str, body: dict[str, Any]) -> tuple[Res, bool]:
        """The group PUT makes (or updates): (it, whether it existed)."""
        location = self.s.check_location(body["location"], GROUP)
        rid = self.s.rid(rg, GROUP, name)
        zones = [str(z) for z in body.get("zones") or []]
        for zone in zones:
            if zone not in self.s.locations[location]:
                raise invalid(
                    f"The zone(s) '{zone}' for resource '{rid}' is not supported. The supported "
                    f"zones for location '{location}' are "
                    f"'{','.join(self.s.locations[location])}'",
                    "zones",
                )
        props = body.get("properties") or {}
        kind = str(props.get("reservationType") or "Targeted")
        if kind.lower() not in ("targeted", "block"):
            self.s.unserved.append(f"CapacityReservationGroups_CreateOrUpdate with {kind}")
            raise ArmError(
                501, "NotImplemented", "Only Targeted and Block groups are served by the stand-in"
            )
        existing = self.s.get(rid)
        if existing is not None:
            if location != existing.body["location"]:
                raise ArmError(
                    409,
                    "InvalidResourceLocation",
                    f"The resource '{name}' already exists in location "
                    f"'{existing.body['location']}' in resource group '{rg}'. A resource with "
                    f"the same name cannot be created in location '{location}'. Please select "
                    "a new resource name.",
                )
            for path, new, old in (
                ("zones", zones, list(self._zones(existing))),
                ("reservationType", kind.lower() == "block", existing.state["block"]),
            ):
                if new != old:
                    raise ArmError(
                        409,
                        "PropertyChangeNotAllowed",
                        f"Changing property '{path}' is not allowed.",
                        target=path,
                    )  # approximated
            if body.get("tags") is not None:
                existing.body["tags"] = dict(body["tags"])
            if props.get("sharingProfile") is not None:
                existing.props["sharingProfile"] = copy.deepcopy(props["sharingProfile"])
            return existing, True
        group = Res(
            rid,
            GROUP,
            rg,
            {"id": rid, "name": name, "type": GROUP, "location": location, "properties": {}},
            {"block": kind.lower() == "block"},
        )
        if zones:
            group.body["zones"] = zones
        if body.get("tags"):
            group.body["tags"] = dict(body["tags"])
        if props.get("reservationType"):
            group.props["reservationType"] = "Block" if group.state["block"] else "Targeted"
        if props.get("sharingProfile") is not None:
            group.props["sharingProfile"] = copy.deepcopy(props["sharingProfile"])
        self.s.put(group)
        self.s.event("created", rid, "put")
        return group, False

    def _make_reservation(self, group: Res, name: str, body: dict[str, Any]) -> tuple[Res, bool]:
        """The reservation PUT makes (or whose quantity it changes): (it, whether it
        existed). Checked as the REST reference's rules say: the group's location, a size of
        the region that capacity reservations take, one of the group's zones (none in a
        regional group), one reservation per size and zone in a group, the quota for the
        whole quantity, and a window for a Block group's reservations only."""
        location = self.s.check_location(body["location"], RESERVATION)
        if location != group.body["location"]:
            raise invalid(
                f"The location '{location}' of the capacity reservation does not match the "
                f"location '{group.body['location']}' of its capacity reservation group "
                f"'{group.name}'.",
                "location",
            )  # approximated
        sku_in = body.get("sku") or {}
        if not sku_in.get("name"):
            raise invalid("Required parameter 'sku.name' is missing (null).", "sku.name")
        quantity = sku_in.get("capacity")
        if quantity is None:
            raise invalid("Required parameter 'sku.capacity' is missing (null).", "sku.capacity")
        if quantity < 0:
            raise invalid("The value of parameter sku.capacity is invalid.", "sku.capacity")
        sku = self._sku(str(sku_in["name"]), location)
        if not sku.reservable:
            # Real text (Azure/azure-cli#18943); the status is approximated.
            raise ArmError(
                400,
                "NotSupported",
                f"Capacity Reservation is not supported for VM size {sku.name}.",
            )
        zones = tuple(str(z) for z in body.get("zones") or [])
        group_zones = self._zones(group)
        if (group_zones and (len(zones) != 1 or zones[0] not in group_zones)) or (
            not group_zones and zones
        ):
            raise invalid(
                f"The capacity reservation must be in one of the zones of its capacity "
                f"reservation group '{group.name}' ({', '.join(group_zones) or 'none'}).",
                "zones",
            )  # approximated
        rid = f"{group.id}/capacityReservations/{name}"
        if self._restricted(sku, location, list(zones)):
            raise ArmError(
                409,
                "SkuNotAvailable",
                f"The requested size for resource '{rid}' is currently not available in "
                f"location '{location}' zones '{','.join(zones)}' for subscription "
                f"'{self.s.subscription}'. Please try another size or deploy to a different "
                "location or zones. See https://aka.ms/azureskunotavailable for details.",
            )
        schedule = (body.get("properties") or {}).get("scheduleProfile")
        windowed = bool(schedule and schedule.get("start") and schedule.get("end"))
        if group.state["block"] and not windowed:
            raise invalid(
                "A capacity reservation in a capacity reservation group of reservationType "
                "Block requires scheduleProfile.start and scheduleProfile.end.",
                "scheduleProfile",
            )  # approximated
        if schedule and not group.state["block"]:
            raise invalid(
                "scheduleProfile is supported only for capacity reservations in a capacity "
                "reservation group of reservationType Block.",
                "scheduleProfile",
            )  # approximated
        existing = self.s.get(rid)
        twin = next(
            (
                r
                for r in self._reservations_for(group.id.lower(), sku, zones)
                if r is not existing and _overlap(r.props.get("scheduleProfile"), schedule)
            ),
            None,
        )
        if twin is not None:
            raise ArmError(
                409,
                "Conflict",
                f"The capacity reservation group '{group.name}' already has capacity "
                f"reservation '{twin.name}' for VM size '{sku.name}' in "
                f"{'zone ' + zones[0] if zones else 'the region'}.",
            )  # approximated
        if existing is not None:
            for path, new, old in (
                ("sku.name", sku.name, existing.state["sku"].name),
                ("zones", zones, self._zones(existing)),
            ):
                if new != old:
                    raise ArmError(
                        409,
                        "PropertyChangeNotAllowed",
                        f"Changing property '{path}' is not allowed.",
                        target=path,
                    )  # approximated
        hold = (sku, int(quantity), group.id.lower(), zones)
        self._check_quota(location, reservations={rid: hold})
        if existing is not None:
            existing.body["sku"]["capacity"] = int(quantity)
            existing.props["provisioningState"] = "Updating"
            if body.get("tags") is not None:
                existing.body["tags"] = dict(body["tags"])
            self.s.event("updated", rid, f"capacity {quantity}")
            return existing, True
        props: dict[str, Any] = {
            "reservationId": self.s.guid(),
            "platformFaultDomainCount": 3,
            "provisioningState": "Creating",
            "timeCreated": self.s.stamp(),
        }
        if schedule:
            props["scheduleProfile"] = {"start": schedule["start"], "end": schedule["end"]}
        res = Res(
            rid,
            RESERVATION,
            group.rg,
            {
                "id": rid,
                "name": name,
                "type": RESERVATION,
                "location": location,
                "sku": {"name": sku.name, "capacity": int(quantity)},
                "properties": props,
            },
            {"group": group.id.lower(), "sku": sku},
        )
        if zones:
            res.body["zones"] = list(zones)
        if body.get("tags"):
            res.body["tags"] = dict(body["tags"])
        self.s.put(res)
        self.s.event("created", rid, "put")
        return res, False

    def _provisioned(self, r: Res, when: float | None = None) -> None:
        r.props["provisioningState"] = "Succeeded"
        r.props["provisioningTime"] = self.s.stamp(when)

    def _group_put(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        rg = self.s.rg_name(p["resourceGroupName"])
        group, existed = self._make_group(rg, p["capacityReservationGroupName"], body)
        return Reply(200 if existed else 201, self._group_answer(group))

    def _group_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        wanted = self._expand(q, ("instanceView",))
        group = self.s.find(p["resourceGroupName"], GROUP, p["capacityReservationGroupName"])
        return Reply(200, self._group_answer(group, view="instanceview" in wanted))

    def _group_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        if "resourceGroupName" in p:
            self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
            groups = self.s.of_type(GROUP, p["resourceGroupName"])
        else:
            self.s.check_subscription(p["subscriptionId"])
            groups = self.s.of_type(GROUP)
        if "resourceIdsOnly" in q:
            self.s.unserved.append("CapacityReservationGroups_ListBySubscription resourceIdsOnly")
            raise ArmError(501, "NotImplemented", "resourceIdsOnly is not served by the stand-in")
        # Without $expand a list leaves the associated VMs out (the REST reference).
        wanted = self._expand(q, ("virtualMachines/$ref", "virtualMachineScaleSetVMs/$ref"))
        items = [self._group_answer(g, vms="virtualmachines/$ref" in wanted) for g in groups]
        path = f"/subscriptions/{p['subscriptionId']}/providers/{GROUP}"
        return Reply(200, self.s.page(items, q, path))

    def _group_delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        group = self.s.get(
            self.s.rid(p["resourceGroupName"], GROUP, p["capacityReservationGroupName"])
        )
        if group is None:
            return Reply(204)
        if self._reservations_of(group) or self._associated(group):
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Capacity reservation group '{group.name}' cannot be deleted while it holds "
                "capacity reservations or virtual machines are associated with it.",
            )  # approximated: Azure deletes a group only once its reservations are gone
        return self._delete_later(group, q, self.s.timing.reservation)

    def _reservation_put(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        group = self.s.find(p["resourceGroupName"], GROUP, p["capacityReservationGroupName"])
        res, existed = self._make_reservation(group, p["capacityReservationName"], body)
        op = self.s.new_op("compute", res.body["location"], q["api-version"], res.id)

        def done(when: float) -> None:
            if self.s.get(res.id) is res:
                self._provisioned(res, when)
            self.s.finish(op, when)

        self.s.at(self.s.now() + self.s.timing.reservation, done)
        return Reply(
            200 if existed else 201,
            self._reservation_answer(res),
            self.s.op_headers(op, location=False),
        )

    def _reservation_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        wanted = self._expand(q, ("instanceView",))
        group = self.s.find(p["resourceGroupName"], GROUP, p["capacityReservationGroupName"])
        res = self.s.get(f"{group.id}/capacityReservations/{p['capacityReservationName']}")
        if res is None:
            raise not_found(
                f"{GROUP}/{group.name}/capacityReservations",
                p["capacityReservationName"],
                group.rg,
            )
        return Reply(200, self._reservation_answer(res, view="instanceview" in wanted))

    def _reservation_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        self._expand(q, ("virtualMachines/$ref",))
        group = self.s.find(p["resourceGroupName"], GROUP, p["capacityReservationGroupName"])
        items = [self._reservation_answer(r) for r in self._reservations_of(group)]
        return Reply(200, self.s.page(items, q, f"{group.id}/capacityReservations"))

    def _reservation_delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        group = self.s.find(p["resourceGroupName"], GROUP, p["capacityReservationGroupName"])
        res = self.s.get(f"{group.id}/capacityReservations/{p['capacityReservationName']}")
        if res is None:
            return Reply(204)
        if self._associated(group, res):
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Capacity reservation '{res.name}' cannot be deleted while virtual machines "
                "are associated with it.",
            )  # approximated: Azure deletes a reservation only with no VM associated
        return self._delete_later(res, q, self.s.timing.reservation)

    # --- virtual machines in a capacity reservation group

    def _linked(self, action: str, scope: str, acting: str, on: str) -> None:
        """ARM's linked access check: the caller may write the VM, but may it also use
        the group it names?"""
        caller = self.s.caller
        if denied(self.s.deny, action) or (
            caller != TEST_PRINCIPAL and not self.s.authz.permits(caller, action, scope)
        ):
            raise ArmError(
                403,
                "LinkedAuthorizationFailed",
                f"The client '{caller}' with object id '{caller}' has permission to perform "
                f"action '{acting}' on scope '{on}'; however, it does not have permission to "
                f"perform action(s) '{action}' on the linked scope(s) '{scope}' (respectively) "
                "or the linked scope(s) are invalid.",
            )

    def _no_reservation(
        self, group: Res, sku: SkuSpec, location: str, zones: tuple[str, ...]
    ) -> ArmError:
        return invalid(
            f"The capacity reservation group '{group.id}' has no capacity reservation for VM "
            f"size '{sku.name}' in {'zone ' + zones[0] if zones else 'the region'} of "
            f"location '{location}'. Create a capacity reservation for that size and "
            "placement in the group, or remove the capacity reservation group from the VM.",
            "capacityReservation.capacityReservationGroup.id",
        )  # approximated

    def _target_group(
        self, ref: str, vm: str, sku: SkuSpec, location: str, zones: list[str], spot: bool
    ) -> Res:
        """The group a new VM names, refused as Azure refuses it: a group that is not
        there, one the caller may not deploy into, a Spot VM (capacity reservations take
        none), another location, no reservation for the VM's size and zone."""
        group = self.s.get(ref)
        if group is None or group.type != GROUP:
            raise ArmError(
                404,
                "NotFound",
                f"The Capacity Reservation Group '{ref}' cannot be found.",
                target="capacityReservation.capacityReservationGroup.id",
            )  # approximated, as Compute words "The Availability Set {0} cannot be found."
        self._linked(DEPLOY_TO_GROUP, group.id, f"{VM}/write", vm)
        if spot:
            raise invalid(
                "Capacity Reservation is not supported for Spot VMs.",
                "capacityReservation",
            )  # approximated: Spot VMs are documented as unsupported
        if group.body["location"] != location:
            raise invalid(
                f"The capacity reservation group '{group.id}' is in location "
                f"'{group.body['location']}', not in the VM's location '{location}'.",
                "capacityReservation.capacityReservationGroup.id",
            )  # approximated
        if self._reservation_for(group.id.lower(), sku, tuple(zones)) is None:
            raise self._no_reservation(group, sku, location, tuple(zones))
        return group

    def _block_fault(self, vm: Res) -> CreateFault | None:
        """A VM in a Block group gets hardware only from its reservation, within its window
        and quantity: past them the create fails as an allocation does (a targeted group
        overallocates instead). Approximated: the codes are Azure's allocation failures."""
        group = self.s.get(vm.state.get("crg") or "")
        if group is None or not group.state["block"]:
            return None
        sku, _, key, zones = self._vm_key(vm)
        reservation = self._reservation_for(key or "", sku, zones)
        if reservation is None:
            return None
        others = [v for v in self._held(reservation) if v is not vm]
        if len(others) < self._current_capacity(reservation):
            return None
        return CreateFault("ZonalAllocationFailed" if zones else "AllocationFailed")

    # --- marketplace images

    def _market_find(self, publisher: str, offer: str, sku: str) -> MarketImage | None:
        for image in self.market:
            if (image.publisher.lower(), image.offer.lower(), image.sku.lower()) == (
                publisher.lower(),
                offer.lower(),
                sku.lower(),
            ):
                return image
        return None

    def _platform_id(self, location: str, image: MarketImage, version: str) -> str:
        return (
            f"/Subscriptions/{self.s.subscription}/Providers/Microsoft.Compute/Locations/"
            f"{location}/Publishers/{image.publisher}/ArtifactTypes/VMImage/Offers/"
            f"{image.offer}/Skus/{image.sku}/Versions/{version}"
        )

    def _market_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        location = self.s.check_location(p["location"], VM)
        image = self._market_find(p["publisherName"], p["offer"], p["skus"])
        version = p["version"]
        if image is None or version not in image.versions:
            raise ArmError(
                404,
                "NotFound",
                "Artifact: VMImage was not found.",
                target="imageReference",
            )  # approximated
        return Reply(
            200,
            {
                "id": self._platform_id(location, image, version),
                "name": version,
                "location": location,
                "properties": {
                    "hyperVGeneration": image.generation,
                    "architecture": image.arch,
                    "osDiskImage": {"operatingSystem": "Linux"},
                    "dataDiskImages": [],
                    "automaticOSUpgradeProperties": {"automaticOSUpgradeSupported": False},
                    "disallowed": {"vmDiskType": "Unmanaged"},
                    "features": [
                        {"name": "IsAcceleratedNetworkSupported", "value": "True"},
                        {"name": "DiskControllerTypes", "value": "SCSI, NVMe"},
                    ],
                    "imageDeprecationStatus": {"imageState": "Active"},
                },
            },
        )

    def _resources(self, location: str, names: list[str], base: str) -> list[dict[str, Any]]:
        return [{"id": f"{base}/{n}", "name": n, "location": location} for n in names]

    def _market_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        location = self.s.check_location(p["location"], VM)
        image = self._market_find(p["publisherName"], p["offer"], p["skus"])
        versions = list(image.versions) if image else []
        if q.get("$orderby", "").lower().startswith("name desc"):
            versions.reverse()
        if "$top" in q:
            versions = versions[: int(q["$top"])]
        base = self._platform_id(location, image, "").rstrip("/") if image else ""
        return Reply(200, self._resources(location, versions, base))

    def _market_skus(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        location = self.s.check_location(p["location"], VM)
        names = [
            i.sku
            for i in self.market
            if (i.publisher.lower(), i.offer.lower())
            == (p["publisherName"].lower(), p["offer"].lower())
        ]
        base = (
            f"/Subscriptions/{self.s.subscription}/Providers/Microsoft.Compute/Locations/"
            f"{location}/Publishers/{p['publisherName']}/ArtifactTypes/VMImage/Offers/"
            f"{p['offer']}/Skus"
        )
        return Reply(200, self._resources(location, names, base))

    def _market_offers(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        location = self.s.check_location(p["location"], VM)
        names = sorted(
            {i.offer for i in self.market if i.publisher.lower() == p["publisherName"].lower()}
        )
        base = (
            f"/Subscriptions/{self.s.subscription}/Providers/Microsoft.Compute/Locations/"
            f"{location}/Publishers/{p['publisherName']}/ArtifactTypes/VMImage/Offers"
        )
        return Reply(200, self._resources(location, names, base))

    def _market_publishers(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_subscription(p["subscriptionId"])
        location = self.s.check_location(p["location"], VM)
        names = sorted({i.publisher for i in self.market})
        base = (
            f"/Subscriptions/{self.s.subscription}/Providers/Microsoft.Compute/Locations/"
            f"{location}/Publishers"
        )
        return Reply(200, self._resources(location, names, base))

    # --- generic reads and deletes

    def _get(self, type_: str, key: str) -> Any:
        def handler(p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
            self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
            return Reply(200, self.s.find(p["resourceGroupName"], type_, p[key]).body)

        return handler

    def _list(self, type_: str) -> Any:
        def handler(p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
            if "resourceGroupName" in p:
                self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
                items = self.s.of_type(type_, p["resourceGroupName"])
            else:
                self.s.check_subscription(p["subscriptionId"])
                items = self.s.of_type(type_)
            path = f"/subscriptions/{p['subscriptionId']}/providers/{type_}"
            return Reply(200, self.s.page([r.body for r in items], q, path))

        return handler

    def _simple_delete(self, type_: str, key: str) -> Any:
        def handler(p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
            self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
            res = self.s.get(self.s.rid(p["resourceGroupName"], type_, p[key]))
            if res is None:
                return Reply(204)
            return self._delete_later(res, q, self.s.timing.disk)

        return handler

    def _delete_later(self, res: Res, q: dict[str, str], after: float) -> Reply:
        op = self.s.new_op("compute", res.body["location"], q["api-version"], res.id)

        def done(when: float) -> None:
            if self.s.drop(res.id) is not None:
                self.s.event("deleted", res.id, "delete")
            self.s.finish(op, when)

        self.s.at(self.s.now() + after, done)
        return Reply(202, None, self.s.op_headers(op, location=True))

    def _disk_update(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        """A disk's tags (Disks - Update; a long-running operation may end in its first
        answer, 200 with the disk); other changes are not served."""
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.find(p["resourceGroupName"], DISK, p["diskName"])
        if set(body) - {"tags"}:
            self.s.unserved.append(f"Disks_Update of {sorted(set(body) - {'tags'})}")
            raise ArmError(501, "NotImplemented", "Only a disk's tags are updated by the stand-in")
        if body.get("tags") is not None:
            res.body["tags"] = dict(body["tags"])
        return Reply(200, res.body)

    def _disk_delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.get(self.s.rid(p["resourceGroupName"], DISK, p["diskName"]))
        if res is None:
            return Reply(204)
        if res.body.get("managedBy"):
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Disk {res.name} is attached to VM {res.body['managedBy']}.",
            )
        return self._delete_later(res, q, self.s.timing.disk)

    # --- virtual machines: create

    def _vm_put(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        rg = self.s.rg_name(p["resourceGroupName"])
        name = p["vmName"]
        rid = self.s.rid(rg, VM, name)
        existing = self.s.get(rid)
        if existing is not None:
            return self._vm_update(existing, body, q)
        if not _NAME.fullmatch(name):
            raise ArmError(
                400,
                "InvalidResourceName",
                f"Resource name {name} is invalid. The name can be up to 64 characters long. "
                "It can contain only letters, numbers, underscores, periods, and hyphens. It "
                "must start with a letter or number, and it must end with a letter, number, or "
                "underscore.",
            )  # approximated
        location = self.s.check_location(body["location"], VM)
        props = body.get("properties") or {}
        size = (props.get("hardwareProfile") or {}).get("vmSize")
        if not size:
            raise invalid(
                "Required parameter 'hardwareProfile.vmSize' is missing (null).", "vmSize"
            )
        sku = self._sku(size, location)
        zones = [str(z) for z in body.get("zones") or []]
        for zone in zones:
            if zone not in self.s.locations[location]:
                raise invalid(
                    f"The zone(s) '{zone}' for resource '{rid}' is not supported. The supported "
                    f"zones for location '{location}' are "
                    f"'{','.join(self.s.locations[location])}'",
                    "zones",
                )
        if self._restricted(sku, location, zones):
            raise ArmError(
                409,
                "SkuNotAvailable",
                f"The requested size for resource '{rid}' is currently not available in "
                f"location '{location}' zones '{','.join(zones)}' for subscription "
                f"'{self.s.subscription}'. Please try another size or deploy to a different "
                "location or zones. See https://aka.ms/azureskunotavailable for details.",
            )
        storage = props.get("storageProfile") or {}
        image, image_out, generation, arch, generalized = self._image_for(
            storage.get("imageReference"), location
        )
        if generation not in sku.generations:
            raise ArmError(
                400,
                "BadRequest",
                f"The selected VM size '{sku.name}' cannot boot Hypervisor Generation "
                f"'{generation[1:]}'. If this was a Create operation please check that the "
                "Hypervisor Generation of the Image matches the Hypervisor Generation of the "
                "selected VM Size. If this was an Update operation please select a Hypervisor "
                f"Generation '{generation[1:]}' VM Size. For more information, see "
                "https://aka.ms/azuregen2vm",
            )
        if arch != sku.arch:
            raise ArmError(
                400,
                "BadRequest",
                f"The selected VM size '{sku.name}' cannot boot an image with CPU architecture "
                f"'{arch}'. Please select a VM size whose CPU architecture is '{arch}'.",
            )  # approximated
        os_profile = self._os_profile(props.get("osProfile"), generalized, name)
        for key, where in (("userData", props), ("customData", props.get("osProfile") or {})):
            value = where.get(key)
            if value is not None and (not _b64(value) or len(value) > _CUSTOM_DATA_MAX):
                label = "Custom data in OSProfile" if key == "customData" else "User data"
                raise invalid(
                    f"{label} must be in Base64 encoding and with a maximum length of "
                    f"{_CUSTOM_DATA_MAX} characters.",
                    key,
                )
        spot = str(props.get("priority", "Regular")).lower() == "spot"
        if spot:
            self._check_spot(props, sku, location)
        elif props.get("evictionPolicy") or props.get("billingProfile"):
            raise invalid(
                "Eviction policy and max price can be set only for Spot or Low Priority VMs.",
                "evictionPolicy" if props.get("evictionPolicy") else "billingProfile",
            )  # approximated
        plan = self._network_plan(rg, rid, location, props.get("networkProfile") or {})
        wanted = (props.get("capacityReservation") or {}).get("capacityReservationGroup") or {}
        group = (
            self._target_group(wanted.get("id") or "", rid, sku, location, zones, spot)
            if wanted.get("id")
            else None
        )
        group_key = group.id.lower() if group is not None else None
        self._check_quota(location, add=(sku, spot, group_key, tuple(zones)))
        identity = body.get("identity") or {}
        # All checks passed: what the VM is made of comes into being now.
        vm_id = self.s.guid()
        res = Res(rid, VM, rg, {}, {})
        res.state.update(
            sku=sku,
            spot=spot,
            power="starting",
            busy="create",
            generalized=False,
            image=image,
            arch=arch,
            generation=generation,
            nics=[],
            inline_pips={},
            disks=[],
            customData=(props.get("osProfile") or {}).get("customData"),
            userData=props.get("userData"),
            crg=group_key,
        )
        vm_props: dict[str, Any] = {
            "vmId": vm_id,
            "hardwareProfile": {"vmSize": sku.name},
            "provisioningState": "Creating",
            "timeCreated": self.s.stamp(),
            "storageProfile": self._storage(res, rg, name, location, zones, storage, image_out),
            "networkProfile": self._attach_network(res, rg, location, plan, props),
        }
        if os_profile is not None:
            vm_props["osProfile"] = os_profile
        for key in (
            "diagnosticsProfile",
            "securityProfile",
            "additionalCapabilities",
            "licenseType",
            "capacityReservation",
        ):
            if props.get(key) is not None:
                vm_props[key] = copy.deepcopy(props[key])
        if spot:
            vm_props["priority"] = "Spot"
            vm_props["evictionPolicy"] = props.get("evictionPolicy") or "Deallocate"
            vm_props["billingProfile"] = {
                "maxPrice": (props.get("billingProfile") or {}).get("maxPrice", -1)
            }
        elif props.get("priority"):
            vm_props["priority"] = props["priority"]
        res.body.update(
            {
                "id": rid,
                "name": name,
                "type": VM,
                "location": location,
                "etag": '"1"',
                "properties": vm_props,
            }
        )
        if body.get("tags"):
            res.body["tags"] = dict(body["tags"])
        if zones:
            res.body["zones"] = zones
        if identity.get("type"):
            res.body["identity"] = self._identity(identity)
        self.s.put(res)
        self._blobs[vm_id] = (name, bytearray())
        self.s.event("created", rid, "put")
        op = self.s.new_op("compute", location, q["api-version"], rid)
        res.state["op"] = op
        fault = self._create_fault(sku, location, zones) or self._block_fault(res)
        self.s.at(
            self.s.now() + self.s.timing.vm_create, lambda when: self._created(res, op, fault, when)
        )
        return Reply(201, res.body, self.s.op_headers(op, location=False))

    def _created(self, res: Res, op: AsyncOp, fault: CreateFault | None, when: float) -> None:
        if self.s.get(res.id) is not res or res.state.get("busy") != "create":
            return
        res.state["busy"] = None
        if fault is not None:
            message = fault.message or CREATE_FAILURES.get(fault.code, fault.code)
            res.props["provisioningState"] = "Failed"
            res.state["power"] = "deallocated"
            res.state["failure"] = (fault.code, message)
            self.s.finish(op, when, error={"code": fault.code, "message": message})
            self.s.event("failed", res.id, fault.code)
            return
        res.props["provisioningState"] = "Succeeded"
        self._running(res, when, "create")
        self.s.finish(op, when)

    def _running(self, res: Res, when: float, why: str) -> None:
        res.state["power"] = "running"
        for nic_id, _ in res.state["nics"]:
            nic = self.s.get(nic_id)
            if nic is not None and "macAddress" not in nic.props:
                digest = hashlib.sha1(nic_id.encode()).hexdigest().upper()
                nic.props["macAddress"] = "00-0D-3A-" + "-".join(
                    digest[i : i + 2] for i in range(0, 6, 2)
                )
            for pip in self.s.network.public_ips_of(nic) if nic else []:
                if "ipAddress" not in pip.props:
                    pip.props["ipAddress"] = self.s.network.next_public_ip()
        self._boot_log(res)
        self.s.event("running", res.id, why)

    def _create_fault(self, sku: SkuSpec, location: str, zones: list[str]) -> CreateFault | None:
        for fault in self.create_faults:
            if fault.times == 0:
                continue
            if fault.size not in (None, sku.name) or fault.location not in (None, location):
                continue
            if fault.zone is not None and fault.zone not in zones:
                continue
            if fault.times is not None:
                fault.times -= 1
            return fault
        return None

    def _image_for(
        self, ref: dict[str, Any] | None, location: str
    ) -> tuple[Any, dict[str, Any], str, str, bool]:
        """(the image, the imageReference a GET shows, its Hyper-V generation, its CPU
        architecture, whether it is generalized)."""
        if not ref:
            self.s.unserved.append("VirtualMachines_CreateOrUpdate without an imageReference")
            raise ArmError(
                501,
                "NotImplemented",
                "A VM without an imageReference (an attached OS disk) is not served by the "
                "stand-in",
            )
        if ref.get("id"):
            image = self.s.get(ref["id"])
            if image is None or image.type != IMAGE:
                raise ArmError(
                    404,
                    "NotFound",
                    f"The Image '{ref['id']}' cannot be found in '{location}' region.",
                    target="imageReference",
                )  # approximated
            os_state = image.props["storageProfile"]["osDisk"].get("osState", "Generalized")
            return (
                image,
                {"id": image.id},
                image.props.get("hyperVGeneration", "V1"),
                image.state.get("arch", "x64"),
                os_state == "Generalized",
            )
        publisher, offer, sku = ref.get("publisher", ""), ref.get("offer", ""), ref.get("sku", "")
        version = ref.get("version") or "latest"
        market = self._market_find(publisher, offer, sku)
        exact = None
        if market is not None:
            exact = max(market.versions) if version.lower() == "latest" else version
            if exact not in market.versions:
                exact = None
        if market is None or exact is None:
            raise ArmError(
                404,
                "PlatformImageNotFound",
                f"The platform image '{publisher}:{offer}:{sku}:{version}' is not available. "
                "Verify that all fields in the storage profile are correct. For more details "
                "about storage profile information, please refer to https://aka.ms/storageprofile",
                target="imageReference",
            )
        out = {
            "publisher": market.publisher,
            "offer": market.offer,
            "sku": market.sku,
            "version": version,
            "exactVersion": exact,
        }
        return (market, exact), out, market.generation, market.arch, True

    def _os_profile(
        self, given: dict[str, Any] | None, generalized: bool, name: str
    ) -> dict[str, Any] | None:
        if not generalized:
            if given:
                raise invalid("Parameter 'osProfile' is not allowed.", "osProfile")
            return None
        if not given:
            raise invalid("Required parameter 'osProfile' is missing (null).", "osProfile")
        if not given.get("adminUsername"):
            raise invalid("Required parameter 'adminUsername' is missing (null).", "adminUsername")
        linux = given.get("linuxConfiguration") or {}
        keys = (linux.get("ssh") or {}).get("publicKeys") or []
        if linux.get("disablePasswordAuthentication") and not keys:
            raise invalid(
                "Required parameter 'publicKeys' is missing (null).",
                "linuxConfiguration.ssh.publicKeys",
            )
        if not linux.get("disablePasswordAuthentication") and not given.get("adminPassword"):
            raise invalid("Required parameter 'adminPassword' is missing (null).", "adminPassword")
        for i, key in enumerate(keys):
            if not str(key.get("keyData", "")).startswith(("ssh-rsa ", "ssh-ed25519 ", "ecdsa-")):
                raise invalid(
                    "The value of parameter linuxConfiguration.ssh.publicKeys.keyData is invalid.",
                    "linuxConfiguration.ssh.publicKeys.keyData",
                )
            if not str(key.get("path", "")).startswith("/home/"):
                raise invalid(
                    "The value of parameter linuxConfiguration.ssh.publicKeys.path is invalid.",
                    f"linuxConfiguration.ssh.publicKeys[{i}].path",
                )  # approximated
        out = {
            "computerName": given.get("computerName") or name,
            "adminUsername": given["adminUsername"],
            "linuxConfiguration": {
                "disablePasswordAuthentication": bool(linux.get("disablePasswordAuthentication")),
                "provisionVMAgent": linux.get("provisionVMAgent", True),
                "patchSettings": {"patchMode": "ImageDefault", "assessmentMode": "ImageDefault"},
                "enableVMAgentPlatformUpdates": True,
            },
            "secrets": [],
            "allowExtensionOperations": True,
            "requireGuestProvisionSignal": True,
        }
        if keys:
            out["linuxConfiguration"]["ssh"] = {
                "publicKeys": [{"path": k["path"], "keyData": k["keyData"]} for k in keys]
            }
        return out

    def _check_spot(self, props: dict[str, Any], sku: SkuSpec, location: str) -> None:
        policy = props.get("evictionPolicy") or "Deallocate"
        if policy.lower() not in ("deallocate", "delete"):
            raise invalid("The value of parameter evictionPolicy is invalid.", "evictionPolicy")
        max_price = (props.get("billingProfile") or {}).get("maxPrice", -1)
        price = self.spot_prices.get((location, sku.name.lower()), sku.vcpus * SPOT_PRICE_PER_VCPU)
        if max_price != -1 and (max_price <= 0 or max_price < price):
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Unable to perform operation 'Create VM' since the provided MaxPrice "
                f"'{max_price:g}' USD is lower than the current spot price '{price:g}' USD for "
                f"Azure Spot VM size '{sku.name}'.",
            )  # approximated

    def _identity(self, given: dict[str, Any]) -> dict[str, Any]:
        kind = given["type"]
        out: dict[str, Any] = {"type": kind}
        if "systemassigned" in kind.replace(" ", "").lower().split(","):
            out["principalId"] = self.s.guid()
            out["tenantId"] = self.s.tenant
            self.s.authz.add_principal(out["principalId"])
        if given.get("userAssignedIdentities"):
            out["userAssignedIdentities"] = {
                k: {"principalId": self.s.guid(), "clientId": self.s.guid()}
                for k in given["userAssignedIdentities"]
            }
        return out

    def _storage(
        self,
        res: Res,
        rg: str,
        name: str,
        location: str,
        zones: list[str],
        storage: dict[str, Any],
        image_out: dict[str, Any],
    ) -> dict[str, Any]:
        sku: SkuSpec = res.state["sku"]
        os_in = storage.get("osDisk") or {}
        account = (os_in.get("managedDisk") or {}).get("storageAccountType") or (
            "Premium_LRS" if sku.premium else "Standard_LRS"
        )
        os_name = os_in.get("name") or f"{name}_OsDisk_1_{self.s.guid().replace('-', '')}"
        size = int(os_in.get("diskSizeGB") or 30)
        image = res.state["image"]
        if isinstance(image, tuple):
            market, exact = image
            source: dict[str, Any] = {
                "createOption": "FromImage",
                "imageReference": {"id": self._platform_id(location, market, exact)},
            }
        else:
            source = {"createOption": "FromImage", "imageReference": {"id": image.id}}
        disk = self._new_disk(rg, os_name, location, zones, account, size, res, source, os=True)
        option = os_in.get("deleteOption") or "Detach"
        res.state["disks"].append((disk.id, option))
        out: dict[str, Any] = {
            "imageReference": image_out,
            "osDisk": {
                "osType": "Linux",
                "name": os_name,
                "createOption": "FromImage",
                "caching": os_in.get("caching", "ReadWrite"),
                "managedDisk": {"storageAccountType": account, "id": disk.id},
                "deleteOption": option,
                "diskSizeGB": size,
            },
            "dataDisks": [],
            "diskControllerType": "SCSI",
        }
        for data in storage.get("dataDisks") or []:
            if str(data.get("createOption", "")).lower() != "empty":
                self.s.unserved.append("VirtualMachines_CreateOrUpdate with an attached data disk")
                raise ArmError(
                    501, "NotImplemented", "Only Empty data disks are served by the stand-in"
                )
            lun = int(data["lun"])
            data_name = data.get("name") or f"{name}_DataDisk_{lun}"
            data_account = (data.get("managedDisk") or {}).get("storageAccountType") or account
            data_disk = self._new_disk(
                rg,
                data_name,
                location,
                zones,
                data_account,
                int(data.get("diskSizeGB") or 0),
                res,
                {"createOption": "Empty"},
                os=False,
            )
            data_option = data.get("deleteOption") or "Detach"
            res.state["disks"].append((data_disk.id, data_option))
            out["dataDisks"].append(
                {
                    "lun": lun,
                    "name": data_name,
                    "createOption": "Empty",
                    "caching": data.get("caching", "None"),
                    "managedDisk": {"storageAccountType": data_account, "id": data_disk.id},
                    "deleteOption": data_option,
                    "diskSizeGB": data_disk.props["diskSizeGB"],
                    "toBeDetached": False,
                }
            )
        return out

    def _new_disk(
        self,
        rg: str,
        name: str,
        location: str,
        zones: list[str],
        account: str,
        size: int,
        vm: Res,
        source: dict[str, Any],
        *,
        os: bool,
    ) -> Res:
        rid = self.s.rid(rg, DISK, name)
        if self.s.get(rid) is not None:
            raise ArmError(
                409,
                "Conflict",
                f"Disk {name} already exists in resource group {rg.upper()}. Only CreateOption."
                "Attach is supported.",
                target=f"/{'osDisk' if os else 'dataDisk'}/name",
            )
        props: dict[str, Any] = {
            "hyperVGeneration": vm.state["generation"],
            "supportedCapabilities": {"architecture": vm.state["arch"]},
            "creationData": source,
            "diskSizeGB": size,
            "diskIOPSReadWrite": 120,
            "diskMBpsReadWrite": 25,
            "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
            "networkAccessPolicy": "AllowAll",
            "publicNetworkAccess": "Enabled",
            "timeCreated": self.s.stamp(),
            "provisioningState": "Succeeded",
            "diskState": "Attached",
            "diskSizeBytes": size * 1024**3,
            "uniqueId": self.s.guid(),
            "tier": "P4" if account.startswith("Premium") else None,
        }
        if os:
            props["osType"] = "Linux"
        disk = Res(
            rid,
            DISK,
            rg,
            {
                "id": rid,
                "name": name,
                "type": DISK,
                "location": location,
                "managedBy": vm.id,
                "sku": {
                    "name": account,
                    "tier": "Premium" if account.startswith("Premium") else "Standard",
                },
                "properties": {k: v for k, v in props.items() if v is not None},
            },
            {"arch": vm.state["arch"]},
        )
        if zones:
            disk.body["zones"] = list(zones)
        self.s.put(disk)
        self.s.event("created", rid, "with VM")
        return disk

    def _network_plan(
        self, rg: str, vm_id: str, location: str, profile: dict[str, Any]
    ) -> list[tuple[str, Any, str]]:
        """Checked before anything is made: ("ref", NIC, deleteOption) for a NIC the VM
        names, ("config", its networkInterfaceConfiguration, deleteOption) for one it makes."""
        plan: list[tuple[str, Any, str]] = []
        for ref in profile.get("networkInterfaces") or []:
            nic = self.s.network.nic(ref.get("id", ""))
            if nic is None:
                raise ArmError(
                    404,
                    "NotFound",
                    f"Resource {ref.get('id')} not found.",
                )  # approximated
            if nic.body["location"] != location:
                raise invalid(
                    f"Network interface {nic.id} is in location '{nic.body['location']}' which "
                    f"is different from the location '{location}' of the VM.",
                    "networkProfile.networkInterfaces",
                )  # approximated
            user = nic.props.get("virtualMachine", {}).get("id")
            if user and user.lower() != vm_id.lower():
                raise ArmError(
                    400,
                    "NicInUse",
                    f"Network Interface {nic.id} is used by existing resource {user}. In order "
                    "to delete the network interface, it must be dissociated from the resource. "
                    "To learn more, see aka.ms/deletenic.",
                )
            option = (ref.get("properties") or {}).get("deleteOption") or "Detach"
            plan.append(("ref", nic, option))
        configs = profile.get("networkInterfaceConfigurations") or []
        if configs and not profile.get("networkApiVersion"):
            raise invalid(
                "networkApiVersion must be specified when networkInterfaceConfigurations are "
                "given.",
                "networkProfile.networkApiVersion",
            )  # approximated
        for config in configs:
            if self.s.get(self.s.rid(rg, NIC, config["name"])) is not None:
                raise ArmError(
                    409,
                    "Conflict",
                    f"The network interface {config['name']} already exists.",
                )  # approximated
            option = (config.get("properties") or {}).get("deleteOption") or "Detach"
            plan.append(("config", config, option))
        if not plan:
            raise invalid(
                "Required parameter 'networkProfile' is missing (null).", "networkProfile"
            )
        return plan

    def _attach_network(
        self,
        res: Res,
        rg: str,
        location: str,
        plan: list[tuple[str, Any, str]],
        props: dict[str, Any],
    ) -> dict[str, Any]:
        profile = props.get("networkProfile") or {}
        refs = []
        for i, (kind, item, option) in enumerate(plan):
            nic = item if kind == "ref" else self._inline_nic(res, rg, location, item)
            nic.props["virtualMachine"] = {"id": res.id}
            nic.props["primary"] = i == 0
            res.state["nics"].append((nic.id, option))
            entry: dict[str, Any] = {"id": nic.id, "properties": {"deleteOption": option}}
            if len(plan) > 1:
                entry["properties"]["primary"] = i == 0
            refs.append(entry)
        out: dict[str, Any] = {"networkInterfaces": refs}
        if profile.get("networkInterfaceConfigurations"):
            out["networkApiVersion"] = profile["networkApiVersion"]
            out["networkInterfaceConfigurations"] = copy.deepcopy(
                profile["networkInterfaceConfigurations"]
            )
        return out

    def _inline_nic(self, res: Res, rg: str, location: str, config: dict[str, Any]) -> Res:
        cprops = config.get("properties") or {}
        ip_configs = []
        for ipc in cprops.get("ipConfigurations") or []:
            ip_props = ipc.get("properties") or {}
            out_props: dict[str, Any] = {
                "subnet": ip_props.get("subnet"),
                "primary": ip_props.get("primary"),
            }
            pip_config = ip_props.get("publicIPAddressConfiguration")
            if pip_config:
                pip_props = pip_config.get("properties") or {}
                pip_body: dict[str, Any] = {
                    "location": location,
                    "properties": {
                        "publicIPAllocationMethod": pip_props.get("publicIPAllocationMethod"),
                    },
                }
                if pip_config.get("sku"):
                    pip_body["sku"] = pip_config["sku"]
                pip = self.s.network.build_pip(rg, pip_config["name"], location, pip_body)
                res.state["inline_pips"][pip.id.lower()] = pip_props.get("deleteOption") or "Detach"
                out_props["publicIPAddress"] = {"id": pip.id}
            ip_configs.append({"name": ipc["name"], "properties": out_props})
        body: dict[str, Any] = {
            "location": location,
            "properties": {
                "ipConfigurations": ip_configs,
                "enableAcceleratedNetworking": cprops.get("enableAcceleratedNetworking", False),
            },
        }
        if cprops.get("networkSecurityGroup"):
            body["properties"]["networkSecurityGroup"] = cprops["networkSecurityGroup"]
        return self.s.network.build_nic(rg, config["name"], location, body)

    # --- virtual machines: update

    def _vm_update(self, res: Res, body: dict[str, Any], q: dict[str, str]) -> Reply:
        op_now = res.state.get("op")
        if res.state.get("busy") == "create" and op_now is not None:
            # A create retried while it runs: the same VM and the same operation.
            return Reply(200, res.body, self.s.op_headers(op_now, location=False))
        if res.state.get("busy") == "delete":
            raise self._marked_for_deletion(res, "update")
        location = body["location"].replace(" ", "").lower()
        if location != res.body["location"]:
            raise ArmError(
                409,
                "InvalidResourceLocation",
                f"The resource '{res.name}' already exists in location '{res.body['location']}' "
                f"in resource group '{res.rg}'. A resource with the same name cannot be created "
                f"in location '{location}'. Please select a new resource name.",
            )
        props = body.get("properties") or {}
        fixed = [
            ("zones", body.get("zones"), res.body.get("zones")),
            ("priority", props.get("priority"), res.props.get("priority")),
            (
                "storageProfile.imageReference",
                _plain_ref((props.get("storageProfile") or {}).get("imageReference")),
                _plain_ref(res.props["storageProfile"].get("imageReference")),
            ),
            (
                "osProfile.adminUsername",
                (props.get("osProfile") or {}).get("adminUsername"),
                res.props.get("osProfile", {}).get("adminUsername"),
            ),
            (
                "osProfile.computerName",
                (props.get("osProfile") or {}).get("computerName"),
                res.props.get("osProfile", {}).get("computerName"),
            ),
            (
                "osProfile.customData",
                (props.get("osProfile") or {}).get("customData"),
                res.state.get("customData"),
            ),
            (  # approximated: Azure lets a deallocated VM change its group
                "capacityReservation.capacityReservationGroup.id",
                _group_ref(props, res.state.get("crg")),
                res.state.get("crg"),
            ),
        ]
        for path, new, old in fixed:
            if new is not None and new != old:
                raise ArmError(
                    409,
                    "PropertyChangeNotAllowed",
                    f"Changing property '{path}' is not allowed.",
                    target=path,
                )
        size = (props.get("hardwareProfile") or {}).get("vmSize")
        if size and size.lower() != res.state["sku"].name.lower():
            sku = self._sku(size, location)
            if self._restricted(sku, location, res.body.get("zones", [])):
                raise ArmError(
                    409,
                    "SkuNotAvailable",
                    f"The requested size for resource '{res.id}' is currently not available in "
                    f"location '{location}' zones '{','.join(res.body.get('zones', []))}' for "
                    f"subscription '{self.s.subscription}'. Please try another size or deploy to "
                    "a different location or zones. See https://aka.ms/azureskunotavailable for "
                    "details.",
                )
            zones = tuple(res.body.get("zones") or ())
            group = res.state.get("crg")
            if group and self._reservation_for(group, sku, zones) is None:
                raise self._no_reservation(self.s.get(group) or res, sku, location, zones)
            self._check_quota(location, drop=res, add=(sku, res.state["spot"], group, zones))
            res.state["sku"] = sku
            res.props["hardwareProfile"]["vmSize"] = sku.name
        if body.get("tags") is not None:
            res.body["tags"] = dict(body["tags"])
        if props.get("userData") is not None:
            res.state["userData"] = props["userData"]
        res.state["generation_count"] = res.state.get("generation_count", 1) + 1
        res.body["etag"] = f'"{res.state["generation_count"]}"'
        previous = res.props["provisioningState"]
        res.props["provisioningState"] = "Updating"
        op = self.s.new_op("compute", location, q["api-version"], res.id)

        def done(when: float) -> None:
            if self.s.get(res.id) is res and res.props["provisioningState"] == "Updating":
                res.props["provisioningState"] = "Succeeded" if previous != "Failed" else previous
            self.s.finish(op, when)

        self.s.at(self.s.now() + self.s.timing.vm_start, done)
        return Reply(200, res.body, self.s.op_headers(op, location=False))

    # --- virtual machines: reads

    def _power_display(self, power: str) -> str:
        return f"VM {power}"

    def instance_view(self, res: Res) -> dict[str, Any]:
        state = res.props["provisioningState"]
        statuses: list[dict[str, Any]] = []
        failure = res.state.get("failure")
        if state == "Failed" and failure:
            statuses.append(
                {
                    "code": f"ProvisioningState/failed/{failure[0]}",
                    "level": "Error",
                    "displayStatus": "Provisioning failed",
                    "message": failure[1],
                    "time": self.s.stamp(),
                }
            )
        else:
            display = {
                "Succeeded": "Provisioning succeeded",
                "Creating": "Creating",
                "Updating": "Updating",
                "Deleting": "Deleting",
            }.get(state, state)
            statuses.append(
                {
                    "code": f"ProvisioningState/{state.lower()}",
                    "level": "Info",
                    "displayStatus": display,
                    "time": self.s.stamp(),
                }
            )
        if res.state.get("generalized"):
            statuses.append(
                {"code": "OSState/generalized", "level": "Info", "displayStatus": "VM generalized"}
            )
        power = res.state["power"]
        statuses.append(
            {
                "code": f"PowerState/{power}",
                "level": "Info",
                "displayStatus": self._power_display(power),
            }
        )
        image = res.state["image"]
        market = image[0] if isinstance(image, tuple) else None
        view: dict[str, Any] = {
            "computerName": res.props.get("osProfile", {}).get("computerName", res.name),
            "osName": market.os_name if market else "linux",
            "osVersion": market.os_version if market else "",
            "hyperVGeneration": res.state["generation"],
            "disks": [
                {
                    "name": disk_id.rsplit("/", 1)[-1],
                    "statuses": [
                        {
                            "code": "ProvisioningState/succeeded",
                            "level": "Info",
                            "displayStatus": "Provisioning succeeded",
                            "time": res.props["timeCreated"],
                        }
                    ],
                }
                for disk_id, _ in res.state["disks"]
                if self.s.get(disk_id) is not None
            ],
            "statuses": statuses,
        }
        if power == "running":
            view["vmAgent"] = {
                "vmAgentVersion": "2.13.1.1",
                "statuses": [
                    {
                        "code": "ProvisioningState/succeeded",
                        "level": "Info",
                        "displayStatus": "Ready",
                        "message": "Guest Agent is running",
                        "time": self.s.stamp(),
                    }
                ],
            }
        return view

    def _answer(self, res: Res, expand: str = "") -> dict[str, Any]:
        body = copy.deepcopy(res.body)
        wanted = {e.strip().lower() for e in expand.split(",") if e.strip()}
        if "instanceview" in wanted:
            body["properties"]["instanceView"] = self.instance_view(res)
        if "userdata" in wanted and res.state.get("userData") is not None:
            body["properties"]["userData"] = res.state["userData"]
        return body

    def _vm_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.find(p["resourceGroupName"], VM, p["vmName"])
        return Reply(200, self._answer(res, q.get("$expand", "")))

    def _vm_instance_view(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        return Reply(200, self.instance_view(self.s.find(p["resourceGroupName"], VM, p["vmName"])))

    def _vm_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        if "resourceGroupName" in p:
            self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
            items = self.s.of_type(VM, p["resourceGroupName"])
        else:
            self.s.check_subscription(p["subscriptionId"])
            items = self.s.of_type(VM)
        if "location" in p:
            location = self.s.check_location(p["location"], VM)
            items = [r for r in items if r.body["location"] == location]
        expand = q.get("$expand", "")
        if q.get("statusOnly", "").lower() == "true":
            expand = "instanceView"
        path = f"/subscriptions/{p['subscriptionId']}/providers/{VM}"
        return Reply(200, self.s.page([self._answer(r, expand) for r in items], q, path))

    # --- virtual machines: power

    def _marked_for_deletion(self, res: Res, verb: str) -> ArmError:
        return ArmError(
            409,
            "OperationNotAllowed",
            f"Operation '{verb}' is not allowed on VM '{res.name}' since the VM is marked for "
            "deletion. You can only retry the Delete operation (or wait for an ongoing one to "
            "complete).",
        )

    def _power(self, verb: str, passing: str, final: str) -> Any:
        def handler(p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
            self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
            res = self.s.find(p["resourceGroupName"], VM, p["vmName"])
            busy = res.state.get("busy")
            if busy == "delete":
                raise self._marked_for_deletion(res, verb)
            if busy:
                raise ArmError(
                    409,
                    "OperationNotAllowed",
                    f"Operation '{verb}' is not allowed since the VM '{res.name}' is busy with "
                    f"the operation '{busy}'. Retry once it completes.",
                )  # approximated
            power = res.state["power"]
            nothing = (
                (verb == "start" and power == "running")
                or (verb == "powerOff" and power in ("stopped", "deallocated"))
                or (verb == "deallocate" and power == "deallocated")
            )
            if verb == "restart" and power != "running":
                raise ArmError(
                    409,
                    "OperationNotAllowed",
                    f"Operation 'restart' is not allowed on VM '{res.name}' since the VM is "
                    f"{power}.",
                )  # approximated
            op = self.s.new_op("compute", res.body["location"], q["api-version"], res.id)
            if nothing:
                self.s.finish(op, self.s.now())
                return Reply(202, None, self.s.op_headers(op, location=True))
            res.state["busy"] = verb
            res.state["power"] = passing
            after = {
                "powerOff": self.s.timing.vm_stop,
                "deallocate": self.s.timing.vm_deallocate,
            }.get(verb, self.s.timing.vm_start)

            def done(when: float) -> None:
                if self.s.get(res.id) is not res or res.state.get("busy") != verb:
                    return
                res.state["busy"] = None
                if final == "running":
                    self._running(res, when, verb)
                else:
                    res.state["power"] = final
                    if final == "deallocated":
                        self._release_dynamic_ips(res)
                    self.s.event(final, res.id, verb)
                self.s.finish(op, when)

            self.s.at(self.s.now() + after, done)
            return Reply(202, None, self.s.op_headers(op, location=True))

        return handler

    def _release_dynamic_ips(self, res: Res) -> None:
        for nic_id, _ in res.state["nics"]:
            nic = self.s.get(nic_id)
            for pip in self.s.network.public_ips_of(nic) if nic else []:
                if pip.props.get("publicIPAllocationMethod") == "Dynamic":
                    pip.props.pop("ipAddress", None)

    def _generalize(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.find(p["resourceGroupName"], VM, p["vmName"])
        if res.state["power"] not in ("stopped", "deallocated"):
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Operation 'generalize' is not allowed on VM '{res.name}' since the VM is "
                "running. Please power off explicitly in case you shut down the VM from inside "
                "the guest operating system.",
            )
        res.state["generalized"] = True
        return Reply(200, None)

    def _simulate_eviction(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.find(p["resourceGroupName"], VM, p["vmName"])
        if not res.state["spot"]:
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Simulate eviction is only supported for Spot VMs. VM '{res.name}' is not a "
                "Spot VM.",
            )  # approximated
        self.s.at(
            self.s.now() + self.s.timing.vm_stop,
            lambda when: self._evict(res, when, "simulated eviction"),
        )
        return Reply(204)

    def _evict(self, res: Res, when: float, why: str) -> None:
        if self.s.get(res.id) is not res:
            return
        policy = str(res.props.get("evictionPolicy", "Deallocate")).lower()
        self.s.event("evicted", res.id, why)
        if policy == "delete":
            self._remove_vm(res, why, all_disks=True)
        else:
            res.state["power"] = "deallocated"
            res.state["busy"] = None
            self._release_dynamic_ips(res)
            self.s.event("deallocated", res.id, why)

    # --- virtual machines: delete

    def _vm_delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.get(self.s.rid(p["resourceGroupName"], VM, p["vmName"]))
        if res is None:
            return Reply(204)
        if res.state.get("busy") == "delete":
            return Reply(202, None, self.s.op_headers(res.state["delete_op"], location=True))
        running = res.state.get("op")
        now = self.s.now()
        if res.state.get("busy") == "create" and running is not None:
            self.s.finish(
                running,
                now,
                error={
                    "code": "OperationPreempted",
                    "message": "Operation execution has been preempted by a more recent operation.",
                },
                canceled=True,
            )
        res.state["busy"] = "delete"
        res.props["provisioningState"] = "Deleting"
        if res.state["power"] == "running":
            res.state["power"] = "stopping"
        op = self.s.new_op("compute", res.body["location"], q["api-version"], res.id)
        res.state["delete_op"] = op

        def done(when: float) -> None:
            self._remove_vm(res, "delete")
            self.s.finish(op, when)

        self.s.at(now + self.s.timing.vm_delete, done)
        return Reply(202, None, self.s.op_headers(op, location=True))

    def _remove_vm(self, res: Res, why: str, *, all_disks: bool = False) -> None:
        """The VM is gone; each part as its deleteOption says (an evicted Spot VM with
        evictionPolicy Delete takes its disks along)."""
        if self.s.get(res.id) is not res:
            return
        self.s.drop(res.id)
        self.s.event("deleted", res.id, why)
        for disk_id, option in res.state["disks"]:
            disk = self.s.get(disk_id)
            if disk is None:
                continue
            if all_disks or option.lower() == "delete":
                self.s.drop(disk_id)
                self.s.event("deleted", disk_id, f"with VM ({why})")
            else:
                disk.body.pop("managedBy", None)
                disk.props["diskState"] = "Unattached"
                disk.props["LastOwnershipUpdateTime"] = self.s.stamp()
        for nic_id, option in res.state["nics"]:
            nic = self.s.get(nic_id)
            if nic is None:
                continue
            if option.lower() == "delete":
                pips = self.s.network.public_ips_of(nic)
                self.s.network.remove_nic(nic, f"with VM ({why})")
                for pip in pips:
                    if res.state["inline_pips"].get(pip.id.lower(), "").lower() == "delete":
                        self.s.network.remove_pip(pip, f"with VM ({why})")
            else:
                for key in ("virtualMachine", "primary", "macAddress"):
                    nic.props.pop(key, None)
        self._blobs.pop(res.props["vmId"], None)

    # --- boot diagnostics

    def _boot_log(self, res: Res) -> None:
        name, log = self._blobs[res.props["vmId"]]
        image = res.state["image"]
        market = image[0] if isinstance(image, tuple) else None
        title = f"{market.os_name.capitalize()} {market.os_version}" if market else "Linux"
        computer = res.props.get("osProfile", {}).get("computerName", name)
        lines = [
            "[    0.000000] Linux version 6.8.0-1017-azure (buildd@lcy02-amd64-066) "
            "(x86_64-linux-gnu-gcc-13) #20-Ubuntu SMP",
            "[    0.000000] Command line: BOOT_IMAGE=/vmlinuz-6.8.0-1017-azure "
            "root=PARTUUID=9d2f4e21-01 ro console=tty1 console=ttyS0 earlyprintk=ttyS0",
            f"[    6.210534] cloud-init[612]: Cloud-init v. 24.3.1 running 'init' at "
            f"{self.s.stamp()}.",
            f"{title} {computer} ttyS0",
            f"[   14.827211] cloud-init[931]: Cloud-init v. 24.3.1 finished at {self.s.stamp()}. "
            "Datasource DataSourceAzure [seed=/dev/sr0].",
        ]
        if res.state.get("customData") or res.state.get("userData"):
            lines.insert(3, "[    9.518470] cloud-init[873]: running 'modules:final'")
        log.extend(("\n".join(lines) + "\n").encode())

    def _boot_diagnostics(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.find(p["resourceGroupName"], VM, p["vmName"])
        boot = res.props.get("diagnosticsProfile", {}).get("bootDiagnostics", {})
        if not boot.get("enabled"):
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Boot diagnostics is not enabled for VM '{res.name}'. Enable boot diagnostics "
                "and retry.",
            )  # approximated
        minutes = int(q.get("sasUriExpirationTimeInMinutes", "120"))
        expiry = self.s.now() + minutes * 60
        vm_id = res.props["vmId"]
        urls = {}
        for key, suffix in (
            ("consoleScreenshotBlobUri", "screenshot.bmp"),
            ("serialConsoleLogBlobUri", "serialconsole.log"),
        ):
            container = f"bootdiagnostics-{res.name[:9].lower()}-{vm_id}"
            blob = f"{BLOB_PREFIX}{container}/{res.name}.{vm_id}.{suffix}"
            query = {
                "sv": "2018-03-28",
                "sr": "b",
                "sp": "r",
                "se": f"{expiry:.0f}",
                "sig": self._sign(blob, expiry),
            }
            urls[key] = f"{self.s.base}{blob}?{urlencode(query)}"
        return Reply(200, urls)

    def _sign(self, blob: str, expiry: float) -> str:
        digest = hashlib.sha256(f"{blob}|{expiry:.0f}|{self.s.subscription}".encode()).digest()
        return base64.b64encode(digest).decode()

    def blob(self, path: str, query: dict[str, str]) -> Reply:
        """A boot diagnostics blob behind its SAS URL (no bearer token: the signature is the
        authorisation), as Blob Storage answers: text, or its XML error."""
        expiry = query.get("se", "0")
        now = self.s.now()
        request_id = self.s.guid()
        if query.get("sig") != self._sign(path, float(expiry or 0)):
            return _storage_error(
                403,
                "AuthenticationFailed",
                "Server failed to authenticate the request. Make sure the value of "
                "Authorization header is formed correctly including the signature.",
                request_id,
                "Signature did not match.",
            )
        if float(expiry) < now:
            return _storage_error(
                403,
                "AuthenticationFailed",
                "Server failed to authenticate the request. Make sure the value of "
                "Authorization header is formed correctly including the signature.",
                request_id,
                f"Signed expiry time [{self.s.stamp(float(expiry))}] has to be after signed "
                f"start time [{self.s.stamp(now)}]",
            )
        vm_id = path.rsplit("/", 2)[-2].rsplit("-", 5)[-5:]
        found = self._blobs.get("-".join(vm_id))
        if found is None:
            return _storage_error(
                404, "BlobNotFound", "The specified blob does not exist.", request_id
            )
        if path.endswith(".serialconsole.log"):
            return Reply(200, bytes(found[1]), {"Content-Type": "text/plain"})
        return Reply(200, b"BM" + bytes(52), {"Content-Type": "image/bmp"})

    # --- snapshots and images

    def _source(self, rid: str, label: str) -> Res:
        found = self.s.get(rid)
        if found is None:
            parts = rid.split("/")
            if len(parts) >= 9:
                raise not_found(f"{parts[6]}/{parts[7]}", parts[8], parts[4])
            raise invalid(f"The value of parameter {label} is invalid.", label)
        return found

    def _snapshot_put(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        rg = self.s.rg_name(p["resourceGroupName"])
        name = p["snapshotName"]
        location = self.s.check_location(body["location"], SNAPSHOT)
        props = body.get("properties") or {}
        creation = props.get("creationData") or {}
        if str(creation.get("createOption", "")).lower() != "copy":
            self.s.unserved.append(
                f"Snapshots_CreateOrUpdate with createOption {creation.get('createOption')}"
            )
            raise ArmError(
                501, "NotImplemented", "Only createOption Copy is served by the stand-in"
            )
        disk = self._source(creation.get("sourceResourceId", ""), "sourceResourceId")
        rid = self.s.rid(rg, SNAPSHOT, name)
        existed = self.s.get(rid) is not None
        account = (body.get("sku") or {}).get("name", "Standard_LRS")
        snap = Res(
            rid,
            SNAPSHOT,
            rg,
            {
                "id": rid,
                "name": name,
                "type": SNAPSHOT,
                "location": location,
                "sku": {
                    "name": account,
                    "tier": "Premium" if account.startswith("Premium") else "Standard",
                },
                "properties": {
                    "hyperVGeneration": disk.props.get("hyperVGeneration", "V1"),
                    "supportedCapabilities": dict(disk.props.get("supportedCapabilities", {})),
                    "creationData": {
                        "createOption": "Copy",
                        "sourceResourceId": disk.id,
                        "sourceUniqueId": disk.props["uniqueId"],
                    },
                    "diskSizeGB": disk.props["diskSizeGB"],
                    "diskSizeBytes": disk.props["diskSizeBytes"],
                    "encryption": {"type": "EncryptionAtRestWithPlatformKey"},
                    "incremental": bool(props.get("incremental", False)),
                    "networkAccessPolicy": "AllowAll",
                    "publicNetworkAccess": "Enabled",
                    "timeCreated": self.s.stamp(),
                    "provisioningState": "Updating",
                    "uniqueId": self.s.guid(),
                },
            },
            {"arch": disk.state.get("arch", "x64")},
        )
        if disk.props.get("osType"):
            snap.props["osType"] = disk.props["osType"]
        if body.get("tags"):
            snap.body["tags"] = dict(body["tags"])
        self.s.put(snap)
        self.s.event("created", rid, "put")
        op = self.s.new_op("compute", location, q["api-version"], rid)

        def done(when: float) -> None:
            snap.props["provisioningState"] = "Succeeded"
            self.s.finish(op, when)

        self.s.at(self.s.now() + self.s.timing.snapshot, done)
        return Reply(200 if existed else 202, snap.body, self.s.op_headers(op, location=True))

    def _image_put(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        rg = self.s.rg_name(p["resourceGroupName"])
        name = p["imageName"]
        location = self.s.check_location(body["location"], IMAGE)
        props = body.get("properties") or {}
        rid = self.s.rid(rg, IMAGE, name)
        existed = self.s.get(rid) is not None
        generation = props.get("hyperVGeneration")
        source_vm = (props.get("sourceVirtualMachine") or {}).get("id")
        storage = props.get("storageProfile") or {}
        out_props: dict[str, Any] = {}
        if source_vm:
            vm = self._source(source_vm, "sourceVirtualMachine")
            self._image_arch(vm.state["arch"], "sourceVirtualMachine")
            if not vm.state.get("generalized"):
                raise ArmError(
                    409,
                    "OperationNotAllowed",
                    f"Capture operation cannot be completed because the VM '{vm.name}' is not "
                    "generalized.",
                )  # approximated
            os_disk_id = vm.props["storageProfile"]["osDisk"]["managedDisk"]["id"]
            disk = self.s.get(os_disk_id)
            size = disk.props["diskSizeGB"] if disk else 30
            generation = generation or vm.state["generation"]
            arch = vm.state["arch"]
            out_props["sourceVirtualMachine"] = {"id": vm.id}
            os_out: dict[str, Any] = {
                "osType": "Linux",
                "osState": "Generalized",
                "managedDisk": {"id": os_disk_id},
                "caching": "ReadWrite",
                "storageAccountType": "Premium_LRS",
                "diskSizeGB": size,
            }
        elif storage.get("osDisk"):
            os_in = storage["osDisk"]
            ref = (os_in.get("snapshot") or os_in.get("managedDisk") or {}).get("id")
            if not ref:
                self.s.unserved.append("Images_CreateOrUpdate from a blob URI")
                raise ArmError(
                    501,
                    "NotImplemented",
                    "Only images from a VM, a managed disk or a snapshot are served",
                )
            source = self._source(ref, "storageProfile.osDisk")
            kind = "snapshot" if source.type == SNAPSHOT else "managedDisk"
            self._image_arch(
                source.state.get("arch", "x64"), "snapshot" if kind == "snapshot" else "managedDisk"
            )
            arch = source.state.get("arch", "x64")
            generation = generation or "V1"  # the Images API's default, whatever the source
            os_out = {
                "osType": os_in.get("osType", "Linux"),
                "osState": os_in.get("osState", "Generalized"),
                kind: {"id": source.id},
                "caching": os_in.get("caching", "ReadWrite"),
                "storageAccountType": os_in.get("storageAccountType", "Standard_LRS"),
                "diskSizeGB": source.props["diskSizeGB"],
            }
        else:
            raise invalid(
                "Either sourceVirtualMachine or storageProfile must be specified.",
                "properties",
            )  # approximated
        out_props.update(
            {
                "storageProfile": {"osDisk": os_out, "dataDisks": [], "zoneResilient": False},
                "provisioningState": "Creating",
                "hyperVGeneration": generation,
            }
        )
        image = Res(
            rid,
            IMAGE,
            rg,
            {"id": rid, "name": name, "type": IMAGE, "location": location, "properties": out_props},
            {"arch": arch},
        )
        if body.get("tags"):
            image.body["tags"] = dict(body["tags"])
        self.s.put(image)
        self.s.event("created", rid, "put")
        op = self.s.new_op("compute", location, q["api-version"], rid)

        def done(when: float) -> None:
            image.props["provisioningState"] = "Succeeded"
            self.s.finish(op, when)

        self.s.at(self.s.now() + self.s.timing.image, done)
        return Reply(200 if existed else 201, image.body, self.s.op_headers(op, location=False))

    @staticmethod
    def _image_arch(arch: str, source: str) -> None:
        if arch.lower() == "arm64":
            raise ArmError(
                409,
                "OperationNotAllowed",
                f"Creating an image with {source} source that has CPU Architecture 'Arm64' is "
                "not supported. Please select a source resource with a supported CPU "
                "Architecture: 'x64'.",
            )


def _group_ref(props: dict[str, Any], unsaid: str | None) -> str | None:
    """The capacity reservation group a VM body names, lower-cased (`unsaid` when the body
    says nothing of it)."""
    profile = props.get("capacityReservation")
    if profile is None:
        return unsaid
    ref = (profile.get("capacityReservationGroup") or {}).get("id")
    return str(ref).lower() if ref else None


def _overlap(one: dict[str, str] | None, other: dict[str, str] | None) -> bool:
    """Whether two reservations' windows meet (no window: always)."""
    if not one or not other:
        return True
    return _when(one["start"]) < _when(other["end"]) and _when(other["start"]) < _when(one["end"])


def _when(text: str) -> float:
    """A scheduleProfile time (an ISO date or date-time; UTC unless it says otherwise)."""
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _shout(rid: str) -> str:
    """A reservation's id as a group's `capacityReservations` gives it: the group's and the
    reservation's names upper-cased (the REST reference's samples show it so)."""
    parts = rid.split("/")
    parts[8] = parts[8].upper()
    parts[10] = parts[10].upper()
    return "/".join(parts)


def _plain_ref(ref: dict[str, Any] | None) -> tuple[str, ...] | None:
    if not ref:
        return None
    if ref.get("id"):
        return (ref["id"].lower(),)
    return tuple(str(ref.get(k, "")).lower() for k in ("publisher", "offer", "sku", "version"))


def _storage_error(
    status: int, code: str, message: str, request_id: str, detail: str | None = None
) -> Reply:
    extra = f"<AuthenticationErrorDetail>{detail}</AuthenticationErrorDetail>" if detail else ""
    xml = (
        '<?xml version="1.0" encoding="utf-8"?><Error>'
        f"<Code>{code}</Code><Message>{message}\nRequestId:{request_id}\n</Message>{extra}</Error>"
    )
    return Reply(status, xml.encode(), {"Content-Type": "application/xml", "x-ms-error-code": code})
