#!/usr/bin/env python3
"""`alloc --wait`: 50 waiters on a capacity of 1, allocations freed every 100 ms.

Measures the latency from a free to the next waiter's allocation (the moment its row takes
the room, both times from the ledger), median and p99, and the CPU time the waiters use
while they wait: all queued and idle for a while, then while the frees go on (each waiter
counted until it leaves the queue, from /proc). Targets: p99 under 1 s; the waiters under
5% of one core while waiting. Startup time plays no part, so it runs the source tree's
shoal (`python -m cli`) and frees in-process through the same service `shoal free` uses.

    python benchmarks/wait.py [--waiters N] [--every SECONDS] [--idle SECONDS]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET_P99_SECONDS = 1.0
TARGET_CPU_SHARE = 0.05
TICK = os.sysconf("SC_CLK_TCK")
ALLOC = ["alloc", "--driver", "test", "--cpu", "1", "--ram", "1"]


def cpu_seconds(pid: int) -> float | None:
    """CPU time of a live process (None once it has gone): the scheduler's own count in
    nanoseconds (/proc/PID/schedstat), else utime + stime in clock ticks."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9
    except (OSError, IndexError, ValueError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICK


def queued(ledger: Path) -> list[int]:
    conn = sqlite3.connect(ledger, timeout=5)
    try:
        return [r[0] for r in conn.execute("SELECT owner_pid FROM waiters ORDER BY id")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=50)
    parser.add_argument("--every", type=float, default=0.1, help="seconds between frees")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds all wait, no frees")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        (home / "config.toml").write_text(
            '[drivers."test/default"]\ncpu_limit = 1\nram_limit = 64\n'
        )
        os.environ["SHOAL_HOME"] = str(home)
        env = {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}
        shoal = [sys.executable, "-m", "cli"]
        first = subprocess.run([*shoal, *ALLOC], env=env, capture_output=True, text=True)
        if first.returncode != 0:
            raise SystemExit(f"the first allocation failed: {first.stderr}")
        ledger = home / "state" / "ledger.sqlite"
        procs: list[subprocess.Popen[bytes]] = []
        try:
            for i in range(args.waiters):
                procs.append(
                    subprocess.Popen(
                        [*shoal, *ALLOC, "--wait", "--timeout", "10m"],
                        env=env,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.DEVNULL,
                    )
                )
                while len(queued(ledger)) < i + 1:
                    time.sleep(0.02)
            order = queued(ledger)
            time.sleep(1.0)  # the last one settles into its sleep
            # Idle: everyone queued, nothing changes.
            before = {p.pid: cpu_seconds(p.pid) or 0.0 for p in procs}
            idle_began = time.monotonic()
            time.sleep(args.idle)
            idle_wall = time.monotonic() - idle_began
            idle_cpu = sum((cpu_seconds(p.pid) or 0.0) - before[p.pid] for p in procs)
            # Frees every `every` seconds, in-process, as `shoal free` does them.
            from cli import wiring
            from drivers import service
            from drivers.ledger.rows import ALLOCATED

            svc = wiring.drivers(wiring.settings())
            start_cpu = {p.pid: cpu_seconds(p.pid) or 0.0 for p in procs}
            waiting_cpu = dict(start_cpu)
            churn_began = time.monotonic()
            next_free = churn_began
            deadline = churn_began + 60 + args.waiters * args.every * 10
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                still = set(queued(ledger))
                for pid in still:
                    seen = cpu_seconds(pid)
                    if seen is not None:
                        waiting_cpu[pid] = seen
                now = time.monotonic()
                if now >= next_free:
                    for row in svc.ledger.with_status(ALLOCATED):
                        service.free(svc, row.id)
                    next_free += args.every
                time.sleep(0.01)
            churn_wall = time.monotonic() - churn_began
            for row in svc.ledger.with_status(ALLOCATED):
                service.free(svc, row.id)
            served = [p.communicate(timeout=60)[0].decode().strip() for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        conn = sqlite3.connect(ledger)
        rows = conn.execute(
            "SELECT id, created, updated FROM allocations ORDER BY created"
        ).fetchall()
        conn.close()
    churn_cpu = sum(waiting_cpu[pid] - start_cpu[pid] for pid in start_cpu)
    latencies = [
        (stamp(rows[k + 1][1]) - stamp(rows[k][2])).total_seconds() for k in range(len(rows) - 1)
    ]
    in_order = served == [r[0] for r in rows[1:]] and order == [p.pid for p in procs]
    p50, p99 = statistics.median(latencies), percentile(latencies, 0.99)
    idle_share = idle_cpu / idle_wall
    churn_share = churn_cpu / churn_wall
    print(
        f"{args.waiters} waiters on a capacity of 1; a free every {args.every * 1000:.0f} ms; "
        f"served in arrival order: {'yes' if in_order else 'NO'}"
    )
    print(
        f"  free -> next waiter's allocation   median {p50 * 1000:7.1f} ms   "
        f"p99 {p99 * 1000:7.1f} ms   max {max(latencies) * 1000:7.1f} ms  "
        f"({len(latencies)} frees; target p99 < {TARGET_P99_SECONDS:.0f} s: "
        f"{'met' if p99 < TARGET_P99_SECONDS else 'OVER'})"
    )
    print(
        f"  waiters' CPU, all idle for {idle_wall:.1f} s     {idle_cpu:6.2f} s = "
        f"{idle_share * 100:5.2f}% of one core"
    )
    print(
        f"  waiters' CPU while waiting, {churn_wall:.1f} s of frees {churn_cpu:6.2f} s = "
        f"{churn_share * 100:5.2f}% of one core (target < {TARGET_CPU_SHARE * 100:.0f}%: "
        f"{'met' if max(idle_share, churn_share) < TARGET_CPU_SHARE else 'OVER'})"
    )


if __name__ == "__main__":
    main()
