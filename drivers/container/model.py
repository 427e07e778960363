"""The `container` driver's input models: its instance config and a definition's options,
checked by pydantic (providers/core/schema.py). A model module: imported only where there is
such input to check (an `alloc`, a config table), so that a `status` or `free` of a driver
without one does not pay pydantic's import (tests/drivers/container pins it).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from drivers.container.defaults import DEFAULTS
from drivers.definitions.fields import ENTRY, ENV, Command, Env
from providers.core.strict import Count, Strict

OVERBOOK = "extra {} tenants may share when all allow it"


class ContainerConfig(Strict):
    """[drivers."container/INSTANCE"] (and docker/..., podman/...)"""

    socket: str = Field(
        DEFAULTS.socket, description="engine address: unix:///path or tcp://host:port"
    )
    cpu_limit: Count = Field(
        DEFAULTS.cpu_limit, description="vCPUs to hand out, 0 = the engine's CPUs"
    )
    ram_limit: Count = Field(
        DEFAULTS.ram_limit, description="GiB to hand out, 0 = the engine's memory"
    )
    cpu_overbook: Count = Field(DEFAULTS.cpu_overbook, description=OVERBOOK.format("vCPUs"))
    ram_overbook: Count = Field(DEFAULTS.ram_overbook, description=OVERBOOK.format("GiB"))
    grace_seconds: Count = Field(
        DEFAULTS.grace_seconds, description="stop -> kill grace period on free"
    )


class ContainerOptions(Strict):
    image: Annotated[str, Field(min_length=1)] = Field(
        description="an engine image, an image dir from `shoal image pull` (NAME-VERSION), "
        "or a path; e.g. -o image=busybox-1.36"
    )
    entry: Command = Field([], description=ENTRY)
    env: Env = Field({}, description=ENV)
    network: Literal["nat", "none"] = "nat"
