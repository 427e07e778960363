"""Kubeconfig loading: sources and merging, relative paths, data fields, in-cluster, exec
plugins, and every error."""

from __future__ import annotations

import base64
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from providers.core.errors import ConfigError, CredentialsError
from providers.kubernetes.exec_plugin import exec_credential, forget_exec_credentials
from providers.kubernetes.in_cluster import IN_CLUSTER
from providers.kubernetes.kubeconfig import load_connection

SECRET = "s3cr3t-token-value"


def write(path: Path, config: dict[str, Any] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(config if isinstance(config, str) else yaml.safe_dump(config))
    return path


def config(
    *,
    current: str | None = "dev",
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    clusters = {"dev": {"server": "https://dev.example:6443"}} if clusters is None else clusters
    users = {"dev": {"token": SECRET}} if users is None else users
    if contexts is None:
        contexts = {"dev": {"cluster": "dev", "user": "dev", "namespace": "team"}}
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": k, "cluster": v} for k, v in clusters.items()],
        "users": [{"name": k, "user": v} for k, v in users.items()],
        "contexts": [{"name": k, "context": v} for k, v in contexts.items()],
    }
    if current is not None:
        out["current-context"] = current
    return out


@pytest.fixture(autouse=True)
def _fresh_exec_cache():
    forget_exec_credentials()
    yield
    forget_exec_credentials()


def env_for(*paths: Path, **extra: str) -> dict[str, str]:
    return {"KUBECONFIG": os.pathsep.join(str(p) for p in paths), **extra}


# -- sources and merging ---------------------------------------------------------------------


def test_single_file_token_and_namespace(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config())
    conn = load_connection(env_for(path), None)
    assert conn.server == "https://dev.example:6443"
    assert (conn.context, conn.cluster, conn.user, conn.namespace) == ("dev", "dev", "dev", "team")
    assert conn.token == SECRET
    assert SECRET not in repr(conn)
    assert conn.source == str(path)


def test_namespace_defaults_and_bare_server_gets_https(tmp_path: Path) -> None:
    path = write(
        tmp_path / "kc",
        config(
            clusters={"dev": {"server": "10.0.0.1:6443/"}},
            contexts={"dev": {"cluster": "dev", "user": "dev"}},
        ),
    )
    conn = load_connection(env_for(path), None)
    assert conn.namespace == "default"
    assert conn.server == "https://10.0.0.1:6443"


def test_merge_first_file_wins_and_current_context_from_first_that_has_one(
    tmp_path: Path,
) -> None:
    first = write(
        tmp_path / "a" / "kc",
        config(
            current=None,
            clusters={"shared": {"server": "https://first:1"}},
            users={"u": {"token": "first-token"}},
            contexts={"one": {"cluster": "shared", "user": "u"}},
        ),
    )
    second = write(
        tmp_path / "b" / "kc",
        config(
            current="two",
            clusters={"shared": {"server": "https://second:2"}, "other": {"server": "https://o"}},
            users={"u": {"token": "second-token"}},
            contexts={"two": {"cluster": "shared", "user": "u"}, "one": {"cluster": "other"}},
        ),
    )
    missing = tmp_path / "nope"
    conn = load_connection(env_for(missing, first, second, first), None)
    assert conn.context == "two"
    assert conn.server == "https://first:1"  # cluster "shared" from the first file
    assert conn.token == "first-token"
    one = load_connection(env_for(first, second), "one")
    assert one.server == "https://first:1"  # context "one" from the first file, not the second
    assert one.source == f"{first}, {second}"


def test_home_kube_config_when_kubeconfig_unset(tmp_path: Path) -> None:
    write(tmp_path / ".kube" / "config", config())
    assert load_connection({}, None, home=tmp_path).context == "dev"
    assert load_connection({"HOME": str(tmp_path)}, None).context == "dev"


def test_no_config_anywhere_names_both_sources(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_connection({}, None, home=tmp_path)
    assert "KUBECONFIG" in str(err.value) and "~/.kube/config" in str(err.value)
    with pytest.raises(ConfigError, match=r"KUBECONFIG=.*names no kubeconfig"):
        load_connection(env_for(tmp_path / "missing"), None, home=tmp_path)
    # An empty file is an empty config, not an error.
    empty = write(tmp_path / "empty", "")
    with pytest.raises(ConfigError, match="no Kubernetes configuration"):
        load_connection(env_for(empty), None)


# -- paths and data --------------------------------------------------------------------------


def test_relative_paths_resolve_against_the_file(tmp_path: Path) -> None:
    base = tmp_path / "conf"
    (base / "pki").mkdir(parents=True)
    (base / "pki" / "ca.crt").write_text("CA")
    (base / "pki" / "me.crt").write_text("CERT")
    (base / "pki" / "me.key").write_text("KEY")
    (base / "tok").write_text(f"  {SECRET}\n")
    path = write(
        base / "kc",
        config(
            clusters={"dev": {"server": "https://x", "certificate-authority": "pki/ca.crt"}},
            users={
                "dev": {
                    "client-certificate": "pki/me.crt",
                    "client-key": "pki/me.key",
                    "tokenFile": "tok",
                    "token": "ignored-when-tokenfile-reads",
                }
            },
        ),
    )
    conn = load_connection(env_for(path), None)
    assert conn.ca_file == base / "pki" / "ca.crt"
    assert conn.client_cert_file == base / "pki" / "me.crt"
    assert conn.client_key_file == base / "pki" / "me.key"
    assert conn.token_file == base / "tok"
    assert conn.token == SECRET


def test_data_fields_are_decoded_and_beat_paths(tmp_path: Path) -> None:
    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    path = write(
        tmp_path / "kc",
        config(
            clusters={
                "dev": {
                    "server": "https://x",
                    "certificate-authority-data": b64("CA PEM"),
                    "certificate-authority": "does/not/matter",
                    "tls-server-name": "api.internal",
                    "insecure-skip-tls-verify": False,
                }
            },
            users={
                "dev": {
                    "client-certificate-data": b64("CERT PEM"),
                    "client-key-data": b64("KEY PEM"),
                    "username": "admin",
                    "password": "hunter2-password",
                }
            },
        ),
    )
    conn = load_connection(env_for(path), None)
    assert conn.ca_data == b"CA PEM" and conn.ca_file is None
    assert conn.client_cert_data == b"CERT PEM" and conn.client_key_data == b"KEY PEM"
    assert conn.tls_server_name == "api.internal"
    assert (conn.username, conn.password) == ("admin", "hunter2-password")
    assert "hunter2" not in repr(conn)
    assert "hunter2-password" in conn.secrets()


# -- in-cluster ------------------------------------------------------------------------------


def service_account(tmp_path: Path, namespace: str | None = "jobs") -> Path:
    directory = tmp_path / "sa"
    directory.mkdir()
    (directory / "token").write_text(SECRET + "\n")
    (directory / "ca.crt").write_text("CA")
    if namespace is not None:
        (directory / "namespace").write_text(namespace)
    return directory


def test_in_cluster_when_no_kubeconfig(tmp_path: Path) -> None:
    directory = service_account(tmp_path)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    conn = load_connection(env, None, home=tmp_path, service_account_dir=directory)
    assert conn.server == "https://10.96.0.1:443"
    assert conn.context == IN_CLUSTER
    assert conn.token == SECRET and conn.token_file == directory / "token"
    assert conn.ca_file == directory / "ca.crt"
    assert conn.namespace == "jobs"
    ipv6 = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    conn = load_connection(ipv6, IN_CLUSTER, home=tmp_path, service_account_dir=directory)
    assert conn.server == "https://[fd00::1]:443"


def test_in_cluster_namespace_default_and_errors(tmp_path: Path) -> None:
    directory = service_account(tmp_path, namespace=None)
    env = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    conn = load_connection(env, None, home=tmp_path, service_account_dir=directory)
    assert conn.namespace == "default"
    with pytest.raises(ConfigError, match="unknown context 'prod'"):
        load_connection(env, "prod", home=tmp_path, service_account_dir=directory)
    (directory / "token").unlink()
    with pytest.raises(CredentialsError, match="token is missing"):
        load_connection(env, None, home=tmp_path, service_account_dir=directory)


def test_kubeconfig_beats_in_cluster(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config())
    env = env_for(path, KUBERNETES_SERVICE_HOST="10.96.0.1", KUBERNETES_SERVICE_PORT="443")
    assert load_connection(env, None, service_account_dir=service_account(tmp_path)).context == (
        "dev"
    )


# -- errors ----------------------------------------------------------------------------------


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", "clusters:\n  - name: a\n    cluster: {server: [\n")
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), None)
    assert str(path) in str(err.value) and "line" in str(err.value)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("- just a list", "must be a YAML mapping"),
        ("clusters: {a: 1}", "clusters must be a list"),
        ("clusters: [3]", "clusters[0] must be a mapping"),
        ("clusters: [{cluster: {}}]", "clusters[0].name"),
        ("users: [{name: u, user: [1]}]", "users[0].user must be a mapping"),
        ("current-context: [x]", "current-context must be a string"),
    ],
)
def test_wrong_shapes_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = write(tmp_path / "kc", text)
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), None)
    assert str(path) in str(err.value) and field in str(err.value)


@pytest.mark.parametrize(
    ("cluster", "user", "field"),
    [
        ({"server": 6443}, {}, "clusters[0].cluster.server must be a string"),
        ({}, {}, "clusters[0].cluster.server is missing"),
        ({"server": "ftp://x"}, {}, "must be an http(s) URL"),
        ({"server": "https://x", "insecure-skip-tls-verify": "yes"}, {}, "true or false"),
        ({"server": "https://x", "certificate-authority-data": "!!"}, {}, "not valid base64"),
        ({"server": "https://x", "certificate-authority": "nope.crt"}, {}, "does not exist"),
        ({"server": "https://x"}, {"client-certificate-data": "Zm9v"}, "client-key"),
        ({"server": "https://x"}, {"token": ["a"]}, "users[0].user.token must be a string"),
        ({"server": "https://x"}, {"auth-provider": {"name": "gcp"}}, "exec credential plugin"),
    ],
)
def test_bad_fields_name_file_and_field(
    tmp_path: Path, cluster: dict[str, Any], user: dict[str, Any], field: str
) -> None:
    path = write(tmp_path / "kc", config(clusters={"dev": cluster}, users={"dev": user}))
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), None)
    assert str(path) in str(err.value) and field in str(err.value)


@pytest.mark.parametrize(
    ("server", "said"),
    [
        ("https://10.0.0.1:99999", "its port 99999 is out of range 1-65535"),
        ("10.0.0.1:6443x", "its port is not a number"),
        ("https://[fd00::1:6443", "its host has a '[' without its ']'"),
        ("https://host:port", "its port is not a number"),
        ("https://", "it has no host"),
        ("https://a b:6443", "a space or a control character"),
        ("https://10.0.0.1:6443/\x00", "a space or a control character"),
        (f"https://admin:{SECRET}@10.0.0.1:6443", "user name or password"),
        (f"https://10.0.0.1:{SECRET}", "its port is not a number"),
        ("https://10.0.0.1:6443?x=1", "must not have a query string or fragment"),
    ],
)
def test_a_malformed_server_names_file_cluster_and_field_never_the_secret(
    tmp_path: Path, server: str, said: str
) -> None:
    path = write(tmp_path / "kc", config(clusters={"dev": {"server": server}}))
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), None)
    message = str(err.value)
    assert message.startswith(f"{path}: clusters[0].cluster.server (cluster 'dev'): ")
    assert said in message and SECRET not in message


@pytest.mark.parametrize(("host", "port"), [("10.96.0.1", "99999"), ("10.96.0.1", "https")])
def test_in_cluster_with_a_malformed_service_address_is_a_config_error(
    tmp_path: Path, host: str, port: str
) -> None:
    env = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT"):
        load_connection(env, None, home=tmp_path, service_account_dir=service_account(tmp_path))


def test_unknown_context_lists_known_ones(tmp_path: Path) -> None:
    path = write(
        tmp_path / "kc",
        config(contexts={"dev": {"cluster": "dev"}, "prod": {"cluster": "dev"}}),
    )
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), "staging")
    assert "unknown context 'staging'" in str(err.value)
    assert "known contexts: dev, prod" in str(err.value)


def test_no_current_context(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config(current=None))
    with pytest.raises(ConfigError, match=r"no current-context .* pass --context \(known: dev\)"):
        load_connection(env_for(path), None)


def test_missing_cluster_or_user(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config(contexts={"dev": {"cluster": "gone", "user": "dev"}}))
    with pytest.raises(ConfigError, match="cluster 'gone', which no kubeconfig defines"):
        load_connection(env_for(path), None)
    path = write(tmp_path / "kc2", config(contexts={"dev": {"cluster": "dev", "user": "ghost"}}))
    with pytest.raises(ConfigError, match="user 'ghost', which no kubeconfig defines"):
        load_connection(env_for(path), None)
    path = write(tmp_path / "kc3", config(contexts={"dev": {"user": "dev"}}))
    with pytest.raises(ConfigError, match="names no cluster"):
        load_connection(env_for(path), None)


# -- exec plugins ----------------------------------------------------------------------------

PLUGIN = """\
#!{python}
import json, os, sys
from pathlib import Path
here = Path(__file__).parent
calls = here / "calls"
n = int(calls.read_text()) + 1 if calls.exists() else 1
calls.write_text(str(n))
(here / "info.json").write_text(os.environ["KUBERNETES_EXEC_INFO"])
(here / "seen-env").write_text(os.environ.get("PLUGIN_MODE", ""))
mode = os.environ.get("PLUGIN_MODE", "token")
if mode == "fail":
    print("{secret} should never show", flush=True)
    sys.stderr.write("error: login required (run az login)\\nsecond line\\n")
    sys.exit(3)
status = {{"token": "exec-token-" + str(n)}}
if mode == "cert":
    status = {{"clientCertificateData": "CERT", "clientKeyData": "KEY"}}
if mode == "expired":
    status["expirationTimestamp"] = "2000-01-01T00:00:00Z"
if mode == "garbage":
    print("not json")
    sys.exit(0)
version = os.environ.get("PLUGIN_VERSION", "client.authentication.k8s.io/v1")
print(json.dumps({{"apiVersion": version, "kind": "ExecCredential", "status": status}}))
"""


def plugin_config(tmp_path: Path, mode: str = "token", **exec_extra: Any) -> Path:
    script = tmp_path / "bin" / "plugin.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(PLUGIN.format(python=sys.executable, secret=SECRET))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    spec = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": "./bin/plugin.py",  # relative: resolved against the kubeconfig's dir
        "args": ["--cluster", "dev"],
        "env": [{"name": "PLUGIN_MODE", "value": mode}],
        "interactiveMode": "Never",
        **exec_extra,
    }
    cluster = {
        "server": "https://dev.example",
        "certificate-authority-data": base64.b64encode(b"CA").decode(),
        "extensions": [
            {"name": "client.authentication.k8s.io/exec", "extension": {"audience": "dev"}}
        ],
    }
    return write(tmp_path / "kc", config(clusters={"dev": cluster}, users={"dev": {"exec": spec}}))


def calls(tmp_path: Path) -> int:
    return int((tmp_path / "bin" / "calls").read_text())


def test_exec_plugin_token_is_cached_and_refreshed(tmp_path: Path) -> None:
    conn = load_connection(env_for(plugin_config(tmp_path, provideClusterInfo=True)), None)
    assert conn.exec_plugin is not None
    assert conn.exec_plugin.command == str(tmp_path / "bin" / "plugin.py")
    assert exec_credential(conn).token == "exec-token-1"
    assert exec_credential(conn).token == "exec-token-1"
    assert calls(tmp_path) == 1
    assert exec_credential(conn, refresh=True).token == "exec-token-2"
    info = json.loads((tmp_path / "bin" / "info.json").read_text())
    assert info["apiVersion"] == "client.authentication.k8s.io/v1"
    assert info["kind"] == "ExecCredential"
    assert info["spec"]["interactive"] is False
    cluster = info["spec"]["cluster"]
    assert cluster["server"] == "https://dev.example"
    assert cluster["certificate-authority-data"] == base64.b64encode(b"CA").decode()
    assert cluster["config"] == {"audience": "dev"}


def test_exec_plugin_without_cluster_info(tmp_path: Path) -> None:
    conn = load_connection(env_for(plugin_config(tmp_path)), None)
    exec_credential(conn)
    info = json.loads((tmp_path / "bin" / "info.json").read_text())
    assert "cluster" not in info["spec"]
    assert (tmp_path / "bin" / "seen-env").read_text() == "token"


def test_exec_plugin_expired_credential_is_not_reused(tmp_path: Path) -> None:
    conn = load_connection(env_for(plugin_config(tmp_path, "expired")), None)
    first = exec_credential(conn)
    assert first.expires_at is not None
    assert exec_credential(conn).token == "exec-token-2"
    assert calls(tmp_path) == 2


def test_exec_plugin_client_certificate(tmp_path: Path) -> None:
    conn = load_connection(env_for(plugin_config(tmp_path, "cert")), None)
    cred = exec_credential(conn)
    assert (cred.client_cert, cred.client_key, cred.token) == (b"CERT", b"KEY", "")


def test_exec_plugin_failure_names_command_and_stderr_only(tmp_path: Path) -> None:
    conn = load_connection(env_for(plugin_config(tmp_path, "fail")), None)
    with pytest.raises(CredentialsError) as err:
        exec_credential(conn)
    message = str(err.value)
    assert "plugin.py" in message and "exit code 3" in message
    assert "login required (run az login)" in message
    assert "second line" not in message and SECRET not in message


@pytest.mark.parametrize(
    ("mode", "extra", "expected"),
    [
        ("garbage", {}, "did not print an ExecCredential"),
        ("token", {"apiVersion": "client.authentication.k8s.io/v1beta1"}, "answered apiVersion"),
        ("token", {"interactiveMode": "Always"}, "needs an interactive terminal"),
        ("token", {"command": "no-such-plugin-xyz", "installHint": "brew install xyz"}, "xyz"),
    ],
)
def test_exec_plugin_errors(
    tmp_path: Path, mode: str, extra: dict[str, Any], expected: str
) -> None:
    conn = load_connection(env_for(plugin_config(tmp_path, mode, **extra)), None)
    with pytest.raises(CredentialsError, match=expected):
        exec_credential(conn)


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({"apiVersion": "client.authentication.k8s.io/v1alpha1"}, "apiVersion"),
        ({"interactiveMode": None}, "interactiveMode is required"),
        ({"interactiveMode": "Sometimes"}, "interactiveMode"),
        ({"command": ""}, "command is missing"),
        ({"args": "--flag"}, "args must be a list"),
        ({"env": [{"name": "A"}]}, "env[0]"),
    ],
)
def test_exec_stanza_errors(tmp_path: Path, extra: dict[str, Any], expected: str) -> None:
    path = plugin_config(tmp_path, **extra)
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), None)
    assert expected in str(err.value) and str(path) in str(err.value)


def test_exec_v1beta1_defaults_interactive_mode(tmp_path: Path) -> None:
    path = plugin_config(
        tmp_path, apiVersion="client.authentication.k8s.io/v1beta1", interactiveMode=None
    )
    conn = load_connection(env_for(path), None)
    assert conn.exec_plugin is not None and conn.exec_plugin.interactive_mode == "IfAvailable"


# -- the model: kubectl's reading ------------------------------------------------------------


def test_unknown_keys_are_ignored_and_nulls_are_unset(tmp_path: Path) -> None:
    path = write(
        tmp_path / "kc",
        "apiVersion: v1\nkind: Config\npreferences: {colors: true}\nnewer-field: [1]\n"
        "current-context: dev\n"
        "clusters: [{name: dev, extra: 1, cluster: {server: 'https://x', proxy-url: 'http://p',"
        " extensions: null, certificate-authority: null}}]\n"
        "users: [{name: dev, user: {token: t0k3n-value, exec: null, auth-provider: null,"
        " as-user-extra: {a: [b]}}}]\n"
        "contexts: [{name: dev, context: {cluster: dev, user: dev, namespace: null, x: y}}]\n",
    )
    conn = load_connection(env_for(path), None)
    assert (conn.server, conn.token, conn.namespace) == ("https://x", "t0k3n-value", "default")
    assert conn.exec_plugin is None and conn.ca_file is None


@pytest.mark.parametrize(
    ("user", "message"),
    [
        (
            {"exec": {"command": "x", "args": [1]}},
            "users[1].user.exec.args[0] must be a string, got an integer",
        ),
        ({"exec": {"command": 5}}, "users[1].user.exec.command must be a string, got an integer"),
        ({"exec": {"command": "x", "env": [{"value": "v"}]}}, "users[1].user.exec.env[0].name"),
        ({"exec": {"provideClusterInfo": "yes"}}, "exec.provideClusterInfo must be true or false"),
        ({"client-key-data": "!!"}, "users[1].user.client-key-data is not valid base64"),
    ],
)
def test_type_errors_name_the_field_path(
    tmp_path: Path, user: dict[str, Any], message: str
) -> None:
    path = write(tmp_path / "kc", config(users={"dev": {"token": SECRET}, "plugin": user}))
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), None)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    assert type(err.value) is ConfigError  # exit 78


def test_a_credential_of_the_wrong_type_is_never_quoted(tmp_path: Path) -> None:
    path = write(tmp_path / "kc", config(users={"dev": {"password": 918273645}}))
    with pytest.raises(ConfigError) as err:
        load_connection(env_for(path), None)
    message = str(err.value)
    assert "users[0].user.password must be a string, got an integer" in message
    assert "918273645" not in message and "not shown" in message


def test_types_are_checked_in_every_entry_meanings_in_the_used_ones(tmp_path: Path) -> None:
    # As kubectl decodes the whole file: a field of the wrong type anywhere is refused...
    path = write(
        tmp_path / "kc",
        config(users={"dev": {"token": SECRET}, "other": {"token": ["not", "a", "string"]}}),
    )
    with pytest.raises(ConfigError, match=r"users\[1\]\.user\.token must be a string"):
        load_connection(env_for(path), None)
    # ...while what a value means (a file, a server, an exec stanza) is checked where used.
    path = write(
        tmp_path / "kc2",
        config(
            clusters={"dev": {"server": "https://x"}, "other": {"server": "ftp://nowhere"}},
            users={"dev": {"token": SECRET}, "other": {"exec": {"command": ""}}},
        ),
    )
    assert load_connection(env_for(path), None).server == "https://x"
