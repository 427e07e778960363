"""Ctrl-C at any instant of `alloc --driver process`: never a workload nobody knows about,
never exit 130 holding a live allocation.

Real shoal processes and real workloads; SIGINT is sent at offsets spread over the whole
run (the spawn of the workload sits near its end), so some land between fork and exec and
some after the ledger has recorded the allocation.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import default_sigint, shoal_argv, shoal_env

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("reap_workloads")]

CONFIG = '[drivers."process/default"]\ncpu_limit = 64\nram_limit = 64\ngrace_seconds = 1\n'
ALLOC = ("alloc", "--driver", "process", "--cpu", "1", "--ram", "1", "-o", "entry=sleep 300")



def workloads(home: Path) -> dict[str, int]:
    """Allocation id -> pid of every live process that carries one of this home's markers."""
    found: dict[str, int] = {}
    needle = f"SHOAL_WORKSPACE={home}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state in ("Z", "X") or not any(v.startswith(needle) for v in environ):
            continue
        for var in environ:
            if var.startswith(b"SHOAL_ALLOCATION_ID="):
                found[var.split(b"=", 1)[1].decode()] = int(entry.name)
    return found


def run_alloc(home: Path, delay: float | None) -> tuple[int, str, str]:
    proc = subprocess.Popen(
        shoal_argv(*ALLOC),
        env=shoal_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        preexec_fn=default_sigint,
    )
    if delay is not None:
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


def test_ctrl_c_at_any_offset_leaves_no_unknown_workload(home: Path, shoal_proc) -> None:
    (home / "config.toml").write_text(CONFIG)
    # The slowest of three whole runs: one lucky fast run on a loaded CI machine put every
    # offset before the end of the runs that followed, and no run was let finish.
    wholes = []
    for _ in range(3):
        started = time.monotonic()
        code, out, err = run_alloc(home, None)
        wholes.append(time.monotonic() - started)
        assert code == 0, err
    whole = max(wholes)
    outcomes = {0: 0, 130: 0, -1: 0}
    held = 3
    # Offsets over the last part of the run, where the reserve, the spawn and the record
    # are, in steps of a few milliseconds, plus 0-30 ms from the start, and past the end.
    offsets = [i * 0.003 for i in range(11)]
    offsets += [whole * (0.4 + 0.9 * i / 36) for i in range(36)]
    for delay in offsets:
        code, out, err = run_alloc(home, delay)
        # -SIGINT: the signal came before Python installed its handler (a shell says 130);
        # 1 with "Fatal Python error: init_...": it came while the interpreter set up its
        # standard streams or imported `site`, or
        # `runpy` for `-m`. All are before shoal's code runs, and nothing was reserved.
        early = code == -signal.SIGINT or (
            code == 1 and ("Fatal Python error: init_" in err or "Could not import runpy" in err)
        )
        assert code in (0, 130) or early, (delay, code, err)
        outcomes[-1 if early else code] += 1
        listing = shoal_proc("status", "--all", "--json")
        assert listing.returncode == 0, listing.stderr
        rows = {r["id"]: r["status"] for r in json.loads(listing.stdout)}
        live = workloads(home)
        unknown = {i: pid for i, pid in live.items() if rows.get(i) != "ALLOCATED"}
        assert not unknown, (delay, code, unknown, rows)
        allocated = sum(1 for status in rows.values() if status == "ALLOCATED")
        if code == 0:
            assert out.strip().startswith("process-"), (delay, out, err)
            assert rows[out.strip()] == "ALLOCATED"
            held += 1
        else:
            assert out == "", (delay, out)
        # Never an exit other than 0 that leaves an allocation behind.
        assert allocated == held, (delay, code, rows)
    # Both endings were reached, so the offsets did cover the interesting span.
    assert outcomes[0] and outcomes[130], (outcomes, wholes)
    for ident in workloads(home):
        assert shoal_proc("free", ident).returncode == 0
    deadline = time.monotonic() + 30
    while workloads(home) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert workloads(home) == {}
    os.sync()
