"""GCP's Compute Engine quota metrics: what each one counts, and which a machine type takes.

Metric names are the Compute API's `Quota.metric` enum, as regions.get/list and projects.get
return them in `quotas[]` (https://cloud.google.com/compute/docs/reference/rest/v1/regions,
enum: https://cloud.google.com/dotnet/docs/reference/Google.Cloud.Compute.V1/latest/Google.Cloud.Compute.V1.Quota.Types.Metric).
Google's allocation quota page (https://cloud.google.com/compute/resource-usage) describes
the CPU, preemptible and GPU quotas; the rules shoal follows:
- a VM's vCPUs count against its machine series' own metric where the series has one
  (`N2_CPUS`, `C3_CPUS`, `A2_CPUS`, ...), else against the regional `CPUS` (N1, E2, the
  shared-core types, and series without a metric of their own), and against the
  project-wide `CPUS_ALL_REGIONS`. Google's own image tests check an n2 VM against
  `N2_CPUS` only and n1, c3d and h3 VMs against `CPUS` ("N1 CPUS aren't measured
  separately", "no public metric"; GoogleCloudPlatform/guest-test-infra);
- GPUs count against their model's regional metric (`NVIDIA_H100_GPUS`; the A3 Mega's
  `NVIDIA_H100_MEGA_GPUS` and the A100 80GB's `NVIDIA_A100_80GB_GPUS` are metrics of their
  own) and against the project-wide `GPUS_ALL_REGIONS`;
- Spot and preemptible VMs count against `PREEMPTIBLE_CPUS` and `PREEMPTIBLE_NVIDIA_*` when
  the project has that quota, else against the on-demand metrics.
Which series have a CPU metric changes as Google adds series: built with a region's quotas
(GcpQuotaMap(quotas)) the map follows what the region reports; without, the series the enum
names. N1 and E2 count against `CPUS` either way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from providers import gpus
from providers.accounts.model import Market, Need, Quota
from providers.gcp.shapes import builtin_shapes

CPUS = "CPUS"
PREEMPTIBLE = "PREEMPTIBLE_"
CPUS_ALL_REGIONS = "CPUS_ALL_REGIONS"
GPUS_ALL_REGIONS = "GPUS_ALL_REGIONS"
# Series with a CPU metric of their own, as the Quota.metric enum names them.
FAMILY_CPU_METRICS = frozenset(
    {"A2", "C2", "C2D", "C3", "G2", "M1", "M2", "M3", "N2", "N2D", "T2A", "T2D"}
)
SHARED_CPUS = frozenset({"N1", "E2", "F1", "G1", "CUSTOM"})  # always the regional CPUS
# Compute API accelerator type -> its regional GPU metric.
ACCELERATOR_METRICS: dict[str, str] = {
    "nvidia-tesla-k80": "NVIDIA_K80_GPUS",
    "nvidia-tesla-p4": "NVIDIA_P4_GPUS",
    "nvidia-tesla-p100": "NVIDIA_P100_GPUS",
    "nvidia-tesla-v100": "NVIDIA_V100_GPUS",
    "nvidia-tesla-t4": "NVIDIA_T4_GPUS",
    "nvidia-tesla-a100": "NVIDIA_A100_GPUS",
    "nvidia-a100-80gb": "NVIDIA_A100_80GB_GPUS",
    "nvidia-l4": "NVIDIA_L4_GPUS",
    "nvidia-h100-80gb": "NVIDIA_H100_GPUS",
    "nvidia-h100-mega-80gb": "NVIDIA_H100_MEGA_GPUS",
    "nvidia-h200-141gb": "NVIDIA_H200_GPUS",
    "nvidia-b200": "NVIDIA_B200_GPUS",
    "nvidia-gb200": "NVIDIA_GB200_GPUS",
    "nvidia-rtx-pro-6000": "NVIDIA_RTX_PRO_6000_GPUS",
}
_FAMILY_CPUS = re.compile(r"([A-Z]\d+[A-Z]?)_CPUS")
_GPU_METRIC = re.compile(r"NVIDIA_(.+)_GPUS")


@dataclass(frozen=True, slots=True)
class MetricKind:
    """Where a metric goes: its overview group, market, the spec's resource pair, GPU
    models (for `--select gpu=...`) and the project-wide metrics that also cap it (a
    region's GPUs all count against GPUS_ALL_REGIONS, its vCPUs against
    CPUS_ALL_REGIONS: what it lets launch is the least of them)."""

    group: str
    market: Market
    resource: tuple[str, str]
    gpus: tuple[str, ...] = ()
    within: tuple[str, ...] = ()


def classify(metric: str) -> MetricKind:
    """CPUS -> regional vCPUs; PREEMPTIBLE_CPUS -> the same for spot; N2_CPUS -> group N2;
    NVIDIA_H100_GPUS -> ("gpu", "H100") in group "gpu" (PREEMPTIBLE_: spot); the
    project-wide CPUS_ALL_REGIONS and GPUS_ALL_REGIONS -> group "project"; COMMITTED_*
    (commitment quotas), workstation GPUs (_VWS_) and every other metric -> ("quota",
    metric) in group "other", never dropped."""
    name = metric.upper()
    if name == CPUS_ALL_REGIONS:
        return MetricKind("project", "onDemand", ("cpu", "vcpu"))
    if name == GPUS_ALL_REGIONS:
        return MetricKind("project", "onDemand", ("quota", metric))
    market: Market = "spot" if name.startswith(PREEMPTIBLE) else "onDemand"
    rest = name.removeprefix(PREEMPTIBLE)
    cpus = (CPUS_ALL_REGIONS,)
    if rest == CPUS:
        return MetricKind("regional", market, ("cpu", "vcpu"), within=cpus)
    if not name.startswith("COMMITTED_"):
        if match := _FAMILY_CPUS.fullmatch(rest):
            return MetricKind(match.group(1), market, ("cpu", "vcpu"), within=cpus)
        if (match := _GPU_METRIC.fullmatch(rest)) and "_VWS" not in rest:
            raw = match.group(1)
            model = gpus.model(raw)
            if model:
                # NVIDIA_A100_80GB_GPUS and NVIDIA_H100_MEGA_GPUS are quotas of their own
                # beside NVIDIA_A100_GPUS and NVIDIA_H100_GPUS: named apart (A100-80GB).
                name = raw.replace("_", "-")
                name = name if name.startswith(model + "-") else model
                return MetricKind("gpu", market, ("gpu", name), (model,), (GPUS_ALL_REGIONS,))
    return MetricKind("other", market, ("quota", metric))


@cache
def _accelerators() -> dict[str, tuple[str, int]]:
    """Machine type -> (accelerator type, count), from shoal's built-in machine types."""
    return {s.name: (s.accelerator, s.gpu_count) for s in builtin_shapes() if s.accelerator}


def gpu_metric(machine_type: str, gpu: str) -> str:
    """The regional GPU metric of a machine type's GPUs: by its accelerator type when shoal
    knows the type (a3-megagpu-8g -> NVIDIA_H100_MEGA_GPUS), else by the GPU model
    (H100 -> NVIDIA_H100_GPUS)."""
    known = _accelerators().get(machine_type)
    if known is None:  # a size shoal does not list: a sibling of its series
        series = machine_type.rsplit("-", 1)[0] + "-"
        known = next((v for k, v in _accelerators().items() if k.startswith(series)), None)
    if known is not None and known[0] in ACCELERATOR_METRICS:
        return ACCELERATOR_METRICS[known[0]]
    model = gpus.model(gpu)
    return f"NVIDIA_{re.sub(r'[^A-Z0-9]+', '_', model.upper())}_GPUS" if model else ""


def cpu_metric(machine_type: str, codes: Iterable[str] = ()) -> str:
    """The regional CPU metric a machine type's vCPUs count against (see the module)."""
    series = machine_type.split("-", 1)[0].upper()
    if series in SHARED_CPUS:
        return CPUS
    known = set(codes)
    own = f"{series}_CPUS"
    if known:
        return own if own in known else CPUS
    return own if series in FAMILY_CPU_METRICS else CPUS


class GcpQuotaMap:
    """The QuotaMap for GCP (providers/accounts/model.py). Built with a region's quotas
    (regional and project-wide), it follows what that region reports: the series' CPU
    metric only if the region has it, and spot on the on-demand metrics where the
    preemptible quota is absent or 0; built without, it follows the documented rules."""

    def __init__(self, quotas: Iterable[Quota] = ()) -> None:
        self._limits = {q.code.upper(): q.limit for q in quotas}

    def _spot(self, metric: str) -> str:
        """PREEMPTIBLE_<metric> if the project has that quota (or its quotas are not
        known), else `metric` itself."""
        preemptible = PREEMPTIBLE + metric
        if self._limits and not self._limits.get(preemptible, 0) > 0:
            return metric
        return preemptible

    def needs(
        self, instance_type: str, vcpus: float | None, gpu: str, gpu_count: int, market: Market
    ) -> list[Need]:
        found: list[Need] = []
        if vcpus:
            cpu = cpu_metric(instance_type, self._limits)
            if market == "spot" and self._spot(CPUS) != CPUS:
                cpu = PREEMPTIBLE + CPUS
            found += [Need(cpu, vcpus), Need(CPUS_ALL_REGIONS, vcpus)]
        if gpu_count:
            metric = gpu_metric(instance_type, gpu)
            if metric:
                found.append(Need(self._spot(metric) if market == "spot" else metric, gpu_count))
            found.append(Need(GPUS_ALL_REGIONS, gpu_count))
        return found
