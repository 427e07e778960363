"""The container driver's faults without a real engine: a tiny fake Docker API on a unix
socket (http.server on AF_UNIX) where an answer is needed, nothing at all where none is."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Run

INFO = {"NCPU": 4, "MemTotal": 8 * 2**30, "ServerVersion": "fake"}
PING = ("GET", "/_ping")
Route = tuple[int, Any]


class FakeEngine(ThreadingHTTPServer):
    """Answers `routes[(METHOD, path without /v1.41 and query)]`, else 404; records requests."""

    address_family = socket.AF_UNIX
    daemon_threads = True

    def __init__(self, path: Path, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        self.seen: list[tuple[str, str]] = []
        # The allocation's supervisor (another process) waits on the container as on a real
        # engine: held until the engine goes, then told the container is no more.
        self.waits: list[str] = []
        self.closing = threading.Event()
        super().__init__(str(path), _Handler)  # type: ignore[arg-type]  # AF_UNIX: a path

    def server_bind(self) -> None:
        # HTTPServer.server_bind reads (host, port) from the address; a unix path has neither.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = "engine", 0


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeEngine

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the default names client_address[0], which a unix peer does not have

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        elif self.headers.get("Transfer-Encoding") == "chunked":
            while size := int(self.rfile.readline().split(b";")[0], 16):
                self.rfile.read(size + 2)
            self.rfile.readline()
        path = self.path.split("?", 1)[0].removeprefix("/v1.41")
        if self.command == "POST" and path.endswith("/wait") and (
            (self.command, path) not in self.server.routes
        ):
            self.server.waits.append(path)
            self.server.closing.wait(60)
            self.server.routes.setdefault((self.command, path), (404, {"message": "gone"}))
        else:
            self.server.seen.append((self.command, path))
        code, body = self.server.routes.get(
            (self.command, path), (404, {"message": f"no such thing: {path}"})
        )
        if callable(body):
            body(self)  # an answer the route writes itself: a stream, or one that breaks off
            self.close_connection = True
            return
        if isinstance(body, bytes):
            data = body  # as it is: not JSON
        else:
            data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer


@contextlib.contextmanager
def fake_engine(path: Path, routes: dict[tuple[str, str], Route]) -> Iterator[FakeEngine]:
    server = FakeEngine(path, routes)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield server
    finally:
        server.closing.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def sock() -> Iterator[Path]:
    # tmp_path can be long; a unix socket path may not exceed 107 bytes.
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="shoal-fake-"))
    yield short / "engine.sock"
    import shutil

    shutil.rmtree(short, ignore_errors=True)


def alloc(cli: Callable[..., Run], host: str, *args: str) -> Run:
    return cli(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", "image=busybox:1", "-o", "entry=sleep 60", *args,
        env={"DOCKER_HOST": host},
    )  # fmt: skip


def test_no_engine_at_the_socket_is_69_naming_it(cli: Callable[..., Run], sock: Path) -> None:
    run = alloc(cli, f"unix://{sock}")
    assert run.exit_code == 69, run.stderr
    assert str(sock) in run.stderr
    assert "DOCKER_HOST" in run.stderr


def test_a_stale_socket_file_is_69(cli: Callable[..., Run], sock: Path) -> None:
    # A socket file left by a dead engine: connecting is refused, not "no such file".
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(sock))
    stale.close()
    run = alloc(cli, f"unix://{sock}", "--dry-run")
    assert run.exit_code == 69, run.stderr
    assert str(sock) in run.stderr


def test_an_engine_that_hangs_up_is_69(cli: Callable[..., Run], sock: Path) -> None:
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))
    listener.listen(8)
    stop = threading.Event()

    def hang_up() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                conn, _ = listener.accept()
                conn.close()

    thread = threading.Thread(target=hang_up)
    thread.start()
    try:
        run = alloc(cli, f"unix://{sock}", "--dry-run")
    finally:
        stop.set()
        thread.join(5)
        listener.close()
    assert run.exit_code == 69, run.stderr
    assert str(sock) in run.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root opens any socket: no EACCES to provoke")
def test_a_socket_we_may_not_open_is_77(cli: Callable[..., Run], sock: Path) -> None:
    with fake_engine(sock, {("GET", "/info"): (200, INFO)}):
        sock.parent.chmod(0o000)
        try:
            run = alloc(cli, f"unix://{sock}", "--dry-run")
        finally:
            sock.parent.chmod(0o700)
    assert run.exit_code == 77, run.stderr
    assert str(sock) in run.stderr


def test_an_image_the_engine_lacks_is_1_with_the_hint(cli: Callable[..., Run], sock: Path) -> None:
    # No request of its own before the create: the create's 404 is the image check, and only
    # then is the image asked about, to tell a missing image from another missing thing.
    routes: dict[tuple[str, str], Route] = {("GET", "/info"): (200, INFO), PING: (200, "OK")}
    with fake_engine(sock, routes) as engine:
        run = alloc(cli, f"unix://{sock}")
    assert run.exit_code == 1, run.stderr
    assert "busybox:1" in run.stderr and "shoal image pull" in run.stderr
    asked = [seen for seen in engine.seen if seen[1] != "/_ping"]
    assert asked[:3] == [
        ("GET", "/info"),
        ("POST", "/containers/create"),
        ("GET", "/images/busybox:1/json"),
    ]  # then the undo's stop of a container that is not there
    assert not [seen for seen in asked if seen[1].endswith("/start")]


def test_a_create_404_for_an_image_the_engine_has_is_the_engines_own_error(
    cli: Callable[..., Run], sock: Path
) -> None:
    routes: dict[tuple[str, str], Route] = {
        ("GET", "/info"): (200, INFO),
        PING: (200, "OK"),
        ("GET", "/images/busybox:1/json"): (200, {"Id": "sha256:feed"}),
        ("POST", "/containers/create"): (404, {"message": "network nat: not found"}),
    }
    with fake_engine(sock, routes):
        run = alloc(cli, f"unix://{sock}")
    assert run.exit_code == 1, run.stderr
    assert "network nat: not found" in run.stderr and "shoal image pull" not in run.stderr


@pytest.mark.parametrize(
    "host",
    [
        "localhost:2375",
        "ssh://box",
        "npipe:////./pipe/docker",
        "tcp://127.0.0.1:99999",
        "tcp://127.0.0.1:port",
        "tcp://[::1:2375",
        "tcp://:2375",
        "tcp://127.0.0.1 :2375",
        "tcp://engine:Pw-9q-NEVER-SHOWN@127.0.0.1:2375",
        "tcp://127.0.0.1:Pw-9q-NEVER-SHOWN",
    ],
)
def test_a_malformed_docker_host_is_2(cli: Callable[..., Run], host: str) -> None:
    # SHOAL_DEBUG unset: an unexpected exception would be the one-line "unexpected ..." error.
    run = cli(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", "image=busybox:1", "-o", "entry=sleep 60", "--dry-run",
        env={"DOCKER_HOST": host, "SHOAL_DEBUG": ""},
    )  # fmt: skip
    assert run.exit_code == 2, run.stderr
    assert "DOCKER_HOST" in run.stderr and "unexpected" not in run.stderr
    assert "Pw-9q-NEVER-SHOWN" not in run.stderr + run.stdout


def test_limits_above_the_engine_are_2_naming_its_totals(
    cli: Callable[..., Run], sock: Path
) -> None:
    with fake_engine(sock, {("GET", "/info"): (200, INFO)}):
        run = alloc(cli, f"unix://{sock}", "--cpu", "5")
    assert run.exit_code == 2, run.stderr
    assert "cpu=4 ram=8GiB" in run.stderr


def test_the_engine_totals_are_kept_and_a_cache_of_the_format_before_is_a_miss(
    cli: Callable[..., Run], sock: Path, home: Path
) -> None:
    """/info (~300 ms on Podman) is asked once per few minutes and engine address; the file
    moved into the shared cache format (providers/core/ttlcache.py), and one written before
    (here: fresh, with totals the engine does not have) is asked again, not believed."""
    address = f"unix://{sock}"
    cache = home / "cache" / "container-engines.json"
    cache.parent.mkdir(parents=True)
    cache.write_text(json.dumps({address: {"cpus": 64, "ram_gib": 512, "at": time.time()}}))
    routes: dict[tuple[str, str], Route] = {("GET", "/info"): (200, INFO), PING: (200, "OK")}
    with fake_engine(sock, routes) as engine:
        first = alloc(cli, address, "--cpu", "5", "--dry-run")
        del routes[("GET", "/info")]  # from now on only the cache knows the totals
        again = alloc(cli, address, "--cpu", "5", "--dry-run")
    for run in (first, again):
        assert run.exit_code == 2, run.stderr
        assert "cpu=4 ram=8GiB" in run.stderr
    assert engine.seen.count(("GET", "/info")) == 1 and PING in engine.seen
    kept = json.loads(cache.read_text())
    assert kept["totals"][address]["value"] == {"cpus": 4, "ram_gib": 8}
    assert address not in kept


def test_a_failed_start_removes_the_created_container(cli: Callable[..., Run], sock: Path) -> None:
    routes: dict[tuple[str, str], Route] = {
        ("GET", "/info"): (200, INFO),
        ("GET", "/_ping"): (200, "OK"),
        ("GET", "/images/busybox:1/json"): (200, {"Id": "sha256:feed"}),
        ("POST", "/containers/create"): (201, {"Id": "c0ffee", "Warnings": []}),
        ("POST", "/containers/c0ffee/start"): (500, {"message": "runc: exec failed"}),
        ("DELETE", "/containers/c0ffee"): (204, None),
    }
    with fake_engine(sock, routes) as engine:
        run = alloc(cli, f"unix://{sock}")
    assert run.exit_code == 1, run.stderr
    assert "runc: exec failed" in run.stderr
    assert ("DELETE", "/containers/c0ffee") in engine.seen


# -- the engine API's error map ---------------------------------------------------------------


def test_engine_failure_kinds_are_the_policys() -> None:
    from drivers.container import engine
    from providers.core.http.policy import Kind

    assert (engine._DROPPED, engine._BROKEN, engine._JSON, engine._CUT) == (
        Kind.DROPPED,
        Kind.BROKEN,
        Kind.JSON,
        Kind.CUT,
    )


@pytest.mark.parametrize(
    ("status", "body", "error", "said"),
    [
        (404, {"message": "no such container: c0"}, "NotFoundError", "no such container: c0"),
        (409, {"cause": "name in use"}, "ShoalError", "container engine: conflict: name in use"),
        (400, {"message": "bad\nrequest"}, "UsageError", "container engine: bad request"),
        (403, "not yours", "CredentialsError", "container engine refused POST /commit: not yours"),
        (
            500,
            None,
            "ShoalError",
            "container engine: POST /commit: HTTP 500: Internal Server Error",
        ),
    ],
)
def test_engine_answers_map_to_typed_errors(
    sock: Path, status: int, body: Any, error: str, said: str
) -> None:
    from drivers.container.engine import Engine

    answers: dict[tuple[str, str], Route] = {("POST", "/commit"): (status, body)}
    with fake_engine(sock, answers), pytest.raises(Exception) as caught:
        Engine(f"unix://{sock}").request("POST", "/commit", body={})
    assert type(caught.value).__name__ == error
    assert str(caught.value) == said


def test_an_engine_that_does_not_answer_is_asked_once(sock: Path) -> None:
    from drivers.container.engine import Engine
    from providers.core.errors import ProviderUnreachableError, RetryableError

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(sock))
    listener.listen(8)  # accepts (the kernel's backlog) and never answers
    try:
        engine = Engine(f"unix://{sock}", timeout=0.3)
        with pytest.raises(RetryableError, match=rf"at {sock} did not answer GET /_ping in time"):
            engine.ping()
    finally:
        listener.close()
    # Nothing listening now: refused at once, and said so with the socket named.
    with pytest.raises(
        ProviderUnreachableError,
        match=rf"answers at {sock} \((ConnectionRefusedError|FileNotFoundError)\)",
    ):
        Engine(f"unix://{sock}").info()


def test_an_answer_that_is_not_json_is_a_shoal_error(sock: Path) -> None:
    from drivers.container.engine import Engine
    from providers.core.errors import ShoalError

    answers: dict[tuple[str, str], Route] = {("GET", "/info"): (200, b"plain text")}
    with fake_engine(sock, answers), pytest.raises(ShoalError, match=r"GET /info: malformed JSON"):
        Engine(f"unix://{sock}").info()


def test_status_inspects_once_and_free_stops_inspects_reads_the_log_and_removes(
    cli: Callable[..., Run], sock: Path
) -> None:
    running = {"State": {"Status": "running", "Running": True}, "NetworkSettings": {}}
    stopped = {"State": {"Status": "exited", "Running": False, "ExitCode": 0}}
    routes: dict[tuple[str, str], Route] = {
        ("GET", "/info"): (200, INFO),
        PING: (200, "OK"),
        ("POST", "/containers/create"): (201, {"Id": "c0ffee", "Warnings": []}),
        ("POST", "/containers/c0ffee/start"): (204, None),
        ("GET", "/containers/c0ffee/json"): (200, running),
    }
    with fake_engine(sock, routes) as engine:
        made = alloc(cli, f"unix://{sock}", "--json")
        assert made.exit_code == 0, made.stderr
        alloc_id = made.json()["id"]
        # Another DOCKER_HOST now: the allocation's own engine is the one asked.
        engine.seen.clear()
        run = cli("status", alloc_id, "--json", env={"DOCKER_HOST": "unix:///nowhere"})
        assert run.exit_code == 0, run.stderr
        assert run.json()["detail"]["state"] == "running"
        assert engine.seen == [("GET", "/containers/c0ffee/json")]
        routes[("GET", "/containers/c0ffee/json")] = (200, stopped)
        routes[("POST", "/containers/c0ffee/stop")] = (204, None)
        routes[("GET", "/containers/c0ffee/logs")] = (200, b"bye\n")
        routes[("DELETE", "/containers/c0ffee")] = (204, None)
        engine.seen.clear()
        run = cli("free", alloc_id, env={"DOCKER_HOST": "unix:///nowhere"})
        assert run.exit_code == 0, run.stderr
    assert engine.seen == [
        ("POST", "/containers/c0ffee/stop"),
        ("GET", "/containers/c0ffee/json"),
        ("GET", "/containers/c0ffee/logs"),
        ("DELETE", "/containers/c0ffee"),
    ]
