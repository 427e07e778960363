"""`alloc --driver container -o image=REGISTRY/NAME:TAG` with an image the engine lacks: the
engine pulls it (POST /images/create) with the credential shoal finds as X-Registry-Auth.

Against the fake Docker API of test_engine_errors.py (the request's query and headers, the
progress stream, the errors engines send), then against a real Podman pulling from a real
loopback registry with basic auth (marked `engine`; skipped with the reason where either
cannot run)."""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.conftest import Run
from tests.drivers.container.test_engine_errors import INFO, PING, Route, fake_engine

REGISTRY = "127.0.0.1:5000"
IMAGE = f"{REGISTRY}/app/sample:1.0"
IMAGE_JSON = ("GET", f"/images/{IMAGE}/json")
PULL = ("POST", "/images/create")
CREATE = ("POST", "/containers/create")
PASSWORD = "Pw-7q-NEVER-SHOWN-x"  # a test's own throw-away secret
TOKEN = "IdTok-NEVER-SHOWN-0123456789"
LAYERS = ("b9ee17f8c0f8", "1b492cf3aa0f", "00aed7f0fd71")
RUNNING = {"State": {"Status": "running", "Running": True}, "NetworkSettings": {}}


@pytest.fixture
def sock() -> Iterator[Path]:
    # tmp_path can be long; a unix socket path may not exceed 107 bytes.
    short = Path(tempfile.mkdtemp(prefix="shoal-pull-"))
    yield short / "engine.sock"
    shutil.rmtree(short, ignore_errors=True)


@pytest.fixture
def logins(tmp_path: Path) -> Path:
    """An empty home for the credential lookup: no auth file but the ones a test writes."""
    path = tmp_path / "logins"
    (path / "run").mkdir(parents=True)
    return path


def isolated(logins: Path, **more: str | None) -> dict[str, str | None]:
    """The environment the credential lookup reads, pointed at `logins` only."""
    return {
        "HOME": str(logins),
        "XDG_RUNTIME_DIR": str(logins / "run"),
        "XDG_CONFIG_HOME": str(logins / ".config"),
        "DOCKER_CONFIG": str(logins / ".docker"),
        "REGISTRY_AUTH_FILE": None,
        "SHOAL_IMAGE_USER": None,
        "SHOAL_IMAGE_PASSWORD": None,
        **more,
    }


def auth_file(logins: Path, entry: dict[str, str], registry: str = REGISTRY) -> dict[str, str]:
    path = logins / "auth.json"
    path.write_text(json.dumps({"auths": {registry: entry}}))
    return {"REGISTRY_AUTH_FILE": str(path)}


def basic(user: str, password: str) -> dict[str, str]:
    return {"auth": base64.b64encode(f"{user}:{password}".encode()).decode()}


@dataclass
class Pulls:
    """What the fake engine was asked to pull: each request's query and headers."""

    asked: list[tuple[dict[str, str], dict[str, str]]]

    @property
    def auth(self) -> dict[str, Any] | None:
        header = self.asked[0][1].get("x-registry-auth")
        if header is None:
            return None
        decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(header))
        return decoded


def progress(*events: dict[str, Any], status: int = 200, cut: bool = False) -> Any:
    """An /images/create answer: `events` as the engine's JSON lines, the body running to
    the close (as Docker and Podman stream it); `cut`: the engine goes away mid-way."""

    def write(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        if cut:
            handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Connection", "close")
        handler.end_headers()
        for event in events:
            data = echoed(handler, json.dumps(event).encode() + b"\r\n")
            if cut:
                data = b"%x\r\n%s\r\n" % (len(data), data)
            handler.wfile.write(data)
            handler.wfile.flush()

    return write


def fake_routes(answer: Any, pulls: Pulls, image: str = IMAGE) -> dict[tuple[str, str], Route]:
    """An engine without `image` until it pulls it (with `answer`), then a container."""
    pulled: list[bool] = []

    def pull(handler: BaseHTTPRequestHandler) -> None:
        query = {k: v[0] for k, v in parse_qs(urlsplit(handler.path).query).items()}
        pulls.asked.append((query, {k.lower(): v for k, v in handler.headers.items()}))
        answer(handler)
        pulled.append(True)

    def create(handler: BaseHTTPRequestHandler) -> None:
        code, body = (
            (201, {"Id": "c0ffee"}) if pulled else (404, {"message": f"No such image: {image}"})
        )
        data = json.dumps(body).encode()
        handler.send_response(code)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return {
        ("GET", "/info"): (200, INFO),
        PING: (200, "OK"),
        PULL: (200, pull),
        CREATE: (201, create),
        ("POST", "/containers/c0ffee/start"): (204, None),
        ("GET", "/containers/c0ffee/json"): (200, RUNNING),
        ("DELETE", "/containers/c0ffee"): (204, None),
    }


def alloc(
    cli: Callable[..., Run],
    sock: Path,
    env: dict[str, str | None],
    image: str = IMAGE,
    *args: str,
) -> Run:
    return cli(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", f"image={image}", "-o", "entry=sleep 60", *args,
        env={"DOCKER_HOST": f"unix://{sock}", **env},
    )  # fmt: skip


def shown(run: Run) -> str:
    return run.stdout + run.stderr


DOCKER_PULL: list[dict[str, Any]] = [
    {"status": "Pulling from app/sample", "id": "1.0"},
    *({"status": "Pulling fs layer", "progressDetail": {}, "id": layer} for layer in LAYERS),
    *(
        {
            "status": "Downloading",
            "progressDetail": {"current": n * 1024, "total": 3 << 20},
            "progress": f"[=>  ] {n} KB/3 MB",
            "id": layer,
        }
        for layer in LAYERS
        for n in range(1, 40)
    ),
    *({"status": "Download complete", "progressDetail": {}, "id": layer} for layer in LAYERS),
    *({"status": "Pull complete", "progressDetail": {}, "id": layer} for layer in LAYERS),
    {"status": "Digest: sha256:" + "7a" * 32},
    {"status": f"Status: Downloaded newer image for {IMAGE}"},
]


# -- the request ------------------------------------------------------------------------------


def test_a_missing_image_is_pulled_with_the_credential_and_its_progress_shown_a_line_a_change(
    cli: Callable[..., Run], sock: Path, logins: Path
) -> None:
    pulls = Pulls([])
    env = isolated(logins, **auth_file(logins, basic("shoal", PASSWORD)))
    with fake_engine(sock, fake_routes(progress(*DOCKER_PULL), pulls)) as engine:
        run = alloc(cli, sock, env)
    assert run.exit_code == 0, run.stderr
    assert len(pulls.asked) == 1
    query, _ = pulls.asked[0]
    assert query == {"fromImage": f"{REGISTRY}/app/sample", "tag": "1.0"}
    assert pulls.auth == {"username": "shoal", "password": PASSWORD, "serveraddress": REGISTRY}
    # The create that failed, the image asked about, the pull, the create again.
    asked = [seen for seen in engine.seen if seen not in (PING, ("GET", "/info"))]
    assert asked[:4] == [CREATE, IMAGE_JSON, PULL, CREATE]
    lines = run.stderr.splitlines()
    assert "127.0.0.1:5000/app/sample:1.0: not in the container engine; pulling it" in lines
    for layer in LAYERS:
        # 39 progress events of each layer are one line; each state change is one.
        mine = [line for line in lines if f": {layer}: " in line]
        assert mine == [
            f"{IMAGE}: {layer}: Pulling fs layer",
            f"{IMAGE}: {layer}: Downloading (3.0 MiB)",
            f"{IMAGE}: {layer}: Download complete",
            f"{IMAGE}: {layer}: Pull complete",
        ]
    assert f"{IMAGE}: Status: Downloaded newer image for {IMAGE}" in lines
    assert any(line.startswith(f"{IMAGE}: pulled in ") for line in lines)
    assert PASSWORD not in shown(run) and "x-registry-auth" not in shown(run).lower()


def test_no_credential_no_header(cli: Callable[..., Run], sock: Path, logins: Path) -> None:
    pulls = Pulls([])
    with fake_engine(sock, fake_routes(progress(*DOCKER_PULL), pulls)):
        run = alloc(cli, sock, isolated(logins))
    assert run.exit_code == 0, run.stderr
    assert pulls.auth is None and "x-registry-auth" not in pulls.asked[0][1]


def test_an_identity_token_goes_alone(cli: Callable[..., Run], sock: Path, logins: Path) -> None:
    pulls = Pulls([])
    env = isolated(logins, **auth_file(logins, {**basic("me", ""), "identitytoken": TOKEN}))
    with fake_engine(sock, fake_routes(progress(*DOCKER_PULL), pulls)):
        run = alloc(cli, sock, env)
    assert run.exit_code == 0, run.stderr
    assert pulls.auth == {"identitytoken": TOKEN, "serveraddress": REGISTRY}
    assert TOKEN not in shown(run)


def test_docker_hub_names_and_digests_as_the_docker_cli_sends_them(
    cli: Callable[..., Run], sock: Path, logins: Path
) -> None:
    """busybox:1 is docker.io/library/busybox (its AuthConfig server Docker's Hub key); a
    digest rides in `tag` (an empty tag would pull every tag of the repository)."""
    env = isolated(logins, SHOAL_IMAGE_USER="hubber", SHOAL_IMAGE_PASSWORD=PASSWORD)
    pulls = Pulls([])
    with fake_engine(sock, fake_routes(progress(*DOCKER_PULL), pulls, "busybox:1")):
        run = alloc(cli, sock, env, image="busybox:1")
    assert run.exit_code == 0, run.stderr
    assert pulls.asked[0][0] == {"fromImage": "docker.io/library/busybox", "tag": "1"}
    assert pulls.auth == {
        "username": "hubber",
        "password": PASSWORD,
        "serveraddress": "https://index.docker.io/v1/",
    }
    digest = "sha256:" + "ab" * 32
    pinned = f"{REGISTRY}/app/sample:1.0@{digest}"
    pulls = Pulls([])
    sock.unlink()  # the first engine's socket file
    with fake_engine(sock, fake_routes(progress(*DOCKER_PULL), pulls, pinned)):
        run = alloc(cli, sock, isolated(logins), image=pinned)
    assert run.exit_code == 0, run.stderr
    assert pulls.asked[0][0] == {"fromImage": f"{REGISTRY}/app/sample", "tag": digest}


def test_an_image_the_engine_has_is_not_pulled(
    cli: Callable[..., Run], sock: Path, logins: Path
) -> None:
    pulls = Pulls([])
    routes = fake_routes(progress(*DOCKER_PULL), pulls)
    routes[CREATE] = (201, {"Id": "c0ffee"})
    with fake_engine(sock, routes) as engine:
        run = alloc(cli, sock, isolated(logins))
    assert run.exit_code == 0, run.stderr
    assert not pulls.asked and IMAGE_JSON not in engine.seen
    assert "pulling" not in run.stderr
    # A create's 404 for an image the engine has is something else missing: no pull either.
    routes[CREATE] = (404, {"message": "network nat: not found"})
    routes[IMAGE_JSON] = (200, {"Id": "sha256:feed"})
    sock.unlink()  # the first engine's socket file
    with fake_engine(sock, routes):
        run = alloc(cli, sock, isolated(logins))
    assert run.exit_code == 1 and "network nat: not found" in run.stderr
    assert not pulls.asked


def test_a_name_no_registry_serves_is_not_pulled(
    cli: Callable[..., Run], sock: Path, logins: Path
) -> None:
    pulls = Pulls([])
    image = "sha256:" + "ab" * 32  # an image ID
    with fake_engine(sock, fake_routes(progress(*DOCKER_PULL), pulls, image)):
        run = alloc(cli, sock, isolated(logins), image=image)
    assert run.exit_code == 1, run.stderr
    assert not pulls.asked and "neither an image the engine has" in run.stderr


# -- failures ---------------------------------------------------------------------------------


ECHO = "@HEADER@"  # where an answer repeats the X-Registry-Auth it was sent


def echoing(message: str) -> str:
    """What an engine's error may carry: the header, the password, user:password base64."""
    pair = base64.b64encode(f"shoal:{PASSWORD}".encode()).decode()
    return f"{message} (auth {ECHO} {pair} password={PASSWORD})"


def echoed(handler: BaseHTTPRequestHandler, data: bytes) -> bytes:
    return data.replace(ECHO.encode(), handler.headers.get("X-Registry-Auth", "").encode())


PODMAN_SAYS = {
    "refused": (
        77,
        "initializing source docker://127.0.0.1:5000/app/sample:1.0: reading manifest 1.0 in "
        "127.0.0.1:5000/app/sample: unauthorized: authentication required",
    ),
    "missing": (
        1,
        "initializing source docker://127.0.0.1:5000/app/sample:1.0: reading manifest 1.0 in "
        "127.0.0.1:5000/app/sample: manifest unknown: manifest unknown",
    ),
    "unreachable": (
        69,
        "initializing source docker://127.0.0.1:5000/app/sample:1.0: pinging container "
        'registry 127.0.0.1:5000: Get "http://127.0.0.1:5000/v2/": dial tcp 127.0.0.1:5000: '
        "connect: connection refused",
    ),
    "plain-http": (
        78,
        'pinging container registry 127.0.0.1:5000: Get "https://127.0.0.1:5000/v2/": http: '
        "server gave HTTP response to HTTPS client",
    ),
    "rate-limited": (
        75,
        "toomanyrequests: You have reached your pull rate limit. You may increase the limit by "
        "authenticating and upgrading",
    ),
    "other": (1, "writing blob: adding layer with blob: no space left on device"),
}


@pytest.mark.parametrize("case", sorted(PODMAN_SAYS))
def test_an_error_line_in_the_stream_is_one_typed_line_without_the_credential(
    cli: Callable[..., Run], sock: Path, logins: Path, case: str
) -> None:
    code, message = PODMAN_SAYS[case]
    said = echoing(message)
    answer = progress(
        {"status": echoing("Resolving")},  # a progress line is scrubbed as an error is
        {"status": "Pulling fs layer", "progressDetail": {}, "id": LAYERS[0]},
        {"progressDetail": {}, "errorDetail": {"message": said}, "error": said},
    )
    pulls = Pulls([])
    env = isolated(logins, **auth_file(logins, basic("shoal", PASSWORD)))
    with fake_engine(sock, fake_routes(answer, pulls)) as engine:
        run = alloc(cli, sock, env)
    assert run.exit_code == code, run.stderr
    errors = [line for line in run.stderr.splitlines() if line.startswith("shoal: error:")]
    assert len(errors) == 1, run.stderr
    assert "127.0.0.1:5000/app/sample:1.0" in errors[0]
    secrets = (
        PASSWORD,
        pulls.asked[0][1]["x-registry-auth"][:40],
        basic("shoal", PASSWORD)["auth"],
    )
    for secret in secrets:
        assert secret not in shown(run)
    assert [seen for seen in engine.seen if seen == CREATE] == [CREATE]  # never made
    if case == "refused":
        assert "user 'shoal'" in errors[0] and "auth.json" in errors[0]
    if case == "missing":
        assert "options.image" in errors[0] and "check the name and tag" in errors[0]
    if case == "plain-http":
        assert "insecure" in errors[0] and "registries.conf" in errors[0]


DOCKER_ANSWERS = {
    # Docker answers an HTTP error when the pull fails before it streams anything.
    "hub-missing": (
        404,
        "pull access denied for nothere, repository does not exist or may require "
        "'docker login': denied: requested access to the resource is denied",
        1,
    ),
    "refused": (401, 'Head "https://127.0.0.1:5000/v2/app/sample/manifests/1.0": unauthorized', 77),
    "no-such-host": (
        500,
        'Get "https://127.0.0.1:5000/v2/": dial tcp: lookup registry.invalid: no such host',
        69,
    ),
    "plain-404": (404, "nothing here", 1),
    "server-error": (500, "something broke", 1),
}


@pytest.mark.parametrize("case", sorted(DOCKER_ANSWERS))
def test_an_http_error_before_the_stream_is_typed_too(
    cli: Callable[..., Run], sock: Path, logins: Path, case: str
) -> None:
    status, message, code = DOCKER_ANSWERS[case]

    def answer(handler: BaseHTTPRequestHandler) -> None:
        data = echoed(handler, json.dumps({"message": echoing(message)}).encode())
        handler.send_response(status)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    env = isolated(logins, **auth_file(logins, basic("shoal", PASSWORD)))
    pulls = Pulls([])
    with fake_engine(sock, fake_routes(answer, pulls)):
        run = alloc(cli, sock, env)
    assert run.exit_code == code, run.stderr
    assert "127.0.0.1:5000/app/sample:1.0" in run.stderr
    header = pulls.asked[0][1]["x-registry-auth"]
    for secret in (PASSWORD, header, header[-24:], basic("shoal", PASSWORD)["auth"]):
        assert secret not in shown(run)
    if case == "hub-missing":
        assert "log in" in run.stderr  # Docker Hub says so of a private repository too
    if case == "server-error":
        assert "HTTP 500: something broke" in run.stderr


def test_an_engine_that_goes_away_mid_pull_is_69(
    cli: Callable[..., Run], sock: Path, logins: Path
) -> None:
    answer = progress(*DOCKER_PULL[:5], cut=True)  # chunked, and no last chunk: cut off
    with fake_engine(sock, fake_routes(answer, Pulls([]))):
        run = alloc(cli, sock, isolated(logins))
    assert run.exit_code == 69, run.stderr
    assert "broke off" in run.stderr and "/images/create" in run.stderr


def test_an_endless_progress_line_is_refused_before_reading_much_of_it(
    cli: Callable[..., Run], sock: Path, logins: Path
) -> None:
    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Connection", "close")
        handler.end_headers()
        with contextlib.suppress(OSError):  # shoal hangs up first
            for _ in range(64):
                handler.wfile.write(b'{"status": "' + b"x" * (1 << 16))

    with fake_engine(sock, fake_routes(endless, Pulls([]))):
        run = alloc(cli, sock, isolated(logins))
    assert run.exit_code == 1, run.stderr
    assert "progress line longer than" in run.stderr


# -- a real Podman pulling from a real loopback registry -------------------------------------

# Podman's compat API takes no tlsVerify: the engine's own registries.conf must let it speak
# plain HTTP to the loopback registry (Docker does so for 127.0.0.0/8 by itself).
REGISTRIES_CONF = """\
unqualified-search-registries = []
[[registry]]
location = "127.0.0.1"
insecure = true
"""


@pytest.fixture(scope="module")
def pulling_podman() -> Iterator[Any]:
    """A Podman service of this module's own (the session's has no registries.conf of ours)
    and a basic-auth registry holding its busybox as `shoal-busybox-TOKEN:1` (`remote`)."""
    from tests.drivers.container.conftest import EngineUnavailable, Podman
    from tests.drivers.image.registry.server import Registry, StartFailed, Unavailable

    workdir = Path(tempfile.mkdtemp(prefix="shoal-pp-"))
    (workdir / "registries.conf").write_text(REGISTRIES_CONF)

    class PullingPodman(Podman):
        @property
        def env(self) -> dict[str, str]:
            return {
                **super().env,
                "CONTAINERS_REGISTRIES_CONF": str(self.workdir / "registries.conf"),
            }

    try:
        registry = Registry.start("basic")
    except (Unavailable, StartFailed) as exc:
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.skip(f"no loopback registry: {exc}")
    podman: Any = None
    try:
        binary = shutil.which("podman")
        if binary is None:
            raise EngineUnavailable("podman is not installed (apt-get install podman runc)")
        podman = PullingPodman(binary, workdir)
        podman.start()
        local = podman.import_busybox()
        podman.registry = registry
        podman.remote = f"{registry.host}/shoal-busybox-{podman.token}:1"
        podman.run("push", "--tls-verify=false", "--creds", registry.creds, local, podman.remote)
        # A push tags nothing: the engine lacks the name (it has the layers, as an engine that
        # ran another image on the same base would).
        before = podman.shoal_containers()
    except (EngineUnavailable, RuntimeError, subprocess.TimeoutExpired) as exc:
        if podman is not None:
            podman.stop()
        registry.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        pytest.skip(f"no container engine to pull with: {exc}")
    try:
        yield podman
    finally:
        podman.cleanup(before)
        podman.stop()
        registry.stop()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.mark.engine
def test_podman_pulls_from_a_loopback_registry_with_the_credential_shoal_finds(
    cli: Callable[..., Run],
    pulling_podman: Any,
    logins: Path,
    write_config: Callable[[str], Path],
) -> None:
    write_config('[drivers."container/default"]\ngrace_seconds = 1\n')  # a quick `free`
    podman, registry = pulling_podman, pulling_podman.registry
    sock = podman.sock
    user = registry.username
    wrong = auth_file(logins, basic(user, "not-the-password"), registry.host)
    run = alloc(cli, sock, isolated(logins, **wrong), image=podman.remote)
    assert run.exit_code == 77, run.stderr
    assert "refused" in run.stderr and "not-the-password" not in shown(run)

    run = alloc(cli, sock, isolated(logins), image=podman.remote)
    assert run.exit_code == 77, run.stderr
    assert "no credential" in run.stderr

    good = auth_file(logins, basic(user, registry.password), registry.host)
    absent = f"{registry.host}/shoal-busybox-{podman.token}:absent"
    run = alloc(cli, sock, isolated(logins, **good), image=absent)
    assert run.exit_code == 1, run.stderr
    assert absent in run.stderr and "manifest unknown" in run.stderr

    run = alloc(cli, sock, isolated(logins, **good), podman.remote, "--json")
    assert run.exit_code == 0, run.stderr
    assert f"{podman.remote}: not in the container engine; pulling it" in run.stderr
    assert any(line.startswith(f"{podman.remote}: pulled in ") for line in run.stderr.splitlines())
    assert registry.password not in shown(run)
    made = [run.json()["id"]]
    try:
        listed = json.loads(podman.run("images", "--format", "json"))
        assert any(podman.remote in (image.get("Names") or []) for image in listed)
        # Now the engine has it: the next allocation pulls nothing, and needs no credential.
        again = alloc(cli, sock, isolated(logins), podman.remote, "--json")
        assert again.exit_code == 0, again.stderr
        made.append(again.json()["id"])
        assert "pulling" not in again.stderr
    finally:
        for alloc_id in made:
            cli("free", alloc_id, env={"DOCKER_HOST": f"unix://{sock}"})
