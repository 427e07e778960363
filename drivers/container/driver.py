"""The `container` driver (aliases `docker`, `podman`): each allocation is a real container
with hard CPU and memory limits, run by a Docker-compatible engine over its API.

Images: `-o image=NAME` is an image the engine has, a registry image it lacks and pulls
with the credential shoal finds (pull.py), or an unpacked image dir (images.py).
Limits: `--cpu` becomes NanoCpus, `--ram` the memory limit (swap off); metadata and
`-o env={...}` the environment. `-o network=none|nat` (default nat); a MAC address is
generated. Labels mark the container as shoal's with its allocation id.

Capacity: a local engine shares this host, so the engine's CPUs and memory are the totals
and the node's usage (every local driver's) is subtracted, as the spec's local drivers do;
a remote engine (DOCKER_HOST=tcp://...) is counted by its own holdings only.

This module is the driver itself: config, definitions, capacity, allocate, status, finish,
deallocate and the engine-wide listing. Images are in images.py and pull.py; the deadline
supervisor and outcomes in outcome.py; logs are the engine client's (engine.py); the snapshot
and export tasks in tasks.py.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from drivers.container import outcome
from drivers.container.defaults import DEFAULTS, Config
from drivers.definitions.options import InstanceConfig
from drivers.spec.types import (
    ALLOCATION_ID_KEY,
    STATUS_ALLOCATED,
    STATUS_NONE,
    LabelDefinition,
    Resource,
    Resources,
)
from providers.core.errors import NotFoundError, ShoalError, UsageError
from providers.core.settings import Settings

# What only `alloc` (capacity, images, the engine's totals) or a task needs is imported where
# it is used: `status` and `free` of an allocation are a process each, and import this module
# for an inspect, a stop and a removal.
if TYPE_CHECKING:
    from drivers.container.engine import Engine
    from drivers.container.model import ContainerOptions
    from drivers.spec.base import ResourceDriverTask
    from drivers.spec.capacity import Totals

MANAGED_BY = "dev.shoal.managed-by"
ALLOCATION_LABEL = "dev.shoal.allocation"


def generated_mac() -> str:
    """A random unicast, locally administered MAC (02:xx:...)."""
    octets = [0x02, *(random.randrange(256) for _ in range(5))]
    return ":".join(f"{o:02x}" for o in octets)


TOTALS_TTL_SECONDS = 300


def _totals(kept: Any) -> tuple[int, int] | None:
    """(CPUs, GiB) of a cache entry, None unless it has that shape."""
    if not isinstance(kept, dict):
        return None
    cpus, ram = kept.get("cpus"), kept.get("ram_gib")
    if type(cpus) is not int or type(ram) is not int:
        return None
    return cpus, ram


class ContainerDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self._cfg = InstanceConfig(
            "drivers.container.model:ContainerConfig", Config, DEFAULTS, full_name
        )
        self._engines: dict[str, Engine] = {}  # by address
        self._totals: tuple[int, int] | None = None
        self._stopped: set[str] = set()  # containers `finish` stopped
        # What `status` saw of a container ({} = gone), for the `describe` after it: one
        # inspect for both.
        self._seen: dict[str, dict[str, Any]] = {}

    def name(self) -> str:
        return self._name

    def engine(self, res: Resource | None = None) -> Engine:
        """The engine at the configured address; for an allocation, the one it was made on
        (its metadata's `engine`: DOCKER_HOST or the config may have changed since)."""
        from drivers.container.engine import Engine, locate

        recorded = (res.metadata or {}).get("engine") if res is not None else None
        if isinstance(recorded, str) and recorded:
            address = recorded
        else:
            address = locate(self.cfg.socket, self._settings.env)
        if address not in self._engines:
            self._engines[address] = Engine(address)
        return self._engines[address]

    def is_remote(self) -> bool:
        return self.engine().is_remote

    def prepare(self, config: bytes) -> None:
        """The instance's table is checked (pydantic) where it is first read, `cfg`: `alloc`
        reads it, while `status`, `free` and `logs` of an allocation read the engine address
        and grace it was made with (its metadata) and need not."""
        self._cfg.prepare(config, self._settings.paths.config_file)

    @property
    def cfg(self) -> Config:
        return self._cfg.get()

    def _grace(self, res: Resource) -> int:
        """The grace of the allocation's stop: the one it was made with (its container's
        StopTimeout and its lifetime's grace), else the configured one."""
        recorded = (res.metadata or {}).get("grace_seconds")
        if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded >= 0:
            return recorded
        return self.cfg.grace_seconds

    def _engine_totals(self) -> tuple[int, int]:
        """The engine's CPUs and memory (GiB). Podman's /info takes ~300 ms, so its answer
        is kept in the cache dir for a few minutes per engine address; a /_ping (a few ms)
        still proves the engine is there each time."""
        if self._totals is None:
            from providers.core.ttlcache import TtlCache

            engine = self.engine()
            cache = TtlCache(self._settings.paths.cache_dir / "container-engines.json")
            totals = _totals(cache.get("totals", engine.address))
            if totals is None:
                info = engine.info()
                totals = (int(info.get("NCPU") or 0), int(info.get("MemTotal") or 0) // 2**30)
                kept = {"cpus": totals[0], "ram_gib": totals[1]}
                cache.put("totals", engine.address, kept, TOTALS_TTL_SECONDS)
            else:
                engine.ping()
            self._totals = totals
        return self._totals

    # -- definitions and capacity --------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> ContainerOptions:
        from drivers.container.model import ContainerOptions
        from drivers.definitions.options import parse_options

        return parse_options(ContainerOptions, definition.options)

    def validate_definition(self, definition: LabelDefinition) -> None:
        _ = self.cfg  # the instance's table first (78), as every command that reads it did
        self._options(definition)
        if definition.resources.disks:
            raise UsageError("resources.disks: the container driver takes no disks")

    def validate_booking(self, definition: LabelDefinition) -> None:
        """A booking reserves capacity only: its image (and entry) may come with the claim."""
        from drivers.container.model import ContainerOptions
        from drivers.definitions.options import parse_options

        _ = self.cfg
        parse_options(ContainerOptions, definition.options, booking=True)
        if definition.resources.disks:
            raise UsageError("resources.disks: the container driver takes no disks")

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        from drivers.definitions.options import check_meta_names

        check_meta_names(metadata)

    def _limits(self) -> tuple[int, int]:
        cpus, ram = self._engine_totals()
        return self.cfg.cpu_limit or cpus, self.cfg.ram_limit or ram

    def totals(self) -> Totals:
        """The most one container may ask: the configured limits, never above the engine's
        own CPUs and memory (the limits may overcommit the engine, not one container)."""
        from drivers.spec.capacity import Totals

        cpu, ram = self._limits()
        engine_cpus, engine_ram = self._engine_totals()
        return Totals(
            min(cpu, engine_cpus),
            min(ram, engine_ram),
            table=f'[drivers."{self._name}"]',
            # A limit is what binds only where it is below the engine's own.
            configured=tuple(
                key
                for key, limit, engine in (("cpu", cpu, engine_cpus), ("ram", ram, engine_ram))
                if getattr(self.cfg, f"{key}_limit") and limit < engine
            ),
            source=f"the engine's (it has cpu={engine_cpus} ram={engine_ram}GiB)",
        )

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        from drivers.spec.capacity import fit_count, never_fits

        cpu, ram = self._limits()
        refusal = never_fits(self._name, self.totals(), req.resources)
        if refusal is not None:
            raise UsageError(refusal)
        return fit_count(
            cpu,
            ram,
            self.cfg.cpu_overbook,
            self.cfg.ram_overbook,
            node_usage,
            req.resources,
        )

    # -- lifecycle -----------------------------------------------------------------------

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        from drivers.container.images import UNSAFE_NAME, resolve_image

        deadline = definition.resources.expires  # the ledger row's, decided by the service
        opts = self._options(definition)
        engine = self.engine()
        grace = self.cfg.grace_seconds
        image = resolve_image(engine, self._settings, opts.image)
        allocation_id = str(metadata.get(ALLOCATION_ID_KEY, ""))
        name = UNSAFE_NAME.sub("-", f"shoal-{allocation_id}").strip("-")
        # Metadata last: -o env cannot forge SHOAL_ALLOCATION_ID.
        env = opts.env | {str(k): str(v) for k, v in metadata.items()}
        mac = generated_mac()
        ram_bytes = definition.resources.ram * 2**30
        body: dict[str, Any] = {
            "Image": image,
            "Env": [f"{k}={v}" for k, v in sorted(env.items())],
            "Labels": {MANAGED_BY: "shoal", ALLOCATION_LABEL: allocation_id},
            "Hostname": name[:63],
            # Any stop the engine makes on its own (`podman stop`, `rm -f`, its shutdown) gives
            # the grace that `free` and the lifetime give (recorded below).
            "StopTimeout": grace,
            "HostConfig": {
                "NanoCpus": definition.resources.cpu * 10**9,
                "Memory": ram_bytes,
                "MemorySwap": ram_bytes,  # no swap beyond the limit
                "NetworkMode": "none" if opts.network == "none" else "bridge",
            },
        }
        if opts.network != "none":
            # Docker reads the top-level field; Podman only the endpoint's, on its network.
            body["MacAddress"] = mac
            endpoint = "podman" if engine.is_podman() else "bridge"
            body["NetworkingConfig"] = {"EndpointsConfig": {endpoint: {"MacAddress": mac}}}
        if opts.entry:
            body["Cmd"] = opts.entry
        cid = self._create(engine, name, body, image, opts.image)
        try:
            engine.start(cid)
            seen = engine.inspect(cid)
        except BaseException:
            engine.remove(cid)
            raise
        network = seen.get("NetworkSettings") or {}
        ip = network.get("IPAddress") or ""
        for attached in (network.get("Networks") or {}).values():
            ip = ip or attached.get("IPAddress") or ""
            mac = attached.get("MacAddress") or mac
        meta: dict[str, Any] = {
            "container": cid,
            "name": name,
            "image": image,
            "engine": engine.address,
            "grace_seconds": grace,
        }
        from drivers.ledger.open import supervisor_ledger

        ledger = supervisor_ledger(self._settings)
        meta.update(outcome.start_supervisor(engine, cid, deadline, grace, ledger, allocation_id))
        return Resource(
            identifier=allocation_id,
            hw_addr=mac if opts.network != "none" else "",
            ip_addr=ip,
            metadata=meta,
        )

    def _create(
        self, engine: Engine, name: str, body: dict[str, Any], image: str, wanted: str
    ) -> str:
        """The container, made; a registry image the engine lacks is pulled first (as
        `docker run` does), through the engine with the credential shoal finds (pull.py)."""
        from drivers.container.images import missing_image

        try:
            return engine.create(name, body)
        except NotFoundError:
            # The engine's 404 is the image check (no request of its own before the create);
            # what else was missing is said as the engine said it.
            if engine.image_exists(image):
                raise
        from drivers.container.pull import pull_missing

        if not pull_missing(engine, self._settings, image, wanted):
            raise missing_image(wanted)
        try:
            return engine.create(name, body)
        except NotFoundError:
            if not engine.image_exists(image):
                raise missing_image(wanted) from None
            raise

    def cid(self, res: Resource) -> str:
        recorded = (res.metadata or {}).get("container")
        if recorded:
            return str(recorded)
        # No id recorded (an alloc interrupted before its create answered): the name it gave.
        from drivers.container.images import UNSAFE_NAME

        return UNSAFE_NAME.sub("-", f"shoal-{res.identifier}")

    def status(self, res: Resource) -> str:
        cid = self.cid(res)
        try:
            seen = self.engine(res).inspect(cid)
        except NotFoundError:
            seen = {}
        self._seen[cid] = seen
        state = seen.get("State") or {}
        return STATUS_ALLOCATED if state.get("Running") or state.get("Paused") else STATUS_NONE

    def describe(self, res: Resource) -> dict[str, Any]:
        """The container's state; for one that exited, its exit code and last log lines.
        Right after `status`, from what it saw."""
        cid = self.cid(res)
        return outcome.describe(self.engine(res), cid, res, self._seen.pop(cid, None))

    def finish(self, res: Resource) -> dict[str, Any]:
        """Stop the container (the engine's SIGTERM, grace, SIGKILL) but keep it; its state,
        exit code and last log lines."""
        cid = self.cid(res)
        self._seen.pop(cid, None)  # it is about to change
        try:
            self.engine(res).stop(cid, self._grace(res))
        except NotFoundError:
            return dict(outcome.GONE)
        except ShoalError:
            pass  # not running (304), or a state in which it cannot be stopped
        self._stopped.add(cid)
        return self.describe(res)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The container's stdout and stderr as the engine keeps them, streamed; with
        `follow` until the container stops."""
        yield from self.engine(res).log_stream(self.cid(res), tail=tail, follow=follow)

    def remote_allocations(self) -> list[dict[str, Any]]:
        """shoal's containers on the engine, made by any machine that uses it."""
        rows = []
        for found in self.engine().containers({MANAGED_BY: "shoal"}):
            labels = found.get("Labels") or {}
            names = found.get("Names") or [""]
            name, image = str(names[0]).lstrip("/"), found.get("Image", "")
            rows.append(
                {
                    # The fields every driver's listing shares, then this driver's own.
                    "id": labels.get(ALLOCATION_LABEL, ""),
                    "driver": self.name(),
                    "status": found.get("State", ""),
                    "created": _rfc3339(found.get("Created")),
                    "note": f"container {name} ({image}): {found.get('Status', '')}",
                    "name": name,
                    "state": found.get("State", ""),
                    "engine_status": found.get("Status", ""),
                    "image": image,
                }
            )
        return sorted(rows, key=lambda r: (str(r["created"]), str(r["id"])))

    def get_task(self, task: str, options: str) -> ResourceDriverTask | None:
        from drivers.container.tasks import TASKS, ContainerTask
        from providers.core import schema

        if task not in TASKS:
            return None
        parsed = json.loads(options) if options else {}
        place = schema.Place(UsageError, "--options", noun=f"option of task {task}")
        return ContainerTask(self, task, schema.validate(TASKS[task], parsed, place).model_dump())

    def deallocate(self, res: Resource) -> None:
        engine = self.engine(res)
        cid = self.cid(res)
        try:
            if cid not in self._stopped:  # `finish` stopped it a moment ago
                engine.stop(cid, self._grace(res))
        except NotFoundError:
            return  # already gone: nothing to free
        except ShoalError:
            pass  # not running (304) or refusing to stop: removal with force still ends it
        try:
            engine.remove(cid)
        except NotFoundError:
            return


def _rfc3339(created: Any) -> str:
    """The engine's `Created` (Unix seconds in a listing) as RFC 3339, like every listing."""
    from providers.core.wire import format_time

    if isinstance(created, (int, float)) and not isinstance(created, bool):
        try:
            return format_time(datetime.fromtimestamp(created, UTC))
        except (OverflowError, OSError, ValueError):
            return ""
    return str(created or "")
