"""The spec's Catalog interface and its registry (`register`, `new_catalog`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from providers.core.plugins import LazyRegistry

if TYPE_CHECKING:
    from providers.core.settings import Settings
    from providers.models import (
        InstanceTypeSpec,
        RegionSpec,
        Resource,
        ResourceListOptions,
        ResourcePricing,
    )


class Catalog(Protocol):
    """Resource discovery and pricing for one provider."""

    def provider(self) -> str: ...

    def list_regions(self) -> list[RegionSpec]: ...

    def list_instance_types(self, region: RegionSpec | None) -> list[InstanceTypeSpec]: ...

    def list_resources(self, opts: ResourceListOptions) -> list[Resource]: ...

    def list_resource_predictions(self, opts: ResourceListOptions) -> dict[str, Resource]: ...

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]: ...

    def list_pricing_predictions(self, opts: ResourceListOptions) -> dict[str, ResourcePricing]: ...


@runtime_checkable
class ResourcesInRegions(Protocol):
    """A catalog that answers several regions at once (concurrently), "all" among them."""

    def list_resources_in(
        self, regions: Sequence[str], opts: ResourceListOptions
    ) -> list[Resource]: ...


@runtime_checkable
class KnowsQuotas(Protocol):
    """A catalog that knows the account's quotas: `pricing --available` asks it to drop
    the types the account cannot launch now."""

    def keep_launchable(self, pricings: Sequence[ResourcePricing]) -> None: ...


Factory = Callable[["Settings"], Catalog]


_REGISTRY: LazyRegistry[Factory] = LazyRegistry(
    "provider",
    "shoal.providers",
    {
        "local": "providers.local.catalog:LocalCatalog.from_settings",
        "aws": "providers.aws.factory:catalog",
        "azure": "providers.azure.factory:catalog",
        "gcp": "providers.gcp.factory:catalog",
        "kubernetes": "providers.kubernetes.catalog:KubernetesCatalog.from_settings",
    },
)


def register(provider: str, factory: Factory) -> None:
    """Add a provider factory; last writer wins, ahead of built-ins and entry points."""
    _REGISTRY.register(provider, factory)


def provider_names() -> list[str]:
    return _REGISTRY.names()


def builtin_provider_names() -> list[str]:
    """The providers shoal ships (what generated completion scripts offer)."""
    return _REGISTRY.builtin_names()


def new_catalog(provider: str, settings: Settings | None = None) -> Catalog:
    """Build the catalog for `provider` from settings (default: from the environment)."""
    factory = _REGISTRY.get(provider)
    if settings is None:
        from providers.core.settings import Settings

        settings = Settings.from_env()
    return factory(settings)
