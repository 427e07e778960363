"""One named kubeconfig entry (a cluster, user or context) with where it came from, so that
what its values mean is checked with the file and the field named; and its file paths,
which are relative to that file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from providers.core.errors import ConfigError

T = TypeVar("T")


@dataclass
class Entry(Generic[T]):
    """One named cluster, user or context (its model, `kubeconfig_model`), with where it
    came from."""

    body: T
    file: Path
    where: str  # e.g. "users[1].user"

    def at(self, key: str) -> str:
        return f"{self.file}: {self.where}.{key}"


def read_path(entry: Entry[Any], key: str, text: str) -> Path | None:
    """The file path field `key` (its value `text`): relative paths are relative to the
    kubeconfig's directory."""
    if not text:
        return None
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = entry.file.parent / path
    if not path.is_file():
        raise ConfigError(f"{entry.at(key)}: {path} does not exist or is not a file")
    return path
