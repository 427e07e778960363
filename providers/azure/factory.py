"""The azure catalog for the provider registry: the shared cloud catalog over azure's
fetchers (prices; the subscription's quotas, usage and capacity reservations)."""

from providers.cloud.catalog import factory

catalog = factory(
    "azure",
    "providers.azure.fetch:AzureFetcher",
    "eastus",
    accounts="providers.azure.accounts:AzureAccounts",
    quota_map="providers.azure.quota_map:AzureQuotaMap",
)
