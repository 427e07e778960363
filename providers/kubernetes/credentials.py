"""Who a kubeconfig user is: a bearer token (a readable `tokenFile` beats `token`), a client
certificate and key (`*-data` beats the path twins), basic auth, or an exec credential
plugin's stanza, checked here and run by `exec_plugin`; legacy auth providers are refused."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from providers.core.errors import ConfigError, CredentialsError
from providers.kubernetes.connection import ExecSpec
from providers.kubernetes.kubeconfig_fields import (
    Entry,
    kind,
    read_bool,
    read_data,
    read_path,
    read_string,
)

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"
_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")


def user_fields(user: Entry, cluster: Entry) -> dict[str, Any]:
    """The `Connection` fields a user entry sets; `cluster` is for its exec plugin."""
    parts: dict[str, Any] = {}
    token = read_string(user, "token")
    token_file = read_path(user, "tokenFile")
    if token_file is not None:
        token = read_token_file(token_file, user.at("tokenFile")) or token
    parts["token"] = token
    parts["token_file"] = token_file
    cert = read_data(user, "client-certificate-data")
    key = read_data(user, "client-key-data")
    parts["client_cert_data"] = cert
    parts["client_cert_file"] = None if cert else read_path(user, "client-certificate")
    parts["client_key_data"] = key
    parts["client_key_file"] = None if key else read_path(user, "client-key")
    has_cert = cert is not None or parts["client_cert_file"] is not None
    has_key = key is not None or parts["client_key_file"] is not None
    if has_cert != has_key:
        missing = "client-key(-data)" if has_cert else "client-certificate(-data)"
        raise ConfigError(f"{user.at(missing)} is missing; a client certificate needs its key")
    parts["username"] = read_string(user, "username")
    parts["password"] = read_string(user, "password")
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


def _exec_spec(user: Entry, cluster: Entry) -> ExecSpec:
    raw = user.body["exec"]
    where = f"{user.where}.exec"
    if not isinstance(raw, dict):
        raise ConfigError(f"{user.file}: {where} must be a mapping, got {kind(raw)}")
    stanza = Entry(raw, user.file, where)
    command = read_string(stanza, "command")
    if not command:
        raise ConfigError(f"{stanza.at('command')} is missing; name the credential plugin")
    if os.sep in command and not os.path.isabs(command):
        # The docs: a command with a path separator is relative to the kubeconfig's directory.
        command = str(user.file.parent / command)
    api_version = read_string(stanza, "apiVersion")
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(
            f"{stanza.at('apiVersion')}: {api_version or 'missing'}; use one of "
            f"{', '.join(EXEC_API_VERSIONS)}"
        )
    mode = read_string(stanza, "interactiveMode")
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
        provide_cluster_info=read_bool(stanza, "provideClusterInfo"),
        install_hint=" ".join(read_string(stanza, "installHint").split()),
        cluster_config=_exec_extension(cluster),
    )


def _exec_extension(cluster: Entry) -> str:
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
