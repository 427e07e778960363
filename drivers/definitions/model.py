"""What a definition document may hold: drivers/spec/types.py's LabelDefinition as strict models.

A parallel model, not a TypeAdapter over the dataclasses: pydantic's strict mode accepts a
dataclass only as an instance, never as a dict, and the lax mode takes `true` and "2" for a
number; the dataclasses also carry `Resources` as node usage, where 0 CPUs is right. The
document is checked here, then decoded into the dataclasses by the wire codec as before.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from providers.core.errors import UsageError
from providers.core.strict import Count, Strict
from providers.core.timeutil import parse_duration

# Past these, SQLite integers and datetime overflow; no machine comes near them.
MAX_CPU = 1_000_000
MAX_RAM_GIB = 1_000_000_000
MAX_LIFETIME = timedelta(days=36_525)


def _lifetime(text: str) -> str:
    # "" would mean no lifetime, as leaving it out does; written out, it is more likely a
    # template's unset variable than a wish for a workload that never ends.
    if not text:
        raise ValueError("empty; give a duration such as 30m or 2h, or leave it out for none")
    try:
        life = parse_duration(text, "lifetime")
    except UsageError as exc:
        raise ValueError(str(exc).removeprefix("lifetime: ")) from None
    if life > MAX_LIFETIME:
        raise ValueError(f"{text!r} is over 100 years; leave it out for no lifetime")
    return text


class Disk(Strict):
    type: str = ""
    label: str = ""
    size: Count = Field(0, description="GiB")
    reuse: bool = False
    clone: str = ""


class Resources(Strict):
    slots: Count = 0
    # None: not given, which only a definition naming its instance type may leave (build()).
    cpu: Annotated[int, Field(ge=1, le=MAX_CPU)] | None = Field(
        None, description=f"vCPUs, 1 to {MAX_CPU}"
    )
    ram: Annotated[int, Field(ge=1, le=MAX_RAM_GIB)] | None = Field(
        None, description=f"GiB, 1 to {MAX_RAM_GIB}"
    )
    disks: dict[str, Disk] = {}
    network: str = ""
    node_filter: list[str] = []
    multitenancy: bool = False
    cpu_overbook: bool = False
    ram_overbook: bool = False
    lifetime: Annotated[str, AfterValidator(_lifetime)] = Field(
        "", description="a duration such as 90s, 30m, 1h30m or 2d"
    )


class Authentication(Strict):
    secret: ClassVar[bool] = True  # an error never quotes what was given here

    username: str = ""
    password: str = ""
    key: str = ""
    port: int = 0


class LabelDefinition(Strict):
    driver: Annotated[str, Field(min_length=1)] = Field(
        description='the driver to allocate on, e.g. "driver": "process" or --driver'
    )
    resources: Resources
    options: dict[str, Any] = {}
    authentication: Authentication | None = None
