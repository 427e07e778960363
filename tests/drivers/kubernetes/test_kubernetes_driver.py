"""The kubernetes driver through the CLI, against the loopback Kubernetes API server: pods
and jobs created from definitions, capacity from the cluster's arithmetic, status with the
pod's reason, free with a grace period, and the errors users meet."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.providers.kubernetes.apiserver import ApiServer
from tests.providers.kubernetes.objects import eks_node, karpenter_node, pod

TOKEN = "tok-driver-0123456789"
Cli = Callable[..., Any]
SMALL = ("--cpu", "1", "--ram", "1")  # overridden by later flags

pytestmark = pytest.mark.usefixtures("ledger_backend")


def kubeconfig(path: Path, server: str, token: str = TOKEN, namespace: str = "team-a") -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "test",
                        "context": {"cluster": "c", "user": "u", "namespace": namespace},
                    }
                ],
            }
        )
    )
    return path


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer(tokens=[TOKEN]) as server:
        server.add("nodes", eks_node("cpu-1", nodegroup="general", instance_type="m6i.2xlarge"))
        server.add(
            "nodes",
            karpenter_node(
                "gpu-1",
                nodepool="gpu",
                instance_type="p5.48xlarge",
                spot=True,
                gpus=8,
                product="NVIDIA-H100-80GB-HBM3",
                cpu="191450m",
                memory="2002Gi",
            ),
        )
        yield server


@pytest.fixture
def env(api: ApiServer, tmp_path: Path) -> dict[str, str]:
    return {"KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", api.base))}


def ok(run: Any) -> Any:
    assert run.exit_code == 0, run.stderr
    return run


def alloc(cli: Cli, env: dict[str, str], *extra: str) -> dict[str, Any]:
    run = cli("alloc", "--driver", "kubernetes", "--json", *SMALL, *extra, env=env)
    assert run.exit_code == 0, run.stderr
    return run.json()  # type: ignore[no-any-return]


def test_alloc_creates_a_marked_pod_with_requests_deadline_and_env(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(
        cli,
        env,
        "--cpu",
        "2",
        "--ram",
        "4",
        "--lifetime",
        "10m",
        "-o",
        "image=busybox:1.36",
        "-o",
        "entry=sleep 600",
        "--meta",
        "JOB=build-7",
    )
    assert made["status"] == "ALLOCATED"
    name = made["resource"]["metadata"]["name"]
    assert made["resource"]["metadata"]["namespace"] == "team-a"
    created = api.get("pods", "team-a", name)
    assert created is not None
    meta, spec = created["metadata"], created["spec"]
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "shoal"
    assert meta["labels"]["shoal.dev/allocation"] == made["id"]
    (container,) = spec["containers"]
    assert container["image"] == "busybox:1.36" and container["command"] == ["sleep", "600"]
    assert container["resources"]["requests"] == {"cpu": "2", "memory": "4Gi"}
    assert container["resources"]["limits"] == container["resources"]["requests"]
    assert spec["activeDeadlineSeconds"] == 600 and spec["restartPolicy"] == "Never"
    env_vars = {e["name"]: e["value"] for e in container["env"]}
    assert env_vars["JOB"] == "build-7" and env_vars["SHOAL_ALLOCATION_ID"] == made["id"]


def test_spot_gpu_request_selects_pool_and_tolerates_spot(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(
        cli,
        env,
        "--cpu",
        "8",
        "--ram",
        "64",
        "-o",
        "image=trainer:1",
        "-o",
        "gpus=2",
        "-o",
        "spot=true",
        "-o",
        "pool=gpu",
    )
    spec = api.get("pods", "team-a", made["resource"]["metadata"]["name"])["spec"]  # type: ignore[index]
    assert spec["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "gpu"}
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]} in [
        t["matchExpressions"][0] for t in terms["nodeSelectorTerms"]
    ]
    assert any(t["key"] == "karpenter.sh/capacity-type" for t in spec["tolerations"])


def test_dry_run_counts_from_the_cluster(cli: Cli, api: ApiServer, env: dict[str, str]) -> None:
    # The GPU node has 8 GPUs; a running pod holds 6 of them: 1 more pair fits.
    api.add(
        "pods",
        pod(
            "busy",
            "gpu-1",
            containers=[{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "6"}}}],
        ),
    )
    run = ok(
        cli(
            "alloc",
            "--driver",
            "kubernetes",
            "--dry-run",
            "--json",
            *SMALL,
            "-o",
            "image=x",
            "-o",
            "gpus=2",
            env=env,
        )
    )
    assert run.json()["fits"] == 1
    run = ok(
        cli(
            "alloc",
            "--driver",
            "kubernetes",
            "--dry-run",
            "--json",
            *SMALL,
            "-o",
            "image=x",
            "-o",
            "gpus=2",
            "-o",
            "spot=false",
            env=env,
        )
    )
    assert run.json()["fits"] == 0


def test_no_room_is_retryable_and_nothing_is_created(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    run = cli("alloc", "--driver", "kubernetes", *SMALL, "-o", "image=x", "-o", "gpus=16", env=env)
    assert run.exit_code == 75
    assert api.names("pods") == []


def test_status_shows_why_a_pod_is_pending_then_how_it_exited(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "--cpu", "1", "-o", "image=busybox")
    name = made["resource"]["metadata"]["name"]
    api.update(
        "pods",
        "team-a",
        name,
        {
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/2 nodes are available: 2 Insufficient cpu.",
                    }
                ],
            }
        },
    )
    shown = ok(cli("status", made["id"], "--json", env=env)).json()
    assert shown["driver_status"] == "ALLOCATED"
    assert shown["detail"]["reason"] == "Unschedulable"
    assert "Insufficient cpu" in shown["detail"]["message"]
    table = ok(cli("status", made["id"], env=env)).stdout
    assert "detail.reason" in table and "Unschedulable" in table
    api.update(
        "pods",
        "team-a",
        name,
        {
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {
                        "name": "main",
                        "state": {
                            "waiting": {
                                "reason": "ImagePullBackOff",
                                "message": 'Back-off pulling image "busybox"',
                            }
                        },
                    }
                ],
            }
        },
    )
    shown = ok(cli("status", made["id"], "--json", env=env)).json()
    assert shown["detail"]["reason"] == "ImagePullBackOff"
    api.update(
        "pods",
        "team-a",
        name,
        {
            "status": {
                "phase": "Failed",
                "containerStatuses": [
                    {"name": "main", "state": {"terminated": {"reason": "Error", "exitCode": 3}}}
                ],
            }
        },
    )
    shown = ok(cli("status", made["id"], "--json", env=env)).json()
    # A pod that ended is a job that finished (EXITED, its code), not one that vanished.
    assert shown["driver_status"] == "NONE" and shown["status"] == "EXITED"
    assert shown["detail"]["exit_code"] == 3 and "exited with code 3" in shown["note"]


def test_free_deletes_with_grace_and_twice_is_harmless(
    cli: Cli, api: ApiServer, env: dict[str, str], write_config: Any
) -> None:
    write_config('[drivers."kubernetes/default"]\ngrace_seconds = 5\n')
    made = alloc(cli, env, "--cpu", "1", "-o", "image=busybox")
    name = made["resource"]["metadata"]["name"]
    ok(cli("free", made["id"], env=env))
    assert api.get("pods", "team-a", name) is None
    assert ("pods", "team-a", name, 5) in api.deletions
    again = ok(cli("free", made["id"], env=env))
    assert "already freed" in again.stdout + again.stderr


def test_free_of_a_pod_someone_else_deleted_is_harmless(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "--cpu", "1", "-o", "image=busybox")
    api._remove("pods", f"team-a/{made['resource']['metadata']['name']}")
    ok(cli("free", made["id"], env=env))


def test_job_kind_creates_a_job(
    cli: Cli, api: ApiServer, env: dict[str, str], write_config: Any
) -> None:
    write_config('[drivers."kubernetes/batch"]\nkind = "job"\n')
    made = alloc(cli, env, "--driver", "kubernetes/batch", "--lifetime", "1h", "-o", "image=x")
    job = api.get("jobs", "team-a", made["resource"]["metadata"]["name"])
    assert job is not None and job["spec"]["activeDeadlineSeconds"] == 3600
    assert job["spec"]["backoffLimit"] == 0
    ok(cli("free", made["id"], env=env))
    assert api.get("jobs", "team-a", made["resource"]["metadata"]["name"]) is None


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ((), "options.image"),
        (("-o", "image=x", "-o", "kind=deployment"), "options.kind"),
        (("-o", "image=x", "-o", "pool=bad value"), "options.pool"),
        (("-o", "image=x", "-o", "gpus=-1"), "options.gpus"),
    ],
)
def test_bad_definitions_are_usage_errors(
    cli: Cli, env: dict[str, str], options: tuple[str, ...], named: str
) -> None:
    run = cli("alloc", "--driver", "kubernetes", *SMALL, *options, env=env)
    assert run.exit_code == 2 and named in run.stderr


def test_credentials_refused_and_cluster_unreachable(
    cli: Cli, api: ApiServer, tmp_path: Path
) -> None:
    bad = {"KUBECONFIG": str(kubeconfig(tmp_path / "bad", api.base, token="tok-wrong-9999"))}
    run = cli("alloc", "--driver", "kubernetes", "-o", "image=x", *SMALL, env=bad)
    assert run.exit_code == 77 and "tok-wrong-9999" not in run.stderr
    with ApiServer() as gone:
        base = gone.base
    down = {"KUBECONFIG": str(kubeconfig(tmp_path / "down", base))}
    run = cli("alloc", "--driver", "kubernetes", "-o", "image=x", *SMALL, env=down)
    assert run.exit_code == 69


def test_forbidden_namespace_is_a_credentials_error(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    api.forbidden_namespaces.add("team-a")
    run = cli("alloc", "--driver", "kubernetes", "-o", "image=x", *SMALL, env=env)
    assert run.exit_code == 77 and "team-a" in run.stderr


def test_pool_matches_the_label_the_nodes_carry(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    from tests.providers.kubernetes.objects import gke_node

    api.add("nodes", gke_node("g-1", pool="gpu-pool", machine_type="g2-standard-8"))
    made = alloc(cli, env, "-o", "image=x", "-o", "pool=gpu-pool")
    spec = api.get("pods", "team-a", made["resource"]["metadata"]["name"])["spec"]  # type: ignore[index]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "gpu-pool"}


def test_tainted_nodes_do_not_count_unless_tolerated(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    node = eks_node("cp-1", nodegroup="control", instance_type="m6i.2xlarge")
    node["spec"]["taints"] = [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    ]
    api.add("nodes", node)
    run = ok(
        cli(
            "alloc",
            "--driver",
            "kubernetes",
            "--dry-run",
            "--json",
            "--cpu",
            "4",
            "--ram",
            "1",
            "-o",
            "image=x",
            "-o",
            'node_selector={"eks.amazonaws.com/nodegroup": "control"}',
            env=env,
        )
    )
    assert run.json()["fits"] == 0


def test_env_cannot_forge_the_allocation_id_and_label_keys_are_checked(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "-o", "image=x", "-o", 'env={"SHOAL_ALLOCATION_ID": "forged"}')
    container = api.get("pods", "team-a", made["resource"]["metadata"]["name"])["spec"][
        "containers"
    ][0]  # type: ignore[index]
    assert {"name": "SHOAL_ALLOCATION_ID", "value": made["id"]} in container["env"]
    run = cli(
        "alloc",
        "--driver",
        "kubernetes",
        *SMALL,
        "-o",
        "image=x",
        "-o",
        'node_selector={"bad key!": "x"}',
        env=env,
    )
    assert run.exit_code == 2 and "not a label name" in run.stderr


def test_cleanup_from_a_bare_handle_finds_a_job(
    api: ApiServer, env: dict[str, str], tmp_path: Path
) -> None:
    # After a failed or interrupted alloc the service frees Resource(identifier=ID), which
    # does not say that `-o kind=job` made a Job: the Job must go all the same.
    from drivers.kubernetes.driver import KubernetesDriver
    from drivers.spec.types import LabelDefinition, Resource, Resources
    from providers.core.settings import Paths, Settings

    home = tmp_path / "home-bare"
    home.mkdir()
    driver = KubernetesDriver(
        "kubernetes/default", Settings(paths=Paths.from_env({"SHOAL_HOME": str(home)}), env=env)
    )
    driver.prepare(b"{}")
    definition = LabelDefinition(
        driver="kubernetes/default",
        resources=Resources(cpu=1, ram=1),
        options={"image": "x", "kind": "job"},
    )
    driver.allocate(definition, {"SHOAL_ALLOCATION_ID": "kubernetes-0badc0de"})
    assert api.names("jobs") != []
    driver.deallocate(Resource(identifier="kubernetes-0badc0de"))
    assert api.names("jobs") == []


@pytest.mark.sqlite_only  # each machine its own ledger (team ledgers: test_team_ledger)
def test_status_remote_lists_what_other_machines_made(
    cli: Cli, api: ApiServer, env: dict[str, str], tmp_path: Path
) -> None:
    mine = alloc(cli, env, "-o", "image=x")
    # Another machine: its own SHOAL_HOME (ledger), the same cluster.
    other_home = tmp_path / "other-machine"
    other_home.mkdir()
    theirs = alloc(cli, {**env, "SHOAL_HOME": str(other_home)}, "-o", "image=y", "-o", "kind=job")
    listed = ok(cli("status", "--remote", "kubernetes", "--json", env=env)).json()
    # The allocation object, the driver's own fields in `detail`.
    assert {(r["id"], r["detail"]["kind"]) for r in listed} == {
        (mine["id"], "pod"),
        (theirs["id"], "job"),
    }
    assert all(r["detail"]["namespace"] == "team-a" and r["detail"]["holds"] for r in listed)
    local = ok(cli("status", "--json", env=env)).json()
    assert [r["id"] for r in local] == [mine["id"]]  # the ledger: this machine's only
    table = ok(cli("status", "--remote", "kubernetes", env=env)).stdout
    assert theirs["id"] in table
    run = cli("status", "--remote", "process", env=env)
    assert run.exit_code == 2 and "no shared state" in run.stderr


@pytest.mark.sqlite_only  # each machine its own ledger (team ledgers: test_team_ledger)
def test_free_remote_frees_what_another_machine_made(
    cli: Cli, api: ApiServer, env: dict[str, str], tmp_path: Path
) -> None:
    other_home = tmp_path / "crashed-runner"
    other_home.mkdir()
    theirs = alloc(cli, {**env, "SHOAL_HOME": str(other_home)}, "-o", "image=y", "-o", "kind=job")
    run = cli("free", theirs["id"], env=env)
    assert run.exit_code == 1  # not in this machine's ledger
    run = ok(cli("free", theirs["id"], "--remote", "kubernetes", "--json", env=env))
    (freed,) = run.json()
    assert freed["status"] == "FREED" and "another machine" in freed["note"]
    assert freed["changed"] is True and freed["error"] is None
    assert api.names("jobs") == []
    run = cli("free", theirs["id"], "--remote", "kubernetes", env=env)
    assert run.exit_code == 1 and "holds no shoal allocation" in run.stderr
    mine = alloc(cli, env, "-o", "image=x")
    ok(cli("free", mine["id"], "--remote", "kubernetes", env=env))  # ours: through the ledger
    assert ok(cli("status", mine["id"], "--json", env=env)).json()["status"] == "FREED"


# -- logs ------------------------------------------------------------------------------------


def test_logs_print_the_pod_log_and_its_last_lines(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "-o", "image=busybox:1.36")
    name = made["resource"]["metadata"]["name"]
    api.append_log("team-a", name, b"one\ntwo\nthree\n")
    assert ok(cli("logs", made["id"], env=env)).stdout == "one\ntwo\nthree\n"
    assert ok(cli("logs", made["id"], "--tail", "1", env=env)).stdout == "three\n"
    (seen,) = [s for s in api.requests("GET") if s.path.endswith("/log")][-1:]
    assert seen.path == f"/api/v1/namespaces/team-a/pods/{name}/log"
    assert seen.query["tailLines"] == ["1"] and seen.query["container"] == ["main"]


def test_logs_follow_ends_when_the_pod_ends(cli: Cli, api: ApiServer, env: dict[str, str]) -> None:
    import threading
    import time

    made = alloc(cli, env, "-o", "image=busybox:1.36")
    name = made["resource"]["metadata"]["name"]
    api.update("pods", "team-a", name, {"status": {"phase": "Running"}})
    api.append_log("team-a", name, b"early\n")

    def workload() -> None:
        time.sleep(0.5)
        api.append_log("team-a", name, b"late\n")
        time.sleep(0.3)
        api.update("pods", "team-a", name, {"status": {"phase": "Succeeded"}})

    writer = threading.Thread(target=workload)
    writer.start()
    try:
        run = ok(cli("logs", made["id"], "--follow", env=env))
    finally:
        writer.join()
    assert run.stdout == "early\nlate\n"


def test_logs_of_a_job_are_its_pods(cli: Cli, api: ApiServer, env: dict[str, str]) -> None:
    made = alloc(cli, env, "-o", "image=busybox:1.36", "-o", "kind=job")
    name = made["resource"]["metadata"]["name"]
    missing = cli("logs", made["id"], env=env)
    assert missing.exit_code == 1 and "no pod yet" in missing.stderr
    from tests.providers.kubernetes.apiserver import pod as job_pod

    api.add("pods", job_pod(f"{name}-x1b2c", "team-a", labels={"job-name": name}))
    api.append_log("team-a", f"{name}-x1b2c", b"from the job\n")
    assert ok(cli("logs", made["id"], env=env)).stdout == "from the job\n"
