"""Exec credential plugins: run a user's plugin by client-go's credential plugin protocol,
check its ExecCredential answer, and cache it in-process, per plugin and server, until it
expires.

Docs:
- https://kubernetes.io/docs/reference/access-authn-authz/authentication/#client-go-credential-plugins
- https://kubernetes.io/docs/reference/config-api/client-authentication.v1/
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from providers.core.errors import CredentialsError, UsageError, scrub
from providers.kubernetes.connection import Connection, ExecSpec

ENV_EXEC_INFO = "KUBERNETES_EXEC_INFO"


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
        from providers.core.timeutil import parse_time

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
