"""Which EC2 vCPU quota an instance type counts against, and the GPU its family carries.

EC2 limits running instances per region in vCPUs, one quota per group of instance families
and purchase option. The codes and names below are AWS's, from "Amazon EC2 instance type
quotas" (https://docs.aws.amazon.com/ec2/latest/instancetypes/ec2-instance-quotas.html),
"On-Demand Instance quotas"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-on-demand-instances.html#ec2-on-demand-instances-limits)
and "Spot Instance quotas"
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-spot-limits.html), read
2026-12-01. Spot has no HPC or High Memory quota (those types are not sold as spot), and
splits P: "All P5 Spot Instance Requests" (L-C4BD4855) beside "All P4, P3 and P2 Spot
Instance Requests" (L-7212CCBC, named "All P Spot Instance Requests" on the older pages);
a P family newer than P5 is counted against L-7212CCBC, the group's general quota, until
AWS documents otherwise.

Quotas of different codes are separate pools, never added up: a launch of p5.48xlarge as
spot takes 192 vCPUs of L-C4BD4855 and nothing of L-7212CCBC, so 64 vCPUs left under
L-7212CCBC launch no P5. Where AWS splits a group's market by family (SPLITS), the split
quota gets a group of its own ("P5"), so the overview shows each pool on its own line
(`family=P` spot is L-7212CCBC, `family=P5` spot is L-C4BD4855) and the types running
under it are listed under it.

A type's group is read from the letters its family starts with (`p5.48xlarge` -> "p" ->
P, `u7i-12tb.224xlarge` -> "u" -> High Memory, `inf2` -> Inf); letters no group names
are Standard (A, C, D, H, I, M, R, T, Z, and Mac). The GPU of a family comes from the
offer-file parser's table (providers/aws/parse.py GPU_FAMILIES), used when
DescribeInstanceTypes did not say.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from providers.accounts.model import Market, Need, Quota
from providers.aws.parse import GPU_FAMILIES, family

STANDARD = "Standard"
# The letters a family starts with -> its group (anything else is Standard).
GROUP_OF_LETTERS = {
    "f": "F",
    "g": "G and VT",
    "gr": "G and VT",
    "vt": "G and VT",
    "p": "P",
    "x": "X",
    "inf": "Inf",
    "dl": "DL",
    "trn": "Trn",
    "hpc": "HPC",
    "u": "High Memory",
}
_LETTERS = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class VcpuQuota:
    """One vCPU quota of EC2 (service code `ec2`)."""

    code: str
    name: str
    group: str
    market: Market


VCPU_QUOTAS: tuple[VcpuQuota, ...] = (
    VcpuQuota("L-1216C47A", "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances",
              STANDARD, "onDemand"),
    VcpuQuota("L-74FC7D96", "Running On-Demand F instances", "F", "onDemand"),
    VcpuQuota("L-DB2E81BA", "Running On-Demand G and VT instances", "G and VT", "onDemand"),
    VcpuQuota("L-417A185B", "Running On-Demand P instances", "P", "onDemand"),
    VcpuQuota("L-7295265B", "Running On-Demand X instances", "X", "onDemand"),
    VcpuQuota("L-1945791B", "Running On-Demand Inf instances", "Inf", "onDemand"),
    VcpuQuota("L-6E869C2A", "Running On-Demand DL instances", "DL", "onDemand"),
    VcpuQuota("L-2C3B7624", "Running On-Demand Trn instances", "Trn", "onDemand"),
    VcpuQuota("L-F7808C92", "Running On-Demand HPC instances", "HPC", "onDemand"),
    VcpuQuota("L-43DA4232", "Running On-Demand High Memory instances", "High Memory", "onDemand"),
    VcpuQuota("L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests",
              STANDARD, "spot"),
    VcpuQuota("L-88CF9481", "All F Spot Instance Requests", "F", "spot"),
    VcpuQuota("L-3819A6DF", "All G and VT Spot Instance Requests", "G and VT", "spot"),
    VcpuQuota("L-7212CCBC", "All P4, P3 and P2 Spot Instance Requests", "P", "spot"),
    VcpuQuota("L-C4BD4855", "All P5 Spot Instance Requests", "P5", "spot"),
    VcpuQuota("L-E3A00192", "All X Spot Instance Requests", "X", "spot"),
    VcpuQuota("L-B5D1601B", "All Inf Spot Instance Requests", "Inf", "spot"),
    VcpuQuota("L-85EED4F7", "All DL Spot Instance Requests", "DL", "spot"),
    VcpuQuota("L-6B0D517C", "All Trn Spot Instance Requests", "Trn", "spot"),
)  # fmt: skip
BY_CODE = {quota.code: quota for quota in VCPU_QUOTAS}
P5_SPOT = "L-C4BD4855"
# (family group, market) -> (family prefixes, quota code): the families AWS counts against a
# quota of their own in that market, apart from the group's general quota.
SPLITS: dict[tuple[str, Market], tuple[tuple[tuple[str, ...], str], ...]] = {
    ("P", "spot"): ((("p5",), P5_SPOT),),
}
_SPLIT_CODES = {code for rules in SPLITS.values() for _, code in rules}
_GROUP_QUOTA = {
    (q.group, q.market): q for q in VCPU_QUOTAS if q.code not in _SPLIT_CODES
}  # the group's general quota per market


def group_of(instance_type: str) -> str:
    """The family group of `instance_type` (P for p5.48xlarge). The quota it counts against
    is vcpu_quota's, whose own group differs where AWS splits the group (P5 spot)."""
    letters = _LETTERS.match(family(instance_type).lower())
    return GROUP_OF_LETTERS.get(letters.group(0) if letters else "", STANDARD)


def vcpu_quota(instance_type: str, market: Market) -> VcpuQuota | None:
    """The vCPU quota one instance of `instance_type` counts against in `market` (None:
    the type is not sold in that market, e.g. HPC or High Memory as spot)."""
    group = group_of(instance_type)
    name = family(instance_type).lower()
    for prefixes, code in SPLITS.get((group, market), ()):
        if name.startswith(prefixes):
            return BY_CODE[code]
    return _GROUP_QUOTA.get((group, market))


def family_gpu(instance_type: str) -> str:
    """The canonical GPU (or accelerator) model of the type's family ("" when none known)."""
    return GPU_FAMILIES.get(family(instance_type).lower(), ("", 0.0))[0]


def quota_gpus(code: str) -> tuple[str, ...]:
    """The GPU models of the families that count against vCPU quota `code`."""
    quota = BY_CODE.get(code)
    if quota is None:
        return ()
    models = {
        model
        for name, (model, _) in GPU_FAMILIES.items()
        if vcpu_quota(name + ".x", quota.market) == quota
    }
    return tuple(sorted(models))


class AwsQuotaMap:
    """EC2's QuotaMap: an instance takes its vCPUs of the one quota that covers its family in
    its market (vcpu_quota: p5 spot -> L-C4BD4855, p4d spot -> L-7212CCBC; nothing when its
    vCPUs are not known, or the market has no quota for the group). The
    rules are the same whatever quotas a region reports (`quotas`: the QuotaMap contract)."""

    def __init__(self, quotas: Iterable[Quota] = ()) -> None:
        pass

    def needs(
        self, instance_type: str, vcpus: float | None, gpu: str, gpu_count: int, market: Market
    ) -> list[Need]:
        quota = vcpu_quota(instance_type, market)
        if quota is None or vcpus is None:
            return []
        return [Need(quota.code, float(vcpus))]


QUOTA_MAP = AwsQuotaMap()
