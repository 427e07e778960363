"""Servers that misbehave on purpose, and URLs that are malformed on purpose.

Every string a server controls (reason phrase, body, Location, Kubernetes Status fields, a
protocol error quoting its bytes) must reach no message with a credential the request
carried, in any form: as sent, in another letter case, percent-encoded, base64 (basic auth).
A malformed URL, from the command line, a kubeconfig or a redirect, is a typed one-line
error with the exit code the README's table gives, never the "unexpected" catch-all.

Through the CLI wherever one exists (`image pull`, `pricing -p gcp`, `resources -p
kubernetes`), with SHOAL_DEBUG unset so that an unexpected exception would show as the
user-visible "unexpected ..." line these tests assert is absent. Loopback servers only:
tests/drivers/image/server.py, tests/providers/apiserver.py, tests/providers/kubernetes/.
"""

from __future__ import annotations

import base64
import itertools
import json
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from providers.core.errors import scrub
from providers.core.urls import UrlError, display, origin, parse, resolve
from tests.conftest import Run
from tests.drivers.image import archives as A
from tests.drivers.image.server import ImageServer
from tests.providers.apiserver import ApiServer as CloudServer
from tests.providers.apiserver import Reply
from tests.providers.gcp import payloads as gcp
from tests.providers.kubernetes.apiserver import ApiServer as KubeServer
from tests.providers.kubernetes.apiserver import status_body

Cli = Callable[..., Run]
NO_DEBUG = {"SHOAL_DEBUG": ""}  # unexpected exceptions become the one-line "unexpected" error
USER = "ci"
# '+' and '=' make its percent-encoded form differ from it; no '/', so it fits in a port.
PASSWORD = "Pw-q7Zx+NEVER~PRINT=9k2"
TOKEN = "tok-Hq2+Vr9=NEVER~SHOWN-41"
API_KEY = "AIzaSy-k3y+NEVER=SHOWN~77"
FAST_IMAGE = "[image]\nattempts = 2\nbackoff_seconds = 0.01\nread_timeout_seconds = 5\n"


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def forms(secret: str, user: str = USER) -> list[str]:
    """What a server could echo of `secret`: the forms these tests look for in output."""
    return [
        secret,
        quote(secret, safe=""),
        quote_plus(secret),
        b64(secret).rstrip("="),
        b64(f"{user}:{secret}").rstrip("="),
        base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
    ]


def assert_clean(text: str, secret: str, user: str = USER) -> None:
    for form in forms(secret, user):
        assert form not in text, f"{form!r} leaked: {text!r}"
    assert secret.lower() not in text.lower(), f"{secret!r} leaked in another case: {text!r}"


def one_error(run: Run, code: int, *secrets: str) -> str:
    """The run failed with `code`, one `shoal: error:` line, nothing unexpected, no secret."""
    assert run.exit_code == code, run.stderr
    assert "unexpected" not in run.stderr, run.stderr
    assert run.stderr.startswith("shoal: error: ") and run.stderr.count("\n") == 1, run.stderr
    for secret in secrets:
        assert_clean(run.stdout + run.stderr, secret)
    return run.stderr


# -- the shared scrub and URL check ------------------------------------------------------------


@pytest.mark.parametrize(
    "echoed",
    [
        PASSWORD,
        PASSWORD.upper(),
        PASSWORD.lower(),
        quote(PASSWORD, safe=""),
        quote(PASSWORD, safe="").lower(),
        quote_plus(PASSWORD),
        quote(quote(PASSWORD, safe=""), safe=""),  # encoded twice
        "Pw-q7Zx%2BNEVER~PRINT=9k2",  # encoded in part
        json.dumps(PASSWORD, ensure_ascii=True).replace("P", "\\u0050"),
        b64(PASSWORD),
        b64(f"{USER}:{PASSWORD}"),  # a basic-auth header echoed back
        b64(f"x{PASSWORD}yz"),  # the secret at each byte offset inside base64
        b64(f"xy{PASSWORD}z"),
        base64.urlsafe_b64encode(f"{USER}:{PASSWORD}".encode()).decode(),
    ],
)
def test_scrub_removes_every_form_a_server_could_echo(echoed: str) -> None:
    text = scrub(f"HTTP 400 {echoed} (server said)", [PASSWORD])
    assert text.startswith("HTTP 400 ") and text.endswith(" (server said)")
    assert "***" in text
    assert_clean(text, PASSWORD)


def test_scrub_leaves_text_without_secrets_alone() -> None:
    text = "gcp: http://127.0.0.1:8080/v1/skus: HTTP 403 (permission denied)"
    assert scrub(text, [PASSWORD, TOKEN, ""]) == text
    assert scrub(text, []) == text


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://127.0.0.1:99999/x", "its port 99999 is out of range 1-65535"),
        ("http://127.0.0.1:0/x", "its port 0 is out of range"),
        ("http://[::1/x", "its host has a '[' without its ']'"),
        ("http://[zz::1]/x", "not a valid IPv6 address"),
        ("http://host:port/", "its port is not a number"),
        (f"http://127.0.0.1:{PASSWORD}/x", "its port is not a number"),
        ("http://127.0.0.1:+80/x", "its port is not a number"),
        ("ftp://127.0.0.1/x", "its scheme 'ftp' is not http or https"),
        ("127.0.0.1/x.tar", "it has no scheme"),
        ("http:///x", "it has no host"),
        ("http://:80/x", "it has no host"),
        ("http:x", "it has no host"),
        ("http://127.0.0.1/a\x00b", "a space or a control character"),
        ("http://127.0.0.1/a b", "a space or a control character"),
        ("http://127.0.0.1/a\nb", "a space or a control character"),
        ("http://exa mple/", "a space or a control character"),
        (f"http://{USER}:{PASSWORD}@127.0.0.1/x", "user name or password"),
    ],
)
def test_parse_names_what_is_wrong_without_quoting_the_url(url: str, reason: str) -> None:
    with pytest.raises(UrlError) as caught:
        parse(url)
    assert reason in str(caught.value)
    assert PASSWORD not in str(caught.value) and "host" + ":port" not in str(caught.value)
    # Showing or comparing the same URL never raises (the old ValueError of urllib).
    assert "\x00" not in display(url) and "\n" not in display(url)
    assert "@" not in display(url)  # user info is never shown
    origin(url)


def test_a_location_may_not_bring_user_info_or_control_characters() -> None:
    base = "http://127.0.0.1:8080/a/b.tar"
    assert resolve(base, "/c.tar").text == "http://127.0.0.1:8080/c.tar"
    assert resolve(base, "c d.tar").text == "http://127.0.0.1:8080/a/c d.tar"  # httpx encodes it
    for location in (f"//{USER}:{PASSWORD}@127.0.0.1/x", "/x\r\nSet-Cookie: a", "/x\x1b[2J"):
        with pytest.raises(UrlError):
            resolve(base, location)
    # User info the base URL had is kept by a relative Location (same host, same credentials).
    assert resolve("http://u:p@127.0.0.1/a", "/b").userinfo == "u:p"


def test_display_drops_user_info_query_and_control_characters() -> None:
    assert display(f"https://{USER}:{PASSWORD}@h.example:8443/a/b.tar?sig={TOKEN}#f") == (
        "https://h.example:8443/a/b.tar"
    )
    assert display("http://[::1]:8080/x") == "http://[::1]:8080/x"
    assert display("http://127.0.0.1/a\x1b[2Jb") == "http://127.0.0.1/a%1B[2Jb"


# -- image pull --------------------------------------------------------------------------------


@pytest.fixture
def image_server() -> Iterator[ImageServer]:
    server = ImageServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pull(
    cli: Cli, tmp_path: Path, write_config: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Run]:
    """`shoal image pull URL` with SHOAL_IMAGE_USER/PASSWORD set, SHOAL_DEBUG unset."""
    fake_home = tmp_path / "user-home"  # no ~/.netrc from the machine running the tests
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    write_config(FAST_IMAGE)

    def run(url: str, *args: str) -> Run:
        env = {**NO_DEBUG, "SHOAL_IMAGE_USER": USER, "SHOAL_IMAGE_PASSWORD": PASSWORD}
        return cli("image", "pull", url, "--out", str(tmp_path / "images"), *args, env=env)

    return run


@pytest.mark.parametrize(
    "reason",
    [PASSWORD, quote(PASSWORD, safe=""), b64(f"{USER}:{PASSWORD}"), f"bad {PASSWORD.lower()}"],
    ids=["as-sent", "percent-encoded", "basic-auth-base64", "lowercased"],
)
def test_image_pull_reason_phrase_echoing_the_password(
    image_server: ImageServer, pull: Callable[..., Run], reason: str
) -> None:
    url = image_server.add("/img-1.tar", A.simple())
    image_server.fault("/img-1.tar", "status", status=400, reason=reason)
    stderr = one_error(pull(url), 1, PASSWORD)
    assert "HTTP 400" in stderr


@pytest.mark.parametrize(
    ("location", "said"),
    [
        (f"http://{USER}:{PASSWORD}@127.0.0.1:{PASSWORD}/img-1.tar", "user name or password"),
        (f"http://127.0.0.1:{PASSWORD}/img-1.tar", "its port is not a number"),
        (f"http://127.0.0.1:{quote(PASSWORD, safe='')}/img-1.tar", "its port is not a number"),
        ("http://127.0.0.1:99999/img-1.tar", "its port 99999 is out of range 1-65535"),
        ("http://[::1/img-1.tar", "'[' without its ']'"),
        ("http://host:port/img-1.tar", "its port is not a number"),
        ("ftp://127.0.0.1/img-1.tar", "its scheme 'ftp' is not http or https"),
        ("http:///img-1.tar", "it has no host"),
    ],
)
def test_image_pull_redirect_to_an_unusable_location(
    image_server: ImageServer, pull: Callable[..., Run], location: str, said: str
) -> None:
    url = image_server.redirect("/img-1.tar", location)
    stderr = one_error(pull(url), 1, PASSWORD)
    assert "HTTP 302 redirect refused" in stderr and said in stderr
    assert [r.path for r in image_server.requests] == ["/img-1.tar"]  # nothing followed


def test_image_pull_location_path_echoing_the_password(
    image_server: ImageServer, pull: Callable[..., Run]
) -> None:
    url = image_server.redirect("/img-1.tar", f"/{quote(PASSWORD, safe='')}/{PASSWORD}/img-1.tar")
    stderr = one_error(pull(url), 1, PASSWORD)
    assert "HTTP 404" in stderr and "/***/***/img-1.tar" in stderr


def test_image_pull_protocol_error_quoting_the_password(
    image_server: ImageServer, pull: Callable[..., Run]
) -> None:
    image_server.add("/img-1.tar", b"never served")
    answer = f"HTTP/1.1 2x0 {b64(f'{USER}:{PASSWORD}')} {PASSWORD}\r\n\r\n".encode()
    image_server.fault("/img-1.tar", "raw", body=answer, times=None)
    stderr = one_error(pull(image_server.url("/img-1.tar")), 69, PASSWORD)
    assert "RemoteProtocolError" in stderr and "after 2 attempts" in stderr


def test_image_pull_password_from_stdin_is_scrubbed_too(
    image_server: ImageServer, cli: Cli, tmp_path: Path, write_config: Callable[[str], Path]
) -> None:
    write_config(FAST_IMAGE)
    url = image_server.add("/img-1.tar", A.simple())
    image_server.fault("/img-1.tar", "status", status=418, reason=b64(f"{USER}:{PASSWORD}"))
    run = cli(
        "image", "pull", url, "--out", str(tmp_path / "images"), "--user", USER,
        "--password-stdin", input=PASSWORD + "\n", env={**NO_DEBUG, "HOME": str(tmp_path)},
    )  # fmt: skip
    one_error(run, 1, PASSWORD)


# -- pricing -p gcp (API key in the query string) -------------------------------------------


@pytest.fixture
def cloud() -> Iterator[CloudServer]:
    with CloudServer() as server:
        yield server


def gcp_pricing(cli: Cli, server: CloudServer, **env: str) -> Run:
    base = {
        **NO_DEBUG,
        "SHOAL_GCP_BILLING_URL": server.base,
        "SHOAL_GCP_COMPUTE_URL": server.base,
        "SHOAL_GCP_API_KEY": API_KEY,
        "SHOAL_GCP_TOKEN": "",
    }
    return cli("pricing", "-p", "gcp", "-r", "us-central1", "--refresh", env={**base, **env})


def test_pricing_json_error_body_echoing_the_api_key(cli: Cli, cloud: CloudServer) -> None:
    message = (
        f"API key not valid: {API_KEY.upper()} {quote(API_KEY, safe='')} "
        f"{quote_plus(API_KEY)} {b64(API_KEY)} {json.dumps(API_KEY)[1:-1]}"
    )
    body = {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
    cloud.route(gcp.SKUS_PATH, lambda q, h: Reply.json(body, 400, {}))
    stderr = one_error(gcp_pricing(cli, cloud), 77, API_KEY)
    assert "SHOAL_GCP_API_KEY" in stderr and "API key not valid" in stderr
    assert cloud.requests_to(gcp.SKUS_PATH)[0].query["key"] == [API_KEY]  # it was sent


def test_pricing_reason_phrase_and_redirect_port_echoing_the_api_key(
    cli: Cli, cloud: CloudServer
) -> None:
    location = f"http://u:{API_KEY}@127.0.0.1:{API_KEY}/skus?key={API_KEY}"
    cloud.route(gcp.SKUS_PATH, lambda q, h: Reply(302, b"", {"Location": location}, reason=API_KEY))
    stderr = one_error(gcp_pricing(cli, cloud), 1, API_KEY)
    assert "HTTP 302 redirect refused" in stderr


@pytest.mark.parametrize(
    ("location", "said"),
    [
        (f"http://127.0.0.1:{API_KEY}/skus", "its port is not a number"),
        ("http://127.0.0.1:99999/skus", "its port 99999 is out of range 1-65535"),
        ("http://[::1/skus", "'[' without its ']'"),
        ("ftp://127.0.0.1/skus", "its scheme 'ftp' is not http or https"),
    ],
)
def test_pricing_redirect_to_an_unusable_location(
    cli: Cli, cloud: CloudServer, location: str, said: str
) -> None:
    cloud.route(gcp.SKUS_PATH, lambda q, h: Reply(302, b"", {"Location": location}))
    stderr = one_error(gcp_pricing(cli, cloud), 1, API_KEY)
    assert said in stderr


def redirect_to(location: str) -> Callable[[dict[str, list[str]], dict[str, str]], Reply]:
    return lambda query, headers: Reply(302, b"", {"Location": location})


def test_pricing_redirect_loop_through_paths_echoing_the_api_key(
    cli: Cli, cloud: CloudServer
) -> None:
    hops = [gcp.SKUS_PATH] + [f"/{API_KEY}/{i}/{b64(API_KEY)}" for i in range(12)]
    for here, there in itertools.pairwise(hops):
        cloud.route(here, redirect_to(there))
    stderr = one_error(gcp_pricing(cli, cloud), 1, API_KEY)
    assert "more than 10 redirects" in stderr


def test_pricing_with_a_malformed_base_url_is_a_config_error(cli: Cli) -> None:
    run = cli(
        "pricing", "-p", "gcp", "-r", "us-central1", "--refresh",
        env={**NO_DEBUG, "SHOAL_GCP_BILLING_URL": "http://127.0.0.1:99999",
             "SHOAL_GCP_API_KEY": API_KEY},
    )  # fmt: skip
    stderr = one_error(run, 78, API_KEY)
    assert "its port 99999 is out of range" in stderr and "base URL" in stderr


# -- resources -p kubernetes -------------------------------------------------------------------


def kubeconfig(path: Path, server: str, user: dict[str, Any]) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "prod",
                "clusters": [{"name": "loop", "cluster": {"server": server}}],
                "users": [{"name": "tester", "user": user}],
                "contexts": [{"name": "prod", "context": {"cluster": "loop", "user": "tester"}}],
            }
        )
    )
    return path


@pytest.fixture
def kube() -> Iterator[KubeServer]:
    with KubeServer(tokens=[TOKEN]) as server:
        yield server


def resources(cli: Cli, config: Path) -> Run:
    return cli("resources", "-p", "kubernetes", env={**NO_DEBUG, "KUBECONFIG": str(config)})


def echo_all(secret: str, user: str = USER) -> str:
    return " ".join([*forms(secret, user), secret.upper()])


@pytest.mark.parametrize("code", [401, 403])
def test_kubernetes_status_and_reason_phrase_echoing_the_token(
    cli: Cli, kube: KubeServer, tmp_path: Path, code: int
) -> None:
    body = status_body(code, TOKEN, f"denied: {echo_all(TOKEN)}", {"name": TOKEN})
    kube.fault("reply", status=code, body=body, reason=f"Nope {TOKEN}", times=2)
    config = kubeconfig(tmp_path / "kc", kube.base, {"token": TOKEN})
    stderr = one_error(resources(cli, config), 77, TOKEN)
    assert f"HTTP {code} ***" in stderr


def test_kubernetes_token_file_contents_echoed(cli: Cli, kube: KubeServer, tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n")
    kube.fault("reply", status=403, body=status_body(403, "Forbidden", echo_all(TOKEN)))
    config = kubeconfig(tmp_path / "kc", kube.base, {"tokenFile": str(tmp_path / "token")})
    one_error(resources(cli, config), 77, TOKEN)


def test_kubernetes_basic_auth_echoed_as_base64(cli: Cli, kube: KubeServer, tmp_path: Path) -> None:
    said = f"who is {b64('admin:' + PASSWORD)} or {quote(PASSWORD, safe='')}?"
    kube.fault("reply", status=403, body=status_body(403, "Forbidden", said))
    config = kubeconfig(tmp_path / "kc", kube.base, {"username": "admin", "password": PASSWORD})
    run = resources(cli, config)
    one_error(run, 77)
    assert_clean(run.stderr, PASSWORD, user="admin")
    assert kube.requests()[0].headers["authorization"] == "Basic " + b64(f"admin:{PASSWORD}")


PLUGIN = f"""#!{sys.executable}
import json
print(json.dumps({{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {{"token": {TOKEN!r}}}}}))
"""


def test_kubernetes_exec_plugin_token_echoed(cli: Cli, kube: KubeServer, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin.py"
    plugin.write_text(PLUGIN)
    plugin.chmod(plugin.stat().st_mode | stat.S_IXUSR)
    kube.fault("reply", status=403, body=status_body(403, TOKEN, echo_all(TOKEN)), reason=TOKEN)
    user = {
        "exec": {
            "command": str(plugin),
            "apiVersion": "client.authentication.k8s.io/v1",
            "interactiveMode": "Never",
        }
    }
    one_error(resources(cli, kubeconfig(tmp_path / "kc", kube.base, user)), 77, TOKEN)
    assert kube.requests()[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_kubernetes_redirect_is_reported_scrubbed_and_not_followed(
    cli: Cli, kube: KubeServer, tmp_path: Path
) -> None:
    location = f"http://u:{TOKEN}@127.0.0.1:{TOKEN}/api/v1/nodes"
    kube.fault("reply", status=302, headers={"Location": location}, reason=TOKEN)
    stderr = one_error(resources(cli, kubeconfig(tmp_path / "kc", kube.base, {"token": TOKEN})), 1)
    assert_clean(stderr, TOKEN)
    assert "redirects to an unusable Location" in stderr and "does not follow" in stderr
    assert len(kube.requests()) == 1


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ("http://127.0.0.1:99999", "its port 99999 is out of range 1-65535"),
        ("http://[::1", "'[' without its ']'"),
        ("http://host:port/", "its port is not a number"),
        ("ftp://127.0.0.1", "its scheme 'ftp' is not http or https"),
        ("https://", "it has no host"),
        ("https://:6443", "it has no host"),
        ("http://127.0.0.1:6443/a\x00b", "a space or a control character"),
        ("http://127.0.0.1 :6443", "a space or a control character"),
        (f"https://{USER}:{PASSWORD}@127.0.0.1:6443", "user name or password"),
        ("https://127.0.0.1:6443/?x=1", "must not have a query string"),
    ],
)
def test_kubeconfig_with_a_malformed_server_is_78_naming_file_cluster_and_field(
    cli: Cli, tmp_path: Path, server: str, said: str
) -> None:
    config = kubeconfig(tmp_path / "kc", server, {"token": TOKEN})
    stderr = one_error(resources(cli, config), 78, PASSWORD, TOKEN)
    assert f"{config}: clusters[0].cluster.server (cluster 'loop')" in stderr
    assert said in stderr
