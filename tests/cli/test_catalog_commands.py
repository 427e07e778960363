"""`regions`, `types`, `resources`, `pricing` as users run them: output, JSON shapes, errors."""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from providers.core.wire import from_wire, to_wire
from providers.models import (
    InstanceTypeSpec,
    RegionSpec,
    Resource,
    ResourcePricing,
)
from providers.registry import register
from providers.selector_keys import KNOWN_KEYS
from tests.conftest import Run
from tests.fakes import EmptyCatalog

Cli = Callable[..., Run]
COMMANDS = ["regions", "types", "resources", "pricing"]
REGIONAL = ["types", "resources", "pricing"]
START, END = "2026-03-07T03:29:00Z", "2026-03-07T05:00:00Z"


@pytest.fixture(autouse=True)
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH without nvidia-smi, so the host shape does not depend on this machine's GPUs."""
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", str(path))
    return path


def ok(run: Run) -> Run:
    assert run.exit_code == 0, run.stderr
    return run


def assert_clean_table(run: Run) -> None:
    ok(run)
    assert run.stdout.strip()
    assert "\x1b[" not in run.stdout
    assert "warning" not in run.stdout and "shoal:" not in run.stdout


def round_trips(cls: Any, data: Any) -> None:
    """The JSON decodes strictly into the spec's models and encodes back unchanged."""
    assert to_wire(from_wire(cls, data)) == data


def flat(text: str) -> str:
    """Help text with its box drawing and line wrapping undone."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


# -- regions -----------------------------------------------------------------------------------


def test_regions_json(cli: Cli) -> None:
    run = ok(cli("regions", "--json"))
    assert run.stderr == ""
    data = run.json()
    round_trips(list[RegionSpec], data)
    assert len(data) == 1
    assert data[0]["name"] == "local"
    assert data[0]["location"]  # the host name
    assert "zones" not in data[0]


def test_regions_table(cli: Cli) -> None:
    run = cli("regions")
    assert_clean_table(run)
    assert run.stderr == ""
    assert "Region" in run.stdout and "Location" in run.stdout
    host = ok(cli("regions", "--json")).json()[0]["location"]
    assert re.search(rf"^\s*local\s+{re.escape(host)}\s", run.stdout, re.M)


# -- types -------------------------------------------------------------------------------------


def test_types_json(cli: Cli) -> None:
    run = ok(cli("types", "--json"))
    assert run.stderr == ""
    data = run.json()
    round_trips(list[InstanceTypeSpec], data)
    (host,) = data
    shoal = {"name", "vcpus", "memory_gib", "arch", "gpu_count", "region", "source"}
    assert set(host) == shoal | {"instanceType"}  # upstream's InstanceTypeSpec member
    assert host["instanceType"] == host["name"]
    assert host["source"].startswith("this host")
    assert (host["name"], host["region"], host["gpu_count"]) == ("host", "local", 0)
    assert host["vcpus"] >= 1 and host["memory_gib"] > 0


def test_types_table(cli: Cli) -> None:
    run = cli("types")
    assert_clean_table(run)
    assert run.stderr.startswith("local: shapes of 1 type(s) from this host")
    for column in ("Type", "vCPUs", "Memory GiB", "Arch", "GPUs"):
        assert column in run.stdout
    assert re.search(r"^\s*host\s+local\s+\d+", run.stdout, re.M)


def test_types_select_keeps_or_drops_the_host(cli: Cli) -> None:
    assert [t["name"] for t in ok(cli("types", "--select", "vcpus>=1", "--json")).json()] == [
        "host"
    ]
    assert ok(cli("types", "-s", "VCPUS>=1", "-s", "!gpu", "--json")).json() != []
    assert ok(cli("types", "--select", "vcpus>100000", "--json")).json() == []
    empty = ok(cli("types", "--select", "vcpus>100000"))
    assert "host" not in empty.stdout
    assert ok(cli("types", "--select", "arch notin (x86_64,arm64),gpu", "--json")).json() == []


@pytest.mark.parametrize(
    ("selector", "fragment"),
    [
        ("gpu>3", "needs a numeric key"),
        ("vcpus>=abc", "is not a number"),
        ("colour=red", "unknown key 'colour'"),
        ("gpu in (H100", "unbalanced"),
        ("vcpus=>4", "unexpected"),
    ],
)
def test_bad_selector_is_a_usage_error_naming_the_token(
    cli: Cli, selector: str, fragment: str
) -> None:
    for command in REGIONAL:
        run = cli(command, "--select", selector, "--json")
        assert run.exit_code == 2, command
        assert repr(selector) in run.stderr
        assert fragment in run.stderr
        assert run.stdout == ""


@pytest.mark.parametrize("args", [("--select", "price<1"), ("--sort", "-spot_price")])
def test_types_refuses_price_keys_instead_of_matching_nothing(
    cli: Cli, args: tuple[str, str]
) -> None:
    run = cli("types", *args)
    assert run.exit_code == 2
    assert "shoal pricing" in run.stderr
    assert run.stdout == ""


def test_types_sort(cli: Cli) -> None:
    assert ok(cli("types", "--sort", "-vcpus", "--json")).json()[0]["name"] == "host"
    run = cli("types", "--sort", "colour")
    assert run.exit_code == 2
    assert "'colour'" in run.stderr and "vcpus" in run.stderr
    assert cli("types", "--sort", "-colour").exit_code == 2


def test_types_limit_must_be_positive(cli: Cli) -> None:
    assert len(ok(cli("types", "--limit", "1", "--json")).json()) == 1
    assert cli("types", "--limit", "0").exit_code == 2


def test_fake_gpu_shows_in_types_and_resources(cli: Cli, bin_dir: Path) -> None:
    script = bin_dir / "nvidia-smi"
    script.write_text("#!/bin/sh\nprintf '%s\\n' 'NVIDIA A100-SXM4-80GB, 81920'\n")
    script.chmod(0o755)
    (spec,) = ok(cli("types", "--select", "gpu=a100", "--json")).json()
    assert (spec["gpu"], spec["gpu_count"], spec["gpu_memory_gib"]) == ("A100", 1, 80.0)
    (res,) = ok(cli("resources", "--json")).json()
    assert res["overview"][0]["stat"]["onDemand"]["supply"]["gpu"] == {"NVIDIA-A100-SXM4-80GB": "1"}
    assert "gpu/NVIDIA-A100-SXM4-80GB" in ok(cli("resources")).stdout


# -- resources ---------------------------------------------------------------------------------


def test_resources_json_shape(cli: Cli) -> None:
    run = ok(cli("resources", "--json"))
    assert run.stderr == ""
    data = run.json()
    round_trips(list[Resource], data)
    (res,) = data
    assert set(res) == {"region", "overview", "provider"}  # no breakdown: nothing allocated
    assert res["provider"] == "local"
    assert res["region"]["name"] == "local"
    (node,) = res["overview"]
    assert node["key"] == "node"
    assert node["value"] == res["region"]["location"]
    assert "nextLevel" not in node
    assert list(node["stat"]) == ["onDemand"]
    stat = node["stat"]["onDemand"]
    assert stat["allocated"] == {"cpu": {"vcpu": "0"}, "memory": {"GiB": "0"}}
    assert stat["supply"]["instance"] == {"host": "1"}
    assert stat["allocatable"] == stat["supply"]
    (host,) = ok(cli("types", "--json")).json()
    assert float(stat["supply"]["cpu"]["vcpu"]) == host["vcpus"]


def test_resources_supply_honours_the_configured_reserve(cli: Cli, write_config: Any) -> None:
    write_config("[local]\nreserve_cpu = 0.5\nreserve_ram_gib = 1\n")
    (host,) = ok(cli("types", "--json")).json()
    (res,) = ok(cli("resources", "--json")).json()
    supply = res["overview"][0]["stat"]["onDemand"]["supply"]
    assert float(supply["cpu"]["vcpu"]) == pytest.approx(host["vcpus"] - 0.5)
    assert float(supply["memory"]["GiB"]) == pytest.approx(host["memory_gib"] - 1, abs=0.01)


def test_resources_table(cli: Cli) -> None:
    run = cli("resources")
    assert_clean_table(run)
    assert run.stderr == ""
    for text in ("Supply", "Allocated", "Allocatable", "cpu/vcpu", "memory/GiB", "instance/host"):
        assert text in run.stdout
    assert "At" not in run.stdout.split()


def test_resources_select(cli: Cli) -> None:
    assert len(ok(cli("resources", "--select", "vcpus>=1", "--json")).json()) == 1
    assert ok(cli("resources", "--select", "vcpus>100000", "--json")).json() == []


def test_allocations_in_the_ledger_show_as_allocated(cli: Cli) -> None:
    ok(cli("alloc", "--driver", "test", "--cpu", "1", "--ram", "1", "--json"))
    (res,) = ok(cli("resources", "--json")).json()
    stat = res["overview"][0]["stat"]["onDemand"]
    assert stat["allocated"] == {"cpu": {"vcpu": "1"}, "memory": {"GiB": "1"}}
    assert float(stat["allocatable"]["cpu"]["vcpu"]) == float(stat["supply"]["cpu"]["vcpu"]) - 1
    (driver,) = res["breakdown"]["driver"]
    assert driver["key"] == "driver" and driver["value"].startswith("test")
    assert driver["stat"]["onDemand"]["allocated"] == stat["allocated"]


def test_resources_window_is_keyed_by_rfc3339_times(cli: Cli) -> None:
    run = ok(cli("resources", "--start", "2026-03-07T05:29:00+02:00", "--end", END, "--json"))
    assert run.stderr == ""
    data = run.json()
    assert list(data) == [START, END]
    round_trips(dict[str, Resource], data)
    assert all(res["provider"] == "local" for res in data.values())


def test_resources_window_with_only_start_is_one_point(cli: Cli) -> None:
    assert list(ok(cli("resources", "--start", START, "--json")).json()) == [START]


def test_resources_window_table_has_a_time_column(cli: Cli) -> None:
    run = cli("resources", "--start", START, "--end", END)
    assert_clean_table(run)
    assert "At" in run.stdout.split()
    assert re.search(rf"^\s*{START}\s+local\s", run.stdout, re.M)
    assert END in run.stdout


@pytest.mark.parametrize("command", ["resources", "pricing"])
def test_window_errors(cli: Cli, command: str) -> None:
    backwards = cli(command, "--start", END, "--end", START)
    assert backwards.exit_code == 2
    assert "before --start" in backwards.stderr
    bad_start = cli(command, "--start", "yesterday")
    assert bad_start.exit_code == 2
    assert "--start" in bad_start.stderr and "'yesterday'" in bad_start.stderr
    naive_end = cli(command, "--start", START, "--end", "2026-03-07T05:00:00")
    assert naive_end.exit_code == 2
    assert "--end" in naive_end.stderr
    no_start = cli(command, "--end", END)
    assert no_start.exit_code == 2
    assert "--end needs --start" in no_start.stderr
    for run in (backwards, bad_start, naive_end, no_start):
        assert run.stdout == ""


# -- pricing -----------------------------------------------------------------------------------


def test_pricing_json_without_prices(cli: Cli) -> None:
    run = ok(cli("pricing", "--json"))
    assert run.stderr == ""
    data = run.json()
    round_trips(list[ResourcePricing], data)
    (pricing,) = data
    assert pricing["region"]["name"] == "local"
    assert pricing["items"] == {"host": {}}


def test_pricing_table_without_prices_explains_on_stderr(cli: Cli) -> None:
    run = cli("pricing")
    assert_clean_table(run)
    # vCPUs and GiB of the host, no GPU, no price known
    shape = r"^\s*local\s+local\s+host\s+\d+\s+[\d.]+\s+—\s+"
    assert re.search(shape + r"—\s+—\s+—\s+USD", run.stdout, re.M)
    assert "[local.pricing]" in run.stderr
    assert "[local.pricing]" not in run.stdout


def test_pricing_from_config(cli: Cli, write_config: Any) -> None:
    write_config("[local.pricing]\non_demand = 0.5\nspot = 0\n")
    (pricing,) = ok(cli("pricing", "--json")).json()
    assert pricing["items"]["host"] == {"onDemandPrice": 0.5, "spotPrice": 0.0}
    run = cli("pricing")
    assert_clean_table(run)
    shape = r"^\s*local\s+local\s+host\s+\d+\s+[\d.]+\s+—\s+"
    assert re.search(shape + r"0\.5\s+0\s+—", run.stdout, re.M)
    assert run.stderr == ""
    assert ok(cli("pricing", "--select", "price<1", "--json")).json()[0]["items"] != {}
    assert ok(cli("pricing", "--select", "price>1", "--json")).json()[0]["items"] == {}


def test_pricing_window(cli: Cli, write_config: Any) -> None:
    write_config("[local.pricing]\nscheduled = 1.25\n")
    data = ok(cli("pricing", "--start", START, "--end", END, "--json")).json()
    assert list(data) == [START, END]
    round_trips(dict[str, ResourcePricing], data)
    assert all(p["items"] == {"host": {"scheduledPrice": 1.25}} for p in data.values())
    run = cli("pricing", "--start", START, "--end", END)
    assert_clean_table(run)
    assert re.search(rf"^\s*{START}\s+local\s+host\s+—\s+—\s+1\.25", run.stdout, re.M)


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ("[local.pricing]\nspot = -1\n", "spot"),
        ("[local.pricing]\non_demand = 'cheap'\n", "on_demand"),
        ("[local.pricing]\nreserved = 1\n", "reserved"),
        ("[local]\nreserve_cpu = -1\n", "reserve_cpu"),
    ],
)
def test_bad_local_config_exits_78_naming_the_key(
    cli: Cli, write_config: Any, config: str, named: str
) -> None:
    write_config(config)
    run = cli("pricing", "--json")
    assert run.exit_code == 78
    assert named in run.stderr
    assert run.stdout == ""


# -- providers, regions ------------------------------------------------------------------------

_names = itertools.count()


def registered_provider() -> str:
    name = f"clitest{next(_names)}"
    region = RegionSpec(name=f"{name}-east", zones=["a", "b"])
    register(name, lambda settings: EmptyCatalog(name, region))
    return name


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_provider_exits_2_listing_local(cli: Cli, command: str) -> None:
    run = cli(command, "--provider", "nope")
    assert run.exit_code == 2
    assert "unknown provider 'nope'" in run.stderr
    assert "local" in run.stderr
    assert run.stdout == ""


def test_shoal_provider_variable_picks_the_provider(cli: Cli) -> None:
    run = cli("regions", env={"SHOAL_PROVIDER": "nope"})
    assert run.exit_code == 2
    assert "local" in run.stderr
    name = registered_provider()
    data = ok(cli("regions", "--json", env={"SHOAL_PROVIDER": name})).json()
    assert data == [{"name": f"{name}-east", "zones": ["a", "b"]}]
    # The flag beats the variable.
    data = ok(cli("regions", "--json", "-p", "local", env={"SHOAL_PROVIDER": "nope"})).json()
    assert data[0]["name"] == "local"


@pytest.mark.parametrize("command", REGIONAL)
def test_unknown_region_exits_2(cli: Cli, command: str) -> None:
    run = cli(command, "--region", "nope")
    assert run.exit_code == 2
    assert "'nope'" in run.stderr and "local" in run.stderr
    assert run.stdout == ""
    near = cli(command, "--region", "locl")
    assert near.exit_code == 2
    assert "did you mean local?" in near.stderr


@pytest.mark.parametrize("command", REGIONAL)
@pytest.mark.parametrize("region", ["local", "all"])
def test_known_region_or_all(cli: Cli, command: str, region: str) -> None:
    assert ok(cli(command, "-r", region, "--json")).json()


# -- environment and config ---------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_broken_config_file_exits_78_naming_it(cli: Cli, write_config: Any, command: str) -> None:
    path = write_config("[local\nreserve_cpu = 1\n")
    run = cli(command)
    assert run.exit_code == 78
    assert str(path) in run.stderr
    assert run.stdout == ""


def test_missing_shoal_home_exits_78(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    run = cli("regions", env={"SHOAL_HOME": str(missing)})
    assert run.exit_code == 78
    assert "SHOAL_HOME" in run.stderr and str(missing) in run.stderr
    assert not missing.exists()
    flag = cli("--home", str(missing), "types")
    assert flag.exit_code == 78


def test_shoal_home_that_is_a_file_exits_78(cli: Cli, tmp_path: Path) -> None:
    regular = tmp_path / "a-file"
    regular.write_text("not a directory\n")
    run = cli("resources", env={"SHOAL_HOME": str(regular)})
    assert run.exit_code == 78
    assert "not a directory" in run.stderr
    assert run.stdout == ""


# -- help --------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", COMMANDS)
def test_help_shows_the_provider_variable(cli: Cli, command: str) -> None:
    run = ok(cli(command, "--help"))
    # Plain click help: `[env var: SHOAL_PROVIDER; default: local]`
    assert "[env var: SHOAL_PROVIDER;" in flat(run.stdout)


@pytest.mark.parametrize("command", REGIONAL)
def test_help_lists_the_selector_keys(cli: Cli, command: str) -> None:
    text = flat(ok(cli(command, "--help")).stdout)
    assert "--select" in text
    for key in KNOWN_KEYS:
        assert re.search(rf"\b{key}\b", text), key


@pytest.mark.parametrize("command", ["resources", "pricing"])
def test_help_shows_the_window_options(cli: Cli, command: str) -> None:
    text = flat(ok(cli(command, "--help")).stdout)
    assert "--start" in text and "--end" in text and "RFC 3339" in text
