"""The provider registry: `register`, `new_catalog`, built-ins and third-party entry points."""

from __future__ import annotations

import importlib.metadata
import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from providers.core.errors import ConfigError, UnknownNameError, UsageError
from providers.core.plugins import LazyRegistry
from providers.core.settings import Paths, Settings
from providers.local.catalog import LocalCatalog
from providers.models import (
    RegionSpec,
    ResourceListOptions,
)
from providers.registry import new_catalog, provider_names, register
from tests.fakes import EmptyCatalog

_names = itertools.count()
BUILTIN_LOCAL = "providers.local.catalog:LocalCatalog.from_settings"


def unique(prefix: str) -> str:
    """A provider name no other test uses: registrations are process-wide."""
    return f"{prefix}{next(_names)}"


def tiny(label: str) -> Callable[[Settings], EmptyCatalog]:
    return lambda settings: EmptyCatalog(label, RegionSpec(name=f"{label}-1"), settings)


@pytest.fixture
def settings(home: Path) -> Settings:
    return Settings(paths=Paths.from_env({"SHOAL_HOME": str(home)}))


# -- register / new_catalog --------------------------------------------------------------------


def test_registered_factory_builds_the_catalog_with_the_settings(settings: Settings) -> None:
    name = unique("tiny")
    register(name, tiny("one"))
    catalog = new_catalog(name, settings)
    assert isinstance(catalog, EmptyCatalog)
    assert catalog.provider() == "one"
    assert catalog.settings is settings
    assert name in provider_names()


def test_last_registration_wins(settings: Settings) -> None:
    name = unique("tiny")
    register(name, tiny("first"))
    register(name, tiny("second"))
    assert new_catalog(name, settings).provider() == "second"


def test_registration_goes_ahead_of_the_builtin(settings: Settings) -> None:
    # A registry of its own, so that replacing `local` does not leak into other tests.
    registry: LazyRegistry[Callable[[Settings], object]] = LazyRegistry(
        "provider", "shoal.providers", {"local": BUILTIN_LOCAL}
    )
    assert isinstance(registry.get("local")(settings), LocalCatalog)
    registry.register("local", tiny("replacement"))
    built = registry.get("local")(settings)
    assert isinstance(built, EmptyCatalog) and built.provider() == "replacement"


def test_builtin_local(settings: Settings) -> None:
    catalog = new_catalog("local", settings)
    assert isinstance(catalog, LocalCatalog)
    assert catalog.provider() == "local"
    assert "local" in provider_names()


def test_unknown_provider_lists_the_known_ones(settings: Settings) -> None:
    with pytest.raises(UnknownNameError) as info:
        new_catalog("nope", settings)
    err = info.value
    assert isinstance(err, UsageError)
    assert "local" in err.known
    assert str(err).startswith("unknown provider 'nope'; known: ")
    assert "local" in str(err)


def test_settings_default_to_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "no-such-home"
    monkeypatch.setenv("SHOAL_HOME", str(missing))
    with pytest.raises(ConfigError, match="SHOAL_HOME"):
        new_catalog("local")
    missing.mkdir()
    (missing / "config.toml").write_text("[local.pricing]\nspot = 0.5\n")
    catalog = new_catalog("local")
    (pricing,) = catalog.list_pricing(ResourceListOptions())
    assert pricing.items["host"].spot_price == 0.5


# -- third-party entry points ------------------------------------------------------------------

PLUGIN_MODULE = textwrap.dedent(
    """
    from providers.models import RegionSpec

    class PluginCatalog:
        def __init__(self, settings):
            self.settings = settings

        def provider(self):
            return "from-plugin"

        def list_regions(self):
            return [RegionSpec(name="plugin-region")]

    def factory(settings):
        return PluginCatalog(settings)
    """
)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A directory on sys.path for installed-looking distributions and their modules."""
    path = tmp_path / "site"
    path.mkdir()
    before = set(sys.modules)
    monkeypatch.syspath_prepend(str(path))
    yield path
    for name in set(sys.modules) - before:
        if name.startswith("fakeplugin_"):
            del sys.modules[name]


def install(site: Path, dist: str, entry_points: str | bytes, modules: dict[str, str]) -> None:
    info = site / f"{dist}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    raw = entry_points.encode() if isinstance(entry_points, str) else entry_points
    (info / "entry_points.txt").write_bytes(raw)
    for module, source in modules.items():
        (site / f"{module}.py").write_text(source)


def test_entry_point_provider_is_found_and_built(site: Path, settings: Settings) -> None:
    install(
        site,
        "fakeplugin",
        "[shoal.providers]\nfake = fakeplugin_mod:factory\n",
        {"fakeplugin_mod": PLUGIN_MODULE},
    )
    assert "fake" in provider_names()
    catalog = new_catalog("fake", settings)
    assert catalog.provider() == "from-plugin"
    assert [r.name for r in catalog.list_regions()] == ["plugin-region"]


def test_unknown_name_lists_entry_point_providers_too(site: Path, settings: Settings) -> None:
    name = unique("fake")
    module = unique("fakeplugin_mod")
    install(site, "fakeplugin", f"[shoal.providers]\n{name} = {module}:factory\n", {})
    with pytest.raises(UnknownNameError) as info:
        new_catalog("nope", settings)
    assert name in info.value.known
    assert "local" in info.value.known


def test_builtin_lookup_does_not_scan_entry_points(site: Path, settings: Settings) -> None:
    # A distribution whose entry_points.txt cannot even be decoded breaks any scan ...
    install(site, "fakeplugin", b"[shoal.providers]\nbad = fakeplugin_\xff:factory\n", {})
    with pytest.raises(UnicodeDecodeError):
        importlib.metadata.entry_points(group="shoal.providers")
    # ... but not our own error for an unknown name, which still lists the built-ins ...
    with pytest.raises(UnknownNameError) as unknown:
        new_catalog("nope", settings)
    assert "local" in unknown.value.known
    # ... and the built-in provider and registered ones are found without one.
    assert isinstance(new_catalog("local", settings), LocalCatalog)
    fresh: LazyRegistry[Callable[[Settings], object]] = LazyRegistry(
        "provider", "shoal.providers", {"local": BUILTIN_LOCAL}
    )
    assert isinstance(fresh.get("local")(settings), LocalCatalog)
    name = unique("tiny")
    register(name, tiny("registered"))
    assert new_catalog(name, settings).provider() == "registered"


def test_builtin_wins_over_an_entry_point_of_the_same_name(site: Path, settings: Settings) -> None:
    module = unique("fakeplugin_mod")
    install(
        site,
        "fakeplugin",
        f"[shoal.providers]\nlocal = {module}:factory\n",
        {module: "raise RuntimeError('must not be imported')\n"},
    )
    assert isinstance(new_catalog("local", settings), LocalCatalog)
    assert module not in sys.modules


@pytest.mark.parametrize(
    "source",
    [
        "raise RuntimeError('plugin exploded at import')\n",
        "import fakeplugin_no_such_dependency\n",
        "other = 1\n",  # the entry point names an attribute that is not there
    ],
)
def test_broken_entry_point_is_a_config_error(site: Path, settings: Settings, source: str) -> None:
    name = unique("broken")
    module = unique("fakeplugin_mod")
    install(site, "fakeplugin", f"[shoal.providers]\n{name} = {module}:factory\n", {module: source})
    with pytest.raises(ConfigError) as info:
        new_catalog(name, settings)
    message = str(info.value)
    assert f"provider {name!r}" in message
    assert f"{module}:factory" in message
    assert "reinstall or remove" in message
