"""The azure catalog for the provider registry: the shared cloud catalog over azure's fetcher."""

from providers.cloud.catalog import factory

catalog = factory("azure", "providers.azure.fetch:AzureFetcher", "eastus")
