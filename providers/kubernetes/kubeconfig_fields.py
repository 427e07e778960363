"""One named kubeconfig entry (a cluster, user or context) and its typed field readers: a
value of the wrong type is a ConfigError naming the file and the field."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from providers.core.errors import ConfigError


@dataclass
class Entry:
    """One named cluster, user or context, with where it came from."""

    body: dict[str, Any]
    file: Path
    where: str  # e.g. "users[1].user"

    def at(self, key: str) -> str:
        return f"{self.file}: {self.where}.{key}"


def kind(value: Any) -> str:
    """A YAML value's type in the words of an error message."""
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }.get(type(value), "null" if value is None else type(value).__name__)


def read_string(entry: Entry, key: str) -> str:
    value = entry.body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ConfigError(f"{entry.at(key)} must be a string, got {kind(value)}")
    return value


def read_bool(entry: Entry, key: str) -> bool:
    value = entry.body.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ConfigError(f"{entry.at(key)} must be true or false, got {kind(value)}")
    return value


def read_data(entry: Entry, key: str) -> bytes | None:
    """A `*-data` field: base64, decoded."""
    text = read_string(entry, key)
    if not text:
        return None
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(
            f"{entry.at(key)} is not valid base64; re-export the kubeconfig"
        ) from None


def read_path(entry: Entry, key: str) -> Path | None:
    """A file path field: relative paths are relative to the kubeconfig's directory."""
    text = read_string(entry, key)
    if not text:
        return None
    path = Path(text).expanduser()
    if not path.is_absolute():
        path = entry.file.parent / path
    if not path.is_file():
        raise ConfigError(f"{entry.at(key)}: {path} does not exist or is not a file")
    return path
