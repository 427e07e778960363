"""Test doubles shared by several test modules."""

from __future__ import annotations

from providers.core.settings import Settings
from providers.models import (
    InstanceTypeSpec,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricing,
)


class EmptyCatalog:
    """A complete catalog with one region and nothing in it (a provider for registry tests)."""

    def __init__(self, label: str, region: RegionSpec, settings: Settings | None = None) -> None:
        self.label = label
        self.region = region
        self.settings = settings

    def provider(self) -> str:
        return self.label

    def list_regions(self) -> list[RegionSpec]:
        return [self.region]

    def list_instance_types(self, region: RegionSpec | None) -> list[InstanceTypeSpec]:
        return []

    def list_resources(self, opts: ResourceListOptions) -> list[Resource]:
        return []

    def list_resource_predictions(self, opts: ResourceListOptions) -> dict[str, Resource]:
        return {}

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]:
        return []

    def list_pricing_predictions(self, opts: ResourceListOptions) -> dict[str, ResourcePricing]:
        return {}
