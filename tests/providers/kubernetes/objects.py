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


def synthetic_cluster(
    n_nodes: int, n_pods: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A large mixed cluster for timing: Karpenter CPU pools and EKS GPU node groups."""
    nodes = []
    for i in range(n_nodes):
        zone = "us-east-1" + "abc"[i % 3]
        if i % 10 == 0:
            nodes.append(
                eks_node(
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
            )
        else:
            nodes.append(
                karpenter_node(
                    f"ip-10-1-{i // 256}-{i % 256}.ec2.internal",
                    nodepool=f"general-{i % 5}",
                    instance_type=("m7i.4xlarge", "c7i.8xlarge", "r7i.2xlarge")[i % 3],
                    spot=i % 3 == 0,
                    zone=zone,
                    cpu="15890m",
                    memory="63166976Ki",
                )
            )
    names = [n["metadata"]["name"] for n in nodes]
    pods = []
    for j in range(n_pods):
        target = names[j % len(names)]
        if j % 50 == 0:
            pods.append(daemon_pod(f"fluent-bit-{j}", target))
        elif target.startswith("ip-10-0-") and j % 7 == 0:
            pods.append(simple_pod(f"train-{j}", target, cpu="16", memory="128Gi", gpu="1"))
        else:
            pods.append(
                simple_pod(
                    f"web-{j}",
                    target,
                    cpu=("250m", "500m", "1")[j % 3],
                    memory=("256Mi", "512Mi", "1Gi")[j % 3],
                    deadline=3600 if j % 11 == 0 else None,
                )
            )
    return nodes, pods
