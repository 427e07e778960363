"""KubernetesCatalog against the loopback API server: contexts as regions, instance types
from nodes, the resource view of an EKS + GKE + Karpenter mix (exact JSON), paging, the
pod field selector, excluded nodes, predictions, pool pricing from the cloud catalog cache,
and the typed errors. Only 127.0.0.1 is contacted."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.cloud.cache import CatalogCache
from providers.cloud.catalog import CACHE_FILE
from providers.cloud.http import RetryPolicy
from providers.cloud.offers import Offer, Snapshot
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    ProviderUnreachableError,
    ShoalError,
    UsageError,
)
from providers.core.settings import Paths, Settings
from providers.core.timeutil import utcnow
from providers.core.wire import to_wire
from providers.kubernetes.capacity import PoolRules
from providers.kubernetes.catalog import HOLDING_PODS, KubernetesCatalog
from providers.kubernetes.client import KubeClient
from providers.kubernetes.connection import Connection
from providers.models import KubernetesRegion, RegionSpec, ResourceListOptions
from tests.providers.kubernetes import objects as k8s
from tests.providers.kubernetes.apiserver import ApiServer
from tests.providers.kubernetes.certs import OPENSSL_MISSING, Certs, have_openssl, make_certs

TOKEN = "tok-catalog-0123456789abcdef"
FAST = RetryPolicy(
    attempts=2, backoff_seconds=0.0, max_delay_seconds=0.0, connect_timeout_seconds=2.0
)
NODES = "/api/v1/nodes"
PODS = "/api/v1/pods"
ZONE = "topology.kubernetes.io/zone"
Make = Callable[..., KubernetesCatalog]


# -- fixtures --------------------------------------------------------------------------------


def upstream(context: str, namespace: str = "default") -> dict[str, str]:
    """The upstream Go `kubernetes` region member of a context of `write_kubeconfig`'s."""
    return {"context": context, "cluster": "loop", "namespace": namespace}


def write_kubeconfig(
    path: Path,
    server: str,
    *,
    token: str = TOKEN,
    contexts: tuple[str, ...] = ("prod", "staging"),
    current: str = "prod",
    ca: Path | None = None,
) -> Path:
    """A kubeconfig (JSON is YAML) whose contexts all name the same loopback cluster."""
    cluster: dict[str, Any] = {"server": server}
    if ca is not None:
        cluster["certificate-authority"] = str(ca)
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": current,
                "clusters": [{"name": "loop", "cluster": cluster}],
                "users": [{"name": "tester", "user": {"token": token}}],
                "contexts": [
                    {"name": name, "context": {"cluster": "loop", "user": "tester"}}
                    for name in contexts
                ],
            }
        )
    )
    return path


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer(tokens=[TOKEN]) as server:
        yield server


@pytest.fixture
def warns() -> list[str]:
    return []


@pytest.fixture
def make(tmp_path: Path, home: Path, api: ApiServer, warns: list[str]) -> Make:
    """A catalog over a kubeconfig naming `api` (or `kubeconfig=`), warnings into `warns`,
    its clock at `now=` (else the real one)."""

    def build(
        *,
        context: str | None = None,
        kubeconfig: Path | None = None,
        client_for: Callable[[Connection], KubeClient] | None = None,
        rules: PoolRules | None = None,
        now: datetime | None = None,
    ) -> KubernetesCatalog:
        if kubeconfig is None:
            kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.base)
        settings = Settings(
            paths=Paths.from_env({"SHOAL_HOME": str(home)}),
            env={"KUBECONFIG": str(kubeconfig)},
            warn=warns.append,
        )
        clock = utcnow if now is None else (lambda: now)
        return KubernetesCatalog(
            settings, context, rules or PoolRules(), client_for=client_for, clock=clock
        )

    return build


def opts(context: str = "", **kw: Any) -> ResourceListOptions:
    return ResourceListOptions(region=RegionSpec(name=context), **kw)


# -- a small mixed cluster -------------------------------------------------------------------


def mixed_nodes() -> list[dict[str, Any]]:
    """EKS on-demand, GKE spot, and a Karpenter GPU pool with one spot and one on-demand
    node; plus a NotReady and a cordoned node that must stay out of supply."""
    return [
        k8s.eks_node(
            "eks-od-1",
            nodegroup="ng-general",
            instance_type="m5.xlarge",
            cpu="4",
            memory="16Gi",
            zone="us-east-1a",
        ),
        k8s.gke_node(
            "gke-spot-1",
            pool="spot-pool",
            machine_type="e2-standard-4",
            spot=True,
            cpu="4",
            memory="16Gi",
            zone="us-central1-a",
        ),
        k8s.karpenter_node(
            "karp-gpu-1",
            nodepool="gpu",
            instance_type="g5.2xlarge",
            spot=True,
            gpus=1,
            product="NVIDIA-A10G",
            cpu="8",
            memory="32Gi",
            zone="us-east-1b",
        ),
        k8s.karpenter_node(
            "karp-gpu-2",
            nodepool="gpu",
            instance_type="g5.2xlarge",
            gpus=1,
            product="NVIDIA-A10G",
            cpu="8",
            memory="32Gi",
            zone="us-east-1b",
        ),
        k8s.eks_node(
            "eks-notready",
            nodegroup="ng-general",
            instance_type="m5.xlarge",
            ready="False",
            zone="us-east-1a",
        ),
        k8s.karpenter_node(
            "karp-cordoned",
            nodepool="gpu",
            instance_type="g5.2xlarge",
            unschedulable=True,
            zone="us-east-1b",
        ),
    ]


def mixed_pods() -> list[dict[str, Any]]:
    return [
        k8s.simple_pod("web-1", "eks-od-1", cpu="1", memory="2Gi"),
        k8s.daemon_pod("fluent-bit-gke", "gke-spot-1"),  # counts, but the node stays idle
        k8s.simple_pod("train-1", "karp-gpu-1", cpu="2", memory="8Gi", gpu="1"),
        k8s.simple_pod("done-1", "eks-od-1", cpu="3", phase="Succeeded"),
        k8s.simple_pod("failed-1", "karp-gpu-2", cpu="3", gpu="1", phase="Failed"),
        k8s.simple_pod("pending-1", None, cpu="1"),
        k8s.simple_pod("web-lost", "eks-notready", cpu="1"),
        k8s.simple_pod("web-cordoned", "karp-cordoned", cpu="1"),
    ]


def side(
    cpu: str, mem: str, itype: tuple[str, str], gpu: str | None = None
) -> dict[str, dict[str, str]]:
    out = {"cpu": {"vcpu": cpu}, "memory": {"GiB": mem}, "instance": {itype[0]: itype[1]}}
    if gpu is not None:
        out["gpu"] = {"NVIDIA-A10G": gpu}
    return out


def stat_item(
    itype: str, supply: tuple[str, ...], allocated: tuple[str, ...], free: tuple[str, ...]
) -> dict[str, Any]:
    """(cpu, memory, instances[, gpu]) for supply, allocated and allocatable."""

    def one(values: tuple[str, ...]) -> dict[str, dict[str, str]]:
        return side(values[0], values[1], (itype, values[2]), *values[3:])

    return {"supply": one(supply), "allocated": one(allocated), "allocatable": one(free)}


KARP_SPOT = stat_item(
    "g5.2xlarge", ("8", "32", "1", "1"), ("2", "8", "1", "1"), ("6", "24", "0", "0")
)
KARP_OD = stat_item(
    "g5.2xlarge", ("8", "32", "1", "1"), ("0", "0", "0", "0"), ("8", "32", "1", "1")
)
EKS_OD = stat_item("m5.xlarge", ("4", "16", "1"), ("1", "2", "1"), ("3", "14", "0"))
# DaemonSet pod: 100m and 128Mi (0.125 GiB, shown half-up as 0.13); the node stays free.
GKE_SPOT = stat_item("e2-standard-4", ("4", "16", "1"), ("0.1", "0.13", "0"), ("3.9", "15.88", "1"))
GPU_BOTH = {"onDemand": KARP_OD, "spot": KARP_SPOT}


def node_level(name: str, stat: dict[str, Any]) -> dict[str, Any]:
    return {"key": "node", "value": name, "stat": stat}


EXPECTED_MIXED = {
    "region": {
        "name": "prod",
        "kubernetes": {"context": "prod", "cluster": "loop", "namespace": "default"},
    },
    "overview": [
        {
            "nextLevel": [
                node_level("karp-gpu-1", {"spot": KARP_SPOT}),
                node_level("karp-gpu-2", {"onDemand": KARP_OD}),
            ],
            "key": "karpenter.sh/nodepool",
            "value": "gpu",
            "stat": GPU_BOTH,
        },
        {
            "nextLevel": [node_level("eks-od-1", {"onDemand": EKS_OD})],
            "key": "eks.amazonaws.com/nodegroup",
            "value": "ng-general",
            "stat": {"onDemand": EKS_OD},
        },
        {
            "nextLevel": [node_level("gke-spot-1", {"spot": GKE_SPOT})],
            "key": "cloud.google.com/gke-nodepool",
            "value": "spot-pool",
            "stat": {"spot": GKE_SPOT},
        },
    ],
    "breakdown": {
        ZONE: [
            {"key": ZONE, "value": "us-central1-a", "stat": {"spot": GKE_SPOT}},
            {"key": ZONE, "value": "us-east-1a", "stat": {"onDemand": EKS_OD}},
            {"key": ZONE, "value": "us-east-1b", "stat": GPU_BOTH},
        ]
    },
    "provider": "kubernetes",
}
EXCLUDED_WARNING = (
    "kubernetes: 2 node(s) left out of supply: eks-notready (NotReady), karp-cordoned (cordoned)"
)


@pytest.fixture
def mixed(api: ApiServer) -> ApiServer:
    api.add_many("nodes", mixed_nodes())
    api.add_many("pods", mixed_pods())
    return api


# -- regions and types -----------------------------------------------------------------------


def test_regions_are_the_kubeconfig_contexts_with_the_current_marked(
    make: Make, api: ApiServer, tmp_path: Path
) -> None:
    kubeconfig = write_kubeconfig(
        tmp_path / "kc", api.base, contexts=("prod", "dev", "staging"), current="staging"
    )
    regions = make(kubeconfig=kubeconfig).list_regions()
    # Each with the upstream Go types.RegionSpec's `kubernetes` member.
    assert to_wire(regions) == [
        {"name": "dev", "kubernetes": upstream("dev")},
        {"name": "prod", "kubernetes": upstream("prod")},
        {"name": "staging", "location": "current", "kubernetes": upstream("staging")},
    ]
    assert api.seen == []  # contexts come from the file alone


def test_types_one_per_instance_type_with_arch_and_gpus(make: Make, api: ApiServer) -> None:
    graviton = k8s.karpenter_node(
        "g1", nodepool="arm", instance_type="m7g.large", cpu="1930m", memory="7Gi"
    )
    graviton["metadata"]["labels"]["kubernetes.io/arch"] = "arm64"
    api.add_many(
        "nodes",
        [
            k8s.eks_node("a1", nodegroup="ng", instance_type="m5.xlarge", cpu="3920m"),
            k8s.eks_node("a2", nodegroup="ng", instance_type="m5.xlarge", cpu="3920m"),
            graviton,
            k8s.eks_node(
                "p1",
                nodegroup="gpu",
                instance_type="p4d.24xlarge",
                gpus=8,
                product="NVIDIA-A100-SXM4-40GB",
                cpu="95690m",
                memory="1120Gi",
            ),
            k8s.gke_node(
                "t1",
                pool="t4",
                machine_type="n1-standard-8",
                gpus=2,
                accelerator="nvidia-tesla-t4",
                cpu="7910m",
                memory="29Gi",
            ),
        ],
    )
    types = make().list_instance_types(None)
    sources = [t.pop("source") for t in to_wire(types)]
    assert sources[0] == "the shape most of its 2 node(s) report in status.capacity (context prod)"
    assert all(t["instanceType"] == t["name"] for t in to_wire(types))  # upstream's member
    skip = ("source", "instanceType")
    assert [{k: v for k, v in t.items() if k not in skip} for t in to_wire(types)] == [
        {
            "name": "m5.xlarge",
            "vcpus": 3.92,
            "memory_gib": 30.32,  # 31792000Ki
            "arch": "x86_64",
            "gpu_count": 0,
            "region": "prod",
        },
        {
            "name": "m7g.large",
            "vcpus": 1.93,
            "memory_gib": 7.0,
            "arch": "arm64",
            "gpu_count": 0,
            "region": "prod",
        },
        {
            "name": "n1-standard-8",
            "vcpus": 7.91,
            "memory_gib": 29.0,
            "arch": "x86_64",
            "gpu": "T4",  # one name per model across providers (providers/gpus.py)
            "gpu_count": 2,
            "region": "prod",
        },
        {
            "name": "p4d.24xlarge",
            "vcpus": 95.69,
            "memory_gib": 1120.0,
            "arch": "x86_64",
            "gpu": "A100",
            "gpu_count": 8,
            "gpu_memory_gib": 40.0,  # from the product label's name
            "region": "prod",
        },
    ]


def test_types_of_another_context_name_that_context(make: Make, mixed: ApiServer) -> None:
    types = make().list_instance_types(RegionSpec(name="staging"))
    assert {t.region for t in types} == {"staging"}
    assert [t.name for t in types] == ["e2-standard-4", "g5.2xlarge", "m5.xlarge"]


def gpu_node(
    name: str, itype: str, *, capacity: int | None, allocatable: int | None, cpu: str = "8"
) -> dict[str, Any]:
    """A node of `itype` whose capacity and allocatable list `nvidia.com/gpu` as given
    (None: not listed at all, as before the device plugin registers)."""
    node = k8s.eks_node(name, nodegroup="gpu", instance_type=itype, gpus=1, product="NVIDIA-T4")
    status = node["status"]
    status["capacity"]["cpu"] = cpu
    for side, count in (("capacity", capacity), ("allocatable", allocatable)):
        status[side].pop("nvidia.com/gpu")
        if count is not None:
            status[side]["nvidia.com/gpu"] = str(count)
    return node


def test_types_take_the_shape_most_nodes_report(make: Make, api: ApiServer) -> None:
    api.add_many(
        "nodes",
        [
            # the first in name order has no GPU listed yet; the other two have 8
            gpu_node("a-1", "p4d.24xlarge", capacity=None, allocatable=None, cpu="96"),
            gpu_node("a-2", "p4d.24xlarge", capacity=8, allocatable=8, cpu="96"),
            gpu_node("a-3", "p4d.24xlarge", capacity=8, allocatable=7, cpu="96"),
            # one node each: the tie goes to the larger value, whatever the name order
            gpu_node("b-1", "g5.12xlarge", capacity=2, allocatable=2, cpu="47"),
            gpu_node("b-2", "g5.12xlarge", capacity=4, allocatable=4, cpu="48"),
            # capacity does not list the GPU: allocatable stands in
            gpu_node("c-1", "g4dn.xlarge", capacity=None, allocatable=1, cpu="4"),
            # a majority, not the largest: two of three report 4
            gpu_node("d-1", "g6.12xlarge", capacity=8, allocatable=8, cpu="48"),
            gpu_node("d-2", "g6.12xlarge", capacity=4, allocatable=4, cpu="48"),
            gpu_node("d-3", "g6.12xlarge", capacity=4, allocatable=4, cpu="48"),
        ],
    )
    shapes = {t.name: (t.gpu_count, t.vcpus, t.gpu) for t in make().list_instance_types(None)}
    assert shapes == {
        "g4dn.xlarge": (1, 4.0, "T4"),
        "g5.12xlarge": (4, 48.0, "T4"),
        "g6.12xlarge": (4, 48.0, "T4"),
        "p4d.24xlarge": (8, 96.0, "T4"),
    }


# -- resources -------------------------------------------------------------------------------


def test_resources_of_a_mixed_cluster_exact_json(
    make: Make, mixed: ApiServer, warns: list[str]
) -> None:
    found = make().list_resources(opts())
    assert to_wire(found) == [EXPECTED_MIXED]
    assert warns == [EXCLUDED_WARNING]


def test_resources_context_from_region_then_constructor(make: Make, mixed: ApiServer) -> None:
    def region(context: str) -> RegionSpec:
        return RegionSpec(name=context, kubernetes=KubernetesRegion(**upstream(context)))

    assert make().list_resources(opts("staging"))[0].region == region("staging")
    assert make(context="staging").list_resources(opts())[0].region == region("staging")
    # --region beats the configured context
    assert make(context="staging").list_resources(opts("prod"))[0].region == region("prod")


def test_resources_send_the_holding_pods_field_selector(make: Make, mixed: ApiServer) -> None:
    make().list_resources(opts())
    pods = mixed.requests("GET", PODS)
    assert len(pods) == 1
    assert pods[0].query["fieldSelector"] == ["status.phase!=Succeeded,status.phase!=Failed"]
    assert HOLDING_PODS == {"fieldSelector": "status.phase!=Succeeded,status.phase!=Failed"}
    nodes = mixed.requests("GET", NODES)
    assert len(nodes) == 1 and "fieldSelector" not in nodes[0].query
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in mixed.seen)


def test_resources_page_through_nodes_and_pods(make: Make, api: ApiServer) -> None:
    names = [f"n{i:04d}" for i in range(600)]
    api.add_many(
        "nodes",
        (
            k8s.karpenter_node(n, nodepool="p", instance_type="m5.large", cpu="2", memory="8Gi")
            for n in names
        ),
    )
    api.add_many(
        "pods",
        (
            k8s.simple_pod(f"w{j:05d}", names[j % 600], cpu="10m", memory="16Mi")
            for j in range(1300)
        ),
    )
    [found] = make().list_resources(opts())
    [pool] = found.overview
    assert pool.stat.on_demand is not None
    # every page counted once: 1,300 pods of 10m and 16Mi
    assert pool.stat.on_demand.allocated["cpu"] == {"vcpu": "13"}
    assert pool.stat.on_demand.allocated["memory"] == {"GiB": "20.31"}  # 20800 MiB
    assert pool.stat.on_demand.supply["instance"] == {"m5.large": "600"}
    assert len(pool.next_level) == 600
    node_pages = api.requests("GET", NODES)
    pod_pages = api.requests("GET", PODS)
    assert len(node_pages) == 2 and len(pod_pages) == 3
    for pages in (node_pages, pod_pages):
        assert all(p.query["limit"] == ["500"] for p in pages)
        assert "continue" not in pages[0].query
        assert all("continue" in p.query for p in pages[1:])
    assert all(p.query["fieldSelector"] == [HOLDING_PODS["fieldSelector"]] for p in pod_pages)


def test_resources_restart_the_pod_list_when_its_continue_token_expires(
    make: Make, api: ApiServer
) -> None:
    api.add("nodes", k8s.eks_node("n1", nodegroup="ng", instance_type="m5.large", cpu="64"))
    api.add_many("pods", (k8s.simple_pod(f"w{j:04d}", "n1", cpu="10m") for j in range(1200)))
    api.fault("expire", path=PODS)
    [found] = make().list_resources(opts())
    stat = found.overview[0].stat.on_demand
    assert stat is not None and stat.allocated["cpu"] == {"vcpu": "12"}  # not double-counted
    pages = api.requests("GET", PODS)
    assert [("continue" in p.query) for p in pages] == [False, True, False, True, True]


def test_excluded_nodes_are_reported_and_long_lists_shortened(
    make: Make, api: ApiServer, warns: list[str]
) -> None:
    api.add_many(
        "nodes",
        [k8s.eks_node("ok", nodegroup="ng", instance_type="m5.large")]
        + [
            k8s.eks_node(f"down-{i:02d}", nodegroup="ng", instance_type="m5.large", ready="False")
            for i in range(11)
        ]
        + [k8s.eks_node("silent", nodegroup="ng", instance_type="m5.large", ready=None)],
    )
    [found] = make().list_resources(opts())
    assert [n.value for n in found.overview[0].next_level] == ["ok"]
    [warning] = warns
    assert warning.startswith("kubernetes: 12 node(s) left out of supply: down-00 (NotReady), ")
    assert warning.endswith("down-09 (NotReady) and 2 more")


def test_resources_refuse_select(make: Make, mixed: ApiServer) -> None:
    from providers.models import ListResourceFilter, Selector

    chosen = ListResourceFilter(resource_selectors=[Selector(key="gpu_count")])
    with pytest.raises(UsageError, match="no --select"):
        make().list_resources(opts(filter=chosen))
    assert mixed.seen == []


# -- predictions -----------------------------------------------------------------------------


def test_predictions_return_resources_at_active_deadlines(make: Make, api: ApiServer) -> None:
    api.add("nodes", k8s.eks_node("n1", nodegroup="ng", instance_type="m5.xlarge", cpu="8"))
    api.add_many(
        "pods",
        [
            k8s.simple_pod("web", "n1", cpu="1"),  # no deadline: held throughout
            k8s.simple_pod("job-a", "n1", cpu="2", deadline=3600),  # started 08:00 -> 09:00
            k8s.simple_pod("job-old", "n1", cpu="4", deadline=60),  # ended 08:01
            # never started: the deadline runs from creation (08:15 + 30 min)
            k8s.simple_pod(
                "job-b", "n1", cpu="3", deadline=1800, start=None, created="2026-03-01T08:15:00Z"
            ),
        ],
    )
    start = datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    end = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    now = datetime(2026, 3, 1, 8, 20, tzinfo=UTC)  # job-old is overdue: gone by 08:30
    found = make(now=now).list_resource_predictions(opts(start_time=start, end_time=end))

    def cpu(at: str) -> tuple[str, str]:
        stat = found[at].overview[0].stat.on_demand
        assert stat is not None
        return stat.allocated["cpu"]["vcpu"], stat.allocatable["instance"]["m5.xlarge"]

    assert list(found) == [
        "2026-03-01T08:30:00Z",
        "2026-03-01T08:45:00Z",
        "2026-03-01T09:00:00Z",
        "2026-03-01T10:00:00Z",
    ]
    assert cpu("2026-03-01T08:30:00Z") == ("6", "0")
    assert cpu("2026-03-01T08:45:00Z") == ("3", "0")
    assert cpu("2026-03-01T09:00:00Z") == ("1", "0")
    assert cpu("2026-03-01T10:00:00Z") == ("1", "0")
    prod = RegionSpec(name="prod", kubernetes=KubernetesRegion(**upstream("prod")))
    assert all(r.region == prod for r in found.values())
    [pods] = [api.requests("GET", PODS)]
    assert pods[0].query["fieldSelector"] == [HOLDING_PODS["fieldSelector"]]


def test_overcommitted_nodes_are_named_with_each_excess_now_and_in_windows(
    make: Make, api: ApiServer, warns: list[str]
) -> None:
    """Pods on twelve nodes hold more than the nodes offer: one warning names the first
    ten, with what each holds beyond its offer, and counts the rest."""
    names = [f"n{i:02d}" for i in range(12)]
    api.add_many(
        "nodes",
        (
            k8s.eks_node(n, nodegroup="ng", instance_type="m5.large", cpu="2", memory="8Gi")
            for n in names
        ),
    )
    api.add_many("pods", (k8s.simple_pod(f"w-{n}", n, cpu="3") for n in names))
    api.add("pods", k8s.simple_pod("big", "n00", cpu="10m", memory="9Gi"))
    catalog = make()
    [found] = catalog.list_resources(opts())
    listed = ", ".join(f"{n} cpu/vcpu 3>2" for n in names[1:10])
    expected = (
        "kubernetes: 12 node(s) overcommitted (pods hold more than the node offers; "
        f"allocatable shown as 0): n00 cpu/vcpu 3.01>2 memory/GiB 10>8, {listed} and 2 more"
    )
    assert warns == [expected]
    stat = found.overview[0].stat.on_demand
    assert stat is not None and stat.allocatable["cpu"] == {"vcpu": "0"}
    start = datetime(2026, 3, 1, 8, 30, tzinfo=UTC)
    catalog.list_resource_predictions(opts(start_time=start))
    assert warns == [expected, expected]


OVERDUE_NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_a_pod_past_its_deadline_holds_until_now_and_is_gone_after(
    make: Make, api: ApiServer
) -> None:
    """`overdue` (08:00 + 1 h) is still Running at 12:00: it holds now and in any window
    up to now, and counts as gone from the next second on."""
    api.add("nodes", k8s.eks_node("n1", nodegroup="ng", instance_type="m5.xlarge", cpu="8"))
    api.add_many(
        "pods",
        [
            k8s.simple_pod("web", "n1", cpu="1"),
            k8s.simple_pod("overdue", "n1", cpu="2", deadline=3600),
        ],
    )
    catalog = make(now=OVERDUE_NOW)

    def cpu(view: Any) -> str:
        stat = view.overview[0].stat.on_demand
        assert stat is not None
        return str(stat.allocated["cpu"]["vcpu"])

    def window(start: datetime, end: datetime) -> dict[str, str]:
        found = catalog.list_resource_predictions(opts(start_time=start, end_time=end))
        return {at: cpu(view) for at, view in found.items()}

    [present] = catalog.list_resources(opts())
    assert cpu(present) == "3"
    hour = timedelta(hours=1)
    assert window(OVERDUE_NOW, OVERDUE_NOW + hour) == {
        "2026-03-01T12:00:00Z": "3",
        "2026-03-01T12:00:01Z": "1",
        "2026-03-01T13:00:00Z": "1",
    }
    # past the deadline, before now: it was running then, as it still is
    assert window(OVERDUE_NOW - 2 * hour, OVERDUE_NOW - hour) == {
        "2026-03-01T10:00:00Z": "3",
        "2026-03-01T11:00:00Z": "3",
    }
    assert window(OVERDUE_NOW + hour, OVERDUE_NOW + hour) == {"2026-03-01T13:00:00Z": "1"}


def test_predictions_need_a_start(make: Make, mixed: ApiServer) -> None:
    with pytest.raises(UsageError, match="--start"):
        make().list_resource_predictions(opts())


def test_pricing_predictions_are_refused(make: Make) -> None:
    with pytest.raises(UsageError, match="no window"):
        make().list_pricing_predictions(opts(start_time=datetime(2026, 3, 1, tzinfo=UTC)))


# -- pricing ---------------------------------------------------------------------------------

FETCHED = datetime(2026, 3, 1, 0, 0, tzinfo=UTC)


def fill_cache(home: Path) -> None:
    (home / "cache").mkdir(exist_ok=True)
    cache = CatalogCache(home / "cache" / CACHE_FILE)
    try:
        cache.save(
            Snapshot(
                provider="aws",
                region="us-east-1",
                fetched_at=FETCHED,
                source="https://pricing.example/aws",
                offers={
                    "m5.xlarge": Offer("m5.xlarge", 4, 16, "x86_64", on_demand=0.192, spot=0.0712),
                    # no spot price cached: a spot node of this type costs the on-demand price
                    "g5.2xlarge": Offer("g5.2xlarge", 8, 32, "x86_64", "A10G", 1, 24, 1.212),
                },
            )
        )
    finally:
        cache.close()


def priced_nodes() -> list[dict[str, Any]]:
    """AWS nodes with provider IDs, a GKE node whose prices are not cached, a bare-metal node
    with no cloud provider ID (and no pool label)."""
    nodes = {n["metadata"]["name"]: n for n in mixed_nodes()}
    nodes["eks-spot-1"] = k8s.eks_node(
        "eks-spot-1", nodegroup="ng-spot", instance_type="m5.xlarge", spot=True, zone="us-east-1c"
    )
    nodes["metal-1"] = k8s.node(
        "metal-1", labels={"node.kubernetes.io/instance-type": "metal"}, zone="dc1a"
    )
    for name, obj in nodes.items():
        if name.startswith(("eks-", "karp-")):
            zone = obj["metadata"]["labels"][ZONE]
            obj["spec"]["providerID"] = f"aws:///{zone}/i-{abs(hash(name)) % 10**12:012d}"
        elif name.startswith("gke-"):
            obj["spec"]["providerID"] = f"gce://proj/us-central1-a/{name}"
            # GKE labels the region itself (the builder's zone[:-1] would leave a dash)
            obj["metadata"]["labels"]["topology.kubernetes.io/region"] = "us-central1"
    return list(nodes.values())


@pytest.fixture
def priced(api: ApiServer, home: Path) -> ApiServer:
    fill_cache(home)
    api.add_many("nodes", priced_nodes())
    api.add_many("pods", [*mixed_pods(), k8s.daemon_pod("fluent-bit-eks", "eks-spot-1")])
    return api


def test_pricing_of_pools_from_the_cached_cloud_catalog(make: Make, priced: ApiServer) -> None:
    [found] = make().list_pricing(opts())
    data = to_wire(found)
    assert data["region"] == {"name": "prod", "kubernetes": upstream("prod")}
    assert data["provider"] == "kubernetes" and data["currency"] == "USD"
    assert data["items"] == {
        "g5.2xlarge": {"onDemandPrice": 1.212},
        "m5.xlarge": {"onDemandPrice": 0.192, "spotPrice": 0.0712},
    }
    pools = {(p["key"], p["value"]): p for p in data["pools"]}
    assert list(pools) == [
        ("karpenter.sh/nodepool", ""),  # metal-1: no pool label
        ("karpenter.sh/nodepool", "gpu"),
        ("eks.amazonaws.com/nodegroup", "ng-general"),
        ("eks.amazonaws.com/nodegroup", "ng-spot"),
        ("cloud.google.com/gke-nodepool", "spot-pool"),
    ]

    def cost(key: tuple[str, str]) -> dict[str, Any]:
        p = dict(pools[key])
        for money in ("hourly", "usedHourly", "idleHourly"):
            p[money] = None if p[money] is None else round(p[money], 6)
        del p["key"], p["value"]
        return p

    # no node of the pool is priced: its cost is unknown (null), not 0
    assert cost(("karpenter.sh/nodepool", "")) == {
        "nodes": 1,
        "spotNodes": 0,
        "hourly": None,
        "usedHourly": None,
        "idleHourly": None,
        "unpricedNodes": 1,
    }
    # the spot GPU node has no cached spot price: on-demand used (and said in a note)
    assert cost(("karpenter.sh/nodepool", "gpu")) == {
        "nodes": 2,
        "spotNodes": 1,
        "hourly": 2.424,
        "usedHourly": 1.212,  # karp-gpu-1 runs train-1
        "idleHourly": 1.212,  # karp-gpu-2 holds nothing (its pod failed)
    }
    assert cost(("eks.amazonaws.com/nodegroup", "ng-general")) == {
        "nodes": 1,
        "spotNodes": 0,
        "hourly": 0.192,
        "usedHourly": 0.192,
        "idleHourly": 0.0,
    }
    # a spot node at the spot price, idle: a DaemonSet pod does not make it used
    assert cost(("eks.amazonaws.com/nodegroup", "ng-spot")) == {
        "nodes": 1,
        "spotNodes": 1,
        "hourly": 0.0712,
        "usedHourly": 0.0,
        "idleHourly": 0.0712,
    }
    assert cost(("cloud.google.com/gke-nodepool", "spot-pool")) == {
        "nodes": 1,
        "spotNodes": 1,
        "hourly": None,
        "usedHourly": None,
        "idleHourly": None,
        "unpricedNodes": 1,
    }
    assert data["notes"] == [
        "no spot price cached for g5.2xlarge in aws us-east-1: on-demand used",
        "2 of 6 nodes have no cached cloud price "
        "(run `shoal pricing -p gcp --region us-central1` to fetch)",
        "nodes without a cloud providerID or a topology.kubernetes.io/region label are "
        "left unpriced",
    ]
    assert priced.requests("GET", PODS)[0].query["fieldSelector"] == [HOLDING_PODS["fieldSelector"]]


def test_pricing_with_an_empty_cache_leaves_every_node_unpriced(make: Make, api: ApiServer) -> None:
    """With no cached price a pool's cost is unknown: null in the JSON (the key present),
    never 0, and the note says no node is priced and what to fetch."""
    api.add_many("nodes", [n for n in priced_nodes() if n["metadata"]["name"] == "eks-od-1"])
    [found] = make().list_pricing(opts())
    data = to_wire(found)
    [pool] = data["pools"]
    assert pool == {
        "key": "eks.amazonaws.com/nodegroup",
        "value": "ng-general",
        "nodes": 1,
        "spotNodes": 0,
        "hourly": None,
        "usedHourly": None,
        "idleHourly": None,
        "unpricedNodes": 1,
    }
    assert data["items"] == {}
    assert data["notes"] == [
        "no node has a cached cloud price (run `shoal pricing -p aws --region us-east-1` to fetch)"
    ]


def test_pricing_of_a_partly_priced_pool_sums_the_priced_nodes(
    make: Make, api: ApiServer, home: Path
) -> None:
    """A pool with one node priced and one not: the sums cover the priced node,
    `unpricedNodes` counts the other, and the note counts the unpriced nodes of all."""
    fill_cache(home)
    uncached = k8s.eks_node(
        "eks-od-2", nodegroup="ng-general", instance_type="m5.24xlarge", zone="us-east-1a"
    )
    nodes = [n for n in priced_nodes() if n["metadata"]["name"] == "eks-od-1"]
    for obj in (*nodes, uncached):
        obj["spec"]["providerID"] = f"aws:///us-east-1a/i-{obj['metadata']['name']}"
    api.add_many("nodes", [*nodes, uncached])
    [found] = make().list_pricing(opts())
    [pool] = to_wire(found)["pools"]
    assert (pool["nodes"], pool["unpricedNodes"]) == (2, 1)
    assert (pool["hourly"], pool["usedHourly"], pool["idleHourly"]) == (0.192, 0.0, 0.192)
    assert found.notes == [
        "1 of 2 nodes has no cached cloud price "
        "(run `shoal pricing -p aws --region us-east-1` to fetch)"
    ]


def test_pricing_reports_nodes_left_out_of_the_pools(
    make: Make, priced: ApiServer, warns: list[str]
) -> None:
    """A NotReady or cordoned node is still billed, but pool costs leave it out: like
    `resources`, `pricing` must say which nodes it left out.

    Fails today: KubernetesCatalog.list_pricing never calls _report_excluded (see report).
    """
    make().list_pricing(opts())
    assert warns == [EXCLUDED_WARNING]


# -- errors ----------------------------------------------------------------------------------


def test_missing_kubeconfig_is_a_config_error_naming_kubeconfig(make: Make, tmp_path: Path) -> None:
    catalog = make(kubeconfig=tmp_path / "nowhere" / "config")
    for call in (
        catalog.list_regions,
        lambda: catalog.list_instance_types(None),
        lambda: catalog.list_resources(opts()),
    ):
        with pytest.raises(ConfigError, match=r"KUBECONFIG=.*nowhere/config"):
            call()


def test_unknown_context_lists_the_known_ones(make: Make, mixed: ApiServer) -> None:
    with pytest.raises(ConfigError, match=r"unknown context 'qa'.*known contexts: prod, staging"):
        make().list_resources(opts("qa"))
    with pytest.raises(ConfigError, match=r"unknown context 'qa'.*prod, staging"):
        make(context="qa").list_instance_types(None)
    assert mixed.seen == []


def test_rejected_token_is_a_credentials_error_without_the_token(
    make: Make, mixed: ApiServer, tmp_path: Path
) -> None:
    wrong = "tok-wrong-9876543210fedcba"
    kubeconfig = write_kubeconfig(tmp_path / "kc", mixed.base, token=wrong)
    with pytest.raises(CredentialsError) as caught:
        make(kubeconfig=kubeconfig).list_resources(opts())
    message = str(caught.value)
    assert "401" in message and "tester" in message and str(kubeconfig) in message
    assert wrong not in message and TOKEN not in message
    assert len(message.splitlines()) == 1


def test_forbidden_list_is_a_credentials_error(make: Make, mixed: ApiServer) -> None:
    mixed.forbidden_namespaces.add("")  # cluster-scoped lists
    with pytest.raises(CredentialsError, match=r"403 Forbidden.*cannot list resource \"nodes\""):
        make().list_resources(opts())
    with pytest.raises(CredentialsError, match="RBAC"):
        make().list_pricing(opts())


def test_forbidden_pod_list_after_the_nodes_is_a_credentials_error(
    make: Make, mixed: ApiServer
) -> None:
    mixed.fault("status", status=403, path=PODS)
    with pytest.raises(CredentialsError, match=r"GET /api/v1/pods: HTTP 403"):
        make().list_resources(opts())


def test_unreachable_server_fails_fast(make: Make, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}")
    made: list[Connection] = []

    def client_for(conn: Connection) -> KubeClient:
        made.append(conn)
        return KubeClient(conn, policy=FAST)

    catalog = make(kubeconfig=kubeconfig, client_for=client_for)
    began = time.monotonic()
    with pytest.raises(ProviderUnreachableError, match=rf"127\.0\.0\.1:{port}.*after 2 attempts"):
        catalog.list_resources(opts())
    assert time.monotonic() - began < 5
    assert [c.context for c in made] == ["prod"]
    assert TOKEN not in str(made)  # the token stays out of the connection's repr


def test_malformed_node_quantity_names_node_and_field(make: Make, api: ApiServer) -> None:
    api.add_many(
        "nodes",
        [
            k8s.eks_node("good", nodegroup="ng", instance_type="m5.large"),
            k8s.eks_node("bad-node", nodegroup="ng", instance_type="m5.xlarge", cpu="four"),
        ],
    )
    catalog = make()
    with pytest.raises(ShoalError, match=r"node bad-node status\.allocatable\.cpu: 'four'"):
        catalog.list_resources(opts())
    with pytest.raises(ShoalError, match=r"node bad-node status\.capacity\.cpu: 'four'"):
        catalog.list_instance_types(None)


# -- TLS -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if not have_openssl():
        pytest.skip(OPENSSL_MISSING)
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_resources_over_https_with_the_cluster_ca(certs: Certs, tmp_path: Path, home: Path) -> None:
    warns: list[str] = []
    with ApiServer(certs=certs, tokens=[TOKEN]) as tls:
        tls.add_many("nodes", mixed_nodes())
        tls.add_many("pods", mixed_pods())
        kubeconfig = write_kubeconfig(tmp_path / "kc", tls.base, ca=certs.ca)
        settings = Settings(
            paths=Paths.from_env({"SHOAL_HOME": str(home)}),
            env={"KUBECONFIG": str(kubeconfig)},
            warn=warns.append,
        )
        found = KubernetesCatalog(settings, None, PoolRules()).list_resources(opts())
    assert tls.base.startswith("https://")
    assert to_wire(found) == [EXPECTED_MIXED]
    assert warns == [EXCLUDED_WARNING]
