"""The `kubernetes` driver: each allocation is a Pod (or a Job) in a cluster.

State lives in the cluster: the object carries shoal's labels and its allocation id, so
every machine running shoal against the cluster sees it, and capacity is the cluster's own
node and pod arithmetic (the `kubernetes` provider's), not a local count. The ledger records
what this machine did. The driver is remote: it never counts against this host.

Config (`[drivers."kubernetes/NAME"]`): context, namespace, kind (pod | job),
grace_seconds, image (a default). Options (`-o`): image, entry, env, pool, node_selector,
spot (true: spot nodes only, their taints tolerated; false: on-demand only), gpus,
gpu_resource, kind.
"""

from __future__ import annotations

import math
import re
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, Field

from drivers.definitions.fields import ENTRY, ENV, Command, Env
from drivers.definitions.options import check_meta_names, load_config, parse_options
from drivers.kubernetes import manifest as M
from drivers.spec.base import UNLIMITED, ResourceDriverTask
from drivers.spec.types import (
    ALLOCATION_ID_KEY,
    STATUS_ALLOCATED,
    STATUS_NONE,
    LabelDefinition,
    Resource,
    Resources,
)
from providers.core.errors import UsageError, shown
from providers.core.settings import Settings
from providers.core.strict import Count, Strict

if TYPE_CHECKING:
    from providers.kubernetes.catalog import KubernetesCatalog
    from providers.kubernetes.client import KubeClient

# [prefix/]name: a DNS subdomain prefix, a name of up to 63 characters
_LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
LOG_FOLLOW_TIMEOUT_SECONDS = 7 * 24 * 3600.0


def _label_key(name: str) -> str:
    if not _LABEL_KEY.match(name):
        raise ValueError(f"{shown(name)} is not a label name ([prefix/]name)")
    return name


def _label_value(value: str) -> str:
    if not _LABEL_VALUE.match(value):
        raise ValueError(f"{shown(value)} is not a label value (letters, digits, - _ .)")
    return value


LabelValue = Annotated[str, AfterValidator(_label_value)]
Kind = Literal["pod", "job"]


class KubernetesConfig(Strict):
    """[drivers."kubernetes/INSTANCE"]"""

    context: str = Field("", description="kubeconfig context (default: SHOAL_KUBE_CONTEXT)")
    namespace: str = Field("", description="namespace for the workloads (default: the context's)")
    kind: Kind = Field("pod", description="what an allocation creates")
    grace_seconds: Count = Field(30, description="termination grace period on free")
    image: str = Field("", description="image used when a definition names none")


class KubernetesOptions(Strict):
    image: str = Field("", description="container image, e.g. busybox:1.36")
    entry: Command = Field([], description=ENTRY)
    env: Env = Field({}, description=ENV)
    pool: LabelValue | None = Field(None, description="node pool (value of the pool label)")
    node_selector: dict[Annotated[str, AfterValidator(_label_key)], LabelValue] = Field(
        {}, description="extra node labels to require"
    )
    spot: bool | None = Field(None, description="true: spot only; false: on-demand only")
    gpus: Count = Field(0, description="GPUs to request")
    gpu_resource: str = Field("nvidia.com/gpu", description="extended resource name of the GPUs")
    kind: Kind | None = Field(None, description="default: the instance's")


class KubernetesDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self.cfg = KubernetesConfig()
        self._catalog: KubernetesCatalog | None = None
        self._pool_labels: dict[str, str] = {}

    def name(self) -> str:
        return self._name

    def is_remote(self) -> bool:
        return True

    def prepare(self, config: bytes) -> None:
        paths = self._settings.paths
        self.cfg = load_config(KubernetesConfig, config, self._name, paths.config_file)

    # -- the cluster ---------------------------------------------------------------------

    def catalog(self) -> KubernetesCatalog:
        if self._catalog is None:
            from providers.kubernetes.catalog import KubernetesCatalog

            catalog = KubernetesCatalog.from_settings(self._settings)
            if self.cfg.context:
                catalog.context = self.cfg.context
            self._catalog = catalog
        return self._catalog

    def client(self, context: str | None = None) -> KubeClient:
        from providers.models import RegionSpec

        return self.catalog().client(RegionSpec(name=context) if context else None)

    def _namespace(self, client: KubeClient) -> str:
        return self.cfg.namespace or client.connection.namespace or "default"

    # -- definitions and capacity --------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> KubernetesOptions:
        """The options, with the instance's image where they name none."""
        opts = parse_options(KubernetesOptions, definition.options)
        opts.image = opts.image or self.cfg.image
        if not opts.image:
            raise UsageError(
                "options.image: required, the container image; e.g. -o image=busybox:1.36 "
                f'(or set image in [drivers."{self._name}"])'
            )
        return opts

    def validate_definition(self, definition: LabelDefinition) -> None:
        self._options(definition)
        if definition.resources.disks:
            raise UsageError("resources.disks: the kubernetes driver takes no disks")

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        check_meta_names(metadata)

    def _selector(self, opts: KubernetesOptions) -> dict[str, str]:
        selector = dict(opts.node_selector)
        if opts.pool:
            selector[self._pool_label(opts.pool)] = opts.pool
        return selector

    def _pool_label(self, pool: str) -> str:
        """The label that names `pool` on this cluster's nodes: the first of the pool chain
        (configured label, then Karpenter, GKE, EKS, AKS) that some node carries with it,
        as `resources` groups them."""
        if pool not in self._pool_labels:
            client = self.client()
            chain = self.catalog().rules.pool_chain()
            found = chain[0]
            for label in chain:
                params = {"labelSelector": f"{label}={pool}"}
                if next(iter(client.list("/api/v1/nodes", params, limit=1)), None) is not None:
                    found = label
                    break
            self._pool_labels[pool] = found
        return self._pool_labels[pool]

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        """How many fit on the nodes the definition may use, from the cluster's own node and
        pod arithmetic; pods of shoal's still waiting to be scheduled are taken off."""
        from drivers.kubernetes.fit import count_fits

        opts = self._options(req)
        catalog = self.catalog()
        client = self.client()
        # milli-units, as the arithmetic counts: cores, bytes, devices
        wanted = {"cpu": req.resources.cpu * 1000, "memory": req.resources.ram * 2**30 * 1000}
        if opts.gpus:
            wanted[opts.gpu_resource] = opts.gpus * 1000
        if not any(wanted.values()):
            return UNLIMITED
        return count_fits(
            client,
            catalog.rules,
            selector=self._selector(opts),
            spot=opts.spot,
            wanted=wanted,
            tolerations=M.SPOT_TOLERATIONS if opts.spot else [],
        )

    # -- lifecycle -----------------------------------------------------------------------

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        from providers.core.timeutil import utcnow

        # activeDeadlineSeconds counts from the pod's start: the seconds left until the
        # ledger row's expiry (decided by the service), rounded up so it never ends before.
        expires = definition.resources.expires
        left = None if expires is None else (expires - utcnow()).total_seconds()
        deadline = None if left is None else max(1, math.ceil(left))
        opts = self._options(definition)
        client = self.client()
        namespace = self._namespace(client)
        allocation_id = str(metadata.get(ALLOCATION_ID_KEY, ""))
        name = M.object_name(allocation_id)
        # Metadata last: -o env cannot forge SHOAL_ALLOCATION_ID.
        env = opts.env | {str(k): str(v) for k, v in metadata.items()}
        kind = opts.kind or self.cfg.kind
        spec = M.pod_spec(
            image=opts.image,
            argv=opts.entry,
            env=env,
            cpu=definition.resources.cpu,
            ram_gib=definition.resources.ram,
            gpus=opts.gpus,
            gpu_resource=opts.gpu_resource,
            node_selector=self._selector(opts),
            spot=opts.spot,
            spot_rules=self.catalog().rules.spot_rules,
            deadline_seconds=deadline,
        )
        body = M.manifest(kind, name, namespace, allocation_id, socket.gethostname(), spec)
        created = client.create(M.path(kind, namespace), body)
        uid = str((created.get("metadata") or {}).get("uid", ""))
        return Resource(
            identifier=allocation_id,
            metadata={
                "kind": kind,
                "namespace": namespace,
                "name": name,
                "context": client.connection.context,
                "uid": uid,
            },
        )

    def _where(self, res: Resource) -> tuple[KubeClient, str, str, str]:
        meta = res.metadata or {}
        client = self.client(meta.get("context") or None)
        kind = str(meta.get("kind") or self.cfg.kind)
        namespace = str(meta.get("namespace") or self._namespace(client))
        name = str(meta.get("name") or M.object_name(res.identifier))
        return client, kind, namespace, name

    def _get(self, res: Resource) -> tuple[str, dict[str, Any] | None, KubeClient, str]:
        from providers.core.errors import NotFoundError

        client, kind, namespace, name = self._where(res)
        try:
            return kind, client.get(M.path(kind, namespace, name)), client, namespace
        except NotFoundError:
            return kind, None, client, namespace

    def status(self, res: Resource) -> str:
        from drivers.kubernetes.state import holds

        kind, obj, _, _ = self._get(res)
        return STATUS_ALLOCATED if obj is not None and holds(kind, obj) else STATUS_NONE

    def describe(self, res: Resource) -> dict[str, Any]:
        """The workload as the cluster sees it: phase, reason (e.g. Unschedulable,
        ImagePullBackOff), message, node, exit code; shown by `shoal status ID`."""
        from drivers.kubernetes.state import describe_job, describe_pod

        kind, obj, client, namespace = self._get(res)
        if obj is None:
            return {"phase": "Gone", "reason": "NotFound", "message": "the object is gone"}
        if kind == "pod":
            return describe_pod(obj)
        return describe_job(obj, client, namespace)

    def remote_allocations(self) -> list[dict[str, Any]]:
        """shoal's pods and jobs in the namespace, made by any machine (the labels say)."""
        from drivers.kubernetes.state import describe_pod, holds

        client = self.client()
        namespace = self._namespace(client)
        selector = {"labelSelector": f"{M.MANAGED_BY}=shoal"}
        rows = []
        for kind in ("pod", "job"):
            for obj in client.list(M.path(kind, namespace), selector):
                meta = obj.get("metadata") or {}
                if kind == "pod" and "job-name" in (meta.get("labels") or {}):
                    continue  # a Job's pod: the Job is the allocation
                detail = describe_pod(obj) if kind == "pod" else {}
                held = holds(kind, obj)
                name, node = meta.get("name", ""), detail.get("node", "")
                rows.append(
                    {
                        # The fields every driver's listing shares (`status` renders them
                        # alike), then this driver's own.
                        "id": (meta.get("labels") or {}).get(M.ALLOCATION_LABEL, ""),
                        "driver": self.name(),
                        "status": detail.get("phase") or ("Active" if held else "Finished"),
                        "created": meta.get("creationTimestamp", ""),
                        "note": " ".join(
                            part
                            for part in (
                                f"{kind} {namespace}/{name}",
                                f"on {node}" if node else "",
                                f"({detail['reason']})" if detail.get("reason") else "",
                            )
                            if part
                        ),
                        "kind": kind,
                        "namespace": namespace,
                        "name": meta.get("name", ""),
                        "holds": held,
                        "phase": detail.get("phase", ""),
                        "reason": detail.get("reason", ""),
                        "node": detail.get("node", ""),
                        "owner": (meta.get("annotations") or {}).get(M.OWNER_ANNOTATION, ""),
                    }
                )
        return sorted(rows, key=lambda r: (str(r["created"]), str(r["id"])))

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        return None

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The pod's log (a Job's newest pod), streamed as the API serves it (`pods/NAME/log`,
        `tailLines`, `follow`): with `follow` until its container ends."""
        from providers.core.errors import NotFoundError

        client, kind, namespace, name = self._where(res)
        pod = name
        if kind == "job":
            selector = {"labelSelector": f"job-name={name}"}
            pods = list(client.list(M.path("pod", namespace), selector))
            if not pods:
                raise NotFoundError(f"{res.identifier}: job {namespace}/{name} has no pod yet")
            newest = max(pods, key=lambda p: str(_meta(p).get("creationTimestamp")))
            pod = str(_meta(newest).get("name") or name)
        params = {"container": M.CONTAINER}
        if tail is not None:
            params["tailLines"] = str(tail)
        if follow:
            params["follow"] = "true"
        target = f"{M.path('pod', namespace, pod)}/log"
        wait = None
        if follow:
            # Reached and there, under the usual timeouts; then the log is as quiet as the
            # workload is, so its read has none to speak of.
            client.get(M.path("pod", namespace, pod))
            wait = LOG_FOLLOW_TIMEOUT_SECONDS
        response = client.http.open(
            "GET", target, params=params, headers={"Accept": "*/*"}, timeout=wait
        )
        try:
            yield from response.iter_bytes()
        finally:
            response.close()

    def deallocate(self, res: Resource) -> None:
        client, kind, namespace, name = self._where(res)
        kinds = [kind]
        if not (res.metadata or {}).get("kind"):
            # A bare handle (cleanup after a failed or interrupted alloc) does not say whether
            # `-o kind=job` made a Job: delete both names; the missing one is a harmless 404.
            kinds = ["pod", "job"]
        for each in kinds:
            client.delete(M.path(each, namespace, name), grace_seconds=self.cfg.grace_seconds)


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}
