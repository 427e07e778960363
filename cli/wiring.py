"""Composition root: settings from flags and environment, the ledger wired into providers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from providers.core.settings import Sections, Settings

if TYPE_CHECKING:
    from drivers.service import Drivers
    from providers.core.usage import AllocationUsage
    from providers.registry import Catalog


def _plugin_providers() -> list[str]:
    from providers.registry import provider_names  # entry points: scanned only when needed

    return provider_names()


# The config file's tables: the providers', the drivers' and the ledger's (a plugin provider
# reads a table of its own name).
CONFIG_SECTIONS = Sections(
    builtin=("alloc", "aws", "azure", "drivers", "gcp", "image", "kubernetes", "ledger", "local"),
    plugins=_plugin_providers,
)


def settings() -> Settings:
    return Settings.from_env(sections=CONFIG_SECTIONS)


def with_freshness(
    settings_: Settings, refresh: bool, offline: bool, max_age: str | None
) -> Settings:
    """Settings carrying --refresh/--offline/--max-age, and stderr for warnings and progress."""
    from cli import output, progress
    from providers.core.errors import UsageError
    from providers.core.settings import Freshness
    from providers.core.timeutil import parse_duration

    if refresh and offline:
        raise UsageError("--refresh and --offline contradict each other; give one of them")
    settings_.freshness = Freshness(
        refresh=refresh,
        offline=offline,
        max_age=parse_duration(max_age, "--max-age") if max_age else None,
    )
    settings_.warn = output.warn
    settings_.progress = progress.fetch_progress()
    return settings_


def catalog(provider: str, settings_: Settings) -> Catalog:
    from providers.registry import new_catalog

    if provider == "local":
        settings_.allocations = _LedgerUsage(settings_)
    return new_catalog(provider, settings_)


class _LedgerUsage:
    """The local provider's allocated figures: what local drivers hold in the ledger.

    The ledger (and SQLite) is imported only when a command asks for usage, so `regions`
    and `types` do not pay for it.
    """

    def __init__(self, settings_: Settings) -> None:
        self._settings = settings_

    def active_local_usage(self) -> list[AllocationUsage]:
        from drivers.ledger.open import is_team, open_ledger
        from drivers.paths import ledger_file

        if not is_team(self._settings) and not ledger_file(self._settings.paths).exists():
            return []  # nothing was ever allocated here: no need for SQLite at all
        from providers.core.timeutil import utcnow

        ledger = open_ledger(self._settings)
        try:
            usages = ledger.active_local_usage()
        finally:
            ledger.close()
        # Past its lifetime an allocation holds nothing: its supervisor ended it at its
        # expiry (and the next alloc, status or free marks it EXPIRED).
        now = utcnow()
        return [u for u in usages if u.expires is None or u.expires > now]


def drivers(settings_: Settings) -> Drivers:
    from drivers.service import Drivers

    settings_.paths.ensure_dir(settings_.paths.state_dir)
    return Drivers.from_settings(settings_)
