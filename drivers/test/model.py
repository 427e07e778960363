"""The pydantic models of the test driver's input (its config table, a definition's options,
the snapshot task's options): imported only by a command that checks one of them."""

from __future__ import annotations

from pydantic import Field

from drivers.definitions.fields import Delay, Probability
from drivers.definitions.limits import MAX_DELAY_SECONDS
from drivers.test.defaults import DEFAULTS
from providers.core.strict import Count, Strict

OVERBOOK = "extra {} tenants may share when all allow it"
STALL = f"seconds to stall, 0 to {MAX_DELAY_SECONDS}"


class TestConfig(Strict):
    """[drivers."test/INSTANCE"]"""

    __test__ = False  # not a pytest class

    is_remote: bool = Field(
        DEFAULTS.is_remote, description="pretend to be remote: not counted on this node"
    )
    workspace: str = Field(
        DEFAULTS.workspace, description="directory for marker files (default: state dir)"
    )
    cpu_limit: Count = Field(DEFAULTS.cpu_limit, description="vCPUs available, 0 unlimited")
    ram_limit: Count = Field(DEFAULTS.ram_limit, description="GiB available, 0 unlimited")
    cpu_overbook: Count = Field(DEFAULTS.cpu_overbook, description=OVERBOOK.format("vCPUs"))
    ram_overbook: Count = Field(DEFAULTS.ram_overbook, description=OVERBOOK.format("GiB"))
    fail_status: Probability = DEFAULTS.fail_status
    fail_deallocate: Probability = DEFAULTS.fail_deallocate
    fail_snapshot: Probability = DEFAULTS.fail_snapshot


class TestOptions(Strict):
    """Injected failures (0..255) and stalls (seconds)."""

    __test__ = False

    fail_validate: Probability = 0
    fail_available_capacity: Probability = 0
    fail_allocate: Probability = 0
    fail_status: Probability = 0
    fail_deallocate: Probability = 0
    fail_snapshot: Probability = 0
    delay_available_capacity: Delay = Field(0.0, description=STALL)
    delay_allocate: Delay = Field(0.0, description=STALL)
    delay_deallocate: Delay = Field(0.0, description=STALL)


class SnapshotOptions(Strict):
    label: str = ""
