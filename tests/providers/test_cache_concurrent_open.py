"""Several shoal processes (or `offers`' threads) opening a catalog cache that does not exist
yet: SQLite's switch to WAL and the schema's creation race; none may fail or half-make it."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path

from providers.cloud.cache import SCHEMA_VERSION, CatalogCache

OPENERS = 6
ROUNDS = 25


def _open(path: str, start: multiprocessing.synchronize.Barrier) -> None:  # type: ignore[name-defined]
    start.wait(timeout=30)
    CatalogCache(Path(path)).close()


def test_processes_opening_a_new_cache_at_once_all_succeed(tmp_path: Path) -> None:
    context = multiprocessing.get_context("fork")
    for round_ in range(ROUNDS):
        path = tmp_path / f"catalog-{round_}.sqlite"
        start = context.Barrier(OPENERS)
        workers = [
            context.Process(target=_open, args=(str(path), start)) for _ in range(OPENERS)
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=60)
        assert [w.exitcode for w in workers] == [0] * OPENERS, f"round {round_}"
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
            assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
