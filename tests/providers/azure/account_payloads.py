"""Azure account payloads as the documentation shows them, and a loopback Resource Manager
that serves them (subscription, locations, usages, capacity reservations).

Formats from:
- Usage - List (`value[]` of {currentValue, limit, name: {value, localizedValue}, unit},
  `nextLink`): https://learn.microsoft.com/rest/api/compute/usage/list; names and values as
  `az vm list-usage` prints them (`cores` "Total Regional vCPUs", `lowPriorityCores` "Total
  Regional Low-priority vCPUs", `standardDSv5Family` "Standard DSv5 Family vCPUs",
  `Standard NCASv3_T4 Family` with its spaces).
- Capacity reservation groups and reservations: the specification's examples,
  Azure/azure-rest-api-specs Microsoft.Compute/ComputeRP/stable/2023-09-01/examples/
  capacityReservationExamples (CapacityReservationGroup_ListBySubscription.json,
  CapacityReservationGroup_Get.json with `$expand=instanceView`,
  CapacityReservation_ListByReservationGroup.json); Block reservations' `reservationType`
  and `scheduleProfile` {start, end} from
  https://learn.microsoft.com/rest/api/compute/capacity-reservations/get (2025-04-01).
- Errors: ARM's CloudError `{"error": {"code", "message"}}`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any

from tests.providers.apiserver import ApiServer, Reply
from tests.providers.azure.payloads import LOCATIONS_PATH, SUBSCRIPTION, TOKEN, locations

SUB = f"/subscriptions/{SUBSCRIPTION}"
GROUPS_PATH = f"{SUB}/providers/Microsoft.Compute/capacityReservationGroups"
USAGES_VERSION = "2023-07-01"
RESERVATIONS_VERSION = "2025-04-01"
_TODAY = datetime.now(UTC).date()
# A Block reservation's window (dates, as scheduleProfile gives them): next month's week.
WEEK: tuple[date, date] = (_TODAY + timedelta(days=30), _TODAY + timedelta(days=37))


def usages_path(region: str) -> str:
    return f"{SUB}/providers/Microsoft.Compute/locations/{region}/usages"


def group_path(group: str, resource_group: str = "rg-gpu") -> str:
    return (
        f"{SUB}/resourceGroups/{resource_group}/providers/Microsoft.Compute/"
        f"capacityReservationGroups/{group}"
    )


def usage(value: str, localized: str, current: Any, limit: Any) -> dict[str, Any]:
    return {
        "currentValue": current,
        "limit": limit,
        "name": {"localizedValue": localized, "value": value},
        "unit": "Count",
    }


def eastus_usages() -> list[dict[str, Any]]:
    return [
        usage("availabilitySets", "Availability Sets", 0, 2500),
        usage("cores", "Total Regional vCPUs", 112, 350),
        usage("virtualMachines", "Virtual Machines", 4, 25000),
        usage("virtualMachineScaleSets", "Virtual Machine Scale Sets", 0, 2500),
        usage("lowPriorityCores", "Total Regional Low-priority vCPUs", 8, 100),
        usage("standardDSv5Family", "Standard DSv5 Family vCPUs", 8, 100),
        usage("StandardNCadsH100v5Family", "Standard NCadsH100v5 Family vCPUs", 40, 80),
        # More in use than the limit (a limit lowered under running VMs): kept as is.
        usage("StandardNCADSA100v4Family", "Standard NCADSA100v4 Family vCPUs", 48, 24),
        usage("Standard NCASv3_T4 Family", "Standard NCASv3_T4 Family vCPUs", 0, 24),
        usage("standardNDSH100v5Family", "Standard NDSH100v5 Family vCPUs", 0, 0),
        usage("dedicatedCores", "Dedicated vCPUs", 0, 3000),
        usage("standardQZv9Family", "Standard QZv9 Family vCPUs", 0, 10),
    ]


def westus_usages() -> list[dict[str, Any]]:
    return [
        usage("cores", "Total Regional vCPUs", 0, 10),
        usage("lowPriorityCores", "Total Regional Low-priority vCPUs", 0, 3),
        usage("standardDSv5Family", "Standard DSv5 Family vCPUs", 0, 10),
    ]


def group(
    name: str, location: str, *, resource_group: str = "rg-gpu", block: bool = False
) -> dict[str, Any]:
    """A ListBySubscription entry (location as the sample writes it: a display name)."""
    properties: dict[str, Any] = {
        "capacityReservations": [
            {"id": f"{group_path(name, resource_group)[1:]}/capacityReservations/x"}
        ],
        "virtualMachinesAssociated": [],
    }
    if block:
        properties["reservationType"] = "Block"
    return {
        "name": name,
        "id": group_path(name, resource_group),
        "type": "Microsoft.Compute/CapacityReservationGroups",
        "location": location,
        "properties": properties,
    }


def vm(index: int) -> dict[str, str]:
    return {
        "id": f"{SUB}/resourceGroups/rg-gpu/providers/Microsoft.Compute/virtualMachines/vm{index}"
    }


def group_view(name: str, utilization: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """A group read with `$expand=instanceView`: reservation -> (currentCapacity, VMs)."""
    return {
        "id": group_path(name),
        "name": name,
        "location": "eastus",
        "properties": {
            "capacityReservations": [],
            "instanceView": {
                "capacityReservations": [
                    {
                        "name": reservation,
                        "utilizationInfo": {
                            "currentCapacity": current,
                            "virtualMachinesAllocated": [vm(i) for i in range(allocated)],
                        },
                        "statuses": [
                            {
                                "code": "ProvisioningState/succeeded",
                                "level": "Info",
                                "displayStatus": "Provisioning succeeded",
                            }
                        ],
                    }
                    for reservation, (current, allocated) in utilization.items()
                ]
            },
        },
    }


def reservation(
    name: str,
    group_name: str,
    size: str,
    capacity: Any,
    *,
    zones: list[str] | None = None,
    associated: int = 0,
    schedule: dict[str, str] | None = None,
    created: str = "2021-06-27T01:02:38.3138469+00:00",
) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "platformFaultDomainCount": 3,
        "reservationId": "00000000-1111-2222-3333-444444444444",
        "provisioningTime": created,
        "timeCreated": created,
        "virtualMachinesAssociated": [vm(i) for i in range(associated)],
        "provisioningState": "Succeeded",
    }
    if schedule is not None:
        properties["scheduleProfile"] = schedule
    return {
        "name": name,
        "id": f"{group_path(group_name)}/capacityReservations/{name}",
        "type": "Microsoft.Compute/CapacityReservations",
        "location": "East US",
        "properties": properties,
        "tags": {"department": "HR"},
        "sku": {"name": size, "capacity": capacity},
        "zones": zones if zones is not None else ["1"],
    }


def cloud_error(status: int, code: str, message: str) -> Reply:
    return Reply.json({"error": {"code": code, "message": message}}, status)


@dataclass
class SubscriptionApi:
    """A subscription behind a bearer token. Lists are paged `page_size` entries at a time
    with absolute `nextLink`s (as ARM writes them: with api-version and a $skiptoken).
    Paths in `refused` answer 403 AuthorizationFailed quoting the token, as a hostile or
    careless server might."""

    base: str
    usages: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    groups: list[dict[str, Any]] = field(default_factory=list)
    views: dict[str, dict[str, Any]] = field(default_factory=dict)  # group path -> Get
    reservations: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    page_size: int = 3

    def serve(self, server: ApiServer) -> None:
        server.route(LOCATIONS_PATH, self.handler(LOCATIONS_PATH, locations(), "2022-12-01"))
        for region, items in self.usages.items():
            path = usages_path(region)
            server.route(path, self.handler(path, items, USAGES_VERSION))
        server.route(GROUPS_PATH, self.handler(GROUPS_PATH, self.groups, RESERVATIONS_VERSION))
        for path, payload in self.views.items():
            server.route(path, self.single(path, payload))
        for path, items in self.reservations.items():
            listed = f"{path}/capacityReservations"
            server.route(listed, self.handler(listed, items, RESERVATIONS_VERSION))

    def _refusal(self, path: str, headers: dict[str, str]) -> Reply | None:
        sent = headers.get("authorization", "")
        if sent != f"Bearer {TOKEN}":
            return cloud_error(401, "InvalidAuthenticationToken", f"The token {sent} is invalid")
        if path in self.refused:
            return cloud_error(
                403,
                "AuthorizationFailed",
                f"The client with token '{TOKEN}' does not have authorization to perform "
                f"action over scope '{path}'",
            )
        return None

    def handler(self, path: str, items: list[dict[str, Any]], version: str) -> Any:
        def handle(query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
            refused = self._refusal(path, headers)
            if refused is not None:
                return refused
            assert query.get("api-version") == [version], query
            start = int(query.get("$skiptoken", ["0"])[0])
            page: dict[str, Any] = {"value": items[start : start + self.page_size]}
            if start + self.page_size < len(items):
                page["nextLink"] = (
                    f"{self.base}{path}?api-version={version}&$skiptoken={start + self.page_size}"
                )
            return Reply.json(page)

        return handle

    def single(self, path: str, payload: dict[str, Any]) -> Any:
        def handle(query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
            refused = self._refusal(path, headers)
            if refused is not None:
                return refused
            assert query.get("api-version") == [RESERVATIONS_VERSION], query
            assert query.get("$expand") == ["instanceView"], query
            return Reply.json(payload)

        return handle


def standard(base: str) -> SubscriptionApi:
    """eastus and westus; capacity reservation groups in East US (one Block group for H100
    windows) and West US, and one in a region not asked."""
    gpu_group, block_group = group_path("crg-gpu"), group_path("crg-block")
    return SubscriptionApi(
        base=base,
        usages={"eastus": eastus_usages(), "westus": westus_usages()},
        groups=[
            group("crg-gpu", "East US"),
            group("crg-block", "eastus", block=True),
            group("crg-west", "West US", resource_group="rg-west"),
            group("crg-far", "Sweden Central"),
        ],
        views={
            gpu_group: group_view("crg-gpu", {"cr-a100": (4, 3), "cr-d4": (2, 0)}),
            # Before its window nothing is reserved yet: currentCapacity 0.
            block_group: group_view("crg-block", {"cr-h100-week": (0, 0)}),
            group_path("crg-west", "rg-west"): group_view("crg-west", {}),
        },
        reservations={
            gpu_group: [
                reservation("cr-a100", "crg-gpu", "Standard_NC24ads_A100_v4", 4, associated=3),
                # 3 asked, 2 reserved so far (currentCapacity): 2 count.
                reservation("cr-d4", "crg-gpu", "Standard_D4s_v5", 3, zones=[]),
                # Not in the instance view: its associated VMs stand in for allocated ones.
                reservation("cr-new", "crg-gpu", "Standard_D4s_v5", 5, associated=1),
            ],
            block_group: [
                reservation(
                    "cr-h100-week",
                    "crg-block",
                    "Standard_ND96isr_H100_v5",
                    2,
                    schedule={"start": WEEK[0].isoformat(), "end": WEEK[1].isoformat()},
                )
            ],
            group_path("crg-west", "rg-west"): [],
        },
    )
