"""An Azure subscription's capacity: vCPU quotas per family and region, and capacity
reservations, as the provider-neutral records of providers/accounts/model.py.

APIs asked (Azure Resource Manager, bearer token in SHOAL_AZURE_TOKEN, subscription in
AZURE_SUBSCRIPTION_ID; every list is paged by `nextLink`):
- Subscriptions - List Locations (physical regions), api-version 2022-12-01:
  https://learn.microsoft.com/rest/api/resources/subscriptions/list-locations
- Usage - List, per region: `value[]` of {currentValue, limit, name: {value,
  localizedValue}, unit}, api-version 2023-07-01:
  https://learn.microsoft.com/rest/api/compute/usage/list
- Capacity Reservation Groups - List By Subscription (`location` is a display name in the
  documented sample, "West US", so it is compared without case and spaces), then per group
  in the regions asked Capacity Reservation Groups - Get with `$expand=instanceView`
  (`properties.instanceView.capacityReservations[]` of {name, utilizationInfo:
  {currentCapacity, virtualMachinesAllocated[]}}) and Capacity Reservations - List By
  Capacity Reservation Group (`sku` {name, capacity}, `zones`, `properties`
  {provisioningTime, timeCreated, provisioningState, scheduleProfile {start, end}}):
  https://learn.microsoft.com/rest/api/compute/capacity-reservation-groups/list-by-subscription
  https://learn.microsoft.com/rest/api/compute/capacity-reservation-groups/get
  https://learn.microsoft.com/rest/api/compute/capacity-reservations/list-by-capacity-reservation-group
  Payload shapes checked against the specification's examples (Azure/azure-rest-api-specs,
  Microsoft.Compute/ComputeRP/stable/2023-09-01/examples/capacityReservationExamples). The
  reservation calls use api-version 2025-04-01, the first that returns `scheduleProfile`
  and `reservationType` of Block capacity reservations (fixed windows of GPU capacity):
  https://learn.microsoft.com/rest/api/compute/capacity-reservations/get
  (ScheduleProfile: "Minimum API version: 2025-04-01", https://aka.ms/blockcapacityreservation).

Usage per VM size is not in these APIs: the family quotas' `currentValue` are the vCPUs in
use, so `usage` stays empty. A refused capacity reservation call is a note (the quotas are
still right); a refused usage call is a CredentialsError (77).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from providers import gpus
from providers.accounts.model import AccountSnapshot, Quota, Reservation
from providers.accounts.parallel import run_all
from providers.azure import parse, sizes
from providers.azure.fetch import DEFAULT_MANAGEMENT_URL, LOCATIONS_API_VERSION, next_url
from providers.azure.quota_map import REGIONAL, SPOT, family_key, gpus_of_family
from providers.cloud.http import CloudHttp, RetryPolicy
from providers.config import base_url, setting
from providers.core.env import (
    ENV_AZURE_MANAGEMENT_URL,
    ENV_AZURE_SUBSCRIPTION_ID,
    ENV_AZURE_TOKEN,
)
from providers.core.errors import CredentialsError, ShoalError, scrub, shown
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.urls import display
from providers.models import RegionSpec
from providers.regions import check_region

if TYPE_CHECKING:
    import httpx

PROVIDER = "azure"
USAGES_API_VERSION = "2023-07-01"
RESERVATIONS_API_VERSION = "2025-04-01"
MAX_PAGES = 200  # a region's usages are one or two pages; a server looping links is a bug
MAX_NUMBER = 1e15  # past any quota Azure has: a larger count is a broken payload
USAGES_PATH = "/providers/Microsoft.Compute/locations/{location}/usages"
GROUPS_PATH = "/providers/Microsoft.Compute/capacityReservationGroups"
READ_GROUPS = "Microsoft.Compute/capacityReservationGroups/read"
READ_RESERVATIONS = "Microsoft.Compute/capacityReservationGroups/capacityReservations/read"
AUTH_HINT = (
    f"set {ENV_AZURE_TOKEN} to a valid bearer token for Azure Resource Manager "
    f"(`az account get-access-token --query accessToken -o tsv`) and "
    f"{ENV_AZURE_SUBSCRIPTION_ID} to a subscription it may read (the Reader role covers "
    f"Microsoft.Compute/locations/usages/read)"
)
# A group's resource id, as ARM returns it: the path of its Get.
_GROUP_ID = re.compile(
    r"/subscriptions/[^/?#]+/resourceGroups/[^/?#]+/providers/Microsoft\.Compute/"
    r"capacityReservationGroups/[^/?#]+",
    re.IGNORECASE,
)
_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:\d{2})?)?"
)


class AzureAccounts:
    """AccountFetcher for Azure: `account` is the subscription id."""

    provider = PROVIDER

    def __init__(
        self,
        *,
        token: str,
        subscription: str,
        management_url: str = DEFAULT_MANAGEMENT_URL,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        max_pages: int = MAX_PAGES,
    ) -> None:
        self.token = token
        self.account = subscription
        self.management_url = management_url.rstrip("/")
        self.policy = policy
        self.transport = transport
        self.max_pages = max_pages
        self._locations: dict[str, RegionSpec] | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> AzureAccounts:
        token = settings.env.get(ENV_AZURE_TOKEN, "").strip()
        subscription = setting(settings, PROVIDER, "subscription_id", ENV_AZURE_SUBSCRIPTION_ID)
        missing = [
            name
            for name, value in ((ENV_AZURE_TOKEN, token), (ENV_AZURE_SUBSCRIPTION_ID, subscription))
            if not value.strip()
        ]
        if missing:
            raise CredentialsError(
                f"azure: a subscription's quotas need {' and '.join(missing)}; set "
                f"{ENV_AZURE_TOKEN} to a bearer token for Azure Resource Manager (`az account "
                f"get-access-token --query accessToken -o tsv`) and {ENV_AZURE_SUBSCRIPTION_ID} "
                f"(or [azure] subscription_id) to the subscription id"
            )
        return cls(
            token=token,
            subscription=subscription.strip(),
            management_url=base_url(
                settings,
                PROVIDER,
                "management_url",
                ENV_AZURE_MANAGEMENT_URL,
                DEFAULT_MANAGEMENT_URL,
            ),
            policy=policy,
            transport=transport,
        )

    # -- plumbing ----------------------------------------------------------------------

    def _http(self) -> CloudHttp:
        """A client of its own for each call: HttpClient is not thread-safe."""
        return CloudHttp(
            PROVIDER,
            auth_hint=AUTH_HINT,
            secrets=[self.token],
            policy=self.policy,
            transport=self.transport,
        )

    def _url(self, tail: str) -> str:
        return f"{self.management_url}/subscriptions/{quote(self.account, safe='')}{tail}"

    @contextmanager
    def _scrubbed(self) -> Iterator[None]:
        """Errors raised inside quote what a server sent: never with the token in it."""
        try:
            yield
        except ShoalError as exc:
            exc.args = (scrub(str(exc), [self.token]),)
            raise

    def _walk(self, url: str, params: Mapping[str, str], page: Callable[[Any, str], str]) -> None:
        """GET `url` and every `nextLink` after it; `page(payload, where)` reads one page
        and returns its next link ("" at the end)."""
        http = self._http()
        headers = {"Authorization": f"Bearer {self.token}"}
        seen = {url}
        query: Mapping[str, str] | None = params
        try:
            with self._scrubbed():
                for _ in range(self.max_pages):
                    where = f"{PROVIDER}: {display(url)}"
                    link = page(http.get_json(url, params=query, headers=headers), where)
                    if not link:
                        return
                    try:
                        url, query = next_url(link, self.management_url), None
                    except ShoalError:
                        raise ShoalError(f"{where}: nextLink is not a URL") from None
                    if url in seen:
                        raise ShoalError(f"{where}: the nextLink repeats ({display(url)}); stopped")
                    seen.add(url)
                raise ShoalError(
                    f"{PROVIDER}: {display(url)}: more than {self.max_pages} pages; stopped "
                    "(the server keeps sending next links)"
                )
        finally:
            http.close()

    # -- AccountFetcher ----------------------------------------------------------------

    def regions(self) -> list[str]:
        """The subscription's physical regions (Subscriptions - List Locations)."""
        return sorted(self._region_specs())

    def _region_specs(self) -> dict[str, RegionSpec]:
        if self._locations is None:
            found: list[RegionSpec] = []

            def page(payload: Any, where: str) -> str:
                regions, link = parse.locations_page(payload, where)
                found.extend(regions)
                return link or ""

            self._walk(self._url("/locations"), {"api-version": LOCATIONS_API_VERSION}, page)
            self._locations = {r.name: r for r in found}
        return self._locations

    def fetch(self, regions: Sequence[str]) -> list[AccountSnapshot]:
        fetched_at = utcnow()
        asked = list(dict.fromkeys(regions))
        if self._locations is not None:  # regions() was asked: a typo is a usage error
            asked = [check_region(PROVIDER, r, sorted(self._locations)) for r in asked]
        calls: list[Callable[[], Any]] = [partial(self._usages, region) for region in asked]
        calls.append(self._groups)
        results = run_all(calls)
        usages: list[list[Quota]] = []
        for result in results[:-1]:
            if isinstance(result, Exception):
                raise result
            usages.append(result)
        notes: list[str] = []  # for every region
        found: dict[str, Found] = {}
        groups = results[-1]
        if isinstance(groups, CredentialsError):
            notes.append(
                f"reservations unknown: the capacity reservation groups list was refused; "
                f"grant {READ_GROUPS}"
            )
        elif isinstance(groups, Exception):
            raise groups
        else:
            wanted = {_place(r) for r in asked}
            found = self._reservations([g for g in groups if g.location in wanted], fetched_at)
        known = self._locations or {}
        sources = [
            f"Azure Compute Usage API ({display(self.management_url)}, "
            f"api-version {USAGES_API_VERSION})",
            f"Azure Capacity Reservations API ({display(self.management_url)}, "
            f"api-version {RESERVATIONS_API_VERSION})",
        ]
        snapshots = []
        for region, quotas in zip(asked, usages, strict=True):
            spec = known.get(region)
            held, more = found.get(_place(region), ([], []))
            snapshots.append(
                AccountSnapshot(
                    provider=PROVIDER,
                    region=region,
                    fetched_at=fetched_at,
                    quotas=quotas,
                    reservations=held,
                    sources=list(sources),
                    notes=[scrub(n, [self.token]) for n in notes + more],
                    location=spec.location if spec else "",
                    zones=list(spec.zones) if spec else [],
                )
            )
        return snapshots

    # -- quotas ------------------------------------------------------------------------

    def _usages(self, region: str) -> list[Quota]:
        quotas: list[Quota] = []

        def page(payload: Any, where: str) -> str:
            for item in _items(payload, where):
                quotas.append(usage_quota(item, where))
            return _next_link(payload, where)

        url = self._url(USAGES_PATH.format(location=quote(region, safe="")))
        self._walk(url, {"api-version": USAGES_API_VERSION}, page)
        return quotas

    # -- capacity reservations ---------------------------------------------------------

    def _groups(self) -> list[Group]:
        groups: list[Group] = []

        def page(payload: Any, where: str) -> str:
            for item in _items(payload, where):
                groups.append(read_group(item, where))
            return _next_link(payload, where)

        self._walk(self._url(GROUPS_PATH), {"api-version": RESERVATIONS_API_VERSION}, page)
        return groups

    def _group_view(self, group: Group) -> dict[str, Utilization]:
        http = self._http()
        url = self.management_url + group.path
        try:
            with self._scrubbed():
                payload = http.get_json(
                    url,
                    params={"api-version": RESERVATIONS_API_VERSION, "$expand": "instanceView"},
                    headers={"Authorization": f"Bearer {self.token}"},
                )
                return group_utilization(payload, f"{PROVIDER}: {display(url)}")
        finally:
            http.close()

    def _group_reservations(self, group: Group) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []

        def page(payload: Any, where: str) -> str:
            for item in _items(payload, where):
                if not isinstance(item, dict):
                    raise _malformed(where, f"a capacity reservation is {_kind(item)}")
                items.append(item)
            return _next_link(payload, where)

        url = self.management_url + group.path + "/capacityReservations"
        self._walk(url, {"api-version": RESERVATIONS_API_VERSION}, page)
        return items

    def _reservations(self, groups: list[Group], now: datetime) -> dict[str, Found]:
        """Location (as `_place` writes it) -> its reservations and the notes on them."""
        calls: list[Callable[[], Any]] = []
        for group in groups:
            calls.append(partial(self._group_view, group))
            calls.append(partial(self._group_reservations, group))
        results = run_all(calls)
        found: dict[str, Found] = {}
        for index, group in enumerate(groups):
            view, listed = results[2 * index], results[2 * index + 1]
            held, notes = found.setdefault(group.location, ([], []))
            if isinstance(listed, CredentialsError):
                notes.append(
                    f"reservations of capacity reservation group {group.name} unknown: its "
                    f"capacity reservations list was refused; grant {READ_RESERVATIONS}"
                )
                continue
            if isinstance(listed, Exception):
                raise listed
            utilization: dict[str, Utilization] = {}
            if isinstance(view, CredentialsError):
                notes.append(
                    f"capacity reservation group {group.name}: its instance view was refused, "
                    f"so VMs on its reservations are counted from the VMs associated with "
                    f"them; grant {READ_GROUPS}"
                )
            elif isinstance(view, Exception):
                raise view
            else:
                utilization = view
            where = f"{PROVIDER}: capacity reservation group {group.name}"
            with self._scrubbed():
                for item in listed:
                    reservation, note = read_reservation(item, group, utilization, where, now)
                    held.append(reservation)
                    if note:
                        notes.append(note)
        return found


# -- payloads: pure functions ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Group:
    """A capacity reservation group: its name, location (as `_place` writes it), ARM path
    and whether it holds Block reservations (fixed windows)."""

    name: str
    location: str
    path: str
    block: bool


Utilization = tuple[float | None, int]  # (currentCapacity, VMs allocated)
Found = tuple[list[Reservation], list[str]]  # a location's reservations, notes on them


def _malformed(where: str, what: str) -> ShoalError:
    return ShoalError(f"{where}: malformed payload ({what}); nothing was cached from it")


def _kind(value: Any) -> str:
    return f"{type(value).__name__}, not an object"


def _items(payload: Any, where: str) -> list[Any]:
    if not isinstance(payload, dict):
        raise _malformed(where, f"the answer is {_kind(payload)}")
    items = payload.get("value")
    if not isinstance(items, list):
        raise _malformed(where, "value is missing or not a list")
    return items


def _next_link(payload: dict[str, Any], where: str) -> str:
    link = payload.get("nextLink")
    if link is None:
        return ""
    if not isinstance(link, str):
        raise _malformed(where, f"nextLink is {shown(link)}, not a string")
    return link


def _text(item: Mapping[str, Any], key: str, where: str) -> str:
    value = item.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _malformed(where, f"{key} is {shown(value)}, not a string")
    return value


def number(value: Any, field: str, where: str) -> float:
    """A count from a payload: a JSON number or a decimal string, finite and below
    MAX_NUMBER; anything else (true, "NaN", 1e400, NaN) is a malformed payload."""
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}(?:\.\d{1,20})?", value.strip()):
        value = float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _malformed(where, f"{field} is {shown(value)}, not a number")
    try:
        result = float(value)
    except OverflowError:
        result = math.inf
    if not math.isfinite(result) or abs(result) > MAX_NUMBER:
        raise _malformed(where, f"{field} is {shown(value)}, not a usable number")
    return result


def timestamp(value: Any, field: str, where: str) -> datetime | None:
    """An ISO 8601 time (`2021-06-27T01:02:38.3138469+00:00`; an offset-less one is UTC) or
    date (`2025-06-27`: midnight UTC); None when absent."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not _TIME.fullmatch(value.strip()):
        raise _malformed(where, f"{field} is {shown(value)}, not a time")
    text = value.strip()
    # Python 3.11 reads at most 6 fractional digits; Azure writes 7.
    text = re.sub(r"(\.\d{6})\d+", r"\1", text)
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise _malformed(where, f"{field} is {shown(value)}, not a time") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _place(location: str) -> str:
    """A location as compared: `West US` and `westus` are one region."""
    return "".join(location.split()).lower()


def usage_quota(item: Any, where: str) -> Quota:
    """One Usage entry as a Quota: `cores` the regional vCPUs, `lowPriorityCores` the Spot
    vCPUs, a `...Family` entry a family's vCPUs (with the family's GPU models), anything
    else kept as ("quota", name) in group "other"."""
    if not isinstance(item, dict):
        raise _malformed(where, f"a usage is {_kind(item)}")
    names = item.get("name")
    if not isinstance(names, dict):
        raise _malformed(where, "a usage has no name object")
    code = _text(names, "value", where)
    if not code:
        raise _malformed(where, "a usage has no name.value")
    label = _text(names, "localizedValue", where) or code
    limit = number(item.get("limit"), f"{code}: limit", where)
    used = number(item.get("currentValue"), f"{code}: currentValue", where)
    key = family_key(code)
    if key == family_key(REGIONAL):
        return Quota(code, label, "regional", "onDemand", ("cpu", "vcpu"), limit, used)
    if key == family_key(SPOT):
        return Quota(code, label, "regional", "spot", ("cpu", "vcpu"), limit, used)
    if key.endswith("family"):
        gpu_models = gpus_of_family(code)
        return Quota(code, label, code, "onDemand", ("cpu", "vcpu"), limit, used, gpus=gpu_models)
    return Quota(code, label, "other", "onDemand", ("quota", code), limit, used)


def read_group(item: Any, where: str) -> Group:
    """A group of the subscription list (its id must be a group's path: it is asked)."""
    if not isinstance(item, dict):
        raise _malformed(where, f"a capacity reservation group is {_kind(item)}")
    path = _text(item, "id", where)
    if not _GROUP_ID.fullmatch(path):
        raise _malformed(where, f"a capacity reservation group's id is {shown(path)}")
    name = _text(item, "name", where) or path.rsplit("/", 1)[-1]
    properties = item.get("properties") or {}
    if not isinstance(properties, dict):
        raise _malformed(where, f"group {name}: properties is {_kind(properties)}")
    block = _text(properties, "reservationType", where).lower() == "block"
    path = "/".join(quote(part, safe="()-._~") for part in path.split("/"))
    return Group(name, _place(_text(item, "location", where)), path, block)


def group_utilization(payload: Any, where: str) -> dict[str, Utilization]:
    """Capacity reservation name (lower-cased) -> (currentCapacity, VMs allocated), from a
    group read with `$expand=instanceView`."""
    if not isinstance(payload, dict):
        raise _malformed(where, f"the answer is {_kind(payload)}")
    properties = payload.get("properties") or {}
    view = properties.get("instanceView") if isinstance(properties, dict) else None
    if view is None:
        return {}
    entries = view.get("capacityReservations") if isinstance(view, dict) else None
    if not isinstance(entries, list):
        raise _malformed(where, "instanceView.capacityReservations is not a list")
    found: dict[str, Utilization] = {}
    for entry in entries:
        if not isinstance(entry, dict):
            raise _malformed(where, f"a reservation's instance view is {_kind(entry)}")
        name = _text(entry, "name", where)
        info = entry.get("utilizationInfo")
        if name and isinstance(info, dict):
            found[name.lower()] = _utilization(info, f"{where}: {name}")
    return found


def _utilization(info: Mapping[str, Any], where: str) -> Utilization:
    current = info.get("currentCapacity")
    capacity = None if current is None else number(current, "currentCapacity", where)
    allocated = info.get("virtualMachinesAllocated") or []
    if not isinstance(allocated, list):
        raise _malformed(where, "virtualMachinesAllocated is not a list")
    return capacity, len(allocated)


def read_reservation(
    item: dict[str, Any],
    group: Group,
    utilization: Mapping[str, Utilization],
    where: str,
    now: datetime,
) -> tuple[Reservation, str]:
    """One capacity reservation as a Reservation, and a note when its use is only
    estimated. `total` is what Azure has reserved (`currentCapacity`, else `sku.capacity`;
    for a window that starts after `now`, `sku.capacity`), `available` that less the VMs
    allocated on it."""
    name = _text(item, "name", where)
    where = f"{where}: {name}"
    sku = item.get("sku")
    if not isinstance(sku, dict):
        raise _malformed(where, "sku is missing")
    size = _text(sku, "name", where)
    capacity = number(sku.get("capacity", 0), "sku.capacity", where)
    properties = item.get("properties") or {}
    if not isinstance(properties, dict):
        raise _malformed(where, f"properties is {_kind(properties)}")
    own = properties.get("instanceView")
    info = own.get("utilizationInfo") if isinstance(own, dict) else None
    used = _utilization(info, where) if isinstance(info, dict) else utilization.get(name.lower())
    note = ""
    if used is None:
        associated = properties.get("virtualMachinesAssociated") or []
        if not isinstance(associated, list):
            raise _malformed(where, "virtualMachinesAssociated is not a list")
        used = (None, len(associated))
        note = (
            f"capacity reservation {group.name}/{name}: no utilization in its instance view; "
            f"its {len(associated)} associated VMs are counted as using it"
        )
    schedule = properties.get("scheduleProfile") or {}
    if not isinstance(schedule, dict):
        raise _malformed(where, f"scheduleProfile is {_kind(schedule)}")
    end = timestamp(schedule.get("end"), "scheduleProfile.end", where)
    start = timestamp(schedule.get("start"), "scheduleProfile.start", where) or timestamp(
        properties.get("provisioningTime") or properties.get("timeCreated"),
        "provisioningTime",
        where,
    )
    ahead = start is not None and start > now  # nothing reserved or allocated yet
    total = int(capacity if ahead or used[0] is None else used[0])
    allocated = 0 if ahead else used[1]
    zones = item.get("zones") or []
    zone = str(zones[0]) if isinstance(zones, list) and zones else ""
    vcpus, gpu, gpu_count = _shape(size)
    reservation = Reservation(
        id=f"{group.name}/{name}",
        kind="capacity-block" if group.block or end is not None else "capacity-reservation",
        instance_type=size,
        total=total,
        available=max(0, total - allocated),
        start=start,
        end=end,
        zone=zone,
        state=_text(properties, "provisioningState", where),
        vcpus=vcpus,
        gpu=gpu,
        gpus=gpu_count,
    )
    return reservation, note


def _shape(size: str) -> tuple[float | None, str, int]:
    """(vCPUs, GPU model, GPU count) of a size: shoal's size table, else its name."""
    row = sizes.table().get(size)
    if row is not None:
        return row.vcpus, row.gpu, row.gpu_count
    shape = parse.shape_from_name(size)
    return shape.vcpus or None, gpus.model(shape.gpu) if shape.gpu else "", shape.gpu_count
