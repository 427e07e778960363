"""Microsoft.Authorization for the ARM stand-in: role definitions (a few built-in roles),
role assignments at any scope, and who may do what.

Why: the `azure` driver may give a VM's system-assigned identity the right to delete the VM,
so Azure itself ends the VM at its lifetime when shoal is not around. A test plays the VM:
`identity_token(rg, vm)` mints a bearer token for the VM's managed identity (what the VM
would get from its instance metadata service), and ARM lets that token do only what its
role assignments grant at or above the scope it acts on (403 AuthorizationFailed
otherwise). The test principal (`TOKEN`) is Owner of the subscription; `deny` refuses an
action to every caller.

Served: RoleAssignments_Create / Get / Delete / ListForScope / ListForSubscription /
ListForResourceGroup, RoleDefinitions_Get / List (api-version 2022-04-01). Errors as the
REST reference and real answers give them: InvalidRoleAssignmentId, RoleDefinitionDoesNotExist,
PrincipalNotFound, RoleAssignmentExists (409), AuthorizationFailed (403).
"""

from __future__ import annotations

import re
import secrets
from typing import TYPE_CHECKING, Any

from tests.drivers.azure.standin import ArmError, Reply, action_of, denied

if TYPE_CHECKING:
    from tests.drivers.azure.contract import Operation
    from tests.drivers.azure.standin import ArmStandin

_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# Built-in roles: their real ids and names; the permissions of Owner, Contributor and
# Reader are the real ones, Virtual Machine Contributor's the part of its list that touches
# what the stand-in serves.
ROLES: dict[str, tuple[str, str, list[str], list[str]]] = {
    "8e3af657-a8ff-443c-a75c-2fe8c4bcb635": (
        "Owner",
        "Grants full access to manage all resources, including the ability to assign roles "
        "in Azure RBAC.",
        ["*"],
        [],
    ),
    "b24988ac-6180-42a0-ab88-20f7382dd24c": (
        "Contributor",
        "Grants full access to manage all resources, but does not allow you to assign roles "
        "in Azure RBAC.",
        ["*"],
        [
            "Microsoft.Authorization/*/Delete",
            "Microsoft.Authorization/*/Write",
            "Microsoft.Authorization/elevateAccess/Action",
        ],
    ),
    "acdd72a7-3385-48ef-bd42-f606fba81ae7": (
        "Reader",
        "View all resources, but does not allow you to make any changes.",
        ["*/read"],
        [],
    ),
    "9980e02c-c2be-4d73-94e8-173b1dc7cf3c": (
        "Virtual Machine Contributor",
        "Create and manage virtual machines, manage disks, install and run software, reset "
        "password of the root user of the virtual machine using VM extensions, and manage "
        "local user accounts using VM extensions. This role does not grant you management "
        "access to the virtual network or storage account the virtual machines are "
        "connected to. This role does not allow you to assign roles in Azure RBAC.",
        [
            "Microsoft.Authorization/*/read",
            "Microsoft.Compute/availabilitySets/*",
            "Microsoft.Compute/capacityReservationGroups/read",
            "Microsoft.Compute/capacityReservationGroups/deploy/action",
            "Microsoft.Compute/capacityReservations/read",
            "Microsoft.Compute/capacityReservations/deploy/action",
            "Microsoft.Compute/locations/*",
            "Microsoft.Compute/virtualMachines/*",
            "Microsoft.Compute/virtualMachineScaleSets/*",
            "Microsoft.Compute/disks/write",
            "Microsoft.Compute/disks/read",
            "Microsoft.Compute/disks/delete",
            "Microsoft.Network/networkInterfaces/*",
            "Microsoft.Network/publicIPAddresses/join/action",
            "Microsoft.Network/publicIPAddresses/read",
            "Microsoft.Network/virtualNetworks/read",
            "Microsoft.Network/virtualNetworks/subnets/join/action",
            "Microsoft.Resources/subscriptions/resourceGroups/read",
        ],
        [],
    ),
}


class Authorization:
    def __init__(self, standin: ArmStandin) -> None:
        from tests.drivers.azure.standin import TEST_PRINCIPAL

        self.s = standin
        self.assignments: dict[str, dict[str, Any]] = {}  # lower id -> RoleAssignment
        self.principals: dict[str, str] = {TEST_PRINCIPAL: "User"}  # object id -> type
        self._tokens: dict[str, str] = {}  # bearer token -> object id
        standin.handlers.update(
            {
                "RoleAssignments_Create": self._create,
                "RoleAssignments_Get": self._get,
                "RoleAssignments_Delete": self._delete,
                "RoleAssignments_ListForScope": self._list_scope,
                "RoleAssignments_ListForSubscription": self._list_scope,
                "RoleAssignments_ListForResourceGroup": self._list_scope,
                "RoleAssignments_ListForResource": self._list_scope,
                "RoleDefinitions_Get": self._definition_get,
                "RoleDefinitions_List": self._definition_list,
            }
        )

    # --- knobs

    def identity_token(self, rg: str, vm: str) -> str:
        """A bearer token of the VM's system-assigned identity (what the VM gets from its
        instance metadata service): ARM allows it what the identity's role assignments
        grant."""
        with self.s.lock:
            res = self.s.find(rg, "Microsoft.Compute/virtualMachines", vm)
            principal = res.body.get("identity", {}).get("principalId")
            if not principal:
                raise ValueError(f"{rg}/{vm} has no system-assigned identity")
            token = f"eyJ0eXAiOiJKV1QifQ.mi-{secrets.token_hex(12)}"
            self._tokens[token] = str(principal)
            return token

    def add_principal(self, object_id: str, kind: str = "ServicePrincipal") -> None:
        with self.s.lock:
            self.principals[object_id] = kind

    def principal_of(self, token: str) -> str | None:
        return self._tokens.get(token)

    # --- who may do what

    def check(self, principal: str, op: Operation, http_method: str, path: str) -> None:
        from tests.drivers.azure.standin import TEST_PRINCIPAL

        action, scope = action_of(http_method, path)
        allowed = not denied(self.s.deny, action) and (
            principal == TEST_PRINCIPAL or self.permits(principal, action, scope)
        )
        if not allowed:
            raise ArmError(
                403,
                "AuthorizationFailed",
                f"The client '{principal}' with object id '{principal}' does not have "
                f"authorization to perform action '{action}' over scope '{scope}' or the scope "
                "is invalid. If access was recently granted, please refresh your credentials.",
            )

    def permits(self, principal: str, action: str, scope: str) -> bool:
        target = scope.lower().rstrip("/") + "/"
        for assignment in self.assignments.values():
            props = assignment["properties"]
            if props["principalId"] != principal:
                continue
            if not target.startswith(props["scope"].lower().rstrip("/") + "/"):
                continue
            role = ROLES.get(props["roleDefinitionId"].rsplit("/", 1)[-1])
            if role is None:
                continue
            _, _, actions, not_actions = role
            if denied(set(actions), action) and not denied(set(not_actions), action):
                return True
        return False

    # --- role assignments

    def _create(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        scope, name = "/" + p["scope"].strip("/"), p["roleAssignmentName"]
        if not _GUID.fullmatch(name):
            raise ArmError(
                400,
                "InvalidRoleAssignmentId",
                f"The role assignment ID '{name}' is not valid. The role assignment ID must be "
                "a GUID.",
            )
        props = body["properties"]
        role_id = props["roleDefinitionId"]
        if role_id.rsplit("/", 1)[-1].lower() not in ROLES:
            raise ArmError(
                400,
                "RoleDefinitionDoesNotExist",
                f"The specified role definition with ID '{role_id.rsplit('/', 1)[-1]}' does not "
                "exist.",
            )
        principal = props["principalId"]
        if principal not in self.principals:
            raise ArmError(
                400,
                "PrincipalNotFound",
                f"Principal {principal.replace('-', '')} does not exist in the directory "
                f"{self.s.tenant}. Check that you have the correct principal ID. If you are "
                "creating this principal and then immediately assigning a role, this error "
                "might be related to a replication delay. In this case, set the role "
                "assignment principalType property to a value, such as ServicePrincipal, User, "
                "or Group.  See https://aka.ms/docs-principaltype",
            )
        rid = f"{scope}/providers/Microsoft.Authorization/roleAssignments/{name}"
        role_full = (
            f"/subscriptions/{self.s.subscription}/providers/Microsoft.Authorization/"
            f"roleDefinitions/{role_id.rsplit('/', 1)[-1]}"
        )
        for other in self.assignments.values():
            o = other["properties"]
            if (
                other["id"].lower() != rid.lower()
                and o["scope"].lower() == scope.lower()
                and o["principalId"] == principal
                and o["roleDefinitionId"].lower() == role_full.lower()
            ):
                raise ArmError(409, "RoleAssignmentExists", "The role assignment already exists.")
        now = self.s.stamp()
        from tests.drivers.azure.standin import TEST_PRINCIPAL

        assignment: dict[str, Any] = {
            "id": rid,
            "name": name,
            "type": "Microsoft.Authorization/roleAssignments",
            "properties": {
                "roleDefinitionId": role_full,
                "principalId": principal,
                "principalType": props.get("principalType") or self.principals[principal],
                "scope": scope,
                "createdOn": now,
                "updatedOn": now,
                "createdBy": TEST_PRINCIPAL,
                "updatedBy": TEST_PRINCIPAL,
            },
        }
        for key in ("description", "condition", "conditionVersion"):
            if props.get(key) is not None:
                assignment["properties"][key] = props[key]
        self.assignments[rid.lower()] = assignment
        self.s.event("role assigned", rid, ROLES[role_full.rsplit("/", 1)[-1]][0])
        return Reply(201, assignment)

    def _id(self, p: dict[str, str]) -> str:
        scope = "/" + p["scope"].strip("/")
        return (
            f"{scope}/providers/Microsoft.Authorization/roleAssignments/{p['roleAssignmentName']}"
        )

    def _get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        found = self.assignments.get(self._id(p).lower())
        if found is None:
            raise ArmError(404, "RoleAssignmentNotFound", "The role assignment does not exist.")
        return Reply(200, found)

    def _delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        found = self.assignments.pop(self._id(p).lower(), None)
        return Reply(204) if found is None else Reply(200, found)

    def _list_scope(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        if "scope" in p:
            scope = "/" + p["scope"].strip("/")
        elif "resourceName" in p:
            scope = (
                f"/subscriptions/{p['subscriptionId']}/resourceGroups/{p['resourceGroupName']}/"
                f"providers/{p['resourceProviderNamespace']}/{p['resourceType']}/{p['resourceName']}"
            )
        elif "resourceGroupName" in p:
            scope = f"/subscriptions/{p['subscriptionId']}/resourceGroups/{p['resourceGroupName']}"
        else:
            scope = f"/subscriptions/{p['subscriptionId']}"
        text = q.get("$filter", "")
        principal = re.search(r"principalId\s+eq\s+'([^']+)'", text)
        at_scope = "atScope()" in text
        items = []
        for a in self.assignments.values():
            own = a["properties"]["scope"].lower()
            here = scope.lower()
            # Without atScope() a scope lists the assignments above it and below it.
            related = own == here if at_scope else (here.startswith(own) or own.startswith(here))
            if related and (
                principal is None or a["properties"]["principalId"] == principal.group(1)
            ):
                items.append(a)
        return Reply(
            200, self.s.page(items, q, scope + "/providers/Microsoft.Authorization/roleAssignments")
        )

    # --- role definitions

    def definition(self, role_id: str, scope: str) -> dict[str, Any]:
        name, description, actions, not_actions = ROLES[role_id]
        return {
            "id": f"{scope}/providers/Microsoft.Authorization/roleDefinitions/{role_id}",
            "name": role_id,
            "type": "Microsoft.Authorization/roleDefinitions",
            "properties": {
                "roleName": name,
                "type": "BuiltInRole",
                "description": description,
                "assignableScopes": ["/"],
                "permissions": [
                    {
                        "actions": actions,
                        "notActions": not_actions,
                        "dataActions": [],
                        "notDataActions": [],
                    }
                ],
                "createdOn": "2015-02-02T21:55:09.8806423Z",
                "updatedOn": "2025-06-17T15:23:05.6409651Z",
            },
        }

    def _definition_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        role_id = p["roleDefinitionId"].lower()
        if role_id not in ROLES:
            raise ArmError(
                404,
                "RoleDefinitionDoesNotExist",
                f"The specified role definition with ID '{p['roleDefinitionId']}' does not exist.",
            )
        return Reply(200, self.definition(role_id, "/" + p["scope"].strip("/")))

    def _definition_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        scope = "/" + p["scope"].strip("/")
        wanted = re.search(r"roleName\s+eq\s+'([^']+)'", q.get("$filter", ""))
        items = [
            self.definition(role_id, scope)
            for role_id, role in ROLES.items()
            if wanted is None or role[0].lower() == wanted.group(1).lower()
        ]
        return Reply(200, self.s.page(items, q, scope))
