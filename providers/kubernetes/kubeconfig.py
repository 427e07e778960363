"""Connect like kubectl: find, load and merge the kubeconfig files, and resolve a context to
its cluster and user.

Sources, in kubectl's order: the files listed in KUBECONFIG (merged: the first file that sets
a cluster, user or context name wins, `current-context` comes from the first file that has
one), else `~/.kube/config`, else the pod's service account (`in_cluster`). Each file is
YAML (`providers/core/yamlsafe`: a few aliases, no bombs) checked against
`kubeconfig_model`. Relative paths in a file are relative to that file's directory. A
cluster's fields are read by `endpoint`, a user's by `credentials`; exec plugins are run
by `exec_plugin`.

Docs:
- https://kubernetes.io/docs/concepts/configuration/organize-cluster-access-kubeconfig/
- https://kubernetes.io/docs/reference/config-api/kubeconfig.v1/
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from providers.core.env import ENV_KUBECONFIG
from providers.core.errors import ConfigError
from providers.kubernetes.connection import Connection
from providers.kubernetes.credentials import user_fields
from providers.kubernetes.endpoint import cluster_fields
from providers.kubernetes.in_cluster import (
    IN_CLUSTER,
    SERVICE_ACCOUNT_DIR,
    in_cluster,
    in_pod,
    pod_namespace,
)
from providers.kubernetes.kubeconfig_fields import Entry

if TYPE_CHECKING:
    from providers.kubernetes.kubeconfig_model import Cluster, Context, User

E = TypeVar("E")


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


def context_targets(
    env: Mapping[str, str], *, home: Path | None = None
) -> tuple[dict[str, tuple[str, str]], str]:
    """Each context's (cluster, namespace) as `load_connection` would resolve them (the
    namespace `default` when the context names none, as kubectl), and the current context;
    no users or credentials are read: what a region list shows of each context."""
    merged, _ = _load_merged(env, home)
    if merged.is_empty():
        if in_pod(env):
            return {IN_CLUSTER: (IN_CLUSTER, pod_namespace(env, SERVICE_ACCOUNT_DIR))}, IN_CLUSTER
        load_connection(env, None, home=home)  # raises the one clear "no configuration" error
    targets = {
        name: (entry.body.cluster, entry.body.namespace or "default")
        for name, entry in sorted(merged.contexts.items())
    }
    return targets, merged.current_context


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
    clusters: dict[str, Entry[Cluster]] = field(default_factory=dict)
    users: dict[str, Entry[User]] = field(default_factory=dict)
    contexts: dict[str, Entry[Context]] = field(default_factory=dict)
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
    from providers.kubernetes.kubeconfig_model import check

    checked = check(data, path)
    result.current_context = checked.current_context
    for index, cluster in enumerate(checked.clusters):
        where = f"clusters[{index}].cluster"
        result.clusters.setdefault(cluster.name, Entry(cluster.cluster, path, where))
    for index, user in enumerate(checked.users):
        where = f"users[{index}].user"
        result.users.setdefault(user.name, Entry(user.user, path, where))
    for index, context in enumerate(checked.contexts):
        where = f"contexts[{index}].context"
        result.contexts.setdefault(context.name, Entry(context.context, path, where))
    return result


# -- merged view ---------------------------------------------------------------------------


@dataclass
class _Merged:
    files: list[Path]
    clusters: dict[str, Entry[Cluster]]
    users: dict[str, Entry[User]]
    contexts: dict[str, Entry[Context]]
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
        cluster_name = context.body.cluster
        user_name = context.body.user
        namespace = context.body.namespace or "default"
        if not cluster_name:
            raise ConfigError(f"{context.at('cluster')}: context {name!r} names no cluster")
        cluster = self.clusters.get(cluster_name)
        if cluster is None:
            raise ConfigError(
                f"{context.at('cluster')}: context {name!r} refers to cluster {cluster_name!r}, "
                f"which no kubeconfig defines (known: {_names(self.clusters)})"
            )
        user: Entry[User] | None = None
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


def _names(entries: Mapping[str, Entry[Any]]) -> str:
    return ", ".join(sorted(entries)) or "none"


def _merge(files: list[_File]) -> _Merged:
    merged = _Merged([f.path for f in files], {}, {}, {}, "")
    for one in files:
        _first_wins(merged.clusters, one.clusters)
        _first_wins(merged.users, one.users)
        _first_wins(merged.contexts, one.contexts)
        merged.current_context = merged.current_context or one.current_context
    return merged


def _first_wins(into: dict[str, E], more: Mapping[str, E]) -> None:
    for name, entry in more.items():
        into.setdefault(name, entry)
