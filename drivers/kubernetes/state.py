"""What a Pod or Job's status says: whether it still holds resources, and why it is where
it is (phase, reason, message), for `shoal status ID`. A pod or Job that ended reads as a
workload that exited (`state: exited`, its container's exit code, when it finished), which
`status ID` records as EXITED with that code: a finished job is not a vanished one (GONE)."""

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
            out["finished"] = terminated.get("finishedAt")
    if out["phase"] in ENDED_PHASES:
        _ended(out, status.get("reason"))
    return out


ENDED_PHASES = ("Succeeded", "Failed")


def _ended(out: dict[str, Any], pod_reason: Any) -> None:
    """A pod that ended: `state` exited, with its exit code when its container says one.
    One its deadline (the allocation's lifetime) ended is `expired`, as the ledger says."""
    if pod_reason == "DeadlineExceeded":
        out["reason"] = pod_reason
        out["state"] = "expired"
        return
    out["state"] = "exited"
    out.setdefault("exit_code", None)
    out.setdefault("finished", None)
    if pod_reason:  # Evicted, ...: the pod's, over its container's `Error`
        out["reason"] = pod_reason


def describe_job(job: dict[str, Any], client: KubeClient, namespace: str) -> dict[str, Any]:
    status = job.get("status") or {}
    out: dict[str, Any] = {
        "phase": "Running" if status.get("active") else "Pending",
        "reason": "",
        "message": "",
    }
    ended = None
    for cond in status.get("conditions") or ():
        if cond.get("status") == "True":
            out["phase"] = cond.get("type") or out["phase"]
            out["reason"] = cond.get("reason") or ""
            out["message"] = cond.get("message") or ""
            if cond.get("type") in ("Complete", "Failed"):
                ended = cond
    name = (job.get("metadata") or {}).get("name", "")
    pods = list(
        client.list(
            f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": f"job-name={name}"}, limit=5
        )
    )
    pod = describe_pod(max(pods, key=_created)) if pods else None
    if pod is not None and not out["reason"]:
        out.update({k: v for k, v in pod.items() if k not in ("phase", "state")})
    if ended is not None:
        # Its pod's exit code where the pod is still listed; a Job that completed exited 0
        # whether or not its pods are left (a TTL may have removed them).
        code = (pod or {}).get("exit_code")
        if code is None and ended.get("type") == "Complete":
            code = 0
        if ended.get("reason") == "DeadlineExceeded":
            out["state"] = "expired"
        else:
            out["state"] = "exited"
            out["exit_code"] = code
            out["finished"] = status.get("completionTime") or (pod or {}).get("finished")
    return out


def _created(pod: dict[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("creationTimestamp") or "")
