"""GCP's network side: the global Compute Engine SKU list (API key) and, with credentials
and a project (Application Default Credentials: credentials.py), the Compute Engine API for
machine shapes and regions.

The SKU list covers every region in one paged list, so a fetcher downloads it once and
derives every region from it. The API key goes in the query string only; messages show URLs
without it and CloudHttp scrubs it from anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from providers.cloud.http import CloudHttp, RetryPolicy
from providers.cloud.offers import Progress, Snapshot, no_progress
from providers.config import base_url
from providers.core.env import (
    ENV_GCP_API_KEY,
    ENV_GCP_BILLING_URL,
    ENV_GCP_COMPUTE_URL,
    ENV_GCP_PROJECT,
    ENV_GCP_TOKEN,
)
from providers.core.errors import CredentialsError, ShoalError, usable_credential
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.urls import display
from providers.gcp.account_parse import regions_page
from providers.gcp.credentials import GcpCredentials, find_credentials, find_project
from providers.gcp.parse import COMPUTE_SERVICE_ID, RateBook, price_offers, unshaped_notes
from providers.gcp.shapes import Shape, builtin_table, machine_types_page
from providers.models import RegionSpec

if TYPE_CHECKING:
    from providers.core.http.client import Body

PROVIDER = "gcp"
DEFAULT_BILLING_URL = "https://cloudbilling.googleapis.com"
DEFAULT_COMPUTE_URL = "https://compute.googleapis.com"
MAX_PAGES = 100  # the Compute SKU list is ~7 pages of 5000; a loop past this is a bug
BUILTIN_NOTE = (
    "machine shapes need GCP credentials and a project (Application Default Credentials or "
    f"{ENV_GCP_TOKEN}, and {ENV_GCP_PROJECT} or gcloud's project); shapes from shoal's "
    "built-in table of Google's published machine types"
)
KEY_HINT = (
    f"set {ENV_GCP_API_KEY} to a valid API key of a project with the Cloud Billing API enabled"
)
TOKEN_HINT = (
    f"set {ENV_GCP_TOKEN} to a valid OAuth access token (gcloud auth print-access-token) "
    f"that may list machine types in {ENV_GCP_PROJECT}"
)


class GcpFetcher:
    provider = PROVIDER
    # One SKU list serves every region: regions are fetched in turn on one fetcher, never
    # each on its own (CloudCatalog.prefetch), which would download it once per region.
    shared_download = True

    def __init__(
        self,
        *,
        billing_url: str = DEFAULT_BILLING_URL,
        compute_url: str = DEFAULT_COMPUTE_URL,
        api_key: str = "",
        token: str = "",
        project: str = "",
        policy: RetryPolicy | None = None,
        max_pages: int = MAX_PAGES,
        access: Callable[[], tuple[GcpCredentials | None, str, str]] | None = None,
    ) -> None:
        """`access` finds the credentials and project at the first Compute Engine read (so
        that a fetcher serving the cache finds nothing); without it, `token` and `project`
        are used as they are."""
        self.billing_url = billing_url.rstrip("/")
        self.compute_url = compute_url.rstrip("/")
        self.api_key = api_key
        self.project = project
        self.max_pages = max_pages
        static = GcpCredentials(where=ENV_GCP_TOKEN, kind="token", static=token) if token else None
        self._access = access or (lambda: (static, project, ENV_GCP_PROJECT))
        self._credentials: GcpCredentials | None = None
        self._found = False
        self.billing = CloudHttp(
            PROVIDER,
            auth_hint=KEY_HINT,
            secrets=[api_key],
            policy=policy,
            # An unknown key is a 400 INVALID_ARGUMENT ("API key not valid"), not a 401/403.
            refused=lambda status, message: status == 400 and "API key" in message,
        )
        self.compute = CloudHttp(PROVIDER, auth_hint=TOKEN_HINT, secrets=[token], policy=policy)
        self._policy = policy
        self._book: RateBook | None = None
        self._fetched_at: datetime | None = None
        self._shapes: dict[str, dict[str, Shape]] | None = None
        self._regions: list[RegionSpec] | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, policy: RetryPolicy | None = None) -> GcpFetcher:
        """Reads URLs and the API key only; a missing API key fails at first use, and the
        Compute Engine credentials are found at their first use, so that a fetcher can exist
        (and cached data be used) on a machine without them."""

        def access() -> tuple[GcpCredentials | None, str, str]:
            credentials = find_credentials(settings, policy=policy)
            return credentials, *find_project(settings, credentials)

        return cls(
            billing_url=base_url(
                settings, PROVIDER, "billing_url", ENV_GCP_BILLING_URL, DEFAULT_BILLING_URL
            ),
            compute_url=base_url(
                settings, PROVIDER, "compute_url", ENV_GCP_COMPUTE_URL, DEFAULT_COMPUTE_URL
            ),
            api_key=usable_credential(settings.env.get(ENV_GCP_API_KEY, ""), ENV_GCP_API_KEY),
            policy=policy,
            access=access,
        )

    def close(self) -> None:
        self.billing.close()
        self.compute.close()

    @property
    def skus_url(self) -> str:
        return f"{self.billing_url}/v1/services/{COMPUTE_SERVICE_ID}/skus"

    @property
    def machine_types_url(self) -> str:
        return f"{self.compute_url}/compute/v1/projects/{self.project}/aggregated/machineTypes"

    @property
    def _has_token(self) -> bool:
        """Whether machine shapes come from the Compute Engine API: credentials and a
        project found (asked once; the client then sends them and renews them on a 401)."""
        if not self._found:
            credentials, self.project, project_from = self._access()
            self._credentials, self._found = credentials, True
            if credentials is not None and self.project:
                if credentials.kind != "token":  # a refusal's fix names where they came from
                    permissions = "compute.machineTypes.list, compute.regions.list"
                    hint = credentials.hint(self.project, project_from, permissions)
                    self.compute.close()
                    self.compute = CloudHttp(PROVIDER, auth_hint=hint, policy=self._policy)
                credentials.wire(self.compute)
        return self._credentials is not None and bool(self.project)

    # -- the Fetcher protocol ------------------------------------------------------------

    def list_regions(self) -> list[RegionSpec]:
        if self._regions is None:
            if self._has_token:
                self._regions = self._compute_regions()
            else:
                book = self._rate_book(no_progress)
                self._regions = [
                    RegionSpec(name=r, location=book.locations.get(r, ""))
                    for r in sorted(book.regions)
                ]
        return self._regions

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        book = self._rate_book(progress)
        # The region is the catalog's decision (CloudCatalog.regions_for checked it against
        # this list); one the list no longer has would make an empty snapshot, not prices.
        if region not in {r.name for r in self.list_regions()}:
            raise ShoalError(
                f"gcp: {region} is not among the regions the price list has (any more); "
                "`shoal regions -p gcp --refresh` lists them"
            )
        notes: list[str] = []
        if self._has_token:
            by_region = self._api_shapes()
            shapes = list(by_region.get(region, {}).values())
            known = [shape for scoped in by_region.values() for shape in scoped.values()]
            shape_source = display(self.machine_types_url)
        else:
            table = builtin_table()
            shapes = known = list(table.shapes)
            shape_source = table.source
            notes.append(BUILTIN_NOTE)
        notes.extend(unshaped_notes(region, book, known))
        assert self._fetched_at is not None
        return Snapshot(
            provider=PROVIDER,
            region=region,
            fetched_at=self._fetched_at,
            source=display(self.skus_url),
            offers=price_offers(region, shapes, book, shape_source),
            notes=notes,
        )

    # -- the SKU list --------------------------------------------------------------------

    def _rate_book(self, progress: Progress) -> RateBook:
        if self._book is not None:
            return self._book
        if not self.api_key:
            raise CredentialsError(
                f"gcp: the Cloud Billing Catalog API needs an API key; set {ENV_GCP_API_KEY}"
            )
        book = RateBook()
        fetched_at = utcnow()
        pages = 0

        def page(body: Body, where: str) -> str:
            nonlocal pages
            token = book.add_page(body, where)
            pages += 1
            progress(book.skus, None, f"gcp: Compute Engine SKU rows (page {pages})")
            return token

        params = {"key": self.api_key, "currencyCode": "USD", "pageSize": "5000"}
        walk(self.billing, self.skus_url, page, self.max_pages, params=params)
        self._book, self._fetched_at = book, fetched_at
        return book

    # -- the Compute Engine API (token) --------------------------------------------------

    def _api_shapes(self) -> dict[str, dict[str, Shape]]:
        if self._shapes is None:
            shapes: dict[str, dict[str, Shape]] = {}
            zones: dict[str, set[str]] = {}

            def page(body: Body, where: str) -> str:
                return machine_types_page(body, shapes, zones, where)

            walk(self.compute, self.machine_types_url, page, self.max_pages)
            self._shapes = shapes
        return self._shapes

    def _compute_regions(self) -> list[RegionSpec]:
        url = f"{self.compute_url}/compute/v1/projects/{self.project}/regions"
        regions: list[RegionSpec] = []

        def page(body: Body, where: str) -> str:
            found, token = regions_page(body, where)
            regions.extend(RegionSpec(name=name, zones=r.zones) for name, r in found)
            return token

        walk(self.compute, url, page, self.max_pages)
        return sorted(regions, key=lambda r: r.name)


def walk(
    http: CloudHttp,
    url: str,
    read: Callable[[Body, str], str],
    max_pages: int,
    *,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> None:
    """GET `url` and every page after it (`pageToken`); `read(body, where)` reads one (its
    JSON still bytes) and returns its nextPageToken ("" at the end)."""
    where = f"{PROVIDER}: {display(url)}"
    token = ""
    seen: set[str] = set()
    for _ in range(max_pages):
        query = {**(params or {}), **({"pageToken": token} if token else {})}
        token = read(http.get_body(url, params=query or None, headers=headers), where)
        if not token:
            return
        if token in seen:
            raise ShoalError(f"{where}: the page token repeats; stopped")
        seen.add(token)
    raise ShoalError(f"{where}: more than {max_pages} pages; stopped, nothing was cached")
