"""What a cloud account's capacity fetcher returns, provider-neutral.

A fetcher (providers/aws/accounts.py, azure/, gcp/) turns its APIs into these records;
providers/accounts/resource.py turns them into the spec's Resource. Units are in the
names: a quota's `limit` and `used` count its `resource` (vCPUs for a `cpu/vcpu` quota,
GPUs for `gpu/<model>`, instances for `instance/<type>`, the provider's own unit for
`quota/<code>`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal, Protocol

Market = Literal["onDemand", "spot"]
MARKETS: tuple[Market, ...] = ("onDemand", "spot")


@dataclass
class Quota:
    """One quota of the account: a limit and what is used of it.

    `group` is the overview item it belongs to: the provider's family group ("Standard",
    "P", "G and VT", "standardNCadsH100v5Family", "regional"), shown as `value` of an
    overview item keyed `family`. `resource` is the spec's (type, name) pair: ("cpu",
    "vcpu"), ("gpu", "H100"), ("instance", "p5.48xlarge"), or ("quota", code) for a quota
    shoal cannot place (kept, never dropped). `used` None: usage unknown (a note says why).
    `scope` "region" or "global" (project/account wide, e.g. GCP GPUS_ALL_REGIONS).

    A group is one pool per market and resource: two codes of one group, market and
    resource would be added up on one overview line, so a cloud whose codes split a group
    (AWS's P5 spot quota beside its P4/P3/P2 one) gives the split code a group of its own.
    `within` names broader quotas that count the same things in the same unit (GCP's
    project-wide GPUS_ALL_REGIONS over a region's NVIDIA_H100_GPUS): what this quota lets
    launch is also capped by what they leave."""

    code: str
    name: str
    group: str
    market: Market
    resource: tuple[str, str]
    limit: float
    used: float | None
    scope: Literal["region", "global"] = "region"
    gpus: tuple[str, ...] = ()  # GPU models of the family's types, for --select gpu=...
    within: tuple[str, ...] = ()  # codes of broader quotas in the same unit


@dataclass(frozen=True)
class Need:
    """What launching one instance takes of one quota: `amount` of quota `code`."""

    code: str
    amount: float


@dataclass
class InstanceUsage:
    """Running (or pending) instances of one type in one zone and market. `vcpus` and
    `gpus` are per instance (None: not known); `group` the family group whose quota
    they count against."""

    instance_type: str
    market: Market
    count: int
    group: str
    zone: str = ""
    vcpus: float | None = None
    gpu: str = ""  # canonical GPU name (providers/gpus.py)
    gpus: int = 0


@dataclass
class Reservation:
    """Capacity held for the account from `start` (None: already) to `end` (None: until
    cancelled): `total` instances of `instance_type`, `available` of them not in use."""

    id: str
    kind: str  # "capacity-reservation", "capacity-block", "future-reservation", ...
    instance_type: str
    total: int
    available: int
    start: datetime | None = None
    end: datetime | None = None
    zone: str = ""
    state: str = ""
    vcpus: float | None = None
    gpu: str = ""
    gpus: int = 0


@dataclass
class AccountSnapshot:
    """One region of one account, as fetched at `fetched_at`. `sources` name the APIs
    asked (for `source`), `notes` what is missing and which permission would fill it.
    `quotas_unknown` says why the region's own quotas could not be read (GCP's
    `quotaStatusWarning`), "" when they were: such a region's quotas are unknown (never
    zero, never full: nothing is refused for them), and its answer is asked again at the
    next call rather than served from the cache as if known.

    `type_zones` maps instance types to the zones of the region that offer them (AWS
    DescribeInstanceTypeOfferings, GCP machine types per zone; sorted), for the types whose
    names match a pattern of `zones_cover` (fnmatch: `p*`, `a3-*`): a type that matches and
    is not listed is offered in no zone of the region. The zones of any other type are not
    known, and `zones_unknown` says why (a provider that lists its GPU types only, a refused
    or failed list). None: no list was read (so too a snapshot cached before zones were)."""

    provider: str
    region: str
    fetched_at: datetime
    quotas: list[Quota] = field(default_factory=list)
    usage: list[InstanceUsage] = field(default_factory=list)
    reservations: list[Reservation] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    location: str = ""
    zones: list[str] = field(default_factory=list)
    quotas_unknown: str = ""
    type_zones: dict[str, list[str]] | None = None
    zones_cover: list[str] = field(default_factory=list)
    zones_unknown: str = ""


def sound_quotas(quotas: Iterable[Quota]) -> tuple[list[Quota], list[str]]:
    """`quotas` as a snapshot may hold them, and a note for each thing set right. Every
    fetcher's quotas pass here, so the overview, `pricing --available` and the drivers'
    checks all see one quota per code:

    - a quota reported more than once (the same code and scope: a server repeating an entry,
      a page sent twice) is one quota, never the sum of its copies (three copies of a
      50-vCPU family are not 150). The copy that leaves the least free is kept: a server
      that disagrees with itself must not promise what one of its answers denies.
    - a negative limit is not a count (some APIs write -1 for "unlimited" or "not
      applicable"): the quota is left out, as the AWS reader leaves out such values.
    - a negative usage is not a count either: the usage is unknown (None), so neither
      allocated nor allocatable is claimed (-1 of 50 used would make 51 allocatable).
    """
    kept: dict[tuple[str, str], Quota] = {}
    copies: dict[tuple[str, str], int] = {}
    no_limit: list[str] = []
    no_usage: list[str] = []
    for quota in quotas:
        if quota.limit < 0:
            no_limit.append(quota.code)
            continue
        if quota.used is not None and quota.used < 0:
            no_usage.append(quota.code)
            quota = replace(quota, used=None)
        key = (quota.scope, quota.code)
        copies[key] = copies.get(key, 0) + 1
        held = kept.get(key)
        if held is None or _left(quota) < _left(held):
            kept[key] = quota
    notes = []
    if no_limit:
        notes.append(f"quotas left out, their limit is negative: {_listed(no_limit)}")
    if no_usage:
        notes.append(f"usage unknown, reported as negative: {_listed(no_usage)}")
    repeated = [code for (_, code), n in copies.items() if n > 1]
    if repeated:
        notes.append(
            f"quotas reported more than once, each counted once (the copy with the least "
            f"left): {_listed(repeated)}"
        )
    return list(kept.values()), notes


def _left(quota: Quota) -> tuple[bool, float]:
    """How a copy ranks: known usage first (it can say no), then the least free."""
    if quota.used is None:
        return True, quota.limit
    return False, quota.limit - quota.used


def _listed(codes: Sequence[str], most: int = 5) -> str:
    unique = sorted(set(codes))
    more = len(unique) - most
    return ", ".join(unique[:most]) + (f" and {more} more" if more > 0 else "")


class AccountFetcher(Protocol):
    """A cloud's account capacity. `account` names the account the credentials belong to
    as far as is known without a request (cache key: a key id, subscription, project);
    `fetch` asks its APIs for the regions given, concurrently where it can, and returns a
    snapshot per region (a region it could not answer raises; missing permissions for
    part of it are notes). `regions` lists the regions the account can use."""

    provider: str
    account: str

    def regions(self) -> list[str]: ...

    def fetch(self, regions: Sequence[str]) -> list[AccountSnapshot]: ...


class QuotaMap(Protocol):
    """A cloud's rules of which quotas an instance type counts against (no requests: it
    serves cached answers too), built with one region's quotas (`Class(quotas)`: a cloud
    whose rules depend on what the region reports, or how it spells its codes, follows
    them). `gpu` is the canonical GPU name, "" for none."""

    def needs(
        self, instance_type: str, vcpus: float | None, gpu: str, gpu_count: int, market: Market
    ) -> list[Need]: ...
