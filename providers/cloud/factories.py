"""The cloud catalogs as registry factories. The fetcher (and any credential check) is built
only when data must be fetched, so cached and --offline answers need no credentials."""

from __future__ import annotations

from typing import TYPE_CHECKING

from providers.cloud.catalog import CloudCatalog

if TYPE_CHECKING:
    from providers.cloud.offers import Fetcher
    from providers.settings import Settings


def aws(settings: Settings) -> CloudCatalog:
    def fetcher() -> Fetcher:
        from providers.aws.fetch import AwsFetcher

        return AwsFetcher.from_settings(settings)

    return CloudCatalog("aws", settings, fetcher, "us-east-1")


def azure(settings: Settings) -> CloudCatalog:
    def fetcher() -> Fetcher:
        from providers.azure.fetch import AzureFetcher

        return AzureFetcher.from_settings(settings)

    return CloudCatalog("azure", settings, fetcher, "eastus")


def gcp(settings: Settings) -> CloudCatalog:
    def fetcher() -> Fetcher:
        from providers.gcp.fetch import GcpFetcher

        return GcpFetcher.from_settings(settings)

    return CloudCatalog("gcp", settings, fetcher, "us-central1")
