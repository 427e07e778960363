"""The config file's provider tables as models: [local], [aws], [azure], [gcp], [kubernetes].

([image] is drivers/image/config.py's, each [drivers."KIND/INSTANCE"] its driver's.) A
setting left out is None where the reader has the default (an environment variable may
win over the file, a fetcher knows its own URL), else the documented default.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from providers.core.strict import MAX_SETTING, NonNegative, Strict
from providers.defaults import DEFAULT_TTL_HOURS

HOURS_PER_CENTURY = 24 * 365 * 100
# The shortest freshness: a few seconds. Below it every answer is stale at once (1e-300
# hours rounds to no time at all), which no one means.
MIN_TTL_HOURS = 0.001
MIN_TTL_MINUTES = 0.01
PRICE = f"USD per hour, 0 to {MAX_SETTING:,}"


class Pricing(Strict):
    on_demand: NonNegative | None = Field(None, description=PRICE)
    spot: NonNegative | None = Field(None, description=PRICE)
    scheduled: NonNegative | None = Field(None, description=PRICE)


class LocalSection(Strict):
    reserve_cpu: NonNegative = Field(
        0.0, description=f"vCPUs kept back for the host, 0 to {MAX_SETTING:,}"
    )
    reserve_ram_gib: NonNegative = Field(
        0.0, description=f"GiB kept back for the host, 0 to {MAX_SETTING:,}"
    )
    pricing: Pricing = Field(default_factory=Pricing)


class CloudSection(Strict):
    """A cloud catalog's table; [aws], [azure] and [gcp] add their own keys."""

    ttl_hours: Annotated[float, Field(ge=MIN_TTL_HOURS, le=HOURS_PER_CENTURY)] = Field(
        DEFAULT_TTL_HOURS,
        description=f"hours cached prices stay fresh, {MIN_TTL_HOURS} to a century "
        f"({HOURS_PER_CENTURY})",
    )
    default_region: str | None = None
    quota_ttl_minutes: Annotated[float, Field(ge=MIN_TTL_MINUTES, le=HOURS_PER_CENTURY * 60)] = (
        Field(
            5.0,
            description=f"minutes cached quotas and usage stay fresh, {MIN_TTL_MINUTES} to a "
            f"century ({HOURS_PER_CENTURY * 60})",
        )
    )


class AwsSection(CloudSection):
    pricing_url: str | None = None
    ec2_url: str | None = None
    quotas_url: str | None = None
    ssm_url: str | None = None


class AzureSection(CloudSection):
    prices_url: str | None = None
    management_url: str | None = None
    subscription: str | None = None
    subscription_id: str | None = None  # subscription's older name, still read


class GcpSection(CloudSection):
    billing_url: str | None = None
    compute_url: str | None = None
    project: str | None = None


class KubernetesSection(Strict):
    context: str | None = None
    pool_label: Annotated[str, Field(min_length=1)] | None = Field(
        None, description="the node label that names a pool"
    )
    breakdown_labels: list[str] | None = Field(None, description="node label names")
    spot_labels: dict[str, list[str]] | None = Field(
        None, description='label = [values meaning spot], e.g. "example.com/capacity" = ["spot"]'
    )


CLOUDS: dict[str, type[CloudSection]] = {
    "aws": AwsSection,
    "azure": AzureSection,
    "gcp": GcpSection,
}
SECTIONS: dict[str, type[Strict]] = {
    "local": LocalSection,
    **CLOUDS,
    "kubernetes": KubernetesSection,
}
