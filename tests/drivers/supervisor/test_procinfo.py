"""The /proc identity (drivers/supervisor/procinfo.py), read once for shoal and for the
supervisor, which loads it from beside itself when it runs by path with no shoal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from drivers.supervisor import procinfo, supervise

MARKER = "SHOAL_PROCINFO_TEST=1"
# Names the kernel keeps as given (15 bytes at most): parentheses, a space, not UTF-8.
ODD_NAME = b"a) b\xff(c"
SLEEPER = (
    "import sys, time\n"
    "with open('/proc/self/comm', 'wb') as fh: fh.write(sys.argv[1].encode('latin-1'))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def sleeper(started: list[subprocess.Popen[str]], name: bytes, marked: bool) -> int:
    env = {k: v for k, v in os.environ.items() if k != MARKER.split("=")[0]}
    if marked:
        env[MARKER.split("=")[0]] = MARKER.split("=")[1]
    proc = subprocess.Popen(
        [sys.executable, "-c", SLEEPER, name.decode("latin-1")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    started.append(proc)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc.pid


def test_a_process_named_with_any_bytes_keeps_its_identity(
    sleepers: list[subprocess.Popen[str]],
) -> None:
    pid = sleeper(sleepers, ODD_NAME, marked=True)
    assert Path(f"/proc/{pid}/comm").read_bytes().rstrip(b"\n") == ODD_NAME
    started = procinfo.start_time(pid)
    assert started is not None and started.isdigit()
    assert procinfo.is_alive(pid, started) and procinfo.is_alive(pid, None)
    assert not procinfo.is_alive(pid, str(int(started) + 1))  # a reused pid
    assert (pid, started) in procinfo.marked(MARKER.encode())
    os.kill(pid, signal.SIGKILL)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # exited, not collected: a zombie
    assert not procinfo.is_alive(pid, started)
    assert not procinfo.signal_exactly(pid, started, signal.SIGTERM)
    assert pid not in [p for p, _ in procinfo.marked(MARKER.encode())]


def test_marked_also_finds_the_children_of_a_parent(
    sleepers: list[subprocess.Popen[str]],
) -> None:
    """The supervisor's view of a workload's tree: marked, or its own (reparented) children."""
    tagged = sleeper(sleepers, b"tagged", marked=True)
    plain = sleeper(sleepers, b"plain", marked=False)
    alone = {pid for pid, _ in procinfo.marked(MARKER.encode())}
    with_children = {pid for pid, _ in procinfo.marked(MARKER.encode(), children_of=os.getpid())}
    assert tagged in alone and plain not in alone
    assert {tagged, plain} <= with_children
    assert os.getpid() not in with_children


def test_the_supervisor_run_by_path_loads_its_sibling_and_nothing_else_of_shoal(
    tmp_path: Path,
) -> None:
    """As the drivers run it: `python -I -S supervise.py`, the spec on stdin. -I leaves its
    own directory off sys.path; procinfo must still be found, and only procinfo."""
    spec = {
        "workspace": str(tmp_path),
        "marker": MARKER,
        "argv": ["/bin/true"],
        "env": {"PATH": os.defpath},
        "grace": 1,
    }
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-X", "importtime", supervise.__file__],
        input=json.dumps(spec),
        capture_output=True,
        text=True,
        cwd="/",
        env={"PATH": os.defpath},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert isinstance(answer["pid"], int) and answer["start"].isdigit()
    outcome = json.loads((tmp_path / supervise.OUTCOME_FILE).read_text())
    assert outcome["exit_code"] == 0 and outcome["reason"] == "exited"
    imported = {
        line.split("|")[-1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and not line.endswith("| imported package")
    }
    assert "procinfo" in imported
    outside = {m for m in imported if m.split(".")[0] not in sys.stdlib_module_names}
    assert outside == {"procinfo"}
