"""The cloud catalogs' cache: one SQLite file with the latest snapshot of every provider
region, the provider's region list, and every refresh kept as price history.

A refresh replaces a region's rows in one transaction, so a refresh that fails half-way
(a dropped connection, a malformed payload, Ctrl-C) leaves the previous data untouched.
SQLite is chosen for query speed: a warm `pricing --region all` reads indexed rows without
parsing a file, and history queries are range scans.
"""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from providers.cloud.offers import Offer, Snapshot
from providers.core.errors import RetryableError, ShoalError
from providers.models import RegionSpec

SCHEMA_VERSION = 3
HistoryRow = tuple[str, str, float, float | None, float | None, float | None]
_SCHEMA = """
CREATE TABLE IF NOT EXISTS region_list(
    provider TEXT NOT NULL, name TEXT NOT NULL, location TEXT NOT NULL, zones TEXT NOT NULL,
    fetched_at REAL NOT NULL, PRIMARY KEY(provider, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshot(
    provider TEXT NOT NULL, region TEXT NOT NULL, fetched_at REAL NOT NULL,
    source TEXT NOT NULL, currency TEXT NOT NULL, notes TEXT NOT NULL,
    PRIMARY KEY(provider, region)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS offer(
    provider TEXT NOT NULL, region TEXT NOT NULL, instance_type TEXT NOT NULL,
    vcpus REAL, memory_gib REAL, arch TEXT NOT NULL, gpu TEXT NOT NULL,
    gpu_count INTEGER NOT NULL, gpu_memory_gib REAL NOT NULL,
    on_demand REAL, spot REAL, scheduled REAL, shape_source TEXT NOT NULL DEFAULT '',
    PRIMARY KEY(provider, region, instance_type)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS history(
    provider TEXT NOT NULL, region TEXT NOT NULL, instance_type TEXT NOT NULL,
    observed_at REAL NOT NULL, on_demand REAL, spot REAL, scheduled REAL,
    PRIMARY KEY(provider, region, instance_type, observed_at)) WITHOUT ROWID;
"""
# Version 3: an account's quotas, usage and reservations per region (JSON, short-lived).
_ACCOUNTS = """
CREATE TABLE IF NOT EXISTS account_snapshot(
    provider TEXT NOT NULL, account TEXT NOT NULL, region TEXT NOT NULL,
    fetched_at REAL NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY(provider, account, region)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS account_regions(
    provider TEXT NOT NULL, account TEXT NOT NULL, names TEXT NOT NULL,
    fetched_at REAL NOT NULL, PRIMARY KEY(provider, account)) WITHOUT ROWID;
"""
_OFFER_COLUMNS = (
    "instance_type, vcpus, memory_gib, arch, gpu, gpu_count, gpu_memory_gib, "
    "on_demand, spot, scheduled, shape_source"
)
# Version 1 stored an unknown memory as 0.0 (NOT NULL) and had no shape_source: its offer
# rows are rebuilt with 0 read as unknown, which is what 0 meant there; history is kept.
_MIGRATE_1_TO_2 = """
CREATE TABLE offer_v2(
    provider TEXT NOT NULL, region TEXT NOT NULL, instance_type TEXT NOT NULL,
    vcpus REAL, memory_gib REAL, arch TEXT NOT NULL, gpu TEXT NOT NULL,
    gpu_count INTEGER NOT NULL, gpu_memory_gib REAL NOT NULL,
    on_demand REAL, spot REAL, scheduled REAL, shape_source TEXT NOT NULL DEFAULT '',
    PRIMARY KEY(provider, region, instance_type)) WITHOUT ROWID;
INSERT INTO offer_v2 SELECT provider, region, instance_type, NULLIF(vcpus, 0),
    NULLIF(memory_gib, 0), arch, gpu, gpu_count, gpu_memory_gib, on_demand, spot, scheduled, ''
    FROM offer;
DROP TABLE offer;
ALTER TABLE offer_v2 RENAME TO offer;
"""


@dataclass(frozen=True)
class SnapshotInfo:
    """Where and when a region's cached data came from."""

    provider: str
    region: str
    fetched_at: datetime
    source: str
    currency: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class Observation:
    """One instance type's prices as one refresh saw them."""

    instance_type: str
    observed_at: datetime
    on_demand: float | None
    spot: float | None
    scheduled: float | None


def _ts(at: datetime) -> float:
    return at.timestamp()


def _dt(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _offer(row: tuple[object, ...]) -> Offer:
    return Offer(*row)  # type: ignore[arg-type]  # columns are in Offer's field order


_OPEN_PATIENCE_SECONDS = 30.0


def _busy(exc: sqlite3.Error) -> bool:
    return "locked" in str(exc) or "busy" in str(exc)


def _patiently(action: Callable[[], object]) -> None:
    deadline = time.monotonic() + _OPEN_PATIENCE_SECONDS
    while True:
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if not _busy(exc) or time.monotonic() >= deadline:
                raise
        time.sleep(0.02)


def _statements(script: str) -> list[str]:
    """A script's statements, to run one by one inside a transaction (executescript would
    commit the transaction first)."""
    return [part.strip() for part in script.split(";") if part.strip()]


class CatalogCache:
    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._db = sqlite3.connect(path, timeout=30.0, isolation_level=None)
            # Another process may be making the file this instant: the switch to WAL does
            # not wait on SQLite's busy handler, so it is retried for as long as a write waits.
            _patiently(lambda: self._db.execute("PRAGMA journal_mode=WAL"))
            self._db.execute("PRAGMA synchronous=NORMAL")
            _patiently(self._make_schema)
        except sqlite3.DatabaseError as exc:
            if _busy(exc):
                raise RetryableError(
                    f"catalog cache {path} stayed locked by another shoal for "
                    f"{_OPEN_PATIENCE_SECONDS:g} s; try again"
                ) from None
            raise ShoalError(
                f"catalog cache {path} is unreadable ({exc}); remove it (and its -wal/-shm "
                "files): it is only a cache and will be fetched again"
            ) from None

    def _make_schema(self) -> None:
        """Make or migrate the tables once: the version is read again inside the write lock,
        so of several processes opening a new file at once one makes it, the others see it."""
        if self._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version == 0:
                for statement in _statements(_SCHEMA + _ACCOUNTS):
                    self._db.execute(statement)
            elif version in (1, 2):
                # 1 -> 2 rebuilds the offers; 2 -> 3 adds the account tables (quotas).
                first = _MIGRATE_1_TO_2 if version == 1 else ""
                for statement in _statements(first + _ACCOUNTS):
                    self._db.execute(statement)
            elif version != SCHEMA_VERSION:
                raise ShoalError(
                    f"catalog cache {self.path} has schema version {version}, this shoal knows "
                    f"{SCHEMA_VERSION}; remove the file (it is only a cache) or upgrade shoal"
                )
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            self._db.execute("COMMIT")
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several writes (an import applies whole or not at all)."""
        with self._write():
            yield

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self._db.in_transaction:  # inside transaction(): its commit is the one
            yield self._db
            return
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:  # "database is locked" after the timeout
            raise RetryableError(
                f"catalog cache {self.path} is busy ({exc}): another shoal is writing it; try again"
            ) from None
        try:
            yield self._db
        except BaseException:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- writing -------------------------------------------------------------------------

    def save(self, snapshot: Snapshot) -> None:
        """Replace the region's data with the snapshot and append it to the history."""
        at = _ts(snapshot.fetched_at)
        for o in snapshot.offers.values():
            # A price list that says NaN or Infinity states no price: not known.
            o.on_demand, o.spot, o.scheduled = (
                p if p is None or math.isfinite(p) else None
                for p in (o.on_demand, o.spot, o.scheduled)
            )
        rows = [
            (
                snapshot.provider,
                snapshot.region,
                o.instance_type,
                o.vcpus,
                o.memory_gib,
                o.arch,
                o.gpu,
                o.gpu_count,
                o.gpu_memory_gib,
                o.on_demand,
                o.spot,
                o.scheduled,
                o.shape_source,
            )
            for o in snapshot.offers.values()
        ]
        with self._write() as db:
            db.execute(
                "DELETE FROM offer WHERE provider = ? AND region = ?",
                (snapshot.provider, snapshot.region),
            )
            db.executemany(f"INSERT INTO offer VALUES ({', '.join('?' * 13)})", rows)
            db.execute(
                "INSERT OR REPLACE INTO snapshot VALUES (?, ?, ?, ?, ?, ?)",
                (
                    snapshot.provider,
                    snapshot.region,
                    at,
                    snapshot.source,
                    snapshot.currency,
                    json.dumps(snapshot.notes),
                ),
            )
            db.executemany(
                "INSERT OR REPLACE INTO history VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(r[0], r[1], r[2], at, r[9], r[10], r[11]) for r in rows],
            )

    def save_regions(self, provider: str, regions: list[RegionSpec], fetched_at: datetime) -> None:
        with self._write() as db:
            db.execute("DELETE FROM region_list WHERE provider = ?", (provider,))
            db.executemany(
                "INSERT INTO region_list VALUES (?, ?, ?, ?, ?)",
                [
                    (provider, r.name, r.location, json.dumps(r.zones), _ts(fetched_at))
                    for r in regions
                ],
            )

    def save_account(
        self, provider: str, account: str, snapshots: Iterable[tuple[str, datetime, str]]
    ) -> None:
        """Replace the cached (region, fetched_at, JSON payload) answers of one account."""
        with self._write() as db:
            db.executemany(
                "INSERT OR REPLACE INTO account_snapshot VALUES (?, ?, ?, ?, ?)",
                [(provider, account, r, _ts(at), payload) for r, at, payload in snapshots],
            )

    def forget_account(self, provider: str, account: str, region: str) -> None:
        """Drop one region's cached answer (its usage just changed: a driver launched or
        ended an instance there), so the next question fetches it again."""
        with self._write() as db:
            db.execute(
                "DELETE FROM account_snapshot WHERE provider = ? AND account = ? AND region = ?",
                (provider, account, region),
            )

    def save_account_regions(
        self, provider: str, account: str, names: list[str], fetched_at: datetime
    ) -> None:
        with self._write() as db:
            db.execute(
                "INSERT OR REPLACE INTO account_regions VALUES (?, ?, ?, ?)",
                (provider, account, json.dumps(names), _ts(fetched_at)),
            )

    # -- reading -------------------------------------------------------------------------

    def account_snapshots(self, provider: str, account: str) -> dict[str, tuple[datetime, str]]:
        """region -> (fetched_at, JSON payload) of one account's cached answers."""
        rows = self._db.execute(
            "SELECT region, fetched_at, payload FROM account_snapshot "
            "WHERE provider = ? AND account = ?",
            (provider, account),
        )
        return {region: (_dt(at), payload) for region, at, payload in rows}

    def account_regions(self, provider: str, account: str) -> tuple[list[str], datetime | None]:
        row = self._db.execute(
            "SELECT names, fetched_at FROM account_regions WHERE provider = ? AND account = ?",
            (provider, account),
        ).fetchone()
        if not row:
            return [], None
        try:
            names = json.loads(row[0])
        except ValueError:
            return [], None  # an edited cache: the list is asked for again
        return (names, _dt(row[1])) if isinstance(names, list) else ([], None)

    def accounts(self, provider: str) -> list[str]:
        """The accounts with cached answers, the most recently fetched first."""
        rows = self._db.execute(
            "SELECT account FROM account_snapshot WHERE provider = ? GROUP BY account "
            "ORDER BY max(fetched_at) DESC",
            (provider,),
        )
        return [row[0] for row in rows]

    def regions(self, provider: str) -> tuple[list[RegionSpec], datetime | None]:
        rows = self._db.execute(
            "SELECT name, location, zones, fetched_at FROM region_list WHERE provider = ? "
            "ORDER BY name",
            (provider,),
        ).fetchall()
        if not rows:
            return [], None
        specs = [RegionSpec(name=n, zones=json.loads(z), location=loc) for n, loc, z, _ in rows]
        return specs, _dt(min(r[3] for r in rows))

    def providers(self) -> list[str]:
        rows = self._db.execute("SELECT DISTINCT provider FROM snapshot ORDER BY provider")
        return [row[0] for row in rows]

    def snapshots(self, provider: str) -> dict[str, SnapshotInfo]:
        rows = self._db.execute(
            "SELECT region, fetched_at, source, currency, notes FROM snapshot "
            "WHERE provider = ? ORDER BY region",
            (provider,),
        ).fetchall()
        return {
            region: SnapshotInfo(provider, region, _dt(at), source, currency, tuple(json.loads(n)))
            for region, at, source, currency, n in rows
        }

    def offers(self, provider: str, region: str) -> list[Offer]:
        rows = self._db.execute(
            f"SELECT {_OFFER_COLUMNS} FROM offer WHERE provider = ? AND region = ? "
            "ORDER BY instance_type",
            (provider, region),
        ).fetchall()
        return [_offer(row) for row in rows]

    def history(
        self,
        provider: str,
        region: str,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> list[Observation]:
        """Observed prices, oldest first, optionally within [start, end]."""
        sql = (
            "SELECT instance_type, observed_at, on_demand, spot, scheduled FROM history "
            "WHERE provider = ? AND region = ?"
        )
        args: list[object] = [provider, region]
        if start is not None:
            sql += " AND observed_at >= ?"
            args.append(_ts(start))
        if end is not None:
            sql += " AND observed_at <= ?"
            args.append(_ts(end))
        rows = self._db.execute(sql + " ORDER BY observed_at, instance_type", args).fetchall()
        return [Observation(t, _dt(at), od, spot, sch) for t, at, od, spot, sch in rows]

    def history_rows(self, provider: str) -> Iterable[HistoryRow]:
        """(region, type, observed_at epoch seconds, on-demand, spot, scheduled), in order."""
        return self._db.execute(
            "SELECT region, instance_type, observed_at, on_demand, spot, scheduled FROM history "
            "WHERE provider = ? ORDER BY region, observed_at, instance_type",
            (provider,),
        )

    def history_count(self, provider: str) -> int:
        row = self._db.execute("SELECT count(*) FROM history WHERE provider = ?", (provider,))
        return int(row.fetchone()[0])

    def add_history(self, provider: str, rows: Iterable[HistoryRow]) -> int:
        """Merge observations (region, type, observed_at, on_demand, spot, scheduled)."""
        with self._write() as db:
            before = db.total_changes
            db.executemany(
                "INSERT OR IGNORE INTO history VALUES (?, ?, ?, ?, ?, ?, ?)",
                ((provider, *row) for row in rows),
            )
            return db.total_changes - before
