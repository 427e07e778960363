"""Composition root: settings from flags and environment, the ledger wired into providers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from providers.settings import Settings

if TYPE_CHECKING:
    from drivers.service import Drivers
    from providers.catalog import Catalog
    from providers.usage import AllocationUsage


def settings() -> Settings:
    return Settings.from_env()


def with_freshness(
    settings_: Settings, refresh: bool, offline: bool, max_age: str | None
) -> Settings:
    """Settings carrying --refresh/--offline/--max-age, and stderr for warnings and progress."""
    from cli import output
    from providers.errors import UsageError
    from providers.settings import Freshness
    from providers.timeutil import parse_duration

    if refresh and offline:
        raise UsageError("--refresh and --offline contradict each other; give one of them")
    settings_.freshness = Freshness(
        refresh=refresh,
        offline=offline,
        max_age=parse_duration(max_age, "--max-age") if max_age else None,
    )
    settings_.warn = output.warn
    settings_.progress = output.fetch_progress()
    return settings_


def catalog(provider: str, settings_: Settings) -> Catalog:
    from providers.catalog import new_catalog

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
        if not self._settings.paths.ledger_file.exists():
            return []  # nothing was ever allocated here: no need for SQLite at all
        from drivers.ledger import Ledger

        ledger = Ledger(self._settings.paths.ledger_file)
        try:
            return ledger.active_local_usage()
        finally:
            ledger.close()


def drivers(settings_: Settings) -> Drivers:
    from drivers.service import Drivers

    settings_.paths.ensure_dir(settings_.paths.state_dir)
    return Drivers.from_settings(settings_)
