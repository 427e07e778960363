"""A cloud provider's settings: environment first, then its config table, then the default."""

from __future__ import annotations

from datetime import timedelta

from providers.errors import ConfigError
from providers.numbers import is_number
from providers.settings import Settings, config_section

DEFAULT_TTL_HOURS = 24.0


def setting(settings: Settings, provider: str, key: str, env_var: str, default: str = "") -> str:
    """`env_var` if set, else `[provider] key` from the config file, else `default`."""
    value = settings.env.get(env_var, "")
    if value:
        return value
    section = config_section(settings.config, provider)
    configured = section.get(key, default)
    if not isinstance(configured, str):
        raise ConfigError(f"config [{provider}] {key} must be a string, got {configured!r}")
    return configured


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
    value = config_section(settings.config, provider).get("ttl_hours", DEFAULT_TTL_HOURS)
    if not is_number(value) or value <= 0 or value > 24 * 365 * 100:
        raise ConfigError(
            f"config [{provider}] ttl_hours must be a number of hours > 0 (at most a "
            f"century), got {value!r}"
        )
    return timedelta(hours=float(value))
