"""The providers `shoal offers` asks without `-p`: every built-in one that can answer here.

- `local`: always (this machine);
- `aws`, `azure`: always: their price lists are public (quotas need credentials; without
  them an offer says its quotas are unknown);
- `gcp`: with an API key for its price list (`SHOAL_GCP_API_KEY`), or prices already cached
  (a shared catalog imported, an earlier run);
- `kubernetes`: when kubectl would find a cluster: a file `KUBECONFIG` names, else
  `~/.kube/config`, else a pod's service account.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from providers.core.env import ENV_GCP_API_KEY, ENV_KUBECONFIG

ORDER = ("aws", "azure", "gcp", "kubernetes", "local")


def kubeconfig_present(env: Mapping[str, str]) -> bool:
    from providers.kubernetes.in_cluster import in_pod

    listed = env.get(ENV_KUBECONFIG, "")
    if listed:
        paths = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
    else:
        paths = [Path(env.get("HOME") or Path.home()) / ".kube" / "config"]
    return any(p.is_file() for p in paths) or in_pod(env)


def configured_providers(env: Mapping[str, str], cached: Callable[[], list[str]]) -> list[str]:
    """The providers to ask; `cached` lists the providers with prices in the catalog cache
    (asked only when gcp has no key)."""
    names = {"aws", "azure", "local"}
    if env.get(ENV_GCP_API_KEY, "").strip() or "gcp" in cached():
        names.add("gcp")
    if kubeconfig_present(env):
        names.add("kubernetes")
    return [n for n in ORDER if n in names]
