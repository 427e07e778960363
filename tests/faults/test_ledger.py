"""The running totals of a SQLite ledger's holding rows (drivers.ledger.store's TOTALS) under
faults: a write killed with SIGKILL mid-transaction, and racing writer processes. They must
stay exactly what the rows sum to: a capacity check reads them alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.spec.types import Resources

ROOT = Path(__file__).resolve().parents[2]

# A child that holds a write transaction having moved rows (the triggers have run), then
# waits to be killed.
HOLD = """
import sys, time
from pathlib import Path
from drivers.ledger.book import Ledger
ledger = Ledger(Path(sys.argv[1]))
with ledger._write() as conn:
    conn.execute("UPDATE allocations SET status = 'FREED'")
    conn.execute("UPDATE allocations SET cpu = 0 WHERE id = 'none'")
    conn.execute(
        "INSERT INTO allocations SELECT 'x-' || id, driver, 'ALLOCATED', definition, state, "
        "metadata, created, updated, expires, 100, 100, multitenancy, cpu_overbook, "
        "ram_overbook, is_remote, owner_pid, owner_start, note, starts, claim_by, host, "
        "owner_host, lease FROM allocations"
    )
    print(conn.execute("SELECT SUM(cpu) FROM holding_totals").fetchone()[0], flush=True)
    time.sleep(60)
"""

# A writer process: cycles of reserve -> ALLOCATED -> FREED (every third kept), each with an
# expiry of its own or none.
CYCLES = """
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from drivers.ledger import book as L
from drivers.ledger.book import Ledger
from drivers.spec.types import Resources
ledger = Ledger(Path(sys.argv[1]))
me = int(sys.argv[2])
for i in range(int(sys.argv[3])):
    expires = None if i % 2 else datetime.now(UTC) + timedelta(hours=1 + (me * 7 + i) % 3)
    alloc_id = ledger.reserve(
        driver="test/default", definition={}, resources=Resources(cpu=1 + i % 3, ram=2),
        metadata={}, is_remote=False, expires=expires, fits=lambda usage: 1,
    )
    ledger.set_status(alloc_id, L.ALLOCATED)
    if i % 3:
        ledger.set_status(alloc_id, L.FREED)
ledger.close()
"""


def child(code: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], env=env, stdout=subprocess.PIPE, text=True
    )


def allocated(ledger: Ledger, count: int) -> None:
    for _ in range(count):
        alloc_id = ledger.reserve(
            driver="test/default", definition={}, resources=Resources(cpu=2, ram=3),
            metadata={}, is_remote=False, expires=None, fits=lambda usage: 1,
        )  # fmt: skip
        ledger.set_status(alloc_id, L.ALLOCATED)


def test_a_write_killed_mid_transaction_leaves_the_totals_as_the_rows(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    ledger = Ledger(path)
    allocated(ledger, 3)
    ledger.close()
    holder = child(HOLD, str(path))
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "300"  # inside: the triggers have run
    finally:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    after = Ledger(path)
    assert after.totals_drift() == []
    usage = after.node_usage()
    assert (usage.cpu, usage.ram) == (6, 9)
    after.close()


def test_racing_writers_keep_the_totals_exact(tmp_path: Path) -> None:
    path = tmp_path / "ledger.sqlite"
    Ledger(path).node_usage()  # made once, before the race
    writers = [child(CYCLES, str(path), str(n), "30") for n in range(4)]
    for writer in writers:
        writer.communicate(timeout=120)
        assert writer.returncode == 0
    ledger = Ledger(path)
    assert ledger.totals_drift() == []
    usage = ledger.node_usage()
    held = ledger._db.query(
        "SELECT SUM(cpu), SUM(ram) FROM allocations WHERE status = 'ALLOCATED'"
    )[0]
    assert (usage.cpu, usage.ram) == held and usage.cpu > 0
    ledger.close()
