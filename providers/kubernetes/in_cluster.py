"""The pod's service account as a connection, kubectl's last source: the API server from
KUBERNETES_SERVICE_HOST and _PORT, the mounted token, CA and namespace.

Docs: https://kubernetes.io/docs/tasks/run-application/access-api-from-pod/
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from providers.core.env import ENV_KUBECONFIG
from providers.core.errors import ConfigError, CredentialsError
from providers.core.urls import UrlError, display, parse
from providers.kubernetes.connection import Connection
from providers.kubernetes.credentials import read_token_file

ENV_SERVICE_HOST = "KUBERNETES_SERVICE_HOST"
ENV_SERVICE_PORT = "KUBERNETES_SERVICE_PORT"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
IN_CLUSTER = "in-cluster"


def in_pod(env: Mapping[str, str]) -> bool:
    """Whether the environment is a pod's, with the API server's address set."""
    return bool(env.get(ENV_SERVICE_HOST) and env.get(ENV_SERVICE_PORT))


def pod_namespace(env: Mapping[str, str], directory: Path) -> str:
    """The pod's namespace: POD_NAMESPACE, else the service account's, else `default`."""
    namespace = env.get("POD_NAMESPACE", "").strip()
    if not namespace and (directory / "namespace").is_file():
        namespace = (directory / "namespace").read_text(encoding="utf-8").strip()
    return namespace or "default"


def in_cluster(env: Mapping[str, str], directory: Path) -> Connection:
    """The service account's connection; `in_pod(env)` must hold."""
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
    namespace = pod_namespace(env, directory)
    return Connection(
        server=server,
        context=IN_CLUSTER,
        cluster=IN_CLUSTER,
        user="serviceaccount",
        namespace=namespace,
        ca_file=ca_file if ca_file.is_file() else None,
        token=read_token_file(token_file, "in-cluster"),
        token_file=token_file,
        source=f"the in-cluster service account ({directory})",
    )
