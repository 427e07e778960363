"""Connect like kubectl: kubeconfig files, the in-cluster service account, exec plugins.

Sources, in kubectl's order: the files listed in KUBECONFIG (merged: the first file that sets
a cluster, user or context name wins, `current-context` comes from the first file that has
one), else `~/.kube/config`, else the pod's service account. Relative paths in a file are
relative to that file's directory. `*-data` fields beat their path twins; a readable
`tokenFile` beats `token`. Exec credential plugins are run here and their answer is cached
in-process until it expires.

Docs:
- https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/
- https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/
- https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins
- https://kubernetes.io/docs/reference/config-api/client-authentication.v1/
- https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from providers.env import ENV_KUBECONFIG
from providers.errors import ConfigError, CredentialsError, UsageError, scrub
from providers.urls import UrlError, display, parse

ENV_SERVICE_HOST = "KUBERNETES_SERVICE_HOST"
ENV_SERVICE_PORT = "KUBERNETES_SERVICE_PORT"
ENV_EXEC_INFO = "KUBERNETES_EXEC_INFO"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER = "in-cluster"
EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"
_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")


@dataclass(frozen=True)
class ExecSpec:
    """A user's `exec` stanza. `command` is already resolved against the kubeconfig's
    directory when it names a relative path."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    interactive_mode: str = "IfAvailable"
    provide_cluster_info: bool = False
    install_hint: str = ""
    cluster_config: str = ""  # JSON of the cluster's client.authentication.k8s.io/exec extension


@dataclass(frozen=True)
class Connection:
    """Everything needed to reach one cluster as one user. Secrets are kept out of repr."""

    server: str
    context: str
    cluster: str
    user: str = ""
    namespace: str = "default"
    ca_data: bytes | None = None
    ca_file: Path | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str = ""
    token: str = field(default="", repr=False)
    token_file: Path | None = None
    client_cert_data: bytes | None = field(default=None, repr=False)
    client_cert_file: Path | None = None
    client_key_data: bytes | None = field(default=None, repr=False)
    client_key_file: Path | None = None
    username: str = ""
    password: str = field(default="", repr=False)
    exec_plugin: ExecSpec | None = None
    source: str = ""  # the kubeconfig file(s), or "the in-cluster service account"

    def secrets(self) -> tuple[str, ...]:
        """Strings that must never appear in a message."""
        return tuple(s for s in (self.token, self.password) if len(s) >= 4)


# -- loading -------------------------------------------------------------------------------


def load_connection(
    env: Mapping[str, str],
    context: str | None,
    *,
    home: Path | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
) -> Connection:
    """The connection for `context` (or the current context), from the first source kubectl
    would use."""
    listed = env.get(ENV_KUBECONFIG, "")
    merged, paths = _load_merged(env, home)
    if merged.is_empty():
        if env.get(ENV_SERVICE_HOST) and env.get(ENV_SERVICE_PORT):
            if context not in (None, "", IN_CLUSTER):
                raise ConfigError(
                    f"unknown context {context!r}: no kubeconfig was found and the in-cluster "
                    f"service account offers only {IN_CLUSTER!r}; set {ENV_KUBECONFIG}"
                )
            return _in_cluster(env, service_account_dir)
        where = (
            f"{ENV_KUBECONFIG}={listed} names no kubeconfig with clusters or contexts"
            if listed
            else f"{ENV_KUBECONFIG} is not set and {paths[0]} is missing or empty"
        )
        raise ConfigError(
            f"no Kubernetes configuration: {where}; set {ENV_KUBECONFIG} or create "
            "~/.kube/config (or run in a pod with a service account)"
        )
    return merged.connection(context)


def _load_merged(env: Mapping[str, str], home: Path | None) -> tuple[_Merged, list[Path]]:
    listed = env.get(ENV_KUBECONFIG, "")
    if listed:
        paths = _unique(Path(p).expanduser() for p in listed.split(os.pathsep) if p)
    else:
        base = home if home is not None else Path(env.get("HOME") or Path.home())
        paths = [base / ".kube" / "config"]
    return _merge([_load_file(p) for p in paths if _exists(p)]), paths


def list_contexts(env: Mapping[str, str], *, home: Path | None = None) -> tuple[list[str], str]:
    """The kubeconfig's context names and the current one (no network); in a pod without a
    kubeconfig, the in-cluster service account's single context."""
    merged, _ = _load_merged(env, home)
    if merged.is_empty():
        if env.get(ENV_SERVICE_HOST) and env.get(ENV_SERVICE_PORT):
            return [IN_CLUSTER], IN_CLUSTER
        load_connection(env, None, home=home)  # raises the one clear "no configuration" error
    return sorted(merged.contexts), merged.current_context


def _exists(path: Path) -> bool:
    # kubectl skips KUBECONFIG entries that do not exist; anything else is the user's to fix.
    try:
        path.stat()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the kubeconfig ({exc.strerror})") from None
    return True


def _unique(paths: Any) -> list[Path]:
    seen: list[Path] = []
    for path in paths:
        if path not in seen:
            seen.append(path)
    return seen


# -- one file ------------------------------------------------------------------------------


@dataclass
class _Entry:
    """One named cluster, user or context, with where it came from."""

    body: dict[str, Any]
    file: Path
    where: str  # e.g. "users[1].user"

    def at(self, key: str) -> str:
        return f"{self.file}: {self.where}.{key}"


@dataclass
class _File:
    path: Path
    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str = ""


KUBECONFIG_ALIASES = 64


def _load_file(path: Path) -> _File:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the kubeconfig ({reason})") from None
    from providers import yamlsafe

    try:
        # A kubeconfig may use a few anchors; a bomb of them is refused before it expands.
        data = yamlsafe.load(text, aliases=KUBECONFIG_ALIASES)
    except yamlsafe.YamlRefused as exc:
        raise ConfigError(f"{path}: kubeconfig refused: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ConfigError(f"{path}: malformed kubeconfig{at}: {problem}; fix the YAML") from None
    result = _File(path)
    if data is None:
        return result
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a kubeconfig must be a YAML mapping, got {_kind(data)}")
    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise ConfigError(f"{path}: current-context must be a string, got {_kind(current)}")
    result.current_context = current or ""
    for section, inner, into in (
        ("clusters", "cluster", result.clusters),
        ("users", "user", result.users),
        ("contexts", "context", result.contexts),
    ):
        items = data.get(section)
        if items is None:
            continue
        if not isinstance(items, list):
            raise ConfigError(f"{path}: {section} must be a list, got {_kind(items)}")
        for index, item in enumerate(items):
            where = f"{section}[{index}]"
            if not isinstance(item, dict):
                raise ConfigError(f"{path}: {where} must be a mapping, got {_kind(item)}")
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{path}: {where}.name must be a non-empty string")
            body = item.get(inner)
            if body is None:
                body = {}
            if not isinstance(body, dict):
                raise ConfigError(f"{path}: {where}.{inner} must be a mapping, got {_kind(body)}")
            into.setdefault(name, _Entry(body, path, f"{where}.{inner}"))
    return result


def _kind(value: Any) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), "null" if value is None else type(value).__name__)


# -- merged view ---------------------------------------------------------------------------


@dataclass
class _Merged:
    files: list[Path]
    clusters: dict[str, _Entry]
    users: dict[str, _Entry]
    contexts: dict[str, _Entry]
    current_context: str

    def is_empty(self) -> bool:
        return not (self.clusters or self.users or self.contexts or self.current_context)

    def source(self) -> str:
        return ", ".join(str(p) for p in self.files)

    def connection(self, wanted: str | None) -> Connection:
        known = _names(self.contexts)
        name = wanted or self.current_context
        if not name:
            raise ConfigError(
                f"no current-context in {self.source()}; pass --context (known: {known}) or "
                "run `kubectl config use-context NAME`"
            )
        context = self.contexts.get(name)
        if context is None:
            origin = "--context" if wanted else f"current-context in {self.source()}"
            raise ConfigError(f"unknown context {name!r} ({origin}); known contexts: {known}")
        cluster_name = _string(context, "cluster")
        user_name = _string(context, "user")
        namespace = _string(context, "namespace") or "default"
        if not cluster_name:
            raise ConfigError(f"{context.at('cluster')}: context {name!r} names no cluster")
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            raise ConfigError(
                f"{context.at('cluster')}: context {name!r} refers to cluster {cluster_name!r}, "
                f"which no kubeconfig defines (known: {_names(self.clusters)})"
            )
        user: _Entry | None = None
        if user_name:
            user = self.users.get(user_name)
            if user is None:
                raise ConfigError(
                    f"{context.at('user')}: context {name!r} refers to user {user_name!r}, "
                    f"which no kubeconfig defines (known: {_names(self.users)})"
                )
        parts: dict[str, Any] = {
            "context": name,
            "cluster": cluster_name,
            "user": user_name,
            "namespace": namespace,
            "source": self.source(),
        }
        parts.update(_cluster_fields(cluster, cluster_name))
        if user is not None:
            parts.update(_user_fields(user, cluster))
        return Connection(**parts)


def _names(entries: Mapping[str, _Entry]) -> str:
    return ", ".join(sorted(entries)) or "none"


def _merge(files: list[_File]) -> _Merged:
    merged = _Merged([f.path for f in files], {}, {}, {}, "")
    for one in files:
        for name, entry in one.clusters.items():
            merged.clusters.setdefault(name, entry)
        for name, entry in one.users.items():
            merged.users.setdefault(name, entry)
        for name, entry in one.contexts.items():
            merged.contexts.setdefault(name, entry)
        merged.current_context = merged.current_context or one.current_context
    return merged


# -- fields --------------------------------------------------------------------------------


def _string(entry: _Entry, key: str) -> str:
    value = entry.body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{entry.at(key)} must be a string, got {_kind(value)}")
    return value


def _bool(entry: _Entry, key: str) -> bool:
    value = entry.body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"{entry.at(key)} must be true or false, got {_kind(value)}")
    return value


def _data(entry: _Entry, key: str) -> bytes | None:
    text = _string(entry, key)
    if not text:
        return None
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"{entry.at(key)} is not valid base64; re-export the kubeconfig"
        ) from None


def _path(entry: _Entry, key: str) -> Path | None:
    text = _string(entry, key)
    if not text:
        return None
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = entry.file.parent / path
    if not path.is_file():
        raise ConfigError(f"{entry.at(key)}: {path} does not exist or is not a file")
    return path


def _cluster_fields(cluster: _Entry, name: str) -> dict[str, Any]:
    ca_data = _data(cluster, "certificate-authority-data")
    return {
        "server": _server(cluster, name),
        "ca_data": ca_data,
        "ca_file": None if ca_data else _path(cluster, "certificate-authority"),
        "insecure_skip_tls_verify": _bool(cluster, "insecure-skip-tls-verify"),
        "tls_server_name": _string(cluster, "tls-server-name"),
    }


def _server(cluster: _Entry, name: str) -> str:
    """The cluster's API server URL, checked here: a malformed one is the kubeconfig's to
    fix (78), not a crash at the first request."""
    server = _string(cluster, "server").strip()
    field = f"{cluster.at('server')} (cluster {name!r})"
    if not server:
        raise ConfigError(
            f"{cluster.at('server')} is missing for cluster {name!r}; set the API server's URL"
        )
    if "://" not in server:
        server = "https://" + server  # kubectl's default scheme for a bare host:port
    try:
        url = parse(server)
    except UrlError as exc:
        raise ConfigError(
            f"{field}: {display(server)!r} must be an http(s) URL: {exc}; set it to the API "
            "server's https://HOST:PORT (credentials go in users[].user)"
        ) from None
    if url.query or "#" in server:
        raise ConfigError(
            f"{field}: {display(server)!r} must not have a query string or fragment; set it to "
            "the API server's https://HOST:PORT[/PATH]"
        )
    return server.rstrip("/")


def _user_fields(user: _Entry, cluster: _Entry) -> dict[str, Any]:
    parts: dict[str, Any] = {}
    token = _string(user, "token")
    token_file = _path(user, "tokenFile")
    if token_file is not None:
        token = read_token_file(token_file, user.at("tokenFile")) or token
    parts["token"] = token
    parts["token_file"] = token_file
    cert = _data(user, "client-certificate-data")
    key = _data(user, "client-key-data")
    parts["client_cert_data"] = cert
    parts["client_cert_file"] = None if cert else _path(user, "client-certificate")
    parts["client_key_data"] = key
    parts["client_key_file"] = None if key else _path(user, "client-key")
    has_cert = cert is not None or parts["client_cert_file"] is not None
    has_key = key is not None or parts["client_key_file"] is not None
    if has_cert != has_key:
        missing = "client-key(-data)" if has_cert else "client-certificate(-data)"
        raise ConfigError(f"{user.at(missing)} is missing; a client certificate needs its key")
    parts["username"] = _string(user, "username")
    parts["password"] = _string(user, "password")
    if "exec" in user.body and user.body["exec"] is not None:
        parts["exec_plugin"] = _exec_spec(user, cluster)
    elif "auth-provider" in user.body and not (token or has_cert or parts["username"]):
        provider = user.body.get("auth-provider")
        name = provider.get("name", "?") if isinstance(provider, dict) else "?"
        raise ConfigError(
            f"{user.at('auth-provider')}: the legacy {name!r} auth provider is not supported; "
            "use an exec credential plugin (for example kubelogin or gke-gcloud-auth-plugin)"
        )
    return parts


def _exec_spec(user: _Entry, cluster: _Entry) -> ExecSpec:
    raw = user.body["exec"]
    where = f"{user.where}.exec"
    if not isinstance(raw, dict):
        raise ConfigError(f"{user.file}: {where} must be a mapping, got {_kind(raw)}")
    stanza = _Entry(raw, user.file, where)
    command = _string(stanza, "command")
    if not command:
        raise ConfigError(f"{stanza.at('command')} is missing; name the credential plugin")
    if os.sep in command and not os.path.isabs(command):
        # The docs: a command with a path separator is relative to the kubeconfig's directory.
        command = str(user.file.parent / command)
    api_version = _string(stanza, "apiVersion")
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(
            f"{stanza.at('apiVersion')}: {api_version or 'missing'}; use one of "
            f"{', '.join(EXEC_API_VERSIONS)}"
        )
    mode = _string(stanza, "interactiveMode")
    if not mode:
        if api_version.endswith("/v1"):
            raise ConfigError(
                f"{stanza.at('interactiveMode')} is required for {api_version}; "
                f"use one of {', '.join(_INTERACTIVE_MODES)}"
            )
        mode = "IfAvailable"
    if mode not in _INTERACTIVE_MODES:
        raise ConfigError(
            f"{stanza.at('interactiveMode')}: {mode!r}; use one of {', '.join(_INTERACTIVE_MODES)}"
        )
    args = raw.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise ConfigError(f"{stanza.at('args')} must be a list of strings")
    env_items = raw.get("env") or []
    pairs: list[tuple[str, str]] = []
    if not isinstance(env_items, list):
        raise ConfigError(f"{stanza.at('env')} must be a list of name/value mappings")
    for index, item in enumerate(env_items):
        if (
            not isinstance(item, dict)
            or not isinstance(item.get("name"), str)
            or not isinstance(item.get("value"), str)
        ):
            raise ConfigError(f"{stanza.at(f'env[{index}]')} must have string name and value")
        pairs.append((item["name"], item["value"]))
    return ExecSpec(
        command=command,
        api_version=api_version,
        args=tuple(args),
        env=tuple(pairs),
        interactive_mode=mode,
        provide_cluster_info=_bool(stanza, "provideClusterInfo"),
        install_hint=" ".join(_string(stanza, "installHint").split()),
        cluster_config=_exec_extension(cluster),
    )


def _exec_extension(cluster: _Entry) -> str:
    extensions = cluster.body.get("extensions")
    if not isinstance(extensions, list):
        return ""
    for item in extensions:
        if isinstance(item, dict) and item.get("name") == _EXEC_EXTENSION:
            return json.dumps(item.get("extension"))
    return ""


def read_token_file(path: Path, where: str) -> str:
    """A bearer token file's content, stripped; an unreadable file names the field."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise CredentialsError(f"{where}: cannot read token file {path} ({reason})") from None


# -- in-cluster ----------------------------------------------------------------------------


def _in_cluster(env: Mapping[str, str], directory: Path) -> Connection:
    host = env[ENV_SERVICE_HOST].strip()
    port = env[ENV_SERVICE_PORT].strip()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 service address
    token_file = directory / "token"
    if not token_file.is_file():
        raise CredentialsError(
            f"in-cluster: {token_file} is missing; mount a service account token "
            f"(automountServiceAccountToken) or set {ENV_KUBECONFIG}"
        )
    ca_file = directory / "ca.crt"
    server = f"https://{host}:{port}"
    try:
        parse(server)
    except UrlError as exc:
        raise ConfigError(
            f"in-cluster: {ENV_SERVICE_HOST} and {ENV_SERVICE_PORT} make {display(server)!r}, "
            f"which is not a usable URL: {exc}; fix the pod's environment or set {ENV_KUBECONFIG}"
        ) from None
    namespace = env.get("POD_NAMESPACE", "").strip()
    if not namespace and (directory / "namespace").is_file():
        namespace = (directory / "namespace").read_text(encoding="utf-8").strip()
    return Connection(
        server=server,
        context=IN_CLUSTER,
        cluster=IN_CLUSTER,
        user="serviceaccount",
        namespace=namespace or "default",
        ca_file=ca_file if ca_file.is_file() else None,
        token=read_token_file(token_file, "in-cluster"),
        token_file=token_file,
        source=f"the in-cluster service account ({directory})",
    )


# -- exec credential plugins ---------------------------------------------------------------


@dataclass(frozen=True)
class ExecCredential:
    """What a plugin answered. `expires_at` is epoch seconds, None when it never expires."""

    token: str = field(default="", repr=False)
    client_cert: bytes | None = field(default=None, repr=False)
    client_key: bytes | None = field(default=None, repr=False)
    expires_at: float | None = None


Runner = Callable[..., "subprocess.CompletedProcess[bytes]"]

_cache: dict[tuple[ExecSpec, str], ExecCredential] = {}
_cache_lock = threading.Lock()


def exec_credential(
    connection: Connection,
    *,
    refresh: bool = False,
    now: Callable[[], float] = time.time,
    run: Runner = subprocess.run,
    interactive: bool | None = None,
) -> ExecCredential:
    """The plugin's credential: cached per (plugin, server) until it expires; `refresh`
    forgets the cached one first (after a 401)."""
    spec = connection.exec_plugin
    if spec is None:
        raise ValueError("the connection has no exec plugin")
    key = (spec, connection.server)
    with _cache_lock:
        cached = _cache.get(key)
        fresh_enough = cached is not None and (
            cached.expires_at is None or now() < cached.expires_at
        )
        if cached is not None and fresh_enough and not refresh:
            return cached
        fresh = _run_plugin(connection, spec, run, interactive)
        _cache[key] = fresh
        return fresh


def forget_exec_credentials() -> None:
    with _cache_lock:
        _cache.clear()


def _run_plugin(
    connection: Connection, spec: ExecSpec, run: Runner, interactive: bool | None
) -> ExecCredential:
    name = f"exec credential plugin {spec.command!r} (user {connection.user!r})"
    if interactive is None:
        interactive = spec.interactive_mode != "Never" and _stdin_is_terminal()
    if spec.interactive_mode == "Always" and not interactive:
        raise CredentialsError(
            f"{name} needs an interactive terminal (interactiveMode: Always); run shoal "
            "from a terminal or log in with the plugin first"
        )
    info: dict[str, Any] = {"interactive": interactive}
    if spec.provide_cluster_info:
        info["cluster"] = _cluster_info(connection, spec)
    request = {"apiVersion": spec.api_version, "kind": "ExecCredential", "spec": info}
    env = {**os.environ, **dict(spec.env), ENV_EXEC_INFO: json.dumps(request)}
    try:
        done = run(
            [spec.command, *spec.args],
            env=env,
            stdin=None if interactive else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if interactive else subprocess.PIPE,
            check=False,
        )
    except FileNotFoundError:
        hint = spec.install_hint or "install it or fix users[].user.exec.command in the kubeconfig"
        raise CredentialsError(f"{name} was not found; {hint}") from None
    except PermissionError:
        raise CredentialsError(f"{name} is not executable; fix its permissions") from None
    if done.returncode != 0:
        first = (done.stderr or b"").decode("utf-8", "replace").strip().splitlines()
        detail = f": {_scrub(first[0], connection)[:200]}" if first else ""
        raise CredentialsError(
            f"{name} failed with exit code {done.returncode}{detail}; log in again with it"
        )
    return _parse_credential(done.stdout, spec, name)


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (ValueError, OSError):
        return False


def _cluster_info(connection: Connection, spec: ExecSpec) -> dict[str, Any]:
    ca = connection.ca_data
    if ca is None and connection.ca_file is not None:
        try:
            ca = connection.ca_file.read_bytes()
        except OSError:
            ca = None
    info: dict[str, Any] = {"server": connection.server}
    if connection.tls_server_name:
        info["tls-server-name"] = connection.tls_server_name
    if connection.insecure_skip_tls_verify:
        info["insecure-skip-tls-verify"] = True
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca).decode("ascii")
    if spec.cluster_config:
        info["config"] = json.loads(spec.cluster_config)
    return info


def _parse_credential(stdout: bytes, spec: ExecSpec, name: str) -> ExecCredential:
    try:
        answer = json.loads(stdout or b"null")
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or answer.get("kind") != "ExecCredential":
        raise CredentialsError(f"{name} did not print an ExecCredential JSON object on stdout")
    if answer.get("apiVersion") != spec.api_version:
        raise CredentialsError(
            f"{name} answered apiVersion {answer.get('apiVersion')!r}, but the kubeconfig asks "
            f"for {spec.api_version!r}; align users[].user.exec.apiVersion with the plugin"
        )
    status = answer.get("status")
    if not isinstance(status, dict):
        raise CredentialsError(f"{name} returned no status field")
    token = status.get("token") or ""
    cert = status.get("clientCertificateData") or ""
    key = status.get("clientKeyData") or ""
    if not all(isinstance(v, str) for v in (token, cert, key)):
        raise CredentialsError(f"{name} returned a status with non-string credentials")
    if not token and not cert:
        raise CredentialsError(f"{name} returned neither a token nor a client certificate")
    if bool(cert) != bool(key):
        raise CredentialsError(f"{name} returned a client certificate without its key, or back")
    expires_at: float | None = None
    stamp = status.get("expirationTimestamp")
    if stamp:
        from providers.timeutil import parse_time

        try:
            expires_at = parse_time(str(stamp), "expirationTimestamp").timestamp()
        except UsageError:
            raise CredentialsError(
                f"{name} returned an expirationTimestamp that is not an RFC 3339 time"
            ) from None
    return ExecCredential(
        token=token,
        client_cert=cert.encode() if cert else None,
        client_key=key.encode() if key else None,
        expires_at=expires_at,
    )


def _scrub(text: str, connection: Connection) -> str:
    return scrub(text, connection.secrets())
