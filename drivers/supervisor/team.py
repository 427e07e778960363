"""The supervisor's session on a team ledger (PostgreSQL): what `record_end`, `still_held`
and the waiters' ring need, with the ledger's own rules (drivers.ledger.pg): statements in
SQLite's dialect translated, each write after the ledger's advisory write lock.

Run by path beside supervise.py (no shoal on sys.path); psycopg is found in the
site-packages directory the driver names in the spec (`ledger_site`), appended after the
standard library. libpq reads the credentials the shoal command had (PGPASSWORD,
PGPASSFILE, ...): the spec carries them over the supervisor's stdin, never on disk, and they
are set in the supervisor's own environment only, never the workload's.
"""

from __future__ import annotations

import os
import sys
from typing import Any

# drivers.ledger.pg's: the lock every ledger write takes first, the waiters' channels.
LOCK_SPACE = 0x73686F61
WRITE_LOCK = 1
NOTIFY_PREFIX = "shoal_w_"
SCHEMA = "shoal"


class PgSession:
    def __init__(self, spec: dict[str, Any], timeout: float) -> None:
        site = spec.get("ledger_site")
        if isinstance(site, str) and site not in sys.path:
            sys.path.append(site)
        for key, value in (spec.get("ledger_env") or {}).items():
            if isinstance(key, str) and key.startswith("PG") and isinstance(value, str):
                os.environ[key] = value
        import psycopg

        self.errors: tuple[type[BaseException], ...] = (psycopg.Error,)
        self.busy: tuple[type[BaseException], ...] = (psycopg.OperationalError,)
        self.host = spec.get("ledger_host")
        self.conn = psycopg.connect(
            str(spec["ledger_url"]),
            autocommit=True,
            connect_timeout=max(1, int(timeout)),
            options=f"-c search_path={SCHEMA} -c lock_timeout={max(1, int(timeout))}s",
            application_name="shoal-supervisor",
        )

    def begin(self) -> None:
        self.conn.execute("BEGIN")
        self.conn.execute("SELECT pg_advisory_xact_lock(%s, %s)", (LOCK_SPACE, WRITE_LOCK))

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.conn.execute(sql.replace("?", "%s"), params)

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        from psycopg import pq

        if self.conn.info.transaction_status != pq.TransactionStatus.IDLE:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()

    def ring(self) -> None:
        """NOTIFY the first waiter of each queue this end may have made room for: a team
        driver's, and this machine's for a machine-scoped one; it works out who fits."""
        rows = self.execute(
            "SELECT driver, token, is_remote, host FROM waiters ORDER BY id"
        ).fetchall()
        rung: set[tuple[str, Any]] = set()
        for driver, token, remote, host in rows:
            queue = (driver, None if remote else host)
            if queue in rung or not isinstance(token, str) or not token.isalnum():
                continue
            if not remote and host != self.host:
                continue  # another machine's own capacity: nothing of it came back
            rung.add(queue)
            self.execute("SELECT pg_notify(?, '')", (NOTIFY_PREFIX + token,))
