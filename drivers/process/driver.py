"""The `process` driver: real local workloads, one process group per allocation.

The definition's `entry` command runs in a workspace of its own, in a new session (so the
whole group can be signalled), pinned to `cpu` CPUs (affinity) and limited to `ram` GiB of
data memory (RLIMIT_DATA: heap and private writable mappings, which is what a program
actually uses; RLIMIT_AS would also count reserved address space and break runtimes such as
Go and Java that reserve far more than they touch). Metadata becomes environment variables.

Each workload is started by a supervisor of its own (drivers/supervisor/supervise.py), which
outlives the shoal command: it ends the workload at the allocation's expiry (SIGTERM, grace,
SIGKILL) with no shoal running, and records how it ended (exit code, signal, time, why) in
the workspace, which keeps it with the output until `free`.

This module is the driver itself: config, definitions, capacity, allocate, status and
deallocate. Starting the supervisor and the identity files are in spawn.py, stopping in
stop.py, outcomes and output in outcome.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from drivers.definitions.options import (
    InstanceConfig,
    check_meta_names,
    ensure_workspace,
    parse_options,
)
from drivers.ledger.open import supervisor_ledger
from drivers.process import outcome
from drivers.process.defaults import DEFAULTS, Config
from drivers.process.spawn import (
    CPUS_FILE,
    marker,
    pick_cpus,
    read_identity,
    supervise,
)
from drivers.process.stop import stop, stop_marked
from drivers.spec.base import ResourceDriverTask
from drivers.spec.capacity import Totals, fit_count
from drivers.spec.types import (
    ALLOCATION_ID_KEY,
    STATUS_ALLOCATED,
    STATUS_NONE,
    LabelDefinition,
    Resource,
    Resources,
)
from drivers.supervisor import procinfo
from drivers.supervisor.supervise import LOG_FILE, OUTCOME_FILE, SUPERVISOR_FILE
from providers.core.errors import ShoalError, UsageError, shown
from providers.core.settings import Settings

if TYPE_CHECKING:
    from drivers.process.model import ProcessOptions

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


def inherited_env(environ: Mapping[str, str], passthrough: list[str]) -> dict[str, str]:
    wanted = set(INHERITED_ENV) | set(passthrough)
    return {k: v for k, v in environ.items() if k in wanted or k.startswith(INHERITED_PREFIXES)}


class ProcessDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self._cfg = InstanceConfig(
            "drivers.process.model:ProcessConfig", Config, DEFAULTS, full_name
        )
        self._root: Path | None = None
        # Allocations this process has stopped whole (finish): deallocate, a moment later,
        # need not scan /proc for them again.
        self._stopped: set[str] = set()

    def name(self) -> str:
        return self._name

    def is_remote(self) -> bool:
        return False

    def prepare(self, config: bytes) -> None:
        """The instance's table is checked (pydantic) where it is first read, `cfg`; with no
        table, `status`, `free` and `logs` read the defaults and import no pydantic."""
        self._cfg.prepare(config, self._settings.paths.config_file)
        self._root = None

    @property
    def cfg(self) -> Config:
        return self._cfg.get()

    @property
    def root(self) -> Path:
        """The workspaces' root (created on first use)."""
        if self._root is None:
            self._root = ensure_workspace(self._settings.paths, self.cfg.workspace, self._name)
        return self._root

    # -- definitions and capacity ----------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> ProcessOptions:
        from drivers.process.model import ProcessOptions

        _ = self.cfg  # the instance's table first (78), as every command that reads it did
        opts = parse_options(ProcessOptions, definition.options)
        # Not the model's own check: a booking (validate_booking) may leave both to its claim.
        if opts.entry is None and opts.image is None:
            raise UsageError(
                "options.entry: required (the command to run; or options.image, an image to "
                "run as its config says)"
            )
        return opts

    def validate_definition(self, definition: LabelDefinition) -> None:
        self._options(definition)

    def validate_booking(self, definition: LabelDefinition) -> None:
        """A booking reserves capacity only: its `entry` may come with the claim."""
        from drivers.process.model import ProcessOptions

        _ = self.cfg
        parse_options(ProcessOptions, definition.options, booking=True)

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        check_meta_names(metadata)

    def _limits(self) -> tuple[int, int]:
        cpu, ram = self.cfg.cpu_limit, self.cfg.ram_limit
        if cpu and ram:
            return cpu, ram
        from providers.local.supply import local_supply

        # Whole units of what `shoal resources` prints (two decimals): 1.996 vCPUs is 2.
        vcpus, gib = (int(float(f"{x:.2f}")) for x in local_supply(self._settings))
        return cpu or vcpus, ram or gib

    def totals(self) -> Totals:
        cpu, ram = self._limits()
        return Totals(
            max(0, cpu),
            max(0, ram),
            table=f'[drivers."{self._name}"]',
            configured=tuple(k for k in ("cpu", "ram") if getattr(self.cfg, f"{k}_limit")),
            source="this host's supply (`shoal resources`)",
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

    def workspace(self, identifier: str) -> Path:
        if not identifier or "/" in identifier or identifier.startswith("."):
            raise ShoalError(f"process driver: invalid resource identifier {identifier!r}")
        return self.root / identifier

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        opts = self._options(definition)
        self.validate_metadata(metadata)
        env = inherited_env(os.environ, self.cfg.env_passthrough)
        run = None
        if opts.image is not None:
            from drivers.process import image as image_run

            run = image_run.plan(self._settings, opts.image, opts.entry)
            env.update(run.env)  # the image's PATH and Env before the metadata and options
        for key, value in metadata.items():
            env[key] = value if isinstance(value, str) else json.dumps(value)
        env.update(opts.env)
        identifier = str(metadata.get(ALLOCATION_ID_KEY) or f"process-{os.urandom(4).hex()}")
        workspace = self.workspace(identifier)
        workspace.mkdir(parents=True, mode=0o700)  # its output and files: the owner's alone
        argv = list(opts.entry or [])
        if run is not None:
            try:
                image_run.prepare(run, workspace)
                argv = run.argv(workspace)
            except BaseException:
                shutil.rmtree(workspace, ignore_errors=True)
                raise
        env["SHOAL_WORKSPACE"] = str(workspace)
        env[ALLOCATION_ID_KEY] = identifier  # marks the workload's processes as ours
        cpus = pick_cpus(self.root, definition.resources.cpu)
        (workspace / CPUS_FILE).write_text(" ".join(map(str, cpus)))
        grace = self.cfg.grace_seconds if opts.grace_seconds is None else opts.grace_seconds
        deadline = definition.resources.expires  # the ledger row's, decided by the service
        answer, supervisor = supervise(
            workspace,
            {
                "mode": "process",
                "workspace": str(workspace),
                "argv": argv,
                "env": env,
                "cpus": cpus,
                "ram_bytes": definition.resources.ram * 2**30,
                "marker": f"{ALLOCATION_ID_KEY}={identifier}",
                "deadline": deadline.timestamp() if deadline else None,
                "grace": grace,
                # Where it records the end the moment it happens (supervise.record_end).
                **supervisor_ledger(self._settings),
                "allocation": identifier,
            },
        )
        if "pid" not in answer:
            self._undo(identifier, workspace, supervisor)
            if answer.get("error") == "exec":
                reason = answer.get("strerror") or f"errno {answer.get('errno')}"
                raise UsageError(f"options.entry: cannot run {shown(argv[0])}: {reason}")
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

    def _undo(self, identifier: str, workspace: Path, supervisor: tuple[int, str | None]) -> None:
        """After a start that failed: nothing of it may be left running, nor its workspace."""
        procinfo.reap(supervisor[0])
        procinfo.signal_exactly(*supervisor, signal.SIGKILL)
        stop_marked(identifier, 0.0)
        shutil.rmtree(workspace, ignore_errors=True)

    def workload_identity(self, res: Resource) -> tuple[int, str | None] | None:
        pid = res.metadata.get("pid")
        if isinstance(pid, int):
            start = res.metadata.get("start")
            return pid, start if isinstance(start, str) else None
        return read_identity(self.workspace(res.identifier))

    def supervisor_identity(self, res: Resource) -> tuple[int, str | None] | None:
        known = res.metadata.get("supervisor")
        if isinstance(known, dict) and isinstance(known.get("pid"), int):
            start = known.get("start")
            return int(known["pid"]), start if isinstance(start, str) else None
        return read_identity(self.workspace(res.identifier), SUPERVISOR_FILE)

    def supervisor_alive(self, res: Resource) -> bool:
        supervisor = self.supervisor_identity(res)
        if supervisor is None:
            return False
        procinfo.reap(supervisor[0])  # our child when this process started it
        return procinfo.is_alive(*supervisor)

    def status(self, res: Resource) -> str:
        # The supervisor lives exactly as long as the workload's tree: it is the subreaper of
        # every process the workload starts, including those that leave its session and clear
        # their environment (`env -i sleep 600 &`), which no marker finds.
        if self.supervisor_alive(res):
            # Once the tree is gone it writes the outcome, then records the end in the
            # ledger and rings the waiters (a team ledger's server may take a moment): its
            # workload has ended from the outcome on.
            if not (self.workspace(res.identifier) / OUTCOME_FILE).exists():
                return STATUS_ALLOCATED
            return STATUS_NONE
        identity = self.workload_identity(res)
        if identity is None:
            return STATUS_NONE
        procinfo.reap(identity[0])
        if procinfo.is_alive(*identity):
            return STATUS_ALLOCATED
        # The first process may have exited leaving its children at work: still ours.
        return STATUS_ALLOCATED if procinfo.marked(marker(res.identifier)) else STATUS_NONE

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        return None

    # -- outcomes and output (outcome.py) --------------------------------------------------

    def describe(self, res: Resource) -> dict[str, Any]:
        """Running, or how it ended and its last output lines (outcome.describe)."""
        return outcome.describe(self, res)

    def finish(self, res: Resource) -> dict[str, Any]:
        """Stop the workload if it still runs (its supervisor does it: SIGTERM, grace,
        SIGKILL), keeping its workspace; how it ended."""
        stop(self, res)
        self._stopped.add(res.identifier)
        return self.describe(res)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """output.log: the last `tail` lines (all without it); with `follow`, what it writes
        next, until the workload and everything it started have ended."""
        yield from outcome.follow_log(self, res, tail=tail, follow=follow)

    def running(self, res: Resource) -> bool:
        return self.supervisor_alive(res) or self.status(res) == STATUS_ALLOCATED

    def deallocate(self, res: Resource) -> None:
        workspace = self.workspace(res.identifier)
        if res.identifier not in self._stopped:
            stop(self, res)
        shutil.rmtree(workspace, ignore_errors=True)
        if workspace.exists():
            raise ShoalError(f"process driver: could not remove workspace {workspace}")


def _stamp(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
