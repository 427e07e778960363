"""The `gcp` driver (alias `gce`): each allocation is a Compute Engine VM.

State lives in Compute Engine: the instance and its boot disk carry the labels
`shoal-allocation=ID`, `shoal-managed-by=shoal` and `shoal-expires=EPOCH-SECONDS` (label
values take only [a-z0-9_-]) from the insert on, so every machine running shoal against the
project sees them (`status --remote gcp`, `free --expired --remote gcp`). The lifetime is
enforced by Google, not by shoal being around: `scheduling.maxRunDuration` with
`instanceTerminationAction=DELETE`; spot is `provisioningModel=SPOT`, deleted on preemption.

An insert carries a `requestId`, a UUID derived from the allocation id and the attempt: a
retried insert (a dropped answer, a 429 or 503) gets the first one's operation back and
never makes a second VM. Operations are followed to DONE (drivers/gcp/compute.py) and
their errors mapped: no room in the zone (ZONE_RESOURCE_POOL_EXHAUSTED[_WITH_DETAILS]) and
QUOTA_EXCEEDED are NoCapacityError (75), a machine type, image or zone Google does not know
a UsageError (2) naming the option; `-o fallback=zones` tries the next zone, `types` then
the next cheapest type, and every attempt is named when all fail.

Config (`[drivers."gcp/NAME"]`, drivers/gcp/config.py): project, zone, zones, network,
subnetwork, service_account, image, disk_gb, labels, allowed_types, spot, fallback,
check_quotas. Options
(`-o`): zone, machine_type, image, gpus, gpu, spot, fallback, network, subnetwork,
service_account, disk_gb, labels, allowed_types, entry, env. The type choice is
drivers/vm/choice.py over the gcp price catalog, the boot script drivers/vm/userdata.py (as
the `startup-script` metadata).

Tasks (drivers/gcp/tasks.py): `snapshot` and `image` of the boot disk, `console`; `shoal
logs` reads the serial console.

Capacity is counted from the project's quotas (drivers/vm/capacity.py with
providers/gcp/quota_map.py); the inserts of a run, their notes and the cleanup of an
allocation known only by its id (Ctrl-C, `kill -9`) are drivers/gcp/inserts.py.
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drivers.definitions.options import check_meta_names, load_config, parse_options
from drivers.gcp.config import DEFAULT_IMAGE, GcpConfig, GcpOptions
from drivers.gcp.inserts import FOLDER as INSERTS_FOLDER
from drivers.gcp.inserts import Inserts
from drivers.spec.base import UNLIMITED, ResourceDriverTask
from drivers.spec.types import (
    ALLOCATION_ID_KEY,
    STATUS_ALLOCATED,
    STATUS_NONE,
    LabelDefinition,
    Resource,
    Resources,
)
from drivers.vm.launches import Launches
from providers.core.errors import (
    CredentialsError,
    NoCapacityError,
    RetryableError,
    ShoalError,
    UsageError,
    is_secret_name,
)
from providers.core.http.policy import RetryPolicy
from providers.core.settings import Settings

if TYPE_CHECKING:
    from collections.abc import Iterator

    from drivers.gcp.compute import ApiRefused, Compute, OperationError
    from drivers.vm.choice import Candidate, Choice
    from providers.cloud.catalog import CloudCatalog
    from providers.core.ttlcache import TtlCache

DEFAULT_ZONE = "us-central1-a"
ALLOCATION_LABEL = "shoal-allocation"
EXPIRES_LABEL = "shoal-expires"
MANAGED_BY_LABEL = "shoal-managed-by"
# requestIds are UUIDs (the API's rule): one per allocation and attempt, the same each time.
REQUEST_NAMESPACE = uuid.UUID("6d0f3c52-7a0e-4f0e-9c55-5b1f2d3c6a11")
RETRY_POLICY = RetryPolicy()  # every Compute call of the driver; tests set a faster one
OPERATION_SECONDS = 600.0  # an insert or delete not DONE by then is left to `status`
MIN_RUN_SECONDS = 30  # Google's least maxRunDuration
SEEN_FOR_SECONDS = 2.0  # how long an instance just read answers for it again
HOLDING = ("PROVISIONING", "STAGING", "RUNNING")
POOL_CODES = ("ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS")
SECRET_FIX = (
    "instance metadata and labels are readable by anyone who may get the instance, and by "
    "every process on it; give the VM a service account (service_account) and read secrets "
    "at boot (e.g. from Secret Manager)"
)
# N1's attachable GPUs, by model (the others come with their accelerator-optimized type).
N1_ACCELERATORS = {
    "T4": "nvidia-tesla-t4",
    "V100": "nvidia-tesla-v100",
    "P4": "nvidia-tesla-p4",
    "P100": "nvidia-tesla-p100",
}


@dataclass(frozen=True)
class TypeShape:
    name: str
    vcpus: float | None
    memory_gib: float | None
    arch: str = "x86_64"
    gpu: str = ""
    gpu_count: int = 0
    gpu_memory_gib: float = 0.0


@dataclass
class Plan:
    opts: GcpOptions
    zone: str
    region: str
    image: str
    choice: Choice
    spot: bool
    fallback: str
    accelerator: str = ""  # N1's guestAccelerators type, with choice.first's gpu_count
    notes: list[str] = field(default_factory=list)
    capacity: dict[str, Any] = field(default_factory=dict)  # the quota count, once made


def request_id(allocation_id: str, attempt: int) -> str:
    return str(uuid.uuid5(REQUEST_NAMESPACE, f"{allocation_id}/{attempt}"))


def instance_name(allocation_id: str) -> str:
    name = re.sub(r"[^a-z0-9-]", "-", f"shoal-{allocation_id}".lower())[:62].rstrip("-")
    return name


def label_value(value: str) -> str:
    return re.sub(r"[^a-z0-9_-]", "_", value.lower())[:63]


class GcpDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self.cfg = GcpConfig()
        self._compute: Compute | None = None
        self._plans: dict[str, Plan] = {}
        self._catalog_made: CloudCatalog | None = None
        self._memo_made: TtlCache | None = None
        self._warned: set[str] = set()
        self._seen: dict[tuple[str, str], tuple[float, dict[str, Any] | None]] = {}
        self._inserts = Inserts(
            Launches(settings.paths.state_dir / INSERTS_FOLDER),
            lambda text: settings.warn(f"{full_name}: {text}"),
        )

    def name(self) -> str:
        return self._name

    def is_remote(self) -> bool:
        return True

    def prepare(self, config: bytes) -> None:
        self.cfg = load_config(GcpConfig, config, self._name, self._settings.paths.config_file)

    # -- the project -----------------------------------------------------------------------

    def compute(self) -> Compute:
        if self._compute is None:
            from drivers.gcp.compute import Compute
            from providers.config import base_url
            from providers.core.env import ENV_GCP_COMPUTE_URL
            from providers.gcp.credentials import find_credentials, find_project, missing
            from providers.gcp.fetch import DEFAULT_COMPUTE_URL

            settings = self._settings
            credentials = find_credentials(settings, policy=RETRY_POLICY)
            project, project_from = find_project(settings, credentials)
            if self.cfg.project:
                project, project_from = self.cfg.project, f'[drivers."{self._name}"] project'
            if credentials is None or not project:
                raise CredentialsError(
                    missing(f"{self._name}: launching VMs", credentials, project)
                )
            permissions = "roles/compute.instanceAdmin.v1"
            self._compute = Compute(
                base_url(settings, "gcp", "compute_url", ENV_GCP_COMPUTE_URL, DEFAULT_COMPUTE_URL),
                project,
                credentials,
                auth_hint=credentials.hint(
                    project, project_from, "", role=permissions, doing="manage VMs"
                ),
                policy=RETRY_POLICY,
            )
        return self._compute

    def _catalog(self) -> CloudCatalog:
        if self._catalog_made is None:
            from providers.cloud.catalog import CloudCatalog
            from providers.registry import new_catalog

            made = new_catalog("gcp", self._settings)
            if not isinstance(made, CloudCatalog):
                raise ShoalError(f"{self._name}: the gcp provider is not a cloud catalog")
            self._catalog_made = made
        return self._catalog_made

    # -- definitions -------------------------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> GcpOptions:
        return parse_options(GcpOptions, definition.options)

    def validate_definition(self, definition: LabelDefinition) -> None:
        opts = self._options(definition)
        if definition.authentication is not None:
            raise UsageError(
                f"authentication: the gcp driver puts nothing secret on a VM: {SECRET_FIX}"
            )
        if definition.resources.disks:
            raise UsageError("resources.disks: the gcp driver takes -o disk_gb=N instead")
        for name in opts.env:
            refuse_secret(f"options.env.{name}", name)
        names = [opts.machine_type] if isinstance(opts.machine_type, str) else opts.machine_type
        gpus = opts.gpus or (1 if opts.gpu else 0)
        if gpus and any(n.startswith("n1-") for n in names) and not opts.gpu:
            raise UsageError("options.gpu: an N1 type takes attached GPUs: name one, e.g. T4")
        res = definition.resources
        if not (res.cpu and res.ram):  # left to the named type: its shape says them
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

        opts = self._options(definition)
        zone = opts.zone or self.cfg.zone or (self.cfg.zones[0] if self.cfg.zones else "")
        zone = zone or DEFAULT_ZONE
        region = zone.rsplit("-", 1)[0]
        spot = self.cfg.spot if opts.spot is None else opts.spot
        want = choice.Want(
            cpu=definition.resources.cpu,
            ram=definition.resources.ram,
            gpus=opts.gpus or (1 if opts.gpu else 0),
            gpu=opts.gpu,
            spot=spot,
            allowed=tuple(
                self.cfg.allowed_types if opts.allowed_types is None else opts.allowed_types
            ),
        )
        names = [opts.machine_type] if isinstance(opts.machine_type, str) else opts.machine_type
        accelerator = ""
        if names:
            shapes: dict[str, choice.Shape] = {}
            for name in names:
                shape, accelerator = self._named_shape(zone, name, want)
                shapes[name] = shape
            chosen = choice.named(region, names, shapes, self._prices(region, names, spot), want)
        else:
            chosen = choice.from_catalog(self._pricing(region), want)
        return Plan(
            opts=opts,
            zone=zone,
            region=region,
            image=opts.image or self.cfg.image or DEFAULT_IMAGE,
            choice=chosen,
            spot=spot,
            fallback=opts.fallback or self.cfg.fallback,
            accelerator=accelerator,
        )

    def _named_shape(self, zone: str, name: str, want: Any) -> tuple[TypeShape, str]:
        """A named type's shape from machineTypes.get (one Google does not know in the zone
        is a UsageError naming the option), with N1's attached GPUs when some are asked."""
        from drivers.gcp.compute import ApiRefused

        try:
            found = self.compute().machine_type(zone, name)
        except ApiRefused as exc:
            raise _usage(exc, "options.zone" if "zone" in exc.message.lower() else "") from None
        if found is None:
            raise UsageError(
                f"options.machine_type: {name} does not exist in zone {zone}; `shoal types -p "
                "gcp` lists the machine types"
            )
        accelerators = found.get("accelerators") or []
        gpu, count = "", 0
        if accelerators:
            gpu = str(accelerators[0].get("guestAcceleratorType", ""))
            count = int(accelerators[0].get("guestAcceleratorCount", 0))
        accelerator = ""
        if not accelerators and want.gpus and name.startswith("n1-"):
            from providers import gpus as gpu_names

            model = gpu_names.model(want.gpu)
            accelerator = N1_ACCELERATORS.get(model.upper(), "")
            if not accelerator:
                raise UsageError(
                    f"options.gpu: {want.gpu} cannot be attached to {name}; N1 takes "
                    f"{', '.join(N1_ACCELERATORS)}"
                )
            gpu, count = model, want.gpus
        arch = "arm64" if name.startswith(("t2a-", "c4a-")) else "x86_64"
        shape = TypeShape(
            name=name,
            vcpus=float(found.get("guestCpus") or 0) or None,
            memory_gib=(float(found.get("memoryMb") or 0) / 1024) or None,
            arch=arch,
            gpu=gpu,
            gpu_count=count,
        )
        return shape, accelerator

    def _pricing(self, region: str) -> Any:
        from providers.models import RegionSpec, ResourceListOptions

        found = self._catalog().list_pricing(ResourceListOptions(region=RegionSpec(name=region)))
        if not found:
            raise ShoalError(f"{self._name}: the gcp price catalog has nothing for {region}")
        return found[0]

    def _prices(
        self, region: str, names: list[str], spot: bool
    ) -> dict[str, tuple[float | None, float | None]]:
        """Prices of named types when the cached catalog has them; none asked of the net."""
        try:
            cache = self._catalog().cache
            if region not in cache.snapshots("gcp"):
                return {}
            return {
                o.instance_type: (o.on_demand, o.spot)
                for o in cache.offers("gcp", region)
                if o.instance_type in names
            }
        except ShoalError:
            return {}

    def explain(self, definition: LabelDefinition) -> dict[str, Any]:
        plan = self._plan(definition)
        out = plan.choice.to_json()
        out.update(zone=plan.zone, image=plan.image)
        if plan.capacity:
            out["capacity"] = plan.capacity
        return out

    # -- capacity --------------------------------------------------------------------------

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        """How many VMs of the chosen type the project's quotas still take in the region:
        the regional CPUS or the series' CPU quota, the GPU model's quota, CPUS_ALL_REGIONS
        and GPUS_ALL_REGIONS, PREEMPTIBLE_* for spot where the project has them
        (providers/gcp/quota_map.py), from the project's snapshot in the catalog cache,
        read again once older than the quota TTL or once this driver inserted or deleted a
        VM there. Quotas that cannot be read are no refusal (unlimited, with a note): Google's
        own check at insert has the last word (QUOTA_EXCEEDED: 75, naming the quota)."""
        plan = self._plan(req)
        if not self.cfg.check_quotas:
            plan.capacity = {"checked": False, "note": "check_quotas is off"}
            return UNLIMITED
        from drivers.vm import capacity
        from providers.gcp.quota_map import GcpQuotaMap

        who = capacity.Account(
            "gcp", "Google", self._name, self.compute().project, self._catalog(), self._memo(),
            self._settings, GcpQuotaMap, self._warn_once,
        )  # fmt: skip
        count, plan.capacity = capacity.quota_count(
            who, plan.region, plan.choice.first, spot=plan.spot
        )
        return count

    def _forget_capacity(self, region: str) -> None:
        if self.cfg.check_quotas:
            from drivers.vm import capacity

            capacity.forget("gcp", region, lambda: self.compute().project, self._catalog)

    def _memo(self) -> TtlCache:
        """What the driver remembers between runs: a project's quotas found unreadable."""
        if self._memo_made is None:
            from providers.core.ttlcache import TtlCache

            self._memo_made = TtlCache(self._settings.paths.cache_dir / "gcp-driver.json")
        return self._memo_made

    def _warn_once(self, text: str) -> None:
        if text not in self._warned:
            self._warned.add(text)
            self._settings.warn(text)

    # -- lifecycle -------------------------------------------------------------------------

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        plan = self._plan(definition)
        allocation_id = str(metadata.get(ALLOCATION_ID_KEY, ""))
        compute = self.compute()
        zones = [plan.zone]
        if plan.fallback in ("zones", "types") and not plan.opts.zone:
            rest = self.cfg.zones or compute.region_zones(plan.region)
            zones += [z for z in rest if z != plan.zone]
        types = plan.choice.fitting if plan.fallback == "types" else plan.choice.fitting[:1]
        tried: list[str] = []
        attempt = 0
        last: NoCapacityError | None = None
        for candidate in types:
            for zone in zones:
                body = self._body(plan, definition, metadata, allocation_id, candidate, zone)
                try:
                    inst = self._insert(
                        compute, zone, body, request_id(allocation_id, attempt), allocation_id
                    )
                except NoCapacityError as exc:
                    tried.append(f"{candidate.name} in {zone} ({exc.args[0]})")
                    last = exc
                    attempt += 1
                    if isinstance(exc, QuotaError):
                        break  # a regional quota: no other zone of the region helps
                    continue
                self._forget_capacity(plan.region)
                self._inserts.settled(allocation_id)
                return self._resource(allocation_id, plan, candidate, inst)
        self._inserts.settled(allocation_id)  # every attempt DONE with an error: none made
        assert last is not None
        if len(tried) == 1:
            raise last
        said = f"{self._name}: {plan.region}: no capacity; tried {'; '.join(tried)}"
        if isinstance(last, NoRoomError):  # the last attempt's code, as aws's error carries
            raise type(last)(said, code=last.code)
        raise NoCapacityError(said)

    def _insert(
        self, compute: Compute, zone: str, body: dict[str, Any], rid: str, allocation_id: str
    ) -> dict[str, Any]:
        from drivers.gcp.compute import ApiRefused, OperationError

        where = f"{self._name}: {zone}"
        inserts = self._inserts
        try:
            op = inserts.insert(compute, zone, body, rid, allocation_id)
            compute.follow(op, OPERATION_SECONDS, where)
        except KeyboardInterrupt:
            inserts.interrupted(allocation_id)  # wherever it came, its cleanup is bounded
            raise
        except ApiRefused as exc:
            inserts.known(allocation_id)
            raise _usage(exc, _field_of(exc.message)) from None
        except OperationError as exc:
            inserts.known(allocation_id)
            raise _mapped(exc, zone, where) from None
        inserts.known(allocation_id)
        inst = compute.instance(zone, str(body["name"]))
        if inst is None:
            raise ShoalError(f"{where}: the insert was DONE but {body['name']} is not there")
        return inst

    def _body(
        self,
        plan: Plan,
        definition: LabelDefinition,
        metadata: dict[str, Any],
        allocation_id: str,
        candidate: Candidate,
        zone: str,
    ) -> dict[str, Any]:
        from drivers.vm.userdata import user_data
        from providers.core.timeutil import utcnow

        opts, cfg = plan.opts, self.cfg
        expires = definition.resources.expires
        # Metadata last: -o env cannot forge SHOAL_ALLOCATION_ID. The lifetime is Google's
        # (maxRunDuration), so the script arms no shutdown of its own.
        environment = opts.env | {str(k): str(v) for k, v in metadata.items()}
        script = user_data(allocation_id, expires=None, environment=environment, entry=opts.entry)
        labels = {**cfg.labels, **opts.labels}
        labels.update({
            ALLOCATION_LABEL: label_value(allocation_id),
            MANAGED_BY_LABEL: "shoal",
        })  # fmt: skip
        scheduling: dict[str, Any] = {}
        if expires is not None:
            labels[EXPIRES_LABEL] = str(math.ceil(expires.timestamp()))
            left = math.ceil((expires - utcnow()).total_seconds())
            scheduling["maxRunDuration"] = {"seconds": str(max(MIN_RUN_SECONDS, left))}
            scheduling["instanceTerminationAction"] = "DELETE"
        if plan.spot:
            scheduling.update(provisioningModel="SPOT", instanceTerminationAction="DELETE")
            scheduling.update(automaticRestart=False, onHostMaintenance="TERMINATE")
        accelerators: list[dict[str, Any]] = []
        if plan.accelerator and candidate.name.startswith("n1-"):
            accelerators.append({
                "acceleratorType": f"zones/{zone}/acceleratorTypes/{plan.accelerator}",
                "acceleratorCount": candidate.gpu_count,
            })  # fmt: skip
        if candidate.gpu_count or accelerators:
            # GPUs cannot live-migrate: Google refuses them with the default MIGRATE.
            scheduling.update(onHostMaintenance="TERMINATE", automaticRestart=False)
        disk: dict[str, Any] = {"sourceImage": plan.image, "labels": labels}
        disk_gb = cfg.disk_gb if opts.disk_gb is None else opts.disk_gb
        if disk_gb:
            disk["diskSizeGb"] = str(disk_gb)
        interface: dict[str, Any] = {"accessConfigs": [{"name": "External NAT"}]}
        network = opts.network or cfg.network
        subnetwork = opts.subnetwork or cfg.subnetwork
        if network:
            interface["network"] = _ref(network, "global/networks/")
        if subnetwork:
            region = zone.rsplit("-", 1)[0]
            interface["subnetwork"] = _ref(subnetwork, f"regions/{region}/subnetworks/")
        body: dict[str, Any] = {
            "name": instance_name(allocation_id),
            "machineType": f"zones/{zone}/machineTypes/{candidate.name}",
            "labels": labels,
            "disks": [{"boot": True, "autoDelete": True, "initializeParams": disk}],
            "networkInterfaces": [interface],
            "metadata": {"items": [{"key": "startup-script", "value": script.decode()}]},
        }
        if scheduling:
            body["scheduling"] = scheduling
        if opts.reservation == "none":
            body["reservationAffinity"] = {"consumeReservationType": "NO_RESERVATION"}
        elif opts.reservation and opts.reservation != "any":
            if plan.spot:
                raise UsageError(
                    "options.reservation: spot VMs do not consume reservations; drop "
                    "-o spot=true or -o reservation"
                )
            body["reservationAffinity"] = {
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": [opts.reservation],
            }
        if accelerators:
            body["guestAccelerators"] = accelerators
        account = opts.service_account or cfg.service_account
        if account:
            body["serviceAccounts"] = [
                {"email": account, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
            ]
        return body

    def _resource(
        self, allocation_id: str, plan: Plan, candidate: Candidate, inst: dict[str, Any]
    ) -> Resource:
        internal, external = addresses(inst)
        zone = str(inst.get("zone", "")).rsplit("/", 1)[-1]
        meta = {
            "instance": inst.get("name", ""),
            "instance_id": str(inst.get("id", "")),
            "project": self.compute().project,
            "region": plan.region,
            "zone": zone,
            "machine_type": candidate.name,
            "market": "spot" if plan.spot else "on-demand",
            "price": candidate.spot if plan.spot else candidate.on_demand,
            "image": plan.image,
            "internal_ip": internal,
            "external_ip": external,
            "expires_epoch": str((inst.get("labels") or {}).get(EXPIRES_LABEL) or ""),
        }
        return Resource(
            identifier=allocation_id,
            ip_addr=external or internal,
            metadata={k: v for k, v in meta.items() if v not in ("", None)},
        )

    def _located(self, res: Resource) -> tuple[str, str]:
        meta = res.metadata or {}
        zone = str(meta.get("zone") or "")
        name = str(meta.get("instance") or "")
        if zone and name:
            return zone, name
        found = self._by_label(res.identifier)
        if found:
            inst = found[0]
            return str(inst.get("zone", "")).rsplit("/", 1)[-1], str(inst.get("name", ""))
        return "", ""

    def _by_label(self, allocation_id: str) -> list[dict[str, Any]]:
        return self.compute().labelled(
            f"labels.{ALLOCATION_LABEL} = {label_value(allocation_id)}"
        )

    def status(self, res: Resource) -> str:
        zone, name = self._located(res)
        inst = self._instance(zone, name)
        holds = inst is not None and inst.get("status") in HOLDING
        return STATUS_ALLOCATED if holds else STATUS_NONE

    def _instance(self, zone: str, name: str, *, fresh: bool = False) -> dict[str, Any] | None:
        """instances.get; what was seen within SEEN_FOR_SECONDS serves again (`status ID`
        asks status() then describe(): one request, not two)."""
        if not (zone and name):
            return None
        seen = self._seen.get((zone, name))
        now = time.monotonic()
        if seen is not None and not fresh and now - seen[0] < SEEN_FOR_SECONDS:
            return seen[1]
        inst = self.compute().instance(zone, name)
        self._seen[(zone, name)] = (now, inst)
        return inst

    def describe(self, res: Resource) -> dict[str, Any]:
        """The VM's state, zone and addresses; for one gone, why (preempted, its lifetime
        reached, stopped from inside, deleted outside shoal)."""
        zone, name = self._located(res)
        inst = self._instance(zone, name)
        if inst is not None:
            out = instance_detail(inst)
            if inst.get("status") not in HOLDING:
                out["reason"] = "stopped"
                out["message"] = str(inst.get("statusMessage") or "stopped (from inside?)")
            return out
        out = {"state": "gone", "zone": zone, "instance": name}
        expires = str((res.metadata or {}).get("expires_epoch") or "")
        if zone and name and self._preempted(zone, name):
            out.update(reason="preempted", message="Google preempted the spot VM (deleted)")
        elif expires.isdigit() and int(expires) <= _now():
            out.update(
                reason="expired",
                message="deleted at the end of its lifetime (scheduling.maxRunDuration)",
            )
        else:
            out.update(reason="deleted", message="deleted outside shoal")
        return out

    def _preempted(self, zone: str, name: str) -> bool:
        try:
            ops = self.compute().operations_of(zone, "compute.instances.preempted")
        except ShoalError:
            return False
        return any(str(op.get("targetLink", "")).endswith(f"/instances/{name}") for op in ops)

    def deallocate(self, res: Resource) -> None:
        """instances.delete, waited for; a VM already gone is fine. A bare handle (the
        cleanup of an interrupted or killed alloc) first follows the allocation's insert to
        DONE (drivers/gcp/inserts.py: InsertInDoubt or LeftForRecovery while that cannot be
        known yet), then deletes its instance and every VM labelled with the allocation."""
        self._end(res)

    def end_leftovers(self, res: Resource) -> list[str]:
        """What a FAILED allocation left (an insert whose outcome its cleanup could not
        learn), found by its zone's operations and its label, deleted: the VMs deleted now."""
        return self._end(Resource(identifier=res.identifier))

    def _end(self, res: Resource) -> list[str]:
        from drivers.gcp.compute import ApiRefused, OperationError

        compute = self.compute()
        meta = res.metadata or {}
        bare = not (meta.get("zone") and meta.get("instance"))
        if not bare:
            targets = [(str(meta["zone"]), str(meta["instance"]))]
        else:
            name = instance_name(res.identifier)
            zone = self._inserts.settle(compute, res.identifier, name)
            targets = [(zone, name)] if zone else []
            targets += [
                (str(i.get("zone", "")).rsplit("/", 1)[-1], str(i.get("name", "")))
                for i in self._by_label(res.identifier)
            ]
            targets = list(dict.fromkeys(targets))
        deleted: list[str] = []
        self._seen.clear()  # what was read before the deletes says nothing after them
        for zone, name in targets:
            try:
                op = compute.delete(zone, name, request_id(res.identifier, -1))
            except ApiRefused as exc:
                if exc.reason != "resourceNotReady":
                    raise ShoalError(f"{self._name}: deleting {name} in {zone}: {exc}") from None
                # Another operation runs on it (Google's own delete at its lifetime, a
                # preemption): free again once it is done.
                raise RetryableError(
                    f"{self._name}: {name} in {zone} is busy ({exc.message}); free it again "
                    "in a moment"
                ) from None
            if op is None:
                continue
            try:
                compute.follow(op, OPERATION_SECONDS, f"{self._name}: {zone}")
            except OperationError as exc:
                if not any(e.code == "RESOURCE_NOT_FOUND" for e in exc.errors):
                    raise ShoalError(f"{self._name}: deleting {name} in {zone}: {exc}") from None
                continue
            deleted.append(name)
            self._forget_capacity(zone.rsplit("-", 1)[0])
        if bare:
            self._inserts.settled(res.identifier)
        return deleted

    # -- what the project holds for shoal ------------------------------------------------------

    def remote_allocations(self) -> list[dict[str, Any]]:
        now = _now()
        rows = []
        for inst in self.compute().labelled(f"labels.{MANAGED_BY_LABEL} = shoal"):
            labels = inst.get("labels") or {}
            ident = str(labels.get(ALLOCATION_LABEL) or "")
            if not ident:
                continue
            said = instance_detail(inst)
            expires_at = str(labels.get(EXPIRES_LABEL) or "")
            expires = _epoch_time(expires_at)
            holds = inst.get("status") in HOLDING
            overdue = holds and expires_at.isdigit() and int(expires_at) <= now
            note = " ".join(
                part
                for part in (
                    f"{inst.get('name')} {said['machine_type']} in {said['zone']}",
                    said["external_ip"] or said["internal_ip"],
                    "(spot)" if said["market"] == "spot" else "",
                    "past its expiry: `shoal free --expired --remote gcp` ends it"
                    if overdue
                    else "",
                )
                if part
            )
            rows.append({
                "id": ident,
                "driver": self._name,
                "status": inst.get("status", ""),
                "created": said["created"],
                "note": note,
                "expires": expires,
                "holds": holds,
                "expired": overdue,
                "instance": inst.get("name", ""),
                "machine_type": said["machine_type"],
                "zone": said["zone"],
                "market": said["market"],
                "internal_ip": said["internal_ip"],
                "external_ip": said["external_ip"],
            })  # fmt: skip
        return sorted(rows, key=lambda r: (str(r["created"]), str(r["id"])))

    # -- tasks and logs --------------------------------------------------------------------

    def located(self, res: Resource) -> tuple[str, str]:
        """(zone, instance name) of the allocation's VM; ("", "") when it has none."""
        return self._located(res)

    def labels_for(self, res: Resource) -> dict[str, str]:
        """The labels of what a task makes of the allocation's VM (a snapshot, an image)."""
        return {ALLOCATION_LABEL: label_value(res.identifier), MANAGED_BY_LABEL: "shoal"}

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        from drivers.definitions.options import task_options
        from drivers.gcp.tasks import TASKS, GcpTask

        checked = task_options(TASKS, task, options)
        return None if checked is None else GcpTask(self, task, checked)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The VM's serial console (port 1: the boot, the startup script's output); with
        `follow`, what is new every few seconds until the VM stops."""
        from drivers.gcp.tasks import POLL_SECONDS, console

        zone, name = self.located(res)
        if not (zone and name):
            raise UsageError(f"{res.identifier}: no instance of its own to read the console of")
        compute = self.compute()

        def holds() -> bool:
            inst = compute.instance(zone, name)
            return inst is not None and inst.get("status") in HOLDING

        yield from console(
            compute,
            zone,
            name,
            where=f"{self._name}: {res.identifier}",
            ident=res.identifier,
            tail=tail,
            follow=follow,
            holds=holds,
            poll=POLL_SECONDS,
            warn=self._settings.warn,
        )


class NoRoomError(NoCapacityError):
    """The insert's operation found no room: `code` is Google's, `scope` "zone" (another
    zone may have room) or "region" (a regional quota: no zone of it helps). Placement's
    failover reads both, as it reads the aws driver's LaunchCapacityError."""

    scope = "zone"

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class QuotaError(NoRoomError):
    """QUOTA_EXCEEDED: the project's limit in the region, not the zone's room."""

    scope = "region"


def refuse_secret(where: str, name: str) -> None:
    if is_secret_name(name):
        raise UsageError(f"{where}: looks like a credential; {SECRET_FIX}")


def addresses(inst: dict[str, Any]) -> tuple[str, str]:
    internal = external = ""
    for nic in inst.get("networkInterfaces") or []:
        internal = internal or str(nic.get("networkIP") or "")
        for access in nic.get("accessConfigs") or []:
            external = external or str(access.get("natIP") or "")
    return internal, external


def instance_detail(inst: dict[str, Any]) -> dict[str, Any]:
    internal, external = addresses(inst)
    scheduling = inst.get("scheduling") or {}
    labels = inst.get("labels") or {}
    return {
        "state": inst.get("status", ""),
        "instance": inst.get("name", ""),
        "instance_id": str(inst.get("id", "")),
        "machine_type": str(inst.get("machineType", "")).rsplit("/", 1)[-1],
        "zone": str(inst.get("zone", "")).rsplit("/", 1)[-1],
        "market": "spot" if scheduling.get("provisioningModel") == "SPOT" else "on-demand",
        "internal_ip": internal,
        "external_ip": external,
        "created": _utc_stamp(str(inst.get("creationTimestamp", ""))),
        "expires": _epoch_time(str(labels.get(EXPIRES_LABEL) or "")),
    }


def _utc_stamp(value: str) -> str:
    """Google's stamps carry Pacific time (`2026-12-01T10:00:00.000-08:00`); shoal's JSON
    says UTC with a Z, as every other time it prints (sorting and --sort compare text)."""
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
    from providers.core.wire import format_time

    return format_time(datetime.fromtimestamp(int(value), tz=UTC))


def _now() -> float:
    """Epoch seconds now (the tests move it on, as the stand-in's clock)."""
    from providers.core.timeutil import utcnow

    return utcnow().timestamp()


def _ref(value: str, prefix: str) -> str:
    return value if "/" in value else prefix + value


def _field_of(message: str) -> str:
    low = message.lower()
    for word, name in (
        ("machinetype", "options.machine_type"),
        ("machine type", "options.machine_type"),
        ("image", "options.image"),
        ("acceleratortype", "options.gpu"),
        ("subnetwork", "options.subnetwork"),
        ("network", "options.network"),
        ("serviceaccount", "options.service_account"),
        ("service account", "options.service_account"),
        ("zone", "options.zone"),
    ):
        if word in low:
            return name
    return ""


def _usage(exc: ApiRefused, field_name: str) -> ShoalError:
    if exc.status in (400, 404):
        where = f"{field_name}: " if field_name else ""
        return UsageError(f"{where}Compute Engine refused it (HTTP {exc.status}: {exc.message})")
    return ShoalError(str(exc))


def _mapped(exc: OperationError, zone: str, where: str) -> ShoalError:
    for error in exc.errors:
        if error.code in POOL_CODES:
            return NoRoomError(
                f"{where}: no capacity in zone {zone} ({error.code})", code=error.code
            )
        if error.code == "QUOTA_EXCEEDED":
            quota = error.quota
            metric = quota.get("metricName") or quota.get("limitName") or "a quota"
            region = (quota.get("dimensions") or {}).get("region") or zone.rsplit("-", 1)[0]
            limit = quota.get("limit")
            said = f", limit {limit:g}" if isinstance(limit, (int, float)) else ""
            return QuotaError(
                f"{where}: quota {metric} exceeded in region {region}{said} ({error.message}); "
                "free VMs or ask Google for more",
                code=error.code,
            )
    first = exc.errors[0]
    field_name = _field_of(first.message)
    if first.code.startswith(("INVALID", "RESOURCE_NOT_FOUND")) or field_name:
        prefix = f"{field_name}: " if field_name else ""
        return UsageError(f"{prefix}{where}: Compute Engine refused the insert ({exc})")
    return ShoalError(f"{where}: the insert failed ({exc})")
