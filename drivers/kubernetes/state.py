"""What a Pod or Job's status says: whether it still holds resources, and why it is where
it is (phase, reason, message), for `shoal status ID`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from providers.kubernetes.client import KubeClient


def holds(kind: str, obj: dict[str, Any]) -> bool:
    """Pending and Running pods hold their requests; Succeeded and Failed ones do not.
    A Job holds until its Complete or Failed condition is True."""
    status = obj.get("status") or {}
    if kind == "pod":
        return status.get("phase") not in ("Succeeded", "Failed")
    for cond in status.get("conditions") or ():
        if cond.get("type") in ("Complete", "Failed") and cond.get("status") == "True":
            return False
    return True


def describe_pod(pod: dict[str, Any]) -> dict[str, Any]:
    status = pod.get("status") or {}
    out: dict[str, Any] = {
        "phase": status.get("phase") or "Pending",
        "reason": status.get("reason") or "",
        "message": status.get("message") or "",
        "node": (pod.get("spec") or {}).get("nodeName") or "",
    }
    for cond in status.get("conditions") or ():
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            out["reason"] = cond.get("reason") or "Unschedulable"
            out["message"] = cond.get("message") or ""
    for container in status.get("containerStatuses") or ():
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting:  # ErrImagePull, ImagePullBackOff, CrashLoopBackOff, ContainerCreating
            out["reason"] = waiting.get("reason") or out["reason"]
            out["message"] = waiting.get("message") or out["message"]
        elif terminated:
            out["reason"] = terminated.get("reason") or out["reason"]
            out["message"] = terminated.get("message") or out["message"]
            out["exit_code"] = terminated.get("exitCode")
    return out


def describe_job(job: dict[str, Any], client: KubeClient, namespace: str) -> dict[str, Any]:
    status = job.get("status") or {}
    out: dict[str, Any] = {
        "phase": "Running" if status.get("active") else "Pending",
        "reason": "",
        "message": "",
    }
    for cond in status.get("conditions") or ():
        if cond.get("status") == "True":
            out["phase"] = cond.get("type") or out["phase"]
            out["reason"] = cond.get("reason") or ""
            out["message"] = cond.get("message") or ""
    name = (job.get("metadata") or {}).get("name", "")
    pods = list(
        client.list(
            f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": f"job-name={name}"}, limit=5
        )
    )
    if pods and not out["reason"]:
        pod = describe_pod(pods[-1])
        out.update({k: v for k, v in pod.items() if k != "phase"})
    return out
