"""The aws catalog for the provider registry: the shared cloud catalog over aws's fetchers
(prices; the account's quotas, usage and reservations)."""

from providers.cloud.catalog import factory
from providers.core.env import ENV_AWS_DEFAULT_REGION, ENV_AWS_REGION
from providers.models import aws_region

catalog = factory(
    "aws",
    "providers.aws.fetch:AwsFetcher",
    "us-east-1",
    accounts="providers.aws.accounts:AwsAccounts",
    quota_map="providers.aws.families:AwsQuotaMap",
    region_env=(ENV_AWS_REGION, ENV_AWS_DEFAULT_REGION),
    upstream_region=aws_region,
)
