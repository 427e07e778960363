"""How a `container` allocation ends and what it said: the supervisor that stops it at its
deadline (the engine has no such timer), `describe` (state, exit code, whether it expired,
last log lines) and its logs streamed from the engine, demultiplexed.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drivers.spec.types import Resource
from providers.core.errors import NotFoundError, ShoalError

if TYPE_CHECKING:
    from drivers.container.engine import Engine

DUE_SLACK = 1.0  # seconds: a container that stopped this close to its deadline expired


def start_supervisor(
    engine: Engine, cid: str, deadline: datetime | None, grace: int, ledger: str, allocation: str
) -> dict[str, Any]:
    """Have a supervisor record the container's end in the ledger the moment it comes, and
    stop it at `deadline`; the allocation's metadata that says so."""
    # Neither Docker's API nor Podman's Docker-compatible one ends a container at a
    # time of its own, nor tells anyone that it stopped: a supervisor does both, with no
    # shoal running.
    from drivers.container.engine import API
    from drivers.supervisor.supervise import start_detached

    supervisor = start_detached(
        {
            "mode": "container",
            "address": engine.address,
            "api": API,
            "container": cid,
            "deadline": deadline.timestamp() if deadline is not None else None,
            "grace": grace,
            "ledger": ledger,
            "allocation": allocation,
        }
    )
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


def stream_logs(engine: Engine, cid: str, *, tail: int | None, follow: bool) -> Iterator[bytes]:
    """The container's stdout and stderr as the engine keeps them (`/containers/ID/logs`),
    streamed; with `follow` until the container stops."""
    from urllib.parse import urlencode

    from drivers.container.engine import API
    from drivers.supervisor.supervise import engine_open, read_stream
    from providers.core.errors import ProviderUnreachableError

    engine.inspect(cid)  # a missing container or engine, as the engine client says it
    query = {"stdout": "1", "stderr": "1", "tail": "all" if tail is None else str(tail)}
    if follow:
        query["follow"] = "1"
    target = f"{API}/containers/{cid}/logs?{urlencode(query)}"
    try:
        conn, response = engine_open(engine.address, "GET", target, None if follow else 60)
    except OSError as exc:
        raise ProviderUnreachableError(
            f"container engine {engine.address}: logs of {cid[:12]}: {exc}"
        ) from None
    try:
        if response.status != 200:
            said = response.read(300).decode("utf-8", "replace").strip()
            raise ShoalError(
                f"container engine: logs of {cid[:12]}: HTTP {response.status}: {said}"
            )
        frames = Demux()
        for chunk in read_stream(response):
            data = frames.feed(chunk)
            if data:
                yield data
        rest = frames.end()
        if rest:
            yield rest
    finally:
        conn.close()


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


class Demux:
    """The engine's log stream of a container without a TTY, as it arrives: frames of an
    8-byte header (stream 0/1/2, three zeros, a big-endian size) then the payload, whose
    bytes are kept; a stream that does not start with such a header passes as it is."""

    def __init__(self) -> None:
        self._pending = b""
        self._framed: bool | None = None
        self._left = 0  # payload bytes still to come in the current frame

    def feed(self, data: bytes) -> bytes:
        if self._framed is False:
            return data
        buffer, out = self._pending + data, bytearray()
        while buffer:
            if self._left:
                take = buffer[: self._left]
                out += take
                buffer, self._left = buffer[len(take) :], self._left - len(take)
                continue
            if len(buffer) < 8:
                break
            if self._framed is None:
                self._framed = buffer[0] in (0, 1, 2) and buffer[1:4] == b"\0\0\0"
                if not self._framed:
                    out += buffer
                    buffer = b""
                    break
            self._left = int.from_bytes(buffer[4:8], "big")
            buffer = buffer[8:]
        self._pending = buffer
        return bytes(out)

    def end(self) -> bytes:
        """What is left: a short unframed stream (fewer than 8 bytes in all)."""
        rest, self._pending = self._pending, b""
        return rest if self._framed is None else b""
