"""An AWS account's capacity per region: EC2 vCPU quotas, running instances, reservations.

Per region, at once (providers/accounts/parallel.py), each call with its own client:

- Service Quotas `ListServiceQuotas` and `ListAWSDefaultServiceQuotas` for service `ec2`
  (JSON 1.1, every page, each checked whole: providers/aws/payloads.py). ListServiceQuotas
  lists the applied values, but "if the applied quota value is not available for a quota,
  the quota is not retrieved"
  (https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html),
  so AWS's defaults fill the codes it left out (a note says which vCPU quotas they are).
  The vCPU quotas shoal knows (providers/aws/families.py) become `cpu/vcpu` quotas of
  their family group and market; every other ec2 quota is kept as `quota/<code>` in group
  "other", usage unknown. A value no real quota has (negative, past 1e15) leaves its quota
  out, counted in a note; a value that is no number, or a quota without a code, is a
  malformed page.
- EC2 `DescribeInstances` (pending and running): instances per (type, zone, market,
  vCPUs); `instanceLifecycle` "spot" is spot, anything else on-demand. vCPUs from the
  instance's `cpuOptions` (cores x threads), else from `DescribeInstanceTypes`, asked
  after, once, for the types in use and reserved; GPUs from its `gpuInfo` (or
  `neuronInfo`), else from the family table. A vCPU quota's `used` is the vCPUs of the
  running instances of its group and market.
- EC2 `DescribeCapacityReservations`: active, scheduled and payment-pending reservations
  and capacity blocks (`reservationType` capacity-block).
- EC2 `DescribeInstanceTypeOfferings` with `LocationType=availability-zone`, every page
  (MaxResults 1000), filtered on `instance-type` to the accelerated families (ZONE_TYPES:
  `p*`, `g*`, `trn*`, ... wildcards, the GPU families of providers/aws/parse.py by their
  letters, so a new family of them is in): the zones of the region that offer each GPU
  type (`type_zones`, for `shoal offers` and the failover over zones). Only those: every
  type of us-east-1 is some 5,700 (type, zone) pairs, six pages asked one after the
  other, which every account fetch (each `alloc` after a launch) would wait on; a GPU
  type's zones are where they differ most. Zones are a help, not the capacity: a refusal
  or failure of this call leaves them unknown (`zones_unknown` says why), the rest stands.

An API that refuses the request (401/403, AccessDenied, UnauthorizedOperation) leaves its
part unknown and says which permission would fill it; only when every API of every region
refused is it a CredentialsError (77). Anything else (unreachable, throttled past the
retries, a malformed answer) fails the region, and so the fetch, with its one-line error.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.accounts.model import (
    AccountSnapshot,
    InstanceUsage,
    Quota,
    Reservation,
    sound_quotas,
)
from providers.accounts.parallel import run_all
from providers.aws.account_parse import (
    DEFAULTS,
    INSTANCES,
    KEPT_STATES,
    OFFERINGS,
    QUOTAS,
    RESERVATIONS,
    TYPES,
    Shape,
    offerings,
    quota_page,
    reservations,
    running,
    shapes,
)
from providers.aws.api import Endpoint, Refused, aws_http, items, text
from providers.aws.credentials import AwsCredentials, find_credentials
from providers.aws.families import BY_CODE, family_gpu, quota_gpus, vcpu_quota
from providers.aws.parse import GPU_FAMILIES
from providers.config import base_url, setting
from providers.core.env import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_EC2_URL,
    ENV_AWS_PROFILE,
    ENV_AWS_QUOTAS_URL,
    ENV_AWS_REGION,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_AWS_SESSION_TOKEN,
)
from providers.core.errors import CredentialsError, ShoalError
from providers.core.urls import display

if TYPE_CHECKING:
    import httpx

    from providers.aws.payloads import ServiceQuota
    from providers.cloud.http import CloudHttp, RetryPolicy
    from providers.core.settings import Settings

PROVIDER = "aws"
DEFAULT_REGION = "us-east-1"
DEFAULT_EC2_URL = "https://ec2.{region}.amazonaws.com"
DEFAULT_QUOTAS_URL = "https://servicequotas.{region}.amazonaws.com"
QUOTAS_TARGET = "ServiceQuotasV20190624."
PAGE_SIZE = 1000  # DescribeInstances and DescribeCapacityReservations: at most 1000
QUOTA_PAGE_SIZE = 100  # ListServiceQuotas: at most 100
OFFERINGS_PAGE_SIZE = 1000  # DescribeInstanceTypeOfferings: 5 to 1000
TYPES_PER_CALL = 100


def _zone_types() -> tuple[str, ...]:
    """The GPU families' letters as EC2 wildcards: p5 -> `p*`; gr6's `gr` is in `g*`."""
    letters = {re.sub(r"[^a-z].*", "", name) for name in GPU_FAMILIES}
    kept = {a for a in letters if not any(a != b and a.startswith(b) for b in letters)}
    return tuple(sorted(f"{a}*" for a in kept))


ZONE_TYPES = _zone_types()  # the instance types whose zones are asked
_REGION = re.compile(r"^[a-z]{2}(-[a-z0-9]+)+-\d+$")
MAX_QUOTA = 1e15  # past any real quota, as providers/core/payload.py caps amounts
CREDENTIALS_HINT = (
    f"set {ENV_AWS_ACCESS_KEY_ID} and {ENV_AWS_SECRET_ACCESS_KEY} (and {ENV_AWS_SESSION_TOKEN} "
    f"for temporary credentials), or {ENV_AWS_PROFILE} to a profile of ~/.aws/credentials"
)
REFUSED_HINT = (
    f"EC2 refused the AWS credentials; check {ENV_AWS_ACCESS_KEY_ID} and "
    f"{ENV_AWS_SECRET_ACCESS_KEY} (and {ENV_AWS_SESSION_TOKEN}), or the profile "
    f"{ENV_AWS_PROFILE} names"
)
# What each API's answer fills, and the permission it takes: for the notes.
PERMISSION = {
    QUOTAS: "servicequotas:ListServiceQuotas",
    DEFAULTS: "servicequotas:ListAWSDefaultServiceQuotas",
    INSTANCES: "ec2:DescribeInstances",
    RESERVATIONS: "ec2:DescribeCapacityReservations",
    TYPES: "ec2:DescribeInstanceTypes",
    OFFERINGS: "ec2:DescribeInstanceTypeOfferings",
}
UNKNOWN = {
    QUOTAS: "quotas unknown",
    DEFAULTS: "quotas left at their default value may be missing",
    INSTANCES: "usage unknown",
    RESERVATIONS: "capacity reservations unknown",
    TYPES: "vCPUs and GPUs of the instance types unknown",
}


@dataclass
class _Region:
    """One region's answers, each an API's data or the Refused that stood for it."""

    name: str
    answers: dict[str, Any] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def refused(self, api: str) -> Refused | None:
        answer = self.answers.get(api)
        return answer if isinstance(answer, Refused) else None

    def note_refused(self, api: str, what: str = "") -> None:
        refusal = self.refused(api)
        if refusal is not None:
            self.notes.append(
                f"{what or UNKNOWN[api]}: {api} was refused in {self.name} ({refusal.code}); "
                f"grant {PERMISSION[api]}"
            )


class AwsAccounts:
    """EC2 capacity of the account the credentials belong to (`account`: their access key
    id, which names the account without being a secret)."""

    provider = PROVIDER

    def __init__(
        self,
        found: AwsCredentials,
        *,
        ec2_url: str = DEFAULT_EC2_URL,
        quotas_url: str = DEFAULT_QUOTAS_URL,
        default_region: str = DEFAULT_REGION,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.credentials = found.credentials
        self.account = found.credentials.access_key_id
        self.ec2_url = ec2_url.rstrip("/")
        self.quotas_url = quotas_url.rstrip("/")
        self.default_region = default_region
        self.policy = policy
        self.transport = transport
        self.now = now
        self.page_size = page_size

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        home: Path | None = None,
    ) -> AwsAccounts:
        """Credentials as the AWS CLI finds them (CredentialsError, 77, when there are
        none); endpoints from SHOAL_AWS_EC2_URL / SHOAL_AWS_QUOTAS_URL or `[aws] ec2_url` /
        `quotas_url`; the region asked for the region list: `[aws] default_region`,
        AWS_REGION, AWS_DEFAULT_REGION, the profile's region, else us-east-1."""
        found = find_credentials(settings.env, home=home)
        if found is None:
            raise CredentialsError(
                f"aws: account capacity needs AWS credentials; {CREDENTIALS_HINT}"
            )
        ec2 = base_url(settings, PROVIDER, "ec2_url", ENV_AWS_EC2_URL, DEFAULT_EC2_URL)
        quotas = base_url(settings, PROVIDER, "quotas_url", ENV_AWS_QUOTAS_URL, DEFAULT_QUOTAS_URL)
        region = (
            setting(settings, PROVIDER, "default_region", "", "")
            or settings.env.get(ENV_AWS_REGION, "").strip()
            or settings.env.get(ENV_AWS_DEFAULT_REGION, "").strip()
            or found.region
            or DEFAULT_REGION
        )
        return cls(
            found,
            ec2_url=ec2,
            quotas_url=quotas,
            default_region=region,
            policy=policy,
            transport=transport,
        )

    # -- requests ------------------------------------------------------------------------

    def _http(self, *, refusals: bool) -> CloudHttp:
        return aws_http(
            PROVIDER,
            auth_hint=REFUSED_HINT,
            credentials=self.credentials,
            policy=self.policy,
            transport=self.transport,
            refusals=refusals,
        )

    def _ec2(self, region: str, *, refusals: bool = True) -> Endpoint:
        url = self.ec2_url.replace("{region}", region)
        return Endpoint(
            self._http(refusals=refusals), url, region, "ec2", self.credentials, self.now
        )

    def _quotas(self, region: str) -> Endpoint:
        url = self.quotas_url.replace("{region}", region)
        http = self._http(refusals=True)
        return Endpoint(http, url, region, "servicequotas", self.credentials, self.now)

    def regions(self) -> list[str]:
        """The regions enabled for the account (EC2 DescribeRegions in the default region)."""
        api = self._ec2(self.default_region, refusals=False)
        try:
            root = api.query("DescribeRegions")
        finally:
            api.http.close()
        names = [text(item, "regionName") for item in items(root, "regionInfo")]
        # A region name goes into a host: one shaped otherwise is a hostile answer, left out.
        return sorted(name for name in names if name and _REGION.match(name))

    def fetch(self, regions: Sequence[str]) -> list[AccountSnapshot]:
        """One snapshot per region, in order; the first region that failed raises."""
        fetched_at = self.now()
        states = [_Region(name) for name in dict.fromkeys(regions)]
        apis = (QUOTAS, DEFAULTS, INSTANCES, RESERVATIONS)
        calls = [self._call(state.name, api) for state in states for api in apis]
        calls += [self._call(state.name, OFFERINGS) for state in states]
        results = run_all(calls)
        capacity = results[: len(states) * len(apis)]
        for index, result in enumerate(capacity):
            state, api = states[index // len(apis)], apis[index % len(apis)]
            state.answers[api] = result
        for state, result in zip(states, results[len(capacity) :], strict=True):
            state.answers[OFFERINGS] = result
        _raise_if_all_refused(capacity)  # zones alone do not make the credentials good
        for state in states:
            _raise_failure(state, apis)
        shapes = run_all([self._call(s.name, TYPES, _types_wanted(s)) for s in states])
        for state, result in zip(states, shapes, strict=True):
            state.answers[TYPES] = result
            _raise_failure(state, (TYPES,))
        return [self._snapshot(state, fetched_at) for state in states]

    def _call(self, region: str, api: str, types: Sequence[str] = ()) -> Callable[[], Any]:
        def call() -> Any:
            if api == TYPES and not types:
                return {}
            endpoint = self._quotas(region) if api in (QUOTAS, DEFAULTS) else self._ec2(region)
            try:
                return self._ask(endpoint, api, types)
            except Refused as exc:
                return exc
            finally:
                endpoint.http.close()

        return call

    def _ask(self, endpoint: Endpoint, api: str, types: Sequence[str]) -> Any:
        if api in (QUOTAS, DEFAULTS):
            body = {"ServiceCode": "ec2", "MaxResults": QUOTA_PAGE_SIZE}
            secrets = [self.credentials.secret_access_key, self.credentials.session_token]
            read = functools.partial(quota_page, api=api, where=PROVIDER, secrets=secrets)
            pages = endpoint.json_pages(QUOTAS_TARGET + api, body, read)
            return [quota for page in pages for quota in page]
        if api == INSTANCES:
            params = {
                "Filter.1.Name": "instance-state-name",
                "Filter.1.Value.1": "pending",
                "Filter.1.Value.2": "running",
                "MaxResults": str(self.page_size),
            }
            return running(endpoint.query_pages(api, params))
        if api == RESERVATIONS:
            params = {"MaxResults": str(self.page_size), "Filter.1.Name": "state"}
            params.update({f"Filter.1.Value.{n}": s for n, s in enumerate(KEPT_STATES, 1)})
            return [r for root in endpoint.query_pages(api, params) for r in reservations(root)]
        if api == OFFERINGS:
            params = {
                "LocationType": "availability-zone",
                "MaxResults": str(OFFERINGS_PAGE_SIZE),
                "Filter.1.Name": "instance-type",
            }
            params.update({f"Filter.1.Value.{n}": p for n, p in enumerate(ZONE_TYPES, 1)})
            zones: dict[str, set[str]] = {}
            for root in endpoint.query_pages(api, params):
                offerings(root, endpoint.region, zones)
            return zones
        found: dict[str, Shape] = {}
        for start in range(0, len(types), TYPES_PER_CALL):
            chunk = types[start : start + TYPES_PER_CALL]
            params = {f"InstanceType.{n}": name for n, name in enumerate(chunk, 1)}
            for root in endpoint.query_pages(api, params):
                found.update(shapes(root))
        return found

    # -- one region's snapshot -----------------------------------------------------------

    def _snapshot(self, state: _Region, fetched_at: datetime) -> AccountSnapshot:
        region = state.name
        for api in (QUOTAS, DEFAULTS, INSTANCES, RESERVATIONS):
            if state.refused(api) is None:
                base = self.quotas_url if api in (QUOTAS, DEFAULTS) else self.ec2_url
                state.sources.append(f"{display(base.replace('{region}', region))} {api}")
        known: dict[str, Shape] = {}
        if isinstance(state.answers[TYPES], dict):
            known = state.answers[TYPES]
            if _types_wanted(state):
                state.sources.append(f"{display(self.ec2_url.replace('{region}', region))} {TYPES}")
        usage = _usage(state, known)
        quotas = _quotas(state, usage)
        state.note_refused(RESERVATIONS)
        state.note_refused(TYPES)
        held = _with_shapes(state.answers[RESERVATIONS], known, fetched_at)
        type_zones, zones_unknown = _type_zones(state)
        return AccountSnapshot(
            provider=PROVIDER,
            region=region,
            fetched_at=fetched_at,
            quotas=quotas,
            usage=usage,
            reservations=held,
            sources=state.sources,
            notes=state.notes,
            type_zones=type_zones,
            zones_cover=list(ZONE_TYPES) if type_zones is not None else [],
            zones_unknown=zones_unknown,
        )


# -- what the answers become ---------------------------------------------------------------


def _raise_if_all_refused(results: Sequence[object]) -> None:
    refusals = [r for r in results if isinstance(r, Refused)]
    if results and len(refusals) == len(results):
        codes = ", ".join(sorted({r.code for r in refusals}))
        raise CredentialsError(
            f"aws: every API refused the credentials ({codes}); check them ({CREDENTIALS_HINT}) "
            f"and that they may call {', '.join(PERMISSION[a] for a in PERMISSION)}"
        )


def _raise_failure(state: _Region, apis: Sequence[str]) -> None:
    """The first answer of `apis` that is an error other than a refusal, raised with the
    region and API it came from."""
    for api in apis:
        answer = state.answers.get(api)
        if not isinstance(answer, Exception) or isinstance(answer, Refused):
            continue
        if not isinstance(answer, ShoalError):
            raise answer  # a bug: its traceback
        message = str(answer).removeprefix(f"{PROVIDER}: ")
        message = f"{PROVIDER}: {state.name} {api}: {message}"
        try:
            error = type(answer)(message)
        except TypeError:  # a subclass built from other arguments
            error = ShoalError(message)
        raise error from None


def _type_zones(state: _Region) -> tuple[dict[str, list[str]] | None, str]:
    """(instance type -> the zones that offer it, or None; why they are unknown, or "")."""
    answer, region = state.answers.get(OFFERINGS), state.name
    if isinstance(answer, dict):
        found = {name: sorted(zones) for name, zones in sorted(answer.items())}
        return found, f"aws lists the zones of its GPU types only ({', '.join(ZONE_TYPES)})"
    if isinstance(answer, Refused):
        return None, (
            f"{OFFERINGS} was refused in {region} ({answer.code}); grant {PERMISSION[OFFERINGS]}"
        )
    if isinstance(answer, ShoalError):
        return None, f"{OFFERINGS} failed in {region}: {str(answer).removeprefix('aws: ')}"
    if isinstance(answer, BaseException):
        raise answer  # a bug: its traceback
    return None, ""


def _types_wanted(state: _Region) -> list[str]:
    """The types whose vCPUs or GPUs the answers need (none when both lists were refused)."""
    wanted: set[str] = set()
    running = state.answers.get(INSTANCES)
    if isinstance(running, list):
        wanted.update(r.instance_type for r in running)
    reserved = state.answers.get(RESERVATIONS)
    if isinstance(reserved, list):
        wanted.update(r.instance_type for r in reserved)
    return sorted(t for t in wanted if t)


def _with_shapes(
    answer: object, shapes: Mapping[str, Shape], fetched_at: datetime
) -> list[Reservation]:
    """Reservations with their types' vCPUs and GPUs; a start already past is None."""
    if not isinstance(answer, list):
        return []
    for reservation in answer:
        shape = shapes.get(reservation.instance_type)
        reservation.vcpus = shape.vcpus if shape else None
        reservation.gpu = (shape.gpu if shape else "") or family_gpu(reservation.instance_type)
        reservation.gpus = shape.gpus if shape else 0
        if reservation.start is not None and reservation.start <= fetched_at:
            reservation.start = None
    return answer


def _usage(state: _Region, shapes: Mapping[str, Shape]) -> list[InstanceUsage]:
    running = state.answers[INSTANCES]
    if not isinstance(running, list):
        state.note_refused(INSTANCES)
        return []
    usage = []
    for group in running:
        shape = shapes.get(group.instance_type)
        quota = vcpu_quota(group.instance_type, group.market)
        usage.append(
            InstanceUsage(
                instance_type=group.instance_type,
                market=group.market,
                count=group.count,
                group=quota.group if quota is not None else "",
                zone=group.zone,
                vcpus=group.vcpus if group.vcpus is not None else (shape.vcpus if shape else None),
                gpu=(shape.gpu if shape else "") or family_gpu(group.instance_type),
                gpus=shape.gpus if shape else 0,
            )
        )
    return sorted(usage, key=lambda u: (u.instance_type, u.zone, u.market))


def _quotas(state: _Region, usage: list[InstanceUsage]) -> list[Quota]:
    """The applied quotas, AWS's defaults for the codes they leave out."""
    applied, defaults = state.answers[QUOTAS], state.answers[DEFAULTS]
    if isinstance(applied, list):
        state.note_refused(DEFAULTS)
    elif isinstance(defaults, list):
        state.note_refused(QUOTAS, "quota values are AWS's defaults, not the account's")
    else:
        state.note_refused(QUOTAS)
    listed: dict[str, list[ServiceQuota]] = {}
    for quota in defaults if isinstance(defaults, list) else []:
        listed.setdefault(quota["QuotaCode"], []).append(quota)
    from_defaults = set(listed) if isinstance(applied, list) else set()
    for quota in applied if isinstance(applied, list) else []:
        code = quota["QuotaCode"]
        if code in from_defaults:  # the applied value replaces the default
            listed[code] = []
            from_defaults.discard(code)
        listed.setdefault(code, []).append(quota)
    used = _used(usage) if isinstance(state.answers[INSTANCES], list) else {}
    quotas: list[Quota] = []
    skipped = 0
    for code, entry in ((c, e) for c, entries in sorted(listed.items()) for e in entries):
        value = _limit(entry.get("Value"))
        if value is None:
            skipped += 1
            continue
        known = BY_CODE.get(code)
        quotas.append(
            Quota(
                code=code,
                name=entry.get("QuotaName") or (known.name if known else code),
                group=known.group if known else "other",
                market=known.market if known else "onDemand",
                resource=("cpu", "vcpu") if known else ("quota", code),
                limit=value,
                used=used.get(code),
                scope="global" if entry.get("GlobalQuota") is True else "region",
                gpus=quota_gpus(code),
            )
        )
    defaulted = sorted(BY_CODE[c].name for c in from_defaults if c in BY_CODE)
    if defaulted:
        state.notes.append(
            f"{len(defaulted)} vCPU quota(s) at AWS's default value (ListServiceQuotas lists no "
            f"applied value for them): {', '.join(defaulted)}"
        )
    if skipped:
        state.notes.append(
            f"{skipped} ec2 quota(s) left out: their value is not a number from 0 to 1e15"
        )
    # A code listed twice (a page repeated) is one quota, not two to add up.
    quotas, fixed = sound_quotas(quotas)
    state.notes.extend(fixed)
    return quotas


def _limit(value: float | None) -> float | None:
    """A quota's value, or None: absent, not finite (`1e400` reads as infinity), negative or
    past any real quota (a hostile or broken answer)."""
    if value is None or not math.isfinite(value) or not 0 <= value <= MAX_QUOTA:
        return None
    return value


def _used(usage: list[InstanceUsage]) -> dict[str, float | None]:
    """vCPUs in use per known vCPU quota code; None where an instance's vCPUs are unknown."""
    used: dict[str, float | None] = dict.fromkeys(BY_CODE, 0.0)
    for item in usage:
        quota = vcpu_quota(item.instance_type, item.market)
        if quota is None:
            continue
        so_far = used[quota.code]
        if so_far is None or item.vcpus is None:
            used[quota.code] = None
        else:
            used[quota.code] = so_far + item.vcpus * item.count
    return used
