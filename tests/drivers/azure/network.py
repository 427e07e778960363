"""Microsoft.Network for the ARM stand-in: virtual networks and subnets (made by a test with
`add_subnet`, read by the driver), network interfaces and public IP addresses.

Served: NetworkInterfaces_CreateOrUpdate / Get / Delete / List / ListAll / UpdateTags,
PublicIPAddresses_CreateOrUpdate / Get / Delete / List / ListAll / UpdateTags,
VirtualNetworks_Get / List, Subnets_Get / List. UpdateTags (PATCH `{tags}`) replaces the
tags and answers the resource at once. A PUT answers 201 (200 for an existing resource) with
provisioningState Updating and `Azure-AsyncOperation` + `Retry-After`; Succeeded after
`timing.network`. A DELETE answers 202 with `Location` and `Azure-AsyncOperation` (204 for
none), the resource gone after `timing.network`. Errors are the Network resource
provider's: NicInUse (a NIC a VM uses), PublicIPAddressInUse (a public IP a NIC uses),
InvalidResourceReference (a subnet or public IP that does not exist, or in another region).
A NIC gets its private IP from its subnet at once (Azure's first free address, .4 on), a
Static public IP its address at once (from 203.0.113.0/24, the documentation range), and
a NIC its MAC address when a VM using it first runs.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from tests.drivers.azure.standin import ArmError, Reply, Res

if TYPE_CHECKING:
    from tests.drivers.azure.standin import ArmStandin

NIC = "Microsoft.Network/networkInterfaces"
PIP = "Microsoft.Network/publicIPAddresses"
VNET = "Microsoft.Network/virtualNetworks"


class Network:
    def __init__(self, standin: ArmStandin) -> None:
        self.s = standin
        self._public = 0
        standin.handlers.update(
            {
                "NetworkInterfaces_CreateOrUpdate": self._nic_put,
                "NetworkInterfaces_Get": self._nic_get,
                "NetworkInterfaces_Delete": self._nic_delete,
                "NetworkInterfaces_List": self._list(NIC),
                "NetworkInterfaces_ListAll": self._list(NIC),
                "NetworkInterfaces_UpdateTags": self._update_tags(NIC, "networkInterfaceName"),
                "PublicIPAddresses_CreateOrUpdate": self._pip_put,
                "PublicIPAddresses_Get": self._pip_get,
                "PublicIPAddresses_Delete": self._pip_delete,
                "PublicIPAddresses_List": self._list(PIP),
                "PublicIPAddresses_ListAll": self._list(PIP),
                "PublicIPAddresses_UpdateTags": self._update_tags(PIP, "publicIpAddressName"),
                "VirtualNetworks_Get": self._vnet_get,
                "VirtualNetworks_List": self._list(VNET),
                "Subnets_Get": self._subnet_get,
                "Subnets_List": self._subnet_list,
            }
        )

    # --- knobs

    def add_subnet(
        self,
        rg: str,
        vnet: str,
        subnet: str = "default",
        *,
        location: str = "eastus",
        prefix: str = "10.0.0.0/24",
        space: str = "10.0.0.0/16",
    ) -> str:
        """A virtual network (made if missing) with this subnet; the subnet's id."""
        with self.s.lock:
            rg = self.s.rg_name(rg)
            rid = self.s.rid(rg, VNET, vnet)
            res = self.s.get(rid)
            if res is None:
                res = Res(
                    rid,
                    VNET,
                    rg,
                    {
                        "id": rid,
                        "name": vnet,
                        "type": VNET,
                        "location": location,
                        "etag": self._etag(),
                        "properties": {
                            "provisioningState": "Succeeded",
                            "resourceGuid": self.s.guid(),
                            "addressSpace": {"addressPrefixes": [space]},
                            "subnets": [],
                            "virtualNetworkPeerings": [],
                            "enableDdosProtection": False,
                        },
                    },
                )
                self.s.put(res)
            sid = f"{rid}/subnets/{subnet}"
            if self._subnet(sid) is not None:
                return sid
            res.props["subnets"].append(
                {
                    "id": sid,
                    "name": subnet,
                    "etag": res.body["etag"],
                    "type": f"{VNET}/subnets",
                    "properties": {
                        "provisioningState": "Succeeded",
                        "addressPrefix": prefix,
                        "delegations": [],
                        "privateEndpointNetworkPolicies": "Disabled",
                        "privateLinkServiceNetworkPolicies": "Enabled",
                    },
                }
            )
            res.state.setdefault("next_ip", {})[sid.lower()] = 4
            return sid

    def nic(self, rid: str) -> Res | None:
        found = self.s.get(rid)
        return found if found is not None and found.type == NIC else None

    # --- helpers

    def _etag(self) -> str:
        return f'W/"{self.s.guid()}"'

    def _subnet(self, sid: str) -> tuple[Res, dict[str, Any]] | None:
        vnet_id, sep, name = sid.rpartition("/subnets/")
        vnet = self.s.get(vnet_id) if sep else None
        if vnet is None:
            return None
        for subnet in vnet.props["subnets"]:
            if subnet["name"].lower() == name.lower():
                return vnet, subnet
        return None

    def _reference_error(self, ref: str, by: str) -> ArmError:
        return ArmError(
            400,
            "InvalidResourceReference",
            f"Resource {ref} referenced by resource {by} was not found. Please make sure that "
            "the referenced resource exists, and that both resources are in the same region.",
            details=[],
        )

    def _private_ip(self, vnet: Res, subnet: dict[str, Any]) -> str:
        counters = vnet.state.setdefault("next_ip", {})
        n = counters.get(subnet["id"].lower(), 4)
        counters[subnet["id"].lower()] = n + 1
        net = ipaddress.ip_network(subnet["properties"]["addressPrefix"], strict=False)
        return str(net.network_address + n)

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

    def _update_tags(self, type_: str, key: str) -> Any:
        def handler(p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
            self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
            res = self.s.find(p["resourceGroupName"], type_, p[key])
            res.body["tags"] = dict(body.get("tags") or {})
            if not res.body["tags"]:
                del res.body["tags"]
            res.body["etag"] = self._etag()
            return Reply(200, res.body)

        return handler

    def _finish_put(self, res: Res, q: dict[str, str], existed: bool) -> Reply:
        res.props["provisioningState"] = "Updating"
        op = self.s.new_op("network", res.body["location"], q["api-version"], res.id)

        def done(when: float) -> None:
            if self.s.get(res.id) is res:
                res.props["provisioningState"] = "Succeeded"
            self.s.finish(op, when)

        self.s.at(self.s.now() + self.s.timing.network, done)
        return Reply(200 if existed else 201, res.body, self.s.op_headers(op, location=False))

    def _finish_delete(self, res: Res, q: dict[str, str], remove: Any) -> Reply:
        op = self.s.new_op("network", res.body["location"], q["api-version"], res.id)
        res.props["provisioningState"] = "Deleting"

        def done(when: float) -> None:
            remove(res, "delete")
            self.s.finish(op, when)

        self.s.at(self.s.now() + self.s.timing.network, done)
        return Reply(202, None, self.s.op_headers(op, location=True))

    # --- network interfaces

    def _nic_put(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        rg = self.s.rg_name(p["resourceGroupName"])
        name = p["networkInterfaceName"]
        rid = self.s.rid(rg, NIC, name)
        existing = self.s.get(rid)
        location = self.s.check_location(body["location"], NIC)
        res = self.build_nic(rg, name, location, body, existing)
        return self._finish_put(res, q, existing is not None)

    def build_nic(
        self,
        rg: str,
        name: str,
        location: str,
        body: dict[str, Any],
        existing: Res | None = None,
    ) -> Res:
        """A NIC from its PUT body (or the one a VM's networkInterfaceConfigurations
        describes), checked and stored; its public IPs are attached."""
        rid = self.s.rid(rg, NIC, name)
        configs = body.get("properties", {}).get("ipConfigurations") or []
        if not configs:
            raise ArmError(
                400,
                "NetworkInterfaceMustHaveAtLeastOneIpConfiguration",  # approximated
                f"Network interface {rid} must have at least one IP configuration.",
            )
        old_ips = {
            c["name"].lower(): c["properties"].get("privateIPAddress")
            for c in (existing.props.get("ipConfigurations", []) if existing else [])
        }
        built = []
        for i, config in enumerate(configs):
            cprops = config.get("properties", {})
            cname = config.get("name") or f"ipconfig{i + 1}"
            cid = f"{rid}/ipConfigurations/{cname}"
            sid = (cprops.get("subnet") or {}).get("id", "")
            found = self._subnet(sid)
            if found is None or found[0].body["location"] != location:
                raise self._reference_error(sid, rid)
            vnet, subnet = found
            out: dict[str, Any] = {
                "id": cid,
                "name": cname,
                "etag": self._etag(),
                "type": f"{NIC}/ipConfigurations",
                "properties": {
                    "provisioningState": "Succeeded",
                    "privateIPAddress": old_ips.get(cname.lower())
                    or cprops.get("privateIPAddress")
                    or self._private_ip(vnet, subnet),
                    "privateIPAllocationMethod": cprops.get("privateIPAllocationMethod", "Dynamic"),
                    "subnet": {"id": subnet["id"]},
                    "primary": cprops.get("primary", i == 0),
                    "privateIPAddressVersion": cprops.get("privateIPAddressVersion", "IPv4"),
                },
            }
            pip_ref = (cprops.get("publicIPAddress") or {}).get("id")
            if pip_ref:
                pip = self.s.get(pip_ref)
                if pip is None or pip.type != PIP or pip.body["location"] != location:
                    raise self._reference_error(pip_ref, rid)
                user = pip.props.get("ipConfiguration", {}).get("id")
                if user and user.lower() != cid.lower():
                    raise ArmError(
                        400,
                        "PublicIPAddressInUse",  # approximated
                        f"Resource {cid} is referencing public IP address {pip.id} that is "
                        f"already allocated to resource {user}.",
                    )
                out["properties"]["publicIPAddress"] = {"id": pip.id}
            built.append(out)
        # Release what the old configuration held, then take what the new one names.
        if existing is not None:
            self._release(existing)
        res = Res(
            rid,
            NIC,
            rg,
            {
                "id": rid,
                "name": name,
                "type": NIC,
                "location": location,
                "etag": self._etag(),
                "properties": {
                    "provisioningState": "Succeeded",
                    "resourceGuid": existing.props["resourceGuid"] if existing else self.s.guid(),
                    "ipConfigurations": built,
                    "dnsSettings": {"dnsServers": [], "appliedDnsServers": []},
                    "enableAcceleratedNetworking": bool(
                        body.get("properties", {}).get("enableAcceleratedNetworking", False)
                    ),
                    "vnetEncryptionSupported": False,
                    "enableIPForwarding": bool(
                        body.get("properties", {}).get("enableIPForwarding", False)
                    ),
                    "hostedWorkloads": [],
                    "tapConfigurations": [],
                    "nicType": "Standard",
                    "auxiliaryMode": "None",
                    "auxiliarySku": "None",
                },
            },
        )
        if body.get("tags"):
            res.body["tags"] = dict(body["tags"])
        nsg = body.get("properties", {}).get("networkSecurityGroup")
        if nsg:
            res.props["networkSecurityGroup"] = {"id": nsg["id"]}
        if existing is not None:
            for key in ("virtualMachine", "macAddress", "primary"):
                if key in existing.props:
                    res.props[key] = existing.props[key]
            res.state = existing.state
        self.s.put(res)
        for config in built:
            pip_ref = config["properties"].get("publicIPAddress", {}).get("id")
            if pip_ref:
                pip = self.s.get(pip_ref)
                assert pip is not None
                pip.props["ipConfiguration"] = {"id": config["id"]}
            found = self._subnet(config["properties"]["subnet"]["id"])
            assert found is not None
            refs = found[1]["properties"].setdefault("ipConfigurations", [])
            refs.append({"id": config["id"]})
        if existing is None:
            self.s.event("created", rid, "put")
        return res

    def _release(self, nic: Res) -> None:
        for config in nic.props.get("ipConfigurations", []):
            pip_ref = config["properties"].get("publicIPAddress", {}).get("id")
            pip = self.s.get(pip_ref) if pip_ref else None
            if pip is not None:
                pip.props.pop("ipConfiguration", None)
                if pip.props.get("publicIPAllocationMethod") == "Dynamic":
                    pip.props.pop("ipAddress", None)
            found = self._subnet(config["properties"]["subnet"]["id"])
            if found is not None:
                refs = found[1]["properties"].get("ipConfigurations", [])
                refs[:] = [r for r in refs if r["id"].lower() != config["id"].lower()]
                if not refs:
                    found[1]["properties"].pop("ipConfigurations", None)

    def remove_nic(self, nic: Res, why: str) -> None:
        if self.s.get(nic.id) is not nic:
            return
        self._release(nic)
        self.s.drop(nic.id)
        self.s.event("deleted", nic.id, why)

    def public_ips_of(self, nic: Res) -> list[Res]:
        out = []
        for config in nic.props.get("ipConfigurations", []):
            pip_ref = config["properties"].get("publicIPAddress", {}).get("id")
            pip = self.s.get(pip_ref) if pip_ref else None
            if pip is not None:
                out.append(pip)
        return out

    def _nic_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.find(p["resourceGroupName"], NIC, p["networkInterfaceName"])
        return Reply(200, res.body)

    def _nic_delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.get(self.s.rid(p["resourceGroupName"], NIC, p["networkInterfaceName"]))
        if res is None:
            return Reply(204)
        vm = res.props.get("virtualMachine", {}).get("id")
        if vm:
            raise ArmError(
                400,
                "NicInUse",
                f"Network Interface {res.id} is used by existing resource {vm}. In order to "
                "delete the network interface, it must be dissociated from the resource. To "
                "learn more, see aka.ms/deletenic.",
                details=[],
            )
        return self._finish_delete(res, q, self.remove_nic)

    # --- public IP addresses

    def _pip_put(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        rg = self.s.rg_name(p["resourceGroupName"])
        name = p["publicIpAddressName"]
        existing = self.s.get(self.s.rid(rg, PIP, name))
        location = self.s.check_location(body["location"], PIP)
        res = self.build_pip(rg, name, location, body, existing)
        return self._finish_put(res, q, existing is not None)

    def build_pip(
        self,
        rg: str,
        name: str,
        location: str,
        body: dict[str, Any],
        existing: Res | None = None,
    ) -> Res:
        rid = self.s.rid(rg, PIP, name)
        props = body.get("properties", {})
        sku = body.get("sku") or {"name": "Standard", "tier": "Regional"}
        method = props.get("publicIPAllocationMethod") or (
            "Static" if sku.get("name", "Standard").lower() == "standard" else "Dynamic"
        )
        if sku.get("name", "").lower() == "standard" and method.lower() != "static":
            raise ArmError(
                400,
                "StandardSkuPublicIPAddressesMustBeStatic",  # approximated
                f"Standard sku publicIp {rid} must be static.",
            )
        res = Res(
            rid,
            PIP,
            rg,
            {
                "id": rid,
                "name": name,
                "type": PIP,
                "location": location,
                "etag": self._etag(),
                "sku": {"name": sku.get("name", "Standard"), "tier": sku.get("tier", "Regional")},
                "properties": {
                    "provisioningState": "Succeeded",
                    "resourceGuid": existing.props["resourceGuid"] if existing else self.s.guid(),
                    "publicIPAddressVersion": props.get("publicIPAddressVersion", "IPv4"),
                    "publicIPAllocationMethod": method,
                    "idleTimeoutInMinutes": props.get("idleTimeoutInMinutes", 4),
                    "ipTags": [],
                    "ddosSettings": {"protectionMode": "VirtualNetworkInherited"},
                },
            },
        )
        if body.get("zones"):
            res.body["zones"] = list(body["zones"])
        if body.get("tags"):
            res.body["tags"] = dict(body["tags"])
        if props.get("dnsSettings"):
            label = props["dnsSettings"].get("domainNameLabel")
            res.props["dnsSettings"] = {
                "domainNameLabel": label,
                "fqdn": f"{label}.{location}.cloudapp.azure.com",
            }
        if existing is not None:
            for key in ("ipAddress", "ipConfiguration"):
                if key in existing.props:
                    res.props[key] = existing.props[key]
        if method.lower() == "static" and "ipAddress" not in res.props:
            res.props["ipAddress"] = self.next_public_ip()
        self.s.put(res)
        if existing is None:
            self.s.event("created", rid, "put")
        return res

    def next_public_ip(self) -> str:
        self._public += 1
        return f"203.0.113.{self._public % 250 + 1}"

    def remove_pip(self, pip: Res, why: str) -> None:
        if self.s.drop(pip.id) is not None:
            self.s.event("deleted", pip.id, why)

    def _pip_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.find(p["resourceGroupName"], PIP, p["publicIpAddressName"])
        return Reply(200, res.body)

    def _pip_delete(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        res = self.s.get(self.s.rid(p["resourceGroupName"], PIP, p["publicIpAddressName"]))
        if res is None:
            return Reply(204)
        user = res.props.get("ipConfiguration", {}).get("id")
        if user:
            raise ArmError(
                400,
                "PublicIPAddressCannotBeDeleted",
                f"Public IP address {res.id} can not be deleted since it is still allocated to "
                f"resource {user}. In order to delete the public IP, disassociate/detach the "
                "Public IP address from the resource.  To learn how to do this, see "
                "aka.ms/deletepublicip.",
                details=[],
            )
        return self._finish_delete(res, q, self.remove_pip)

    # --- virtual networks and subnets

    def _vnet_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        return Reply(200, self.s.find(p["resourceGroupName"], VNET, p["virtualNetworkName"]).body)

    def _subnet_get(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        vnet = self.s.find(p["resourceGroupName"], VNET, p["virtualNetworkName"])
        found = self._subnet(f"{vnet.id}/subnets/{p['subnetName']}")
        if found is None:
            raise ArmError(
                404,
                "NotFound",
                f"Resource {vnet.id}/subnets/{p['subnetName']} not found.",
                details=[],
            )
        return Reply(200, found[1])

    def _subnet_list(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        self.s.check_rg(p["subscriptionId"], p["resourceGroupName"])
        vnet = self.s.find(p["resourceGroupName"], VNET, p["virtualNetworkName"])
        return Reply(200, self.s.page(list(vnet.props["subnets"]), q, vnet.id + "/subnets"))
