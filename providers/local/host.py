"""This host's shape: usable vCPUs, memory, architecture and NVIDIA GPUs.

vCPUs honour the process affinity mask and a cgroup v2 `cpu.max` quota; memory honours a
cgroup `memory.max`, so inside a container the figures are the container's, not the host's.
GPUs come from `nvidia-smi` when it is on PATH.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from providers.core.ttlcache import TtlCache

_ARCH_ALIASES = {"amd64": "x86_64", "aarch64": "arm64"}
_CGROUP = Path("/sys/fs/cgroup")
NVIDIA_SMI_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True)
class Gpu:
    product: str  # as the NVIDIA device plugin labels it: "NVIDIA-A100-SXM4-80GB"
    model: str  # short model for selectors: "A100"
    memory_gib: float


@dataclass(frozen=True)
class HostShape:
    hostname: str
    vcpus: int
    memory_gib: float
    arch: str
    gpus: list[Gpu] = field(default_factory=list)


def _cgroup_cpus() -> float | None:
    try:
        quota, period = (_CGROUP / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period)


def _cgroup_memory_bytes() -> int | None:
    try:
        text = (_CGROUP / "memory.max").read_text().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)


def _meminfo_bytes() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def usable_vcpus() -> int:
    count = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    count = count or 1
    quota = _cgroup_cpus()
    if quota is not None:
        count = min(count, max(1, math.floor(quota)))
    return count


def memory_gib() -> float:
    total = _meminfo_bytes()
    limit = _cgroup_memory_bytes()
    if limit is not None:
        total = min(total, limit)
    return round(total / 2**30, 2)


def _short_model(name: str) -> str:
    from providers.gpus import model

    return model(name) or name


def parse_nvidia_smi(output: str) -> list[Gpu]:
    """Parse `nvidia-smi --query-gpu=name,memory.total --format=csv,noheader,nounits`."""
    gpus = []
    for line in output.splitlines():
        if not line.strip():
            continue
        name, _, memory = (part.strip() for part in line.rpartition(","))
        try:
            mib = float(memory)
        except ValueError:
            mib = 0.0
        gpus.append(
            Gpu(
                product=name.replace(" ", "-"),
                model=_short_model(name),
                memory_gib=round(mib / 1024, 1),
            )
        )
    return gpus


def detect_gpus() -> list[Gpu]:
    import shutil
    import subprocess

    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        done = subprocess.run(
            [exe, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(done.stdout) if done.returncode == 0 else []


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _cached_gpus(cache: TtlCache, boot: str, path: str) -> list[Gpu] | None:
    kept = cache.get("host", "gpus")
    if not isinstance(kept, dict) or kept.get("boot_id") != boot or kept.get("path") != path:
        return None
    try:
        return [Gpu(**g) for g in kept["gpus"]]
    except (KeyError, TypeError):
        return None


def detect(cache_file: Path | None = None) -> HostShape:
    """Measure the host; GPUs are cached per boot and PATH (no TTL: only a reboot or another
    nvidia-smi changes them), since nvidia-smi can take a second."""
    boot = _boot_id()
    path_key = os.environ.get("PATH", "")
    cache = TtlCache(cache_file) if cache_file is not None and boot else None
    gpus = _cached_gpus(cache, boot, path_key) if cache is not None else None
    if gpus is None:
        gpus = detect_gpus()
        if cache is not None:
            kept = {"boot_id": boot, "path": path_key, "gpus": [asdict(g) for g in gpus]}
            cache.put("host", "gpus", kept, None)
    uname = os.uname()
    machine = uname.machine.lower()
    return HostShape(
        hostname=uname.nodename or "localhost",
        vcpus=usable_vcpus(),
        memory_gib=memory_gib(),
        arch=_ARCH_ALIASES.get(machine, machine),
        gpus=gpus,
    )
