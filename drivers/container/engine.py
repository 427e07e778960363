"""The Docker Engine API (as Docker and `podman system service` serve it), over HTTP/1.1 of
its own (engine_http.py).

Where the engine is: the driver's `socket` setting, else DOCKER_HOST (`unix:///path` or
`tcp://host:port`), else the first of /var/run/docker.sock, $XDG_RUNTIME_DIR/podman/podman.sock
and /run/podman/podman.sock that exists. Errors are typed by this API's error map (the policy
every HTTP client here is told, providers.core.http.policy): no engine answering is 69 (with
the socket named), a socket we may not open is 77, a missing image or container 1. A
malformed tcp:// address is a usage error at once (2), not a crash at the first request.
Each request is made once, on a connection of its own (an upload cannot be sent twice, and a
POST that may have been carried out is never repeated). A registry credential rides only in
a pull's X-Registry-Auth header (pull.py), never in a message: nothing here logs a request.

Why not the shared httpx client (providers.core.http.client): each shoal command that speaks
to the engine is a process of its own, and importing httpx with its transport (httpcore, and
trio where it is installed) costs 40-65 ms of each: more than the engine takes to answer an
`alloc`, `status` or `free`, but for its container start and stop. This API needs none of
what that client adds: no redirects, TLS, credentials or retries.
https://docs.docker.com/reference/api/engine/version/v1.41/
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO
from urllib.parse import quote, urlencode

from drivers.container.engine_http import Cut, ProtocolError, Response, connect, send
from providers.core.env import ENV_DOCKER_HOST
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)

if TYPE_CHECKING:
    from providers.core.http.policy import ErrorMap, Failure

API = "/v1.41"
_CANDIDATES = (
    "/var/run/docker.sock",
    "{runtime}/podman/podman.sock",
    "/run/podman/podman.sock",
)
MAX_BYTES = 64 << 20  # an answer past this is a broken engine
_PEEK_BYTES = 64 << 10  # of an error's body, for the engine's own message
_LIMITS = {"reason": 80, "message": 300, "error": 200}  # texts an engine sent, cut to size
OK = (200, 201, 204, 304)  # 304: started or stopped already
# The policy's Kinds of failure (providers.core.http.policy.Kind, imported at a failure only;
# a test holds these to it).
_DROPPED, _BROKEN, _JSON, _CUT = "dropped", "broken", "JSON", "cut"


def engine_message(body: bytes, reason: str) -> tuple[str, str]:
    """("", the engine's message): `message` (Docker) or `cause` (Podman), else the body."""
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return "", body.decode("utf-8", "replace").strip()[:200] or reason
    if isinstance(value, dict):
        value = value.get("message") or value.get("cause") or value
    return "", str(value)


# Podman 4.3 (Debian 12) asks the kernel for default ulimits above what a container may
# raise to: every start fails with the runtime's "error setting rlimit type 7" (nofile) as an
# HTTP 500. It is the engine's configuration, which no retry and no flag of ours changes: a
# config error (78) naming the file to write, for Podman as root and rootless (root ignores
# ~/.config/containers; README: Podman).
ULIMITS_LINE = 'default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]'
RLIMIT_HINT = (
    "container engine: the engine could not set the container's default ulimits (error "
    f"setting rlimit): add {ULIMITS_LINE} under [containers] in "
    "/etc/containers/containers.conf.d/shoal.conf (Podman as root) or "
    "~/.config/containers/containers.conf (rootless), then restart `podman system service`"
)


def _rlimit_refused(failure: Failure) -> bool:
    return "error setting rlimit" in failure.message


def error_map(socket: str) -> ErrorMap:
    """This API's failures as shoal's errors; built at the first failure (a command that has
    none does not import the policy module)."""
    from providers.core.http.policy import ErrorMap, Kind, Rule

    return ErrorMap(where="container engine: {method} {target}", explain=engine_message, rules=(
    Rule(404, NotFoundError, "{message}"),
    Rule((401, 403), CredentialsError, "container engine refused {method} {target}: {message}"),
    Rule(409, ShoalError, "container engine: conflict: {message}"),
    Rule(400, UsageError, "container engine: {message}"),
    Rule(range(500, 600), ConfigError, RLIMIT_HINT, when=_rlimit_refused),
    Rule(range(100, 600), ShoalError, "{where}: HTTP {code}: {message}"),
    Rule(Kind.DENIED, CredentialsError, "permission denied on the container engine socket "
         "{socket}; add your user to its group, or point DOCKER_HOST at a socket you may use"),
    Rule(Kind.TIMEOUT, RetryableError, "the container engine at {socket} did not answer {method} "
         "{target} in time"),
    Rule(Kind.UNREACHABLE, ProviderUnreachableError, "no container engine answers at {socket} "
         "({error_name}); start Docker or `podman system service`, or set DOCKER_HOST"),
    ), fields={"socket": socket})  # fmt: skip


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
    from providers.core.urls import UrlError, display, has_userinfo, parse

    where = f"{ENV_DOCKER_HOST} / socket"
    if has_userinfo(address):  # first: the message below would show them
        raise UsageError(f"{where}: an engine address cannot carry a user name or password")
    try:
        parse("http://" + address.split("://", 1)[1])
    except UrlError as exc:
        raise UsageError(f"{where}: {display(address)!r} is not tcp://HOST:PORT: {exc}") from None
    return address


class Answer:
    """An engine's answer, read whole: status, headers (names in lower case), body. A plain
    class: a frozen dataclass is ~0.7 ms of generated code in every process that imports this
    module (each `status` and `free`)."""

    __slots__ = ("content", "headers", "status")

    def __init__(self, status: int, headers: dict[str, str], content: bytes) -> None:
        self.status = status
        self.headers = headers
        self.content = content

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


class Engine:
    def __init__(self, address: str, *, timeout: float = 60.0) -> None:
        self.address = address
        self.timeout = timeout  # for an answer, and to connect
        self._podman: bool | None = None

    @property
    def is_remote(self) -> bool:
        return not self.address.startswith("unix://")

    # -- one request -----------------------------------------------------------------------

    def open(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content: bytes | Iterable[bytes] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        endless: bool = False,
    ) -> Response:
        """Send one request; its answer, which the caller closes. `body` goes as JSON,
        `content` as it is (an iterator of bytes: chunked). Not reaching the engine, or no
        answer in time, is the map's error. `endless`: an answer that lasts as long as what
        it follows (a followed log), waited for without a timeout once the request is sent."""
        target = API + quote(path, safe="/:@") + (f"?{urlencode(params)}" if params else "")
        sent = {"User-Agent": "shoal", **(headers or {})}
        if body is not None:
            content = json.dumps(body, separators=(",", ":")).encode()
            sent["Content-Type"] = "application/json"
        try:
            sock = connect(self.address, self.timeout if timeout is None else timeout)
        except OSError as exc:
            raise self._broken(_kind(exc), exc, method, path) from None
        try:
            send(sock, method, target, sent, content)
            if endless:
                # Podman (4.3) sends a followed log's head with its first line: a quiet
                # container's answer is as late as the container is quiet.
                sock.settimeout(None)
            return Response(sock, method)
        except (OSError, ProtocolError) as exc:
            sock.close()
            raise self._broken(_kind(exc), exc, method, path) from None
        except BaseException:
            sock.close()
            raise

    def request(self, method: str, path: str, *, ok: Iterable[int] = OK, **options: Any) -> Answer:
        """An answer with an `ok` status, its body read (at most MAX_BYTES); any other
        status is the map's error, with the engine's own message."""
        response = self.open(method, path, **options)
        try:
            if response.status not in ok:
                raise self._refused(response, method, path)
            try:
                content = response.read_all(MAX_BYTES)
            except (OSError, ProtocolError) as exc:
                # A body framed wrong is the engine's fault, not a dropped connection to retry.
                kind = _BROKEN if isinstance(exc, ProtocolError) else _DROPPED
                raise self._broken(kind, exc, method, path) from None
            if len(content) > MAX_BYTES:
                error = f"the answer is larger than {MAX_BYTES} bytes; stopped"
                raise self._fail(_BROKEN, method, path, error=error)
            return Answer(response.status, response.headers, content)
        finally:
            response.close()

    def get_json(self, path: str, **options: Any) -> Any:
        answer = self.request("GET", path, **options)
        return self._decode(answer, "GET", path)

    def _decode(self, answer: Answer, method: str, path: str) -> Any:
        try:
            return json.loads(answer.content)
        except (ValueError, RecursionError) as exc:
            raise self._fail(_JSON, method, path, code=answer.status, error=exc) from None

    def _fail(self, kind: int | str, method: str, path: str, **fields: Any) -> ShoalError:
        """The error the map gives this failure (`kind`: an HTTP status, or one of the policy's
        Kinds); what the engine said on one line, cut short."""
        from providers.core.http.policy import Failure

        for name, limit in _LIMITS.items():
            if name in fields:
                fields[name] = " ".join(str(fields[name]).split())[:limit]
        url = f"{self.address}{API}{path}"
        errors = error_map(self.address.removeprefix("unix://"))
        return errors.error(Failure(kind, method, path, url, attempts=1, **fields))

    def _refused(self, response: Response, method: str, path: str) -> ShoalError:
        try:
            said = response.read_all(_PEEK_BYTES)[:_PEEK_BYTES]
        except (OSError, ProtocolError):
            said = b""
        reason, message = engine_message(said, response.reason)
        return self._fail(
            response.status,
            method,
            path,
            code=response.status,
            reason=reason or response.reason,
            message=message,
        )

    def _broken(self, kind: str, exc: BaseException, method: str, path: str) -> ShoalError:
        name = type(exc).__name__
        error = f"{name}: {exc}" if str(exc) else name
        return self._fail(kind, method, path, error=error, error_name=name)

    # -- what the driver uses --------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        return dict(self.get_json("/info"))

    def version(self) -> dict[str, Any]:
        return dict(self.get_json("/version"))

    def ping(self) -> None:
        """Cheap proof the engine answers (under a ms; Podman's /info and /version take
        ~300 ms each). Its headers also tell Podman from Docker."""
        answer = self.request("GET", "/_ping")
        self._podman = any(name.startswith("libpod") for name in answer.headers)

    def is_podman(self) -> bool:
        """Podman serves the same API with a few differences (its default network's name)."""
        if self._podman is None:
            self.ping()
        return bool(self._podman)

    def image_exists(self, name: str) -> bool:
        try:
            self.request("GET", f"/images/{name}/json")
        except NotFoundError:
            return False
        return True

    def import_rootfs(self, tar: Iterator[bytes], repo: str, tag: str) -> None:
        """POST /images/create?fromSrc=-: a filesystem tar becomes an image."""
        # The tag rides in `repo` (the API allows it): Podman ignores a separate `tag`.
        answer = self.request(
            "POST",
            "/images/create",
            params={"fromSrc": "-", "repo": f"{repo}:{tag}"},
            content=tar,
            headers={"Content-Type": "application/x-tar"},
            timeout=600,
        )
        _stream_errors(answer, "import")

    def load(self, archive: BinaryIO) -> None:
        """POST /images/load: a `docker save` archive."""
        answer = self.request(
            "POST",
            "/images/load",
            content=iter(lambda: archive.read(1 << 20), b""),
            headers={"Content-Type": "application/x-tar"},
            timeout=600,
        )
        _stream_errors(answer, "load")

    def containers(self, labels: Mapping[str, str]) -> list[dict[str, Any]]:
        filters = json.dumps({"label": [f"{k}={v}" for k, v in labels.items()]})
        return list(self.get_json("/containers/json", params={"all": "1", "filters": filters}))

    def create(self, name: str, body: dict[str, Any]) -> str:
        path = "/containers/create"
        answer = self.request("POST", path, params={"name": name}, body=body)
        created = self._decode(answer, "POST", path)
        return str(created["Id"]) if isinstance(created, dict) and "Id" in created else ""

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
        """The last `lines` lines of the container's stdout and stderr, read whole."""
        raw = self.request("GET", f"/containers/{cid}/logs", params=_log_params(lines, False))
        return b"".join(demux([raw.content])).decode("utf-8", "replace")

    def log_stream(self, cid: str, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The container's stdout and stderr as the engine keeps them (its last `tail`
        lines, all when None), demultiplexed as they arrive, 64 KiB at most a read; with
        `follow` until the container stops. An engine that goes away mid-way is a stream
        cut off (69); a body framed wrong, the engine's fault (1)."""
        path = f"/containers/{cid}/logs"
        response = self.open("GET", path, params=_log_params(tail, follow), endless=follow)
        with contextlib.closing(response):
            if response.status != 200:
                raise self._refused(response, "GET", path)
            yield from demux(self._pieces(response, "GET", path))

    def _pieces(self, response: Response, method: str, path: str) -> Iterator[bytes]:
        """An answer's body as it arrives, a bounded read at a time."""
        while True:
            try:
                piece = response.read()
            except TimeoutError as exc:
                raise self._broken(_kind(exc), exc, method, path) from None
            except (OSError, Cut) as exc:
                said = str(exc) if isinstance(exc, Cut) else f"{type(exc).__name__}: {exc}"
                error = f"the stream broke off ({said}); the engine or the connection went away"
                raise self._fail(_CUT, method, path, error=error) from None
            except ProtocolError as exc:
                raise self._broken(_BROKEN, exc, method, path) from None
            if not piece:
                return
            yield piece

    def commit(self, cid: str, repo: str, tag: str) -> str:
        # The body is the new image's config changes; Podman insists on one, even empty.
        path = "/commit"
        answer = self.request(
            "POST",
            path,
            params={"container": cid, "repo": repo, "tag": tag},
            body={},
            timeout=600,
        )
        done = self._decode(answer, "POST", path)
        return str(done.get("Id", "")) if isinstance(done, dict) else ""

    def export(self, cid: str, target: Path) -> int:
        """The container's filesystem as a tar, written to `target` atomically; its size."""
        import tempfile

        path = f"/containers/{cid}/export"
        # A fresh temporary name (O_EXCL): nothing planted beside the target is written through.
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
        tmp = Path(name)
        written = 0
        try:
            with os.fdopen(fd, "wb") as out:
                response = self.open("GET", path, timeout=600)
                with contextlib.closing(response):
                    if response.status != 200:
                        raise self._refused(response, "GET", path)
                    try:
                        while chunk := response.read(1 << 20):
                            out.write(chunk)
                            written += len(chunk)
                    except (OSError, ProtocolError) as exc:
                        raise self._broken(_DROPPED, exc, "GET", path) from None
            tmp.replace(target)
        finally:
            tmp.unlink(missing_ok=True)
        return written

    def remove_image(self, reference: str) -> None:
        with contextlib.suppress(NotFoundError):
            self.request("DELETE", f"/images/{reference}", params={"force": "1"})


def _kind(exc: BaseException) -> str:
    """What a failure to get an answer was: no answer in time, a socket we may not open, an
    answer that is not HTTP, or no engine there (refused, missing, hung up)."""
    from providers.core.http.policy import Kind

    if isinstance(exc, ProtocolError):
        return Kind.BROKEN
    if isinstance(exc, TimeoutError):
        return Kind.TIMEOUT
    return Kind.DENIED if isinstance(exc, PermissionError) else Kind.UNREACHABLE


def _stream_errors(answer: Answer, what: str) -> None:
    """Image import/load answer 200 with a JSON stream; a failure is an `error` line."""
    for line in answer.text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and (event.get("error") or event.get("errorDetail")):
            detail = event.get("error") or event.get("errorDetail")
            raise ShoalError(f"container engine: image {what} failed: {detail}")


def _log_params(tail: int | None, follow: bool) -> dict[str, str]:
    params = {"stdout": "1", "stderr": "1", "tail": "all" if tail is None else str(tail)}
    if follow:
        params["follow"] = "1"
    return params


def demux(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """Docker's log stream of a container without a TTY, as it arrives in `chunks` (cut
    anywhere): frames of an 8-byte header (the stream, 0, 1 or 2; three zero bytes; the
    payload's size, big-endian) then the payload, whose bytes are yielded a chunk at a time.
    A stream whose first 8 bytes are no such header passes as it is: a TTY's, which the
    engine sends unframed. Between chunks it holds less than a header, whatever a frame's
    size."""
    framed: bool | None = None  # None: not known before the first 8 bytes
    pending = b""  # the start of a header cut by the chunk's end
    left = 0  # bytes of the current frame's payload still to come
    for chunk in chunks:
        if framed is False:
            if chunk:
                yield chunk
            continue
        data = pending + chunk if pending else chunk
        pending, out, pos, view = b"", bytearray(), 0, memoryview(data)
        while pos < len(data):
            if left:
                take = min(left, len(data) - pos)
                out += view[pos : pos + take]
                pos, left = pos + take, left - take
            elif len(data) - pos < 8:
                pending = data[pos:]
                break
            elif framed is None and not (data[0] in (0, 1, 2) and data[1:4] == b"\0\0\0"):
                framed = False  # (pos is 0: nothing is read before the first header)
                out += data
                break
            else:
                framed = True
                left = int.from_bytes(data[pos + 4 : pos + 8], "big")
                pos += 8
        if out:
            yield bytes(out)
    if framed is None and pending:
        yield pending  # an unframed stream of fewer than 8 bytes in all
