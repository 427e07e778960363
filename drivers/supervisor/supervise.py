"""The supervisor of one allocation: a small process that owns the workload and outlives the
shoal command that started it, so that a lifetime ends on time with no shoal running.

The drivers start it as `python -I -S .../drivers/supervisor/supervise.py` (by path, in a
session of its own): the standard library only, so it starts fast and needs no shoal on its
`sys.path`. It reads its spec, one JSON object, on stdin.

`process`: it starts the workload as its child, in a session of its own (the child writes its
pid and start time into the workspace before it execs, as shoal's process driver always did),
reports `{"pid", "start"}` (or why the workload could not start) on stdout and closes it. It
is the subreaper of the workload's tree, so whatever the workload leaves behind stays its
child. At the deadline, or when asked to stop (SIGTERM: `shoal free`), it sends SIGTERM to the
workload's group and to every process marked with the allocation id, waits `grace` seconds,
then sends SIGKILL. Once the tree is gone (by itself or so) it writes the outcome (exit code,
signal, end time, why) into the workspace, `.shoal-outcome.json`, and exits.

`container`: it waits on the engine for the container to stop (`POST /containers/ID/wait`)
until the deadline, then stops it (`POST /containers/ID/stop?t=GRACE`: the engine's SIGTERM,
grace, SIGKILL). A container that ends before its deadline is recorded as such, and watched
on until the deadline (a start outside shoal is stopped then); one removed ends the watch.

Either way, an end that no shoal command asked for is written into the ledger the moment it
happens (EXITED, EXPIRED), and the `alloc --wait` waiters are rung (`record_end`).

A supervisor killed with SIGKILL enforces nothing: the next shoal command finds the allocation
past its lifetime and stops the workload itself (drivers.service.recover).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

# The /proc readers are shoal's own (procinfo.py, beside this file). Imported by shoal, this
# is drivers.supervisor.supervise and its sibling a package import. Run by path, as the
# drivers run it (`python -I -S .../supervise.py`), there is no package and no shoal on
# sys.path, and -I (which implies -P) leaves out this file's own directory too: it is added
# at the end, so the standard library comes first and only the supervisor's files are found
# there.
if TYPE_CHECKING or __package__:
    from drivers.supervisor import procinfo
else:
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import procinfo

if TYPE_CHECKING:
    from types import ModuleType


def _engine_client() -> ModuleType:
    """engine_client.py, found the way procinfo is (a package import, or beside this file)."""
    import importlib

    return importlib.import_module(
        f"{__package__}.engine_client" if __package__ else "engine_client"
    )


PID_FILE = ".shoal-pid"  # the workload's identity: "PID START", written by the workload
SUPERVISOR_FILE = ".shoal-supervisor"  # the supervisor's, written by the supervisor
OUTCOME_FILE = ".shoal-outcome.json"  # how the workload ended
LOG_FILE = "output.log"
SUPERVISOR_LOG = ".shoal-supervise.log"  # the supervisor's own stderr (a crash, if any)
KILL_WAIT_SECONDS = 5.0  # after SIGKILL: a process stuck in the kernel is given up on
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_LINGER_POLL_SECONDS = 1.0  # marked processes outside the tree are looked for this often
_STOP_POLL_SECONDS = 0.05
_ENGINE_RETRY_SECONDS = 2.0
ENGINE_AWAY_SECONDS = 600.0  # a container without a lifetime stops being watched after this


def now_text() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# -- processes: identity is a pid plus its kernel start time ---------------------------------


def write_identity(path: str) -> None:
    """Write "PID START" of the calling process to `path` (run after fork, before exec)."""
    me = os.getpid()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, f"{me} {procinfo.start_time(me)}".encode())
    finally:
        os.close(fd)


def _become_subreaper() -> bool:
    """prctl(PR_SET_CHILD_SUBREAPER): orphans of the workload's tree become our children."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def write_outcome(workspace: str, outcome: dict[str, Any]) -> None:
    """Whole or not at all (a temporary file renamed into place); nothing once the workspace
    is gone."""
    if not os.path.isdir(workspace):
        return
    target = os.path.join(workspace, OUTCOME_FILE)
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w") as out:
            json.dump(outcome, out)
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temporary)


def exit_fields(status: int | None) -> dict[str, Any]:
    """A wait status as the shell shows it: `exit_code` 0-255 (128+N after signal N) and the
    signal's name."""
    if status is None:
        return {"exit_code": None, "signal": None}
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return {"exit_code": code, "signal": None}
    try:
        name: str | None = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    return {"exit_code": 128 - code, "signal": name}


# -- process mode ------------------------------------------------------------------------------


def _report(answer: dict[str, Any]) -> None:
    """The one line the driver waits for; then stdout goes, so the driver sees its end."""
    # An error means the driver is gone: its cleanup finds the workload by the files.
    with contextlib.suppress(OSError):
        os.write(1, json.dumps(answer).encode() + b"\n")
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1)
    os.close(null)


def run_process(spec: dict[str, Any]) -> int:
    import subprocess

    workspace = str(spec["workspace"])
    marker = str(spec["marker"]).encode()
    deadline = spec.get("deadline")
    grace = float(spec.get("grace", 10.0))
    cpus = [int(c) for c in spec.get("cpus") or []]
    ram_bytes = int(spec.get("ram_bytes") or 0)
    pid_file = os.path.join(workspace, PID_FILE)

    asked: list[int] = []
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    for signum in STOP_SIGNALS:
        signal.signal(signum, lambda n, _frame: asked.append(n))
    signal.signal(signal.SIGCHLD, lambda _n, _frame: None)  # only to be woken
    subreaper = _become_subreaper()

    def in_child() -> None:
        # After fork, before exec: the workload records its own identity first.
        write_identity(pid_file)
        if cpus:
            os.sched_setaffinity(0, cpus)
        if ram_bytes:
            import resource

            resource.setrlimit(resource.RLIMIT_DATA, (ram_bytes, ram_bytes))

    # The workload's output is its owner's alone (it may print what it was given: tokens).
    log = os.open(os.path.join(workspace, LOG_FILE), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        child = subprocess.Popen(
            list(spec["argv"]),
            cwd=workspace,
            env=dict(spec["env"]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=in_child,
            close_fds=True,
        )
    except OSError as exc:  # not found, not executable, exec format: nothing started
        _report({"error": "exec", "errno": exc.errno, "strerror": exc.strerror or str(exc)})
        return 127
    except subprocess.SubprocessError as exc:  # the limits could not be applied
        _report({"error": "limits", "message": str(exc)})
        return 126
    finally:
        os.close(log)
    workload = child.pid
    child.returncode = 0  # reaped below, by pid; Popen must not wait for it itself
    _report({"pid": workload, "start": procinfo.start_time(workload)})

    status: int | None = None  # the workload's wait status, once it is reaped
    ended = ""
    reason = "exited"
    term_at: float | None = None  # when SIGTERM went out
    kill_at: float | None = None  # when SIGKILL went out
    next_look = 0.0  # for marked processes outside the tree

    def send(signum: int) -> None:
        if status is None:  # not reaped yet: its pid, and so its group id, are still ours
            with contextlib.suppress(OSError):
                os.killpg(workload, signum)
        # The workload's tree, wherever its members went: marked, or our children (orphans
        # reparented to us, the subreaper).
        for pid, started in procinfo.marked(marker, children_of=os.getpid()):
            with contextlib.suppress(OSError):  # not ours to signal (EPERM): the next one
                procinfo.signal_exactly(pid, started, signum)

    poller = select.poll()
    poller.register(wake_read, select.POLLIN)
    while True:
        children = True
        while True:
            try:
                pid, wait_status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children = False
                break
            if pid == 0:
                break
            if pid == workload:
                status, ended = wait_status, now_text()
        now = time.time()
        # Without children (or without the subreaper's view of the tree) the tree is over
        # once no marked process is left; that is looked for now and then.
        lingering = status is not None and (not children or not subreaper)
        if lingering and (term_at is not None or now >= next_look):
            next_look = now + _LINGER_POLL_SECONDS
            if not procinfo.marked(marker, children_of=os.getpid()):
                break
        if term_at is None and (asked or (deadline is not None and now >= deadline)):
            # A stop asked for at the deadline (shoal found it due a moment early) is expiry.
            due = deadline is not None and now >= float(deadline) - 1.0
            reason = "expired" if due else "stopped"
            send(signal.SIGTERM)
            term_at = now
        elif term_at is not None and kill_at is None and now >= term_at + grace:
            send(signal.SIGKILL)
            kill_at = now
        elif kill_at is not None:
            if now >= kill_at + KILL_WAIT_SECONDS:
                break  # stuck in the kernel: nothing more a signal can do
            send(signal.SIGKILL)  # orphans reparented to us since
        wait = _STOP_POLL_SECONDS if term_at is not None else 3600.0
        if lingering:
            wait = min(wait, _LINGER_POLL_SECONDS)
        if deadline is not None and term_at is None:
            wait = min(wait, max(float(deadline) - now, 0.0))
        poller.poll(int(wait * 1000) + 1)
        try:
            while os.read(wake_read, 512):
                pass
        except BlockingIOError:
            pass
    outcome = {
        **exit_fields(status),
        "ended": ended or now_text(),
        "reason": reason,
        "by": "supervisor",
    }
    write_outcome(workspace, outcome)
    # A stop that `free` asked for finds its row FREEING (record_end notes the end there); a
    # stop from outside shoal (a signal to this supervisor) is an end like any other. A stop
    # asked for while the row is still ALLOCATING is the undo of an interrupted or failed
    # alloc, which waits for this process to exit and then records the row FAILED: waiting
    # for its record here would hold both until its patience ran out (grace + 10 s of a
    # Ctrl-C that did not answer).
    ended_as = "EXPIRED" if reason == "expired" else "EXITED"
    record_end(spec, ended_as, outcome, wait_allocating=not asked)
    return 0


# -- the ledger: the end recorded the moment it happens ----------------------------------------
# Capacity decisions (alloc, --wait, resources) read the ledger, not the workloads: a workload
# that ended by itself is written there at once, and the waiters are rung, so its capacity is
# free without any shoal command asking the driver. Plain SQL on the ledger's schema (this
# file imports nothing of shoal); the ledger module's own rules stay the reference.

RECORD_WAIT_SECONDS = 120.0  # for the shoal that is still recording the allocation
_RECORD_STEP_SECONDS = 0.05


_FREEING_FROM = "freeing from "  # drivers.ledger.rows.FREEING_FROM
_HELD_BEFORE_FREE = ("ALLOCATED", "GONE")  # the rows an end is recorded for


class _SqliteSession:
    """The supervisor's session on this machine's SQLite ledger."""

    def __init__(self, path: str, timeout: float) -> None:
        import sqlite3

        self.path = path
        self.errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
        self.busy: tuple[type[BaseException], ...] = (sqlite3.OperationalError,)
        # mode=rw: never create a ledger that is not there.
        self.conn = sqlite3.connect(
            f"file:{path}?mode=rw", uri=True, timeout=timeout, isolation_level=None
        )

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.conn.execute(sql, params)

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def close(self) -> None:
        self.conn.close()

    def ring(self) -> None:
        ring_waiters(self.path)


def _session(spec: dict[str, Any], timeout: float = 5.0) -> Any:
    """A session on the allocation's ledger (SQLite, or a team's PostgreSQL: supervisor/team.py);
    None when there is none to write to (no ledger named, its file gone, the server away)."""
    if isinstance(spec.get("ledger_url"), str):
        try:
            if TYPE_CHECKING or __package__:
                from drivers.supervisor.team import PgSession
            else:
                from team import PgSession  # beside this file, as procinfo
            return PgSession(spec, timeout)
        except Exception:
            return None
    path = spec.get("ledger")
    if not isinstance(path, str) or not os.path.exists(path):
        return None
    import sqlite3

    try:
        return _SqliteSession(path, timeout)
    except sqlite3.Error:
        return None


def record_end(
    spec: dict[str, Any], status: str, outcome: dict[str, Any], *, wait_allocating: bool = True
) -> bool:
    """Move the allocation's row from ALLOCATED (or GONE) to `status` (EXITED, EXPIRED), keeping
    `outcome` in its state, as `free` keeps it; True if it moved. A row still ALLOCATING is
    waited for while its shoal lives (a workload may end before it is recorded), unless
    `wait_allocating` is False (that shoal is undoing it and waits for us). A row being
    freed stays FREEING, but its note says the workload ended (`freeing from EXITED`): if that
    `free` dies or is interrupted, the row goes back to what is true now, never to an
    ALLOCATED that holds capacity nothing uses. Any other row (freed, expired) is left as it
    is: its shoal knows."""
    alloc = spec.get("allocation")
    if not isinstance(alloc, str):
        return False
    give_up = time.monotonic() + RECORD_WAIT_SECONDS
    while time.monotonic() < give_up:
        db = _session(spec)
        if db is None:
            if isinstance(spec.get("ledger_url"), str):
                time.sleep(_RECORD_STEP_SECONDS * 20)  # a team ledger's server may be back
                continue
            return False
        try:
            db.begin()
            row = db.execute(
                "SELECT status, state, owner_pid, owner_start, expires, note FROM allocations "
                "WHERE id=?",
                (alloc,),
            ).fetchone()
            allocating = row is not None and row[0] == "ALLOCATING"
            if (
                allocating
                and wait_allocating
                and isinstance(row[2], int)
                and procinfo.is_alive(row[2], row[3])
            ):
                db.rollback()
                time.sleep(_RECORD_STEP_SECONDS)
                continue
            freeing = (
                row is not None
                and row[0] == "FREEING"
                and row[5] in tuple(_FREEING_FROM + s for s in _HELD_BEFORE_FREE)
            )
            if freeing:
                # Its `free` finishes it (FREED); only what it would go back to changes.
                db.execute(
                    "UPDATE allocations SET note=? WHERE id=? AND status='FREEING' AND note=?",
                    (_FREEING_FROM + status, alloc, row[5]),
                )
                db.commit()
                _ring_quietly(db)  # a FREEING row whose workload ended holds nothing
                return False  # not moved: its `free` moves it
            if row is None or row[0] not in _HELD_BEFORE_FREE:
                db.rollback()
                return False
            try:
                state = json.loads(row[1]) if row[1] else {}
            except (ValueError, RecursionError):
                state = None  # kept as it is: nothing of it is lost for the outcome
            if isinstance(state, dict):
                meta = state.get("metadata")
                state["metadata"] = {**(meta if isinstance(meta, dict) else {}), "outcome": outcome}
                kept = json.dumps(state)
            else:
                kept = row[1]
            # The notes `shoal status` shows: as drivers.service.alloc.expire writes them.
            note = exit_note(outcome)
            if status == "EXPIRED":
                note = f"expired at {row[4]}"
            elif status == "GONE":
                note = "removed outside shoal"
            db.execute(
                "UPDATE allocations SET status=?, updated=?, note=?, state=?, owner_pid=NULL, "
                "owner_start=NULL WHERE id=? AND status IN ('ALLOCATED', 'GONE')",
                (status, now_text(), note, kept, alloc),
            )
            db.commit()
        except db.busy:  # locked past the timeout, a schema it lacks, a server restarting
            with contextlib.suppress(*db.errors):
                db.rollback()
            time.sleep(_RECORD_STEP_SECONDS)
            continue
        except db.errors:
            return False
        finally:
            with contextlib.suppress(*db.errors):
                db.close()
        _ring_after(spec)
        return True
    return False


def _ring_quietly(db: Any) -> None:
    with contextlib.suppress(*db.errors):
        db.ring()


def _ring_after(spec: dict[str, Any]) -> None:
    """Ring the waiters on a session of its own, after the end was committed."""
    db = _session(spec)
    if db is not None:
        try:
            _ring_quietly(db)
        finally:
            with contextlib.suppress(*db.errors):
                db.close()


def ring_waiters(ledger: str) -> None:
    """Wake the first live `alloc --wait` waiter of each driver (drivers.ledger.doorbell's pipes):
    it works out who fits now. A pipe nobody holds belongs to a dead waiter; the waiters' own
    sweep removes its place, here it is only skipped."""
    import sqlite3

    directory = ledger + ".waiters"
    try:
        conn = sqlite3.connect(f"file:{ledger}?mode=ro", uri=True, timeout=5)
        try:
            rows = conn.execute("SELECT driver, token FROM waiters ORDER BY id").fetchall()
        finally:
            conn.close()
    except sqlite3.Error:
        return
    rung: set[str] = set()
    for driver, token in rows:
        if driver in rung or not isinstance(token, str) or not token or "/" in token:
            continue
        if token.startswith(".") or not _ring(os.path.join(directory, token)):
            continue
        rung.add(driver)


def _ring(path: str) -> bool:
    """One byte into a waiter's pipe; False when nobody holds it. Never follows a link and
    never writes into anything but a pipe."""
    import stat

    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
        with contextlib.suppress(BlockingIOError):  # full: rung already
            os.write(fd, b"!")
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def still_held(spec: dict[str, Any]) -> bool:
    """Whether the allocation may still need its supervisor: its ledger is there and its row
    has not been freed or failed. A supervisor whose engine has gone away asks this, so it
    does not outlive the allocation (or a removed SHOAL_HOME) retrying forever."""
    path, alloc = spec.get("ledger"), spec.get("allocation")
    team = isinstance(spec.get("ledger_url"), str)
    if not isinstance(alloc, str) or (not team and not isinstance(path, str)):
        return True  # a spec from before the ledger was named: the deadline ends it
    if not team and not os.path.exists(str(path)):
        return False
    db = _session(spec)
    if db is None:
        return True  # busy or unreachable now: look again later
    try:
        row = db.execute("SELECT status FROM allocations WHERE id=?", (alloc,)).fetchone()
    except db.errors:
        return True
    finally:
        with contextlib.suppress(*db.errors):
            db.close()
    return row is not None and row[0] not in ("FREED", "FAILED")


def exit_note(outcome: dict[str, Any]) -> str:
    code, name = outcome.get("exit_code"), outcome.get("signal")
    when = outcome.get("ended") or now_text()
    how = "exited" if outcome.get("reason") != "stopped" else "stopped from outside shoal"
    if name:
        return f"{how} (signal {name}, exit code {code}) at {when}"
    if code is None:
        return f"{how} at {when}"
    return f"{how} with code {code} at {when}"


def run_container(spec: dict[str, Any]) -> int:
    """Watch the container until it ends or its deadline comes, then stop it.

    Ending by itself is recorded in the ledger at once (EXITED, with its exit code); with a
    deadline the watch goes on after that (`condition=next-exit`: no polling), so a container
    started again outside shoal is still stopped at its deadline. A container removed before
    its deadline ends the watch: it is gone."""
    address, api = str(spec["address"]), str(spec.get("api", "/v1.41"))
    cid, grace = str(spec["container"]), int(spec["grace"])
    due = spec.get("deadline")
    deadline = float(due) if isinstance(due, (int, float)) else None
    engine = _engine_client()
    condition = "not-running"
    # Podman's own wait for the same end (the driver names it for a Podman engine): Podman's
    # Docker-compatible wait before 4.6 polls the container without a pause, a core of the
    # engine's for as long as the container runs (podman#18150), its own every 250 ms. Any
    # answer but 200 from it (an engine without it, the container removed meanwhile) is asked
    # again of the Docker-compatible one, which says what it is as before.
    own_wait = spec.get("wait") if isinstance(spec.get("wait"), str) else None
    away: float | None = None  # since when the engine has not answered
    while True:
        left = deadline - time.time() if deadline is not None else 3600.0
        if left <= 0:
            break
        target = f"{api}/containers/{cid}/wait?condition={condition}"
        if own_wait is not None and condition == "not-running":
            target = str(own_wait)
        try:
            code, body = engine.engine_answer(address, "POST", target, min(left, 3600))
        except TimeoutError:
            continue  # still running: look at the deadline again
        except (OSError, engine.HTTPException):  # the engine is away (a restart)
            if not still_held(spec):
                return 0  # freed meanwhile, or its ledger is gone: nothing is ours to watch
            away = away if away is not None else time.monotonic()
            if deadline is None and time.monotonic() - away > ENGINE_AWAY_SECONDS:
                # No lifetime to enforce: only the end is left to record, which the next
                # `shoal status ID` does as well. Not a process left retrying forever.
                return 1
            time.sleep(min(_ENGINE_RETRY_SECONDS, max(left, 0.0)))
            continue
        away = None
        if target == own_wait and code != 200:
            own_wait = None
            continue
        if code == 404:
            if condition == "not-running":
                record_end(spec, "GONE", {"reason": "removed", "ended": now_text()})
            return 0  # removed: nothing left to stop
        if code != 200:
            time.sleep(min(_ENGINE_RETRY_SECONDS, max(left, 0.0)))
            continue
        if condition == "not-running":
            ended = deadline is not None and time.time() >= deadline - 1.0
            outcome = {"exit_code": engine.exit_code(body), "signal": None, "ended": now_text()}
            outcome["reason"] = "expired" if ended else "exited"
            record_end(spec, "EXPIRED" if ended else "EXITED", outcome)
            if deadline is None:
                return 0
            condition = "next-exit"  # stopped: only a start outside shoal could follow
        else:
            # Another exit after a start outside shoal; an engine that answers next-exit at
            # once (not blocking as Podman and Docker do) must not make this a busy loop.
            time.sleep(min(_ENGINE_RETRY_SECONDS, max(left, 0.0)))
    for _ in range(30):  # an engine that is away for a minute still gets the stop
        try:
            stop = f"{api}/containers/{cid}/stop?t={grace}"
            code = engine.engine_call(address, "POST", stop, grace + 60)
        except (OSError, engine.HTTPException):
            code = 0
            if not still_held(spec):
                return 0
        if code in (204, 304, 404):
            if condition == "not-running" and code == 204:
                record_end(spec, "EXPIRED", {"reason": "expired", "ended": now_text()})
            return 0
        time.sleep(_ENGINE_RETRY_SECONDS)
    return 1


def start_detached(spec: dict[str, Any]) -> tuple[int, str | None]:
    """Start a supervisor for `spec`, in a session of its own, without waiting for it; its
    pid and start time."""
    import subprocess

    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.abspath(__file__)],
        cwd="/",
        env={"PATH": os.defpath},
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    assert proc.stdin is not None
    with contextlib.suppress(OSError):
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
    proc.returncode = 0  # it outlives us: Popen must not warn when collected
    return proc.pid, procinfo.start_time(proc.pid)


def main() -> int:
    spec = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    if spec.get("mode") == "container":
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 1)
        os.close(null)
        return run_container(spec)
    return run_process(spec)


if __name__ == "__main__":
    sys.exit(main())
