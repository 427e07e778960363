"""The unavailable offerings: where a launch just found no room, remembered for a few
minutes so that the next `alloc` goes straight to the next offer instead of asking again
(Karpenter's insufficient-capacity cache keeps such an offering three minutes).

An entry is keyed provider/region/zone/type/market; zone "" stands for every zone of the
region (the account's limit, a cluster with no node that fits). It lives in one SQLite file
under the cache dir in WAL mode: each write is one transaction, so concurrent shoal
processes add their entries without losing another's, and Ctrl-C or kill -9 mid-write
leaves the file as it was before or after, never half. It is only a cache: a file that is
not a database of this shape (broken, of another version, or not SQLite at all) is removed
and made again, and one that cannot be opened or is held too long by another writer is
read as empty and not written; none of these is ever an error.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

FILE = "unavailable-offerings.sqlite"
TTL_SECONDS = 180.0  # Karpenter's ICE cache holds 3 minutes
BUSY_SECONDS = 2.0  # what a write waits for another's before giving up (a cache: it may)
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS unavailable (provider TEXT NOT NULL, region TEXT NOT NULL, "
    "zone TEXT NOT NULL, type TEXT NOT NULL, market TEXT NOT NULL, reason TEXT NOT NULL, "
    "since REAL NOT NULL, until REAL NOT NULL, "
    "PRIMARY KEY (provider, region, zone, type, market))"
)


@dataclass(frozen=True)
class Key:
    provider: str
    region: str
    zone: str  # "": every zone of the region
    instance_type: str
    market: str

    def region_wide(self) -> Key:
        return Key(self.provider, self.region, "", self.instance_type, self.market)


@dataclass(frozen=True)
class Remembered:
    key: Key
    reason: str
    since: float  # epoch seconds
    until: float


class Unavailable:
    def __init__(
        self, path: str | os.PathLike[str], clock: Callable[[], float] = time.time
    ) -> None:
        self.path = Path(path)
        self.clock = clock

    def recall(self, key: Key) -> Remembered | None:
        """The entry that keeps `key` out now: its own, or its region's."""
        now = self.clock()
        wanted = {key, key.region_wide()}
        with self._connection(write=False) as conn:
            if conn is None:
                return None
            rows = conn.execute(
                "SELECT zone, reason, since, until FROM unavailable WHERE provider=? AND "
                "region=? AND type=? AND market=? AND until > ? ORDER BY until DESC",
                (key.provider, key.region, key.instance_type, key.market, now),
            ).fetchall()
            for zone, reason, since, until in rows:
                found = Key(key.provider, key.region, str(zone), key.instance_type, key.market)
                if found in wanted:
                    return Remembered(found, str(reason), float(since), float(until))
        return None

    def remember(self, key: Key, reason: str, seconds: float | None = None) -> None:
        """Keep `key` out for `seconds` (TTL_SECONDS by default); what has expired goes."""
        now = self.clock()
        until = now + (TTL_SECONDS if seconds is None else seconds)
        with self._connection(write=True) as conn:
            if conn is None:
                return
            with conn:  # one transaction: both statements or neither
                conn.execute("DELETE FROM unavailable WHERE until <= ?", (now,))
                conn.execute(
                    "INSERT OR REPLACE INTO unavailable VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        key.provider,
                        key.region,
                        key.zone,
                        key.instance_type,
                        key.market,
                        reason[:500],
                        now,
                        until,
                    ),
                )

    @contextlib.contextmanager
    def _connection(self, write: bool) -> Iterator[sqlite3.Connection | None]:
        """The file open and of the right shape, or None: nothing to read, or it cannot be
        had now. A file found broken, here or by the caller's statements, is removed (to be
        made again by the next write)."""
        conn = self._usable(write)
        if conn is None:
            yield None
            return
        try:
            yield conn
        except sqlite3.OperationalError as exc:
            conn.close()
            if not _busy(exc):
                self._remove()
        except sqlite3.DatabaseError:
            conn.close()
            self._remove()
        finally:
            conn.close()

    def _usable(self, write: bool) -> sqlite3.Connection | None:
        for first in (True, False):
            if not write and not self.path.exists():
                return None
            try:
                return self._open()
            except sqlite3.OperationalError as exc:
                if _busy(exc):
                    return None
            except sqlite3.DatabaseError:
                pass  # not SQLite, or not of this shape: broken
            except OSError:
                return None
            if first:
                self._remove()
        return None

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=BUSY_SECONDS, isolation_level=None)
        try:
            # A file that is not SQLite fails here (DatabaseError), as does one of another
            # shape at the SELECT.
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(_SCHEMA)
            conn.execute("SELECT provider, region, zone, type, market, reason, since, until "
                         "FROM unavailable LIMIT 0")  # fmt: skip
        except BaseException:
            conn.close()
            raise
        conn.isolation_level = "IMMEDIATE"  # `with conn:` takes the write lock at once
        return conn

    def _remove(self) -> None:
        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(OSError):
                os.unlink(f"{self.path}{suffix}")


def _busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text
