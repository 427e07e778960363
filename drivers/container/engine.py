"""The Docker Engine API (as Docker and `podman system service` serve it) over httpx.

Where the engine is: the driver's `socket` setting, else DOCKER_HOST (`unix:///path` or
`tcp://host:port`), else the first of /var/run/docker.sock, $XDG_RUNTIME_DIR/podman/podman.sock
and /run/podman/podman.sock that exists. Errors are typed: no engine answering is 69 (with
the socket named), a socket we may not open is 77, a missing image or container 1. A
malformed tcp:// address is a usage error at once (2), not an httpx crash at the first
request. Requests go through the shared client (providers.core.http), once each (an upload
cannot be sent twice), with this API's ERRORS. The engine API carries no credential here
(no registry auth: images come from `shoal image pull` or are already the engine's).
https://docs.docker.com/reference/api/engine/version/v1.41/
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from providers.core.env import ENV_DOCKER_HOST
from providers.core.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.http.policy import ErrorMap, Kind, RetryPolicy, Rule
from providers.core.urls import UrlError, display, has_userinfo, parse

if TYPE_CHECKING:
    import httpx

    from providers.core.http.client import HttpClient

API = "/v1.41"
_CANDIDATES = (
    "/var/run/docker.sock",
    "{runtime}/podman/podman.sock",
    "/run/podman/podman.sock",
)


def engine_message(body: bytes, reason: str) -> tuple[str, str]:
    """("", the engine's message): `message` (Docker) or `cause` (Podman), else the body."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return "", body.decode("utf-8", "replace").strip()[:200] or reason
    if isinstance(value, dict):
        value = value.get("message") or value.get("cause") or value
    return "", str(value)


ERRORS = ErrorMap(where="container engine: {method} {target}", explain=engine_message, rules=(
    Rule(404, NotFoundError, "{message}"),
    Rule((401, 403), CredentialsError, "container engine refused {method} {target}: {message}"),
    Rule(409, ShoalError, "container engine: conflict: {message}"),
    Rule(400, UsageError, "container engine: {message}"),
    Rule(range(100, 600), ShoalError, "{where}: HTTP {code}: {message}"),
    Rule(Kind.DENIED, CredentialsError, "permission denied on the container engine socket "
         "{socket}; add your user to its group, or point DOCKER_HOST at a socket you may use"),
    Rule(Kind.TIMEOUT, RetryableError, "the container engine at {socket} did not answer {method} "
         "{target} in time"),
    Rule(Kind.UNREACHABLE, ProviderUnreachableError, "no container engine answers at {socket} "
         "({error_name}); start Docker or `podman system service`, or set DOCKER_HOST"),
))  # fmt: skip


def locate(configured: str, env: Mapping[str, str]) -> str:
    """The engine's address: `unix:///path` or `tcp://host:port`."""
    chosen = configured or env.get(ENV_DOCKER_HOST, "")
    if chosen:
        if chosen.startswith("/"):
            return f"unix://{chosen}"
        if not chosen.startswith(("unix://", "tcp://", "http://")):
            raise UsageError(
                f"{ENV_DOCKER_HOST} / socket: {chosen!r} is not unix:///PATH or tcp://HOST:PORT"
            )
        if chosen.startswith(("tcp://", "http://")):
            return _tcp(chosen)
        return chosen
    runtime = env.get("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    for candidate in _CANDIDATES:
        path = candidate.format(runtime=runtime)
        if os.path.exists(path):
            return f"unix://{path}"
    return f"unix://{_CANDIDATES[0]}"


def _tcp(address: str) -> str:
    """A tcp:// (or http://) engine address, checked, with Docker's plain-TCP port added
    when none is given (as the docker CLI assumes)."""
    rest = address.split("://", 1)[1]
    if ":" not in rest:
        address += ":2375"
    where = f"{ENV_DOCKER_HOST} / socket"
    if has_userinfo(address):  # first: the message below would show them
        raise UsageError(f"{where}: an engine address cannot carry a user name or password")
    try:
        parse("http://" + address.split("://", 1)[1])
    except UrlError as exc:
        raise UsageError(f"{where}: {display(address)!r} is not tcp://HOST:PORT: {exc}") from None
    return address


class Engine:
    def __init__(
        self, address: str, *, timeout: float = 60.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.address = address
        self.timeout = timeout
        self._transport = transport  # (tests)
        self._http: HttpClient | None = None
        self._podman: bool | None = None

    @property
    def is_remote(self) -> bool:
        return not self.address.startswith("unix://")

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _client(self) -> HttpClient:
        if self._http is None:
            from providers.core.http import httpx
            from providers.core.http.client import HttpClient

            # Plain HTTP only (a unix socket, or tcp without TLS): no CA bundle to load.
            where = self.address.removeprefix("unix://")
            transport, base = self._transport, "http://" + self.address.split("://", 1)[1]
            if self.address.startswith("unix://"):
                transport = transport or httpx.HTTPTransport(uds=where, verify=False)
                base = "http://engine"
            wait = self.timeout  # for an answer, and to connect
            once = RetryPolicy(attempts=1, connect_timeout_seconds=wait, read_timeout_seconds=wait)
            self._http = HttpClient(
                base + API,
                errors=ERRORS.extended(socket=where),
                policy=once,
                transport=transport,
                follow_redirects=False,
            )
        return self._http

    def request(self, method: str, path: str, **options: Any) -> httpx.Response:
        """A read answer; 304 (started or stopped already) is one too. `body` goes as JSON."""
        return self._client().request(method, path, **{"ok": (200, 201, 204, 304), **options})

    def get_json(self, path: str, **kw: Any) -> Any:
        return self._client().decode(self.request("GET", path, **kw), "GET", path)

    # -- what the driver uses --------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        return dict(self.get_json("/info"))

    def version(self) -> dict[str, Any]:
        return dict(self.get_json("/version"))

    def ping(self) -> None:
        """Cheap proof the engine answers (a few ms; Podman's /info and /version take
        ~300 ms each). Its headers also tell Podman from Docker."""
        response = self.request("GET", "/_ping")
        self._podman = any(name.lower().startswith("libpod") for name in response.headers)

    def is_podman(self) -> bool:
        """Podman serves the same API with a few differences (its default network's name)."""
        if self._podman is None:
            self.ping()
        return bool(self._podman)

    def image_exists(self, name: str) -> bool:
        try:
            self.get_json(f"/images/{name}/json")
        except NotFoundError:
            return False
        return True

    def import_rootfs(self, tar: Iterator[bytes], repo: str, tag: str) -> None:
        """POST /images/create?fromSrc=-: a filesystem tar becomes an image."""
        # The tag rides in `repo` (the API allows it): Podman ignores a separate `tag`.
        response = self.request(
            "POST",
            "/images/create",
            params={"fromSrc": "-", "repo": f"{repo}:{tag}"},
            content=tar,
            headers={"Content-Type": "application/x-tar"},
            timeout=600,
        )
        _stream_errors(response, "import")

    def load(self, archive: BinaryIO) -> None:
        """POST /images/load: a `docker save` archive."""
        response = self.request(
            "POST",
            "/images/load",
            content=iter(lambda: archive.read(1 << 20), b""),
            headers={"Content-Type": "application/x-tar"},
            timeout=600,
        )
        _stream_errors(response, "load")

    def containers(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        filters = json.dumps({"label": [f"{k}={v}" for k, v in labels.items()]})
        return list(self.get_json("/containers/json", params={"all": "1", "filters": filters}))

    def create(self, name: str, body: dict[str, Any]) -> str:
        created = self.request("POST", "/containers/create", params={"name": name}, body=body)
        return str(created.json()["Id"])

    def start(self, cid: str) -> None:
        self.request("POST", f"/containers/{cid}/start")

    def inspect(self, cid: str) -> dict[str, Any]:
        return dict(self.get_json(f"/containers/{cid}/json"))

    def stop(self, cid: str, grace_seconds: int) -> None:
        self.request(
            "POST",
            f"/containers/{cid}/stop",
            params={"t": str(grace_seconds)},
            timeout=grace_seconds + self.timeout,
        )

    def remove(self, cid: str) -> None:
        self.request("DELETE", f"/containers/{cid}", params={"v": "1", "force": "1"})

    def logs(self, cid: str, lines: int = 20) -> str:
        raw = self.request(
            "GET",
            f"/containers/{cid}/logs",
            params={"stdout": "1", "stderr": "1", "tail": str(lines)},
        ).content
        return _demux(raw).decode("utf-8", "replace")

    def commit(self, cid: str, repo: str, tag: str) -> str:
        # The body is the new image's config changes; Podman insists on one, even empty.
        done = self.request(
            "POST",
            "/commit",
            params={"container": cid, "repo": repo, "tag": tag},
            body={},
            timeout=600,
        )
        return str(done.json().get("Id", ""))

    def export(self, cid: str, target: Path) -> int:
        """The container's filesystem as a tar, written to `target` atomically; its size."""
        import tempfile

        # A fresh temporary name (O_EXCL): nothing planted beside the target is written through.
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        tmp = Path(name)
        written = 0
        try:
            with (
                os.fdopen(fd, "wb") as out,
                contextlib.closing(
                    self._client().open("GET", f"/containers/{cid}/export", ok=(200,), timeout=600)
                ) as response,
            ):
                for chunk in response.iter_bytes(1 << 20):
                    out.write(chunk)
                    written += len(chunk)
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        return written

    def remove_image(self, reference: str) -> None:
        with contextlib.suppress(NotFoundError):
            self.request("DELETE", f"/images/{reference}", params={"force": "1"})


def _stream_errors(response: httpx.Response, what: str) -> None:
    """Image import/load answer 200 with a JSON stream; a failure is an `error` line."""
    for line in response.text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and (event.get("error") or event.get("errorDetail")):
            detail = event.get("error") or event.get("errorDetail")
            raise ShoalError(f"container engine: image {what} failed: {detail}")


def _demux(raw: bytes) -> bytes:
    """Logs of a container without a TTY come in frames: 8-byte header, then the payload."""
    out = bytearray()
    pos = 0
    while pos + 8 <= len(raw) and raw[pos] in (0, 1, 2) and raw[pos + 1 : pos + 4] == b"\0\0\0":
        size = int.from_bytes(raw[pos + 4 : pos + 8], "big")
        out += raw[pos + 8 : pos + 8 + size]
        pos += 8 + size
    return bytes(out) if pos else raw
