"""The driver list: `name/instance` entries, each a driver with its own config.

Built-in drivers are declared once below as lazy import strings; third parties add drivers
through the `shoal.drivers` entry-point group. Instances come from the config file:

    [drivers."test/dev"]        # or [drivers.test.dev]
    cpu_limit = 4

A driver with no configured instance gets one called `default` with an empty config, so
`--driver process` works out of the box and means `process/default`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import date, time
from typing import TYPE_CHECKING, Any

from providers.core.errors import ConfigError, UnknownNameError, UsageError
from providers.core.numbers import leaves
from providers.core.plugins import LazyRegistry
from providers.core.settings import Settings, config_section

if TYPE_CHECKING:
    from drivers.spec.base import ResourceDriver

DriverFactory = Callable[[str, Settings], "ResourceDriver"]

_REGISTRY: LazyRegistry[DriverFactory] = LazyRegistry(
    "driver",
    "shoal.drivers",
    {
        "aws": "drivers.aws.driver:AwsDriver",
        "azure": "drivers.azure.driver:AzureDriver",
        "container": "drivers.container.driver:ContainerDriver",
        "gcp": "drivers.gcp.driver:GcpDriver",
        "kubernetes": "drivers.kubernetes.driver:KubernetesDriver",
        "process": "drivers.process.driver:ProcessDriver",
        "test": "drivers.test.driver:TestDriver",
    },
    # Other names users know them by: `--driver podman` is the container driver, its
    # allocations are `container/...` and `status --driver container` finds them.
    aliases={"docker": "container", "podman": "container", "ec2": "aws", "gce": "gcp"},
)
DEFAULT_INSTANCE = "default"
_INSTANCE = re.compile(r"^[A-Za-z0-9_.-]+$")


def register(name: str, factory: DriverFactory) -> None:
    _REGISTRY.register(name, factory)


def canonical(requested: str) -> str:
    """`podman` -> `container`, `ec2/dev` -> `aws/dev`: a driver's own name for an alias."""
    kind, slash, instance = requested.partition("/")
    return _REGISTRY.canonical(kind) + slash + instance


def aliases_of(kind: str) -> list[str]:
    return _REGISTRY.aliases_of(kind)


def builtin_kinds(*, with_aliases: bool = False) -> list[str]:
    """The drivers shoal ships, by their own names (and the aliases they answer to)."""
    kinds = _REGISTRY.builtin_names()
    if with_aliases:
        kinds = sorted({*kinds, *(a for k in kinds for a in _REGISTRY.aliases_of(k))})
    return kinds


def _instances(settings: Settings) -> dict[str, dict[str, Any]]:
    where = f"config file {settings.paths.config_file}"
    table = config_section(settings.config, "drivers")
    out: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if not isinstance(value, dict):
            raise ConfigError(
                f'{where}: [drivers] {key!r} must be a table like [drivers."{key}/dev"]'
            )
        if "/" in key:
            _add(out, canonical(key), value, where)
            continue
        for instance, config in value.items():
            if not isinstance(config, dict):
                raise ConfigError(
                    f"{where}: [drivers.{key}] holds {instance!r} = ...; put driver settings "
                    f'under an instance: [drivers."{key}/{DEFAULT_INSTANCE}"]'
                )
            _add(out, canonical(f"{key}/{instance}"), config, where)
    builtins = set(_REGISTRY.builtin_names())
    for full, config in out.items():
        kind, _, instance = full.partition("/")
        if not kind or not _INSTANCE.match(instance):
            raise ConfigError(f"{where}: [drivers.{full!r}]: name must be DRIVER/INSTANCE")
        # Entry points are read only when the config names a kind shoal does not build in.
        if kind not in builtins and kind not in _REGISTRY.names():
            from providers.core.schema import unknown

            what = unknown("driver", kind, _REGISTRY.names())
            raise ConfigError(f'{where}: [drivers."{full}"]: {kind!r}: {what}')
        # The config reaches the driver as JSON, which has no dates (a built-in driver's
        # model would refuse one anyway; here the key can still be named). A datetime is a date.
        for key, value in leaves(config, lambda v: isinstance(v, (date, time))):
            raise ConfigError(
                f'{where}: [drivers."{full}"] {key}: expected a number, string, boolean, '
                f"list or table, got a TOML date or time {value.isoformat()}"
            )
    return out


def _add(out: dict[str, dict[str, Any]], full: str, config: Any, where: str) -> None:
    if full in out:
        raise ConfigError(
            f'{where}: [drivers."{full}"] is configured twice (under the driver\'s name and an '
            "alias of it); keep one table"
        )
    out[full] = config


def driver_list(settings: Settings) -> dict[str, dict[str, Any]]:
    """Every usable instance, `name/instance` -> config; built-ins get a `default` one."""
    configured = _instances(settings)
    kinds = {full.partition("/")[0] for full in configured}
    listed = dict(configured)
    for builtin in _REGISTRY.builtin_names():
        if builtin not in kinds:
            listed[f"{builtin}/{DEFAULT_INSTANCE}"] = {}
    return dict(sorted(listed.items()))


def resolve(settings: Settings, requested: str) -> tuple[str, dict[str, Any]]:
    """`test` -> `test/default` (or its only instance); `test/dev` must be listed."""
    listed = driver_list(settings)
    requested = canonical(requested)
    if "/" in requested:
        if requested in listed:
            return requested, listed[requested]
        kind = requested.partition("/")[0]
        if kind in _REGISTRY.builtin_names() or any(k.startswith(kind + "/") for k in listed):
            raise UnknownNameError("driver instance", requested, list(listed))
        # A third-party driver with no configured instance.
        _REGISTRY.get(kind)
        if requested.endswith("/" + DEFAULT_INSTANCE):
            return requested, {}
        raise UnknownNameError("driver instance", requested, list(listed))
    instances = [full for full in listed if full.partition("/")[0] == requested]
    default = f"{requested}/{DEFAULT_INSTANCE}"
    if default in instances:
        return default, listed[default]
    if len(instances) == 1:
        return instances[0], listed[instances[0]]
    if instances:
        raise UsageError(
            f"driver {requested!r} has instances {', '.join(instances)}; name one with --driver"
        )
    _REGISTRY.get(requested)  # unknown names raise here, listing the known ones
    return default, {}


# `scope` in an instance's table: whose capacity the ledger counts it against on a team
# ledger: this machine's rows (`machine`) or every machine's (`team`). Without it, the
# driver's own answer (is_remote: clouds and clusters are the team's).
SCOPES = ("machine", "team")


def open_driver(settings: Settings, requested: str) -> ResourceDriver:
    """Resolve, construct and prepare a driver instance."""
    full, config = resolve(settings, requested)
    factory = _REGISTRY.get(full.partition("/")[0])
    driver = factory(full, settings)
    scope = config.get("scope")
    if "scope" in config:
        if scope not in SCOPES:
            raise ConfigError(
                f'config file {settings.paths.config_file}: [drivers."{full}"] scope must be '
                '"machine" or "team"'
            )
        config = {k: v for k, v in config.items() if k != "scope"}
    driver.prepare(json.dumps(config).encode())
    if scope is not None:
        driver.ledger_scope = scope  # type: ignore[attr-defined]
    return driver
