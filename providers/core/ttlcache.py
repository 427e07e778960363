"""The one small JSON cache file of entries that expire, for what is slow to ask and rarely
changes (the host's GPUs, a container engine's totals, the aws driver's instance shapes).

The file is `{SECTION: {KEY: {"value": VALUE, "until": EPOCH_SECONDS}}}`; an entry without
`until` is kept until it is replaced. Only a cache: a missing, unreadable or corrupt file,
and an entry of any other shape (an older format), read as a miss; the file is written whole
(an owner-only temporary file renamed into place, never half), and a write that fails only
costs the next run the work again. The standard library only, nothing a Python start has not
loaded but json: the local provider reads it on the start of every local command.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Any, TypeGuard


def _read(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as fh:
            data = json.loads(fh.read())
    except (OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def _live(entry: Any, now: float) -> TypeGuard[dict[str, Any]]:
    if not isinstance(entry, dict) or "value" not in entry:
        return False
    if "until" not in entry:
        return True
    until = entry["until"]
    return isinstance(until, (int, float)) and not isinstance(until, bool) and now < until


class TtlCache:
    """One cache file; read once, on the first `get`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._data: dict[str, Any] | None = None

    def get(self, section: str, key: str) -> Any:
        """The value kept under section/key while it has not expired, else None."""
        if self._data is None:
            self._data = _read(self.path)
        table = self._data.get(section)
        entry = table.get(key) if isinstance(table, dict) else None
        return entry["value"] if _live(entry, time.time()) else None

    def put(self, section: str, key: str, value: Any, seconds: float | None) -> None:
        """Keep `value` for `seconds` (None: until it is replaced). The file is read again
        first, so that what another process kept since stays; whatever has expired or has
        another shape goes, so the file stays small."""
        now = time.time()
        data = _read(self.path)
        table = data.get(section)
        entry = {"value": value} if seconds is None else {"value": value, "until": now + seconds}
        data[section] = {**(table if isinstance(table, dict) else {}), key: entry}
        kept: dict[str, Any] = {}
        for name, entries in data.items():
            if isinstance(entries, dict):
                live = {k: e for k, e in entries.items() if _live(e, now)}
                if live:
                    kept[name] = live
        self._data = kept
        self._write(json.dumps(kept))

    def _write(self, text: str) -> None:
        directory = os.path.dirname(self.path) or "."
        # A fresh name (O_EXCL, never a link followed), renamed over the file: a reader sees
        # the old file or the new one, whole.
        temporary = os.path.join(
            directory, f".{os.path.basename(self.path)}.{os.getpid()}.{os.urandom(4).hex()}"
        )
        try:
            os.makedirs(directory, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temporary, flags, 0o600)
        except OSError:
            return
        try:
            with open(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
