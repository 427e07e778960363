"""What the Azure CLI needs of a loopback Azure beyond the ARM stand-in of the azure driver's
tests (tests/drivers/azure/standin.py), for benchmarks/azure_driver.py: the same stand-in,
plus

- template deployments (Microsoft.Resources/deployments: PUT, GET, operationStatuses), since
  `az vm create` makes its NIC, VM and role assignment by deploying an ARM template, never
  by PUTs of its own. The deployment is carried out as ARM carries it out, on the server:
  the template's resources are PUT to the stand-in in their dependsOn order (as the caller,
  through the stand-in's contract checks and RBAC) and each is waited for, so the VM, NIC
  and role assignment are made by the same code, at the same speed, as shoal's. Only the
  template functions `az vm create` writes are evaluated (`reference(ID, VERSION,
  'Full').identity.principalId`); a role assignment is PUT with the stand-in's
  authorization api-version (2022-04-01, the only one it serves) instead of the template's
  2015-07-01, without the read-only `scope` (its URL is its scope);
- Subscriptions - List (`az login` reads the principal's subscriptions);
- the cloud metadata document as `az cloud register` 2.91 reads it at api-version
  2022-09-01 (one cloud, a JSON object: the stand-in answers a list there), naming a
  loopback Entra token endpoint as its login endpoint and `https://management.azure.com`
  as the audience, so az asks for the scope that endpoint grants;
- empty path segments collapsed, as ARM does (azure-mgmt-resource's generic Resources - Get,
  which `az vm create` uses to check that the subnet's VNet exists, sends
  `.../providers/Microsoft.Network//virtualNetworks/NAME` for a top-level resource).

`entra(arm)`: the tests' loopback Entra token endpoint (tests/providers/azure/
entraserver.py: the client credentials grant of one app, CLIENT_ID with CLIENT_SECRET in
TENANT) over TLS with the stand-in's certificate (MSAL refuses an http authority), so one CA
bundle serves both. Every request a client sends (not the deployment engine's own calls) is
kept in `Arm.client`, and how long the stand-in took to answer each in `Arm.spent`.
"""

from __future__ import annotations

import copy
import json
import re
import ssl
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from tests.drivers.azure.standin import ArmError, ArmStandin, Reply, Seen
from tests.providers.azure.entraserver import TENANT, EntraServer

AUDIENCE = "https://management.azure.com"  # the scope the loopback Entra endpoint grants
ROLE_API = "2022-04-01"
AZ_API_VERSIONS = {"authorization": {"2022-05-01-preview"}, "network": {"2015-06-15", "2022-01-01"}}
DEPLOYMENT = re.compile(
    r"^/subscriptions/([^/]+)/resourcegroups/([^/]+)/providers/microsoft\.resources/"
    r"deployments/([^/]+)(/operationstatuses/([^/]+))?$",
    re.IGNORECASE,
)
REFERENCE = re.compile(r"^\[reference\('([^']+)', '[^']*', 'Full'\)\.identity\.principalId\]$")
TEMPLATE_ONLY = ("apiVersion", "type", "name", "dependsOn", "copy", "condition", "comments")
TERMINAL = ("Succeeded", "Failed", "Canceled")


class Deployment:
    def __init__(self, rid: str, name: str, body: dict[str, Any]) -> None:
        self.id, self.name, self.op = rid, name, str(uuid.uuid4())
        self.template: dict[str, Any] = (body.get("properties") or {}).get("template") or {}
        self.mode = str((body.get("properties") or {}).get("mode") or "Incremental")
        self.state = "Running"
        self.error: dict[str, Any] | None = None
        self.made: list[str] = []
        self.start = time.time()
        self.end: float | None = None


class Arm(ArmStandin):
    def __init__(self) -> None:
        super().__init__(tls=True)
        self.tenant = TENANT  # the Entra stand-in's tenant, so az's authority is its
        self.login = ""  # the Entra stand-in's https origin
        self.client: list[Seen] = []
        self.spent: dict[int, float] = {}  # id(Seen) -> seconds the stand-in took to answer
        self.deployments: dict[str, Deployment] = {}
        self.handlers["Subscriptions_List"] = self._subscriptions
        # What az 2.91 sends beside what the stand-in takes (real api-versions of these
        # resource types).
        for family, versions in AZ_API_VERSIONS.items():
            self.api_versions[family] |= versions

    def __enter__(self) -> Arm:
        super().__enter__()
        return self

    def _subscriptions(self, p: dict[str, str], q: dict[str, str], body: Any) -> Reply:
        one = self._subscription_get({"subscriptionId": self.subscription}, q, body).body
        return Reply(200, {"value": [one]})

    def _metadata(self, api_version: str) -> Any:
        found = super()._metadata(api_version)
        cloud: dict[str, Any] = found[0] if isinstance(found, list) else found
        cloud["authentication"]["loginEndpoint"] = self.login
        cloud["authentication"]["audiences"] = [AUDIENCE, "https://management.core.windows.net/"]
        return cloud if api_version >= "2022-09-01" else found

    def serve(
        self,
        http_method: str,
        raw_path: str,
        headers: dict[str, str],
        raw_body: bytes,
    ) -> tuple[int, dict[str, str], Any]:
        """As the stand-in's, for what a client sends (the deployment engine's own requests
        go to the stand-in's `serve`), with empty path segments collapsed and deployments
        served here."""
        start = time.perf_counter()
        parts = urlsplit(raw_path)
        path = re.sub("/{2,}", "/", unquote(parts.path))
        seen = Seen("", http_method, path, parse_qs(parts.query, keep_blank_values=True), None)
        with self.lock:
            self.requests.append(seen)
            self.client.append(seen)
        matched = DEPLOYMENT.match(path.rstrip("/"))
        if matched:
            try:
                seen.principal = self._principal(headers)
                reply = self._deployment(seen, matched, headers, raw_body)
            except ArmError as e:
                reply = self._error("compute", e)
        else:
            reply = self._serve(seen, headers, raw_body)
        seen.status = reply.status
        reply.headers.setdefault("x-ms-request-id", str(uuid.uuid4()))
        with self.lock:
            self.spent[id(seen)] = time.perf_counter() - start
        return reply.status, reply.headers, reply.body

    # --- deployments

    def _deployment(
        self, seen: Seen, matched: re.Match[str], headers: dict[str, str], raw: bytes
    ) -> Reply:
        subscription, group, name, _, op = matched.groups()
        self.check_rg(subscription, group)
        rid = (
            f"/subscriptions/{self.subscription}/resourceGroups/{self.rg_name(group)}"
            f"/providers/Microsoft.Resources/deployments/{name}"
        )
        version = seen.query.get("api-version", [""])[-1]
        if op is not None and seen.http_method == "GET":
            seen.operation = "DeploymentOperationStatus_Get"
            with self.lock:
                found = self.deployments.get(rid.lower())
            if found is None or found.op != op:
                raise ArmError(404, "NotFound", f"The operation '{op}' was not found.")
            body: dict[str, Any] = {"status": found.state}
            if found.error:
                body["error"] = found.error
            return Reply(200, body, {"Retry-After": str(self.retry_after)})
        if seen.http_method == "GET":
            seen.operation = "Deployments_Get"
            with self.lock:
                found = self.deployments.get(rid.lower())
            if found is None:
                raise ArmError(
                    404, "DeploymentNotFound", f"Deployment '{name}' could not be found."
                )
            return Reply(200, self._deployment_body(found))
        if seen.http_method != "PUT":
            raise ArmError(405, "MethodNotAllowed", f"{seen.http_method} is not served here")
        seen.operation = "Deployments_CreateOrUpdate"
        seen.body = json.loads(raw or b"{}")
        made = Deployment(rid, name, seen.body)
        with self.lock:
            self.deployments[rid.lower()] = made
        auth = {"authorization": headers.get("authorization", "")}
        threading.Thread(
            target=self._deploy, args=(made, self.rg_name(group), auth), daemon=True
        ).start()
        status = f"{self.base}{rid}/operationStatuses/{made.op}?api-version={version}"
        return Reply(
            201,
            self._deployment_body(made),
            {"Azure-AsyncOperation": status, "Retry-After": str(self.retry_after)},
        )

    def _deployment_body(self, made: Deployment) -> dict[str, Any]:
        props: dict[str, Any] = {
            "provisioningState": made.state,
            "correlationId": made.op,
            "timestamp": self.stamp(made.end or made.start),
            "mode": made.mode,
            "outputs": {},
            "outputResources": [{"id": rid} for rid in made.made],
        }
        if made.error:
            props["error"] = made.error
        return {
            "id": made.id,
            "name": made.name,
            "type": "Microsoft.Resources/deployments",
            "properties": props,
        }

    def _deploy(self, made: Deployment, group: str, auth: dict[str, str]) -> None:
        """The template's resources in dependsOn order, each PUT and waited for."""
        resources = [r for r in made.template.get("resources") or [] if isinstance(r, dict)]
        done: set[str] = set()
        error: dict[str, Any] | None = None
        try:
            while resources and error is None:
                ready = [
                    r for r in resources if all(_key(d) in done for d in r.get("dependsOn") or [])
                ]
                if not ready:
                    raise ValueError("the template's dependsOn has a cycle or names no resource")
                for resource in ready:
                    resources.remove(resource)
                    error = self._deploy_one(made, group, resource, auth)
                    if error is not None:
                        break
                    done.add(_key(f"{resource['type']}/{resource['name']}"))
        except (ValueError, KeyError, TypeError) as exc:  # a template this engine cannot run
            error = {"code": "InvalidTemplate", "message": f"{type(exc).__name__}: {exc}"}
        with self.lock:
            if error is not None:
                made.error = {
                    "code": "DeploymentFailed",
                    "message": "At least one resource deployment operation failed.",
                    "details": [error],
                }
            made.state = "Failed" if error else "Succeeded"
            made.end = time.time()

    def _deploy_one(
        self, made: Deployment, group: str, resource: dict[str, Any], auth: dict[str, str]
    ) -> dict[str, Any] | None:
        path, version = self._target(group, resource)
        body = {k: v for k, v in copy.deepcopy(resource).items() if k not in TEMPLATE_ONLY}
        body = self._evaluate(body)
        if "/roleassignments/" in path.lower():
            version = ROLE_API
            body.get("properties", {}).pop("scope", None)
        status, _, answer = ArmStandin.serve(
            self, "PUT", f"{path}?api-version={version}", auth, json.dumps(body).encode()
        )
        if status >= 300:
            failed = (answer or {}).get("error") if isinstance(answer, dict) else None
            return failed or {"code": "ResourceDeploymentFailure", "message": f"HTTP {status}"}
        made.made.append(path)
        while True:
            now = self.resource(path)
            state = ((now or {}).get("properties") or {}).get("provisioningState")
            if now is None or state is None or state in TERMINAL:
                break
            time.sleep(min(self.next_event_in(), 0.02))
        if state in ("Failed", "Canceled"):
            return {"code": "ResourceDeploymentFailure", "message": f"{path} is {state}"}
        return None

    def _target(self, group: str, resource: dict[str, Any]) -> tuple[str, str]:
        """A template resource's URL path and api-version."""
        kind, name = str(resource["type"]), str(resource["name"])
        base, _, extension = kind.partition("/providers/")
        names = name.split("/")
        types = base.split("/")
        namespace, types = types[0], types[1:]
        steps = "/".join(f"{t}/{n}" for t, n in zip(types, names, strict=False))
        path = f"/subscriptions/{self.subscription}/resourceGroups/{group}/providers/{namespace}/"
        path += steps
        if extension:
            ext_ns, ext_name = names[len(types)], names[len(types) + 1]
            path += f"/providers/{ext_ns}/{extension}/{ext_name}"
        return path, str(resource["apiVersion"])

    def _evaluate(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._evaluate(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._evaluate(v) for v in value]
        if isinstance(value, str) and value.startswith("[") and not value.startswith("[["):
            matched = REFERENCE.match(value)
            if matched is None:
                raise ValueError(f"the loopback deployments evaluate no {value}")
            found = self.resource(matched.group(1)) or {}
            return str((found.get("identity") or {}).get("principalId") or "")
        return value


def _key(reference: str) -> str:
    """A dependsOn entry (`TYPE/NAME`) as the deployment engine compares them."""
    return reference.strip().lower()


def entra(arm: Arm) -> EntraServer:
    """The loopback Entra token endpoint, over TLS with the stand-in's certificate; started,
    and named in `arm`'s cloud metadata as its login endpoint."""
    server = EntraServer()
    assert arm.ca_bundle is not None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(Path(arm.ca_bundle).parent / "server.pem")
    server._server.socket = context.wrap_socket(server._server.socket, server_side=True)
    server.__enter__()
    arm.login = server.base.replace("http://", "https://")
    return server
