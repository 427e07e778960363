"""A plain-HTTP API server (`http://`): reached without an SSL context, httpcore or pydantic
(issue 29), with the same answers and errors, and never past a proxy the environment names.
Only 127.0.0.1 is contacted."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from providers.core.errors import ConfigError, ProviderUnreachableError
from providers.core.http.policy import RetryPolicy
from providers.kubernetes import plain
from providers.kubernetes.client import KubeClient
from providers.kubernetes.connection import Connection
from providers.kubernetes.kubeconfig import load_connection
from tests.conftest import shoal_env
from tests.providers.kubernetes import objects as k8s
from tests.providers.kubernetes.apiserver import ApiServer

TOKEN = "tok-plain-0123456789abcdef"
FAST = RetryPolicy(attempts=2, backoff_seconds=0.0, max_delay_seconds=0.0)

# Runs shoal in-process, counting the SSL contexts made, and prints the modules it imported.
PROBE = """
import json, ssl, sys
made = []
real = ssl.SSLContext.__new__
def counted(cls, *args, **kwargs):
    made.append(cls)
    return real(cls, *args, **kwargs)
ssl.SSLContext.__new__ = staticmethod(counted)
sys.argv = ["shoal", *json.loads(sys.argv[1])]
from cli.main import main
code = 0
try:
    main()
except SystemExit as exc:
    code = exc.code
sys.stdout.flush()
sys.stderr.write("\\nPROBE " + json.dumps([code, len(made), sorted(sys.modules)]) + "\\n")
"""


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer(tokens=[TOKEN]) as server:
        yield server


def _kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "current-context": "loop",
                "clusters": [{"name": "loop", "cluster": {"server": server}}],
                "users": [{"name": "tester", "user": {"token": TOKEN}}],
                "contexts": [{"name": "loop", "context": {"cluster": "loop", "user": "tester"}}],
            }
        )
    )
    return path


def _connect(server: str) -> Connection:
    return Connection(server=server, context="c", cluster="c", token=TOKEN, source="kc")


def test_resources_of_a_plain_http_cluster_make_no_ssl_context(
    api: ApiServer, home: Path, tmp_path: Path
) -> None:
    api.add("nodes", k8s.eks_node("n1", nodegroup="cpu", instance_type="m7i.large"))
    api.add("pods", k8s.simple_pod("p1", "n1", cpu="1", memory="1Gi"))
    env = {"KUBECONFIG": str(_kubeconfig(tmp_path / "kc", api.base))}
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        env[name] = ""
    args = ["resources", "-p", "kubernetes", "--json"]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        env=shoal_env(home, env),
        check=False,
    )
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("PROBE ")][-1]
    code, contexts, modules = json.loads(line[len("PROBE ") :])
    assert code in (0, None), done.stderr
    [resource] = json.loads(done.stdout)
    assert resource["region"]["name"] == "loop" and resource["overview"]
    assert contexts == 0  # no TLS to set up for a plain-HTTP server
    top = {m.split(".")[0] for m in modules}
    assert not top & {"httpcore", "h11", "pydantic", "pydantic_core"}


def test_a_proxy_for_http_is_still_used(api: ApiServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # httpx honours http_proxy; the plain transport does not, so it steps aside.
    api.add("nodes", k8s.node("direct", labels={}))
    with ApiServer(tokens=[TOKEN]) as proxy:
        proxy.add("nodes", k8s.node("via-proxy", labels={}))
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", proxy.base)
        assert not plain.usable(api.base)
        with KubeClient(_connect(api.base), policy=FAST, sleep=lambda _: None) as client:
            names = [n["metadata"]["name"] for n in client.list("/api/v1/nodes")]
    assert names == ["via-proxy"]


def test_https_never_goes_the_plain_way(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "REQUEST_METHOD"):
        monkeypatch.delenv(name, raising=False)
    assert plain.usable("http://127.0.0.1:8001")
    assert not plain.usable("https://127.0.0.1:6443")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    assert not plain.usable("http://127.0.0.1:8001")
    monkeypatch.delenv("HTTP_PROXY")
    monkeypatch.setenv("all_proxy", "socks5://127.0.0.1:1080")
    assert not plain.usable("http://127.0.0.1:8001")


def test_pages_and_verbs_over_one_kept_connection(api: ApiServer) -> None:
    api.add_many("nodes", [k8s.node(f"n{i:02d}", labels={}) for i in range(7)])
    with KubeClient(_connect(api.base), policy=FAST, sleep=lambda _: None) as client:
        names = [n["metadata"]["name"] for n in client.list("/api/v1/nodes", limit=3)]
        assert names == [f"n{i:02d}" for i in range(7)]
        created = client.create("/api/v1/namespaces/default/pods", k8s.simple_pod("p", None))
        assert created["metadata"]["name"] == "p"
        assert client.delete("/api/v1/namespaces/default/pods/p") is not None
        assert client.delete("/api/v1/namespaces/default/pods/p") is None  # 404: gone
        transport = client.http.transport
        assert isinstance(transport, plain.PlainTransport)
    assert [s.path for s in api.requests("GET")] == ["/api/v1/nodes"] * 3


def _one_answer(answer: bytes) -> tuple[socket.socket, threading.Thread]:
    """A server that answers each connection's request with `answer`, then hangs up."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return listener, thread


@pytest.mark.parametrize(
    "answer",
    [
        b'HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n{"kind":"NodeList"',  # cut short
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"kind":',
        b"NOT HTTP AT ALL\r\n\r\n",
        b"",  # hung up without a word
    ],
)
def test_a_broken_answer_is_said_as_httpx_says_it(
    answer: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    listener, thread = _one_answer(answer)
    server = f"http://127.0.0.1:{listener.getsockname()[1]}"
    said = []
    try:
        for way in ("plain", "httpx"):
            if way == "httpx":
                monkeypatch.setattr(plain, "usable", lambda server: False)
            with (
                KubeClient(_connect(server), policy=FAST, sleep=lambda _: None) as client,
                pytest.raises(ProviderUnreachableError) as err,
            ):
                client.get("/api/v1/nodes")
            assert isinstance(client.http.transport, plain.PlainTransport) == (way == "plain")
            said.append(str(err.value))
    finally:
        listener.close()
        thread.join(5)
    # the same error, in the same words but for how a protocol error quotes the bytes
    plain_said, httpx_said = (re.sub(r"Error: [^;]*? after", "Error: _ after", m) for m in said)
    assert plain_said == httpx_said
    assert "2 times" in said[0] or "after 2 attempts" in said[0]
    assert TOKEN not in said[0]


def test_a_header_value_with_a_line_break_is_not_sent(api: ApiServer) -> None:
    conn = Connection(server=api.base, context="c", cluster="c", token="a\r\nX-Evil: 1")
    with (
        KubeClient(conn, policy=FAST, sleep=lambda _: None) as client,
        pytest.raises(ProviderUnreachableError, match="could not be sent as given"),
    ):
        client.get("/api/v1/nodes")
    assert not api.requests()


def test_kubeconfig_errors_still_name_the_field(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text("users: [{name: u, user: {exec: {command: x, args: [1]}}}]\n")
    with pytest.raises(ConfigError) as err:
        load_connection({"KUBECONFIG": str(path)}, None)
    assert str(err.value) == (
        f"{path}: users[0].user.exec.args[0] must be a string, got an integer (the value is "
        "not shown: it may be a credential)"
    )
