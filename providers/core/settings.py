"""Where shoal keeps its files, which config it reads, and what a provider is built from.

Every environment variable is a named constant here; the CLI shows each in `--help`.
`SHOAL_HOME` overrides every path (config, state, cache, data), which is what tests use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from providers.core.env import ENV_CONFIG, ENV_DRIVER, ENV_HOME, ENV_NO_COLOR, ENV_PROVIDER
from providers.core.errors import ConfigError

if TYPE_CHECKING:
    from pydantic import BaseModel

    from providers.core.usage import AllocationSource

    M = TypeVar("M", bound=BaseModel)

__all__ = [
    "ENV_CONFIG",
    "ENV_DRIVER",
    "ENV_HOME",
    "ENV_NO_COLOR",
    "ENV_PROVIDER",
    "Paths",
    "Settings",
]

APP_NAME = "shoal"


@dataclass(frozen=True)
class Paths:
    config_file: Path
    state_dir: Path
    cache_dir: Path
    data_dir: Path
    home_from_env: bool = False
    config_named: bool = False  # by --config / SHOAL_CONFIG: then it must exist

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Paths:
        env = os.environ if env is None else env
        home = env.get(ENV_HOME)
        config_override = env.get(ENV_CONFIG)
        if home:
            root = Path(home)
            if not root.exists():
                raise ConfigError(
                    f"{ENV_HOME}={home} does not exist; create the directory or unset {ENV_HOME}"
                )
            if not root.is_dir():
                raise ConfigError(f"{ENV_HOME}={home} is not a directory; point it at a directory")
            paths = cls(
                config_file=root / "config.toml",
                state_dir=root / "state",
                cache_dir=root / "cache",
                data_dir=root / "data",
                home_from_env=True,
            )
        else:
            import platformdirs

            paths = cls(
                config_file=Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml",
                state_dir=Path(platformdirs.user_state_dir(APP_NAME)),
                cache_dir=Path(platformdirs.user_cache_dir(APP_NAME)),
                data_dir=Path(platformdirs.user_data_dir(APP_NAME)),
            )
        if config_override:
            paths = cls(
                Path(config_override),
                paths.state_dir,
                paths.cache_dir,
                paths.data_dir,
                paths.home_from_env,
                config_named=True,
            )
        return paths

    def ensure_dir(self, path: Path, setting: str | None = None) -> Path:
        """Create `path` (under the state/cache/data roots, or where `setting` of the config
        file points) or fail with a config error that blames what chose the path."""
        try:
            path.mkdir(parents=True, exist_ok=True)
            probe = path / f".shoal-write-probe-{os.getpid()}"
            probe.touch()
            probe.unlink()
        except OSError as exc:
            if setting is not None:
                raise ConfigError(
                    f"{setting} = {str(path)!r} is not writable: {exc.strerror or exc}; fix its "
                    "permissions or point the setting at a writable directory"
                ) from None
            where = f"{ENV_HOME} ({path})" if self.home_from_env else str(path)
            raise ConfigError(
                f"{where} is not writable: {exc.strerror or exc}; fix its permissions "
                f"or set {ENV_HOME} to a writable directory"
            ) from None
        return path


def load_config(
    path: Path, named: bool = False, sections: Sections | None = None
) -> dict[str, Any]:
    """Read the TOML config; a missing file is an empty config (unless the user named it:
    then a typo would silently drop every setting), a broken one a ConfigError."""
    try:
        with path.open("rb") as fh:
            text = fh.read()
    except FileNotFoundError:
        if named:
            raise ConfigError(
                f"config file {path} (from --config / {ENV_CONFIG}) does not exist; "
                "fix the path or drop the option"
            ) from None
        return {}
    except IsADirectoryError:
        raise ConfigError(
            f"config file {path} is a directory; remove it or set {ENV_CONFIG}"
        ) from None
    except OSError as exc:
        raise ConfigError(f"config file {path}: {exc.strerror}") from None
    import tomllib  # only when there is a config to parse: cold start

    try:
        config = tomllib.loads(text.decode())
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path}: not UTF-8 ({exc.reason}); save it as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}; fix the TOML syntax") from None
    except RecursionError:  # tomllib reads nested arrays and inline tables recursively
        raise ConfigError(
            f"config file {path}: arrays or inline tables nested too deep to read; no "
            f"setting nests more than {MAX_CONFIG_DEPTH} levels, fix the file"
        ) from None
    # Everything after (the checks below, the section models) walks the tree recursively.
    deep = _too_deep(config)
    if deep is not None:
        raise ConfigError(
            f"config file {path}: {deep} nests deeper than {MAX_CONFIG_DEPTH} levels of "
            "tables and arrays; no setting does, fix the file"
        )
    from providers.core.numbers import non_finite

    # TOML has inf and nan and no setting means either: refused in every table, also those
    # this command does not read (a section's model is checked only where it is read).
    for key in non_finite(config):
        raise ConfigError(f"config file {path}: {key} must be a finite number")
    if sections is not None:
        _check_sections(config, path, sections)
    return config


# As deep as a YAML input may nest (providers/core/yamlsafe.py); shoal's own settings nest
# four levels at most, and a file of 500 made every command an "unexpected RecursionError".
MAX_CONFIG_DEPTH = 100


def _too_deep(config: Mapping[str, Any]) -> str | None:
    """The dotted path (its first keys) where `config` nests past MAX_CONFIG_DEPTH, or None.
    Iterative: a recursive walk would itself run out of stack."""
    stack: list[tuple[Any, int, str]] = [(config, 0, "")]
    while stack:
        node, depth, where = stack.pop()
        if depth > MAX_CONFIG_DEPTH:
            keys = where.split(".")
            return ".".join(keys[:4]) + ("..." if len(keys) > 4 else "")
        if isinstance(node, Mapping):
            stack.extend(
                (value, depth + 1, f"{where}.{key}" if where else str(key))
                for key, value in node.items()
            )
        elif isinstance(node, list):
            stack.extend((value, depth + 1, where or "(top level)") for value in node)
    return None


@dataclass(frozen=True)
class Sections:
    """The config file's top-level tables the program knows: its own (cheap to list) and
    those of plugins (looked up only when the file has a table not among its own). The
    composition root says which: the kernel knows no provider or driver."""

    builtin: tuple[str, ...] = ()
    plugins: Callable[[], Iterable[str]] = tuple


def _check_sections(config: Mapping[str, Any], path: Path, sections: Sections) -> None:
    strange = [key for key in config if key not in sections.builtin]
    if not strange:
        return
    from providers.core.schema import unknown

    plugins = set(sections.plugins())
    names = sections.builtin
    for key in strange:
        if key in plugins:
            continue
        if isinstance(config[key], Mapping):
            what = unknown("section", key, names, spell=lambda name: f"[{name}]")
            raise ConfigError(f"config file {path}: [{key}]: {what}")
        raise ConfigError(
            f"config file {path}: {key} = ...: a setting outside any section; put it under "
            f"its section ({', '.join(f'[{name}]' for name in names)})"
        )


def config_section(config: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    """A nested table of the config, `{}` when absent; a non-table is a ConfigError."""
    node: Any = config
    for i, key in enumerate(keys):
        node = node.get(key, {}) if isinstance(node, Mapping) else None
        if not isinstance(node, Mapping):
            dotted = ".".join(keys[: i + 1])
            raise ConfigError(f"config [{dotted}] must be a table; see README 'Config file'")
    return dict(node)


def config_model(settings: Settings, model: type[M], section: str) -> M:
    """The config's [section] as a `model` (absent: its defaults); anything wrong is a
    ConfigError naming the file, the table and the key. A reader with defaults of its own
    calls this only when the section is there: a run without one never imports pydantic."""
    from providers.core import schema

    place = schema.config_place(settings.paths.config_file, section)
    return schema.validate(model, settings.config.get(section, {}), place)


@dataclass(frozen=True)
class Freshness:
    """How cached provider data may be used: the CLI's --refresh, --offline and --max-age."""

    refresh: bool = False  # fetch now, even when the cache is fresh
    offline: bool = False  # never fetch; cached data only
    max_age: timedelta | None = None  # refuse cached data older than this


def _warn_to_stderr(message: str) -> None:
    print(f"shoal: warning: {message}", file=sys.stderr)


def _no_progress(done: int, total: int | None, what: str) -> None:
    pass


@dataclass
class Settings:
    """Everything a provider factory may use: paths, config, environment, wired sources.

    `warn` and `progress` are how a provider reports to the user (the CLI wires them to
    stderr); providers never print themselves.
    """

    paths: Paths
    config: dict[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    allocations: AllocationSource | None = None
    freshness: Freshness = field(default_factory=Freshness)
    warn: Callable[[str], None] = _warn_to_stderr
    # (bytes so far, total bytes if known, what is being fetched)
    progress: Callable[[int, int | None, str], None] = _no_progress

    @classmethod
    def from_env(
        cls, env: Mapping[str, str] | None = None, sections: Sections | None = None
    ) -> Settings:
        env = dict(os.environ) if env is None else dict(env)
        paths = Paths.from_env(env)
        return cls(
            paths=paths,
            config=load_config(paths.config_file, paths.config_named, sections),
            env=env,
        )
