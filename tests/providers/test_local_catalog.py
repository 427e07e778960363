"""The `local` provider built from settings: supply, allocations, windows, prices and GPUs."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.core.errors import ConfigError, UsageError
from providers.core.settings import Paths, Settings
from providers.core.timeutil import utcnow
from providers.core.usage import AllocationUsage
from providers.core.wire import format_time, to_wire
from providers.local.catalog import LocalCatalog
from providers.local.host import Gpu, parse_nvidia_smi
from providers.models import (
    ListResourceFilter,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricingItem,
    ResourceStatItem,
)
from providers.selectors import parse as parse_selectors


class FixedAllocations:
    """An allocation source with a fixed set of rows, as the ledger would report them."""

    def __init__(self, *rows: AllocationUsage) -> None:
        self.rows = list(rows)

    def active_local_usage(self) -> list[AllocationUsage]:
        return list(self.rows)


MakeCatalog = Callable[..., LocalCatalog]


@pytest.fixture(autouse=True)
def no_gpu_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with no nvidia-smi, so the host shape does not depend on this machine."""
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


@pytest.fixture
def make_catalog(home: Path) -> MakeCatalog:
    def make(
        config: dict[str, Any] | None = None, *rows: AllocationUsage, source: bool = True
    ) -> LocalCatalog:
        settings = Settings(
            paths=Paths.from_env({"SHOAL_HOME": str(home)}),
            config=config or {},
            allocations=FixedAllocations(*rows) if source else None,
        )
        return LocalCatalog.from_settings(settings)

    return make


def node_stat(res: Resource) -> ResourceStatItem:
    (node,) = res.overview
    assert node.key == "node"
    stat = node.stat.on_demand
    assert stat is not None
    return stat


def only(resources: list[Resource]) -> Resource:
    (res,) = resources
    return res


def usage(driver: str, cpu: int, ram: int, expires: datetime | None = None) -> AllocationUsage:
    return AllocationUsage(driver=driver, cpu=cpu, ram_gib=ram, expires=expires)


NOW_OPTS = ResourceListOptions()


# -- discovery ---------------------------------------------------------------------------------


def test_one_region_and_one_instance_type(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog()
    assert catalog.provider() == "local"
    (region,) = catalog.list_regions()
    assert region.name == "local"
    assert region.location  # the host name
    (spec,) = catalog.list_instance_types(None)
    assert spec.name == "host"
    assert spec.region == "local"
    assert spec.vcpus >= 1
    assert spec.memory_gib > 0
    assert spec.arch and spec.arch not in {"amd64", "aarch64"}  # normalised names
    assert (spec.gpu, spec.gpu_count, spec.gpu_memory_gib) == ("", 0, 0.0)
    assert catalog.list_instance_types(RegionSpec(name="local")) == [spec]


@pytest.mark.parametrize("method", ["types", "resources", "predictions", "pricing"])
def test_unknown_region_is_a_usage_error_with_a_suggestion(
    make_catalog: MakeCatalog, method: str
) -> None:
    catalog = make_catalog()
    region = RegionSpec(name="locale")
    opts = ResourceListOptions(region=region)
    calls: dict[str, Callable[[], object]] = {
        "types": lambda: catalog.list_instance_types(region),
        "resources": lambda: catalog.list_resources(opts),
        "predictions": lambda: catalog.list_resource_predictions(opts),
        "pricing": lambda: catalog.list_pricing(opts),
    }
    with pytest.raises(UsageError) as info:
        calls[method]()
    message = str(info.value)
    assert "'locale'" in message
    assert "did you mean local?" in message


def test_far_off_region_lists_the_known_ones(make_catalog: MakeCatalog) -> None:
    with pytest.raises(UsageError, match=r"known: local"):
        make_catalog().list_instance_types(RegionSpec(name="us-east-1"))


# -- supply, allocated, allocatable ------------------------------------------------------------


def test_supply_is_the_host_without_allocations(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog()
    spec = catalog.instance_type()
    res = only(catalog.list_resources(NOW_OPTS))
    assert res.provider == "local"
    assert res.region is not None and res.region.name == "local"
    assert res.breakdown == {}
    stat = node_stat(res)
    assert float(stat.supply["cpu"]["vcpu"]) == spec.vcpus
    assert float(stat.supply["memory"]["GiB"]) == pytest.approx(spec.memory_gib, abs=0.01)
    assert stat.supply["instance"] == {"host": "1"}
    assert "gpu" not in stat.supply
    assert stat.allocated == {"cpu": {"vcpu": "0"}, "memory": {"GiB": "0"}}
    assert stat.allocatable == stat.supply


def test_supply_is_host_minus_the_configured_reserve(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog({"local": {"reserve_cpu": 0.5, "reserve_ram_gib": 1.25}})
    spec = catalog.instance_type()
    stat = node_stat(only(catalog.list_resources(NOW_OPTS)))
    assert float(stat.supply["cpu"]["vcpu"]) == pytest.approx(spec.vcpus - 0.5)
    assert float(stat.supply["memory"]["GiB"]) == pytest.approx(spec.memory_gib - 1.25, abs=0.01)
    # The instance type itself still describes the whole host.
    assert spec.vcpus == make_catalog().instance_type().vcpus


def test_reserve_larger_than_host_leaves_zero_supply(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog({"local": {"reserve_cpu": 100000, "reserve_ram_gib": 10**7}})
    stat = node_stat(only(catalog.list_resources(NOW_OPTS)))
    assert stat.supply["cpu"] == {"vcpu": "0"}
    assert stat.supply["memory"] == {"GiB": "0"}


@pytest.mark.parametrize(
    "config",
    [{}, {"local": {"reserve_cpu": 0.5, "reserve_ram_gib": 1.25}}, {"local": {"reserve_cpu": 1e6}}],
)
def test_the_process_drivers_supply_is_the_catalogs(home: Path, config: dict[str, Any]) -> None:
    """The process driver reads the host's supply without the catalog's models: the same
    figures as `shoal resources` shows."""
    from providers.local.supply import local_supply

    settings = Settings(paths=Paths.from_env({"SHOAL_HOME": str(home)}), config=config)
    supply = LocalCatalog.from_settings(settings).supply()
    cpu, ram_gib = local_supply(settings)
    assert (float(supply["cpu"]["vcpu"]), float(supply["memory"]["GiB"])) == (cpu, ram_gib)


def test_allocated_comes_from_the_allocation_source(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog(
        {"local": {"reserve_cpu": 0}}, usage("test", 1, 2), usage("process", 0, 1)
    )
    stat = node_stat(only(catalog.list_resources(NOW_OPTS)))
    assert stat.allocated == {"cpu": {"vcpu": "1"}, "memory": {"GiB": "3"}}
    supply_cpu = float(stat.supply["cpu"]["vcpu"])
    supply_ram = float(stat.supply["memory"]["GiB"])
    assert float(stat.allocatable["cpu"]["vcpu"]) == pytest.approx(max(0.0, supply_cpu - 1))
    assert float(stat.allocatable["memory"]["GiB"]) == pytest.approx(
        max(0.0, supply_ram - 3), abs=0.01
    )
    assert stat.allocatable["instance"] == {"host": "1"}


def test_allocatable_never_goes_below_zero(make_catalog: MakeCatalog) -> None:
    host_cpus = int(make_catalog().instance_type().vcpus)
    overbooked = usage("process", host_cpus + 5, 10**6)
    stat = node_stat(only(make_catalog(None, overbooked).list_resources(NOW_OPTS)))
    assert stat.allocated["cpu"] == {"vcpu": str(host_cpus + 5)}
    assert stat.allocatable["cpu"] == {"vcpu": "0"}
    assert stat.allocatable["memory"] == {"GiB": "0"}


def test_breakdown_by_driver(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog(None, usage("test", 1, 1), usage("process", 2, 4), usage("test", 1, 3))
    res = only(catalog.list_resources(NOW_OPTS))
    drivers = res.breakdown["driver"]
    assert [(d.key, d.value) for d in drivers] == [("driver", "process"), ("driver", "test")]
    allocated = {d.value: d.stat.on_demand.allocated for d in drivers if d.stat.on_demand}
    assert allocated == {
        "process": {"cpu": {"vcpu": "2"}, "memory": {"GiB": "4"}},
        "test": {"cpu": {"vcpu": "2"}, "memory": {"GiB": "4"}},
    }
    assert node_stat(res).allocated == {"cpu": {"vcpu": "4"}, "memory": {"GiB": "8"}}
    wire = to_wire(res)
    assert set(wire) == {"region", "overview", "breakdown", "provider"}
    assert "spot" not in wire["breakdown"]["driver"][0]["stat"]


def test_without_an_allocation_source_nothing_is_allocated(make_catalog: MakeCatalog) -> None:
    stat = node_stat(only(make_catalog(source=False).list_resources(NOW_OPTS)))
    assert stat.allocated == {"cpu": {"vcpu": "0"}, "memory": {"GiB": "0"}}


def test_overdue_allocations_still_count_until_freed(make_catalog: MakeCatalog) -> None:
    overdue = usage("process", 1, 2, expires=utcnow() - timedelta(hours=1))
    later = usage("test", 1, 1, expires=utcnow() + timedelta(hours=1))
    stat = node_stat(only(make_catalog(None, overdue, later).list_resources(NOW_OPTS)))
    assert stat.allocated == {"cpu": {"vcpu": "2"}, "memory": {"GiB": "3"}}


def test_selector_filter_on_resources(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog()
    keep = ResourceListOptions(
        filter=ListResourceFilter(resource_selectors=parse_selectors(["vcpus>=1,!gpu"]))
    )
    drop = ResourceListOptions(
        filter=ListResourceFilter(resource_selectors=parse_selectors(["gpu"]))
    )
    assert len(catalog.list_resources(keep)) == 1
    assert catalog.list_resources(drop) == []
    assert catalog.list_resource_predictions(drop) == {}


# -- predictions over a window -----------------------------------------------------------------


def _whole_second_now() -> datetime:
    return utcnow().replace(microsecond=0)


def test_prediction_points_are_start_each_expiry_inside_and_end(make_catalog: MakeCatalog) -> None:
    now = _whole_second_now()
    start, expiry, end = (
        now + timedelta(hours=1),
        now + timedelta(hours=2),
        now + timedelta(hours=3),
    )
    rows = (
        usage("test", 1, 2, expires=expiry),
        usage("process", 1, 1, expires=None),
        usage("test", 1, 1, expires=now + timedelta(hours=5)),  # after the window
    )
    catalog = make_catalog(None, *rows)
    window = ResourceListOptions(start_time=start, end_time=end)
    predicted = catalog.list_resource_predictions(window)
    assert list(predicted) == [format_time(start), format_time(expiry), format_time(end)]
    allocated = [node_stat(res).allocated["cpu"]["vcpu"] for res in predicted.values()]
    assert allocated == ["3", "2", "2"]
    # Capacity comes back at the expiry.
    before, at_expiry = (node_stat(r) for r in list(predicted.values())[:2])
    assert before.allocated["memory"] == {"GiB": "4"}
    assert at_expiry.allocated["memory"] == {"GiB": "2"}
    supply_ram = float(before.supply["memory"]["GiB"])
    assert float(before.allocatable["memory"]["GiB"]) == pytest.approx(max(0.0, supply_ram - 4))
    assert float(at_expiry.allocatable["memory"]["GiB"]) == pytest.approx(max(0.0, supply_ram - 2))
    drivers = [d.value for d in predicted[format_time(end)].breakdown["driver"]]
    assert drivers == ["process", "test"]


def test_expiry_at_the_window_start_adds_no_point(make_catalog: MakeCatalog) -> None:
    now = _whole_second_now()
    start, end = now + timedelta(hours=1), now + timedelta(hours=2)
    catalog = make_catalog(None, usage("test", 1, 1, expires=start))
    predicted = catalog.list_resource_predictions(
        ResourceListOptions(start_time=start, end_time=end)
    )
    assert list(predicted) == [format_time(start), format_time(end)]
    assert all(node_stat(r).allocated["cpu"] == {"vcpu": "0"} for r in predicted.values())


def test_expiry_inside_the_start_second_gets_its_own_point(make_catalog: MakeCatalog) -> None:
    start = _whole_second_now() + timedelta(hours=1)
    expiry = start + timedelta(milliseconds=300)
    end = start + timedelta(hours=1)
    catalog = make_catalog(None, usage("test", 1, 1, expires=expiry))
    predicted = catalog.list_resource_predictions(
        ResourceListOptions(start_time=start, end_time=end)
    )
    after = start + timedelta(seconds=1)
    assert list(predicted) == [format_time(start), format_time(after), format_time(end)]
    held = [node_stat(r).allocated["cpu"]["vcpu"] for r in predicted.values()]
    assert held == ["1", "0", "0"]


def test_single_point_window_when_end_is_omitted(make_catalog: MakeCatalog) -> None:
    start = _whole_second_now() + timedelta(minutes=30)
    predicted = make_catalog().list_resource_predictions(ResourceListOptions(start_time=start))
    assert list(predicted) == [format_time(start)]


def test_overdue_allocations_count_throughout_a_window(make_catalog: MakeCatalog) -> None:
    now = _whole_second_now()
    overdue = usage("process", 2, 2, expires=now - timedelta(minutes=10))
    start, end = now - timedelta(hours=1), now + timedelta(hours=1)
    predicted = make_catalog(None, overdue).list_resource_predictions(
        ResourceListOptions(start_time=start, end_time=end)
    )
    assert list(predicted) == [format_time(start), format_time(end)]
    for res in predicted.values():
        assert node_stat(res).allocated["cpu"] == {"vcpu": "2"}


def test_window_end_before_start_is_a_usage_error(make_catalog: MakeCatalog) -> None:
    now = _whole_second_now()
    opts = ResourceListOptions(start_time=now, end_time=now - timedelta(hours=1))
    with pytest.raises(UsageError, match="before --start"):
        make_catalog().list_resource_predictions(opts)
    with pytest.raises(UsageError, match="before --start"):
        make_catalog().list_pricing_predictions(opts)


# -- pricing -----------------------------------------------------------------------------------


def test_no_prices_by_default(make_catalog: MakeCatalog) -> None:
    (pricing,) = make_catalog().list_pricing(NOW_OPTS)
    assert pricing.region.name == "local"
    assert pricing.items == {"host": ResourcePricingItem()}
    assert to_wire(pricing)["items"] == {"host": {}}


def test_configured_prices_appear(make_catalog: MakeCatalog) -> None:
    config = {"local": {"pricing": {"on_demand": 0.5, "spot": 0.1, "scheduled": 0}}}
    (pricing,) = make_catalog(config).list_pricing(NOW_OPTS)
    assert pricing.items["host"] == ResourcePricingItem(
        on_demand_price=0.5, spot_price=0.1, scheduled_price=0.0
    )
    assert to_wire(pricing)["items"]["host"] == {
        "onDemandPrice": 0.5,
        "spotPrice": 0.1,
        "scheduledPrice": 0.0,
    }


def test_price_selectors_filter_pricing(make_catalog: MakeCatalog) -> None:
    catalog = make_catalog({"local": {"pricing": {"on_demand": 2}}})

    def items(expression: str) -> list[str]:
        sel = ListResourceFilter(resource_selectors=parse_selectors([expression]))
        (pricing,) = catalog.list_pricing(ResourceListOptions(filter=sel))
        return list(pricing.items)

    assert items("price<3") == ["host"]
    assert items("price>3") == []
    assert items("spot_price") == []
    assert items("!spot_price") == ["host"]


def test_pricing_predictions_repeat_the_configured_prices(make_catalog: MakeCatalog) -> None:
    now = _whole_second_now()
    catalog = make_catalog({"local": {"pricing": {"spot": 0.25}}})
    opts = ResourceListOptions(start_time=now, end_time=now + timedelta(days=1))
    predicted = catalog.list_pricing_predictions(opts)
    assert list(predicted) == [format_time(now), format_time(now + timedelta(days=1))]
    for pricing in predicted.values():
        assert pricing.items == {"host": ResourcePricingItem(spot_price=0.25)}


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"local": {"pricing": {"spot": -1}}}, "spot"),
        ({"local": {"pricing": {"on_demand": "cheap"}}}, "on_demand"),
        ({"local": {"pricing": {"scheduled": True}}}, "scheduled"),
        ({"local": {"pricing": {"reserved": 1.0}}}, "reserved"),
        ({"local": {"reserve_cpu": -2}}, "reserve_cpu"),
        ({"local": {"reserve_ram_gib": "4G"}}, "reserve_ram_gib"),
        ({"local": "yes"}, "[local]"),
        ({"local": {"pricing": 3}}, "[local.pricing]"),
        ({"local": {"reserve_cpus": 1}}, "reserve_cpus"),
    ],
)
def test_bad_local_config_is_a_config_error_naming_the_key(
    make_catalog: MakeCatalog, config: dict[str, Any], named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        make_catalog(config)
    assert named in str(info.value)


# -- GPUs --------------------------------------------------------------------------------------


def fake_nvidia_smi(directory: Path, output: str, exit_code: int = 0) -> None:
    # Shell builtins only: PATH holds nothing but the fake tools.
    lines = "".join(f"printf '%s\\n' '{line}'\n" for line in output.splitlines())
    script = directory / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{lines}exit {exit_code}\n")
    script.chmod(0o755)


@pytest.fixture
def gpu_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_gpu_tools: Path) -> Path:
    directory = tmp_path / "gpu-bin"
    directory.mkdir()
    monkeypatch.setenv("PATH", f"{directory}:{no_gpu_tools}")
    return directory


def test_gpus_from_nvidia_smi(make_catalog: MakeCatalog, gpu_bin: Path) -> None:
    fake_nvidia_smi(gpu_bin, "NVIDIA A100-SXM4-80GB, 81920\nNVIDIA A100-SXM4-80GB, 81920\n")
    catalog = make_catalog()
    spec = catalog.instance_type()
    assert spec.gpu == "A100"
    assert spec.gpu_count == 2
    assert spec.gpu_memory_gib == 80.0
    stat = node_stat(only(catalog.list_resources(NOW_OPTS)))
    assert stat.supply["gpu"] == {"NVIDIA-A100-SXM4-80GB": "2"}
    assert stat.allocatable["gpu"] == {"NVIDIA-A100-SXM4-80GB": "2"}
    gpu_filter = ListResourceFilter(resource_selectors=parse_selectors(["gpu=a100,gpu_count>=2"]))
    assert len(catalog.list_resources(ResourceListOptions(filter=gpu_filter))) == 1


def test_failing_nvidia_smi_means_no_gpus(make_catalog: MakeCatalog, gpu_bin: Path) -> None:
    fake_nvidia_smi(gpu_bin, "NVIDIA-SMI has failed\n", exit_code=9)
    spec = make_catalog().instance_type()
    assert (spec.gpu, spec.gpu_count) == ("", 0)


def test_gpu_cache_follows_path(
    make_catalog: MakeCatalog, gpu_bin: Path, monkeypatch: pytest.MonkeyPatch, no_gpu_tools: Path
) -> None:
    fake_nvidia_smi(gpu_bin, "NVIDIA H100 80GB HBM3, 81559\n")
    assert make_catalog().instance_type().gpu == "H100"
    monkeypatch.setenv("PATH", str(no_gpu_tools))
    assert make_catalog().instance_type().gpu_count == 0


def test_gpus_are_kept_for_the_boot(make_catalog: MakeCatalog, gpu_bin: Path) -> None:
    fake_nvidia_smi(gpu_bin, "NVIDIA H100 80GB HBM3, 81559\n")
    assert make_catalog().instance_type().gpu == "H100"
    fake_nvidia_smi(gpu_bin, "NVIDIA L4, 23034\n")  # not asked again: same boot, same PATH
    assert make_catalog().instance_type().gpu == "H100"


def test_a_host_cache_of_the_format_before_is_a_miss(
    make_catalog: MakeCatalog, gpu_bin: Path, home: Path
) -> None:
    """host.json moved into the shared cache file format (providers/core/ttlcache.py): one
    written before, right boot and PATH, is asked again rather than believed or fatal."""
    import json
    import os

    boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    old = {"boot_id": boot, "path": os.environ["PATH"], "gpus": [
        {"product": "NVIDIA-A100-SXM4-80GB", "model": "A100", "memory_gib": 80.0}
    ]}  # fmt: skip
    cache = home / "cache" / "host.json"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(old))
    fake_nvidia_smi(gpu_bin, "NVIDIA L4, 23034\n")
    assert make_catalog().instance_type().gpu == "L4"
    assert "boot_id" not in json.loads(cache.read_text())  # written over in the new format
    assert make_catalog().instance_type().gpu == "L4"


def test_parse_nvidia_smi() -> None:
    output = (
        "NVIDIA A100-SXM4-80GB, 81920\n"
        "\n"
        "Tesla V100-SXM2-16GB, 16384\n"
        "NVIDIA H100 80GB HBM3, 81559\n"
        "NVIDIA L4, [N/A]\n"
    )
    assert parse_nvidia_smi(output) == [
        Gpu(product="NVIDIA-A100-SXM4-80GB", model="A100", memory_gib=80.0),
        Gpu(product="Tesla-V100-SXM2-16GB", model="V100", memory_gib=16.0),
        Gpu(product="NVIDIA-H100-80GB-HBM3", model="H100", memory_gib=79.6),
        Gpu(product="NVIDIA-L4", model="L4", memory_gib=0.0),
    ]
    assert parse_nvidia_smi("") == []
