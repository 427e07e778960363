"""Node/pod arithmetic: exact overview and breakdown JSON, every counting rule, predictions."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from providers.core.errors import ShoalError, UsageError
from providers.core.wire import to_wire
from providers.kubernetes.capacity import (
    Overcommit,
    PoolRules,
    compute,
    node_reason,
    pod_requests,
    predictions,
)
from tests.providers.kubernetes.objects import (
    aks_node,
    container,
    daemon_pod,
    eks_node,
    gke_node,
    karpenter_node,
    node,
    pod,
    simple_pod,
)

H100 = "NVIDIA-H100-80GB-HBM3"
EFA = "vpc.amazonaws.com/efa"
ZONE = "topology.kubernetes.io/zone"
POOL = "karpenter.sh/nodepool"


def _gpu_node(name: str, *, spot: bool, zone: str) -> dict[str, Any]:
    return karpenter_node(
        name,
        nodepool="gpu",
        instance_type="p5.48xlarge",
        spot=spot,
        zone=zone,
        gpus=8,
        product=H100,
        cpu="191450m",
        memory="2000Gi",
        allocatable={EFA: "32"},
    )


def _cpu_node(name: str, *, spot: bool, zone: str, **kw: Any) -> dict[str, Any]:
    return karpenter_node(
        name,
        nodepool="general",
        instance_type="m7i.4xlarge",
        spot=spot,
        zone=zone,
        cpu="15890m",
        memory="60Gi",
        **kw,
    )


def small_cluster() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = [
        _gpu_node("h100-a", spot=False, zone="us-west-2a"),
        _gpu_node("h100-b", spot=True, zone="us-west-2b"),
        _cpu_node("cpu-a", spot=False, zone="us-west-2a"),
        _cpu_node("cpu-b", spot=True, zone="us-west-2b"),
        node(
            "static-1",
            labels={"node.kubernetes.io/instance-type": "m5.large"},
            cpu="1930m",
            memory="7Gi",
        ),
        _cpu_node("cpu-c", spot=False, zone="us-west-2a", ready="False"),
        _cpu_node("cpu-d", spot=False, zone="us-west-2a", unschedulable=True),
        _cpu_node("cpu-e", spot=False, zone="us-west-2a", ready=None),
        _cpu_node("cpu-f", spot=False, zone="us-west-2a", ready="Unknown"),
    ]
    gpu_req = {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "4", EFA: "16"}
    pods = [
        pod(
            "train-1",
            "h100-a",
            namespace="ml",
            containers=[container(requests=gpu_req, limits={"nvidia.com/gpu": "4", EFA: "16"})],
        ),
        daemon_pod("ds-h100-a", "h100-a"),
        daemon_pod("ds-h100-b", "h100-b"),
        daemon_pod("ds-cpu-a", "cpu-a"),
        daemon_pod("ds-cpu-b", "cpu-b"),
        simple_pod("web-1", "cpu-a", cpu="500m", memory="1Gi"),
        # sum 1.25 cpu / 2.5Gi; init phase 2 + 0.25 cpu / 1Gi + 0.5Gi -> 2.25 cpu, 2.5Gi
        pod(
            "web-2",
            "cpu-a",
            containers=[container(requests={"cpu": "1", "memory": "2Gi"})],
            init=[
                container(
                    "proxy", requests={"cpu": "250m", "memory": "512Mi"}, restart_policy="Always"
                ),
                container("migrate", requests={"cpu": "2", "memory": "1Gi"}),
            ],
        ),
        # limits only (request = limit) plus RuntimeClass overhead: 0.5 cpu, 220Mi
        pod(
            "kata-1",
            "cpu-a",
            containers=[container(limits={"cpu": "250m", "memory": "100Mi"})],
            overhead={"cpu": "250m", "memory": "120Mi"},
        ),
        simple_pod("done-1", "cpu-a", cpu="4", phase="Succeeded", owner="Job"),
        simple_pod("crash-1", "cpu-a", cpu="4", phase="Failed"),
        simple_pod("pending-1", None, cpu="4", phase="Pending"),
        simple_pod("lost-1", "cpu-c", cpu="4"),
        simple_pod("drained-1", "cpu-d", cpu="4"),
        simple_pod("ghost-1", "no-such-node", cpu="4"),
        simple_pod(
            "kube-proxy-static-1",
            "static-1",
            cpu="100m",
            memory="64Mi",
            owner="Node",
            annotations={"kubernetes.io/config.mirror": "abc123"},
        ),
    ]
    return nodes, pods


def res(
    cpu: str,
    mem: str,
    inst: dict[str, str],
    gpu: dict[str, str] | None = None,
    other: dict[str, str] | None = None,
) -> dict[str, dict[str, str]]:
    out = {"cpu": {"vcpu": cpu}, "memory": {"GiB": mem}, "instance": inst}
    if gpu is not None:
        out["gpu"] = gpu
    if other is not None:
        out["resource"] = other
    return out


def item(allocated: Any, supply: Any, allocatable: Any) -> dict[str, Any]:
    return {"allocated": allocated, "supply": supply, "allocatable": allocatable}


H100_A = item(
    res("32.1", "256.13", {"p5.48xlarge": "1"}, {H100: "4"}, {EFA: "16"}),
    res("191.45", "2000", {"p5.48xlarge": "1"}, {H100: "8"}, {EFA: "32"}),
    res("159.35", "1743.88", {"p5.48xlarge": "0"}, {H100: "4"}, {EFA: "16"}),
)
H100_B = item(
    res("0.1", "0.13", {"p5.48xlarge": "0"}, {H100: "0"}, {EFA: "0"}),
    res("191.45", "2000", {"p5.48xlarge": "1"}, {H100: "8"}, {EFA: "32"}),
    res("191.35", "1999.88", {"p5.48xlarge": "1"}, {H100: "8"}, {EFA: "32"}),
)
CPU_A = item(
    res("3.35", "3.84", {"m7i.4xlarge": "1"}),
    res("15.89", "60", {"m7i.4xlarge": "1"}),
    res("12.54", "56.16", {"m7i.4xlarge": "0"}),
)
CPU_B = item(
    res("0.1", "0.13", {"m7i.4xlarge": "0"}),
    res("15.89", "60", {"m7i.4xlarge": "1"}),
    res("15.79", "59.88", {"m7i.4xlarge": "1"}),
)
STATIC_1 = item(
    res("0.1", "0.06", {"m5.large": "0"}),
    res("1.93", "7", {"m5.large": "1"}),
    res("1.83", "6.94", {"m5.large": "1"}),
)
BOTH = {"m7i.4xlarge": "1", "p5.48xlarge": "1"}
NONE = {"m7i.4xlarge": "0", "p5.48xlarge": "0"}
ZONE_A = item(
    res("35.45", "259.96", BOTH, {H100: "4"}, {EFA: "16"}),
    res("207.34", "2060", BOTH, {H100: "8"}, {EFA: "32"}),
    res("171.89", "1800.04", NONE, {H100: "4"}, {EFA: "16"}),
)
ZONE_B = item(
    res("0.2", "0.25", NONE, {H100: "0"}, {EFA: "0"}),
    res("207.34", "2060", BOTH, {H100: "8"}, {EFA: "32"}),
    res("207.14", "2059.75", BOTH, {H100: "8"}, {EFA: "32"}),
)


def _node_item(name: str, **stat: Any) -> dict[str, Any]:
    return {"key": "node", "value": name, "stat": stat}


EXPECTED = {
    "region": {"name": "eks-prod"},
    "overview": [
        {
            "nextLevel": [_node_item("static-1", onDemand=STATIC_1)],
            "key": POOL,
            "value": "",
            "stat": {"onDemand": STATIC_1},
        },
        {
            "nextLevel": [_node_item("cpu-a", onDemand=CPU_A), _node_item("cpu-b", spot=CPU_B)],
            "key": POOL,
            "value": "general",
            "stat": {"onDemand": CPU_A, "spot": CPU_B},
        },
        {
            "nextLevel": [
                _node_item("h100-a", onDemand=H100_A),
                _node_item("h100-b", spot=H100_B),
            ],
            "key": POOL,
            "value": "gpu",
            "stat": {"onDemand": H100_A, "spot": H100_B},
        },
    ],
    "breakdown": {
        ZONE: [
            {"key": ZONE, "value": "", "stat": {"onDemand": STATIC_1}},
            {"key": ZONE, "value": "us-west-2a", "stat": {"onDemand": ZONE_A}},
            {"key": ZONE, "value": "us-west-2b", "stat": {"spot": ZONE_B}},
        ]
    },
    "provider": "kubernetes",
}


def test_exact_overview_and_breakdown_json() -> None:
    nodes, pods = small_cluster()
    summary = compute(nodes, pods, region_name="eks-prod")
    assert to_wire(summary.resource) == EXPECTED
    assert summary.excluded == [
        ("cpu-c", "NotReady"),
        ("cpu-d", "cordoned"),
        ("cpu-e", "Ready unknown"),
        ("cpu-f", "Ready unknown"),
    ]


def test_output_is_deterministic_whatever_the_input_order() -> None:
    nodes, pods = small_cluster()
    first = json.dumps(to_wire(compute(nodes, pods, region_name="x").resource))
    rng = random.Random(7)
    for _ in range(3):
        rng.shuffle(nodes)
        rng.shuffle(pods)
        again = compute(iter(nodes), iter(pods), region_name="x")  # one-pass iterables
        assert json.dumps(to_wire(again.resource)) == first


def test_empty_cluster() -> None:
    summary = compute([], [], region_name="kind")
    assert to_wire(summary.resource) == {
        "region": {"name": "kind"},
        "overview": [],
        "breakdown": {ZONE: []},
        "provider": "kubernetes",
    }
    assert summary.excluded == []


# -- which nodes count -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({}, None),
        ({"ready": "False"}, "NotReady"),
        ({"ready": "Unknown"}, "Ready unknown"),
        ({"ready": None}, "Ready unknown"),
        ({"unschedulable": True}, "cordoned"),
        ({"ready": "False", "unschedulable": True}, "NotReady"),
    ],
)
def test_node_reason(kw: dict[str, Any], reason: str | None) -> None:
    assert node_reason(node("n", labels={}, **kw)) == reason


def test_excluded_nodes_and_their_pods_count_nowhere() -> None:
    nodes = [
        _cpu_node("ok", spot=False, zone="z"),
        _cpu_node("down", spot=False, zone="z", ready="False"),
    ]
    pods = [simple_pod("a", "down", cpu="3")]
    summary = compute(nodes, pods, region_name="r")
    [pool] = summary.resource.overview
    assert [n.value for n in pool.next_level] == ["ok"]
    assert pool.stat.on_demand is not None
    assert pool.stat.on_demand.supply["cpu"] == {"vcpu": "15.89"}
    assert pool.stat.on_demand.allocated["cpu"] == {"vcpu": "0"}
    assert summary.excluded == [("down", "NotReady")]


# -- clouds: pools, capacity class, GPU products ---------------------------------------------


def _mixed_fleet() -> list[dict[str, Any]]:
    return [
        eks_node("eks-od", nodegroup="ng-cpu", instance_type="m6i.2xlarge", zone="us-east-1a"),
        eks_node("eks-spot", nodegroup="ng-spot", instance_type="m6i.2xlarge", spot=True),
        eks_node(
            "eks-t4",
            nodegroup="ng-t4",
            instance_type="g4dn.xlarge",
            gpus=1,
            product="Tesla-T4",
        ),
        gke_node("gke-spot", pool="spot-pool", machine_type="e2-standard-8", spot=True),
        gke_node("gke-pre", pool="pre-pool", machine_type="e2-standard-8", preemptible=True),
        gke_node(
            "gke-l4",
            pool="l4-pool",
            machine_type="g2-standard-24",
            gpus=2,
            accelerator="nvidia-l4",
        ),
        aks_node("aks-spot", pool="spotnp", vm_size="Standard_D8s_v5", spot=True),
        aks_node("aks-gpu", pool="gpunp", vm_size="Standard_NC24ads_A100_v4", gpus=1),
        karpenter_node("karp-spot", nodepool="default", instance_type="c7i.large", spot=True),
        karpenter_node("karp-od", nodepool="default", instance_type="c7i.large", zone="us-west-2a"),
    ]


def _by_node(summary_resource: Any) -> dict[str, tuple[str, str, Any]]:
    out = {}
    for pool in summary_resource.overview:
        for child in pool.next_level:
            out[child.value] = (pool.key, pool.value, child.stat)
    return out


def test_pools_spot_and_gpu_products_across_clouds() -> None:
    summary = compute(_mixed_fleet(), [], region_name="fleet")
    nodes = _by_node(summary.resource)
    pools = {name: (key, value) for name, (key, value, _) in nodes.items()}
    assert pools == {
        "eks-od": ("eks.amazonaws.com/nodegroup", "ng-cpu"),
        "eks-spot": ("eks.amazonaws.com/nodegroup", "ng-spot"),
        "eks-t4": ("eks.amazonaws.com/nodegroup", "ng-t4"),
        "gke-spot": ("cloud.google.com/gke-nodepool", "spot-pool"),
        "gke-pre": ("cloud.google.com/gke-nodepool", "pre-pool"),
        "gke-l4": ("cloud.google.com/gke-nodepool", "l4-pool"),
        "aks-spot": ("kubernetes.azure.com/agentpool", "spotnp"),
        "aks-gpu": ("kubernetes.azure.com/agentpool", "gpunp"),
        "karp-spot": (POOL, "default"),
        "karp-od": (POOL, "default"),
    }
    spot = {name for name, (_, _, stat) in nodes.items() if stat.spot is not None}
    on_demand = {name for name, (_, _, stat) in nodes.items() if stat.on_demand is not None}
    assert spot == {"eks-spot", "gke-spot", "gke-pre", "aks-spot", "karp-spot"}
    assert on_demand == set(nodes) - spot
    gpus = {
        name: stat.on_demand.supply["gpu"]
        for name, (_, _, stat) in nodes.items()
        if stat.on_demand is not None and "gpu" in stat.on_demand.supply
    }
    # GFD's product label wins over the cloud's; AKS labels no product.
    assert gpus == {
        "eks-t4": {"Tesla-T4": "1"},
        "gke-l4": {"nvidia-l4": "2"},
        "aks-gpu": {"unknown": "1"},
    }
    # the Karpenter pool holds both classes
    default = next(p for p in summary.resource.overview if p.value == "default")
    assert default.stat.spot is not None and default.stat.on_demand is not None
    assert default.stat.spot.supply["instance"] == {"c7i.large": "1"}


def test_configured_pool_label_then_fallbacks() -> None:
    fleet = _mixed_fleet()
    fleet[0]["metadata"]["labels"]["team"] = "search"
    rules = PoolRules(pool_label="team")
    pools = {(p.key, p.value) for p in compute(fleet, [], rules, region_name="r").resource.overview}
    assert ("team", "search") in pools
    assert ("cloud.google.com/gke-nodepool", "l4-pool") in pools

    strict = PoolRules(pool_label="team", pool_fallbacks=())
    overview = compute(fleet, [], strict, region_name="r").resource.overview
    assert [(p.key, p.value, len(p.next_level)) for p in overview] == [
        ("team", "", 9),
        ("team", "search", 1),
    ]


def test_custom_spot_rules_replace_the_defaults() -> None:
    a = node("a", labels={"capacity": "Preemptible"})
    b = node("b", labels={"eks.amazonaws.com/capacityType": "SPOT"})
    rules = PoolRules(spot_rules={"capacity": ("preemptible",)})
    by = _by_node(compute([a, b], [], rules, region_name="r").resource)
    assert by["a"][2].spot is not None and by["a"][2].on_demand is None  # case-insensitive
    assert by["b"][2].on_demand is not None and by["b"][2].spot is None


def test_several_breakdown_labels() -> None:
    rules = PoolRules(breakdown_labels=(ZONE, "node.kubernetes.io/instance-type"))
    summary = compute(_mixed_fleet(), [], rules, region_name="r")
    assert list(summary.resource.breakdown) == [ZONE, "node.kubernetes.io/instance-type"]
    types = summary.resource.breakdown["node.kubernetes.io/instance-type"]
    assert [i.value for i in types] == sorted(i.value for i in types)
    c7i = next(i for i in types if i.value == "c7i.large")
    assert c7i.key == "node.kubernetes.io/instance-type"
    assert c7i.stat.spot is not None and c7i.stat.on_demand is not None
    zones = [i.value for i in summary.resource.breakdown[ZONE]]
    assert zones == ["eastus-1", "us-central1-a", "us-east-1a", "us-west-2a", "us-west-2b"]


def test_other_gpu_vendors_and_extended_resources() -> None:
    amd = node(
        "mi300",
        labels={"node.kubernetes.io/instance-type": "bm.gpu.mi300x.8"},
        allocatable={"amd.com/gpu": "8", "hugepages-1Gi": "64Gi", "example.com/fpga": "0"},
    )
    gaudi = node(
        "gaudi",
        labels={"node.kubernetes.io/instance-type": "dl1.24xlarge"},
        allocatable={"habana.ai/gaudi": "8", "nvidia.com/gpu": "0"},
    )
    pods = [
        pod(
            "p",
            "mi300",
            containers=[
                container(requests={"amd.com/gpu": "2", "hugepages-1Gi": "2Gi", "cpu": "1"})
            ],
        )
    ]
    by = _by_node(compute([amd, gaudi], pods, region_name="r").resource)
    stat = by["mi300"][2].on_demand
    assert stat.supply["gpu"] == {"unknown": "8"}
    assert stat.allocatable["gpu"] == {"unknown": "6"}
    # hugepages in bytes; a zero-sized extended resource is left out
    assert stat.supply["resource"] == {"hugepages-1Gi": str(64 * 2**30)}
    assert stat.allocated["resource"] == {"hugepages-1Gi": str(2 * 2**30)}
    # Two GPU resources on one node share the product key.
    assert by["gaudi"][2].on_demand.supply["gpu"] == {"unknown": "8"}


def test_requested_but_not_offered_is_still_allocated() -> None:
    n = node("n", labels={}, allocatable={})
    pods = [
        simple_pod("g", "n", gpu="1"),
        pod("e", "n", containers=[container(requests={"ephemeral-storage": "1Gi", "pods": "1"})]),
    ]
    stat = _by_node(compute([n], pods, region_name="r").resource)["n"][2].on_demand
    assert stat.allocated["gpu"] == {"unknown": "1"}
    assert "gpu" not in stat.supply and "gpu" not in stat.allocatable
    assert set(stat.supply) == {"cpu", "memory", "instance"}


# -- pod requests ----------------------------------------------------------------------------


def _reqs(p: dict[str, Any]) -> dict[str, int]:
    return pod_requests(p)


def test_containers_sum() -> None:
    p = pod(
        "p",
        "n",
        containers=[
            container("a", requests={"cpu": "250m", "memory": "64Mi"}),
            container("b", requests={"cpu": "1"}),
            container("c"),  # no resources at all
        ],
    )
    assert _reqs(p) == {"cpu": 1250, "memory": 64 * 2**20 * 1000}


def test_init_container_peak_wins_when_larger() -> None:
    p = pod(
        "p",
        "n",
        containers=[container(requests={"cpu": "500m"})],
        init=[
            container("i1", requests={"cpu": "2"}),
            container("i2", requests={"cpu": "3", "memory": "1Gi"}),
        ],
    )
    assert _reqs(p) == {"cpu": 3000, "memory": 2**30 * 1000}


def test_sidecar_adds_to_the_sum_and_to_later_init_containers_only() -> None:
    # init-1 runs before the sidecar starts: alone. init-2 runs beside it.
    p = pod(
        "p",
        "n",
        containers=[container(requests={"cpu": "1"})],
        init=[
            container("init-1", requests={"cpu": "2500m"}),
            container("mesh", requests={"cpu": "500m"}, restart_policy="Always"),
            container("init-2", requests={"cpu": "2"}),
        ],
    )
    # app phase 1 + 0.5 = 1.5; init-1 2.5; init-2 2 + 0.5 = 2.5 -> 2.5
    assert _reqs(p) == {"cpu": 2500}
    p["spec"]["initContainers"][2]["resources"]["requests"]["cpu"] = "2100m"
    assert _reqs(p) == {"cpu": 2600}


def test_sidecars_only() -> None:
    p = pod(
        "p",
        "n",
        containers=[container(requests={"memory": "1Gi"})],
        init=[
            container("s1", requests={"memory": "1Gi"}, restart_policy="Always"),
            container("s2", requests={"memory": "512Mi"}, restart_policy="Always"),
        ],
    )
    assert _reqs(p) == {"memory": int(2.5 * 2**30) * 1000}


def test_limits_default_the_missing_requests() -> None:
    p = pod(
        "p",
        "n",
        containers=[
            container(requests={"cpu": "100m"}, limits={"cpu": "2", "memory": "1Gi"}),
            container("gpu", limits={"nvidia.com/gpu": "1"}),
        ],
    )
    assert _reqs(p) == {"cpu": 100, "memory": 2**30 * 1000, "nvidia.com/gpu": 1000}


def test_overhead_and_pod_level_requests() -> None:
    p = pod(
        "p",
        "n",
        containers=[container(requests={"cpu": "100m", "memory": "1Gi", "example.com/x": "1"})],
        overhead={"cpu": "250m", "memory": "120Mi"},
        pod_requests={"cpu": "2", "memory": "4Gi"},
    )
    assert _reqs(p) == {
        "cpu": 2250,
        "memory": (4 * 2**30 + 120 * 2**20) * 1000,
        "example.com/x": 1000,
    }


def test_daemonset_and_static_pods_use_resources_but_not_instances() -> None:
    n = _cpu_node("n", spot=False, zone="z")
    summary = compute([n], [daemon_pod("ds", "n")], region_name="r")
    stat = _by_node(summary.resource)["n"][2].on_demand
    assert stat.allocated["cpu"] == {"vcpu": "0.1"}
    assert stat.allocated["instance"] == {"m7i.4xlarge": "0"}
    summary = compute([n], [daemon_pod("ds", "n"), simple_pod("w", "n")], region_name="r")
    stat = _by_node(summary.resource)["n"][2].on_demand
    assert stat.allocated["instance"] == {"m7i.4xlarge": "1"}
    assert stat.allocatable["instance"] == {"m7i.4xlarge": "0"}


def test_allocatable_never_below_zero() -> None:
    n = node("n", labels={}, cpu="1", memory="1Gi")
    summary = compute([n], [simple_pod("big", "n", cpu="3", memory="2Gi")], region_name="r")
    stat = _by_node(summary.resource)["n"][2].on_demand
    assert stat.allocated["cpu"] == {"vcpu": "3"}
    assert stat.allocatable["cpu"] == {"vcpu": "0"}
    assert stat.allocatable["memory"] == {"GiB": "0"}
    gib = 1000 * 2**30
    assert summary.overcommitted == [
        Overcommit("n", ((("cpu", "vcpu"), 3000, 1000), (("memory", "GiB"), 2 * gib, gib)))
    ]


def test_an_overcommitted_node_takes_nothing_from_its_groups() -> None:
    """Groups sum what each node has left: the overcommitted node adds 0, it does not
    subtract its excess from its neighbours' room."""
    nodes = [
        karpenter_node(name, nodepool="general", instance_type="m7i.large", cpu="2", zone="z")
        for name in ("full", "free")
    ]
    pods = [simple_pod("big", "full", cpu="3", memory="1Gi")]
    summary = compute(nodes, pods, region_name="r")
    [pool] = summary.resource.overview
    [zone] = summary.resource.breakdown[ZONE]
    for group in (pool, zone):
        assert group.stat.on_demand is not None
        assert group.stat.on_demand.allocatable["cpu"] == {"vcpu": "2"}
    assert [o.node for o in summary.overcommitted] == ["full"]
    assert summary.overcommitted[0].excess == ((("cpu", "vcpu"), 3000, 2000),)


# -- malformed quantities ----------------------------------------------------------------------


def test_malformed_node_quantity_names_node_and_field() -> None:
    bad = node("gpu-1", labels={}, memory="12XB")
    with pytest.raises(ShoalError) as err:
        compute([bad], [], region_name="r")
    assert str(err.value).startswith(
        "node gpu-1 status.allocatable.memory: '12XB' is not a quantity"
    )


MALFORMED_PODS = [
    (
        pod("t", "n", namespace="ml", containers=[container(requests={"cpu": "two"})]),
        "spec.containers[0].resources.requests.cpu",
    ),
    (
        pod("t", "n", namespace="ml", containers=[container(limits={"memory": "1GB"})]),
        "spec.containers[0].resources.limits.memory",
    ),
    (
        pod(
            "t",
            "n",
            namespace="ml",
            containers=[container(), container("b", requests={"cpu": "1x"})],
        ),
        "spec.containers[1].resources.requests.cpu",
    ),
    (
        pod("t", "n", namespace="ml", init=[container("i", requests={"cpu": "-"})]),
        "spec.initContainers[0].resources.requests.cpu",
    ),
    (
        pod("t", "n", namespace="ml", overhead={"memory": "lots"}),
        "spec.overhead.memory",
    ),
    (
        pod("t", "n", namespace="ml", pod_requests={"cpu": "1 core"}),
        "spec.resources.requests.cpu",
    ),
]


@pytest.mark.parametrize(("p", "field"), MALFORMED_PODS)
def test_malformed_pod_quantity_names_pod_and_field(p: dict[str, Any], field: str) -> None:
    n = node("n", labels={})
    with pytest.raises(ShoalError, match=r"is not a quantity") as err:
        compute([n], [p], region_name="r")
    assert str(err.value).startswith(f"pod ml/t {field}: ")


# -- predictions -------------------------------------------------------------------------------

T0 = datetime(2026, 3, 7, 0, 0, 0, 250000, tzinfo=UTC)
# The present, an hour before T0: windows at T0 are in the future, so deadlines past by
# then (but not by now) are simply over.
NOW = datetime(2026, 3, 6, 23, 0, 0, tzinfo=UTC)


def _cpu_allocated(view: Any) -> str:
    [pool] = view.overview
    return str(pool.stat.on_demand.allocated["cpu"]["vcpu"])


def test_predictions_return_resources_at_each_deadline() -> None:
    n = _cpu_node("n", spot=False, zone="z")
    pods = [
        # ends 01:00:00, exactly at the window's end
        simple_pod("a", "n", cpu="1", deadline=7200, start="2026-03-06T23:00:00Z"),
        # no startTime yet: creationTimestamp 00:10:00 + 600 s -> 00:20:00
        simple_pod("b", "n", cpu="2", deadline=600, start=None, created="2026-03-07T00:10:00Z"),
        # ended before the window
        simple_pod("c", "n", cpu="4", deadline=60, start="2026-03-06T20:00:00Z"),
        # ends after the window
        simple_pod("d", "n", cpu="8", deadline=86400, start="2026-03-07T00:00:00Z"),
        # no deadline
        simple_pod("e", "n", cpu="500m"),
        # finished: not counted anywhere
        simple_pod("f", "n", cpu="16", deadline=10**6, phase="Succeeded"),
    ]
    out = predictions(
        [n],
        pods,
        region_name="r",
        start=T0,
        end=datetime(2026, 3, 7, 1, 0, 0, tzinfo=UTC),
        now=NOW,
    ).points
    assert list(out) == ["2026-03-07T00:00:00Z", "2026-03-07T00:20:00Z", "2026-03-07T01:00:00Z"]
    assert [_cpu_allocated(v) for v in out.values()] == ["11.5", "9.5", "8.5"]
    last = to_wire(out["2026-03-07T01:00:00Z"])
    assert last["provider"] == "kubernetes" and last["region"] == {"name": "r"}
    stat = last["overview"][0]["stat"]["onDemand"]
    assert stat["allocatable"]["cpu"] == {"vcpu": "7.39"}
    assert stat["allocated"]["instance"] == {"m7i.4xlarge": "1"}


def test_predictions_instance_becomes_free_when_its_last_pod_ends() -> None:
    n = _cpu_node("n", spot=False, zone="z")
    pods = [
        simple_pod("a", "n", deadline=1800, start="2026-03-07T00:00:00Z"),
        daemon_pod("ds", "n"),
    ]
    end = datetime(2026, 3, 7, 2, tzinfo=UTC)
    out = predictions([n], pods, region_name="r", start=T0, end=end, now=NOW).points
    assert list(out) == ["2026-03-07T00:00:00Z", "2026-03-07T00:30:00Z", "2026-03-07T02:00:00Z"]
    instances = [
        to_wire(v)["overview"][0]["stat"]["onDemand"]["allocatable"]["instance"]
        for v in out.values()
    ]
    assert instances == [{"m7i.4xlarge": "0"}, {"m7i.4xlarge": "1"}, {"m7i.4xlarge": "1"}]


def test_predictions_window_of_one_instant() -> None:
    n = node("n", labels={})
    out = predictions([n], [], region_name="r", start=T0, end=T0, now=NOW).points
    assert list(out) == ["2026-03-07T00:00:00Z"]


def test_predictions_refuse_an_inverted_window() -> None:
    with pytest.raises(UsageError, match="before --start"):
        end = datetime(2026, 1, 1, tzinfo=UTC)
        predictions([], [], region_name="r", start=T0, end=end, now=NOW)


def test_predictions_malformed_start_time_names_the_pod() -> None:
    p = simple_pod("a", "n", deadline=60, start="yesterday", namespace="ml")
    with pytest.raises(ShoalError, match=r"^pod ml/a status\.startTime: 'yesterday'"):
        predictions([node("n", labels={})], [p], region_name="r", start=T0, end=T0, now=NOW)


def test_a_pod_past_its_deadline_counts_now_and_in_the_window_at_now() -> None:
    """One rule for both: the overdue pod (ended by its deadline at 20:01, still listed as
    Running) holds at T0, now or as a window's start, and is gone from the next second."""
    n = _cpu_node("n", spot=False, zone="z")
    overdue = simple_pod("c", "n", cpu="4", deadline=60, start="2026-03-06T20:00:00Z")
    now = compute([n], [overdue], region_name="r", now=T0).resource
    later = datetime(2026, 3, 7, 1, tzinfo=UTC)
    window = predictions([n], [overdue], region_name="r", start=T0, end=later, now=T0).points
    assert to_wire(window["2026-03-07T00:00:00Z"]) == to_wire(now)
    assert [_cpu_allocated(v) for v in window.values()] == ["4", "0", "0"]
    assert list(window) == [
        "2026-03-07T00:00:00Z",
        "2026-03-07T00:00:01Z",
        "2026-03-07T01:00:00Z",
    ]
