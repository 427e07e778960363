"""Which machine a ledger row belongs to, and whether its owner still lives.

Every row and waiter records the machine it was made on (`host`): `SHOAL_HOST_ID`, else a
random id kept in the state dir (made once, owner-only). On one machine an owner's liveness
is its pid and start time (drivers.supervisor.procinfo). Another machine's pids mean nothing
here: on a team ledger an owner keeps a lease on what it is doing (an allocation in flight,
a place in the queue), renewed every LEASE_RENEW_SECONDS by a heartbeat thread on a session
of its own, and another machine judges it dead once the lease has run out (its machine died,
or lost the network). Leases are stamped with the writer's clock: machines of a team run
NTP; a skew of a few seconds only moves when a dead machine's rows are released.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.core.env import ENV_HOST_ID
from providers.core.errors import ConfigError

if TYPE_CHECKING:
    from drivers.ledger.pg import PgLedgerDb

LEASE_SECONDS = 30.0
LEASE_RENEW_SECONDS = 10.0
HOST_FILE = "host-id"
_VALID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")


def host_id(env: dict[str, str] | Any, state_dir: Path) -> str:
    """This machine's id: SHOAL_HOST_ID, else the state dir's `host-id` (made on first use)."""
    given = env.get(ENV_HOST_ID)
    if given:
        if not _VALID.fullmatch(given):
            raise ConfigError(
                f"{ENV_HOST_ID} must be 1-63 letters, digits, '.', '_' or '-' starting with a "
                "letter or digit; unset it to use a random id kept in the state dir"
            )
        return str(given)
    path = state_dir / HOST_FILE
    with contextlib.suppress(OSError):
        kept = path.read_text().strip()
        if _VALID.fullmatch(kept):
            return kept
    made = f"h-{os.urandom(6).hex()}"
    with contextlib.suppress(OSError):
        state_dir.mkdir(parents=True, exist_ok=True)
        temp = path.with_name(f".{HOST_FILE}.{os.getpid()}")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(made + "\n")
        try:
            os.link(temp, path)  # never replaces an id another shoal made meanwhile
        except FileExistsError:
            kept = path.read_text().strip()
            if _VALID.fullmatch(kept):
                made = kept
        finally:
            temp.unlink(missing_ok=True)
    return made


def lease_stamp(seconds: float = LEASE_SECONDS) -> str:
    """A lease running `seconds` from now, as the ledger stores times (real time, never the
    ledger's clock: tests move that one)."""
    from drivers.ledger.rows import stamp

    return stamp(datetime.now(UTC) + timedelta(seconds=seconds))


def lease_alive(lease: str | None) -> bool:
    from drivers.ledger.rows import stamp

    return lease is not None and lease > stamp(datetime.now(UTC))


class Heartbeat:
    """Renews this process's leases on a team ledger while it lives: a daemon thread with a
    session of its own (a transaction of the main thread is never joined). Started when the
    process first holds something others judge by lease; it dies with the process, and so
    its leases run out."""

    def __init__(self, db: PgLedgerDb, host: str, pid: int) -> None:
        self._db, self._host, self._pid = db, host, pid
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="shoal-lease", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        conn = None
        try:
            while not self._stop.wait(LEASE_RENEW_SECONDS):
                try:
                    if conn is None or conn.closed:
                        conn = self._db.connect()
                        conn.execute("SET shoal.quiet = 'on'")
                    self.renew(conn)
                except Exception:
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            conn.close()
                    conn = None  # the server is away: the next beat tries again
        finally:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()

    def renew(self, conn: Any) -> None:
        lease = lease_stamp()
        conn.execute(
            "UPDATE allocations SET lease = %s WHERE owner_host = %s AND owner_pid = %s "
            "AND status IN ('ALLOCATING', 'FREEING')",
            (lease, self._host, self._pid),
        )
        conn.execute(
            "UPDATE waiters SET lease = %s WHERE host = %s AND owner_pid = %s",
            (lease, self._host, self._pid),
        )
