"""The `aws` driver's tasks: `snapshot` makes an AMI of the instance (CreateImage) and
returns its id; `console` returns the tail of its console output (GetConsoleOutput), which
`shoal logs` reads too."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import Field

from drivers.spec.types import ApplicationTask, Resource
from providers.core.errors import ShoalError, UsageError
from providers.core.strict import Strict

if TYPE_CHECKING:
    from drivers.aws.ec2 import Ec2


class LocatesInstances(Protocol):
    """What a task needs of the driver: the allocation's region client and instance id."""

    def located(self, res: Resource) -> tuple[Ec2, str]: ...


class SnapshotOptions(Strict):
    name: Annotated[str, Field(max_length=128)] = Field(
        "", description="the AMI's name (default: shoal-ID-TIME)"
    )
    no_reboot: bool = Field(False, description="image without rebooting (filesystems may be torn)")


class ConsoleOptions(Strict):
    lines: Annotated[int, Field(ge=1, le=100000)] = Field(100, description="the last N lines")


TASKS: dict[str, type[Strict]] = {"snapshot": SnapshotOptions, "console": ConsoleOptions}


@dataclass
class AwsTask:
    """`snapshot` or `console` of one allocation's instance (the spec's ResourceDriverTask)."""

    driver: LocatesInstances
    task: str
    options: dict[str, Any]
    res: Resource | None = None

    def name(self) -> str:
        return self.task

    def clone(self) -> AwsTask:
        return replace(self, options=dict(self.options), res=None)

    def set_info(self, task: ApplicationTask, res: Resource) -> None:
        self.res = res

    def execute(self) -> bytes:
        if self.res is None:
            raise ShoalError(f"{self.task}: no resource given")
        ec2, instance_id = self.driver.located(self.res)
        if not instance_id:
            raise UsageError(f"{self.res.identifier}: no instance of its own to {self.task}")
        if self.task == "snapshot":
            from providers.core.timeutil import utcnow

            stamp = utcnow().strftime("%Y%m%dT%H%M%SZ")
            name = str(self.options.get("name") or f"shoal-{self.res.identifier}-{stamp}")
            tags = {"shoal:allocation": self.res.identifier, "shoal:managed-by": "shoal"}
            image = ec2.create_image(
                instance_id, name, no_reboot=bool(self.options.get("no_reboot")), tags=tags
            )
            return json.dumps(
                {"image": image, "name": name, "instance_id": instance_id, "region": ec2.region}
            ).encode()
        taken, data = ec2.console_output(instance_id)
        lines = data.decode(errors="replace").splitlines()[-int(self.options["lines"]) :]
        return json.dumps(
            {"instance_id": instance_id, "timestamp": taken, "output": "\n".join(lines)}
        ).encode()


def console(
    ec2: Ec2,
    instance_id: str,
    *,
    tail: int | None,
    follow: bool,
    holds: Callable[[], bool],
    poll: float,
) -> Iterator[bytes]:
    """The instance's console output (GetConsoleOutput: the latest EC2 keeps, up to
    64 KiB); with `follow`, what is new every `poll` seconds while `holds()` says the
    instance still runs."""
    _, data = ec2.console_output(instance_id)
    if tail is not None:
        data = b"".join(data.splitlines(keepends=True)[-tail:]) if tail else b""
    yield data
    shown = data
    while follow:
        time.sleep(poll)
        _, now = ec2.console_output(instance_id)
        yield _new_part(shown, now)
        shown = now
        follow = holds()


def _new_part(before: bytes, now: bytes) -> bytes:
    """What `now` adds after `before` (the console is a sliding window of its last bytes)."""
    if now.startswith(before):
        return now[len(before) :]
    for size in range(min(len(before), len(now)), 0, -1):
        if now.startswith(before[-size:]):
            return now[size:]
    return now
