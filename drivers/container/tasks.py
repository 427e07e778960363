"""The `container` driver's tasks: `snapshot` commits a container to an image, `export`
writes its filesystem as a tar; their options.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Protocol

from pydantic import Field

from drivers.spec.types import ApplicationTask, Resource
from providers.core.errors import ShoalError, UsageError
from providers.core.strict import Strict

if TYPE_CHECKING:
    from drivers.container.engine import Engine


class HoldsContainers(Protocol):
    """What a task needs of the driver (its container and engine), not the driver itself."""

    def cid(self, res: Resource) -> str: ...
    def engine(self, res: Resource | None = None) -> Engine: ...


class SnapshotOptions(Strict):
    repo: str = ""
    tag: str = ""


class ExportOptions(Strict):
    path: Annotated[str, Field(min_length=1)] = Field(
        description='the target file, e.g. --options \'{"path": "/tmp/fs.tar"}\''
    )


TASKS: dict[str, type[Strict]] = {"snapshot": SnapshotOptions, "export": ExportOptions}


class ContainerTask:
    """`snapshot`: commit the container to an image, return its id. `export`: write the
    container's filesystem as a tar to options.path."""

    def __init__(self, driver: HoldsContainers, name: str, options: dict[str, Any]) -> None:
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
        cid = self.driver.cid(self.res)
        engine = self.driver.engine(self.res)
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
