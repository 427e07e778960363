"""The ledger a command works on: this machine's SQLite file, or the team's PostgreSQL
ledger when `SHOAL_LEDGER_URL` or `[ledger] url` names one (drivers.ledger.url)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drivers.ledger.book import Ledger
    from providers.core.settings import Settings


def open_ledger(settings: Settings, clock: Callable[[], datetime] | None = None) -> Ledger:
    """The configured ledger (nothing is connected or created until it is read or written)."""
    from drivers.ledger.book import Ledger
    from drivers.ledger.url import ledger_url
    from drivers.paths import ledger_file

    extra = {} if clock is None else {"clock": clock}
    url = ledger_url(settings)
    if url is None:
        return Ledger(ledger_file(settings.paths), **extra)  # type: ignore[arg-type]
    from drivers.ledger.hosts import host_id
    from drivers.ledger.pg import PgLedgerDb

    host = host_id(settings.env, settings.paths.state_dir)
    return Ledger(db=PgLedgerDb(url), host=host, **extra)  # type: ignore[arg-type]


def is_team(settings: Settings) -> bool:
    from drivers.ledger.url import ledger_url

    return ledger_url(settings) is not None


def supervisor_ledger(settings: Settings) -> dict[str, object]:
    """The keys of a supervisor's spec that say where it records its workload's end
    (drivers.supervisor.supervise.record_end): this machine's SQLite file, or the team
    ledger's URL with what libpq needs to log in as this command does (the PG* variables)
    and where psycopg is installed. The spec travels on the supervisor's stdin only."""
    import os

    from drivers.ledger.url import ledger_url
    from drivers.paths import ledger_file

    url = ledger_url(settings)
    if url is None:
        return {"ledger": str(ledger_file(settings.paths))}
    import psycopg

    from drivers.ledger.hosts import host_id

    return {
        "ledger_url": url.value,
        "ledger_host": host_id(settings.env, settings.paths.state_dir),
        "ledger_env": {k: v for k, v in os.environ.items() if k.startswith("PG")},
        # site-packages: psycopg's package directory's parent.
        "ledger_site": os.path.dirname(os.path.dirname(os.path.abspath(psycopg.__file__))),
    }
