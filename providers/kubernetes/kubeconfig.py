"""Connect like kubectl: find, load and merge the kubeconfig files, and resolve a context to
its cluster and user.

Sources, in kubectl's order: the files listed in KUBECONFIG (merged: the first file that sets
a cluster, user or context name wins, `current-context` comes from the first file that has
one), else `~/.kube/config`, else the pod's service account (`in_cluster`). Relative paths
in a file are relative to that file's directory. A cluster's fields are read by `endpoint`,
a user's by `credentials`; exec plugins are run by `exec_plugin`.

Docs:
- https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/
- https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from providers.core.env import ENV_KUBECONFIG
from providers.core.errors import ConfigError
from providers.kubernetes.connection import Connection
from providers.kubernetes.credentials import read_token_file, user_fields
from providers.kubernetes.endpoint import cluster_fields
from providers.kubernetes.exec_plugin import ExecCredential, exec_credential
from providers.kubernetes.in_cluster import IN_CLUSTER, SERVICE_ACCOUNT_DIR, in_cluster, in_pod
from providers.kubernetes.kubeconfig_fields import Entry, kind, read_string

# Connection, ExecCredential, exec_credential and read_token_file live in connection,
# exec_plugin and credentials; providers/kubernetes/client.py still imports them from here,
# so they stay importable here until it imports them from their own modules.
__all__ = [
    "Connection",
    "ExecCredential",
    "exec_credential",
    "list_contexts",
    "load_connection",
    "read_token_file",
]


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
        if in_pod(env):
            if context not in (None, "", IN_CLUSTER):
                raise ConfigError(
                    f"unknown context {context!r}: no kubeconfig was found and the in-cluster "
                    f"service account offers only {IN_CLUSTER!r}; set {ENV_KUBECONFIG}"
                )
            return in_cluster(env, service_account_dir)
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
        if in_pod(env):
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
class _File:
    path: Path
    clusters: dict[str, Entry] = field(default_factory=dict)
    users: dict[str, Entry] = field(default_factory=dict)
    contexts: dict[str, Entry] = field(default_factory=dict)
    current_context: str = ""


KUBECONFIG_ALIASES = 64


def _load_file(path: Path) -> _File:
    import yaml

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the kubeconfig ({reason})") from None
    from providers.core import yamlsafe

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
        raise ConfigError(f"{path}: a kubeconfig must be a YAML mapping, got {kind(data)}")
    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise ConfigError(f"{path}: current-context must be a string, got {kind(current)}")
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
            raise ConfigError(f"{path}: {section} must be a list, got {kind(items)}")
        for index, item in enumerate(items):
            where = f"{section}[{index}]"
            if not isinstance(item, dict):
                raise ConfigError(f"{path}: {where} must be a mapping, got {kind(item)}")
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise ConfigError(f"{path}: {where}.name must be a non-empty string")
            body = item.get(inner)
            if body is None:
                body = {}
            if not isinstance(body, dict):
                raise ConfigError(f"{path}: {where}.{inner} must be a mapping, got {kind(body)}")
            into.setdefault(name, Entry(body, path, f"{where}.{inner}"))
    return result


# -- merged view ---------------------------------------------------------------------------


@dataclass
class _Merged:
    files: list[Path]
    clusters: dict[str, Entry]
    users: dict[str, Entry]
    contexts: dict[str, Entry]
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
        cluster_name = read_string(context, "cluster")
        user_name = read_string(context, "user")
        namespace = read_string(context, "namespace") or "default"
        if not cluster_name:
            raise ConfigError(f"{context.at('cluster')}: context {name!r} names no cluster")
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            raise ConfigError(
                f"{context.at('cluster')}: context {name!r} refers to cluster {cluster_name!r}, "
                f"which no kubeconfig defines (known: {_names(self.clusters)})"
            )
        user: Entry | None = None
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
        parts.update(cluster_fields(cluster, cluster_name))
        if user is not None:
            parts.update(user_fields(user, cluster))
        return Connection(**parts)


def _names(entries: Mapping[str, Entry]) -> str:
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
