"""Machine shapes: from the Compute Engine machine types API, or from shoal's built-in table.

Without a token the shapes come from machine_types.json beside this module: the predefined
machine types as Google's machine-type pages list them, one explicit row each (the file names
the page of every series, its date, and where a page and the Compute API disagreed). It is
read on first use, so a command that never prices GCP never opens it, and through
importlib.resources, so a regular (non-editable) install finds it as package data.
Google's "GB" of machine memory is GiB (memoryMb 8192 for n2-standard-2).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING, Any

from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from providers.gcp.payloads import MachineType

# Accelerator type (as the Compute API names it) -> (model, memory GiB per GPU). Models are
# providers.gpus' canonical names, so `--select gpu=H100` means the same on every provider.
GPU_MODELS: dict[str, tuple[str, float]] = {
    "nvidia-tesla-k80": ("K80", 12),
    "nvidia-tesla-p4": ("P4", 8),
    "nvidia-tesla-p100": ("P100", 16),
    "nvidia-tesla-v100": ("V100", 16),
    "nvidia-tesla-t4": ("T4", 16),
    "nvidia-tesla-a100": ("A100", 40),
    "nvidia-a100-80gb": ("A100", 80),
    "nvidia-l4": ("L4", 24),
    "nvidia-h100-80gb": ("H100", 80),
    "nvidia-h100-mega-80gb": ("H100", 80),
    "nvidia-h200-141gb": ("H200", 141),
    "nvidia-b200": ("B200", 180),
    "nvidia-rtx-pro-6000": ("RTX PRO 6000", 96),
}

# Series that run on Arm, for API entries without `architecture` (the built-in table says it
# per row).
ARM_FAMILIES = frozenset({"t2a", "c4a", "n4a", "a4x"})

# Shared-core E2 types bill a fraction of a vCPU (the "fractional vCPU" column of the docs)
# though the API reports guestCpus 2.
SHARED_CORE_VCPUS = {"e2-micro": 0.25, "e2-small": 0.5, "e2-medium": 1.0}


@dataclass(frozen=True, slots=True)
class Shape:
    name: str
    vcpus: float
    memory_gib: float
    arch: str = "x86_64"
    accelerator: str = ""  # Compute API accelerator type, e.g. "nvidia-h100-80gb"
    gpu_count: int = 0

    @property
    def family(self) -> str:
        return self.name.split("-", 1)[0]

    @property
    def billed_vcpus(self) -> float:
        return SHARED_CORE_VCPUS.get(self.name, self.vcpus)


TABLE_FILE = "machine_types.json"
_ARCHES = frozenset({"x86_64", "arm64"})


@dataclass(frozen=True, slots=True)
class BuiltinTable:
    as_of: str  # the date of Google's pages the rows were read from
    shapes: tuple[Shape, ...]

    @property
    def source(self) -> str:
        """What an offer priced on these shapes names as its shape source."""
        return (
            "shoal's built-in GCP machine-type table "
            f"(Google machine-type pages, as of {self.as_of})"
        )


def table_from_json(raw: Any) -> BuiltinTable:
    """The parsed data file; a malformed one is a ShoalError naming the bad row, since a
    silently skipped row would be a machine type that is never priced."""

    def bad(what: str) -> ShoalError:
        return ShoalError(f"gcp: built-in machine-type table ({TABLE_FILE}): {what}")

    if not isinstance(raw, dict):
        raise bad("not a JSON object")
    as_of, rows = raw.get("asOf"), raw.get("machineTypes")
    if not isinstance(as_of, str) or not as_of:
        raise bad("no 'asOf' date")
    if not isinstance(rows, list) or not rows:
        raise bad("no 'machineTypes' rows")
    shapes: dict[str, Shape] = {}
    for row in rows:
        name = row.get("name") if isinstance(row, dict) else None
        if not isinstance(name, str) or not name:
            raise bad(f"a row without a name: {row!r}")
        vcpus, memory = row.get("vcpus"), row.get("memoryGib")
        accelerator, count = row.get("accelerator", ""), row.get("gpuCount", 0)
        arch = row.get("arch")
        if not _positive(vcpus) or not _positive(memory):
            raise bad(f"{name}: vcpus and memoryGib must be positive numbers")
        if not isinstance(accelerator, str) or not _count(count):
            raise bad(f"{name}: accelerator must be a string and gpuCount a count")
        if bool(accelerator) != bool(count):
            raise bad(f"{name}: an accelerator needs a GPU count and a GPU count an accelerator")
        if arch not in _ARCHES:
            raise bad(f"{name}: arch must be one of {sorted(_ARCHES)}")
        if name in shapes:
            raise bad(f"{name} is listed twice")
        shapes[name] = Shape(name, float(vcpus), float(memory), str(arch), accelerator, count)
    return BuiltinTable(as_of, tuple(shapes.values()))


def _positive(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@functools.cache
def builtin_table() -> BuiltinTable:
    """shoal's table of Google's predefined machine types, read once, on first use."""
    try:
        text = resources.files("providers.gcp").joinpath(TABLE_FILE).read_text(encoding="utf-8")
    except OSError as exc:
        raise ShoalError(
            f"gcp: cannot read the built-in machine-type table {TABLE_FILE} ({exc}); "
            "the installation is incomplete, reinstall shoal"
        ) from None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ShoalError(f"gcp: built-in machine-type table ({TABLE_FILE}): {exc}") from None
    return table_from_json(raw)


def builtin_shapes() -> list[Shape]:
    """The predefined machine types of the built-in table."""
    return list(builtin_table().shapes)


def _arch(raw: Any, family: str) -> str:
    if raw == "ARM64":
        return "arm64"
    if raw == "X86_64":
        return "x86_64"
    return "arm64" if family in ARM_FAMILIES else "x86_64"


def shape_from_api(item: MachineType) -> Shape | None:
    """One MachineType resource (with its guestCpus and memoryMb: machine_types_page checks
    them); None for an entry without a name."""
    name = item.get("name")
    if not name:
        return None
    accelerator, count = "", 0
    for acc in item.get("accelerators") or []:
        if acc.get("guestAcceleratorType"):
            accelerator = acc.get("guestAcceleratorType") or ""
            count += int(acc.get("guestAcceleratorCount", 0))
    family = name.split("-", 1)[0]
    return Shape(
        name,
        item["guestCpus"],
        item["memoryMb"] / 1024,
        _arch(item.get("architecture"), family),
        accelerator,
        count,
    )


def region_of_zone(zone: str) -> str:
    """`us-central1-a` (or a zone URL / `zones/us-central1-a`) -> `us-central1`."""
    return zone.rsplit("/", 1)[-1].rsplit("-", 1)[0]


def machine_types_page(
    page: Any,
    into: dict[str, dict[str, Shape]],
    zones: dict[str, set[str]],
    where: str = "gcp: machine types",
) -> str:
    """Fold one page of `aggregated/machineTypes` (decoded JSON or a Body), checked whole
    first, into region -> name -> Shape (the union over the region's zones) and region ->
    zones; returns the nextPageToken ("" at the end)."""
    from providers.gcp.payloads import MACHINE_TYPES

    read = MACHINE_TYPES.read(page, where)
    for scope, scoped in (read.get("items") or {}).items():
        if not scope.startswith("zones/"):
            continue
        zone = scope.removeprefix("zones/")
        region = region_of_zone(zone)
        zones.setdefault(region, set()).add(zone)
        for index, item in enumerate(scoped.get("machineTypes") or []):
            if item.get("name") and not ("guestCpus" in item and "memoryMb" in item):
                path = f'items."{scope}".machineTypes[{index}]'
                said = f"machine type {item.get('name')!r} has no guestCpus or memoryMb"
                raise MACHINE_TYPES.malformed(where, path, said)
            shape = shape_from_api(item)
            if shape is not None:
                into.setdefault(region, {}).setdefault(shape.name, shape)
    return read.get("nextPageToken") or ""
