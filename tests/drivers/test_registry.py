"""Driver aliases are aliases: `docker`/`podman` resolve to `container` and `ec2` to `aws`,
listed once with their aliases, and a listing by the driver's name finds what was made
through an alias (also rows an older shoal recorded under the alias)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from drivers import registry
from drivers.service.listing import Listing
from providers.core.errors import ConfigError
from providers.core.settings import Settings


def settings(home: Path) -> Settings:
    return Settings.from_env({"SHOAL_HOME": str(home)})


@pytest.mark.parametrize(
    ("asked", "resolved"),
    [
        ("podman", "container/default"),
        ("docker", "container/default"),
        ("ec2", "aws/default"),
        ("podman/default", "container/default"),
        ("container", "container/default"),
    ],
)
def test_an_alias_resolves_to_its_driver(home: Path, asked: str, resolved: str) -> None:
    assert registry.resolve(settings(home), asked)[0] == resolved


def test_a_table_under_an_alias_configures_the_driver(
    home: Path, write_config: Callable[[str], Path]
) -> None:
    write_config('[drivers."podman/ci"]\ngrace_seconds = 3\n')
    listed = registry.driver_list(settings(home))
    assert listed["container/ci"] == {"grace_seconds": 3}
    assert not [name for name in listed if name.startswith(("podman/", "docker/", "ec2/"))]
    assert registry.resolve(settings(home), "docker/ci")[0] == "container/ci"


def test_the_same_instance_under_a_name_and_an_alias_is_a_config_error(
    home: Path, write_config: Callable[[str], Path]
) -> None:
    write_config('[drivers."podman/ci"]\ngrace_seconds = 3\n[drivers."container/ci"]\n')
    with pytest.raises(ConfigError, match="configured twice"):
        registry.driver_list(settings(home))


def test_drivers_lists_each_driver_once_with_its_aliases(cli: Callable[..., Any]) -> None:
    run = cli("drivers", "--json")
    assert run.exit_code == 0, run.stderr
    listed = {entry["name"]: entry["aliases"] for entry in run.json()}
    assert listed["container/default"] == ["docker", "podman"]
    assert listed["aws/default"] == ["ec2"]
    assert listed["process/default"] == []
    assert not [n for n in listed if n.split("/")[0] in ("docker", "podman", "ec2")]
    table = cli("drivers")
    assert "docker, podman" in table.stdout


@pytest.mark.parametrize("asked", ["container", "podman", "container/default"])
def test_a_listing_by_driver_finds_what_an_alias_made(asked: str) -> None:
    rows = [
        {"id": "container-1", "driver": "container/default", "status": "ALLOCATED"},
        {"id": "podman-2", "driver": "podman/default", "status": "ALLOCATED"},  # an older shoal
        {"id": "process-3", "driver": "process/default", "status": "ALLOCATED"},
    ]
    kept = Listing.parse(asked, None, None).apply(rows)
    assert [r["id"] for r in kept] == ["container-1", "podman-2"]
