"""Machine shapes: from the Compute Engine machine types API, or built from family rules.

Without a token the common predefined machine types are derived from the documented rules
of each series (https://cloud.google.com/compute/docs/general-purpose-machines,
/compute-optimized-machines, /accelerator-optimized-machines): `n2-standard-N` has N vCPUs
and 4 GiB per vCPU, `-highmem` 8 GiB, `-highcpu` 1 GiB (2 GiB for C3/C2D); N1 uses 3.75 /
6.5 / 0.9 GiB. The accelerator-optimized series have fixed shapes with their GPUs attached.
Google's "GB" of machine memory is GiB (memoryMb 8192 for n2-standard-2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from providers.errors import ShoalError

# Accelerator type (as the Compute API names it) -> (short model, memory GiB per GPU).
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

# Series that run on Arm (the API says so in `architecture`; the built-in table needs this).
ARM_FAMILIES = frozenset({"t2a", "c4a", "a4x"})

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


def _series(family: str, kind: str, gib_per_vcpu: float, sizes: list[int]) -> list[Shape]:
    arch = "arm64" if family in ARM_FAMILIES else "x86_64"
    return [Shape(f"{family}-{kind}-{n}", n, n * gib_per_vcpu, arch) for n in sizes]


def _gpu(name: str, vcpus: int, gib: float, accelerator: str, count: int) -> Shape:
    return Shape(name, vcpus, gib, "x86_64", accelerator, count)


def builtin_shapes() -> list[Shape]:
    """The common predefined machine types, from the family rules above."""
    shapes = [
        Shape("e2-micro", 2, 1),
        Shape("e2-small", 2, 2),
        Shape("e2-medium", 2, 4),
        *_series("e2", "standard", 4, [2, 4, 8, 16, 32]),
        *_series("e2", "highmem", 8, [2, 4, 8, 16]),
        *_series("e2", "highcpu", 1, [2, 4, 8, 16, 32]),
        *_series("n1", "standard", 3.75, [1, 2, 4, 8, 16, 32, 64, 96]),
        *_series("n1", "highmem", 6.5, [2, 4, 8, 16, 32, 64, 96]),
        *_series("n1", "highcpu", 0.9, [2, 4, 8, 16, 32, 64, 96]),
        *_series("n2", "standard", 4, [2, 4, 8, 16, 32, 48, 64, 80, 96, 128]),
        *_series("n2", "highmem", 8, [2, 4, 8, 16, 32, 48, 64, 80, 96, 128]),
        *_series("n2", "highcpu", 1, [2, 4, 8, 16, 32, 48, 64, 80, 96]),
        *_series("n2d", "standard", 4, [2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224]),
        *_series("n2d", "highmem", 8, [2, 4, 8, 16, 32, 48, 64, 80, 96]),
        *_series("n2d", "highcpu", 1, [2, 4, 8, 16, 32, 48, 64, 80, 96, 128, 224]),
        *_series("c2", "standard", 4, [4, 8, 16, 30, 60]),
        *_series("c2d", "standard", 4, [2, 4, 8, 16, 32, 56, 112]),
        *_series("c2d", "highmem", 8, [2, 4, 8, 16, 32, 56, 112]),
        *_series("c2d", "highcpu", 2, [2, 4, 8, 16, 32, 56, 112]),
        *_series("c3", "standard", 4, [4, 8, 22, 44, 88, 176]),
        *_series("c3", "highmem", 8, [4, 8, 22, 44, 88, 176]),
        *_series("c3", "highcpu", 2, [4, 8, 22, 44, 88, 176]),
        *_series("t2d", "standard", 4, [1, 2, 4, 8, 16, 32, 48, 60]),
        *_series("t2a", "standard", 4, [1, 2, 4, 8, 16, 32, 48]),
    ]
    # A2: 12 vCPUs per A100; 85 GiB per 40 GB card (highgpu/megagpu), 170 GiB per 80 GB card.
    for n in (1, 2, 4, 8):
        shapes.append(_gpu(f"a2-highgpu-{n}g", 12 * n, 85 * n, "nvidia-tesla-a100", n))
        shapes.append(_gpu(f"a2-ultragpu-{n}g", 12 * n, 170 * n, "nvidia-a100-80gb", n))
    shapes.append(_gpu("a2-megagpu-16g", 96, 1360, "nvidia-tesla-a100", 16))
    shapes.append(_gpu("a3-highgpu-8g", 208, 1872, "nvidia-h100-80gb", 8))
    # G2: 4 GiB per vCPU, L4 count by size.
    for vcpus, gpus in ((4, 1), (8, 1), (12, 1), (16, 1), (24, 2), (32, 1), (48, 4), (96, 8)):
        shapes.append(_gpu(f"g2-standard-{vcpus}", vcpus, 4 * vcpus, "nvidia-l4", gpus))
    return shapes


def _arch(raw: Any, family: str) -> str:
    if raw == "ARM64":
        return "arm64"
    if raw == "X86_64":
        return "x86_64"
    return "arm64" if family in ARM_FAMILIES else "x86_64"


def shape_from_api(item: Any) -> Shape | None:
    """One MachineType resource; None for entries without a usable name or size."""
    if not isinstance(item, dict):
        return None
    name = item.get("name")
    cpus = item.get("guestCpus")
    memory_mb = item.get("memoryMb")
    if not isinstance(name, str) or not name:
        return None
    if not isinstance(cpus, int | float) or not isinstance(memory_mb, int | float):
        raise ShoalError(f"gcp: machine type {name!r} has no numeric guestCpus/memoryMb")
    accelerator, count = "", 0
    for acc in item.get("accelerators") or []:
        if isinstance(acc, dict) and isinstance(acc.get("guestAcceleratorType"), str):
            accelerator = acc["guestAcceleratorType"]
            count += int(acc.get("guestAcceleratorCount") or 0)
    family = name.split("-", 1)[0]
    return Shape(
        name,
        float(cpus),
        float(memory_mb) / 1024,
        _arch(item.get("architecture"), family),
        accelerator,
        count,
    )


def region_of_zone(zone: str) -> str:
    """`us-central1-a` (or a zone URL / `zones/us-central1-a`) -> `us-central1`."""
    return zone.rsplit("/", 1)[-1].rsplit("-", 1)[0]


def machine_types_page(
    page: Any, into: dict[str, dict[str, Shape]], zones: dict[str, set[str]]
) -> str:
    """Fold one page of `aggregated/machineTypes` into region -> name -> Shape (the union
    over the region's zones) and region -> zones; returns the nextPageToken ("" at the end)."""
    if not isinstance(page, dict) or not isinstance(page.get("items", {}), dict):
        raise ShoalError("gcp: machine types: unexpected payload (no 'items' map)")
    for scope, scoped in page.get("items", {}).items():
        if not isinstance(scoped, dict) or not str(scope).startswith("zones/"):
            continue
        zone = str(scope).removeprefix("zones/")
        region = region_of_zone(zone)
        zones.setdefault(region, set()).add(zone)
        for item in scoped.get("machineTypes") or []:
            shape = shape_from_api(item)
            if shape is not None:
                into.setdefault(region, {}).setdefault(shape.name, shape)
    token = page.get("nextPageToken") or ""
    return token if isinstance(token, str) else ""
