"""This host's supply of vCPUs and GiB for a driver that hands it out (the process driver):
what `shoal resources` calls the local supply, host minus the [local] reserve, without the
catalog's models (their ~16 dataclasses are ~10 ms of every process `alloc`)."""

from __future__ import annotations

from providers.core.settings import Settings, config_model
from providers.local.host import detect

PROVIDER = "local"


def local_supply(settings: Settings) -> tuple[float, float]:
    """(vCPUs, GiB) of the host minus the reserve, never below zero: the same figures as
    LocalCatalog.supply()."""
    host = detect(settings.paths.cache_dir / "host.json")
    reserve_cpu = reserve_ram_gib = 0.0
    if PROVIDER in settings.config:  # a [local] table: checked, as the catalog checks it
        from providers.sections import LocalSection

        local = config_model(settings, LocalSection, PROVIDER)
        reserve_cpu, reserve_ram_gib = local.reserve_cpu, local.reserve_ram_gib
    return net_supply(host.vcpus, host.memory_gib, reserve_cpu, reserve_ram_gib)


def net_supply(
    vcpus: float, memory_gib: float, reserve_cpu: float, reserve_ram_gib: float
) -> tuple[float, float]:
    """(vCPUs, GiB) left of a host's after the reserve, never below zero; GiB to 0.01."""
    return max(0.0, vcpus - reserve_cpu), max(0.0, round(memory_gib - reserve_ram_gib, 2))
