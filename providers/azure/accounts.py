"""An Azure subscription's capacity: vCPU quotas per family and region, and capacity
reservations, as the provider-neutral records of providers/accounts/model.py.

APIs asked (Azure Resource Manager, with credentials and a subscription as credentials.py
finds them; every list is paged by `nextLink`):
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

The requests, their concurrency and what a refusal means are here; reading the pages is
account_parse.py's. Usage per VM size is not in these APIs, so `usage` stays empty. A
refused capacity reservation call is a note (the quotas are still right); a refused usage
call is a CredentialsError (77).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from providers.accounts.model import AccountSnapshot, Quota, Reservation, sound_quotas
from providers.accounts.parallel import run_all
from providers.azure import parse
from providers.azure.account_parse import (
    Group,
    Utilization,
    group_utilization,
    groups_page,
    place,
    read_reservation,
    reservations_page,
    usages_page,
)
from providers.azure.fetch import DEFAULT_MANAGEMENT_URL, LOCATIONS_API_VERSION, next_url
from providers.cloud.bearer import BearerApi
from providers.cloud.http import RetryPolicy
from providers.config import base_url
from providers.core.env import (
    ENV_AZURE_MANAGEMENT_URL,
    ENV_AZURE_SUBSCRIPTION_ID,
    ENV_AZURE_TOKEN,
)
from providers.core.errors import CredentialsError, ShoalError, one_line
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.urls import display
from providers.models import RegionSpec
from providers.regions import check_region

if TYPE_CHECKING:
    import httpx

    from providers.azure.payloads import CapacityReservation

PROVIDER = "azure"
USAGES_API_VERSION = "2023-07-01"
RESERVATIONS_API_VERSION = "2025-04-01"
MAX_PAGES = 200  # a region's usages are one or two pages; a server looping links is a bug
USAGES_PATH = "/providers/Microsoft.Compute/locations/{location}/usages"
GROUPS_PATH = "/providers/Microsoft.Compute/capacityReservationGroups"
READ_GROUPS = "Microsoft.Compute/capacityReservationGroups/read"
READ_RESERVATIONS = "Microsoft.Compute/capacityReservationGroups/capacityReservations/read"
PERMISSIONS = (
    f"the Reader role (Microsoft.Compute/locations/usages/read, {READ_GROUPS}, {READ_RESERVATIONS})"
)
AUTH_HINT = (
    f"set {ENV_AZURE_TOKEN} to a valid bearer token for Azure Resource Manager "
    f"(`az account get-access-token --query accessToken -o tsv`) and "
    f"{ENV_AZURE_SUBSCRIPTION_ID} to a subscription it may read (the Reader role covers "
    f"Microsoft.Compute/locations/usages/read)"
)
Found = tuple[list[Reservation], list[str]]  # a location's reservations, notes on them
T = TypeVar("T")


class AzureAccounts(BearerApi):
    """AccountFetcher for Azure: `account` is the subscription id."""

    provider = PROVIDER
    auth_hint = AUTH_HINT

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
        super().__init__(
            token=token,
            account=subscription,
            policy=policy,
            transport=transport,
            max_pages=max_pages,
        )
        self.management_url = management_url.rstrip("/")
        self._locations: dict[str, RegionSpec] | None = None

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> AzureAccounts:
        # Credentials as Azure's own tools find them (providers/azure/credentials.py): found
        # here without a request; the token is asked for at the first read, renewed on a 401.
        from providers.azure.credentials import find_credentials, find_subscription, missing

        credentials = find_credentials(settings, policy=policy)
        subscription, subscription_from = find_subscription(settings, credentials)
        if credentials is None or not subscription:
            raise CredentialsError(missing("a subscription's quotas", credentials, subscription))
        made = cls(
            token="",
            subscription=subscription,
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
        made.tokens = credentials
        if credentials.kind != "token":  # a refusal's fix names where they came from
            made.auth_hint = credentials.hint(subscription, subscription_from, PERMISSIONS)
        return made

    # -- plumbing ----------------------------------------------------------------------

    def _url(self, tail: str) -> str:
        return f"{self.management_url}/subscriptions/{quote(self.account, safe='')}{tail}"

    def _list(
        self,
        url: str,
        params: Mapping[str, str],
        read: Callable[[Any, str], tuple[Sequence[T], str | None]],
        what: str,
    ) -> list[T]:
        """Every entry of `url` and of each `nextLink` after it; `read(body, where)` reads
        one page (a Body: its JSON still bytes) into its entries and its next link. `what`
        names the list in the error of one past the bounds (providers/cloud/bearer.py)."""
        http = self._http()
        headers = {"Authorization": f"Bearer {self.token}"}
        seen = {url}
        query: Mapping[str, str] | None = params
        found: list[T] = []
        objects = 0
        try:
            with self._scrubbed():
                for _ in range(self.max_pages):
                    where = f"{PROVIDER}: {display(url)}"
                    body = http.get_body(url, params=query, headers=headers)
                    objects = self._bounded(body, where, what, objects)
                    entries, link = read(body, where)
                    found.extend(entries)
                    if not link:
                        return found
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
            params = {"api-version": LOCATIONS_API_VERSION}
            found = self._list(self._url("/locations"), params, parse.locations_page, "locations")
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
            wanted = {place(r) for r in asked}
            found = self._reservations([g for g in groups if g.location in wanted], fetched_at)
        known = self._locations or {}
        sources = [
            f"Azure Compute Usage API ({display(self.management_url)}, "
            f"api-version {USAGES_API_VERSION})",
            f"Azure Capacity Reservations API ({display(self.management_url)}, "
            f"api-version {RESERVATIONS_API_VERSION})",
        ]
        snapshots = []
        for region, listed in zip(asked, usages, strict=True):
            spec = known.get(region)
            held, more = found.get(place(region), ([], []))
            quotas, fixed = sound_quotas(listed)
            snapshots.append(
                AccountSnapshot(
                    provider=PROVIDER,
                    region=region,
                    fetched_at=fetched_at,
                    quotas=quotas,
                    reservations=held,
                    sources=list(sources),
                    notes=[one_line(n, [self.token]) for n in notes + more + fixed],
                    location=spec.location if spec else "",
                    zones=list(spec.zones) if spec else [],
                )
            )
        return snapshots

    # -- quotas ------------------------------------------------------------------------

    def _usages(self, region: str) -> list[Quota]:
        url = self._url(USAGES_PATH.format(location=quote(region, safe="")))
        return self._list(url, {"api-version": USAGES_API_VERSION}, usages_page, "usages")

    # -- capacity reservations ---------------------------------------------------------

    def _groups(self) -> list[Group]:
        params = {"api-version": RESERVATIONS_API_VERSION}
        return self._list(
            self._url(GROUPS_PATH), params, groups_page, "capacity reservation groups"
        )

    def _group_view(self, group: Group) -> dict[str, Utilization]:
        http = self._http()
        url = self.management_url + group.path
        try:
            with self._scrubbed():
                body = http.get_body(
                    url,
                    params={"api-version": RESERVATIONS_API_VERSION, "$expand": "instanceView"},
                    headers={"Authorization": f"Bearer {self.token}"},
                )
                where = f"{PROVIDER}: {display(url)}"
                self._bounded(body, where, "capacity reservation group")
                return group_utilization(body, where)
        finally:
            http.close()

    def _group_reservations(self, group: Group) -> list[CapacityReservation]:
        url = self.management_url + group.path + "/capacityReservations"
        params = {"api-version": RESERVATIONS_API_VERSION}
        return self._list(url, params, reservations_page, "capacity reservations")

    def _reservations(self, groups: list[Group], now: datetime) -> dict[str, Found]:
        """Location (as `place` writes it) -> its reservations and the notes on them."""
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
            for item in listed:
                reservation, note = read_reservation(item, group, utilization, now)
                held.append(reservation)
                if note:
                    notes.append(note)
        return found
