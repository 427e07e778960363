"""The ARM stand-in behaves as Azure documents it and holds whoever calls it (and itself) to
the models of azure-mgmt-compute / -network / -authorization: lifecycles and asynchronous
operations, deleteOption cascades, quotas and SKUs, images and Hyper-V generations, Spot
evictions, managed identities and role assignments, ARM's error shapes and codes, the fault
knobs, and the contract checks."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.drivers.azure import contract
from tests.drivers.azure.compute import DISK, IMAGE, SKUS, VM
from tests.drivers.azure.network import NIC, PIP
from tests.drivers.azure.standin import (
    RESOURCE_GROUP,
    TOKEN,
    ArmStandin,
    Client,
    Reply,
    Timing,
    action_of,
    nic_body,
    vm_body,
)

RG = RESOURCE_GROUP
# States that last long on the stand-in's clock: a test moves it on with advance(), so what
# it sees does not depend on how fast this machine is.
SLOW = Timing(
    vm_create=50,
    vm_start=50,
    vm_stop=50,
    vm_deallocate=50,
    vm_delete=50,
    network=50,
    disk=50,
    snapshot=50,
    image=50,
)
VM_CONTRIBUTOR = "9980e02c-c2be-4d73-94e8-173b1dc7cf3c"


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def arm_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """ARM's error shape with this status and code; the error."""
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return dict(body["error"])


def subnet(azure_arm: ArmStandin) -> str:
    return azure_arm.network.add_subnet(RG, "shoal-vnet", "default")


def make_nic(arm: Client, azure_arm: ArmStandin, name: str, *, public_ip: str | None = None) -> str:
    path = arm.rg_path(NIC, name)
    arm.create(path, nic_body(subnet(azure_arm), public_ip=public_ip))
    return path


def make_pip(arm: Client, name: str) -> str:
    path = arm.rg_path(PIP, name)
    arm.create(
        path,
        {
            "location": "eastus",
            "sku": {"name": "Standard"},
            "properties": {"publicIPAllocationMethod": "Static"},
        },
    )
    return path


def make_vm(arm: Client, azure_arm: ArmStandin, name: str, **kw: Any) -> dict[str, Any]:
    nic = make_nic(arm, azure_arm, f"{name}-nic")
    return arm.create(arm.vm_path(name), vm_body([nic], **kw))


def statuses(vm: dict[str, Any]) -> list[str]:
    return [s["code"] for s in vm["properties"]["instanceView"]["statuses"]]


# --- the contract -------------------------------------------------------------------------


def test_every_served_operation_is_an_operation_of_the_sdks(azure_arm: ArmStandin) -> None:
    c = contract.load()
    assert set(azure_arm.handlers) <= set(c.by_id)
    put = c.by_id["VirtualMachines_CreateOrUpdate"]
    assert (put.http_method, put.kind) == ("PUT", "lro")
    assert put.api_version >= "2024-07-01"  # the installed SDK's own
    assert put.path == (
        "/subscriptions/{subscriptionId}/resourceGroups/{resourceGroupName}/providers/"
        "Microsoft.Compute/virtualMachines/{vmName}"
    )
    assert put.request is not None and put.request.__name__ == "VirtualMachine"
    assert c.by_id["VirtualMachines_Get"].query == {"$expand": "expand"}
    assert c.by_id["ResourceSkus_List"].api_version == "2021-07-01"
    assert c.by_id["NetworkInterfaces_Delete"].kind == "lro"
    assert c.by_id["VirtualMachines_List"].kind == "page"
    # ARM compares the fixed segments without case; the instanceView is not a VM.
    route = c.route(
        "GET",
        "/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualMachines/vm/instanceView",
    )
    assert route is not None and route.operation.id == "VirtualMachines_InstanceView"
    assert route.params == {"subscriptionId": "s", "resourceGroupName": "rg", "vmName": "vm"}
    scoped = c.route(
        "PUT",
        "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm/providers/Microsoft.Authorization/roleAssignments/a",
    )
    assert scoped is not None and scoped.operation.id == "RoleAssignments_Create"
    assert set(contract.sdk_versions()) == {
        "azure-mgmt-compute",
        "azure-mgmt-network",
        "azure-mgmt-authorization",
        "azure-mgmt-resource-subscriptions",
    }
    locations = c.by_id["Subscriptions_ListLocations"]
    assert (locations.path, locations.api_version, locations.kind) == (
        "/subscriptions/{subscriptionId}/locations",
        "2022-12-01",  # what providers/azure/fetch.py sends
        "page",
    )


def test_the_walk_knows_the_models() -> None:
    c = contract.load()
    model = c.model("compute", "VirtualMachine")
    good = vm_body(
        ["/n"], priority="spot", evictionPolicy="delete", billingProfile={"maxPrice": -1}
    )
    assert c.validate(good, model, request=True) == []  # enums compare without case
    bad = vm_body(["/n"])
    bad["properties"]["hardwareProfile"]["vmCores"] = 2
    bad["properties"]["storageProfile"]["osDisk"]["diskSizeGB"] = "30"
    bad["properties"]["networkProfile"]["networkInterfaces"][0]["properties"] = {
        "deleteOption": "Remove"
    }
    bad["properties"]["provisioningState"] = "Creating"
    bad["identity"] = {"type": "SystemAssigned", "principalId": "p"}
    bad["properties"]["storageProfile"]["osDisk"].pop("createOption")
    found = {str(v) for v in c.validate(bad, model, request=True)}
    assert found == {
        "VirtualMachine.properties.hardwareProfile: unknown property 'vmCores'",
        'VirtualMachine.properties.storageProfile.osDisk.diskSizeGB: expected an integer, got "30"',
        "VirtualMachine.properties.networkProfile.networkInterfaces[0].properties.deleteOption: "
        "'Remove' is not a value of DeleteOptions (Delete, Detach)",
        "VirtualMachine.properties.provisioningState: read-only: ARM ignores it in a request",
        "VirtualMachine.identity.principalId: read-only: ARM ignores it in a request",
        "VirtualMachine.properties.storageProfile.osDisk.createOption: required, missing",
    }
    # A size is not held to the SDK's frozen 2016 enum; read-only fields are fine in answers.
    assert (
        c.validate(
            {"location": "x", "properties": {"provisioningState": "Succeeded"}},
            model,
            request=False,
        )
        == []
    )
    # The msrest models (Authorization) flatten `properties.`; the walk sees through it.
    create = c.by_id["RoleAssignments_Create"].request
    assert create is not None
    found = {
        str(v)
        for v in c.validate(
            {"properties": {"principalId": "p", "scope": "/s", "x": 1}}, create, request=True
        )
    }
    assert found == {
        "RoleAssignmentCreateParameters.properties.scope: read-only: ARM ignores it in a request",
        "RoleAssignmentCreateParameters.properties: unknown property 'x'",
        "RoleAssignmentCreateParameters.properties.roleDefinitionId: required, missing",
    }


def test_a_body_the_model_refuses_is_arms_400_and_a_violation(
    azure_arm: ArmStandin, arm: Client
) -> None:
    body = vm_body(["/nic"])
    body["properties"]["hardwareProfile"]["vmCores"] = 2
    error = arm_error(arm.put(arm.vm_path("vm"), body), 400, "InvalidRequestContent")
    assert error["message"].startswith(
        "The request content was invalid and could not be deserialized: 'Could not find member "
        "'vmCores' on object of type 'HardwareProfile'. Path 'properties.hardwareProfile.vmCores', "
        "line 1, position "
    )
    # Network answers the same fault its own way.
    error = arm_error(
        arm.put(arm.rg_path(NIC, "nic"), {"location": "eastus", "properties": {"ipConfig": []}}),
        400,
        "InvalidRequestFormat",
    )
    assert error["message"] == "Cannot parse the request."
    assert error["details"][0]["code"] == "InvalidJson"
    assert (
        "Could not find member 'ipConfig' on object of type 'NetworkInterfacePropertiesFormat'"
        in error["details"][0]["message"]
    )
    no_location = vm_body(["/nic"])
    del no_location["location"]
    error = arm_error(arm.put(arm.vm_path("vm"), no_location), 400, "LocationRequired")
    assert error["message"] == "The location property is required for this definition."
    found = azure_arm.take_violations()
    assert (
        "request VirtualMachines_CreateOrUpdate: VirtualMachine.properties.hardwareProfile: "
        "unknown property 'vmCores'" in found
    )
    assert (
        "request VirtualMachines_CreateOrUpdate: VirtualMachine.location: required, missing"
        in found
    )
    assert azure_arm.resources(VM) == []


def test_a_read_only_field_in_a_request_is_ignored_as_arm_does_but_is_a_violation(
    azure_arm: ArmStandin, arm: Client
) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    body = vm_body([nic], provisioningState="Succeeded")
    ok(arm.put(arm.vm_path("vm"), body), 201)
    assert azure_arm.take_violations() == [
        "request VirtualMachines_CreateOrUpdate: VirtualMachine.properties.provisioningState: "
        "read-only: ARM ignores it in a request"
    ]


def test_the_stand_ins_own_answers_are_checked_too(
    azure_arm: ArmStandin, arm: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def sloppy(p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        return Reply(
            200,
            {
                "value": [
                    {
                        "unit": "Count",
                        "currentValue": "1",
                        "limit": 2,
                        "name": {"value": "cores"},
                        "extra": 1,
                    }
                ]
            },
        )

    monkeypatch.setitem(azure_arm.handlers, "Usage_List", sloppy)
    ok(arm.get(f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/locations/eastus/usages"))
    assert set(azure_arm.take_violations()) == {
        "response Usage_List: value[0].Usage: unknown property 'extra'",
        'response Usage_List: value[0].Usage.currentValue: expected an integer, got "1"',
    }


def test_api_versions_and_query_parameters(azure_arm: ArmStandin, arm: Client) -> None:
    path = arm.vm_path("vm")
    error = arm_error(arm.http.get(path), 400, "MissingApiVersionParameter")
    assert (
        error["message"]
        == "The api-version query parameter (?api-version=) is required for all requests."
    )
    error = arm_error(arm.get(path, api_version="2099-01-01"), 400, "NoRegisteredProviderFound")
    assert error["message"].startswith(
        "No registered resource provider found for location 'eastus' and API version "
        "'2099-01-01' for type 'virtualMachines'. The supported api-versions are '2023-07-01, "
    )
    # The versions the brief names are served beside the SDK's own.
    arm_error(arm.get(path, api_version="2024-07-01"), 404, "ResourceNotFound")
    arm_error(arm.get(arm.rg_path(NIC, "n"), api_version="2024-05-01"), 404, "ResourceNotFound")
    ok(arm.get(arm.vm_path(), pageSize="3"))
    assert azure_arm.take_violations() == [
        "request VirtualMachines_List: query parameter 'pageSize' is not one of the operation's "
        "($filter, $expand); ARM ignores it"
    ]


# --- virtual machines ----------------------------------------------------------------------


def test_create_is_asynchronous_creating_then_succeeded_and_running(
    azure_arm: ArmStandin, arm: Client
) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    azure_arm.timing = SLOW
    response = arm.put(arm.vm_path("vm-1"), vm_body([nic], tags={"shoal": "alloc-1"}))
    vm = ok(response, 201)
    assert vm["properties"]["provisioningState"] == "Creating"
    assert "Location" not in response.headers
    assert response.headers["Retry-After"] == "0"
    operation = response.headers["Azure-AsyncOperation"]
    assert (
        f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/locations/eastus/operations/"
        in operation
    )
    polled = ok(arm.http.get(operation))
    assert polled["status"] == "InProgress" and "endTime" not in polled and polled["name"]
    view = ok(arm.get(arm.vm_path("vm-1") + "/instanceView"))
    assert [s["code"] for s in view["statuses"]] == [
        "ProvisioningState/creating",
        "PowerState/starting",
    ]
    azure_arm.advance(50)
    polled = ok(arm.http.get(operation))
    assert polled["status"] == "Succeeded" and polled["endTime"] >= polled["startTime"]
    got = ok(arm.get(arm.vm_path("vm-1"), **{"$expand": "instanceView"}))
    assert got["properties"]["provisioningState"] == "Succeeded"
    assert statuses(got) == ["ProvisioningState/succeeded", "PowerState/running"]
    assert got["properties"]["instanceView"]["statuses"][1]["displayStatus"] == "VM running"
    assert (
        got["properties"]["storageProfile"]["imageReference"]["exactVersion"] == "24.04.202411030"
    )
    os_disk = got["properties"]["storageProfile"]["osDisk"]
    assert os_disk["deleteOption"] == "Detach"  # the API's default
    disk = azure_arm.resource(os_disk["managedDisk"]["id"]) or {}
    assert disk["properties"]["diskState"] == "Attached"
    nic_now = ok(arm.get(nic))
    assert nic_now["properties"]["virtualMachine"]["id"] == got["id"]
    assert nic_now["properties"]["macAddress"].startswith("00-0D-3A-")


def test_a_re_put_is_the_same_vm_and_fixed_properties_stay_fixed(
    azure_arm: ArmStandin, arm: Client
) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    azure_arm.timing = SLOW
    body = vm_body([nic])
    first = arm.put(arm.vm_path("vm"), body)
    created = ok(first, 201)
    # A retry while the create runs: the same VM and the create's own operation.
    again = arm.put(arm.vm_path("vm"), body)
    assert ok(again)["properties"]["vmId"] == created["properties"]["vmId"]
    assert (
        again.headers["Azure-AsyncOperation"].split("?")[0]
        == first.headers["Azure-AsyncOperation"].split("?")[0]
    )
    azure_arm.advance(50)
    resized = dict(body, tags={"k": "v"})
    resized["properties"] = dict(body["properties"], hardwareProfile={"vmSize": "Standard_D4s_v5"})
    updated = ok(arm.put(arm.vm_path("vm"), resized))
    assert updated["properties"]["vmId"] == created["properties"]["vmId"]
    assert updated["properties"]["provisioningState"] == "Updating"
    assert updated["properties"]["hardwareProfile"]["vmSize"] == "Standard_D4s_v5"
    assert updated["tags"] == {"k": "v"}
    changed = vm_body([nic])
    changed["properties"]["osProfile"]["adminUsername"] = "root2"
    error = arm_error(arm.put(arm.vm_path("vm"), changed), 409, "PropertyChangeNotAllowed")
    assert error == {
        "code": "PropertyChangeNotAllowed",
        "message": "Changing property 'osProfile.adminUsername' is not allowed.",
        "target": "osProfile.adminUsername",
    }
    error = arm_error(
        arm.put(arm.vm_path("vm"), vm_body([nic], location="westeurope")),
        409,
        "InvalidResourceLocation",
    )
    assert (
        "A resource with the same name cannot be created in location 'westeurope'"
        in error["message"]
    )


def test_delete_honours_each_parts_delete_option(azure_arm: ArmStandin, arm: Client) -> None:
    pip = make_pip(arm, "pip-a")
    nic = make_nic(arm, azure_arm, "nic-a", public_ip=pip)
    body = vm_body([nic], nic_delete="Delete", os_disk_delete="Detach")
    body["properties"]["storageProfile"]["dataDisks"] = [
        {"lun": 0, "createOption": "Empty", "diskSizeGB": 64, "deleteOption": "Delete"}
    ]
    vm = arm.create(arm.vm_path("vm-a"), body)
    os_disk = vm["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
    data_disk = vm["properties"]["storageProfile"]["dataDisks"][0]["managedDisk"]["id"]
    response = arm.delete(arm.vm_path("vm-a"))
    assert ok(response, 202) is None
    location = response.headers["Location"]
    assert "monitor=true" in location and "Azure-AsyncOperation" in response.headers
    assert arm.poll(response)["status"] == "Succeeded"
    assert arm.http.get(location).status_code == 200
    arm_error(arm.get(arm.vm_path("vm-a")), 404, "ResourceNotFound")
    arm_error(arm.get(nic), 404, "ResourceNotFound")  # deleteOption Delete
    arm_error(arm.get(data_disk), 404, "ResourceNotFound")
    listed = ok(arm.get(arm.rg_path(DISK)))["value"]
    assert [d["id"] for d in listed] == [os_disk]
    kept = ok(arm.get(os_disk))  # Detach: stays, billed
    assert kept["properties"]["diskState"] == "Unattached" and "managedBy" not in kept
    left = ok(arm.get(pip))  # a standalone public IP is not the VM's to delete
    assert "ipConfiguration" not in left["properties"]
    # A NIC and public IP the VM made itself go with it when they say Delete.
    made = vm_body([], nic_delete=None)
    made["properties"]["networkProfile"] = {
        "networkApiVersion": "2022-11-01",
        "networkInterfaceConfigurations": [
            {
                "name": "vm-b-nic",
                "properties": {
                    "primary": True,
                    "deleteOption": "Delete",
                    "ipConfigurations": [
                        {
                            "name": "ipconfig1",
                            "properties": {
                                "subnet": {"id": subnet(azure_arm)},
                                "publicIPAddressConfiguration": {
                                    "name": "vm-b-ip",
                                    "sku": {"name": "Standard"},
                                    "properties": {
                                        "deleteOption": "Delete",
                                        "publicIPAllocationMethod": "Static",
                                    },
                                },
                            },
                        }
                    ],
                },
            }
        ],
    }
    made["properties"]["storageProfile"]["osDisk"]["deleteOption"] = "Delete"
    vm_b = arm.create(arm.vm_path("vm-b"), made)
    assert ok(arm.get(arm.rg_path(PIP, "vm-b-ip")))["properties"]["ipAddress"]
    assert vm_b["properties"]["networkProfile"]["networkInterfaces"][0]["id"].endswith("/vm-b-nic")
    assert arm.act("DELETE", arm.vm_path("vm-b"))["status"] == "Succeeded"
    assert azure_arm.resources(NIC) == []
    assert [p["name"] for p in azure_arm.resources(PIP)] == ["pip-a"]
    assert [d["id"] for d in azure_arm.resources(DISK)] == [os_disk]
    # Deleting what is not there is 204, as ARM answers.
    assert arm.delete(arm.vm_path("vm-a")).status_code == 204


def test_a_nic_or_public_ip_in_use_cannot_be_deleted(azure_arm: ArmStandin, arm: Client) -> None:
    pip = make_pip(arm, "pip-1")
    nic = make_nic(arm, azure_arm, "nic-1", public_ip=pip)
    vm = arm.create(arm.vm_path("vm"), vm_body([nic]))
    vnet = f"{arm.rg_path('Microsoft.Network/virtualNetworks', 'shoal-vnet')}/subnets/default"
    on_subnet = ok(arm.get(vnet))["properties"]["ipConfigurations"]
    assert on_subnet == [{"id": f"{azure_arm.rid(RG, NIC, 'nic-1')}/ipConfigurations/ipconfig1"}]
    assert (
        ok(arm.get(nic))["properties"]["ipConfigurations"][0]["properties"]["privateIPAddress"]
        == "10.0.0.4"
    )
    error = arm_error(arm.delete(nic), 400, "NicInUse")
    assert error["message"] == (
        f"Network Interface {azure_arm.rid(RG, NIC, 'nic-1')} is used by existing resource "
        f"{vm['id']}. In order to delete the network interface, it must be dissociated from the "
        "resource. To learn more, see aka.ms/deletenic."
    )
    error = arm_error(arm.delete(pip), 400, "PublicIPAddressCannotBeDeleted")
    assert error["message"].startswith(
        f"Public IP address {azure_arm.rid(RG, PIP, 'pip-1')} can not be deleted since it is "
        f"still allocated to resource {azure_arm.rid(RG, NIC, 'nic-1')}/ipConfigurations/"
        "ipconfig1."
    )
    arm.act("DELETE", arm.vm_path("vm"))
    assert arm.act("DELETE", nic)["status"] == "Succeeded"
    assert arm.act("DELETE", pip)["status"] == "Succeeded"
    # A NIC on a subnet that does not exist is the network RP's reference error.
    error = arm_error(
        arm.put(arm.rg_path(NIC, "x"), nic_body(subnet(azure_arm) + "-gone")),
        400,
        "InvalidResourceReference",
    )
    assert "Please make sure that the referenced resource exists" in error["message"]


def test_power_off_deallocate_start_and_conflicts(azure_arm: ArmStandin, arm: Client) -> None:
    make_vm(arm, azure_arm, "vm")
    path = arm.vm_path("vm")
    assert arm.act("POST", path + "/powerOff")["status"] == "Succeeded"
    assert statuses(azure_arm.compute.vm(RG, "vm") or {})[-1] == "PowerState/stopped"
    assert arm.act("POST", path + "/deallocate")["status"] == "Succeeded"
    assert statuses(azure_arm.compute.vm(RG, "vm") or {})[-1] == "PowerState/deallocated"
    azure_arm.timing = SLOW
    started = arm.post(path + "/start")
    ok(started, 202)
    assert statuses(azure_arm.compute.vm(RG, "vm") or {})[-1] == "PowerState/starting"
    error = arm_error(arm.post(path + "/powerOff"), 409, "OperationNotAllowed")
    assert "busy with the operation 'start'" in error["message"]
    azure_arm.advance(50)
    assert statuses(azure_arm.compute.vm(RG, "vm") or {})[-1] == "PowerState/running"
    ok(arm.delete(path), 202)
    error = arm_error(arm.post(path + "/start"), 409, "OperationNotAllowed")
    assert error["message"] == (
        "Operation 'start' is not allowed on VM 'vm' since the VM is marked for deletion. You "
        "can only retry the Delete operation (or wait for an ongoing one to complete)."
    )
    assert arm.delete(path).status_code == 202  # retrying the delete is allowed
    azure_arm.advance(50)
    assert azure_arm.compute.vm(RG, "vm") is None


def test_a_guest_shutdown_stops_but_keeps_the_vm_allocated(
    azure_arm: ArmStandin, arm: Client
) -> None:
    make_vm(arm, azure_arm, "vm")
    azure_arm.compute.shutdown(RG, "vm")
    assert statuses(azure_arm.compute.vm(RG, "vm") or {})[-1] == "PowerState/stopped"
    assert azure_arm.compute.usage("eastus")["cores"] == 2  # still counted, still billed


def test_an_allocation_failure_surfaces_in_the_operation(
    azure_arm: ArmStandin, arm: Client
) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    azure_arm.compute.fail_create("ZonalAllocationFailed", zone="2")
    response = arm.put(arm.vm_path("vm"), vm_body([nic], zones=["2"]))
    ok(response, 201)
    done = arm.poll(response)
    assert done["status"] == "Failed"
    assert done["error"] == {
        "code": "ZonalAllocationFailed",
        "message": "Allocation failed. We do not have sufficient capacity for the requested VM "
        "size in this zone. Read more about improving likelihood of allocation success at "
        "http://aka.ms/allocation-guidance",
    }
    vm = azure_arm.compute.vm(RG, "vm") or {}
    assert vm["properties"]["provisioningState"] == "Failed"  # Azure leaves the VM, failed
    assert statuses(vm)[0] == "ProvisioningState/failed/ZonalAllocationFailed"
    arm.act("DELETE", arm.vm_path("vm"))
    azure_arm.compute.fail_create("AllocationFailed", size="Standard_D4s_v5", times=None)
    response = arm.put(arm.vm_path("vm2"), vm_body([nic], size="Standard_D4s_v5"))
    assert arm.poll(response)["error"]["code"] == "AllocationFailed"
    monitor = arm.http.get(arm.delete(arm.vm_path("vm2")).headers["Location"])
    assert monitor.status_code == 202 and monitor.headers["Location"]


def test_a_delete_during_the_create_cancels_it(azure_arm: ArmStandin, arm: Client) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    azure_arm.timing = SLOW
    created = arm.put(arm.vm_path("vm"), vm_body([nic]))
    ok(arm.delete(arm.vm_path("vm")), 202)
    polled = ok(arm.http.get(created.headers["Azure-AsyncOperation"]))
    assert polled["status"] == "Canceled"
    assert polled["error"]["code"] == "OperationPreempted"


# --- sizes, images, quotas -----------------------------------------------------------------


def test_resource_skus_list_by_location_with_capabilities_and_restrictions(arm: Client) -> None:
    skus = ok(
        arm.get(
            f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/skus",
            **{"$filter": "location eq 'westeurope'"},
        )
    )["value"]
    by_name = {s["name"]: s for s in skus}
    assert "Standard_NC24ads_A100_v4" not in by_name  # eastus only
    e4 = by_name["Standard_E4s_v5"]
    assert e4["locations"] == ["westeurope"] and e4["family"] == "standardESv5Family"
    assert e4["restrictions"] == [
        {
            "type": "Location",
            "values": ["westeurope"],
            "restrictionInfo": {"locations": ["westeurope"]},
            "reasonCode": "NotAvailableForSubscription",
        }
    ]
    caps = {c["name"]: c["value"] for c in by_name["Standard_D2ps_v5"]["capabilities"]}
    assert (
        caps["vCPUs"],
        caps["MemoryGB"],
        caps["CpuArchitectureType"],
        caps["HyperVGenerations"],
    ) == ("2", "8", "Arm64", "V2")
    assert by_name["Standard_D2s_v5"]["locationInfo"] == [
        {"location": "westeurope", "zones": ["1", "2", "3"], "zoneDetails": []}
    ]
    everywhere = ok(arm.get(f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/skus"))["value"]
    assert len(everywhere) == sum(len(k.locations) for k in SKUS)


def test_the_sku_table_agrees_with_shoals_own_tables() -> None:
    from providers.azure import quota_map, sizes

    table = sizes.table()
    for sku in SKUS:
        row = table.get(sku.name)
        assert row is not None, sku.name
        assert (row.vcpus, row.memory_gib) == (sku.vcpus, sku.memory_gb), sku.name
        assert row.gpu_count == sku.gpus, sku.name
        assert quota_map.family_key(quota_map.family_of(sku.name)[0]) == quota_map.family_key(
            sku.family
        )


def test_a_restricted_or_unknown_size_is_refused_at_create(
    azure_arm: ArmStandin, arm: Client
) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    rid = azure_arm.rid(RG, VM, "vm")
    error = arm_error(
        arm.put(arm.vm_path("vm"), vm_body([nic], size="Standard_NC4as_T4_v3", zones=["3"])),
        409,
        "SkuNotAvailable",
    )
    assert error["message"] == (
        f"The requested size for resource '{rid}' is currently not available in location "
        f"'eastus' zones '3' for subscription '{azure_arm.subscription}'. Please try another "
        "size or deploy to a different location or zones. See https://aka.ms/azureskunotavailable "
        "for details."
    )
    azure_arm.compute.restrict_sku("Standard_D2s_v5", "eastus")
    error = arm_error(arm.put(arm.vm_path("vm"), vm_body([nic])), 409, "SkuNotAvailable")
    assert "location 'eastus' zones ''" in error["message"]
    error = arm_error(
        arm.put(arm.vm_path("vm"), vm_body([nic], size="Standard_Q9_v9")), 400, "InvalidParameter"
    )
    assert error["target"] == "vmSize"
    assert error["message"].startswith(
        "The requested VM size Standard_Q9_v9 is not available in the current region."
    )


def test_the_image_must_boot_on_the_size(azure_arm: ArmStandin, arm: Client) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    error = arm_error(
        arm.put(arm.vm_path("vm"), vm_body([nic], size="Standard_A1_v2")), 400, "BadRequest"
    )
    assert error["message"] == (
        "The selected VM size 'Standard_A1_v2' cannot boot Hypervisor Generation '2'. If this was "
        "a Create operation please check that the Hypervisor Generation of the Image matches the "
        "Hypervisor Generation of the selected VM Size. If this was an Update operation please "
        "select a Hypervisor Generation '2' VM Size. For more information, see "
        "https://aka.ms/azuregen2vm"
    )
    error = arm_error(
        arm.put(arm.vm_path("vm"), vm_body([nic], size="Standard_D2ps_v5")), 400, "BadRequest"
    )
    assert "CPU architecture 'x64'" in error["message"]
    arm_error(
        arm.put(
            arm.vm_path("vm"),
            vm_body([nic], image=("Canonical", "ubuntu-24_04-lts", "server-gen3", "latest")),
        ),
        404,
        "PlatformImageNotFound",
    )
    gen1 = vm_body(
        [nic],
        size="Standard_A1_v2",
        image=("canonical", "UBUNTU-24_04-LTS", "server-gen1", "latest"),
    )
    assert arm.create(arm.vm_path("vm"), gen1)["properties"]["provisioningState"] == "Succeeded"
    arm.act("DELETE", arm.vm_path("vm"))
    arm64 = vm_body(
        [nic],
        size="Standard_D2ps_v5",
        image=("Canonical", "ubuntu-24_04-lts", "server-arm64", "24.04.202409120"),
    )
    vm = arm.create(arm.vm_path("vm"), arm64)
    assert vm["properties"]["storageProfile"]["imageReference"]["exactVersion"] == "24.04.202409120"
    image = ok(
        arm.get(
            f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/locations/eastus/publishers/Canonical/artifacttypes/vmimage/offers/ubuntu-24_04-lts/skus/server-arm64/versions/24.04.202409120"
        )
    )
    assert (image["properties"]["architecture"], image["properties"]["hyperVGeneration"]) == (
        "Arm64",
        "V2",
    )
    versions = ok(
        arm.get(
            f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/locations/eastus/publishers/Canonical/artifacttypes/vmimage/offers/ubuntu-24_04-lts/skus/server/versions"
        )
    )
    assert [v["name"] for v in versions] == [
        "24.04.202409120",
        "24.04.202410170",
        "24.04.202411030",
    ]


def test_quotas_are_live_and_enforced_with_azures_text(azure_arm: ArmStandin, arm: Client) -> None:
    azure_arm.compute.quotas["eastus"]["standardDSv5Family"] = 10
    azure_arm.compute.quotas["eastus"]["lowPriorityCores"] = 4
    make_vm(arm, azure_arm, "vm-1", size="Standard_D8s_v5")
    make_vm(
        arm, azure_arm, "vm-2", size="Standard_D2s_v5", priority="Spot", evictionPolicy="Delete"
    )
    usages = {
        u["name"]["value"]: u
        for u in ok(
            arm.get(f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/locations/eastus/usages")
        )["value"]
    }
    assert (
        usages["standardDSv5Family"]["currentValue"],
        usages["standardDSv5Family"]["limit"],
    ) == (8, 10)
    assert usages["standardDSv5Family"]["name"]["localizedValue"] == "Standard DSv5 Family vCPUs"
    assert usages["cores"]["currentValue"] == 8  # a Spot VM counts only as low-priority
    assert usages["lowPriorityCores"]["currentValue"] == 2
    assert usages["virtualMachines"]["currentValue"] == 2
    nic = make_nic(arm, azure_arm, "nic-3")
    error = arm_error(
        arm.put(arm.vm_path("vm-3"), vm_body([nic], size="Standard_D4s_v5")),
        409,
        "OperationNotAllowed",
    )
    assert error["message"].startswith(
        "Operation could not be completed as it results in exceeding approved standardDSv5Family "
        "Cores quota. Additional details - Deployment Model: Resource Manager, Location: eastus, "
        "Current Limit: 10, Current Usage: 8, Additional Required: 4, (Minimum) New Limit "
        "Required: 12. Setup Alerts when Quota reaches threshold."
    )
    error = arm_error(
        arm.put(arm.vm_path("vm-3"), vm_body([nic], size="Standard_D4s_v5", priority="Spot")),
        409,
        "OperationNotAllowed",
    )
    assert "exceeding approved Low Priority Cores quota" in error["message"]
    # A deallocated VM still counts, as Azure counts it.
    arm.act("POST", arm.vm_path("vm-1") + "/deallocate")
    assert azure_arm.compute.usage("eastus")["standardDSv5Family"] == 8
    arm.act("DELETE", arm.vm_path("vm-1"))
    assert azure_arm.compute.usage("eastus").get("standardDSv5Family", 0) == 0
    assert arm.create(arm.vm_path("vm-3"), vm_body([nic], size="Standard_D4s_v5"))


# --- spot ------------------------------------------------------------------------------------


def test_spot_eviction_deletes_or_deallocates_as_the_policy_says(
    azure_arm: ArmStandin, arm: Client
) -> None:
    make_vm(
        arm,
        azure_arm,
        "doomed",
        priority="Spot",
        evictionPolicy="Delete",
        billingProfile={"maxPrice": -1},
    )
    kept = make_vm(arm, azure_arm, "parked", priority="Spot")
    assert kept["properties"]["evictionPolicy"] == "Deallocate"
    assert kept["properties"]["billingProfile"] == {"maxPrice": -1}
    doomed_disk = (azure_arm.compute.vm(RG, "doomed") or {})["properties"]["storageProfile"][
        "osDisk"
    ]["managedDisk"]["id"]
    azure_arm.compute.evict(RG, "doomed")
    assert azure_arm.compute.vm(RG, "doomed") is None
    assert azure_arm.resource(doomed_disk) is None  # evictionPolicy Delete takes the disks
    assert ("evicted", azure_arm.rid(RG, VM, "doomed"), "evicted") in azure_arm.events
    assert arm.post(arm.vm_path("parked") + "/simulateEviction").status_code == 204
    azure_arm.advance(1)
    assert statuses(azure_arm.compute.vm(RG, "parked") or {})[-1] == "PowerState/deallocated"
    with pytest.raises(ValueError, match="not a Spot VM"):
        make_vm(arm, azure_arm, "regular")
        azure_arm.compute.evict(RG, "regular")


def test_spot_max_price(azure_arm: ArmStandin, arm: Client) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    error = arm_error(
        arm.put(
            arm.vm_path("cheap"),
            vm_body([nic], priority="Spot", billingProfile={"maxPrice": 0.001}),
        ),
        409,
        "OperationNotAllowed",
    )
    assert "is lower than the current spot price '0.008' USD" in error["message"]
    arm.create(
        arm.vm_path("capped"),
        vm_body([nic], priority="Spot", evictionPolicy="Delete", billingProfile={"maxPrice": 0.01}),
    )
    azure_arm.compute.set_spot_price("eastus", "Standard_D2s_v5", 0.02)
    assert azure_arm.compute.vm(RG, "capped") is None


# --- user data, identity, RBAC -------------------------------------------------------------


def test_user_data_and_custom_data(azure_arm: ArmStandin, arm: Client) -> None:
    nic = make_nic(arm, azure_arm, "nic-0")
    script = base64.b64encode(b"#!/bin/sh\necho hello\n").decode()
    body = vm_body([nic], userData=script)
    body["properties"]["osProfile"]["customData"] = script
    vm = arm.create(arm.vm_path("vm"), body)
    assert "userData" not in vm["properties"] and "customData" not in vm["properties"]["osProfile"]
    expanded = ok(arm.get(arm.vm_path("vm"), **{"$expand": "userData"}))
    assert expanded["properties"]["userData"] == script
    bad = vm_body([nic], userData="not base64!")
    error = arm_error(arm.put(arm.vm_path("vm2"), bad), 400, "InvalidParameter")
    assert error["target"] == "userData"
    bad = vm_body([nic])
    bad["properties"]["osProfile"]["customData"] = "*" * 10
    error = arm_error(arm.put(arm.vm_path("vm2"), bad), 400, "InvalidParameter")
    assert error == {
        "code": "InvalidParameter",
        "message": "Custom data in OSProfile must be in Base64 encoding and with a maximum "
        "length of 87380 characters.",
        "target": "customData",
    }


def test_a_vms_identity_may_delete_the_vm_only_once_a_role_says_so(
    azure_arm: ArmStandin, arm: Client
) -> None:
    vm = make_vm(arm, azure_arm, "vm", identity={"type": "SystemAssigned"})
    other = make_vm(arm, azure_arm, "other")
    principal = vm["identity"]["principalId"]
    assert vm["identity"]["tenantId"] == azure_arm.tenant
    as_vm = Client(azure_arm, azure_arm.authz.identity_token(RG, "vm"))
    try:
        error = arm_error(as_vm.delete(arm.vm_path("vm")), 403, "AuthorizationFailed")
        assert error["message"] == (
            f"The client '{principal}' with object id '{principal}' does not have authorization "
            f"to perform action 'Microsoft.Compute/virtualMachines/delete' over scope '{vm['id']}' "
            "or the scope is invalid. If access was recently granted, please refresh your "
            "credentials."
        )
        name = "3f1e0c2a-5b7d-4e9f-8a6c-0d2b4f6e8a1c"
        assignment = {
            "properties": {
                "roleDefinitionId": f"/subscriptions/{arm.sub}/providers/"
                f"Microsoft.Authorization/roleDefinitions/{VM_CONTRIBUTOR}",
                "principalId": principal,
                "principalType": "ServicePrincipal",
            }
        }
        path = f"{vm['id']}/providers/Microsoft.Authorization/roleAssignments/{name}"
        created = ok(arm.put(path, assignment), 201)
        assert created["properties"]["scope"] == vm["id"]
        arm_error(
            arm.put(path.replace(name, "not-a-guid"), assignment), 400, "InvalidRoleAssignmentId"
        )
        arm_error(
            arm.put(path.replace(name, "4f1e0c2a-5b7d-4e9f-8a6c-0d2b4f6e8a1c"), assignment),
            409,
            "RoleAssignmentExists",
        )
        stranger = {
            "properties": dict(
                assignment["properties"], principalId="11111111-2222-3333-4444-555555555555"
            )
        }
        arm_error(
            arm.put(path.replace(name, "5f1e0c2a-5b7d-4e9f-8a6c-0d2b4f6e8a1c"), stranger),
            400,
            "PrincipalNotFound",
        )
        listed = ok(
            arm.get(
                f"{vm['id']}/providers/Microsoft.Authorization/roleAssignments",
                **{"$filter": f"principalId eq '{principal}'"},
            )
        )
        assert [a["name"] for a in listed["value"]] == [name]
        # The identity may now delete its own VM, and nothing else.
        arm_error(as_vm.delete(other["id"]), 403, "AuthorizationFailed")
        assert as_vm.act("DELETE", arm.vm_path("vm"))["status"] == "Succeeded"
    finally:
        as_vm.close()
    assert azure_arm.compute.vm(RG, "vm") is None
    roles = ok(
        arm.get(
            f"/subscriptions/{arm.sub}/providers/Microsoft.Authorization/roleDefinitions",
            **{"$filter": "roleName eq 'Virtual Machine Contributor'"},
        )
    )
    assert [r["name"] for r in roles["value"]] == [VM_CONTRIBUTOR]


def test_action_of_names_arms_actions() -> None:
    vm = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm"
    assert action_of("PUT", vm) == ("Microsoft.Compute/virtualMachines/write", vm)
    assert action_of("POST", vm + "/powerOff") == (
        "Microsoft.Compute/virtualMachines/powerOff/action",
        vm,
    )
    assert action_of("GET", vm + "/instanceView") == (
        "Microsoft.Compute/virtualMachines/instanceView/read",
        vm,
    )
    assert action_of(
        "GET", "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines"
    ) == (
        "Microsoft.Compute/virtualMachines/read",
        "/subscriptions/s/resourceGroups/rg",
    )
    assert action_of("GET", "/subscriptions/s/providers/Microsoft.Compute/locations/eastus/usages")[
        0
    ] == ("Microsoft.Compute/locations/usages/read")


# --- errors, auth, faults ------------------------------------------------------------------


def test_authentication_and_authorization_errors(azure_arm: ArmStandin, arm: Client) -> None:
    anonymous = Client(azure_arm, token=None)
    wrong = Client(azure_arm, token="eyJ.not-the-token")
    try:
        response = anonymous.get(arm.vm_path())
        error = arm_error(response, 401, "AuthenticationFailed")
        assert error["message"] == "Authentication failed. The 'Authorization' header is missing."
        assert response.headers["WWW-Authenticate"].startswith(
            'Bearer authorization_uri="https://login.microsoftonline.com/'
        )
        error = arm_error(wrong.get(arm.vm_path()), 401, "InvalidAuthenticationToken")
        assert error["message"] == "The access token is invalid."
    finally:
        anonymous.close()
        wrong.close()
    azure_arm.deny = {"Microsoft.Compute/virtualMachines/write"}
    error = arm_error(arm.put(arm.vm_path("vm"), vm_body(["/n"])), 403, "AuthorizationFailed")
    assert "perform action 'Microsoft.Compute/virtualMachines/write' over scope" in error["message"]
    ok(arm.get(arm.vm_path()))  # reading is still allowed


def test_not_found_errors(azure_arm: ArmStandin, arm: Client) -> None:
    error = arm_error(arm.get(arm.vm_path("ghost")), 404, "ResourceNotFound")
    assert error["message"] == (
        "The Resource 'Microsoft.Compute/virtualMachines/ghost' under resource group 'shoal-rg' "
        "was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix"
    )
    error = arm_error(arm.get(arm.vm_path("vm", rg="nope")), 404, "ResourceGroupNotFound")
    assert error["message"] == "Resource group 'nope' could not be found."
    azure_arm.add_resource_group("other-rg", "westeurope")
    assert ok(arm.get(arm.vm_path(rg="other-rg"))) == {"value": []}
    assert (
        ok(arm.get(f"/subscriptions/{arm.sub}/resourcegroups/other-rg", api_version="2021-04-01"))[
            "location"
        ]
        == "westeurope"
    )
    error = arm_error(
        arm.put(arm.vm_path("vm"), vm_body(["/n"], location="mars")),
        400,
        "LocationNotAvailableForResourceType",
    )
    assert error["message"].startswith(
        "The provided location 'mars' is not available for resource type "
        "'Microsoft.Compute/virtualMachines'."
    )


def test_http_faults_throttling_and_dropped_answers(azure_arm: ArmStandin, arm: Client) -> None:
    azure_arm.fail_http(429, operation="VirtualMachines_List", retry_after=7)
    response = arm.get(arm.vm_path())
    error = arm_error(response, 429, "OperationNotAllowed")
    assert response.headers["Retry-After"] == "7"
    assert error["details"][0]["code"] == "TooManyRequests"
    azure_arm.fail_http(429, operation="NetworkInterfaces_List", retry_after=5)
    error = arm_error(arm.get(arm.rg_path(NIC)), 429, "SubscriptionRequestsThrottled")
    assert error["message"].startswith(
        f"Number of 'read' requests for subscription '{arm.sub}' actor "
    )
    azure_arm.fail_http(500)
    assert arm_error(arm.get(arm.vm_path()), 500, "InternalServerError")["message"].startswith(
        "Encountered internal server error. Diagnostic information: timestamp"
    )
    azure_arm.fail_http(0, operation="PublicIPAddresses_CreateOrUpdate", apply=True)
    with pytest.raises(httpx.HTTPError):
        arm.put(arm.rg_path(PIP, "lost"), {"location": "eastus"})
    assert azure_arm.resource(azure_arm.rid(RG, PIP, "lost")) is not None  # done, answer lost
    assert ok(arm.get(arm.vm_path())) == {"value": []}


# --- disks, snapshots, images --------------------------------------------------------------


def test_snapshots_and_images_follow_azures_rules(azure_arm: ArmStandin, arm: Client) -> None:
    vm = make_vm(arm, azure_arm, "vm")
    os_disk = vm["properties"]["storageProfile"]["osDisk"]["managedDisk"]["id"]
    error = arm_error(arm.delete(os_disk), 409, "OperationNotAllowed")
    assert error["message"] == f"Disk {os_disk.rsplit('/', 1)[-1]} is attached to VM {vm['id']}."
    snap = arm.create(
        arm.rg_path("Microsoft.Compute/snapshots", "snap"),
        {
            "location": "eastus",
            "properties": {"creationData": {"createOption": "Copy", "sourceResourceId": os_disk}},
        },
    )
    assert snap["properties"]["creationData"]["sourceResourceId"] == os_disk
    assert snap["properties"]["hyperVGeneration"] == "V2"
    from_vm = {"location": "eastus", "properties": {"sourceVirtualMachine": {"id": vm["id"]}}}
    error = arm_error(arm.post(arm.vm_path("vm") + "/generalize"), 409, "OperationNotAllowed")
    assert "since the VM is running. Please power off explicitly" in error["message"]
    arm_error(arm.put(arm.rg_path(IMAGE, "img"), from_vm), 409, "OperationNotAllowed")
    arm.act("POST", arm.vm_path("vm") + "/deallocate")
    ok(arm.post(arm.vm_path("vm") + "/generalize"))
    image = arm.create(arm.rg_path(IMAGE, "img"), from_vm)
    assert image["properties"]["hyperVGeneration"] == "V2"  # the VM's
    from_snapshot = arm.create(
        arm.rg_path(IMAGE, "img-snap"),
        {
            "location": "eastus",
            "properties": {
                "storageProfile": {
                    "osDisk": {
                        "osType": "Linux",
                        "osState": "Generalized",
                        "snapshot": {"id": snap["id"]},
                    }
                }
            },
        },
    )
    assert from_snapshot["properties"]["hyperVGeneration"] == "V1"  # the Images API's default
    # A VM from the custom image; a V1 image does not boot on a V2-only size.
    nic = make_nic(arm, azure_arm, "nic-2")
    assert arm.create(arm.vm_path("vm2"), vm_body([nic], image=image["id"]))["properties"][
        "storageProfile"
    ]["imageReference"] == {"id": image["id"]}
    arm.act("DELETE", arm.vm_path("vm2"))
    arm_error(
        arm.put(
            arm.vm_path("vm3"), vm_body([nic], size="Standard_D2s_v6", image=from_snapshot["id"])
        ),
        400,
        "BadRequest",
    )
    # Arm64 sources are refused with Azure's own words.
    arm64 = make_vm(
        arm,
        azure_arm,
        "arm",
        size="Standard_D2ps_v5",
        image=("Canonical", "ubuntu-24_04-lts", "server-arm64", "latest"),
    )
    error = arm_error(
        arm.put(
            arm.rg_path(IMAGE, "img-arm"),
            {"location": "eastus", "properties": {"sourceVirtualMachine": {"id": arm64["id"]}}},
        ),
        409,
        "OperationNotAllowed",
    )
    assert error["message"] == (
        "Creating an image with sourceVirtualMachine source that has CPU Architecture 'Arm64' is "
        "not supported. Please select a source resource with a supported CPU Architecture: 'x64'."
    )


# --- boot diagnostics, metadata, TLS, lists ------------------------------------------------


def test_boot_diagnostics_serve_the_serial_log_behind_a_sas_url(
    azure_arm: ArmStandin, arm: Client
) -> None:
    make_vm(arm, azure_arm, "vm")
    azure_arm.compute.console(RG, "vm", "shoal: lifetime armed\n")
    urls = ok(
        arm.post(
            arm.vm_path("vm") + "/retrieveBootDiagnosticsData", sasUriExpirationTimeInMinutes=5
        )
    )
    log = httpx.get(urls["serialConsoleLogBlobUri"])
    assert log.status_code == 200 and log.headers["content-type"] == "text/plain"
    assert "Cloud-init v. 24.3.1 finished" in log.text and log.text.endswith(
        "shoal: lifetime armed\n"
    )
    assert httpx.get(urls["consoleScreenshotBlobUri"]).content.startswith(b"BM")
    forged = httpx.get(urls["serialConsoleLogBlobUri"].replace("sig=", "sig=x"))
    assert forged.status_code == 403 and "<Code>AuthenticationFailed</Code>" in forged.text
    azure_arm.advance(6 * 60)
    expired = httpx.get(urls["serialConsoleLogBlobUri"])
    assert expired.status_code == 403 and "Signed expiry time" in expired.text
    body = vm_body([make_nic(arm, azure_arm, "nic-2")])
    del body["properties"]["diagnosticsProfile"]
    arm.create(arm.vm_path("quiet"), body)
    arm_error(
        arm.post(arm.vm_path("quiet") + "/retrieveBootDiagnosticsData"), 409, "OperationNotAllowed"
    )


def test_cloud_metadata_for_the_azure_cli(azure_arm: ArmStandin) -> None:
    clouds = httpx.get(
        f"{azure_arm.base}/metadata/endpoints", params={"api-version": "2022-09-01"}
    ).json()
    assert isinstance(clouds, list) and clouds[0]["resourceManager"] == azure_arm.base + "/"
    assert clouds[0]["authentication"]["audiences"][0] == azure_arm.base + "/"
    older = httpx.get(
        f"{azure_arm.base}/metadata/endpoints", params={"api-version": "2019-05-01"}
    ).json()
    assert older["name"] == clouds[0]["name"]


def test_tls_with_a_ca_bundle(azure_arm_tls: ArmStandin) -> None:
    assert azure_arm_tls.base.startswith("https://127.0.0.1:") and azure_arm_tls.ca_bundle
    client = Client(azure_arm_tls)
    try:
        assert ok(client.get(client.vm_path())) == {"value": []}
        metadata = client.http.get(
            "/metadata/endpoints", params={"api-version": "2022-09-01"}
        ).json()
        assert metadata[0]["resourceManager"].startswith("https://")
    finally:
        client.close()
    with pytest.raises(httpx.ConnectError):
        httpx.get(azure_arm_tls.base + "/metadata/endpoints")  # not trusted without the bundle


def test_lists_page_with_next_link_and_show_tags(azure_arm: ArmStandin, arm: Client) -> None:
    for i in range(3):
        make_vm(arm, azure_arm, f"vm-{i}", tags={"shoal-id": f"a{i}"})
    azure_arm.page_size = 2
    first = ok(arm.get(f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/virtualMachines"))
    assert [v["name"] for v in first["value"]] == ["vm-0", "vm-1"]
    second = ok(arm.http.get(first["nextLink"]))
    assert [v["tags"] for v in second["value"]] == [{"shoal-id": "a2"}] and "nextLink" not in second
    everything = ok(
        arm.get(
            f"/subscriptions/{arm.sub}/providers/Microsoft.Compute/virtualMachines",
            statusOnly="true",
            **{"$skiptoken": "2"},
        )
    )
    assert statuses(everything["value"][0])[-1] == "PowerState/running"


def test_the_test_token_constant_is_what_the_fixture_accepts(azure_arm: ArmStandin) -> None:
    assert azure_arm.tokens == {TOKEN}
