"""The `container` driver (aliases `docker`, `podman`): each allocation is a real container
with hard CPU and memory limits, run by a Docker-compatible engine over its API.

Images: `-o image=NAME` is an image the engine has, or an image `shoal image pull` unpacked
(`NAME-VERSION` in the images dir, or a path): a `docker save` archive (it has a
manifest.json) is loaded, any other tree is imported as the image's root filesystem, once.
Limits: `--cpu` becomes NanoCpus, `--ram` the memory limit (swap off); metadata and
`-o env={...}` the environment. `-o network=none|nat` (default nat); a MAC address is
generated. Labels mark the container as shoal's with its allocation id.

Capacity: a local engine shares this host, so the engine's CPUs and memory are the totals
and the node's usage (every local driver's) is subtracted, as the spec's local drivers do;
a remote engine (DOCKER_HOST=tcp://...) is counted by its own holdings only.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from drivers.base import ResourceDriverTask
from drivers.capacity import fit_count
from drivers.fields import ENTRY, ENV, Command, Env
from drivers.options import check_meta_names, load_config, parse_options
from drivers.types import (
    STATUS_ALLOCATED,
    STATUS_NONE,
    ApplicationTask,
    LabelDefinition,
    Resource,
    Resources,
)
from providers.core import schema
from providers.core.errors import NotFoundError, ShoalError, UsageError
from providers.core.settings import Settings
from providers.core.strict import Count, Strict

if TYPE_CHECKING:
    from drivers.container.engine import Engine

ALLOCATION_ID_KEY = "SHOAL_ALLOCATION_ID"
MANAGED_BY = "dev.shoal.managed-by"
ALLOCATION_LABEL = "dev.shoal.allocation"
_NAME = re.compile(r"[^a-zA-Z0-9_.-]+")

OVERBOOK = "extra {} tenants may share when all allow it"


class ContainerConfig(Strict):
    """[drivers."container/INSTANCE"] (and docker/..., podman/...)"""

    socket: str = Field("", description="engine address: unix:///path or tcp://host:port")
    cpu_limit: Count = Field(0, description="vCPUs to hand out, 0 = the engine's CPUs")
    ram_limit: Count = Field(0, description="GiB to hand out, 0 = the engine's memory")
    cpu_overbook: Count = Field(0, description=OVERBOOK.format("vCPUs"))
    ram_overbook: Count = Field(0, description=OVERBOOK.format("GiB"))
    grace_seconds: Count = Field(10, description="stop -> kill grace period on free")


class ContainerOptions(Strict):
    image: Annotated[str, Field(min_length=1)] = Field(
        description="an engine image, an image dir from `shoal image pull` (NAME-VERSION), "
        "or a path; e.g. -o image=busybox-1.36"
    )
    entry: Command = Field([], description=ENTRY)
    env: Env = Field({}, description=ENV)
    network: Literal["nat", "none"] = "nat"


class SnapshotOptions(Strict):
    repo: str = ""
    tag: str = ""


class ExportOptions(Strict):
    path: Annotated[str, Field(min_length=1)] = Field(
        description='the target file, e.g. --options \'{"path": "/tmp/fs.tar"}\''
    )


TASKS: dict[str, type[Strict]] = {"snapshot": SnapshotOptions, "export": ExportOptions}


def generated_mac() -> str:
    """A random unicast, locally administered MAC (02:xx:...)."""
    octets = [0x02, *(random.randrange(256) for _ in range(5))]
    return ":".join(f"{o:02x}" for o in octets)


def _tar_stream(root: Path) -> Iterator[bytes]:
    """A tree as an uncompressed tar, produced as it is read (no temporary archive)."""
    import tarfile

    chunks: list[bytes] = []

    class Sink:
        def write(self, data: bytes) -> int:
            chunks.append(bytes(data))
            return len(data)

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        # An image unpacked by a user belongs to root inside the container, as pulled ones do.
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    sink: Any = Sink()
    with tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(root.rglob("*")):
            try:
                tar.add(path, arcname=str(path.relative_to(root)), recursive=False, filter=as_root)
            except OSError as exc:
                raise ShoalError(
                    f"image dir {root}: cannot read {path.relative_to(root)} ({exc.strerror}); "
                    "fix its permissions"
                ) from None
            if chunks:
                yield b"".join(chunks)
                chunks.clear()
    if chunks:
        yield b"".join(chunks)


TOTALS_TTL_SECONDS = 300


def _cached_totals(path: Path, address: str) -> tuple[int, int] | None:
    import time

    try:
        entry = json.loads(path.read_text()).get(address)
        if time.time() - float(entry["at"]) < TOTALS_TTL_SECONDS:
            return int(entry["cpus"]), int(entry["ram_gib"])
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    return None


def _remember_totals(path: Path, address: str, totals: tuple[int, int]) -> None:
    """Best effort (a cache): written whole through a temporary file, never half."""
    import os
    import tempfile
    import time

    try:
        known = json.loads(path.read_text())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    known[address] = {"cpus": totals[0], "ram_gib": totals[1], "at": time.time()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".engines.", dir=path.parent)
        with os.fdopen(fd, "w") as out:
            json.dump(known, out)
        os.replace(tmp, path)
    except OSError:
        pass


class ContainerDriver:
    def __init__(self, full_name: str, settings: Settings) -> None:
        self._name = full_name
        self._settings = settings
        self.cfg = ContainerConfig()
        self._engine: Engine | None = None
        self._totals: tuple[int, int] | None = None
        self._stopped: set[str] = set()  # containers `finish` stopped

    def name(self) -> str:
        return self._name

    def engine(self) -> Engine:
        if self._engine is None:
            from drivers.container.engine import Engine, locate

            self._engine = Engine(locate(self.cfg.socket, self._settings.env))
        return self._engine

    def is_remote(self) -> bool:
        return self.engine().is_remote

    def prepare(self, config: bytes) -> None:
        self.cfg = load_config(
            ContainerConfig, config, self._name, self._settings.paths.config_file
        )

    def _engine_totals(self) -> tuple[int, int]:
        """The engine's CPUs and memory (GiB). Podman's /info takes ~300 ms, so its answer
        is kept in the cache dir for a few minutes per engine address; a /_ping (a few ms)
        still proves the engine is there each time."""
        if self._totals is None:
            engine = self.engine()
            cache = self._settings.paths.cache_dir / "container-engines.json"
            totals = _cached_totals(cache, engine.address)
            if totals is None:
                info = engine.info()
                totals = (int(info.get("NCPU") or 0), int(info.get("MemTotal") or 0) // 2**30)
                _remember_totals(cache, engine.address, totals)
            else:
                engine.ping()
            self._totals = totals
        return self._totals

    # -- definitions and capacity --------------------------------------------------------

    def _options(self, definition: LabelDefinition) -> ContainerOptions:
        return parse_options(ContainerOptions, definition.options)

    def validate_definition(self, definition: LabelDefinition) -> None:
        self._options(definition)
        if definition.resources.disks:
            raise UsageError("resources.disks: the container driver takes no disks")

    def validate_metadata(self, metadata: dict[str, Any]) -> None:
        check_meta_names(metadata)

    def _limits(self) -> tuple[int, int]:
        cpus, ram = self._engine_totals()
        return self.cfg.cpu_limit or cpus, self.cfg.ram_limit or ram

    def available_capacity(self, node_usage: Resources, req: LabelDefinition) -> int:
        cpu, ram = self._limits()
        engine_cpus, engine_ram = self._engine_totals()
        if req.resources.cpu > engine_cpus or req.resources.ram > engine_ram:
            raise UsageError(
                f"resources: cpu={req.resources.cpu} ram={req.resources.ram}GiB is more than "
                f"the engine has (cpu={engine_cpus} ram={engine_ram}GiB)"
            )
        return fit_count(
            cpu,
            ram,
            self.cfg.cpu_overbook,
            self.cfg.ram_overbook,
            node_usage,
            req.resources,
        )

    # -- images --------------------------------------------------------------------------

    def _image(self, wanted: str) -> str:
        """The engine's name for `wanted`, loading or importing an unpacked image once."""
        from drivers.image.store import images_dir

        candidates = []
        if "/" in wanted and Path(wanted).expanduser().is_dir():
            candidates.append(Path(wanted).expanduser())
        elif "/" not in wanted and ":" not in wanted:
            candidates.append(images_dir(self._settings) / wanted)
        directory = next((c for c in candidates if c.is_dir()), None)
        engine = self.engine()
        if directory is None:
            if engine.image_exists(wanted):
                return wanted
            raise NotFoundError(
                f"options.image: {wanted!r} is neither an image the engine has nor an image "
                "dir; `shoal image pull URL` it, or import/pull it into the engine"
            )
        manifest = directory / "manifest.json"
        if manifest.is_file():
            return self._load_saved(directory, manifest)
        import hashlib

        name = _NAME.sub("-", directory.name.lower()).strip("-.") or "image"
        # Two trees with one base name (a/rootfs, b/rootfs) are two images: the tag names
        # the tree's resolved path and its modification time.
        where = directory.resolve()
        stamp = f"{where}:{where.stat().st_mtime_ns}".encode()
        tag = hashlib.sha256(stamp).hexdigest()[:12]
        reference = f"shoal-{name}:{tag}"
        if not engine.image_exists(reference) and not engine.image_exists(f"localhost/{reference}"):
            try:
                engine.import_rootfs(_tar_stream(directory), f"shoal-{name}", tag)
            except BaseException:
                engine.remove_image(reference)  # never a half-imported image under the name
                raise
        return reference

    def _load_saved(self, directory: Path, manifest: Path) -> str:
        """A `docker save` tree: load it (as a tar of the tree) unless its tag is there."""
        import tempfile

        try:
            entries = json.loads(manifest.read_text())
            tags = entries[0].get("RepoTags") or []
        except (OSError, ValueError, IndexError, AttributeError, TypeError):
            raise ShoalError(f"{manifest}: not a docker save manifest") from None
        engine = self.engine()
        if tags and engine.image_exists(tags[0]):
            return str(tags[0])
        with tempfile.TemporaryFile() as archive:
            for chunk in _tar_stream(directory):
                archive.write(chunk)
            archive.seek(0)
            engine.load(archive)
        if not tags:
            raise ShoalError(f"{manifest}: the archive names no RepoTags; tag it when saving")
        return str(tags[0])

    # -- lifecycle -----------------------------------------------------------------------

    def allocate(self, definition: LabelDefinition, metadata: dict[str, Any]) -> Resource:
        from drivers.definition import expires_at

        deadline = expires_at(definition)
        opts = self._options(definition)
        engine = self.engine()
        image = self._image(opts.image)
        allocation_id = str(metadata.get(ALLOCATION_ID_KEY, ""))
        name = _NAME.sub("-", f"shoal-{allocation_id}").strip("-")
        # Metadata last: -o env cannot forge SHOAL_ALLOCATION_ID.
        env = opts.env | {str(k): str(v) for k, v in metadata.items()}
        mac = generated_mac()
        ram_bytes = definition.resources.ram * 2**30
        body: dict[str, Any] = {
            "Image": image,
            "Env": [f"{k}={v}" for k, v in sorted(env.items())],
            "Labels": {MANAGED_BY: "shoal", ALLOCATION_LABEL: allocation_id},
            "Hostname": name[:63],
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
        cid = engine.create(name, body)
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
        meta: dict[str, Any] = {"container": cid, "name": name, "image": image}
        if deadline is not None:
            # Neither Docker's API nor Podman's Docker-compatible one ends a container at a
            # time of its own: a supervisor stops it then, with no shoal running.
            from drivers.container.engine import API
            from drivers.supervise import start_detached

            supervisor = start_detached(
                {
                    "mode": "container",
                    "address": engine.address,
                    "api": API,
                    "container": cid,
                    "deadline": deadline.timestamp(),
                    "grace": self.cfg.grace_seconds,
                }
            )
            meta["deadline"] = deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            meta["supervisor"] = {"pid": supervisor[0], "start": supervisor[1]}
        return Resource(
            identifier=allocation_id,
            hw_addr=mac if opts.network != "none" else "",
            ip_addr=ip,
            metadata=meta,
        )

    def _cid(self, res: Resource) -> str:
        meta = res.metadata or {}
        return str(meta.get("container") or _NAME.sub("-", f"shoal-{res.identifier}"))

    def status(self, res: Resource) -> str:
        try:
            seen = self.engine().inspect(self._cid(res))
        except NotFoundError:
            return STATUS_NONE
        state = seen.get("State") or {}
        return STATUS_ALLOCATED if state.get("Running") or state.get("Paused") else STATUS_NONE

    def describe(self, res: Resource) -> dict[str, Any]:
        """The container's state; for one that exited, its exit code and last log lines."""
        engine = self.engine()
        cid = self._cid(res)
        try:
            seen = engine.inspect(cid)
        except NotFoundError:
            return {"state": "gone", "message": "the container no longer exists"}
        state = seen.get("State") or {}
        status = state.get("Status") or ""
        # Podman says "stopped" for an exited container until its cleanup has run.
        status = "exited" if status == "stopped" else status
        out: dict[str, Any] = {"state": status, "error": state.get("Error")}
        if not state.get("Running"):
            out["exit_code"] = state.get("ExitCode")
            out["finished"] = state.get("FinishedAt")
            due = _when(res.metadata.get("deadline"))
            ended = _when(state.get("FinishedAt"))
            if due is not None and ended is not None and ended >= due - DUE_SLACK:
                out["reason"] = "expired"  # stopped at its deadline
            out["log_tail"] = engine.logs(cid, 10).strip()
        return out

    def finish(self, res: Resource) -> dict[str, Any]:
        """Stop the container (the engine's SIGTERM, grace, SIGKILL) but keep it; its state,
        exit code and last log lines."""
        cid = self._cid(res)
        try:
            self.engine().stop(cid, self.cfg.grace_seconds)
        except NotFoundError:
            return {"state": "gone", "message": "the container no longer exists"}
        except ShoalError:
            pass  # not running (304), or a state in which it cannot be stopped
        self._stopped.add(cid)
        return self.describe(res)

    def logs(self, res: Resource, *, tail: int | None, follow: bool) -> Iterator[bytes]:
        """The container's stdout and stderr as the engine keeps them (`/containers/ID/logs`),
        streamed; with `follow` until the container stops."""
        from urllib.parse import urlencode

        from drivers.container.engine import API
        from drivers.supervise import engine_open, read_stream
        from providers.core.errors import ProviderUnreachableError

        engine = self.engine()
        cid = self._cid(res)
        engine.inspect(cid)  # a missing container or engine, as the engine client says it
        query = {"stdout": "1", "stderr": "1", "tail": "all" if tail is None else str(tail)}
        if follow:
            query["follow"] = "1"
        target = f"{API}/containers/{cid}/logs?{urlencode(query)}"
        try:
            conn, response = engine_open(engine.address, "GET", target, None if follow else 60)
        except OSError as exc:
            raise ProviderUnreachableError(
                f"container engine {engine.address}: logs of {cid[:12]}: {exc}"
            ) from None
        try:
            if response.status != 200:
                said = response.read(300).decode("utf-8", "replace").strip()
                raise ShoalError(
                    f"container engine: logs of {cid[:12]}: HTTP {response.status}: {said}"
                )
            frames = Demux()
            for chunk in read_stream(response):
                data = frames.feed(chunk)
                if data:
                    yield data
            rest = frames.end()
            if rest:
                yield rest
        finally:
            conn.close()

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
        if task not in TASKS:
            return None
        parsed = json.loads(options) if options else {}
        place = schema.Place(UsageError, "--options", noun=f"option of task {task}")
        return ContainerTask(self, task, schema.validate(TASKS[task], parsed, place).model_dump())

    def deallocate(self, res: Resource) -> None:
        engine = self.engine()
        cid = self._cid(res)
        try:
            if cid not in self._stopped:  # `finish` stopped it a moment ago
                engine.stop(cid, self.cfg.grace_seconds)
        except NotFoundError:
            return  # already gone: nothing to free
        except ShoalError:
            pass  # not running (304) or refusing to stop: removal with force still ends it
        try:
            engine.remove(cid)
        except NotFoundError:
            return


class ContainerTask:
    """`snapshot`: commit the container to an image, return its id. `export`: write the
    container's filesystem as a tar to options.path."""

    def __init__(self, driver: ContainerDriver, name: str, options: dict[str, Any]) -> None:
        self.driver = driver
        self._name = name
        self.options = options
        self.res: Resource | None = None

    def name(self) -> str:
        return self._name

    def clone(self) -> ContainerTask:
        return ContainerTask(self.driver, self._name, dict(self.options))

    def set_info(self, task: ApplicationTask, res: Resource) -> None:
        self.res = res

    def execute(self) -> bytes:
        if self.res is None:
            raise ShoalError(f"{self._name}: no resource given")
        cid = self.driver._cid(self.res)
        engine = self.driver.engine()
        if self._name == "snapshot":
            repo = str(self.options.get("repo") or f"shoal-snapshot-{self.res.identifier}")
            tag = str(self.options.get("tag") or "latest")
            image = engine.commit(cid, repo.lower(), tag)
            return json.dumps({"image": image, "reference": f"{repo.lower()}:{tag}"}).encode()
        target = Path(str(self.options["path"])).expanduser()
        if not target.parent.is_dir():
            raise UsageError(f"export: {target.parent} is not a directory; give a path in one")
        size = engine.export(cid, target)
        return json.dumps({"path": str(target), "bytes": size}).encode()


DUE_SLACK = 1.0  # seconds: a container that stopped this close to its deadline expired


def _when(text: Any) -> float | None:
    """Unix seconds of an RFC 3339 time (the engine's nanoseconds cut to microseconds)."""
    if not isinstance(text, str) or not text or text.startswith("0001-"):
        return None
    head, dot, rest = text.partition(".")
    if dot:
        digits = "".join(c for c in rest if c.isdigit())
        zone = rest[len(digits) :]
        text = f"{head}.{digits[:6]}{zone}"
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class Demux:
    """The engine's log stream of a container without a TTY, as it arrives: frames of an
    8-byte header (stream 0/1/2, three zeros, a big-endian size) then the payload, whose
    bytes are kept; a stream that does not start with such a header passes as it is."""

    def __init__(self) -> None:
        self._pending = b""
        self._framed: bool | None = None
        self._left = 0  # payload bytes still to come in the current frame

    def feed(self, data: bytes) -> bytes:
        if self._framed is False:
            return data
        buffer, out = self._pending + data, bytearray()
        while buffer:
            if self._left:
                take = buffer[: self._left]
                out += take
                buffer, self._left = buffer[len(take) :], self._left - len(take)
                continue
            if len(buffer) < 8:
                break
            if self._framed is None:
                self._framed = buffer[0] in (0, 1, 2) and buffer[1:4] == b"\0\0\0"
                if not self._framed:
                    out += buffer
                    buffer = b""
                    break
            self._left = int.from_bytes(buffer[4:8], "big")
            buffer = buffer[8:]
        self._pending = buffer
        return bytes(out)

    def end(self) -> bytes:
        """What is left: a short unframed stream (fewer than 8 bytes in all)."""
        rest, self._pending = self._pending, b""
        return rest if self._framed is None else b""


def _rfc3339(created: Any) -> str:
    """The engine's `Created` (Unix seconds in a listing) as RFC 3339, like every listing."""
    from providers.core.wire import format_time

    if isinstance(created, (int, float)) and not isinstance(created, bool):
        try:
            return format_time(datetime.fromtimestamp(created, UTC))
        except (OverflowError, OSError, ValueError):
            return ""
    return str(created or "")
