"""The `azure` driver's tasks: `snapshot` makes a snapshot of the VM's OS disk (Snapshots
CreateOrUpdate, createOption Copy; incremental unless asked full), `image` a managed image
of it (Images CreateOrUpdate from the managed disk, which `-o image=` takes back), `console`
returns the tail of its serial log (boot diagnostics: retrieveBootDiagnosticsData gives a
short-lived signed URL of the log blob), which `shoal logs` reads too. Snapshots and images
carry the allocation's tags and are followed to their end.

The blob's URL is signed (SAS): it is read with no credentials at all, so the ARM token
never goes to storage, wherever a server says the blob is."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import Field, field_validator

from drivers.spec.types import ApplicationTask, Resource
from providers.core.errors import NotFoundError, ShoalError, UsageError
from providers.core.strict import Strict

if TYPE_CHECKING:
    from drivers.azure.arm import Arm

TASK_SECONDS = 1200.0  # a snapshot or image of a big disk takes minutes
POLL_SECONDS = 5.0  # `shoal logs -f`: how often the serial log is read
SAS_MINUTES = "5"
# Azure's rule for a snapshot's or image's name: 1-80 of letters, digits, _ . -, starting
# with a letter or digit and ending with a letter, digit or _.
NAME = re.compile(r"[A-Za-z0-9](?:[-\w.]{0,78}\w)?")
NAME_RULE = "1-80 of letters, digits, _ . and -, not ending with . or -"
CONSOLE_BYTES = 1 << 20  # what a read of the log keeps at most


class LocatesVms(Protocol):
    """What a task needs of the driver: the subscription's client, the allocation's VM (its
    resource group and name) and the tags what it makes carries."""

    def name(self) -> str: ...

    def arm(self) -> Arm: ...

    def vm_of(self, res: Resource) -> tuple[str, str, dict[str, Any]]: ...

    def tags_for(self, res: Resource) -> dict[str, str]: ...


def _azure_name(value: str) -> str:
    if value and not NAME.fullmatch(value):
        raise ValueError(f"must be an Azure resource name ({NAME_RULE}), got {value!r}")
    return value


class SnapshotOptions(Strict):
    name: str = Field("", description="the snapshot's name (default: shoal-ID-TIME)")
    full: bool = Field(False, description="a full copy (default: incremental, billed by change)")

    _name = field_validator("name")(_azure_name)


class ImageOptions(Strict):
    name: str = Field("", description="the image's name (default: shoal-ID-TIME)")

    _name = field_validator("name")(_azure_name)


class ConsoleOptions(Strict):
    lines: Annotated[int, Field(ge=1, le=100000)] = Field(100, description="the last N lines")


TASKS: dict[str, type[Strict]] = {
    "snapshot": SnapshotOptions,
    "image": ImageOptions,
    "console": ConsoleOptions,
}


def default_name(allocation_id: str, stamp: str) -> str:
    return re.sub(r"[^-\w.]", "-", f"shoal-{allocation_id}")[: 79 - len(stamp)] + "-" + stamp


@dataclass
class AzureTask:
    """`snapshot`, `image` or `console` of one allocation's VM (the spec's ResourceDriverTask)."""

    driver: LocatesVms
    task: str
    options: dict[str, Any]
    res: Resource | None = None

    def name(self) -> str:
        return self.task

    def clone(self) -> AzureTask:
        return replace(self, options=dict(self.options), res=None)

    def set_info(self, task: ApplicationTask, res: Resource) -> None:
        self.res = res

    def execute(self) -> bytes:
        if self.res is None:
            raise ShoalError(f"{self.task}: no resource given")
        group, vm_name, vm = self.driver.vm_of(self.res)
        where = f"{self.driver.name()}: {self.res.identifier}"
        if self.task == "console":
            text = serial_log(self.driver.arm(), vm, where)
            lines = text.decode(errors="replace").splitlines()[-int(self.options["lines"]) :]
            return json.dumps(
                {"vm": vm_name, "resource_group": group, "output": "\n".join(lines)}
            ).encode()
        return self._make(group, vm_name, vm, where)

    def _make(self, group: str, vm_name: str, vm: dict[str, Any], where: str) -> bytes:
        from drivers.azure.arm import COMPUTE_API, DISKS_API, ArmError
        from providers.core.timeutil import utcnow

        assert self.res is not None
        arm = self.driver.arm()
        disk_id = str(
            ((vm.get("properties") or {}).get("storageProfile") or {})
            .get("osDisk", {})
            .get("managedDisk", {})
            .get("id")
            or ""
        )
        if not disk_id:
            raise UsageError(f"{where}: the VM has no managed OS disk to {self.task}")
        stamp = utcnow().strftime("%Y%m%d-%H%M%S")
        name = str(self.options.get("name") or default_name(self.res.identifier, stamp))
        location = str(vm.get("location") or "")
        tags = self.driver.tags_for(self.res)
        base = arm.sub(f"resourceGroups/{group}/providers/Microsoft.Compute")
        kind, api = ("snapshots", DISKS_API) if self.task == "snapshot" else ("images", COMPUTE_API)
        # A PUT of a name taken already replaces what has it: someone's snapshot or image
        # would be lost to a copy of this VM's disk.
        if arm.get(f"{base}/{kind}/{name}", api) is not None:
            raise UsageError(f"options.name: {name} exists already in {group}; give another name")
        try:
            if self.task == "snapshot":
                made = arm.put(
                    f"{base}/snapshots/{name}",
                    DISKS_API,
                    {
                        "location": location,
                        "tags": tags,
                        "properties": {
                            "creationData": {"createOption": "Copy", "sourceResourceId": disk_id},
                            "incremental": not self.options.get("full"),
                        },
                    },
                    deadline=TASK_SECONDS,
                    what=where,
                )
                return json.dumps({
                    "snapshot": made.get("id", ""), "name": name, "vm": vm_name,
                    "resource_group": group, "disk": disk_id,
                }).encode()  # fmt: skip
            disk = arm.get(disk_id, DISKS_API) or {}
            generation = str((disk.get("properties") or {}).get("hyperVGeneration") or "V1")
            made = arm.put(
                f"{base}/images/{name}",
                COMPUTE_API,
                {
                    "location": location,
                    "tags": tags,
                    "properties": {
                        "hyperVGeneration": generation,
                        "storageProfile": {
                            "osDisk": {
                                "osType": "Linux",
                                "osState": "Generalized",
                                "managedDisk": {"id": disk_id},
                            }
                        },
                    },
                },
                deadline=TASK_SECONDS,
                what=where,
            )
        except ArmError as exc:
            if exc.status == 409 and "already exists" in exc.message.lower():
                raise UsageError(
                    f"options.name: {name} exists already in {group}; give another name"
                ) from None
            if exc.code in ("InvalidParameter", "BadRequest", "OperationNotAllowed"):
                raise UsageError(f"{where}: {self.task}: {exc}") from None
            raise ShoalError(f"{where}: {self.task}: {exc}") from None
        return json.dumps({
            "image": made.get("id", ""), "name": name, "vm": vm_name, "resource_group": group,
            "hyperVGeneration": generation,
        }).encode()  # fmt: skip


def serial_log(arm: Arm, vm: dict[str, Any], where: str) -> bytes:
    """The VM's serial log as boot diagnostics keeps it (the last CONSOLE_BYTES of it)."""
    import httpx

    from drivers.azure.arm import COMPUTE_API, ArmError

    vm_id = str(vm.get("id") or "")
    try:
        _, _, urls = arm.call(
            "POST",
            f"{vm_id}/retrieveBootDiagnosticsData",
            COMPUTE_API,
            params={"sasUriExpirationTimeInMinutes": SAS_MINUTES},
        )
    except ArmError as exc:
        if exc.status == 404:
            raise NotFoundError(f"{where}: its VM is gone; `shoal status` says why") from None
        raise ShoalError(f"{where}: the serial log: {exc}") from None
    url = str((urls or {}).get("serialConsoleLogBlobUri") or "")
    if not url.startswith(("https://", "http://")):
        raise ShoalError(f"{where}: Azure gave no serial log (boot diagnostics off?)")
    try:
        # No credentials: the URL's signature is the authorisation.
        with httpx.Client(timeout=30, follow_redirects=False) as plain:
            answer = plain.get(url)
    except httpx.HTTPError as exc:
        raise ShoalError(
            f"{where}: the serial log could not be read ({type(exc).__name__})"
        ) from None
    if answer.status_code == 404:
        return b""  # nothing logged yet
    if answer.status_code != 200:
        code = re.search(r"<Code>([^<]+)</Code>", answer.text)
        raise ShoalError(
            f"{where}: the serial log: HTTP {answer.status_code} {code.group(1) if code else ''}"
        )
    return answer.content[-CONSOLE_BYTES:]


def console(
    read: Callable[[], bytes],
    *,
    tail: int | None,
    follow: bool,
    holds: Callable[[], bool],
    poll: float,
) -> Iterator[bytes]:
    """The serial log; with `follow`, what is new every `poll` seconds while `holds()` says
    the VM still runs (the log only grows, so the new part is what follows the bytes shown;
    a log that shrank, cut at its head, is shown from where it agrees)."""
    data = read()
    shown = data
    if tail is not None:
        data = b"".join(data.splitlines(keepends=True)[-tail:]) if tail else b""
    yield data
    while follow:
        _pause(poll)
        follow = holds()
        now = read()
        yield _new_part(shown, now)
        shown = now


def _pause(seconds: float) -> None:
    """Between two reads of `shoal logs -f` (tests step the VM's life here)."""
    time.sleep(seconds)


def _new_part(before: bytes, now: bytes) -> bytes:
    if now.startswith(before):
        return now[len(before) :]
    for size in range(min(len(before), len(now)), 0, -1):
        if now.startswith(before[-size:]):
            return now[size:]
    return now
