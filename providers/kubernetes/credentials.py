"""Who a kubeconfig user is: a bearer token (a readable `tokenFile` beats `token`), a client
certificate and key (`*-data` beats the path twins), basic auth, or an exec credential
plugin's stanza, checked here and run by `exec_plugin`; legacy auth providers are refused."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.core.errors import ConfigError, CredentialsError
from providers.kubernetes.connection import ExecSpec
from providers.kubernetes.kubeconfig_fields import Entry, read_path

if TYPE_CHECKING:
    from providers.kubernetes.kubeconfig_model import Cluster, Exec, User

EXEC_API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
_EXEC_EXTENSION = "client.authentication.k8s.io/exec"
_INTERACTIVE_MODES = ("Never", "IfAvailable", "Always")


def user_fields(user: Entry[User], cluster: Entry[Cluster]) -> dict[str, Any]:
    """The `Connection` fields a user entry sets; `cluster` is for its exec plugin."""
    body = user.body
    parts: dict[str, Any] = {}
    token = body.token
    token_file = read_path(user, "tokenFile", body.token_file)
    if token_file is not None:
        token = read_token_file(token_file, user.at("tokenFile")) or token
    parts["token"] = token
    parts["token_file"] = token_file
    cert = body.client_certificate_data
    key = body.client_key_data
    parts["client_cert_data"] = cert
    parts["client_cert_file"] = (
        None if cert else read_path(user, "client-certificate", body.client_certificate)
    )
    parts["client_key_data"] = key
    parts["client_key_file"] = None if key else read_path(user, "client-key", body.client_key)
    has_cert = cert is not None or parts["client_cert_file"] is not None
    has_key = key is not None or parts["client_key_file"] is not None
    if has_cert != has_key:
        missing = "client-key(-data)" if has_cert else "client-certificate(-data)"
        raise ConfigError(f"{user.at(missing)} is missing; a client certificate needs its key")
    parts["username"] = body.username
    parts["password"] = body.password
    if body.exec is not None:
        stanza = Entry(body.exec, user.file, f"{user.where}.exec")
        parts["exec_plugin"] = _exec_spec(stanza, cluster)
    elif body.auth_provider is not None and not (token or has_cert or body.username):
        raise ConfigError(
            f"{user.at('auth-provider')}: the legacy {body.auth_provider.name!r} auth provider "
            "is not supported; use an exec credential plugin (for example kubelogin or "
            "gke-gcloud-auth-plugin)"
        )
    return parts


def _exec_spec(stanza: Entry[Exec], cluster: Entry[Cluster]) -> ExecSpec:
    spec = stanza.body
    command = spec.command
    if not command:
        raise ConfigError(f"{stanza.at('command')} is missing; name the credential plugin")
    if os.sep in command and not os.path.isabs(command):
        # The docs: a command with a path separator is relative to the kubeconfig's directory.
        command = str(stanza.file.parent / command)
    api_version = spec.api_version
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(
            f"{stanza.at('apiVersion')}: {api_version or 'missing'}; use one of "
            f"{', '.join(EXEC_API_VERSIONS)}"
        )
    mode = spec.interactive_mode
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
    return ExecSpec(
        command=command,
        api_version=api_version,
        args=tuple(spec.args),
        env=tuple((item.name, item.value) for item in spec.env),
        interactive_mode=mode,
        provide_cluster_info=spec.provide_cluster_info,
        install_hint=" ".join(spec.install_hint.split()),
        cluster_config=_exec_extension(cluster.body),
    )


def _exec_extension(cluster: Cluster) -> str:
    for item in cluster.extensions:
        if item.name == _EXEC_EXTENSION:
            return json.dumps(item.extension)
    return ""


def read_token_file(path: Path, where: str) -> str:
    """A bearer token file's content, stripped; an unreadable file names the field."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise CredentialsError(f"{where}: cannot read token file {path} ({reason})") from None
