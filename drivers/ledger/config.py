"""The config file's [ledger] table as a model (a model module: imported only to check it)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from providers.core.strict import Strict


class LedgerSection(Strict):
    """[ledger]: where the allocation ledger lives. Absent: SQLite in the state dir."""

    secret: ClassVar[bool] = True  # a URL may carry a password: an error never quotes a value

    url: str | None = Field(
        None,
        description="a postgresql:// URL (libpq's): the team's ledger on PostgreSQL; the "
        "password belongs in ~/.pgpass or PGPASSWORD, not here",
    )
