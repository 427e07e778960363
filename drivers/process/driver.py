"""The `process` driver: real local workloads, one process group per allocation.

The definition's `entry` command runs in a workspace of its own, in a new session (so the
whole group can be signalled), pinned to `cpu` CPUs (affinity) and limited to `ram` GiB of
data memory (RLIMIT_DATA: heap and private writable mappings, which is what a program
actually uses; RLIMIT_AS would also count reserved address space and break runtimes such as
Go and Java that reserve far more than they touch). Metadata becomes environment variables.

Identity is pid plus kernel start time, written by the child itself before it execs, so a
reused pid is never mistaken for ours and an allocation interrupted by kill -9 can still be
found and stopped.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from drivers import procinfo
from drivers.base import ResourceDriverTask
from drivers.capacity import fit_count
from drivers.fields import ENV, Command, Env, EnvName
from drivers.options import check_meta_names, ensure_workspace, load_config, parse_options
from drivers.types import STATUS_ALLOCATED, STATUS_NONE, LabelDefinition, Resource, Resources
from providers.errors import ShoalError, UsageError, shown
from providers.local.catalog import LocalCatalog
from providers.settings import Settings
from providers.strict import Count, NonNegative, Strict

ALLOCATION_ID_KEY = "SHOAL_ALLOCATION_ID"
PID_FILE = ".shoal-pid"
CPUS_FILE = ".shoal-cpus"
LOG_FILE = "output.log"
_POLL_SECONDS = 0.02
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
    def _identity(workspace: Path) -> tuple[int, str | None] | None:
        try:
            pid, started = (workspace / PID_FILE).read_text().split()
            return int(pid), started
        except (OSError, ValueError):
            return None

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
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
        ram_bytes = definition.resources.ram * 2**30
        pid_file = str(workspace / PID_FILE)

        def in_child() -> None:
            # Runs after fork, before exec: the child records its own identity first, so even
            # a parent killed right now leaves a process that can be found and stopped.
            me = os.getpid()
            fd = os.open(pid_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, f"{me} {procinfo.start_time(me)}".encode())
            os.close(fd)
            os.sched_setaffinity(0, cpus)
            if ram_bytes:
                resource.setrlimit(resource.RLIMIT_DATA, (ram_bytes, ram_bytes))
            # exec keeps the signal mask: the workload must not start with Ctrl-C blocked.
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD_SIGNALS)

        log = (workspace / LOG_FILE).open("ab")
        # Ctrl-C or SIGTERM is held while the child is spawned and delivered once Popen
        # returns, which it does only after the exec (or its failure): by then the child has
        # written its pid file, so the caller's cleanup always finds what it must stop. Without
        # this an interrupt between fork and exec left a workload that no row accounted for.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD_SIGNALS)
        try:
            proc = subprocess.Popen(
                opts.entry,
                cwd=workspace,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=in_child,
                close_fds=True,
            )
        except OSError as exc:  # not found, not executable, exec format: nothing started
            shutil.rmtree(workspace, ignore_errors=True)
            raise UsageError(
                f"options.entry: cannot run {shown(opts.entry[0])}: {exc.strerror or exc}"
            ) from None
        except subprocess.SubprocessError as exc:  # the limits could not be applied
            shutil.rmtree(workspace, ignore_errors=True)
            raise ShoalError(
                f"could not pin CPUs {cpus} or limit memory to {definition.resources.ram} GiB "
                f"for the workload ({exc}); check `ulimit -d` and the CPUs shoal may use"
            ) from None
        finally:
            log.close()
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        # Popen would warn when collected while the workload runs on; the workload outlives us.
        proc.returncode = 0
        identity = self._identity(workspace) or (proc.pid, procinfo.start_time(proc.pid))
        grace = self.cfg.grace_seconds if opts.grace_seconds is None else opts.grace_seconds
        return Resource(
            identifier=identifier,
            ip_addr="127.0.0.1",
            authentication=definition.authentication,
            metadata={
                "pid": identity[0],
                "start": identity[1],
                "cpus": cpus,
                "workspace": str(workspace),
                "log": str(workspace / LOG_FILE),
                "grace_seconds": grace,
                "argv": opts.entry,
            },
        )

    def _resolve_identity(self, res: Resource) -> tuple[int, str | None] | None:
        pid = res.metadata.get("pid")
        if isinstance(pid, int):
            start = res.metadata.get("start")
            return pid, start if isinstance(start, str) else None
        return self._identity(self._workspace(res.identifier))

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

    def _wait_gone(self, pid: int, started: str | None, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while True:
            procinfo.reap(pid)
            if not procinfo.is_alive(pid, started):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(_POLL_SECONDS)

    def _stop_marked(self, identifier: str, grace: float) -> None:
        """Stop every process carrying the allocation's marker: SIGTERM, grace, SIGKILL."""
        marker = f"{ALLOCATION_ID_KEY}={identifier}".encode()
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            members = procinfo.marked(marker)
            if not members:
                return
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

    def deallocate(self, res: Resource) -> None:
        workspace = self._workspace(res.identifier)
        identity = self._resolve_identity(res)
        grace = float(res.metadata.get("grace_seconds", self.cfg.grace_seconds))
        if identity is not None and procinfo.signal_exactly(*identity, signal.SIGTERM):
            pid, started = identity
            if not self._wait_gone(pid, started, grace):
                procinfo.signal_exactly(pid, started, signal.SIGKILL)
                if not self._wait_gone(pid, started, 5.0):
                    raise ShoalError(
                        f"process {pid} of {res.identifier} survived SIGKILL; try again"
                    )
        # Its children, and whatever they started, even in sessions of their own.
        self._stop_marked(res.identifier, grace)
        shutil.rmtree(workspace, ignore_errors=True)
        if workspace.exists():
            raise ShoalError(f"process driver: could not remove workspace {workspace}")
