"""Composition root: settings from flags and environment, the ledger wired into providers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from providers.settings import Settings

if TYPE_CHECKING:
    from drivers.service import Drivers
    from providers.catalog import Catalog


def settings() -> Settings:
    return Settings.from_env()


def catalog(provider: str, settings_: Settings) -> Catalog:
    from providers.catalog import new_catalog

    if provider == "local":
        # The local provider's allocated figures are what local drivers hold in the ledger.
        from drivers.ledger import Ledger

        settings_.allocations = Ledger(settings_.paths.ledger_file, create=False)
    return new_catalog(provider, settings_)


def drivers(settings_: Settings) -> Drivers:
    from drivers.service import Drivers

    settings_.paths.ensure_dir(settings_.paths.state_dir)
    return Drivers.from_settings(settings_)
