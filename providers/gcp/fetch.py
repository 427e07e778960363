"""GCP's network side: the global Compute Engine SKU list (API key) and, with a token, the
Compute Engine API for machine shapes and regions.

The SKU list covers every region in one paged list, so a fetcher downloads it once and
derives every region from it. The API key goes in the query string only; messages show URLs
without it and CloudHttp scrubs it from anything else.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from providers.cloud.http import CloudHttp, RetryPolicy
from providers.cloud.offers import Progress, Snapshot, no_progress
from providers.config import base_url, setting
from providers.core.env import (
    ENV_GCP_API_KEY,
    ENV_GCP_BILLING_URL,
    ENV_GCP_COMPUTE_URL,
    ENV_GCP_PROJECT,
    ENV_GCP_TOKEN,
)
from providers.core.errors import CredentialsError, ShoalError
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.urls import display
from providers.gcp.parse import COMPUTE_SERVICE_ID, RateBook, price_offers, unshaped_notes
from providers.gcp.shapes import Shape, builtin_table, machine_types_page
from providers.models import RegionSpec
from providers.regions import check_region

PROVIDER = "gcp"
DEFAULT_BILLING_URL = "https://cloudbilling.googleapis.com"
DEFAULT_COMPUTE_URL = "https://compute.googleapis.com"
MAX_PAGES = 100  # the Compute SKU list is ~7 pages of 5000; a loop past this is a bug
BUILTIN_NOTE = (
    f"machine shapes need a token (set {ENV_GCP_TOKEN} and {ENV_GCP_PROJECT}); "
    "shapes from shoal's built-in table of Google's published machine types"
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
    ) -> None:
        self.billing_url = billing_url.rstrip("/")
        self.compute_url = compute_url.rstrip("/")
        self.api_key = api_key
        self.token = token
        self.project = project
        self.max_pages = max_pages
        self.billing = CloudHttp(
            PROVIDER,
            auth_hint=KEY_HINT,
            secrets=[api_key],
            policy=policy,
            # An unknown key is a 400 INVALID_ARGUMENT ("API key not valid"), not a 401/403.
            refused=lambda status, message: status == 400 and "API key" in message,
        )
        self.compute = CloudHttp(PROVIDER, auth_hint=TOKEN_HINT, secrets=[token], policy=policy)
        self._book: RateBook | None = None
        self._fetched_at: datetime | None = None
        self._shapes: dict[str, dict[str, Shape]] | None = None
        self._regions: list[RegionSpec] | None = None

    @classmethod
    def from_settings(cls, settings: Settings, *, policy: RetryPolicy | None = None) -> GcpFetcher:
        """Reads URLs and credentials only; a missing API key fails at first use, so that
        a fetcher can exist (and cached data be used) on a machine without one."""
        return cls(
            billing_url=base_url(
                settings, PROVIDER, "billing_url", ENV_GCP_BILLING_URL, DEFAULT_BILLING_URL
            ),
            compute_url=base_url(
                settings, PROVIDER, "compute_url", ENV_GCP_COMPUTE_URL, DEFAULT_COMPUTE_URL
            ),
            api_key=settings.env.get(ENV_GCP_API_KEY, ""),
            token=settings.env.get(ENV_GCP_TOKEN, ""),
            project=setting(settings, PROVIDER, "project", ENV_GCP_PROJECT),
            policy=policy,
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
        return bool(self.token and self.project)

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
        check_region(PROVIDER, region, [r.name for r in self.list_regions()])
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
        token = ""
        for page_no in range(1, self.max_pages + 1):
            params = {"key": self.api_key, "currencyCode": "USD", "pageSize": "5000"}
            if token:
                params["pageToken"] = token
            page = self._billing_get(params)
            next_token = book.add_page(page)
            progress(book.skus, None, f"gcp: Compute Engine SKU rows (page {page_no})")
            if not next_token:
                self._book, self._fetched_at = book, fetched_at
                return book
            if next_token == token:
                raise ShoalError(f"gcp: {display(self.skus_url)}: the page token repeats")
            token = next_token
        raise ShoalError(
            f"gcp: {display(self.skus_url)}: more than {self.max_pages} pages of SKUs; "
            "nothing was cached"
        )

    def _billing_get(self, params: dict[str, str]) -> Any:
        return self.billing.get_json(self.skus_url, params=params)

    # -- the Compute Engine API (token) --------------------------------------------------

    def _compute_pages(self, url: str) -> Iterator[Any]:
        headers = {"Authorization": f"Bearer {self.token}"}
        token = ""
        for _ in range(self.max_pages):
            params = {"pageToken": token} if token else None
            page = self.compute.get_json(url, params=params, headers=headers)
            yield page
            token = (page.get("nextPageToken") or "") if isinstance(page, dict) else ""
            if not token:
                return
        raise ShoalError(f"gcp: {display(url)}: more than {self.max_pages} pages")

    def _api_shapes(self) -> dict[str, dict[str, Shape]]:
        if self._shapes is None:
            shapes: dict[str, dict[str, Shape]] = {}
            zones: dict[str, set[str]] = {}
            for page in self._compute_pages(self.machine_types_url):
                machine_types_page(page, shapes, zones)
            self._shapes = shapes
        return self._shapes

    def _compute_regions(self) -> list[RegionSpec]:
        url = f"{self.compute_url}/compute/v1/projects/{self.project}/regions"
        regions: list[RegionSpec] = []
        for page in self._compute_pages(url):
            items = page.get("items", []) if isinstance(page, dict) else None
            if not isinstance(items, list):
                raise ShoalError(f"gcp: {display(url)}: unexpected payload (no 'items' list)")
            for item in items:
                if isinstance(item, dict) and isinstance(item.get("name"), str):
                    zones = sorted(
                        z.rsplit("/", 1)[-1] for z in item.get("zones") or [] if isinstance(z, str)
                    )
                    regions.append(RegionSpec(name=item["name"], zones=zones))
        return sorted(regions, key=lambda r: r.name)
