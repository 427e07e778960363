"""The gcp catalog for the provider registry: the shared cloud catalog over gcp's fetchers
(prices; the project's quotas, reservations and future reservations)."""

from providers.cloud.catalog import factory

catalog = factory(
    "gcp",
    "providers.gcp.fetch:GcpFetcher",
    "us-central1",
    accounts="providers.gcp.accounts:GcpAccounts",
    quota_map="providers.gcp.quota_map:GcpQuotaMap",
)
