"""KubeClient against the local API server: paging, Status mapping, retries, credential
refresh, and TLS with a CA and client certificates. Only 127.0.0.1 is contacted."""

from __future__ import annotations

import base64
import json
import os
import socket
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.http.client import Request
from providers.core.http.policy import RetryPolicy
from providers.kubernetes.client import ExpiredError, KubeClient, ListExpiredError, _Prefetcher
from providers.kubernetes.connection import Connection, ExecSpec
from providers.kubernetes.exec_plugin import forget_exec_credentials
from providers.kubernetes.lists import Pod, pod_page
from tests.providers.kubernetes.apiserver import ApiServer, node, pod, status_body
from tests.providers.kubernetes.certs import OPENSSL_MISSING, Certs, have_openssl, make_certs

TOKEN = "tok-0123456789abcdef"
POLICY = RetryPolicy(attempts=3, backoff_seconds=0.5, max_delay_seconds=4.0)
PODS = "/api/v1/namespaces/default/pods"


def connect(server: ApiServer, **fields: Any) -> Connection:
    base: dict[str, Any] = {
        "server": server.base,
        "context": "test",
        "cluster": "test",
        "user": "tester",
        "token": TOKEN,
        "source": "/tmp/kubeconfig",
    }
    base.update(fields)
    return Connection(**base)


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer(tokens=[TOKEN]) as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(api: ApiServer, sleeps: list[float]) -> Iterator[KubeClient]:
    with KubeClient(connect(api), policy=POLICY, sleep=sleeps.append) as kube:
        yield kube


# -- verbs and paging ------------------------------------------------------------------------


def test_list_pages_with_limit_and_continue(api: ApiServer, client: KubeClient) -> None:
    api.add_many("pods", (pod(f"p{i:04d}", node_name=f"n{i % 3}") for i in range(1234)))
    names = [p["metadata"]["name"] for p in client.list(PODS, limit=500)]
    assert names == [f"p{i:04d}" for i in range(1234)]
    pages = api.requests("GET", PODS)
    assert len(pages) == 3
    assert [r.query.get("limit") for r in pages] == [["500"]] * 3
    assert "continue" not in pages[0].query and "continue" in pages[2].query
    assert client.last_resource_version.isdigit()
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in pages)


def test_prefetch_reads_the_same_pages_in_the_same_order(
    api: ApiServer, client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.add_many("pods", (pod(f"p{i:04d}", node_name=f"n{i % 3}") for i in range(1234)))
    api.link_rate = 2e6  # a slow link: fetching is mostly waiting, so pages come ahead
    fetch, threads = client._fetch, []

    def recorded(request: Request) -> Any:
        threads.append(threading.current_thread().name)
        return fetch(request)

    monkeypatch.setattr(client, "_fetch", recorded)
    names = [p["metadata"]["name"] for p in client.list(PODS, limit=500, prefetch=True)]
    assert names == [f"p{i:04d}" for i in range(1234)]
    pages = api.requests("GET", PODS)
    assert [r.query.get("continue") is None for r in pages] == [True, False, False]
    assert len({r.query["continue"][0] for r in pages[1:]}) == 2
    # the first in turn (its time includes the client's set-up), then at least one ahead
    assert threads[0] == "MainThread" and threads[-1] == "shoal-page"


def test_a_page_reader_reads_its_pages_and_leaves_the_others(
    api: ApiServer, client: KubeClient
) -> None:
    api.add_many("pods", (pod(f"p{i}", node_name="n1") for i in range(3)))
    read = list(client.list(PODS, limit=2, page=pod_page, prefetch=True))
    assert [type(p) for p in read] == [Pod] * 3
    # a pod the reader's types do not fit: that page comes as the JSON objects
    odd = b'{"kind":"PodList","metadata":{},"items":[{"metadata":{"ownerReferences":[7]}}]}'
    api.fault("reply", status=200, body=odd)
    assert list(client.list(PODS, page=pod_page)) == [{"metadata": {"ownerReferences": [7]}}]
    # not UTF-8 in a field the reader would skip: the standard reading's error
    api.fault("reply", status=200, body=b'{"items":[{"x":"\xff"}]}')
    with pytest.raises(ShoalError, match="answered malformed JSON"):
        list(client.list(PODS, page=pod_page))


class _Answer:
    """What the prefetcher needs of an answer: its body, which `release` lets go."""

    def __init__(self, content: bytes) -> None:
        self.content = self._content = content


class _Clocks:
    """Wall and CPU clocks that a fake fetch advances: `waiting` of each fetch's time is
    spent waiting (for the server, the link), the rest working."""

    def __init__(self, waiting: float) -> None:
        self.wall = self.cpu = 0.0
        self.waiting = waiting

    def fetched(self, seconds: float = 0.01) -> None:
        self.wall += seconds
        self.cpu += seconds * (1 - self.waiting)

    def pair(self) -> tuple[Any, Any]:
        return (lambda: self.wall), (lambda: self.cpu)


def _pages(clocks: _Clocks, after: dict[str, str], fail: str = "") -> tuple[Any, list[Any]]:
    """A prefetcher over fake pages named by their targets; what it fetched, and where."""
    asked: list[Any] = []
    failure = ExpiredError(f"410 for page {fail}")

    def fetch(request: Request) -> Any:
        asked.append((request.target, threading.current_thread() is threading.main_thread()))
        clocks.fetched()
        if request.target == fail:
            raise failure
        return _Answer(request.target.encode())

    def guess(body: bytes, request: Request) -> Request | None:
        following = after.get(body.decode())
        return Request(following) if following else None

    return _Prefetcher(fetch, guess, clocks.pair()), asked


def test_prefetcher_fetches_ahead_while_fetching_is_mostly_waiting() -> None:
    fetcher, asked = _pages(_Clocks(waiting=0.9), {"1": "2", "2": "wrong", "3": "bad"}, "bad")
    assert fetcher.get(Request("1")).content == b"1"  # in turn; "2" fetched ahead
    assert fetcher.get(Request("2")).content == b"2"  # the one fetched ahead
    assert fetcher.get(Request("3")).content == b"3"  # not the guess: fetched as asked
    with pytest.raises(ExpiredError, match="410 for page bad"):  # the guessed fetch's error
        fetcher.get(Request("bad"))
    fetcher.close()
    assert asked == [("1", True), ("2", False), ("wrong", False), ("3", True), ("bad", False)]


def test_prefetcher_fetches_in_turn_while_fetching_is_work() -> None:
    fetcher, asked = _pages(_Clocks(waiting=0.5), {str(n): str(n + 1) for n in range(9)})
    for n in range(1, 5):
        fetcher.get(Request(str(n)))
    fetcher.close()
    assert asked == [(str(n), True) for n in range(1, 5)]


def test_prefetcher_times_the_link_again_every_probe_pages() -> None:
    fetcher, asked = _pages(_Clocks(waiting=0.9), {str(n): str(n + 1) for n in range(9)})
    fetcher.PROBE = 3
    for n in range(1, 8):
        assert fetcher.get(Request(str(n))).content == str(n).encode()
    fetcher.close()
    assert [n for n, in_turn in asked if in_turn] == ["1", "4", "7"]
    assert [n for n, _ in asked] == [str(n) for n in range(1, 9)]  # and 8, ahead, let go


def test_list_selectors_reach_the_server(api: ApiServer, client: KubeClient) -> None:
    api.add_many(
        "pods",
        [
            pod("a", node_name="n1", phase="Running", labels={"app": "x"}),
            pod("b", node_name="n1", phase="Succeeded", labels={"app": "x"}),
            pod("c", node_name="n2", phase="Pending", labels={"app": "y"}),
            pod("d", "other", node_name="n1", phase="Running"),
        ],
    )
    fields = {"fieldSelector": "spec.nodeName=n1,status.phase!=Succeeded,status.phase!=Failed"}
    assert [p["metadata"]["name"] for p in client.list("/api/v1/pods", fields, limit=1)] == [
        "a",
        "d",
    ]
    labels = {"labelSelector": "app in (x,y),app!=y"}
    assert [p["metadata"]["name"] for p in client.list(PODS, labels)] == ["a", "b"]
    with pytest.raises(UsageError, match=r"field label not supported: spec\.bogus"):
        list(client.list(PODS, {"fieldSelector": "spec.bogus=1"}))


def test_get_create_delete_round_trip(api: ApiServer, client: KubeClient) -> None:
    api.add("nodes", node("n1", labels={"pool": "gpu"}))
    assert client.get("/api/v1/nodes/n1")["metadata"]["labels"] == {"pool": "gpu"}
    created = client.create(PODS, pod("job-1", phase="Pending"))
    meta = created["metadata"]
    assert meta["uid"] and meta["resourceVersion"] and meta["creationTimestamp"]
    assert created["kind"] == "Pod" and meta["namespace"] == "default"
    assert client.get(f"{PODS}/job-1")["metadata"]["uid"] == meta["uid"]
    gone = client.delete(f"{PODS}/job-1", grace_seconds=5)
    assert gone is not None and gone["metadata"]["deletionGracePeriodSeconds"] == 5
    assert api.deletions == [("pods", "default", "job-1", 5)]
    assert json.loads(api.requests("DELETE")[0].body)["propagationPolicy"] == "Background"
    assert client.delete(f"{PODS}/job-1") is None  # already gone: harmless
    with pytest.raises(NotFoundError, match='pods "job-1" not found'):
        client.get(f"{PODS}/job-1")


def test_delete_job_answers_a_status(api: ApiServer, client: KubeClient) -> None:
    jobs = "/apis/batch/v1/namespaces/default/jobs"
    client.create(jobs, {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}})
    status = client.delete(f"{jobs}/j", grace_seconds=0)
    assert status is not None and status["kind"] == "Status" and status["status"] == "Success"
    assert [j for j in client.list("/apis/batch/v1/jobs")] == []


def test_graceful_pod_stays_terminating(sleeps: list[float]) -> None:
    with ApiServer(tokens=[TOKEN], graceful_pods=True) as api:
        api.add("pods", pod("p"))
        with KubeClient(connect(api), policy=POLICY, sleep=sleeps.append) as client:
            client.delete(f"{PODS}/p", grace_seconds=30)
            assert client.get(f"{PODS}/p")["metadata"]["deletionTimestamp"]
            api.finish_deletions()
            assert client.delete(f"{PODS}/p") is None


# -- Status mapping --------------------------------------------------------------------------


def test_409_already_exists_is_a_plain_shoal_error(client: KubeClient) -> None:
    client.create(PODS, pod("dup"))
    with pytest.raises(ShoalError) as err:
        client.create(PODS, pod("dup"))
    assert type(err.value) is ShoalError
    assert "409 AlreadyExists" in str(err.value) and 'pods "dup" already exists' in str(err.value)


def test_422_invalid_is_a_usage_error_with_the_message(client: KubeClient) -> None:
    with pytest.raises(UsageError, match=r"422 Invalid: Pod \"Bad_Name\" is invalid: metadata"):
        client.create(PODS, pod("Bad_Name"))
    with pytest.raises(UsageError, match=r"spec\.containers: Required value"):
        client.create(PODS, {"metadata": {"name": "empty"}, "spec": {}})


def test_401_bad_token_never_shows_the_token(api: ApiServer) -> None:
    bad = "bad-token-abcdefgh"
    with (
        KubeClient(connect(api, token=bad), policy=POLICY) as client,
        pytest.raises(CredentialsError) as err,
    ):
        client.get("/api/v1/nodes")
    message = str(err.value)
    assert "token expired or invalid; refresh your kubeconfig credentials" in message
    assert "/tmp/kubeconfig" in message and bad not in message and TOKEN not in message


def test_403_forbidden_namespace_carries_the_api_message(
    api: ApiServer, client: KubeClient
) -> None:
    api.forbidden_namespaces.add("secret")
    with pytest.raises(CredentialsError) as err:
        list(client.list("/api/v1/namespaces/secret/pods"))
    assert 'cannot list resource "pods"' in str(err.value)
    assert 'in the namespace "secret"' in str(err.value)


def test_unknown_path_is_not_found(client: KubeClient) -> None:
    with pytest.raises(NotFoundError, match="could not find the requested resource"):
        client.get("/apis/example.com/v1/widgets")


def test_status_messages_are_scrubbed() -> None:
    from providers.core.http import httpx

    def answer(request: httpx.Request) -> httpx.Response:
        body = {"kind": "Status", "code": 403, "reason": "Forbidden", "message": f"no {TOKEN}"}
        return httpx.Response(403, json=body)

    conn = Connection(server="https://k8s.invalid", context="c", cluster="c", token=TOKEN)
    with (
        KubeClient(conn, transport=httpx.MockTransport(answer)) as client,
        pytest.raises(CredentialsError) as err,
    ):
        client.get("/api/v1/nodes")
    assert TOKEN not in str(err.value) and "no ***" in str(err.value)


# -- retries (Retry-After and backoff: tests/providers/test_http.py) --------------------------


def test_persistent_503_is_unreachable_and_429_retryable(
    api: ApiServer, client: KubeClient
) -> None:
    api.fault("status", status=503, times=3)
    with pytest.raises(ProviderUnreachableError, match="after 3 attempts"):
        client.get("/api/v1/nodes")
    api.fault("status", status=429, times=3)
    with pytest.raises(RetryableError, match="throttled after 3 attempts"):
        client.get("/api/v1/nodes")


def test_dropped_connection_is_retried_for_reads_not_creates(
    api: ApiServer, client: KubeClient
) -> None:
    api.add("nodes", node("n1"))
    api.fault("drop", path="/api/v1/nodes/n1")
    assert client.get("/api/v1/nodes/n1")["metadata"]["name"] == "n1"
    api.fault("drop", method="POST")
    with pytest.raises(ProviderUnreachableError, match="cannot reach the API server"):
        client.create(PODS, pod("once"))
    assert len(api.requests("POST")) == 1  # not sent twice: it might have been created


def test_create_is_retried_on_429(api: ApiServer, client: KubeClient) -> None:
    api.fault("status", status=429, method="POST")
    assert client.create(PODS, pod("p"))["metadata"]["name"] == "p"
    api.fault("status", status=503, method="POST")
    with pytest.raises(ProviderUnreachableError):
        client.create(PODS, pod("q"))


def test_connection_refused_names_the_server(sleeps: list[float]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    conn = Connection(
        server=f"http://127.0.0.1:{port}", context="c", cluster="c", token=TOKEN, source="kc"
    )
    with (
        KubeClient(conn, policy=POLICY, sleep=sleeps.append) as client,
        pytest.raises(ProviderUnreachableError) as err,
    ):
        client.get("/api/v1/nodes")
    assert f"127.0.0.1:{port}" in str(err.value) and "after 3 attempts" in str(err.value)
    assert TOKEN not in str(err.value)
    assert len(sleeps) == 2


def test_expired_continue_token(api: ApiServer, client: KubeClient) -> None:
    api.add_many("nodes", (node(f"n{i}") for i in range(5)))
    api.fault("expire")
    with pytest.raises(ListExpiredError, match="410 Expired"):
        list(client.list("/api/v1/nodes", limit=2))
    api.fault("expire")
    assert client.collect("/api/v1/nodes", lambda items: sum(1 for _ in items), limit=2) == 5
    api.fault("expire", times=2)
    with pytest.raises(RetryableError):
        client.collect("/api/v1/nodes", lambda items: sum(1 for _ in items), limit=2)


# -- credential refresh ----------------------------------------------------------------------


def test_401_rereads_the_token_file(api: ApiServer, tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("old-token-0000")
    conn = connect(api, token="old-token-0000", token_file=token_file)
    token_file.write_text(TOKEN + "\n")  # rotated after the kubeconfig was read
    with KubeClient(conn, policy=POLICY) as client:
        assert client.list("/api/v1/nodes") is not None
        assert list(client.list("/api/v1/nodes")) == []
    assert [r.headers["authorization"] for r in api.requests("GET")] == [
        "Bearer old-token-0000",
        f"Bearer {TOKEN}",
    ]


PLUGIN = """\
#!{python}
import json
from pathlib import Path
calls = Path(__file__).with_name("calls")
n = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(n))
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": "exec-" + str(n) + "-abcdef"}}}}))
"""


def test_401_reruns_the_exec_plugin_once(tmp_path: Path) -> None:
    script = tmp_path / "plugin.py"
    script.write_text(PLUGIN.format(python=sys.executable))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    forget_exec_credentials()
    spec = ExecSpec(command=str(script), api_version="client.authentication.k8s.io/v1")
    with ApiServer(tokens=["exec-2-abcdef"]) as api:
        conn = connect(api, token="", exec_plugin=spec)
        with KubeClient(conn, policy=POLICY) as client:
            assert list(client.list("/api/v1/nodes")) == []
            assert (tmp_path / "calls").read_text() == "2"
            api.tokens = {"exec-9-abcdef"}  # the plugin's next token (3) is refused too
            with pytest.raises(CredentialsError) as err:
                client.get("/api/v1/nodes")
    assert (tmp_path / "calls").read_text() == "3"  # re-run once, not in a loop
    assert "exec-" not in str(err.value)
    forget_exec_credentials()


# -- TLS -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    if not have_openssl():
        pytest.skip(OPENSSL_MISSING)
    return make_certs(tmp_path_factory.mktemp("pki"))


def test_tls_with_ca_file_and_ca_data(certs: Certs) -> None:
    with ApiServer(certs=certs, tokens=[TOKEN]) as api:
        api.add("nodes", node("n1"))
        for conn in (
            connect(api, ca_file=certs.ca),
            connect(api, ca_data=certs.ca.read_bytes()),
        ):
            with KubeClient(conn, policy=POLICY) as client:
                assert client.get("/api/v1/nodes/n1")["metadata"]["name"] == "n1"


def test_wrong_ca_is_a_clear_tls_error(certs: Certs, sleeps: list[float]) -> None:
    with ApiServer(certs=certs, tokens=[TOKEN]) as api:
        conn = connect(api, ca_file=certs.wrong_ca)
        with (
            KubeClient(conn, policy=POLICY, sleep=sleeps.append) as client,
            pytest.raises(ProviderUnreachableError) as err,
        ):
            client.get("/api/v1/nodes")
        insecure = connect(api, ca_file=certs.wrong_ca, insecure_skip_tls_verify=True)
        with KubeClient(insecure, policy=POLICY) as client:
            assert list(client.list("/api/v1/nodes")) == []
    message = str(err.value)
    assert "TLS verification" in message and "certificate-authority" in message
    assert api.base.removeprefix("https://") in message and TOKEN not in message
    assert sleeps == []  # not retried: it cannot get better


def test_tls_server_name(certs: Certs) -> None:
    with ApiServer(certs=certs, tokens=[TOKEN]) as api:
        good = connect(api, ca_file=certs.ca, tls_server_name="localhost")
        with KubeClient(good, policy=POLICY) as client:
            assert list(client.list("/api/v1/nodes")) == []
        bad = connect(api, ca_file=certs.ca, tls_server_name="api.wrong.example")
        with (
            KubeClient(bad, policy=POLICY) as client,
            pytest.raises(ProviderUnreachableError, match="tls-server-name"),
        ):
            client.get("/api/v1/nodes")


def test_client_certificate_files_and_data(
    certs: Certs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with ApiServer(certs=certs, client_certs="required") as api:
        api.add("nodes", node("n1"))
        from_files = connect(
            api,
            token="",
            ca_file=certs.ca,
            client_cert_file=certs.client_cert,
            client_key_file=certs.client_key,
        )
        from_data = replace(
            from_files,
            client_cert_file=None,
            client_key_file=None,
            client_cert_data=certs.client_cert.read_bytes(),
            client_key_data=certs.client_key.read_bytes(),
        )
        for conn in (from_files, from_data):
            with KubeClient(conn, policy=POLICY) as client:
                assert client.get("/api/v1/nodes/n1")["metadata"]["name"] == "n1"
        assert api.requests("GET")[0].headers.get("authorization") is None
    assert os.listdir(scratch) == []  # the key's temporary copy is gone


def test_missing_client_certificate_is_a_credentials_error(certs: Certs) -> None:
    with ApiServer(certs=certs, client_certs="required") as api:
        conn = connect(api, token="", ca_file=certs.ca)
        with (
            KubeClient(conn, policy=POLICY, sleep=lambda s: None) as client,
            pytest.raises(CredentialsError) as err,
        ):
            client.get("/api/v1/nodes")
    assert "requires a client cert; set a valid client-certificate" in str(err.value)


def test_optional_client_cert_or_token(certs: Certs) -> None:
    with ApiServer(certs=certs, client_certs="optional", tokens=[TOKEN]) as api:
        with KubeClient(connect(api, ca_file=certs.ca), policy=POLICY) as client:
            assert list(client.list("/api/v1/nodes")) == []
        anonymous = connect(api, ca_file=certs.ca, token="")
        with (
            KubeClient(anonymous, policy=POLICY) as client,
            pytest.raises(CredentialsError, match="401"),
        ):
            client.get("/api/v1/nodes")


def test_bad_ca_and_mismatched_key_are_config_errors(certs: Certs, tmp_path: Path) -> None:
    with ApiServer(certs=certs) as api:
        garbage = connect(api, ca_data=b"not a pem")
        with (
            KubeClient(garbage, policy=POLICY) as client,
            pytest.raises(ConfigError, match="certificate-authority-data"),
        ):
            client.get("/api/v1/nodes")
        mismatched = connect(
            api,
            ca_file=certs.ca,
            client_cert_data=certs.client_cert.read_bytes(),
            client_key_data=certs.server_key.read_bytes(),
        )
        with (
            KubeClient(mismatched, policy=POLICY) as client,
            pytest.raises(ConfigError, match="not a matching PEM certificate and key"),
        ):
            client.get("/api/v1/nodes")


def test_basic_auth_header() -> None:
    from providers.core.http import httpx

    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json={"kind": "NodeList", "items": []})

    conn = Connection(
        server="https://k8s.invalid", context="c", cluster="c", username="u", password="pw-1234"
    )
    with KubeClient(conn, transport=httpx.MockTransport(answer)) as client:
        assert list(client.list("/api/v1/nodes")) == []
    assert seen == ["Basic " + base64.b64encode(b"u:pw-1234").decode()]


# -- hostile servers ---------------------------------------------------------------------------


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_status_reason_and_reason_phrase_echoing_the_token_are_scrubbed(api: ApiServer) -> None:
    from urllib.parse import quote

    said = f"no {b64(TOKEN)} {quote(TOKEN)} {TOKEN.upper()}"
    api.fault("reply", status=403, body=status_body(403, TOKEN, said), reason=f"x {TOKEN}")
    with (
        KubeClient(connect(api), policy=POLICY) as client,
        pytest.raises(CredentialsError) as err,
    ):
        client.get("/api/v1/nodes")
    message = str(err.value)
    assert message.startswith("kubernetes: GET /api/v1/nodes: HTTP 403 ***: no ***")
    assert TOKEN.lower() not in message.lower() and b64(TOKEN) not in message


def test_basic_auth_echoed_as_base64_is_scrubbed() -> None:
    from providers.core.http import httpx

    def answer(request: httpx.Request) -> httpx.Response:
        said = f"who is {request.headers['authorization']}?"
        return httpx.Response(403, json={"kind": "Status", "reason": "Forbidden", "message": said})

    conn = Connection(
        server="https://k8s.invalid", context="c", cluster="c", username="u", password="pw-1234"
    )
    with (
        KubeClient(conn, transport=httpx.MockTransport(answer)) as client,
        pytest.raises(CredentialsError) as err,
    ):
        client.get("/api/v1/nodes")
    assert b64("u:pw-1234") not in str(err.value) and "who is Basic ***?" in str(err.value)


def test_a_redirect_is_reported_scrubbed_and_not_followed(api: ApiServer) -> None:
    api.fault("reply", status=307, headers={"Location": f"{api.base}/{TOKEN}/api"})
    with (
        KubeClient(connect(api), policy=POLICY) as client,
        pytest.raises(ShoalError, match=r"redirects to http://127\.0\.0\.1:\d+/\*\*\*/api, which"),
    ):
        client.get("/api/v1/nodes")
    assert len(api.requests()) == 1


def test_a_redirect_to_a_malformed_location_is_reported_not_retried(api: ApiServer) -> None:
    api.fault("reply", status=302, headers={"Location": f"http://127.0.0.1:{TOKEN}/api"})
    with (
        KubeClient(connect(api), policy=POLICY) as client,
        pytest.raises(ShoalError) as err,
    ):
        client.get("/api/v1/nodes")
    assert "redirects to an unusable Location (its port is not a number)" in str(err.value)
    assert TOKEN not in str(err.value) and len(api.requests()) == 1
