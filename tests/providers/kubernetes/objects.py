"""Node and Pod objects as the Kubernetes API returns them (v1 JSON), for EKS, GKE, AKS
and Karpenter clusters.

Labels follow each platform's documentation: the well-known Kubernetes labels
(https://kubernetes.io/docs/reference/labels-annotations-taints/), EKS managed node groups
(eks.amazonaws.com/nodegroup, eks.amazonaws.com/capacityType,
https://docs.aws.amazon.com/eks/latest/userguide/managed-node-groups.html), GKE node pools
(cloud.google.com/gke-nodepool, gke-spot, gke-accelerator,
https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms), AKS agent pools
(kubernetes.azure.com/agentpool, kubernetes.azure.com/scalesetpriority,
https://learn.microsoft.com/azure/aks/spot-node-pool), Karpenter (karpenter.sh/nodepool,
karpenter.sh/capacity-type, https://karpenter.sh/docs/reference/well-known-labels/) and
NVIDIA GPU feature discovery (nvidia.com/gpu.product, nvidia.com/gpu.count).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from typing import Any

CREATED = "2026-03-01T08:00:00Z"
HEARTBEAT = "2026-03-07T03:28:00Z"


def _conditions(ready: str | None) -> list[dict[str, Any]]:
    rows = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
    ]
    if ready is not None:
        reason = {"True": "KubeletReady", "False": "KubeletNotReady"}.get(
            ready, "NodeStatusUnknown"
        )
        rows.append(("Ready", ready, reason))
    return [
        {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": HEARTBEAT,
            "lastTransitionTime": CREATED,
            "reason": reason,
            "message": f"{reason}",
        }
        for kind, status, reason in rows
    ]


def node(
    name: str,
    *,
    labels: dict[str, str],
    cpu: str = "7910m",
    memory: str = "31792000Ki",
    allocatable: dict[str, str] | None = None,
    ready: str | None = "True",
    unschedulable: bool = False,
    zone: str = "",
) -> dict[str, Any]:
    """A Node; `allocatable` adds or overrides entries (GPUs, hugepages, ...)."""
    alloc = {
        "cpu": cpu,
        "ephemeral-storage": "95491281146",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": memory,
        "pods": "110",
    }
    alloc.update(allocatable or {})
    capacity = dict(alloc, **{"ephemeral-storage": "104845292Ki"})
    all_labels = {
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
    }
    if zone:
        all_labels["topology.kubernetes.io/zone"] = zone
        # us-east-1a -> us-east-1, us-central1-a -> us-central1, eastus-1 -> eastus
        all_labels["topology.kubernetes.io/region"] = re.sub(r"-?[a-z0-9]$", "", zone)
    all_labels.update(labels)
    obj: dict[str, Any] = {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": "123456",
            "creationTimestamp": CREATED,
            "labels": all_labels,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"providerID": f"test:///{name}"},
        "status": {
            "capacity": capacity,
            "allocatable": alloc,
            "conditions": _conditions(ready),
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "containerRuntimeVersion": "containerd://1.7.22",
                "kubeletVersion": "v1.31.2",
                "operatingSystem": "linux",
            },
        },
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
        obj["spec"]["taints"] = [
            {
                "key": "node.kubernetes.io/unschedulable",
                "effect": "NoSchedule",
                "timeAdded": HEARTBEAT,
            }
        ]
    return obj


def _gpu_alloc(count: int, resource: str = "nvidia.com/gpu") -> dict[str, str]:
    return {resource: str(count)} if count else {}


def eks_node(
    name: str,
    *,
    nodegroup: str,
    instance_type: str,
    spot: bool = False,
    zone: str = "us-east-1a",
    gpus: int = 0,
    product: str = "",
    **kw: Any,
) -> dict[str, Any]:
    labels = {
        "node.kubernetes.io/instance-type": instance_type,
        "eks.amazonaws.com/nodegroup": nodegroup,
        "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
        "eks.amazonaws.com/nodegroup-image": "ami-0123456789abcdef0",
    }
    if product:
        labels["nvidia.com/gpu.product"] = product
        labels["nvidia.com/gpu.count"] = str(gpus)
        labels["k8s.amazonaws.com/accelerator"] = "nvidia-" + product.split("-")[1].lower()
    alloc = dict(_gpu_alloc(gpus), **kw.pop("allocatable", {}))
    return node(name, labels=labels, zone=zone, allocatable=alloc, **kw)


def gke_node(
    name: str,
    *,
    pool: str,
    machine_type: str,
    spot: bool = False,
    preemptible: bool = False,
    zone: str = "us-central1-a",
    gpus: int = 0,
    accelerator: str = "",
    **kw: Any,
) -> dict[str, Any]:
    labels = {
        "node.kubernetes.io/instance-type": machine_type,
        "cloud.google.com/gke-nodepool": pool,
        "cloud.google.com/gke-os-distribution": "cos",
        "cloud.google.com/machine-family": machine_type.split("-")[0],
    }
    if spot:
        labels["cloud.google.com/gke-spot"] = "true"
    if preemptible:
        labels["cloud.google.com/gke-preemptible"] = "true"
    if accelerator:
        labels["cloud.google.com/gke-accelerator"] = accelerator
        labels["cloud.google.com/gke-gpu"] = "true"
    alloc = dict(_gpu_alloc(gpus), **kw.pop("allocatable", {}))
    return node(name, labels=labels, zone=zone, allocatable=alloc, **kw)


def aks_node(
    name: str,
    *,
    pool: str,
    vm_size: str,
    spot: bool = False,
    zone: str = "eastus-1",
    gpus: int = 0,
    **kw: Any,
) -> dict[str, Any]:
    labels = {
        "node.kubernetes.io/instance-type": vm_size,
        "kubernetes.azure.com/agentpool": pool,
        "agentpool": pool,
        "kubernetes.azure.com/mode": "user",
        "kubernetes.azure.com/cluster": "MC_rg_aks_eastus",
    }
    if spot:
        labels["kubernetes.azure.com/scalesetpriority"] = "spot"
    if gpus:
        labels["kubernetes.azure.com/accelerator"] = "nvidia"
    alloc = dict(_gpu_alloc(gpus), **kw.pop("allocatable", {}))
    return node(name, labels=labels, zone=zone, allocatable=alloc, **kw)


def karpenter_node(
    name: str,
    *,
    nodepool: str,
    instance_type: str,
    spot: bool = False,
    zone: str = "us-west-2b",
    gpus: int = 0,
    product: str = "",
    **kw: Any,
) -> dict[str, Any]:
    labels = {
        "node.kubernetes.io/instance-type": instance_type,
        "karpenter.sh/nodepool": nodepool,
        "karpenter.sh/capacity-type": "spot" if spot else "on-demand",
        "karpenter.sh/initialized": "true",
        "karpenter.sh/registered": "true",
        "karpenter.k8s.aws/instance-family": instance_type.split(".")[0],
    }
    if product:
        labels["nvidia.com/gpu.product"] = product
        labels["karpenter.k8s.aws/instance-gpu-count"] = str(gpus)
    alloc = dict(_gpu_alloc(gpus), **kw.pop("allocatable", {}))
    return node(name, labels=labels, zone=zone, allocatable=alloc, **kw)


def container(
    name: str = "main",
    *,
    requests: dict[str, str] | None = None,
    limits: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    obj: dict[str, Any] = {
        "name": name,
        "image": "registry.example/app:1.0",
        "resources": resources,
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    }
    if restart_policy is not None:
        obj["restartPolicy"] = restart_policy
    return obj


def pod(
    name: str,
    node_name: str | None,
    *,
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    overhead: dict[str, str] | None = None,
    phase: str = "Running",
    namespace: str = "default",
    deadline: int | None = None,
    start: str | None = CREATED,
    created: str = CREATED,
    owner: str | None = "ReplicaSet",
    annotations: dict[str, str] | None = None,
    pod_requests: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod; `node_name=None` leaves it unscheduled (Pending)."""
    spec: dict[str, Any] = {
        "containers": containers if containers is not None else [container()],
        "restartPolicy": "Always",
        "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "priority": 0,
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            }
        ],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
        spec["runtimeClassName"] = "kata-fc"
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if pod_requests:
        spec["resources"] = {"requests": pod_requests}
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{namespace}-{name}",
        "resourceVersion": "987654",
        "creationTimestamp": created,
        "labels": {"app": name.rsplit("-", 1)[0]},
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": f"{name}-owner",
                "uid": f"uid-owner-{name}",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    if annotations:
        meta["annotations"] = annotations
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if node_name is not None and start is not None:
        status["startTime"] = start
        status["hostIP"] = "10.0.0.1"
    if node_name is None:
        status["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            }
        ]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def simple_pod(
    name: str, node_name: str | None, cpu: str = "1", memory: str = "1Gi", gpu: str = "", **kw: Any
) -> dict[str, Any]:
    """A one-container pod requesting cpu, memory and optionally NVIDIA GPUs."""
    requests = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {"memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
        limits["nvidia.com/gpu"] = gpu
    return pod(name, node_name, containers=[container(requests=requests, limits=limits)], **kw)


def daemon_pod(name: str, node_name: str) -> dict[str, Any]:
    """A DaemonSet pod (a log shipper): its requests count, but not toward instances in use."""
    return simple_pod(name, node_name, cpu="100m", memory="128Mi", owner="DaemonSet")


# -- a large cluster of realistic objects (the benchmark's) ------------------------------------
#
# Objects as a live cluster lists them: managed fields (server-side apply's record of who set
# each field), env, volumes, probes, annotations, container statuses. A Deployment's pod is
# ~10 KB of compact JSON (~19 KB with an Istio sidecar: a fifth of the services), a DaemonSet's
# ~10 KB, a static pod's ~9.5 KB, a training pod's ~18 KB; a node with its image list ~8 KB.
# Pods of one workload share their template's dicts (only names, IPs and times differ), so a
# generator can build 100,000 of them in little memory.


def _fields_v1(obj: Any) -> Any:
    """A managedFields `fieldsV1` tree for `obj`: "f:key" per field, `k:{"name":..}` per
    named list item, as the API server records them."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {".": {}} if obj else {}
        for key, value in obj.items():
            out[f"f:{key}"] = _fields_v1(value)
        return out
    if isinstance(obj, list) and obj and all(isinstance(v, dict) and "name" in v for v in obj):
        return {'k:{"name":"' + str(v["name"]) + '"}': {**_fields_v1(v), ".": {}} for v in obj}
    return {}


def _managed(manager: str, operation: str, time: str, fields: Any, sub: str = "") -> Any:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if sub:
        entry["subresource"] = sub
    return entry


def _env(prefix: str, n: int) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {
            "name": "POD_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}},
        },
        {
            "name": "POD_NAMESPACE",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
        },
        {
            "name": "NODE_NAME",
            "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}},
        },
        {
            "name": "DB_PASSWORD",
            "valueFrom": {"secretKeyRef": {"name": f"{prefix}-db", "key": "password"}},
        },
    ]
    env += [
        {
            "name": f"{prefix.upper().replace('-', '_')}_SETTING_{k}",
            "value": f"value-{k}-" + "x" * (k % 24),
        }
        for k in range(n)
    ]
    return env


def _probe(port: int, path: str) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": port, "scheme": "HTTP"},
        "initialDelaySeconds": 10,
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }


def _token_volume(suffix: str) -> dict[str, Any]:
    return {
        "name": f"kube-api-access-{suffix}",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {
                    "configMap": {
                        "name": "kube-root-ca.crt",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                    }
                },
                {
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "namespace",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                            }
                        ]
                    }
                },
            ],
            "defaultMode": 420,
        },
    }


def _mounts(names: list[str]) -> list[dict[str, Any]]:
    return [
        {"name": n, "mountPath": f"/var/run/{n}", "readOnly": i % 2 == 0}
        for i, n in enumerate(names)
    ]


def _istio_proxy() -> dict[str, Any]:
    args = [
        "proxy",
        "sidecar",
        "--domain",
        "$(POD_NAMESPACE).svc.cluster.local",
        "--proxyLogLevel=warning",
        "--proxyComponentLogLevel=misc:error",
        "--log_output_level=default:info",
    ]
    return {
        "name": "istio-proxy",
        "image": "docker.io/istio/proxyv2:1.23.2",
        "args": args,
        "ports": [{"name": "http-envoy-prom", "containerPort": 15090, "protocol": "TCP"}],
        "env": _env("istio", 10),
        "resources": {
            "limits": {"cpu": "2", "memory": "1Gi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "volumeMounts": _mounts(
            [
                "workload-socket",
                "credential-socket",
                "workload-certs",
                "istiod-ca-cert",
                "istio-data",
                "istio-envoy",
                "istio-token",
                "istio-podinfo",
            ]
        ),
        "readinessProbe": _probe(15021, "/healthz/ready"),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {
            "capabilities": {"drop": ["ALL"]},
            "privileged": False,
            "runAsUser": 1337,
            "runAsGroup": 1337,
            "runAsNonRoot": True,
            "readOnlyRootFilesystem": True,
            "allowPrivilegeEscalation": False,
        },
    }


def _istio_init() -> dict[str, Any]:
    return {
        "name": "istio-init",
        "image": "docker.io/istio/proxyv2:1.23.2",
        "args": [
            "istio-iptables",
            "-p",
            "15001",
            "-z",
            "15006",
            "-u",
            "1337",
            "-m",
            "REDIRECT",
            "-i",
            "*",
            "-x",
            "",
            "-b",
            "*",
            "-d",
            "15090,15021,15020",
            "--log_output_level=default:info",
        ],
        "resources": {
            "limits": {"cpu": "2", "memory": "1Gi"},
            "requests": {"cpu": "100m", "memory": "128Mi"},
        },
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"], "drop": ["ALL"]},
            "runAsUser": 0,
            "runAsNonRoot": False,
        },
    }


def _app(name: str, image: str, resources: dict[str, Any], n_env: int) -> dict[str, Any]:
    return {
        "name": name,
        "image": image,
        "args": ["--config=/etc/app/config.yaml", "--port=8080", "--metrics-port=9090"],
        "ports": [
            {"name": "http", "containerPort": 8080, "protocol": "TCP"},
            {"name": "metrics", "containerPort": 9090, "protocol": "TCP"},
        ],
        "env": _env(name, n_env),
        "resources": resources,
        "volumeMounts": _mounts(["config", "tls", "cache", "kube-api-access"]),
        "livenessProbe": _probe(8080, "/healthz"),
        "readinessProbe": _probe(8080, "/ready"),
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent",
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True},
    }


class _Template:
    """One workload's pod template: what its pods share."""

    def __init__(
        self,
        app: str,
        namespace: str,
        containers: list[dict[str, Any]],
        *,
        init: list[dict[str, Any]] | None = None,
        owner: str = "ReplicaSet",
        deadline: int | None = None,
        istio: bool = False,
        extra_volumes: list[dict[str, Any]] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> None:
        self.app, self.namespace, self.owner = app, namespace, owner
        self.hash = f"{zlib.crc32(app.encode()):08x}"[:8] + "c5"
        self.labels = {
            "app": app,
            "app.kubernetes.io/name": app,
            "app.kubernetes.io/instance": f"{app}-prod",
            "app.kubernetes.io/version": "1.42.0",
            "app.kubernetes.io/managed-by": "Helm",
        }
        if owner == "ReplicaSet":
            self.labels["pod-template-hash"] = self.hash
        self.annotations = {
            "kubectl.kubernetes.io/restartedAt": "2026-02-27T12:00:00Z",
            "prometheus.io/scrape": "true",
            "prometheus.io/port": "9090",
            "prometheus.io/path": "/metrics",
            "cluster-autoscaler.kubernetes.io/safe-to-evict": "true",
            "checksum/config": "3f2a" * 16,
            **(annotations or {}),
        }
        volumes = [
            {"name": "config", "configMap": {"name": f"{app}-config", "defaultMode": 420}},
            {"name": "tls", "secret": {"secretName": f"{app}-tls", "defaultMode": 420}},
            {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
            *(extra_volumes or []),
        ]
        if istio:
            self.labels.update(
                {
                    "security.istio.io/tlsMode": "istio",
                    "service.istio.io/canonical-name": app,
                    "service.istio.io/canonical-revision": "1.42.0",
                }
            )
            self.annotations.update(
                {
                    "istio.io/rev": "default",
                    "kubectl.kubernetes.io/default-container": app,
                    "sidecar.istio.io/status": '{"initContainers":["istio-init"],"containers":'
                    '["istio-proxy"],"volumes":["workload-socket","credential-socket",'
                    '"workload-certs","istio-envoy","istio-data","istio-podinfo","istio-token",'
                    '"istiod-ca-cert"],"imagePullSecrets":null,"revision":"default"}',
                }
            )
            volumes += [
                {"name": "workload-socket", "emptyDir": {}},
                {"name": "credential-socket", "emptyDir": {}},
                {"name": "workload-certs", "emptyDir": {}},
                {"name": "istio-envoy", "emptyDir": {"medium": "Memory"}},
                {"name": "istio-data", "emptyDir": {}},
                {
                    "name": "istio-podinfo",
                    "downwardAPI": {
                        "items": [
                            {
                                "path": "labels",
                                "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"},
                            },
                            {
                                "path": "annotations",
                                "fieldRef": {
                                    "apiVersion": "v1",
                                    "fieldPath": "metadata.annotations",
                                },
                            },
                        ],
                        "defaultMode": 420,
                    },
                },
                {
                    "name": "istio-token",
                    "projected": {
                        "sources": [
                            {
                                "serviceAccountToken": {
                                    "audience": "istio-ca",
                                    "expirationSeconds": 43200,
                                    "path": "istio-token",
                                }
                            }
                        ],
                        "defaultMode": 420,
                    },
                },
                {
                    "name": "istiod-ca-cert",
                    "configMap": {"name": "istio-ca-root-cert", "defaultMode": 420},
                },
            ]
            containers = [*containers, _istio_proxy()]
            init = [*(init or []), _istio_init()]
        self.volumes = [*volumes, _token_volume(self.hash[:5])]
        self.containers, self.init = containers, init
        self.spec: dict[str, Any] = {
            "volumes": self.volumes,
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": app,
            "serviceAccount": app,
            "securityContext": {
                "runAsUser": 1000,
                "runAsGroup": 1000,
                "fsGroup": 1000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "affinity": {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": app}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                }
            },
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        }
        if init:
            self.spec["initContainers"] = init
        if deadline is not None:
            self.spec["activeDeadlineSeconds"] = deadline
        self.controller_fields = _fields_v1(
            {
                "metadata": {
                    "annotations": self.annotations,
                    "generateName": "",
                    "labels": self.labels,
                    "ownerReferences": [{"name": app}],
                },
                "spec": {k: v for k, v in self.spec.items() if k != "nodeName"},
            }
        )
        statuses = [{"name": c["name"]} for c in containers]
        self.kubelet_fields = _fields_v1(
            {
                "status": {
                    "conditions": [{"name": t} for t in _POD_CONDITIONS],
                    "containerStatuses": statuses,
                    "hostIP": "",
                    "hostIPs": [{"name": "ip"}],
                    "phase": "",
                    "podIP": "",
                    "podIPs": [{"name": "ip"}],
                    "startTime": "",
                },
            }
        )

    def pod(self, j: int, node_name: str) -> dict[str, Any]:
        suffix = f"{j:05x}"[-5:]
        name = (
            f"{self.app}-{self.hash}-{suffix}"
            if self.owner == "ReplicaSet"
            else f"{self.app}-{suffix}"
        )
        started = f"2026-03-0{1 + j % 6}T{j % 24:02d}:{j % 60:02d}:{(j * 7) % 60:02d}Z"
        ip = f"10.{64 + j % 64}.{(j >> 8) % 256}.{j % 256}"
        host_ip = f"10.0.{(j >> 4) % 256}.{(j * 13) % 256}"
        owner_kind = self.owner
        meta: dict[str, Any] = {
            "name": name,
            "generateName": name[: -len(suffix)],
            "namespace": self.namespace,
            "creationTimestamp": started,
            "labels": self.labels,
            "annotations": self.annotations,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": owner_kind,
                    "name": f"{self.app}-{self.hash}" if owner_kind == "ReplicaSet" else self.app,
                    "uid": f"5f0c3a9e-{j % 10000:04d}-4c2b-9d1e-7a6b5c4d3e2f",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                _managed("kube-controller-manager", "Update", started, self.controller_fields),
                _managed("kubelet", "Update", started, self.kubelet_fields, "status"),
            ],
        }
        spec = dict(self.spec, nodeName=node_name)
        statuses = [
            {
                "name": c["name"],
                "state": {"running": {"startedAt": started}},
                "lastState": {},
                "ready": True,
                "restartCount": j % 3,
                "image": c["image"],
                "imageID": c["image"].split(":")[0] + "@sha256:" + "9c1e" * 16,
                "containerID": f"containerd://{j:064x}",
                "started": True,
            }
            for c in self.containers
        ]
        status: dict[str, Any] = {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": started}
                for t in _POD_CONDITIONS
            ],
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": started,
            "containerStatuses": statuses,
            "qosClass": "Burstable",
        }
        if self.init:
            status["initContainerStatuses"] = [
                {
                    "name": c["name"],
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": started,
                            "finishedAt": started,
                            "containerID": f"containerd://{j + 1:064x}",
                        }
                    },
                    "lastState": {},
                    "ready": True,
                    "restartCount": 0,
                    "image": c["image"],
                    "imageID": c["image"].split(":")[0] + "@sha256:" + "77aa" * 16,
                    "started": False,
                }
                for c in self.init
            ]
        return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


_POD_CONDITIONS = (
    "PodReadyToStartContainers",
    "Initialized",
    "Ready",
    "ContainersReady",
    "PodScheduled",
)


def _requests(cpu: str, memory: str, gpu: str = "") -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory}
    limits: dict[str, str] = {"memory": memory}
    if gpu:
        requests["nvidia.com/gpu"] = gpu
        limits["nvidia.com/gpu"] = gpu
    return {"limits": limits, "requests": requests}


def _templates() -> dict[str, list[_Template]]:
    """The workloads: web services (a few with Istio sidecars, some with deadlines: batch
    jobs' pods), a DaemonSet log shipper, static mirror pods, GPU training pods."""
    web = []
    for k in range(60):
        sizes = (("250m", "256Mi"), ("500m", "512Mi"), ("1", "1Gi"))[k % 3]
        web.append(
            _Template(
                f"svc-{k:02d}",
                f"team-{k % 12}",
                [
                    _app(
                        f"svc-{k:02d}",
                        f"registry.example/team-{k % 12}/svc:{k}.0",
                        _requests(*sizes),
                        2 + k % 10,
                    )
                ],
                istio=k % 5 == 0,
                deadline=3600 if k % 11 == 0 else None,
                owner="Job" if k % 11 == 0 else "ReplicaSet",
            )
        )
    hostpaths = [
        {"name": n, "hostPath": {"path": f"/var/{n}", "type": ""}}
        for n in ("log", "lib-docker", "fluent-bit-state")
    ]
    daemon = [
        _Template(
            "fluent-bit",
            "logging",
            [
                _app(
                    "fluent-bit",
                    "cr.fluentbit.io/fluent/fluent-bit:3.1.9",
                    _requests("100m", "128Mi"),
                    6,
                )
            ],
            owner="DaemonSet",
            extra_volumes=hostpaths,
        )
    ]
    static = [
        _Template(
            "kube-proxy",
            "kube-system",
            [
                _app(
                    "kube-proxy", "registry.k8s.io/kube-proxy:v1.31.2", _requests("100m", "64Mi"), 2
                )
            ],
            owner="Node",
            annotations={
                "kubernetes.io/config.mirror": "e3b0c44298fc1c149afbf4c8996fb924",
                "kubernetes.io/config.source": "file",
            },
        )
    ]
    train = [
        _Template(
            f"train-{k}",
            "ml",
            [
                _app(
                    f"train-{k}",
                    "nvcr.io/nvidia/pytorch:24.09-py3",
                    _requests("16", "128Gi", "1"),
                    30,
                )
            ],
            init=[
                dict(
                    _app("fetch-data", "registry.example/ml/fetch:2.1", _requests("2", "4Gi"), 10),
                    restartPolicy="Never",
                )
            ],
            owner="Job",
            istio=False,
            deadline=86400 if k % 2 else None,
        )
        for k in range(4)
    ]
    return {"web": web, "daemon": daemon, "static": static, "train": train}


def _node_images(i: int) -> list[dict[str, Any]]:
    return [
        {
            "names": [
                f"registry.example/team-{k % 12}/svc@sha256:" + f"{(i * 31 + k):064x}",
                f"registry.example/team-{k % 12}/svc:{k}.0",
            ],
            "sizeBytes": 50_000_000 + k * 1_234_567,
        }
        for k in range(24)
    ]


def _realistic_node(obj: dict[str, Any], i: int) -> dict[str, Any]:
    """A node as a live cluster lists it: its images, managed fields, taints, daemon ports."""
    status = obj["status"]
    status["images"] = _node_images(i)
    status["daemonEndpoints"] = {"kubeletEndpoint": {"Port": 10250}}
    status["nodeInfo"].update(
        {
            "machineID": f"{i:032x}",
            "systemUUID": f"ec2{i:029x}",
            "bootID": f"{i * 7:032x}",
            "kernelVersion": "6.1.112-124.190.amzn2023.x86_64",
            "osImage": "Amazon Linux 2023.6.20241010",
            "kubeProxyVersion": "v1.31.2",
        }
    )
    obj["spec"]["podCIDR"] = f"10.{64 + i % 64}.{i % 256}.0/24"
    obj["metadata"]["annotations"].update(
        {
            "alpha.kubernetes.io/provided-node-ip": status["addresses"][0]["address"],
            "csi.volume.kubernetes.io/nodeid": '{"ebs.csi.aws.com":"i-0' + f"{i:016x}" + '"}',
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        }
    )
    obj["metadata"]["managedFields"] = [
        _managed(
            "kubelet",
            "Update",
            CREATED,
            _fields_v1(
                {"metadata": obj["metadata"]["labels"] and {"labels": obj["metadata"]["labels"]}}
            ),
        ),
        _managed(
            "kubelet",
            "Update",
            HEARTBEAT,
            _fields_v1({"status": {k: v for k, v in status.items() if k != "images"}}),
            "status",
        ),
    ]
    return obj


def synthetic_cluster(
    n_nodes: int, n_pods: int, *, small: bool = False
) -> tuple[list[dict[str, Any]], Iterator[dict[str, Any]]]:
    """A large mixed cluster for timing: Karpenter CPU pools and EKS GPU node groups, with
    objects of a live cluster's size (pods 9-19 KB of JSON each, nodes ~8 KB). The pods come
    from a generator (100,000 of them would take gigabytes as dicts at once). `small`: the
    same pods without managed fields, env, volumes and probes (3-4 KB, ~6 KB with an Istio
    sidecar), as a cluster whose API server or workloads keep them lean."""
    nodes = []
    for i in range(n_nodes):
        zone = "us-east-1" + "abc"[i % 3]
        if i % 10 == 0:
            obj = eks_node(
                f"ip-10-0-{i // 256}-{i % 256}.ec2.internal",
                nodegroup=f"gpu-h100-{i % 4}",
                instance_type="p5.48xlarge",
                spot=i % 20 == 0,
                zone=zone,
                gpus=8,
                product="NVIDIA-H100-80GB-HBM3",
                cpu="191450m",
                memory="2045959872Ki",
            )
        else:
            obj = karpenter_node(
                f"ip-10-1-{i // 256}-{i % 256}.ec2.internal",
                nodepool=f"general-{i % 5}",
                instance_type=("m7i.4xlarge", "c7i.8xlarge", "r7i.2xlarge")[i % 3],
                spot=i % 3 == 0,
                zone=zone,
                cpu="15890m",
                memory="63166976Ki",
            )
        nodes.append(_realistic_node(obj, i))
    names = [n["metadata"]["name"] for n in nodes]
    pods = _synthetic_pods(names, n_pods)
    return nodes, (map(_slim, pods) if small else pods)


_LEAN = frozenset({"env", "volumeMounts", "livenessProbe", "readinessProbe"})


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k != "managedFields"}
    spec = {k: v for k, v in obj["spec"].items() if k != "volumes"}
    for key in ("containers", "initContainers"):
        if key in spec:
            spec[key] = [{k: v for k, v in c.items() if k not in _LEAN} for c in spec[key]]
    return dict(obj, metadata=meta, spec=spec)


def _synthetic_pods(names: list[str], n_pods: int) -> Iterator[dict[str, Any]]:
    templates = _templates()
    for j in range(n_pods):
        target = names[j % len(names)]
        if j % 100 == 50:
            yield templates["static"][0].pod(j, target)
        elif j % 50 == 0:
            yield templates["daemon"][0].pod(j, target)
        elif target.startswith("ip-10-0-") and j % 7 == 0:
            yield templates["train"][j % 4].pod(j, target)
        else:
            web = templates["web"]
            yield web[(j * 7919) % len(web)].pod(j, target)
