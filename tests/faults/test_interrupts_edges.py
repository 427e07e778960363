"""Ctrl-C at the edges of a shoal process: while it starts (before the app's handlers are in
place) and after its outcome is decided (`free` said "freed"). Real processes and real
SIGINTs at offsets spread over those spans; the answer is always `shoal: error: interrupted`
with 130, or the command's own outcome: never a traceback, never death by SIGINT once shoal's
code runs."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, default_sigint, shoal_argv, shoal_env

pytestmark = pytest.mark.slow

INTERRUPTED = "shoal: error: interrupted"


def spawn(home: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        shoal_argv(*args),
        env=shoal_env(home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        preexec_fn=default_sigint,
    )


def before_shoal(code: int, err: str) -> bool:
    """Ctrl-C before any of shoal's code ran: Python had not installed its handler yet (death
    by SIGINT, nothing said), it came while Python set up its streams or imported `site` or
    `runpy` (its own fatal error), or while runpy looked for `cli.__main__` (a traceback with
    no frame of shoal's).
    No program can answer those."""
    if code == -signal.SIGINT and not err:
        return True
    # "Fatal Python error: init_...": while the interpreter set up its streams or `site`.
    if code == 1 and ("Fatal Python error: init_" in err or "Could not import runpy" in err):
        return True
    frames = [line for line in err.splitlines() if line.startswith('  File "')]
    entry = str(REPO / "cli" / "__main__.py")  # its first instruction, before its `try`
    return (
        code == -signal.SIGINT
        and err.startswith("Traceback")
        and err.rstrip().endswith("KeyboardInterrupt")
        and not any(str(REPO) in frame and entry not in frame for frame in frames)
    )


def test_ctrl_c_while_shoal_starts_is_interrupted_never_a_traceback(home: Path) -> None:
    started = time.monotonic()
    whole = spawn(home, "status")
    assert whole.communicate(timeout=60)[0] is not None and whole.returncode == 0
    span = time.monotonic() - started
    seen = {"interrupted": 0, "done": 0, "before": 0}
    # Offsets over the whole run, thicker at its start, where the imports are.
    # The last ones are past a run's whole span: on a loaded machine a run may take longer
    # than the one measured, and the test must still see some runs end before their Ctrl-C.
    offsets = [i * 0.003 for i in range(25)] + [span * i / 25 for i in range(25)]
    offsets += [span * 1.5, span * 2, span * 3]
    for delay in offsets:
        proc = spawn(home, "status")
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if before_shoal(proc.returncode, err):
            seen["before"] += 1
            continue
        assert "Traceback" not in err, (delay, proc.returncode, err)
        if INTERRUPTED in err:
            # Said and done: not killed by SIGINT afterwards (python -m's stale flag).
            assert (proc.returncode, err.strip()) == (130, INTERRUPTED), (delay, err)
            seen["interrupted"] += 1
        else:
            assert proc.returncode == 0, (delay, proc.returncode, err)
            seen["done"] += 1
    assert seen["interrupted"] and seen["done"], seen  # the offsets spanned the run


def test_ctrl_c_after_free_said_freed_exits_with_its_outcome(home: Path) -> None:
    outcomes: dict[int, int] = {}
    for attempt in range(16):
        made = subprocess.run(
            shoal_argv("alloc", "--driver", "test", "--cpu", "1", "--ram", "1"),
            env=shoal_env(home),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        ident = made.stdout.strip()
        proc = spawn(home, "free", ident)
        assert proc.stderr is not None
        said = proc.stderr.readline()
        assert said.strip() == f"{ident}: freed", said
        time.sleep((attempt % 8) * 0.002)  # within the tens of ms Python takes to exit
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        # Freed is freed: the exit says so (or 130 with "interrupted" if the Ctrl-C came
        # while free still ran), never death by SIGINT.
        assert proc.returncode in (0, 130), (attempt, proc.returncode, err)
        if proc.returncode == 130:
            assert err.strip() == INTERRUPTED, err
        outcomes[proc.returncode] = outcomes.get(proc.returncode, 0) + 1
        listing = subprocess.run(
            shoal_argv("status", ident, "--json"),
            env=shoal_env(home),
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert '"status":"FREED"' in listing.stdout.replace(" ", ""), listing.stdout
    assert outcomes.get(0), outcomes
