"""Reading an Azure subscription's capacity payloads: usages as Quotas, capacity
reservation groups, their instance views and reservations as Reservations. Pure functions;
the requests are accounts.py's. Each page is checked whole against its model first
(providers/azure/payloads.py), so what is read here has its types.

Usage per VM size is not in these APIs: the family quotas' `currentValue` are the vCPUs in
use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from providers import gpus
from providers.accounts.model import Quota, Reservation
from providers.azure import parse, sizes
from providers.azure.quota_map import REGIONAL, SPOT, family_key, gpus_of_family

if TYPE_CHECKING:
    from providers.azure.payloads import (
        CapacityReservation,
        GroupItem,
        Usage,
        UtilizationInfo,
    )


@dataclass(frozen=True, slots=True)
class Group:
    """A capacity reservation group: its name, location (as `place` writes it), ARM path
    and whether it holds Block reservations (fixed windows)."""

    name: str
    location: str
    path: str
    block: bool


Utilization = tuple[float | None, int]  # (currentCapacity, VMs allocated)


def place(location: str) -> str:
    """A location as compared: `West US` and `westus` are one region."""
    return "".join(location.split()).lower()


# -- pages -----------------------------------------------------------------------------------


def usages_page(page: Any, where: str) -> tuple[list[Quota], str]:
    """A Usage - List page's quotas, and its nextLink ("" on the last)."""
    from providers.azure.payloads import USAGES

    read = USAGES.read(page, where)
    return [usage_quota(item) for item in read["value"]], read.get("nextLink") or ""


def groups_page(page: Any, where: str) -> tuple[list[Group], str]:
    from providers.azure.payloads import GROUPS

    read = GROUPS.read(page, where)
    return [read_group(item) for item in read["value"]], read.get("nextLink") or ""


def reservations_page(page: Any, where: str) -> tuple[list[CapacityReservation], str]:
    from providers.azure.payloads import RESERVATIONS

    read = RESERVATIONS.read(page, where)
    return read["value"], read.get("nextLink") or ""


def group_utilization(page: Any, where: str) -> dict[str, Utilization]:
    """Capacity reservation name (lower-cased) -> (currentCapacity, VMs allocated), from a
    group read with `$expand=instanceView`."""
    from providers.azure.payloads import GROUP_VIEW

    view = (GROUP_VIEW.read(page, where).get("properties") or {}).get("instanceView")
    if view is None:
        return {}
    found: dict[str, Utilization] = {}
    for entry in view["capacityReservations"]:
        name, info = entry.get("name"), entry.get("utilizationInfo")
        if name and info is not None:
            found[name.lower()] = _utilization(info)
    return found


# -- entries ---------------------------------------------------------------------------------


def usage_quota(item: Usage) -> Quota:
    """One Usage entry as a Quota: `cores` the regional vCPUs, `lowPriorityCores` the Spot
    vCPUs, a `...Family` entry a family's vCPUs (with the family's GPU models), anything
    else kept as ("quota", name) in group "other"."""
    code = item["name"]["value"]
    label = item["name"].get("localizedValue") or code
    limit, used = item["limit"], item["currentValue"]
    key = family_key(code)
    if key == family_key(REGIONAL):
        return Quota(code, label, "regional", "onDemand", ("cpu", "vcpu"), limit, used)
    if key == family_key(SPOT):
        return Quota(code, label, "regional", "spot", ("cpu", "vcpu"), limit, used)
    if key.endswith("family"):
        gpu_models = gpus_of_family(code)
        return Quota(code, label, code, "onDemand", ("cpu", "vcpu"), limit, used, gpus=gpu_models)
    return Quota(code, label, "other", "onDemand", ("quota", code), limit, used)


def read_group(item: GroupItem) -> Group:
    """A group of the subscription list (its id is a group's path, checked: it is asked)."""
    path = item["id"]
    name = item.get("name") or path.rsplit("/", 1)[-1]
    block = ((item.get("properties") or {}).get("reservationType") or "").lower() == "block"
    path = "/".join(quote(part, safe="()-._~") for part in path.split("/"))
    return Group(name, place(item.get("location") or ""), path, block)


def _utilization(info: UtilizationInfo) -> Utilization:
    return info.get("currentCapacity"), len(info.get("virtualMachinesAllocated") or [])


def read_reservation(
    item: CapacityReservation,
    group: Group,
    utilization: Mapping[str, Utilization],
    now: datetime,
) -> tuple[Reservation, str]:
    """One capacity reservation as a Reservation, and a note when its use is only
    estimated. `total` is what Azure has reserved (`currentCapacity`, else `sku.capacity`;
    for a window that starts after `now`, `sku.capacity`), `available` that less the VMs
    allocated on it."""
    name = item.get("name") or ""
    size = item["sku"].get("name") or ""
    capacity = item["sku"].get("capacity", 0.0)
    properties = item.get("properties") or {}
    info = (properties.get("instanceView") or {}).get("utilizationInfo")
    used = _utilization(info) if info is not None else utilization.get(name.lower())
    note = ""
    if used is None:
        associated = len(properties.get("virtualMachinesAssociated") or [])
        used = (None, associated)
        note = (
            f"capacity reservation {group.name}/{name}: no utilization in its instance view; "
            f"its {associated} associated VMs are counted as using it"
        )
    schedule = properties.get("scheduleProfile") or {}
    end = schedule.get("end")
    start = schedule.get("start") or properties.get("provisioningTime")
    start = start or properties.get("timeCreated")
    ahead = start is not None and start > now  # nothing reserved or allocated yet
    total = int(capacity if ahead or used[0] is None else used[0])
    allocated = 0 if ahead else used[1]
    zones = item.get("zones") or []
    vcpus, gpu, gpu_count = _shape(size)
    reservation = Reservation(
        id=f"{group.name}/{name}",
        kind="capacity-block" if group.block or end is not None else "capacity-reservation",
        instance_type=size,
        total=total,
        available=max(0, total - allocated),
        start=start,
        end=end,
        zone=zones[0] if zones else "",
        state=properties.get("provisioningState") or "",
        vcpus=vcpus,
        gpu=gpu,
        gpus=gpu_count,
    )
    return reservation, note


def _shape(size: str) -> tuple[float | None, str, int]:
    """(vCPUs, GPU model, GPU count) of a size: shoal's size table, else its name."""
    row = sizes.table().get(size)
    if row is not None:
        return row.vcpus, row.gpu, row.gpu_count
    shape = parse.shape_from_name(size)
    return shape.vcpus or None, gpus.model(shape.gpu) if shape.gpu else "", shape.gpu_count
