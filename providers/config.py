"""A provider's settings: environment first, then its config table, then the default
(models in providers/sections.py, checked only when the table is there)."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from providers.core.errors import ConfigError
from providers.core.settings import Settings, config_model
from providers.defaults import DEFAULT_TTL_HOURS, DEFAULT_TTL_MINUTES

if TYPE_CHECKING:
    from providers.core.strict import Strict
    from providers.sections import CloudSection



def section(settings: Settings, provider: str) -> Strict:
    """The provider's table, checked by its model ([aws], [kubernetes]...; another cloud's
    by the keys every cloud table has)."""
    from providers.sections import SECTIONS, CloudSection

    return config_model(settings, SECTIONS.get(provider, CloudSection), provider)


def cloud_section(settings: Settings, provider: str) -> CloudSection:
    from providers.sections import CLOUDS, CloudSection

    return config_model(settings, CLOUDS.get(provider, CloudSection), provider)


def setting(settings: Settings, provider: str, key: str, env_var: str, default: str = "") -> str:
    """`env_var` if set, else `[provider] key` from the config file, else `default`."""
    value = settings.env.get(env_var, "")
    if value:
        return value
    if provider not in settings.config:  # nothing to check: pydantic stays unimported
        return default
    configured = getattr(section(settings, provider), key)
    return default if configured is None else str(configured)


def base_url(settings: Settings, provider: str, key: str, env_var: str, default: str) -> str:
    url = setting(settings, provider, key, env_var, default).rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise ConfigError(
            f"{env_var} / config [{provider}] {key}: {url!r} is not an http(s) URL; "
            f"set it to a URL such as {default}"
        )
    return url


def ttl(settings: Settings, provider: str) -> timedelta:
    """How long a refresh stays fresh: `[provider] ttl_hours` (default 24)."""
    if provider not in settings.config:
        return timedelta(hours=DEFAULT_TTL_HOURS)
    return timedelta(hours=cloud_section(settings, provider).ttl_hours)


def quota_ttl(settings: Settings, provider: str) -> timedelta:
    """How long an account's quotas and usage stay fresh: `[provider] quota_ttl_minutes`
    (default 5: usage changes as instances start and stop)."""

    if provider not in settings.config:
        return timedelta(minutes=DEFAULT_TTL_MINUTES)
    return timedelta(minutes=cloud_section(settings, provider).quota_ttl_minutes)
