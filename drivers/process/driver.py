"""The `process` driver: real local workloads, one process group per allocation.

The definition's `entry` command runs in a workspace of its own, in a new session (so the
whole group can be signalled), pinned to `cpu` CPUs (affinity) and limited to `ram` GiB of
data memory (RLIMIT_DATA: heap and private writable mappings, which is what a program
actually uses; RLIMIT_AS would also count reserved address space and break runtimes such as
Go and Java that reserve far more than they touch). Metadata becomes environment variables.

Each workload is started by a supervisor of its own (drivers/supervise.py), which outlives
the shoal command: it ends the workload at the allocation's expiry (SIGTERM, grace, SIGKILL)
with no shoal running, and records how it ended (exit code, signal, time, why) in the
workspace, which keeps it with the output until `free`.

Identity is pid plus kernel start time, written by each process itself before it execs (the
supervisor's and the workload's), so a reused pid is never mistaken for ours and an
allocation interrupted by kill -9 can still be found and stopped.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, BinaryIO

from pydantic import Field

from drivers import procinfo
from drivers.base import ResourceDriverTask
from drivers.capacity import fit_count
from drivers.fields import ENV, Command, Env, EnvName
from drivers.options import check_meta_names, ensure_workspace, load_config, parse_options
from drivers.supervise import (
    LOG_FILE,
    OUTCOME_FILE,
    PID_FILE,
    SUPERVISOR_FILE,
    SUPERVISOR_LOG,
    now_text,
    write_identity,
    write_outcome,
)
from drivers.types import STATUS_ALLOCATED, STATUS_NONE, LabelDefinition, Resource, Resources
from providers.core.errors import NotFoundError, ShoalError, UsageError, shown
from providers.core.settings import Settings
from providers.core.strict import Count, NonNegative, Strict
from providers.local.catalog import LocalCatalog

ALLOCATION_ID_KEY = "SHOAL_ALLOCATION_ID"
CPUS_FILE = ".shoal-cpus"
SUPERVISOR = str(Path(__file__).resolve().parent.parent / "supervise.py")
_POLL_SECONDS = 0.02
ANSWER_TIMEOUT_SECONDS = 60.0  # for the supervisor to start the workload (a loaded machine)
OUTCOME_WAIT_SECONDS = 2.0  # for a supervisor about to record how its workload ended
SUPERVISOR_MARGIN_SECONDS = 10.0  # beyond grace, for a supervisor to stop its workload
DUE_SECONDS = 2.0  # a supervisor this close to its deadline is left to end the workload
FOLLOW_POLL_SECONDS = 0.2
TAIL_LINES, TAIL_CHARS = 10, 2000  # `log_tail`: the last lines of output.log
_HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM}
SUPPLY = "0 = the local supply: host minus reserve"


class ProcessConfig(Strict):
    """[drivers."process/INSTANCE"]"""

    cpu_limit: Count = Field(0, description=f"vCPUs to hand out, {SUPPLY}")
    ram_limit: Count = Field(0, description=f"GiB to hand out, {SUPPLY}")
    cpu_overbook: Count = Field(0, description="extra vCPUs tenants may share when all allow it")
    ram_overbook: Count = Field(0, description="extra GiB tenants may share when all allow it")
    grace_seconds: NonNegative = Field(10.0, description="SIGTERM -> SIGKILL grace on free")
    workspace: str = Field("", description="root of the workspaces (default: the state dir)")
    env_passthrough: list[EnvName] = Field(
        [], description="more of shoal's environment variables workloads inherit"
    )


# What a workload inherits of shoal's environment: what programs need to run (search path,
# home, user, locale, time zone, temp dir, terminal). Nothing else, so shoal's settings and
# whatever credentials its caller holds (SHOAL_IMAGE_PASSWORD, cloud keys, tokens) stay out
# unless the user passes them (-o env, --meta) or names them in `env_passthrough`.
INHERITED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "TERM",
)
INHERITED_PREFIXES = ("LC_",)


class ProcessOptions(Strict):
    entry: Annotated[Command, Field(min_length=1)] = Field(
        description="the command to run: shell words or a list; e.g. --option entry='sleep 600'"
    )
    env: Env = Field({}, description=ENV)
    grace_seconds: NonNegative | None = Field(
        None, description="seconds from SIGTERM to SIGKILL on free; default: the instance's"
    )


def inherited_env(environ: Mapping[str, str], passthrough: list[str]) -> dict[str, str]:
    wanted = set(INHERITED_ENV) | set(passthrough)
    return {k: v for k, v in environ.items() if k in wanted or k.startswith(INHERITED_PREFIXES)}


class ProcessDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self.cfg = ProcessConfig()
        self.root = Path()

    def name(self) -> str:
        return self._name

    def is_remote(self) -> bool:
        return False

    def prepare(self, config: bytes) -> None:
        paths = self._settings.paths
        self.cfg = load_config(ProcessConfig, config, self._name, paths.config_file)
        self.root = ensure_workspace(paths, self.cfg.workspace, self._name)

    # -- definitions and capacity ----------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> ProcessOptions:
        return parse_options(ProcessOptions, definition.options)

    def validate_definition(self, definition: LabelDefinition) -> None:
        self._options(definition)

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        check_meta_names(metadata)

    def _limits(self) -> tuple[int, int]:
        cpu, ram = self.cfg.cpu_limit, self.cfg.ram_limit
        if cpu and ram:
            return cpu, ram
        supply = LocalCatalog.from_settings(self._settings).supply()
        return (
            cpu or int(float(supply["cpu"]["vcpu"])),
            ram or int(float(supply["memory"]["GiB"])),
        )

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        cpu, ram = self._limits()
        # With no CPU or RAM left after the reserve, nothing fits (0 would read as unlimited).
        if cpu < 1 or ram < 1:
            return 0
        return fit_count(
            cpu, ram, self.cfg.cpu_overbook, self.cfg.ram_overbook, node_usage, req.resources
        )

    # -- lifecycle -------------------------------------------------------------------------

    def _workspace(self, identifier: str) -> Path:
        if not identifier or "/" in identifier or identifier.startswith("."):
            raise ShoalError(f"process driver: invalid resource identifier {identifier!r}")
        return self.root / identifier

    def _pick_cpus(self, count: int) -> list[int]:
        """The `count` CPUs that the fewest live allocations of this instance are pinned to."""
        usable = sorted(os.sched_getaffinity(0))
        load: Counter[int] = Counter({cpu: 0 for cpu in usable})
        for other in self.root.iterdir():
            identity = self._identity(other)
            if identity and procinfo.is_alive(*identity):
                try:
                    load.update(int(c) for c in (other / CPUS_FILE).read_text().split())
                except (OSError, ValueError):
                    continue
        ranked = sorted(usable, key=lambda cpu: (load[cpu], cpu))
        return sorted(ranked[: max(1, min(count, len(usable)))])

    @staticmethod
    def _identity(workspace: Path, name: str = PID_FILE) -> tuple[int, str | None] | None:
        try:
            pid, started = (workspace / name).read_text().split()
            return int(pid), started
        except (OSError, ValueError):
            return None

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        from drivers.definition import expires_at

        opts = self._options(definition)
        self.validate_metadata(metadata)
        env = inherited_env(os.environ, self.cfg.env_passthrough)
        for key, value in metadata.items():
            env[key] = value if isinstance(value, str) else json.dumps(value)
        env.update(opts.env)
        identifier = str(metadata.get(ALLOCATION_ID_KEY) or f"process-{os.urandom(4).hex()}")
        workspace = self._workspace(identifier)
        workspace.mkdir(parents=True)
        env["SHOAL_WORKSPACE"] = str(workspace)
        env[ALLOCATION_ID_KEY] = identifier  # marks the workload's processes as ours
        cpus = self._pick_cpus(definition.resources.cpu)
        (workspace / CPUS_FILE).write_text(" ".join(map(str, cpus)))
        grace = self.cfg.grace_seconds if opts.grace_seconds is None else opts.grace_seconds
        deadline = expires_at(definition)
        answer, supervisor = self._supervise(
            workspace,
            {
                "mode": "process",
                "workspace": str(workspace),
                "argv": opts.entry,
                "env": env,
                "cpus": cpus,
                "ram_bytes": definition.resources.ram * 2**30,
                "marker": f"{ALLOCATION_ID_KEY}={identifier}",
                "deadline": deadline.timestamp() if deadline else None,
                "grace": grace,
            },
        )
        if "pid" not in answer:
            self._undo(identifier, workspace, supervisor)
            if answer.get("error") == "exec":
                reason = answer.get("strerror") or f"errno {answer.get('errno')}"
                raise UsageError(f"options.entry: cannot run {shown(opts.entry[0])}: {reason}")
            if answer.get("error") == "limits":
                raise ShoalError(
                    f"could not pin CPUs {cpus} or limit memory to {definition.resources.ram} "
                    f"GiB for the workload ({answer.get('message')}); check `ulimit -d` and the "
                    "CPUs shoal may use"
                )
            raise ShoalError(
                f"process driver: the supervisor of {identifier} did not start the workload "
                f"({answer.get('detail') or 'no answer'})"
            )
        start = answer.get("start")
        return Resource(
            identifier=identifier,
            ip_addr="127.0.0.1",
            authentication=definition.authentication,
            metadata={
                "pid": int(answer["pid"]),
                "start": start if isinstance(start, str) else None,
                "cpus": cpus,
                "workspace": str(workspace),
                "log": str(workspace / LOG_FILE),
                "grace_seconds": grace,
                "argv": opts.entry,
                "supervisor": {"pid": supervisor[0], "start": supervisor[1]},
                "deadline": _stamp(deadline) if deadline else None,
            },
        )

    def _supervise(
        self, workspace: Path, spec: dict[str, Any]
    ) -> tuple[dict[str, Any], tuple[int, str | None]]:
        """Start the allocation's supervisor, which starts the workload; its answer (the
        workload's pid and start time, or why it could not start) and its identity.

        Ctrl-C or SIGTERM is held from before the spawn until the answer is in: by then the
        supervisor's identity file (written before it execs) and the workload's (written
        before the workload execs) are on disk, so the caller's cleanup always finds what it
        must stop. Without this an interrupt between fork and exec left a workload that no
        row accounted for."""
        supervisor_file = str(workspace / SUPERVISOR_FILE)

        def in_supervisor() -> None:
            # After fork, before exec: the supervisor records its own identity first.
            write_identity(supervisor_file)
            # exec keeps the signal mask: the supervisor must not start with signals blocked.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)

        errors = (workspace / SUPERVISOR_LOG).open("ab")
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
        try:
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-I", "-S", SUPERVISOR],
                    cwd="/",
                    env={"PATH": os.defpath},  # not the workload's: it carries no marker
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    start_new_session=True,
                    preexec_fn=in_supervisor,
                    close_fds=True,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                shutil.rmtree(workspace, ignore_errors=True)
                raise ShoalError(
                    f"process driver: cannot start the supervisor ({sys.executable}): {exc}"
                ) from None
            finally:
                errors.close()
            answer = _answer(proc, spec)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        identity = self._identity(workspace, SUPERVISOR_FILE) or (
            proc.pid,
            procinfo.start_time(proc.pid),
        )
        if "pid" in answer:
            # Popen would warn when collected while the supervisor runs on; it outlives us.
            proc.returncode = 0
        else:
            try:  # it exits at once after an error; anything else is stopped
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            log = _text_tail(workspace / SUPERVISOR_LOG, 1, 300)
            answer.setdefault("detail", log)
        return answer, identity

    def _undo(self, identifier: str, workspace: Path, supervisor: tuple[int, str | None]) -> None:
        """After a start that failed: nothing of it may be left running, nor its workspace."""
        procinfo.reap(supervisor[0])
        procinfo.signal_exactly(*supervisor, signal.SIGKILL)
        self._stop_marked(identifier, 0.0)
        shutil.rmtree(workspace, ignore_errors=True)

    def _resolve_identity(self, res: Resource) -> tuple[int, str | None] | None:
        pid = res.metadata.get("pid")
        if isinstance(pid, int):
            start = res.metadata.get("start")
            return pid, start if isinstance(start, str) else None
        return self._identity(self._workspace(res.identifier))

    def _supervisor(self, res: Resource) -> tuple[int, str | None] | None:
        known = res.metadata.get("supervisor")
        if isinstance(known, dict) and isinstance(known.get("pid"), int):
            start = known.get("start")
            return int(known["pid"]), start if isinstance(start, str) else None
        return self._identity(self._workspace(res.identifier), SUPERVISOR_FILE)

    def _supervisor_alive(self, res: Resource) -> bool:
        supervisor = self._supervisor(res)
        if supervisor is None:
            return False
        procinfo.reap(supervisor[0])  # our child when this process started it
        return procinfo.is_alive(*supervisor)

    def status(self, res: Resource) -> str:
        identity = self._resolve_identity(res)
        if identity is None:
            return STATUS_NONE
        procinfo.reap(identity[0])
        if procinfo.is_alive(*identity):
            return STATUS_ALLOCATED
        # The first process may have exited leaving its children at work: still ours.
        marker = f"{ALLOCATION_ID_KEY}={res.identifier}".encode()
        return STATUS_ALLOCATED if procinfo.marked(marker) else STATUS_NONE

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        return None

    # -- outcomes and output ---------------------------------------------------------------

    def describe(self, res: Resource) -> dict[str, Any]:
        """Running: its pid and whether its supervisor is there to end it on time. Ended:
        its exit code (128+N after signal N), the signal, when, why (`exited` by itself,
        `expired`, `stopped` by `free`), and the last lines of its output; kept with the
        workspace until `free`."""
        workspace = self._workspace(res.identifier)
        if not workspace.is_dir():
            return {"state": "gone", "message": "the workspace no longer exists"}
        watched = self._supervisor(res) is not None  # not by a shoal from before supervisors
        supervised = watched and self._supervisor_alive(res)
        if self.status(res) == STATUS_ALLOCATED:
            identity = self._resolve_identity(res)
            deadline = res.metadata.get("deadline")
            return {
                "state": "running",
                "pid": identity[0] if identity else None,
                # "gone": killed; the next shoal command past the deadline ends the workload
                "supervisor": "running" if supervised else ("gone" if watched else None),
                "deadline": deadline if isinstance(deadline, str) else None,
            }
        outcome = _read_outcome(workspace, wait=OUTCOME_WAIT_SECONDS if supervised else 0.0)
        return {
            "state": "exited",
            "exit_code": outcome.get("exit_code"),
            "signal": outcome.get("signal"),
            "finished": outcome.get("ended"),
            "reason": outcome.get("reason"),
            "by": outcome.get("by"),  # who ended it: its supervisor, or shoal (it was gone)
            "log_tail": _text_tail(workspace / LOG_FILE, TAIL_LINES, TAIL_CHARS),
        }

    def finish(self, res: Resource) -> dict[str, Any]:
        """Stop the workload if it still runs (its supervisor does it: SIGTERM, grace,
        SIGKILL), keeping its workspace; how it ended."""
        self._stop(res)
        return self.describe(res)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """output.log: the last `tail` lines (all without it); with `follow`, what it writes
        next, until the workload and everything it started have ended."""
        path = self._workspace(res.identifier) / LOG_FILE
        try:
            log = path.open("rb")
        except FileNotFoundError:
            raise NotFoundError(
                f"{res.identifier}: no output log ({path} is gone with its workspace)"
            ) from None
        with log:
            log.seek(tail_offset(log, tail) if tail is not None else 0)
            while True:
                # Looked at before reading: what it wrote before it ended is read below.
                ended = not follow or not self._running(res)
                chunk = log.read(1 << 16)
                if chunk:
                    yield chunk
                elif ended:
                    return
                else:
                    time.sleep(FOLLOW_POLL_SECONDS)

    def _running(self, res: Resource) -> bool:
        return self._supervisor_alive(res) or self.status(res) == STATUS_ALLOCATED

    # -- stopping --------------------------------------------------------------------------

    def _wait_gone(self, pid: int, started: str | None, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            procinfo.reap(pid)
            if not procinfo.is_alive(pid, started):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)

    def _stop_marked(self, identifier: str, grace: float) -> bool:
        """Stop every process carrying the allocation's marker: SIGTERM, grace, SIGKILL.
        True when there was one."""
        marker = f"{ALLOCATION_ID_KEY}={identifier}".encode()
        found = False
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            members = procinfo.marked(marker)
            if not members:
                return found
            found = True
            for pid, started in members:
                procinfo.signal_exactly(pid, started, sig)
            deadline = time.monotonic() + wait
            while members and time.monotonic() < deadline:
                time.sleep(_POLL_SECONDS)
                for pid, _ in members:
                    procinfo.reap(pid)
                members = [m for m in members if procinfo.is_alive(*m)]
        if procinfo.marked(marker):
            raise ShoalError(f"processes of {identifier} survived SIGKILL; try again")
        return found

    def _stop(self, res: Resource) -> None:
        """End the workload and all it started. Its supervisor does it, and records how it
        ended; whatever it leaves (a supervisor killed with SIGKILL leaves it all) is stopped
        here, and recorded as stopped by shoal."""
        workspace = self._workspace(res.identifier)
        grace = float(res.metadata.get("grace_seconds", self.cfg.grace_seconds))
        supervisor = self._supervisor(res)
        if supervisor is not None and self._supervisor_alive(res):
            pid, started = supervisor
            due = _deadline(res)
            left = due - time.time() if due is not None else None
            wait = grace + SUPERVISOR_MARGIN_SECONDS
            if left is None or left > DUE_SECONDS:
                procinfo.signal_exactly(pid, started, signal.SIGTERM)
            else:  # its deadline has come: it is ending the workload already
                wait += max(left, 0.0)
            if not self._wait_gone(pid, started, wait):
                procinfo.signal_exactly(pid, started, signal.SIGKILL)
                self._wait_gone(pid, started, 5.0)
        stopped = False
        identity = self._resolve_identity(res)
        if identity is not None and procinfo.signal_exactly(*identity, signal.SIGTERM):
            stopped = True
            pid, started = identity
            if not self._wait_gone(pid, started, grace):
                procinfo.signal_exactly(pid, started, signal.SIGKILL)
                if not self._wait_gone(pid, started, 5.0):
                    raise ShoalError(
                        f"process {pid} of {res.identifier} survived SIGKILL; try again"
                    )
        # Its children, and whatever they started, even in sessions of their own.
        stopped = self._stop_marked(res.identifier, grace) or stopped
        if stopped and not (workspace / OUTCOME_FILE).exists():
            due = _deadline(res)
            write_outcome(
                str(workspace),
                {
                    "exit_code": None,
                    "signal": None,
                    "ended": now_text(),
                    "reason": "expired" if due is not None and time.time() >= due else "stopped",
                    "by": "shoal",
                },
            )

    def deallocate(self, res: Resource) -> None:
        workspace = self._workspace(res.identifier)
        self._stop(res)
        shutil.rmtree(workspace, ignore_errors=True)
        if workspace.exists():
            raise ShoalError(f"process driver: could not remove workspace {workspace}")


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _deadline(res: Resource) -> float | None:
    """When the allocation's lifetime ends (Unix seconds): the supervisor's deadline, else
    the ledger's expiry."""
    for value in (res.metadata.get("deadline"), res.timeout):
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, str) and value:
            with contextlib.suppress(ValueError):
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def _answer(proc: subprocess.Popen[bytes], spec: dict[str, Any]) -> dict[str, Any]:
    """Hand the supervisor its spec; its one-line answer (an error when it gives none)."""
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(spec).encode())
        proc.stdin.close()
    except OSError:  # it died before reading: its stdout says so (nothing)
        with contextlib.suppress(OSError):
            proc.stdin.close()
    received = b""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + ANSWER_TIMEOUT_SECONDS
    while b"\n" not in received:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        received += chunk
    proc.stdout.close()
    try:
        answer = json.loads(received.split(b"\n", 1)[0])
    except ValueError:
        return {"error": "supervisor"}
    return answer if isinstance(answer, dict) else {"error": "supervisor"}


def _read_outcome(workspace: Path, wait: float) -> dict[str, Any]:
    """The supervisor's record; `wait` seconds for one about to be written."""
    deadline = time.monotonic() + wait
    while True:
        try:
            found = json.loads((workspace / OUTCOME_FILE).read_text())
            return found if isinstance(found, dict) else {}
        except (OSError, ValueError):
            if time.monotonic() >= deadline:
                return {}
        time.sleep(_POLL_SECONDS)


def tail_offset(log: BinaryIO, lines: int) -> int:
    """Where the last `lines` lines of `log` begin (a last line may lack its newline)."""
    end = log.seek(0, os.SEEK_END)
    if lines <= 0:
        return end
    position, seen = end, 0
    while position > 0:
        step = min(1 << 16, position)
        position -= step
        log.seek(position)
        block = log.read(step)
        stop = len(block)
        if position + step == end and block.endswith(b"\n"):
            stop -= 1  # the final newline ends the last line; it starts none
        while True:
            stop = block.rfind(b"\n", 0, stop)
            if stop < 0:
                break
            seen += 1
            if seen == lines:
                return position + stop + 1
    return 0


def _text_tail(path: Path, lines: int, chars: int) -> str:
    """The last `lines` lines of a file as text (at most `chars` of them); "" without it."""
    try:
        with path.open("rb") as log:
            start = tail_offset(log, lines)
            end = log.seek(0, os.SEEK_END)
            log.seek(max(start, end - chars * 4))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return text[-chars:].strip()
