"""The `gcp` driver's tasks: `snapshot` makes a snapshot of the VM's boot disk
(disks.createSnapshot), `image` an image of it (images.insert, which `-o image=` takes
back), `console` returns the tail of its serial console (getSerialPortOutput, port 1),
which `shoal logs` reads too. Snapshots and images carry the allocation's labels and are
followed to DONE."""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import Field, field_validator

from drivers.spec.types import ApplicationTask, Resource
from providers.core.errors import (
    NoCapacityError,
    NotFoundError,
    RetryableError,
    ShoalError,
    UsageError,
)
from providers.core.strict import Strict

if TYPE_CHECKING:
    from drivers.gcp.compute import ApiRefused, Compute, OperationError

# A snapshot or image of a big disk takes minutes; past this the task says where to look.
TASK_SECONDS = 1200.0
POLL_SECONDS = 2.0  # `shoal logs -f`: how often the serial console is read
# Google's rule for a resource's name (RFC 1035), as the Snapshot and Image schemas give it.
NAME = re.compile(r"[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?")
NAME_RULE = "1-63 of a-z, 0-9 and -, starting with a letter and not ending with -"
FORCE = """--options '{"force": true}'"""


class LocatesInstances(Protocol):
    """What a task needs of the driver: the project's client, where the allocation's VM is,
    and the labels what it makes carries."""

    def name(self) -> str: ...

    def compute(self) -> Compute: ...

    def located(self, res: Resource) -> tuple[str, str]: ...

    def labels_for(self, res: Resource) -> dict[str, str]: ...


def _gce_name(value: str) -> str:
    if value and not NAME.fullmatch(value):
        raise ValueError(f"must be a Compute Engine name ({NAME_RULE}), got {value!r}")
    return value


class SnapshotOptions(Strict):
    name: str = Field("", description="the snapshot's name (default: shoal-ID-TIME)")

    _name = field_validator("name")(_gce_name)


class ImageOptions(Strict):
    name: str = Field("", description="the image's name (default: shoal-ID-TIME)")
    family: str = Field("", description="the image family it joins")
    force: bool = Field(
        False, description="image the disk of a running VM (its filesystems may be torn)"
    )

    _name = field_validator("name", "family")(_gce_name)


class ConsoleOptions(Strict):
    lines: Annotated[int, Field(ge=1, le=100000)] = Field(100, description="the last N lines")


TASKS: dict[str, type[Strict]] = {
    "snapshot": SnapshotOptions,
    "image": ImageOptions,
    "console": ConsoleOptions,
}


def default_name(allocation_id: str, stamp: str) -> str:
    """`shoal-ID-TIME` as Google takes a name: the id cut, never the time."""
    head = re.sub(r"[^a-z0-9-]", "-", f"shoal-{allocation_id}".lower())
    return f"{head[: 62 - len(stamp)].rstrip('-')}-{stamp}"


@dataclass
class GcpTask:
    """`snapshot`, `image` or `console` of one allocation's VM (the spec's
    ResourceDriverTask)."""

    driver: LocatesInstances
    task: str
    options: dict[str, Any]
    res: Resource | None = None

    def name(self) -> str:
        return self.task

    def clone(self) -> GcpTask:
        return replace(self, options=dict(self.options), res=None)

    def set_info(self, task: ApplicationTask, res: Resource) -> None:
        self.res = res

    def execute(self) -> bytes:
        if self.res is None:
            raise ShoalError(f"{self.task}: no resource given")
        res = self.res
        zone, name = self.driver.located(res)
        if not (zone and name):
            raise UsageError(f"{res.identifier}: no instance of its own to {self.task}")
        compute = self.driver.compute()
        where = f"{self.driver.name()}: {res.identifier}"
        if self.task == "console":
            found = read_serial(compute, zone, name, 0)
            if found is None:
                raise NotFoundError(_gone(where, res.identifier, name, zone, "serial console"))
            _, after, data = found
            lines = data.decode(errors="replace").splitlines()[-int(self.options["lines"]) :]
            return json.dumps(
                {"instance": name, "zone": zone, "next": after, "output": "\n".join(lines)}
            ).encode()
        inst = compute.instance(zone, name)
        if inst is None:
            raise NotFoundError(_gone(where, res.identifier, name, zone, "boot disk"))
        source = boot_disk(inst)
        if not source:
            raise ShoalError(f"{where}: instance {name} in {zone} has no boot disk")
        return json.dumps(self._make(compute, res, name, zone, source, where)).encode()

    def _make(
        self, compute: Compute, res: Resource, name: str, zone: str, source: str, where: str
    ) -> dict[str, Any]:
        """The snapshot or image of the boot disk at `source`, sent with one requestId (a
        retried send makes one) and followed to DONE; Google's refusals said as shoal's
        errors."""
        from drivers.gcp.compute import ApiRefused, OperationError
        from providers.core.timeutil import utcnow

        kind = self.task
        made = str(self.options.get("name") or "")
        made = made or default_name(res.identifier, utcnow().strftime("%Y%m%d-%H%M%S"))
        disk = source.rsplit("/", 1)[-1]
        body: dict[str, Any] = {
            "name": made,
            "description": f"shoal {kind} of {name}'s boot disk ({res.identifier})",
            "labels": self.driver.labels_for(res),
        }
        out: dict[str, Any] = {
            kind: f"projects/{compute.project}/global/{kind}s/{made}",
            "name": made,
            "instance": name,
            "zone": zone,
            "disk": disk,
            "project": compute.project,
        }
        force = bool(self.options.get("force"))
        said, vm = f"{where}: {kind} {made}", f"{name} in {zone}"
        later = (
            f"the {kind} may still be made: look for {made} (`gcloud compute {kind}s describe "
            f"{made}`) before asking again"
        )
        try:
            rid = str(uuid.uuid4())
            if kind == "snapshot":
                disk_zone = _zone_of(source)
                if not disk_zone:
                    raise ShoalError(f"{said}: the boot disk {source} is not a zonal disk")
                op = compute.create_snapshot(disk_zone, disk, body, rid)
            else:
                body["sourceDisk"] = source
                if self.options.get("family"):
                    body["family"] = out["family"] = str(self.options["family"])
                op = compute.insert_image(body, rid, force=force)
            compute.follow(op, TASK_SECONDS, said, later=later)
        except ApiRefused as exc:
            raise _refused(exc, kind, made, said, vm, force, compute.project) from None
        except OperationError as exc:
            raise _failed(exc, kind, made, said, vm, compute.project) from None
        return out


def boot_disk(inst: dict[str, Any]) -> str:
    """The URL of the instance's boot disk ("" when it has none)."""
    for disk in inst.get("disks") or []:
        if disk.get("boot"):
            return str(disk.get("source") or "")
    return ""


def _zone_of(url: str) -> str:
    found = re.search(r"(?:^|/)zones/([^/]+)/disks/[^/]+$", url)
    return found.group(1) if found else ""


def _refused(
    exc: ApiRefused, kind: str, made: str, said: str, instance: str, force: bool, project: str
) -> ShoalError:
    if exc.status == 409 or exc.reason == "alreadyExists":
        return _exists(kind, made, project)
    if exc.reason == "resourceInUseByAnotherResource" and not force:
        return _in_use(said, instance)
    if exc.reason == "resourceNotReady":
        return RetryableError(f"{said}: the disk is busy ({exc.message}); try again in a moment")
    if exc.status == 404:
        return NotFoundError(f"{said}: {exc.message} (the VM went?)")
    if exc.status == 400:
        return UsageError(f"{said}: Compute Engine refused it ({exc})")
    return ShoalError(f"{said}: {exc}")


def _failed(
    exc: OperationError, kind: str, made: str, said: str, instance: str, project: str
) -> ShoalError:
    for error in exc.errors:
        if error.code == "QUOTA_EXCEEDED":
            quota = error.quota
            metric = quota.get("metricName") or quota.get("limitName") or "a quota"
            limit = quota.get("limit")
            cap = f", limit {limit:g}" if isinstance(limit, (int, float)) else ""
            return NoCapacityError(
                f"{said}: quota {metric} exceeded{cap} ({error.message}); delete {kind}s no "
                "longer needed or ask Google for more"
            )
        if error.code == "RESOURCE_IN_USE_BY_ANOTHER_RESOURCE":
            return _in_use(said, instance)
        if error.code == "ALREADY_EXISTS":
            return _exists(kind, made, project)
        if error.code == "RESOURCE_NOT_FOUND":
            return NotFoundError(f"{said}: {error.message} (the VM went?)")
    if exc.errors and exc.errors[0].code.startswith("INVALID"):
        return UsageError(f"{said}: Compute Engine refused it ({exc})")
    return ShoalError(f"{said}: failed ({exc})")


def _exists(kind: str, made: str, project: str) -> UsageError:
    return UsageError(
        f"--options: name: the {kind} {made} exists already in project {project}; give another name"
    )


def _in_use(said: str, instance: str) -> UsageError:
    return UsageError(
        f"{said}: the boot disk is in use by the running VM {instance}; power it off from "
        f"inside first (`sudo poweroff`), or pass {FORCE} to image it running (its "
        "filesystems may be torn)"
    )


def _gone(where: str, ident: str, name: str, zone: str, what: str) -> str:
    return (
        f"{where}: its instance {name} in {zone} is gone, its {what} with it; "
        f"`shoal status {ident}` says why"
    )


def read_serial(
    compute: Compute, zone: str, name: str, start: int
) -> tuple[int, int, bytes] | None:
    """(where the bytes begin, where the next read starts, the bytes) of serial port 1 from
    `start`; None when the instance is gone."""
    from drivers.gcp.compute import ApiRefused

    try:
        found = compute.serial_output(zone, name, start)
    except ApiRefused as exc:
        if exc.status == 404:
            return None
        raise ShoalError(f"{name} in {zone}: reading the serial console: {exc}") from None
    begun = _position(found.get("start"), start)
    after = _position(found.get("next"), begun)
    return begun, after, str(found.get("contents") or "").encode()


def _position(value: Any, default: int) -> int:
    try:
        return int(str(value))
    except ValueError:
        return default


def _pause(seconds: float) -> None:
    """Between reads of a followed console (the tests step it)."""
    time.sleep(seconds)


def console(
    compute: Compute,
    zone: str,
    name: str,
    *,
    where: str,
    ident: str,
    tail: int | None,
    follow: bool,
    holds: Callable[[], bool],
    poll: float,
    warn: Callable[[str], None],
) -> Iterator[bytes]:
    """The VM's serial console (what Google keeps of it: the last 1 MB); with `follow`,
    what is new every `poll` seconds, read on from the `next` byte Google gave, while
    `holds()` says the VM still runs. Bytes Google dropped before they were read (it wrote
    more than 1 MB between two reads) are said once on stderr."""
    found = read_serial(compute, zone, name, 0)
    if found is None:
        raise NotFoundError(_gone(where, ident, name, zone, "serial console"))
    begun, after, data = found
    said = False
    if begun > 0 and tail is None:
        warn(
            f"{where}: the first {begun} bytes of {name}'s serial console are gone (Google "
            "keeps its last 1 MB)"
        )
        said = True
    if tail is not None:
        data = b"".join(data.splitlines(keepends=True)[-tail:]) if tail else b""
    yield data
    while follow:
        _pause(poll)
        # Asked before the read: what it wrote until it stopped is read once more after.
        follow = holds()
        found = read_serial(compute, zone, name, after)
        if found is None:
            return  # gone, and its console with it
        begun, nxt, data = found
        if begun > after and not said:
            warn(
                f"{where}: {begun - after} bytes of {name}'s serial console were lost before "
                "they were read (Google keeps its last 1 MB); reading on"
            )
            said = True
        if data:
            yield data
        after = max(after, nxt)
