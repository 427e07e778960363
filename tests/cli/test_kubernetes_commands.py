"""`shoal regions|types|resources|pricing --provider kubernetes` end to end: the in-process
CLI over a kubeconfig naming the loopback API server (plain HTTP). JSON shapes, tables,
context selection, exit codes, and stdout holding nothing but JSON under --json."""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.cloud.http import RetryPolicy
from providers.core.wire import format_time
from tests.conftest import Run
from tests.providers.kubernetes import objects as k8s
from tests.providers.kubernetes.apiserver import ApiServer
from tests.providers.kubernetes.test_catalog import (
    EXCLUDED_WARNING,
    EXPECTED_MIXED,
    TOKEN,
    fill_cache,
    mixed_nodes,
    mixed_pods,
    priced_nodes,
    upstream,
    write_kubeconfig,
)

Cli = Callable[..., Run]
K8S = ("-p", "kubernetes")


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer(tokens=[TOKEN]) as server:
        server.add_many("nodes", mixed_nodes())
        server.add_many("pods", mixed_pods())
        yield server


@pytest.fixture
def env(api: ApiServer, tmp_path: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(write_kubeconfig(tmp_path / "kubeconfig", api.base))}


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


def table_rows(stdout: str, title: str) -> list[list[str]]:
    """The cells of the table titled `title` (columns are two or more spaces apart)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title)
    rows: list[list[str]] = []
    for line in lines[start + 3 :]:  # title, header, rule
        if not line.strip() or not line.startswith(" "):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


# -- JSON --------------------------------------------------------------------------------------


def test_regions_json_are_the_contexts(cli: Cli, env: dict[str, str], api: ApiServer) -> None:
    run = ok(cli("regions", *K8S, "--json", env=env))
    assert run.json() == [
        {"name": "prod", "location": "current", "kubernetes": upstream("prod")},
        {"name": "staging", "kubernetes": upstream("staging")},
    ]
    assert run.stderr == ""
    assert api.seen == []


def test_types_json(cli: Cli, env: dict[str, str]) -> None:
    run = ok(cli("types", *K8S, "--json", env=env))
    found = run.json()
    assert all(t.pop("instanceType") == t["name"] for t in found)  # upstream's member
    assert all(
        t.pop("source").endswith("node(s) report in status.capacity (context prod)") for t in found
    )
    assert found == [
        {
            "name": "e2-standard-4",
            "vcpus": 4.0,
            "memory_gib": 16.0,
            "arch": "x86_64",
            "gpu_count": 0,
            "region": "prod",
        },
        {
            "name": "g5.2xlarge",
            "vcpus": 8.0,
            "memory_gib": 32.0,
            "arch": "x86_64",
            "gpu": "A10G",  # one name per model across providers
            "gpu_count": 1,
            "region": "prod",
        },
        {
            "name": "m5.xlarge",
            "vcpus": 4.0,
            "memory_gib": 16.0,
            "arch": "x86_64",
            "gpu_count": 0,
            "region": "prod",
        },
    ]


def test_resources_json_is_the_exact_resource_list(cli: Cli, env: dict[str, str]) -> None:
    run = ok(cli("resources", *K8S, "--json", env=env))
    data = run.json()
    assert isinstance(data, list) and len(data) == 1
    assert list(data[0]) == ["region", "overview", "breakdown", "provider"]
    assert data == [EXPECTED_MIXED]


def test_json_stdout_is_only_json_and_warnings_go_to_stderr(cli: Cli, env: dict[str, str]) -> None:
    run = ok(cli("resources", *K8S, "--json", env=env))
    json.loads(run.stdout)  # the whole of stdout, nothing before or after
    assert run.stdout.lstrip().startswith("[") and "warning" not in run.stdout
    assert run.stderr == f"shoal: warning: {EXCLUDED_WARNING}\n"


def test_resources_window_json(cli: Cli, env: dict[str, str], api: ApiServer) -> None:
    # started half an hour ago, killed an hour after it started: a window from now on
    # sees it give its cpu back (a deadline already past would hold until now).
    began = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
    api.add(
        "pods",
        k8s.simple_pod("batch-1", "eks-od-1", cpu="2", deadline=3600, start=format_time(began)),
    )
    start, end = format_time(began + timedelta(minutes=30)), format_time(began + timedelta(hours=2))
    run = ok(cli("resources", *K8S, "--start", start, "--end", end, "--json", env=env))
    data = run.json()
    assert list(data) == [start, format_time(began + timedelta(hours=1)), end]

    def eks_cpu(at: str) -> str:
        [pool] = [p for p in data[at]["overview"] if p["value"] == "ng-general"]
        return str(pool["stat"]["onDemand"]["allocated"]["cpu"]["vcpu"])

    assert [eks_cpu(at) for at in data] == ["3", "1", "1"]


# -- tables --------------------------------------------------------------------------------


def test_resources_table_has_a_row_per_pool_class_and_resource(
    cli: Cli, env: dict[str, str]
) -> None:
    run = ok(cli("resources", *K8S, env=env))
    rows = table_rows(run.stdout, "kubernetes resources")
    header = run.stdout.splitlines()[1].split()
    assert header == ["Region", "Level", "Class", "Resource", "Supply", "Allocated", "Allocatable"]
    assert {r[0] for r in rows} == {"prod"}
    # 3 pools, 4 nodes and 3 zones; 4 resources per GPU class, 3 per CPU class, 2 classes in
    # the gpu pool and zone us-east-1b
    assert len(rows) == (8 + 4 + 4) + (3 + 3) + (3 + 3) + (3 + 3 + 8)
    assert ["prod", "karpenter.sh/nodepool=gpu", "spot", "gpu/NVIDIA-A10G", "1", "1", "0"] in rows
    assert [
        "prod",
        "karpenter.sh/nodepool=gpu",
        "od",
        "instance/g5.2xlarge",
        "1",
        "0",
        "1",
    ] in rows
    assert ["prod", "node=eks-od-1", "od", "cpu/vcpu", "4", "1", "3"] in rows
    assert [
        "prod",
        "cloud.google.com/gke-nodepool=spot-pool",
        "spot",
        "memory/GiB",
        "16",
        "0.13",
        "15.88",
    ] in rows
    assert [
        "prod",
        "topology.kubernetes.io/zone=us-east-1a",
        "od",
        "instance/m5.xlarge",
        "1",
        "1",
        "0",
    ] in rows
    assert not any("eks-notready" in cell or "karp-cordoned" in cell for r in rows for cell in r)
    assert EXCLUDED_WARNING in run.stderr


def test_context_option_env_and_region_select_another_context(
    cli: Cli, env: dict[str, str], api: ApiServer
) -> None:
    by_option = ok(cli("resources", *K8S, "--context", "staging", "--json", env=env)).json()
    staging = {"name": "staging", "kubernetes": upstream("staging")}
    assert by_option[0]["region"] == staging
    by_region = ok(cli("resources", *K8S, "--region", "staging", "--json", env=env)).json()
    assert by_region[0]["region"] == staging
    by_env = ok(cli("types", *K8S, "--json", env={**env, "SHOAL_KUBE_CONTEXT": "staging"}))
    assert {t["region"] for t in by_env.json()} == {"staging"}
    everywhere = ok(cli("resources", *K8S, "--region", "all", "--json", env=env)).json()
    assert [r["region"]["name"] for r in everywhere] == ["prod", "staging"]
    table = ok(cli("resources", *K8S, "--context", "staging", env=env))
    assert {r[0] for r in table_rows(table.stdout, "kubernetes resources")} == {"staging"}


def test_pricing_shows_the_pool_costs_table(cli: Cli, home: Path, tmp_path: Path) -> None:
    fill_cache(home)
    with ApiServer(tokens=[TOKEN]) as api:
        api.add_many("nodes", priced_nodes())
        api.add_many("pods", mixed_pods())
        env = {"KUBECONFIG": str(write_kubeconfig(tmp_path / "kc", api.base))}
        run = ok(cli("pricing", *K8S, env=env))
        as_json = ok(cli("pricing", *K8S, "--json", env=env)).json()
    prices = table_rows(run.stdout, "pricing")
    # Type, its shape from the nodes (vCPUs, GiB, GPU), on-demand and spot price.
    assert [r[:8] for r in prices] == [
        ["kubernetes", "prod", "g5.2xlarge", "8", "32", "A10G x1", "1.212", "—"],
        ["kubernetes", "prod", "m5.xlarge", "7.91", "30.32", "—", "0.192", "0.0712"],
    ]
    assert table_rows(run.stdout, "pool costs") == [
        ["prod", "karpenter.sh/nodepool (none)", "1", "0", "—", "—", "—", "1"],
        ["prod", "karpenter.sh/nodepool=gpu", "2", "1", "2.424", "1.212", "1.212", "—"],
        ["prod", "eks.amazonaws.com/nodegroup=ng-general", "1", "0", "0.192", "0.192", "0", "—"],
        ["prod", "eks.amazonaws.com/nodegroup=ng-spot", "1", "1", "0.0712", "0", "0.0712", "—"],
        ["prod", "cloud.google.com/gke-nodepool=spot-pool", "1", "1", "—", "—", "—", "1"],
    ]
    assert "no spot price cached for g5.2xlarge in aws us-east-1" in run.stderr
    assert (
        "kubernetes: 2 of 6 nodes have no cached cloud price "
        "(run `shoal pricing -p gcp --region us-central1` to fetch)\n"
    ) in run.stderr
    [priced] = as_json
    assert priced["provider"] == "kubernetes"
    assert priced["region"] == {"name": "prod", "kubernetes": upstream("prod")}
    assert [(p["value"], p["nodes"]) for p in priced["pools"]] == [
        ("", 1),
        ("gpu", 2),
        ("ng-general", 1),
        ("ng-spot", 1),
        ("spot-pool", 1),
    ]


# -- what users were shown wrong -------------------------------------------------------------

A100 = "NVIDIA-A100-SXM4-40GB"


def cluster_env(tmp_path: Path, server: ApiServer) -> dict[str, str]:
    return {"KUBECONFIG": str(write_kubeconfig(tmp_path / "kc", server.base))}


def a100_node(name: str, *, gpus_left: int = 8) -> dict[str, Any]:
    """A p4d.24xlarge: 96 vCPUs, 1152 GiB and 8 A100s, less the kubelet's reservations;
    `gpus_left` is what the device plugin still offers (a failed GPU lowers it)."""
    node = k8s.eks_node(
        name,
        nodegroup="gpu",
        instance_type="p4d.24xlarge",
        gpus=8,
        product=A100,
        cpu="95690m",
        memory="1120Gi",
    )
    node["status"]["capacity"].update({"cpu": "96", "memory": "1152Gi"})
    node["status"]["allocatable"]["nvidia.com/gpu"] = str(gpus_left)
    return node


def test_types_show_the_machine_not_the_first_node_that_lost_a_gpu(
    cli: Cli, tmp_path: Path
) -> None:
    """The first p4d node in name order has a failed GPU: the type still has 8 GPUs, 96
    vCPUs and 1152 GiB (capacity, as most of its nodes report), so `gpu_count>=8` finds it."""
    with ApiServer(tokens=[TOKEN]) as api:
        api.add_many(
            "nodes", [a100_node("p4d-1", gpus_left=7), a100_node("p4d-2"), a100_node("p4d-3")]
        )
        env = cluster_env(tmp_path, api)
        run = ok(cli("types", *K8S, "--select", "gpu_count>=8", "--json", env=env))
        same = ok(cli("types", *K8S, "--select", "gpu=A100-40GB", "--json", env=env))
    assert run.json() == same.json() == [
        {
            "name": "p4d.24xlarge",
            "instanceType": "p4d.24xlarge",
            "vcpus": 96.0,
            "memory_gib": 1152.0,
            "arch": "x86_64",
            "gpu": "A100",  # the canonical model, from the product label
            "gpu_count": 8,
            "gpu_memory_gib": 40.0,
            "region": "prod",
            "source": "the shape most of its 3 node(s) report in status.capacity (context prod)",
        }
    ]


def test_pricing_without_cached_prices_shows_unknown_not_zero(cli: Cli, tmp_path: Path) -> None:
    """No cached cloud price: the pool's $/h are "—" in the table and null in the JSON, and
    the note says no node is priced and which catalog to fetch."""
    with ApiServer(tokens=[TOKEN]) as api:
        api.add_many("nodes", [n for n in priced_nodes() if n["metadata"]["name"] == "eks-od-1"])
        env = cluster_env(tmp_path, api)
        run = ok(cli("pricing", *K8S, env=env))
        as_json = ok(cli("pricing", *K8S, "--json", env=env)).json()
    assert table_rows(run.stdout, "pool costs") == [
        ["prod", "eks.amazonaws.com/nodegroup=ng-general", "1", "0", "—", "—", "—", "1"]
    ]
    note = (
        "kubernetes: no node has a cached cloud price "
        "(run `shoal pricing -p aws --region us-east-1` to fetch)"
    )
    assert note in run.stderr.splitlines()
    [pool] = as_json[0]["pools"]
    assert (pool["hourly"], pool["usedHourly"], pool["idleHourly"]) == (None, None, None)
    assert pool["unpricedNodes"] == 1


OVERCOMMIT_WARNING = (
    "kubernetes: 1 node(s) overcommitted (pods hold more than the node offers; allocatable "
    f"shown as 0): p4d-1 gpu/{A100} 8>7"
)


@pytest.fixture
def overcommitted(tmp_path: Path) -> Iterator[dict[str, str]]:
    """p4d-1 lost a GPU after two 4-GPU pods were placed on it; p4d-2 runs a 2-GPU pod."""
    with ApiServer(tokens=[TOKEN]) as api:
        api.add_many("nodes", [a100_node("p4d-1", gpus_left=7), a100_node("p4d-2")])
        api.add_many(
            "pods",
            [
                k8s.simple_pod("train-a", "p4d-1", gpu="4"),
                k8s.simple_pod("train-b", "p4d-1", gpu="4"),
                k8s.simple_pod("train-c", "p4d-2", gpu="2"),
            ],
        )
        yield cluster_env(tmp_path, api)


def test_overcommitted_node_is_named_and_takes_nothing_from_its_pool(
    cli: Cli, overcommitted: dict[str, str]
) -> None:
    run = ok(cli("resources", *K8S, "--json", env=overcommitted))
    assert run.stderr == f"shoal: warning: {OVERCOMMIT_WARNING}\n"
    [pool] = run.json()[0]["overview"]
    nodes = {n["value"]: n["stat"]["onDemand"] for n in pool["nextLevel"]}
    assert nodes["p4d-1"]["allocated"]["gpu"] == {A100: "8"}
    assert nodes["p4d-1"]["allocatable"]["gpu"] == {A100: "0"}
    # the pool has what p4d-2 has left (6), not 15 offered - 10 held
    assert pool["stat"]["onDemand"]["allocatable"]["gpu"] == {A100: "6"}


def test_overcommitted_node_is_a_pricing_note(cli: Cli, overcommitted: dict[str, str]) -> None:
    run = ok(cli("pricing", *K8S, "--json", env=overcommitted))
    assert OVERCOMMIT_WARNING.removeprefix("kubernetes: ") in run.json()[0]["notes"]
    assert OVERCOMMIT_WARNING not in run.stderr  # JSON carries it: said once
    table = ok(cli("pricing", *K8S, env=overcommitted))
    assert table.stderr.count(OVERCOMMIT_WARNING.removeprefix("kubernetes: ")) == 1


def test_a_pod_past_its_deadline_counts_the_same_now_and_in_a_window_at_now(
    cli: Cli, env: dict[str, str], api: ApiServer
) -> None:
    """`overdue` ran past its deadline months ago but the API still lists it Running: it
    holds its 2 cpu until it is gone, in `resources` and in `resources --start NOW` alike."""
    api.add("pods", k8s.simple_pod("overdue", "eks-od-1", cpu="2", deadline=3600))
    now = format_time(datetime.now(UTC))
    [present] = ok(cli("resources", *K8S, "--json", env=env)).json()
    window = ok(cli("resources", *K8S, "--start", now, "--json", env=env)).json()
    assert list(window) == [now]

    def by_pool(view: dict[str, Any]) -> dict[str, Any]:
        return {p["value"]: p["stat"] for p in view["overview"]}

    assert by_pool(window[now]) == by_pool(present)
    [eks] = [p for p in present["overview"] if p["value"] == "ng-general"]
    assert eks["stat"]["onDemand"]["allocated"]["cpu"] == {"vcpu": "3"}  # web-1 1 + overdue 2


# -- exit codes ------------------------------------------------------------------------------


def failed(run: Run, code: int) -> str:
    assert run.exit_code == code, (run.exit_code, run.stdout, run.stderr)
    assert run.stdout == ""
    [line] = run.stderr.splitlines()
    assert line.startswith("shoal: error: ")
    return line


def test_rejected_token_exits_77_without_the_token(
    cli: Cli, api: ApiServer, tmp_path: Path
) -> None:
    wrong = "tok-wrong-0000111122223333"
    env = {"KUBECONFIG": str(write_kubeconfig(tmp_path / "kc", api.base, token=wrong))}
    for command in ("types", "resources"):
        line = failed(cli(command, *K8S, "--json", env=env), 77)
        assert "401" in line and wrong not in line and TOKEN not in line
    # pricing --json prints the failed provider's error entry (README): no token there either.
    run = cli("pricing", *K8S, "--json", env=env)
    assert run.exit_code == 77, run.stderr
    [entry] = run.json()
    assert entry["provider"] == "kubernetes" and "401" in entry["error"]
    [line] = run.stderr.splitlines()
    assert "401" in line and line.startswith("shoal: error: ")
    for text in (run.stdout, run.stderr):
        assert wrong not in text and TOKEN not in text


def test_forbidden_exits_77(cli: Cli, env: dict[str, str], api: ApiServer) -> None:
    api.forbidden_namespaces.add("")
    assert "RBAC" in failed(cli("resources", *K8S, env=env), 77)


def test_unreachable_exits_69(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import providers.kubernetes.client as client_module

    fast = RetryPolicy(attempts=2, backoff_seconds=0.0, max_delay_seconds=0.0)
    monkeypatch.setattr(client_module, "RetryPolicy", lambda: fast)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"KUBECONFIG": str(write_kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{port}"))}
    line = failed(cli("resources", *K8S, "--json", env=env), 69)
    assert f"127.0.0.1:{port}" in line and "context 'prod'" in line


def test_server_errors_exit_69(
    cli: Cli, env: dict[str, str], api: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import providers.kubernetes.client as client_module

    fast = RetryPolicy(attempts=2, backoff_seconds=0.0, max_delay_seconds=0.0)
    monkeypatch.setattr(client_module, "RetryPolicy", lambda: fast)
    api.fault("status", status=503, path="/api/v1/nodes", times=2)
    assert "503" in failed(cli("resources", *K8S, env=env), 69)


def test_config_errors_exit_78(cli: Cli, env: dict[str, str], tmp_path: Path) -> None:
    line = failed(cli("resources", *K8S, "--context", "qa", env=env), 78)
    assert "unknown context 'qa'" in line and "prod, staging" in line
    line = failed(cli("resources", *K8S, "--region", "qa", "--json", env=env), 78)
    assert "unknown context 'qa'" in line
    missing = {"KUBECONFIG": str(tmp_path / "absent.yaml")}
    for command in ("regions", "types", "resources"):
        assert "KUBECONFIG" in failed(cli(command, *K8S, "--json", env=missing), 78)
    broken = tmp_path / "broken.yaml"
    broken.write_text("clusters: [unclosed\n")
    assert "malformed kubeconfig" in failed(
        cli("regions", *K8S, env={"KUBECONFIG": str(broken)}), 78
    )
