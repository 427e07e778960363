"""Typed, documented driver settings: config of an instance, options of a definition."""

from __future__ import annotations

import random
import re
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.errors import ShoalError, shown
from providers.numbers import is_number, reject_constant

if TYPE_CHECKING:
    from providers.settings import Paths


@dataclass(frozen=True)
class Opt:
    kind: type
    default: Any
    doc: str
    minimum: float | None = None
    maximum: float | None = None


def probability(doc: str) -> Opt:
    return Opt(int, 0, f"{doc} (0 never, 1-254 random, 255 always)", 0, 255)


def parse_opts(
    spec: Mapping[str, Opt], given: Mapping[str, Any], where: str, error: type[ShoalError]
) -> dict[str, Any]:
    """Check `given` against `spec`: unknown names, types and ranges name the field."""
    for name in given:
        if name not in spec:
            raise error(f"{where}: unknown option {name!r}; known: {', '.join(sorted(spec))}")
    out: dict[str, Any] = {}
    for name, opt in spec.items():
        value: Any = given.get(name, opt.default)
        if opt.kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        wrong_bool = isinstance(value, bool) and opt.kind not in (bool, object)
        if value is not None and (wrong_bool or not isinstance(value, opt.kind)):
            raise error(
                f"{where}.{name}: expected {opt.kind.__name__}, got {shown(value)} ({opt.doc})"
            )
        number = (
            float(typing.cast(float, value))
            if opt.kind in (int, float) and value is not None
            else None
        )
        if number is not None and not is_number(value):
            raise error(f"{where}.{name}: must be a finite number, got {shown(value)} ({opt.doc})")
        if number is not None and opt.minimum is not None and number < opt.minimum:
            raise error(f"{where}.{name}: must be >= {opt.minimum:g}, got {shown(value)}")
        if number is not None and opt.maximum is not None and number > opt.maximum:
            raise error(f"{where}.{name}: must be <= {opt.maximum:g}, got {shown(value)}")
        out[name] = value
    return out


def load_config(spec: Mapping[str, Opt], config: bytes, driver_name: str) -> dict[str, Any]:
    """A driver instance's JSON config, checked against `spec` (errors are config errors)."""
    import json

    from providers.errors import ConfigError

    try:
        raw = json.loads(config or b"{}", parse_constant=reject_constant)
    except ValueError as exc:
        raise ConfigError(f"driver {driver_name}: config is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"driver {driver_name}: config must be a table")
    return parse_opts(spec, raw, f'config [drivers."{driver_name}"]', ConfigError)


def workspace_root(configured: str, default_root: Path, driver_name: str) -> Path:
    """The configured workspace, or DEFAULT_ROOT/KIND/INSTANCE for `kind/instance`."""
    if configured:
        return Path(configured).expanduser()
    kind, _, instance = driver_name.partition("/")
    return default_root / kind / instance


def ensure_workspace(paths: Paths, configured: str, driver_name: str) -> Path:
    """The driver's workspace root, created; an unwritable one blames what chose it (the
    instance's `workspace` setting, or SHOAL_HOME)."""
    root = workspace_root(configured, paths.workspaces_dir, driver_name)
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


_PATH_MAX = 4096
_ARG_MAX = 128 * 1024


def entry_argv(entry: Any, *, required: bool) -> list[str]:
    """`options.entry` as argv: a string of shell words or a list of strings."""
    import json
    import shlex

    from providers.errors import UsageError

    if isinstance(entry, str):
        try:
            argv = shlex.split(entry)
        except ValueError as exc:
            raise UsageError(f"options.entry: {exc}; quote the command properly") from None
    elif isinstance(entry, list) and all(isinstance(a, str) for a in entry):
        argv = list(entry)
    elif entry is not None:
        text = json.dumps(entry)[:60]
        raise UsageError(
            f"options.entry must be a command string or a list of strings, got {text} "
            f"(-o values are JSON when they parse: write -o 'entry=\"{text}\"' for a "
            "command of that name)"
        )
    else:
        argv = []
    if required and not argv:
        raise UsageError(
            "options.entry: required, the command to run; e.g. --option entry='sleep 600'"
        )
    if any("\0" in arg for arg in argv):
        raise UsageError("options.entry: holds a NUL byte, which no command line can carry")
    # Past these the kernel refuses the exec (ENAMETOOLONG, E2BIG): say so before anything
    # is reserved.
    if argv and len(argv[0].encode()) >= _PATH_MAX:
        raise UsageError(f"options.entry: the command name {shown(argv[0])} is too long")
    if any(len(arg.encode()) >= _ARG_MAX for arg in argv):
        raise UsageError("options.entry: an argument is longer than the kernel accepts (128 KiB)")
    return argv


def check_env(env: Mapping[str, Any]) -> None:
    """`options.env`: shell identifiers to strings."""
    from providers.errors import UsageError

    for key, value in env.items():
        if not _ENV_NAME.match(str(key)) or not isinstance(value, str):
            raise UsageError(f"options.env.{key}: names must be shell identifiers, values strings")
        if "\0" in value:
            raise UsageError(f"options.env.{key}: holds a NUL byte, which no environment can carry")


def check_meta_names(metadata: Mapping[str, Any]) -> None:
    """Metadata becomes environment variables: names must be shell identifiers."""
    from providers.errors import UsageError

    for key, value in metadata.items():
        if not _ENV_NAME.match(key):
            raise UsageError(f"--meta {key!r}: names must be shell identifiers to become env vars")
        if isinstance(value, str) and "\0" in value:
            raise UsageError(f"--meta {key}: holds a NUL byte, which no environment can carry")
