"""The gcp catalog for the provider registry: the shared cloud catalog over gcp's fetcher."""

from providers.cloud.catalog import factory

catalog = factory("gcp", "providers.gcp.fetch:GcpFetcher", "us-central1")
