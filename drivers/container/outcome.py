"""How a `container` allocation ends and what it said: the supervisor that stops it at its
deadline (the engine has no such timer) and `describe` (state, exit code, whether it expired,
last log lines). Its logs are the engine client's (`Engine.log_stream`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from drivers.spec.types import Resource
from providers.core.errors import NotFoundError

if TYPE_CHECKING:
    from drivers.container.engine import Engine

DUE_SLACK = 1.0  # seconds: a container that stopped this close to its deadline expired
# Podman's own wait for what Docker's API calls `condition=not-running` (the states of
# Podman's Docker-compatible handler, by their libpod names), looked at every 250 ms. Podman
# before 4.6 (Debian 12 has 4.3) looks at the container without a pause in its Docker-compatible
# wait (podman#18150): a core of the engine's busy for as long as each container runs.
PODMAN_WAIT = (
    "/v4.0.0/libpod/containers/{cid}/wait?condition=created&condition=initialized"
    "&condition=exited&condition=removing&interval=250ms"
)


def start_supervisor(
    engine: Engine,
    cid: str,
    deadline: datetime | None,
    grace: int,
    ledger: dict[str, Any],
    allocation: str,
) -> dict[str, Any]:
    """Have a supervisor record the container's end in the ledger the moment it comes, and
    stop it at `deadline`; the allocation's metadata that says so."""
    # Neither Docker's API nor Podman's Docker-compatible one ends a container at a
    # time of its own, nor tells anyone that it stopped: a supervisor does both, with no
    # shoal running.
    from drivers.container.engine import API
    from drivers.supervisor.supervise import start_detached

    spec: dict[str, Any] = {
        "mode": "container",
        "address": engine.address,
        "api": API,
        "container": cid,
        "deadline": deadline.timestamp() if deadline is not None else None,
        "grace": grace,
        **ledger,  # drivers.ledger.open.supervisor_ledger
        "allocation": allocation,
    }
    if engine.is_podman():
        spec["wait"] = PODMAN_WAIT.format(cid=quote(cid, safe=""))
    supervisor = start_detached(spec)
    meta: dict[str, Any] = {"supervisor": {"pid": supervisor[0], "start": supervisor[1]}}
    if deadline is not None:
        meta["deadline"] = deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return meta


GONE = {"state": "gone", "message": "the container no longer exists"}


def describe(
    engine: Engine, cid: str, res: Resource, seen: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The container's state; for one that exited, its exit code and last log lines. `seen`:
    the container's inspection already made ({} when it was not found), else one is made."""
    if seen is None:
        try:
            seen = engine.inspect(cid)
        except NotFoundError:
            seen = {}
    if not seen:
        return dict(GONE)
    state = seen.get("State") or {}
    status = state.get("Status") or ""
    # Podman says "stopped" for an exited container until its cleanup has run.
    status = "exited" if status == "stopped" else status
    out: dict[str, Any] = {"state": status, "error": state.get("Error")}
    if not state.get("Running"):
        out["exit_code"] = state.get("ExitCode")
        out["finished"] = state.get("FinishedAt")
        due = _when(res.metadata.get("deadline"))
        ended = _when(state.get("FinishedAt"))
        if due is not None and ended is not None and ended >= due - DUE_SLACK:
            out["reason"] = "expired"  # stopped at its deadline
        out["log_tail"] = engine.logs(cid, 10).strip()
    return out


def _when(text: Any) -> float | None:
    """Unix seconds of an RFC 3339 time (the engine's nanoseconds cut to microseconds)."""
    if not isinstance(text, str) or not text or text.startswith("0001-"):
        return None
    head, dot, rest = text.partition(".")
    if dot:
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}"
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
