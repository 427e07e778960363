"""What this shoal would use, where it comes from: `shoal config` (no network)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from providers.core import env as env_names
from providers.core.errors import ShoalError, is_secret_name

if TYPE_CHECKING:
    from providers.core.settings import Settings



@dataclass(frozen=True)
class SetupItem:
    """One effective setting: its name, its value (data: a path, a URL, a name; null when
    there is none to show), where the value comes from, and what a person should know about
    it (`note`: absent, hidden, invalid), kept out of the value so scripts read data."""

    name: str
    value: str | None
    source: str
    note: str | None = None

    @property
    def shown(self) -> str:
        """The table's cell: the value with its note beside it, or the note alone."""
        if self.value is None:
            return self.note or ""
        return self.value if self.note is None else f"{self.value} ({self.note})"

    def to_json(self) -> dict[str, str | None]:
        return {"name": self.name, "value": self.value, "source": self.source, "note": self.note}


def known_env_vars() -> list[str]:
    """Every environment variable shoal reads (providers/core/env.py declares each once)."""
    return sorted(
        {v for k, v in vars(env_names).items() if k.startswith("ENV_") and isinstance(v, str)}
    )


def effective(settings: Settings, environ: Mapping[str, str] | None = None) -> list[SetupItem]:
    from drivers.container.engine import locate
    from drivers.image.store import images_dir
    from drivers.paths import workspaces_dir

    environ = os.environ if environ is None else environ
    paths = settings.paths
    home = f"{env_names.ENV_HOME}" if paths.home_from_env else "platformdirs"
    config_from = f"--config / {env_names.ENV_CONFIG}" if paths.config_named else home
    absent = None if paths.config_file.exists() else "absent: defaults apply"
    items = [
        SetupItem("config file", str(paths.config_file), config_from, absent),
        _ledger_item(settings, home),
        SetupItem("workspaces", str(workspaces_dir(paths)), home),
        SetupItem("catalog cache", str(paths.cache_dir / "catalog.sqlite"), home),
        SetupItem("images dir", str(images_dir(settings)), _images_source(settings, home)),
    ]
    try:
        engine = locate("", environ)
        engine_from = (
            env_names.ENV_DOCKER_HOST
            if environ.get(env_names.ENV_DOCKER_HOST)
            else ("first socket found" if engine != "unix:///var/run/docker.sock" else "default")
        )
    except ShoalError as exc:
        bad = SetupItem("container engine", None, env_names.ENV_DOCKER_HOST, f"invalid: {exc}")
        items.append(bad)
    else:
        items.append(SetupItem("container engine", engine, engine_from))
    items.append(_kube_context(environ))
    for name in known_env_vars():
        if name in environ:
            if is_secret_name(name):
                items.append(SetupItem(f"${name}", None, "environment", "set (hidden)"))
            elif name == env_names.ENV_LEDGER_URL:  # a URL may hold a password
                from drivers.ledger.url import redact

                items.append(SetupItem(f"${name}", redact(environ[name]), "environment"))
            else:
                items.append(SetupItem(f"${name}", environ[name], "environment"))
    return items


def _ledger_item(settings: Settings, home: str) -> SetupItem:
    """The SQLite file, or the team ledger's URL without its password and where it was set."""
    from drivers.ledger.url import ledger_url
    from drivers.paths import ledger_file

    try:
        found = ledger_url(settings)
    except ShoalError as exc:
        return SetupItem("ledger", None, "[ledger] url", f"invalid: {exc}")
    if found is None:
        return SetupItem("ledger", str(ledger_file(settings.paths)), home)
    return SetupItem("ledger", found.shown, found.where.split(":")[0], "PostgreSQL (team)")


def _images_source(settings: Settings, home: str) -> str:
    from drivers.image.store import image_settings
    from providers.core.env import ENV_IMAGE_DIR

    if settings.env.get(ENV_IMAGE_DIR):
        return ENV_IMAGE_DIR
    return "config [image] dir" if image_settings(settings).get("dir") else home


def _kube_context(environ: Mapping[str, str]) -> SetupItem:
    from providers.kubernetes.kubeconfig import list_contexts

    chosen = environ.get(env_names.ENV_KUBE_CONTEXT)
    try:
        names, current = list_contexts(environ)
    except ShoalError:
        return SetupItem(
            "kubernetes context", None, env_names.ENV_KUBECONFIG, "none (no kubeconfig)"
        )
    if chosen:
        return SetupItem("kubernetes context", chosen, env_names.ENV_KUBE_CONTEXT)
    where = env_names.ENV_KUBECONFIG if environ.get(env_names.ENV_KUBECONFIG) else "~/.kube/config"
    source = f"{where} current-context"
    if not current:
        return SetupItem("kubernetes context", None, source, f"none current of {len(names)}")
    return SetupItem("kubernetes context", current, source)
