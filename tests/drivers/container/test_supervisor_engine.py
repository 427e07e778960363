"""The container supervisor's engine client (drivers/supervisor/engine_client.py) and its wait.

The client is run as the supervisor runs it (`python -I -S`, by path, no shoal on sys.path)
against the session's real Podman: a chunked answer, Podman's own wait's bare number, an
engine's error, a capped body; and against loopback engines that misbehave (an answer cut
mid-body, an engine that never answers, one that hangs up at once). The supervisor itself,
against the real Podman: it leaves the engine idle while it waits (Podman before 4.6 spins a
core in its Docker-compatible wait), and an engine that refuses Podman's own wait, or a
container removed meanwhile, still ends the watch as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from drivers.container.outcome import PODMAN_WAIT
from drivers.supervisor import engine_client, supervise
from tests.conftest import Run, wait_for
from tests.drivers.container.conftest import Podman

pytestmark = pytest.mark.engine

CONFIG = '[drivers."container/default"]\ngrace_seconds = 1\n'
SUPERVISOR_DIR = os.path.dirname(os.path.abspath(supervise.__file__))
TRAPPED = "sh -c 'trap \"exit 0\" TERM; sleep 600 & wait'"

Shoal = Callable[..., Run]


def by_path(code: str) -> Any:
    """`code` run as the supervisor runs: -I -S, engine_client imported from beside
    supervise.py; what it prints, as JSON."""
    setup = f"import json, sys; sys.path.append({SUPERVISOR_DIR!r}); import engine_client\n"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", setup + code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def answer(address: str, method: str, target: str, limit: int = 1 << 16) -> Any:
    """engine_answer's status, body and the exit code read from it, by path."""
    return by_path(
        f"code, body = engine_client.engine_answer({address!r}, {method!r}, {target!r}, 60, "
        f"{limit})\n"
        "print(json.dumps([code, body.decode('latin-1'), engine_client.exit_code(body)]))"
    )


def run_container(podman: Podman, script: str) -> str:
    return podman.run("run", "-d", podman.image, "sh", "-c", script).strip()


def test_the_supervisors_client_imports_no_http_client() -> None:
    """http.client brings email, ssl and socket: ~30 ms of CPU of every container
    supervisor's start, beside the allocation's next command."""
    loaded = by_path(
        "print(json.dumps(sorted(m for m in ('http.client', 'email.parser', 'ssl', 'socket') "
        "if m in sys.modules)))"
    )
    assert loaded == []


def test_a_chunked_wait_answer_from_the_engine(podman_engine: Podman) -> None:
    """Podman's Docker-compatible wait answers chunked, its head at once, its body at the end."""
    cid = run_container(podman_engine, "sleep 1; exit 3")
    try:
        code, body, exit_code = answer(
            f"unix://{podman_engine.sock}", "POST", f"/v1.41/containers/{cid}/wait"
        )
    finally:
        podman_engine.run("rm", "-f", "-t", "0", cid, check=False)
    assert code == 200
    assert json.loads(body)["StatusCode"] == 3
    assert exit_code == 3


def test_podmans_own_wait_answers_a_bare_exit_code(podman_engine: Podman) -> None:
    cid = run_container(podman_engine, "sleep 1; exit 5")
    try:
        code, body, exit_code = answer(
            f"unix://{podman_engine.sock}", "POST", PODMAN_WAIT.format(cid=cid)
        )
    finally:
        podman_engine.run("rm", "-f", "-t", "0", cid, check=False)
    assert (code, body.strip(), exit_code) == (200, "5", 5)


def test_an_engine_error_is_its_status_and_message(podman_engine: Podman) -> None:
    code, body, exit_code = answer(
        f"unix://{podman_engine.sock}", "GET", "/v1.41/containers/shoal-no-such-container/json"
    )
    assert code == 404
    assert "no such container" in body
    assert exit_code is None


def test_a_body_is_read_up_to_the_cap(podman_engine: Podman) -> None:
    code, body, _ = answer(f"unix://{podman_engine.sock}", "GET", "/v1.41/version", limit=40)
    assert code == 200
    assert len(body) == 40
    assert body.startswith("{")


@pytest.fixture
def sock() -> Iterator[Path]:
    import shutil

    short = Path(tempfile.mkdtemp(prefix="shoal-sup-"))  # unix socket paths are short
    yield short / "engine.sock"
    shutil.rmtree(short, ignore_errors=True)


@contextlib.contextmanager
def engine(path: Path, answer: bytes | None, *, hold: float = 0.0) -> Iterator[None]:
    """A loopback engine for one connection: it reads the request, sends `answer` (None:
    nothing), holds the connection `hold` seconds, then hangs up."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data and (got := conn.recv(65536)):
                    data += got
                if answer is not None:
                    conn.sendall(answer)
                time.sleep(hold)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield
    finally:
        thread.join(30)
        listener.close()


@pytest.mark.parametrize(
    "cut",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n" + b'{"StatusCode": 0',
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n" + b'{"StatusCode": 0',
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n" + b"x" * 16 + b"\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Le",
    ],
    ids=["short-of-its-length", "mid-chunk", "before-the-last-chunk", "mid-head"],
)
def test_an_engine_that_closes_mid_answer_is_an_error_not_an_answer(sock: Path, cut: bytes) -> None:
    """A partial answer to /wait must not read as the container's end (nor its exit code)."""
    with engine(sock, cut), pytest.raises((engine_client.HTTPException, OSError)):
        engine_client.engine_answer(f"unix://{sock}", "POST", "/v1.41/containers/c1/wait", 10)


def test_an_engine_that_hangs_up_without_answering(sock: Path) -> None:
    with engine(sock, b""), pytest.raises(OSError):
        engine_client.engine_answer(f"unix://{sock}", "POST", "/v1.41/containers/c1/wait", 10)


def test_a_hung_engine_is_a_timeout_within_the_timeout(sock: Path) -> None:
    """The supervisor's wait asks with the time left to the deadline: an engine that never
    answers gives the deadline back to it (TimeoutError), not a hang past it."""
    assert timed_out(sock, None) < 4.0


def timed_out(sock: Path, head: bytes | None) -> float:
    """Seconds until engine_answer (timeout 0.5 s) gave up on an engine that sends `head`
    and then holds the connection for 5 s."""
    with engine(sock, head, hold=5.0):
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            engine_client.engine_answer(f"unix://{sock}", "POST", "/v1.41/containers/c1/wait", 0.5)
        return time.monotonic() - start


def test_a_hung_engine_mid_body_is_a_timeout_too(sock: Path) -> None:
    head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"  # Podman's /wait, at once
    assert timed_out(sock, head) < 4.0


def service_cpu_seconds(podman: Podman) -> float:
    """User + system CPU of the `podman system service` process (all its threads)."""
    assert podman.proc is not None
    fields = Path(f"/proc/{podman.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_waiting_supervisor_leaves_the_engine_idle(shoal: Shoal, podman_engine: Podman) -> None:
    """Podman 4.3's Docker-compatible wait polls the container without a pause: one core of
    the engine's for as long as each container runs (measured: 3 s of CPU in 3 s)."""
    run = shoal(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", f"image={podman_engine.image}", "-o", f"entry={TRAPPED}", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    alloc_id = run.json()["id"]
    try:
        time.sleep(1.5)  # the supervisor is in its wait by now
        before = service_cpu_seconds(podman_engine)
        time.sleep(2.0)
        used = service_cpu_seconds(podman_engine) - before
    finally:
        freed = shoal("free", alloc_id)
    assert freed.exit_code == 0, freed.stderr
    assert used < 0.4, f"the engine used {used:.2f} s of CPU in 2 s with one container waited on"


def supervise_by_path(spec: dict[str, Any]) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", supervise.__file__],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(spec).encode())
    proc.stdin.close()
    return proc


def finished(proc: subprocess.Popen[bytes], timeout: float) -> tuple[int, bytes]:
    try:
        code = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        assert proc.stderr is not None
        err = proc.stderr.read()
        proc.stderr.close()
    return code, err


@pytest.mark.parametrize(
    "wait",
    [PODMAN_WAIT, "/v4.0.0/libpod/containers/{cid}/wait?condition=no-such-state"],
    ids=["podmans-own", "refused"],
)
def test_the_watch_ends_with_the_container(podman_engine: Podman, wait: str) -> None:
    """Without a deadline the watch ends with the container. Podman's own wait, or the
    Docker-compatible one when the engine refuses it (an older Podman): never a retry loop
    on a refusal."""
    cid = run_container(podman_engine, "sleep 1; exit 4")
    spec = {
        "mode": "container", "address": f"unix://{podman_engine.sock}", "api": "/v1.41",
        "container": cid, "deadline": None, "grace": 1, "wait": wait.format(cid=cid),
    }  # fmt: skip
    try:
        code, err = finished(supervise_by_path(spec), 60)
    finally:
        podman_engine.run("rm", "-f", "-t", "0", cid, check=False)
    assert code == 0, err


def test_a_container_removed_during_podmans_own_wait_ends_the_watch(
    podman_engine: Podman,
) -> None:
    """Podman's own wait answers 500 for a container removed under it; the Docker-compatible
    one then says 404: gone, and the supervisor leaves."""
    cid = run_container(podman_engine, "trap 'exit 0' TERM; sleep 600 & wait")
    spec = {
        "mode": "container", "address": f"unix://{podman_engine.sock}", "api": "/v1.41",
        "container": cid, "deadline": time.time() + 120, "grace": 1,
        "wait": PODMAN_WAIT.format(cid=cid),
    }  # fmt: skip
    proc = supervise_by_path(spec)
    try:
        time.sleep(1.0)
        podman_engine.run("rm", "-f", "-t", "0", cid)
        code, err = finished(proc, 60)
    finally:
        podman_engine.run("rm", "-f", "-t", "0", cid, check=False)
    assert code == 0, err


def test_an_allocation_on_podman_is_watched_by_podmans_own_wait(
    shoal: Shoal, podman_engine: Podman, home: Path
) -> None:
    """The exit code the supervisor records comes from Podman's own wait's bare number."""
    run = shoal(
        "alloc", "--driver", "container", "--cpu", "1", "--ram", "1",
        "-o", f"image={podman_engine.image}", "-o", "entry=sh -c 'sleep 1; exit 6'", "--json",
    )  # fmt: skip
    assert run.exit_code == 0, run.stderr
    alloc_id = run.json()["id"]

    def note() -> str:
        shown = shoal("status", "--json")
        assert shown.exit_code == 0, shown.stderr
        rows = [row for row in shown.json() if row.get("id") == alloc_id]
        return str(rows[0].get("note") or "") if rows and rows[0]["status"] == "EXITED" else ""

    assert "exited with code 6" in wait_for(note, "the supervisor's record", 30)
    assert shoal("free", alloc_id).exit_code == 0
