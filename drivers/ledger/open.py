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
