"""Where and how to reach a cluster's API server, from its kubeconfig entry: the server URL
(checked here), the CA (`certificate-authority-data` beats its path twin), the TLS server
name and skip-verify."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from providers.core.errors import ConfigError
from providers.core.urls import UrlError, display, parse
from providers.kubernetes.kubeconfig_fields import Entry, read_path

if TYPE_CHECKING:
    from providers.kubernetes.kubeconfig_model import Cluster


def cluster_fields(cluster: Entry[Cluster], name: str) -> dict[str, Any]:
    """The `Connection` fields a cluster entry sets."""
    body = cluster.body
    ca_data = body.certificate_authority_data
    ca_path = body.certificate_authority
    ca_file = None if ca_data else read_path(cluster, "certificate-authority", ca_path)
    return {
        "server": _server(cluster, name),
        "ca_data": ca_data,
        "ca_file": ca_file,
        "insecure_skip_tls_verify": body.insecure_skip_tls_verify,
        "tls_server_name": body.tls_server_name,
    }


def _server(cluster: Entry[Cluster], name: str) -> str:
    """The cluster's API server URL, checked here: a malformed one is the kubeconfig's to
    fix (78), not a crash at the first request."""
    server = cluster.body.server.strip()
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
