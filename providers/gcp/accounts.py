"""A GCP project's capacity: Compute Engine quotas per region and project-wide, and
reservations (current and future), as the provider-neutral records of
providers/accounts/model.py.

APIs asked (Compute Engine v1, credentials and project as credentials.py finds them;
every list is paged by `nextPageToken`/`pageToken`):
- regions.list: every region with its `quotas[]` of {metric, limit, usage, owner} (doubles)
  and `zones[]`, so one paged list answers every region:
  https://cloud.google.com/compute/docs/reference/rest/v1/regions/list
- projects.get: the project-wide `quotas[]` (CPUS_ALL_REGIONS, GPUS_ALL_REGIONS, ...):
  https://cloud.google.com/compute/docs/reference/rest/v1/projects/get
- reservations.aggregatedList: `items` keyed `zones/<zone>` -> {reservations[] | warning};
  a reservation's `specificReservation` {count, inUseCount (int64: JSON strings),
  instanceProperties {machineType, guestAccelerators[]}}, `status`, `deleteAtTime`:
  https://cloud.google.com/compute/docs/reference/rest/v1/reservations/aggregatedList
- futureReservations.aggregatedList: `items` keyed `zones/<zone>` -> {futureReservations[]};
  `specificSkuProperties` {totalCount, instanceProperties}, `timeWindow` {startTime,
  endTime | duration}, `status` {procurementStatus, fulfilledCount}:
  https://cloud.google.com/compute/docs/reference/rest/v1/futureReservations/aggregatedList
  (procurement states:
  https://cloud.google.com/python/docs/reference/google-cloud-compute-v1beta/latest/google.cloud.compute_v1beta.types.FutureReservationStatus.ProcurementStatus).
- machineTypes.aggregatedList, filtered to the GPU series (`filter=name eq "(a2|a3|...)-.*"`,
  the series of the built-in table's types with GPUs; a regular expression that must match
  the whole name): `items` keyed `zones/<zone>` -> {machineTypes[]}, the zones of each
  region that offer each GPU machine type (`type_zones`, for `shoal offers`):
  https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/aggregatedList
  Only the GPU series: every machine type of every zone is tens of thousands of entries
  (pages of at most 500), too much for an answer cached for minutes; a GPU's zones are
  where they differ most. The other types' zones are unknown (said in `zones_unknown`). A
  refusal or failure of this list leaves the zones unknown; the rest of the answer stands.
The requests, their concurrency and what a refusal means are here; reading the pages is
account_parse.py's. Usage per machine type is not asked, so `usage` stays empty. A refused
reservations list is a note; a refused regions or project read is a CredentialsError (77).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from providers.accounts.model import AccountSnapshot, Quota, Reservation, sound_quotas
from providers.accounts.parallel import run_all
from providers.cloud.bearer import BearerApi
from providers.cloud.http import RetryPolicy
from providers.config import base_url
from providers.core.env import ENV_GCP_COMPUTE_URL, ENV_GCP_PROJECT, ENV_GCP_TOKEN
from providers.core.errors import CredentialsError, ShoalError, one_line
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.urls import display
from providers.gcp.account_parse import (
    Note,
    RegionQuotas,
    Reserved,
    TypeZones,
    project_quotas,
    regions_page,
)
from providers.gcp.fetch import DEFAULT_COMPUTE_URL, walk
from providers.gcp.shapes import builtin_shapes, region_of_zone
from providers.regions import check_region

if TYPE_CHECKING:
    import httpx

    from providers.core.http.client import Body

PROVIDER = "gcp"
MAX_PAGES = 200  # regions.list is one page; aggregated lists a few; a looping token is a bug
AUTH_HINT = (
    f"set {ENV_GCP_TOKEN} to a valid OAuth access token (gcloud auth print-access-token) "
    f"that may read Compute Engine in the project in {ENV_GCP_PROJECT} (the Compute Viewer "
    f"role: compute.regions.list, compute.projects.get)"
)


class GcpAccounts(BearerApi):
    """AccountFetcher for GCP: `account` is the project."""

    provider = PROVIDER
    auth_hint = AUTH_HINT

    def __init__(
        self,
        *,
        token: str,
        project: str,
        compute_url: str = DEFAULT_COMPUTE_URL,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        max_pages: int = MAX_PAGES,
    ) -> None:
        super().__init__(
            token=token,
            account=project,
            policy=policy,
            transport=transport,
            max_pages=max_pages,
        )
        self.compute_url = compute_url.rstrip("/")
        self._regions: dict[str, RegionQuotas] | None = None
        self._unread = False  # the regions list regions() got, not yet given to a fetch

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> GcpAccounts:
        # Application Default Credentials (providers/gcp/credentials.py): found here without
        # a request; the token is asked for at the first read, and renewed on a 401.
        from providers.gcp.credentials import find_credentials, find_project, missing

        credentials = find_credentials(settings, policy=policy)
        project, project_from = find_project(settings, credentials)
        if credentials is None or not project:
            raise CredentialsError(missing("a project's quotas", credentials, project))
        made = cls(
            token="",
            project=project,
            compute_url=base_url(
                settings, PROVIDER, "compute_url", ENV_GCP_COMPUTE_URL, DEFAULT_COMPUTE_URL
            ),
            policy=policy,
            transport=transport,
        )
        made.tokens = credentials
        if credentials.kind != "token":
            permissions = "compute.regions.list, compute.projects.get"
            made.auth_hint = credentials.hint(project, project_from, permissions)
        return made

    # -- plumbing ----------------------------------------------------------------------

    def _url(self, tail: str) -> str:
        return f"{self.compute_url}/compute/v1/projects/{quote(self.account, safe='')}{tail}"

    def _pages(
        self,
        url: str,
        page: Callable[[Body, str], str],
        what: str,
        params: dict[str, str] | None = None,
    ) -> None:
        """GET `url` (with `params`) and every page after it; `page(body, where)` reads one
        and returns its nextPageToken. `what` names the list in the error of one past the
        bounds."""
        http = self._http()
        objects = 0

        def bounded(body: Body, where: str) -> str:
            nonlocal objects
            objects = self._bounded(body, where, what, objects)
            return page(body, where)

        try:
            with self._scrubbed():
                headers = {"Authorization": f"Bearer {self.token}"}
                walk(http, url, bounded, self.max_pages, params=params, headers=headers)
        finally:
            http.close()

    # -- AccountFetcher ----------------------------------------------------------------

    def regions(self) -> list[str]:
        if self._regions is None:
            self._list_regions()
        assert self._regions is not None
        return sorted(self._regions)

    def _list_regions(self) -> dict[str, RegionQuotas]:
        """regions.list: every region's quotas in one paged list."""
        found: dict[str, RegionQuotas] = {}

        def page(body: Body, where: str) -> str:
            regions, token = regions_page(body, where)
            found.update(regions)
            return token

        self._pages(self._url("/regions"), page, "regions")
        self._regions, self._unread = found, True
        return found

    def _region_quotas(self) -> dict[str, RegionQuotas]:
        """The list regions() just read, once (a CLI checks the region, then fetches);
        otherwise asked again, since usage moves."""
        if self._regions is not None and self._unread:
            self._unread = False
            return self._regions
        found = self._list_regions()
        self._unread = False
        return found

    def fetch(self, regions: Sequence[str]) -> list[AccountSnapshot]:
        fetched_at = utcnow()
        calls: list[Callable[[], Any]] = [
            self._region_quotas,
            self._project_quotas,
            self._reservations,
            self._future,
            self._type_zones,
        ]
        results = run_all(calls)
        by_region, project = results[0], results[1]
        if isinstance(by_region, Exception):
            raise by_region
        if isinstance(project, Exception):
            raise project
        known = sorted(by_region)
        asked = [check_region(PROVIDER, r, known) for r in dict.fromkeys(regions)]
        notes: list[Note] = []
        reservations: list[Reservation] = []
        for result, what, permission in (
            (results[2], "reservations", "compute.reservations.list"),
            (results[3], "future reservations", "compute.futureReservations.list"),
        ):
            if isinstance(result, CredentialsError):
                notes.append(
                    ("", f"{what} unknown: the {what} list was refused; grant {permission}")
                )
            elif isinstance(result, Exception):
                raise result
            else:
                held, more = result
                reservations.extend(held)
                notes.extend(more)
        base = display(self.compute_url)
        sources = [
            f"Compute Engine API regions.list and projects.get ({base})",
            f"Compute Engine API reservations and futureReservations aggregatedList ({base})",
        ]
        zones_of, zones_unknown = _zones_read(results[4])
        snapshots = []
        for name in asked:
            region = by_region[name]
            quotas, fixed = sound_quotas([*region.quotas, *project])
            mine = [r for r in reservations if region_of_zone(r.zone) == name]
            said = [text for place, text in notes if place in ("", name)] + fixed
            snapshots.append(
                AccountSnapshot(
                    provider=PROVIDER,
                    region=name,
                    fetched_at=fetched_at,
                    quotas=quotas,
                    reservations=mine,
                    sources=list(sources),
                    notes=[one_line(n, [self.token]) for n in said],
                    zones=list(region.zones),
                    quotas_unknown=one_line(region.unknown, [self.token]),
                    type_zones=zones_of.of(name) if zones_of is not None else None,
                    zones_cover=zones_of.cover(name) if zones_of is not None else [],
                    zones_unknown=one_line(
                        _unknown_in(name, zones_of, zones_unknown), [self.token]
                    ),
                )
            )
        return snapshots

    def _type_zones(self) -> TypeZones:
        series = gpu_series()
        found = TypeZones(frozenset(series))
        params = {"filter": f'name eq "({"|".join(series)})-.*"', "maxResults": "500"}
        self._pages(self._url("/aggregated/machineTypes"), found.page, "machine types", params)
        return found

    def _project_quotas(self) -> list[Quota]:
        http = self._http()
        url = self._url("")
        try:
            with self._scrubbed():
                body = http.get_body(url, headers={"Authorization": f"Bearer {self.token}"})
                where = f"{PROVIDER}: {display(url)}"
                self._bounded(body, where, "project")
                return project_quotas(body, where)
        finally:
            http.close()

    def _reservations(self) -> tuple[list[Reservation], list[Note]]:
        reserved = Reserved()
        self._pages(
            self._url("/aggregated/reservations"), reserved.reservations_page, "reservations"
        )
        return reserved.result()

    def _future(self) -> tuple[list[Reservation], list[Note]]:
        reserved = Reserved()
        self._pages(
            self._url("/aggregated/futureReservations"), reserved.future_page, "future reservations"
        )
        return reserved.result()


@functools.cache
def gpu_series() -> tuple[str, ...]:
    """The series of the built-in table's machine types with GPUs (a2, a3, a4, g2, g4)."""
    return tuple(sorted({shape.family for shape in builtin_shapes() if shape.gpu_count}))


def _zones_read(result: object) -> tuple[TypeZones | None, str]:
    """The machine types' zones, or None and why they are unknown."""
    if isinstance(result, TypeZones):
        series = ", ".join(gpu_series())
        return result, f"gcp lists the zones of its GPU machine types only ({series})"
    if isinstance(result, CredentialsError):
        return None, "the machine types list was refused; grant compute.machineTypes.list"
    if isinstance(result, ShoalError):
        return None, f"the machine types list failed: {str(result).removeprefix('gcp: ')}"
    if isinstance(result, BaseException):
        raise result  # a bug: its traceback
    return None, ""


def _unknown_in(region: str, found: TypeZones | None, why: str) -> str:
    missing = found.missing(region) if found is not None else []
    if missing:
        return f"{why}; zones that did not answer: {', '.join(missing)}"
    return why
