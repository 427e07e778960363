"""What the `aws` driver remembers between runs, in one small JSON file of the cache dir
(`aws-driver.json`): instance type shapes and which region offers a type (they change
rarely: a day), and an account's quota API found unavailable (for the quota TTL, so that
every `alloc` does not wait out its retries again). Only a cache: unreadable is empty,
and it is written whole through a temporary file, never half."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

DAY = 24 * 3600.0


class Memo:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._data: dict[str, Any] | None = None

    def _load(self) -> dict[str, Any]:
        if self._data is None:
            try:
                data = json.loads(self.path.read_text())
            except (OSError, ValueError):
                data = {}
            self._data = data if isinstance(data, dict) else {}
        return self._data

    def get(self, section: str, key: str) -> Any:
        """The value kept under section/key while it has not expired, else None."""
        entry = self._load().get(section, {}).get(key)
        if not isinstance(entry, dict) or not isinstance(entry.get("until"), (int, float)):
            return None
        return entry.get("value") if time.time() < entry["until"] else None

    def put(self, section: str, key: str, value: Any, seconds: float) -> None:
        data = self._load()
        table = data.setdefault(section, {})
        table[key] = {"value": value, "until": time.time() + seconds}
        # Expired entries go, so the file stays small.
        now = time.time()
        for name in [
            k for k, v in table.items() if not (isinstance(v, dict) and v.get("until", 0) > now)
        ]:
            del table[name]
        self._save(data)

    def drop(self, section: str, key: str) -> None:
        data = self._load()
        if data.get(section, {}).pop(key, None) is not None:
            self._save(data)

    def _save(self, data: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".aws-driver.", dir=self.path.parent)
            with os.fdopen(fd, "w") as out:
                json.dump(data, out)
            os.replace(tmp, self.path)
        except OSError:
            pass
