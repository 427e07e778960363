"""The pydantic models of the process driver's input: its config table and a definition's
options. Imported only by a command that checks one of them (alloc, a dry run, a table in
the config file), never by `status`, `free` or `logs` of an instance without a table."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from drivers.definitions.fields import ENV, Command, Env, EnvName
from drivers.process.defaults import DEFAULTS
from providers.core.strict import Count, NonNegative, Strict

SUPPLY = "0 = the local supply: host minus reserve"


class ProcessConfig(Strict):
    """[drivers."process/INSTANCE"]"""

    cpu_limit: Count = Field(DEFAULTS.cpu_limit, description=f"vCPUs to hand out, {SUPPLY}")
    ram_limit: Count = Field(DEFAULTS.ram_limit, description=f"GiB to hand out, {SUPPLY}")
    cpu_overbook: Count = Field(
        DEFAULTS.cpu_overbook, description="extra vCPUs tenants may share when all allow it"
    )
    ram_overbook: Count = Field(
        DEFAULTS.ram_overbook, description="extra GiB tenants may share when all allow it"
    )
    grace_seconds: NonNegative = Field(
        DEFAULTS.grace_seconds, description="SIGTERM -> SIGKILL grace on free"
    )
    workspace: str = Field(
        DEFAULTS.workspace, description="root of the workspaces (default: the state dir)"
    )
    env_passthrough: list[EnvName] = Field(
        list(DEFAULTS.env_passthrough),
        description="more of shoal's environment variables workloads inherit",
    )


class ProcessOptions(Strict):
    entry: Annotated[Command, Field(min_length=1)] | None = Field(
        None,
        description="the command to run: shell words or a list; e.g. --option entry='sleep "
        "600' (with image: the arguments after its entrypoint, in place of its cmd)",
    )
    image: str | None = Field(
        None,
        description="run it in an image pulled with `shoal image pull` (a reference, an "
        "archive's NAME-VERSION or a directory), as its config says: entrypoint, cmd, env, "
        "working directory",
    )
    env: Env = Field({}, description=ENV)
    grace_seconds: NonNegative | None = Field(
        None, description="seconds from SIGTERM to SIGKILL on free; default: the instance's"
    )
