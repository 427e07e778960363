"""The aws catalog for the provider registry: the shared cloud catalog over aws's fetcher."""

from providers.cloud.catalog import factory

catalog = factory("aws", "providers.aws.fetch:AwsFetcher", "us-east-1")
