"""A driver's settings: its instance's config and a definition's options, each checked by
the driver's pydantic models (providers/core/schema.py, imported by the checks only: a driver
reads its workspace root and metadata names here in commands that check nothing), and the
helpers drivers share."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from providers.core.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from providers.core.settings import Paths

    M = TypeVar("M", bound=BaseModel)

C = TypeVar("C")


def load_config(model: type[M], config: bytes, driver_name: str, config_file: Path) -> M:
    """A driver instance's JSON config as its `model`; a mistake is a ConfigError naming
    the config file, the instance's table and the key."""
    import json

    from providers.core import schema
    from providers.core.numbers import reject_constant

    try:
        raw = json.loads(config or b"{}", parse_constant=reject_constant)
    except ValueError as exc:
        raise ConfigError(f"driver {driver_name}: config is not JSON: {exc}") from None
    return schema.validate(model, raw, schema.config_place(config_file, "drivers", driver_name))


class InstanceConfig(Generic[C]):
    """A driver instance's table as the plain values the driver reads (`plain`, no pydantic),
    checked by its pydantic `model` (an import string) the first time it is read. With no
    table the `defaults` are read and nothing is imported: `status`, `free` and `logs` of an
    instance without a table never load pydantic."""

    __slots__ = ("_config", "_defaults", "_driver_name", "_file", "_model", "_plain", "_value")

    def __init__(self, model: str, plain: Callable[..., C], defaults: C, driver_name: str) -> None:
        self._model = model
        self._plain = plain
        self._defaults = defaults
        self._driver_name = driver_name
        self._config = b""
        self._file: Path | None = None
        self._value: C | None = defaults

    def prepare(self, config: bytes, config_file: Path) -> None:
        self._config = config
        self._file = config_file
        self._value = self._defaults if config.strip() in (b"", b"{}") else None

    def get(self) -> C:
        if self._value is None:
            from providers.core.plugins import import_string

            assert self._file is not None  # a table only comes through prepare
            model = import_string(self._model)
            checked = load_config(model, self._config, self._driver_name, self._file)
            self._value = self._plain(**checked.model_dump())
        return self._value


def parse_options(model: type[M], options: Mapping[str, Any], *, booking: bool = False) -> M:
    """A definition's `options` as the driver's `model` (a UsageError names options.KEY).
    For a `booking` (`alloc --at`), a required option it leaves out is not demanded (the
    claim gives it, and is checked in full); every option it gives is checked as usual."""
    from providers.core import schema

    if booking and isinstance(options, Mapping):
        from pydantic import create_model

        missing = {
            name: (Any, None)
            for name, info in model.model_fields.items()
            if info.is_required() and name not in options
        }
        if missing:
            lenient = create_model(model.__name__, __base__=model, **missing)  # type: ignore[call-overload]
            return cast("M", schema.validate(lenient, options, schema.OPTIONS))
    return schema.validate(model, options, schema.OPTIONS)


def task_options(
    tasks: Mapping[str, type[BaseModel]], task: str, options: str
) -> dict[str, Any] | None:
    """A task's `--options` JSON checked by its model (a UsageError names the option), or
    None when the driver has no such task."""
    import json

    from providers.core import schema
    from providers.core.errors import UsageError

    if task not in tasks:
        return None
    parsed = json.loads(options) if options else {}
    place = schema.Place(UsageError, "--options", noun=f"option of task {task}")
    return schema.validate(tasks[task], parsed, place).model_dump()


def workspace_root(configured: str, default_root: Path, driver_name: str) -> Path:
    """The configured workspace, or DEFAULT_ROOT/KIND/INSTANCE for `kind/instance`."""
    if configured:
        return Path(configured).expanduser()
    kind, _, instance = driver_name.partition("/")
    return default_root / kind / instance


def ensure_workspace(paths: Paths, configured: str, driver_name: str) -> Path:
    """The driver's workspace root, created; an unwritable one blames what chose it (the
    instance's `workspace` setting, or SHOAL_HOME)."""
    from drivers.paths import workspaces_dir

    root = workspace_root(configured, workspaces_dir(paths), driver_name)
    setting = f'config [drivers."{driver_name}"] workspace' if configured else None
    return paths.ensure_dir(root, setting)


def roll(chance: int) -> bool:
    """True when an injected failure with this 0..255 probability fires."""
    if chance <= 0:
        return False
    if chance >= 255:
        return True
    return random.randrange(254) < chance  # fault injection, not security


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_meta_names(metadata: Mapping[str, Any]) -> None:
    """Metadata becomes environment variables: names must be shell identifiers."""
    from providers.core.errors import UsageError

    for key, value in metadata.items():
        if not _ENV_NAME.match(key):
            raise UsageError(f"--meta {key!r}: names must be shell identifiers to become env vars")
        if isinstance(value, str) and "\0" in value:
            raise UsageError(f"--meta {key}: holds a NUL byte, which no environment can carry")
