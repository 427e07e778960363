"""What reaching one cluster as one user takes: the `Connection` a kubeconfig context or the
in-cluster service account yields, and the exec credential plugin stanza it may carry."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


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
