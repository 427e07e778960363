"""A kubernetes allocation whose pod or Job finished reads as a finished job: `status ID`
records it EXITED with its container's exit code (a Job that completed: 0), and the list
shows it so from then on; only a pod that vanished (deleted) is GONE. Against the loopback
Kubernetes API server."""

from __future__ import annotations

from typing import Any

from tests.drivers.kubernetes.test_kubernetes_driver import Cli, alloc, api, env, ok
from tests.providers.kubernetes.apiserver import ApiServer
from tests.providers.kubernetes.apiserver import pod as job_pod

__all__ = ["api", "env"]  # the fixtures, shared with the driver's main tests

NAMESPACE = "team-a"


def terminated(code: int, reason: str, finished: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    return {
        "name": "main",
        "state": {"terminated": {"reason": reason, "exitCode": code, "finishedAt": finished}},
    }


def status(cli: Cli, env: dict[str, str], alloc_id: str) -> dict[str, Any]:
    return ok(cli("status", alloc_id, "--json", env=env)).json()  # type: ignore[no-any-return]


def listed(cli: Cli, env: dict[str, str]) -> dict[str, str]:
    rows = ok(cli("status", "--all", "--json", env=env)).json()
    return {r["id"]: r["status"] for r in rows}


def test_a_pod_that_succeeded_is_exited_0_in_status_and_then_in_the_list(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "-o", "image=busybox")
    name = made["resource"]["metadata"]["name"]
    api.update(
        "pods",
        NAMESPACE,
        name,
        {"status": {"phase": "Succeeded", "containerStatuses": [terminated(0, "Completed")]}},
    )
    shown = status(cli, env, made["id"])
    assert shown["status"] == "EXITED" and shown["driver_status"] == "NONE"
    assert shown["drift"] is None
    assert shown["note"] == "exited with code 0 at 2026-12-01T10:00:00Z"
    assert shown["detail"]["state"] == "exited" and shown["detail"]["exit_code"] == 0
    # Recorded: the list reads it from the ledger, and it holds nothing there any more.
    assert listed(cli, env)[made["id"]] == "EXITED"
    assert ok(cli("status", "--status", "ALLOCATED", "--json", env=env)).json() == []
    ok(cli("free", made["id"], env=env))
    assert api.get("pods", NAMESPACE, name) is None


def test_a_pod_evicted_without_an_exit_code_is_exited_with_the_code_unknown(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "-o", "image=busybox")
    name = made["resource"]["metadata"]["name"]
    api.update(
        "pods",
        NAMESPACE,
        name,
        {
            "status": {
                "phase": "Failed",
                "reason": "Evicted",
                "message": "The node was low on resource: memory.",
            }
        },
    )
    shown = status(cli, env, made["id"])
    assert shown["status"] == "EXITED" and shown["drift"] is None
    assert shown["detail"]["reason"] == "Evicted" and shown["detail"]["exit_code"] is None
    assert "exit code unknown (The node was low on resource: memory.)" in shown["note"]


def test_a_pod_deleted_behind_shoals_back_is_still_gone(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "-o", "image=busybox")
    api._remove("pods", f"{NAMESPACE}/{made['resource']['metadata']['name']}")
    shown = status(cli, env, made["id"])
    assert shown["status"] == "GONE" and "marked GONE" in shown["drift"]


def test_a_job_that_completed_is_exited_0_even_once_its_pods_are_gone(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "-o", "image=busybox", "-o", "kind=job")
    name = made["resource"]["metadata"]["name"]
    api.update(
        "jobs",
        NAMESPACE,
        name,
        {
            "status": {
                "succeeded": 1,
                "completionTime": "2026-12-01T10:05:00Z",
                "conditions": [{"type": "Complete", "status": "True"}],
            }
        },
    )
    shown = status(cli, env, made["id"])
    assert shown["status"] == "EXITED" and shown["drift"] is None
    assert shown["detail"]["phase"] == "Complete" and shown["detail"]["exit_code"] == 0
    assert shown["note"] == "exited with code 0 at 2026-12-01T10:05:00Z"
    assert listed(cli, env)[made["id"]] == "EXITED"


def test_a_job_that_failed_is_exited_with_its_pods_code(
    cli: Cli, api: ApiServer, env: dict[str, str]
) -> None:
    made = alloc(cli, env, "-o", "image=busybox", "-o", "kind=job")
    name = made["resource"]["metadata"]["name"]
    worker = job_pod(f"{name}-x1b2c", NAMESPACE, labels={"job-name": name})
    worker["status"] = {"phase": "Failed", "containerStatuses": [terminated(2, "Error")]}
    api.add("pods", worker)
    api.update(
        "jobs",
        NAMESPACE,
        name,
        {
            "status": {
                "failed": 1,
                "conditions": [
                    {
                        "type": "Failed",
                        "status": "True",
                        "reason": "BackoffLimitExceeded",
                        "message": "Job has reached the specified backoff limit",
                    }
                ],
            }
        },
    )
    shown = status(cli, env, made["id"])
    assert shown["status"] == "EXITED" and shown["detail"]["exit_code"] == 2
    assert shown["detail"]["reason"] == "BackoffLimitExceeded"
    assert shown["note"] == "exited with code 2 at 2026-12-01T10:00:00Z"
