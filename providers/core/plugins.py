"""A name -> factory registry: built-ins as lazy import strings, then entry points.

Each built-in is declared once, as `"module:attribute"`, and imported only when asked for.
Third-party packages add names through an entry-point group, which is scanned only when a name
is not built in (so a broken plugin cannot slow down or break built-in commands).
`register()` is the spec's Register: explicit, last writer wins, before built-ins.
"""

from __future__ import annotations

import importlib
from typing import Any, Generic, TypeVar

from providers.core.errors import ConfigError, UnknownNameError

F = TypeVar("F")


def import_string(target: str) -> Any:
    module_name, _, attribute = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        obj = getattr(obj, part)
    return obj


class LazyRegistry(Generic[F]):
    def __init__(
        self,
        kind: str,
        group: str,
        builtins: dict[str, str],
        aliases: dict[str, str] | None = None,
    ) -> None:
        """`aliases`: other names a built-in answers to (alias -> canonical name), as
        SkyPilot's registry keeps them: one entry, listed once, found by either name."""
        self.kind = kind
        self.group = group
        self._builtins = dict(builtins)
        self._aliases = dict(aliases or {})
        unknown = [a for a, c in self._aliases.items() if c not in self._builtins]
        if unknown:  # a typo in the table itself, found by the first test that loads it
            raise ValueError(f"aliases of no built-in {kind}: {', '.join(unknown)}")
        self._registered: dict[str, F] = {}

    def canonical(self, name: str) -> str:
        """The name an alias stands for (a canonical name is its own)."""
        return self._aliases.get(name, name)

    def aliases_of(self, name: str) -> list[str]:
        return sorted(a for a, c in self._aliases.items() if c == name)

    def register(self, name: str, factory: F) -> None:
        self._registered[name] = factory

    def builtin_names(self) -> list[str]:
        return sorted(self._builtins)

    def _entry_points(self) -> dict[str, Any]:
        from importlib.metadata import entry_points

        try:
            return {ep.name: ep for ep in entry_points(group=self.group)}
        except Exception:  # a broken third-party install must not break our own names
            return {}

    def names(self) -> list[str]:
        """Every name that resolves: canonical, aliases, registered, entry points."""
        found = {*self._builtins, *self._aliases, *self._registered, *self._entry_points()}
        return sorted(found)

    def get(self, name: str) -> F:
        if name not in self._registered:
            name = self.canonical(name)
        if name in self._registered:
            return self._registered[name]
        if name in self._builtins:
            return import_string(self._builtins[name])  # type: ignore[no-any-return]
        entry = self._entry_points().get(name)
        if entry is None:
            raise UnknownNameError(self.kind, name, self.names())
        try:
            return entry.load()  # type: ignore[no-any-return]
        except Exception as exc:  # a plugin's own import error must not look like ours
            raise ConfigError(
                f"{self.kind} {name!r} from entry point {entry.value!r} failed to load: {exc}; "
                f"reinstall or remove the package that provides it"
            ) from None
