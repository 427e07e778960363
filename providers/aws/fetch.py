"""The `aws` fetcher: Price List bulk API (keyless) for shapes and on-demand prices, EC2
DescribeSpotPriceHistory (with credentials, found as the AWS CLI finds them:
providers/aws/credentials.py) for spot prices.

Regions come from `/offers/v1.0/aws/AmazonEC2/current/region_index.json`; each region's
`currentVersionUrl` is a path on the pricing host, followed relative to the configured base
URL so that mirrors work. The offer file is streamed and scanned (providers/aws/offerfile.py),
never loaded whole; the scan stops, and the download is closed, once products and the
on-demand terms are read.
https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/using-the-aws-price-list-bulk-api.html
https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/service-region-index-file-for-service.html
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from providers.aws.api import aws_http
from providers.aws.credentials import find_credentials
from providers.aws.offerfile import OfferFileError, scan_offer_file
from providers.aws.parse import NEEDLES, keep_product, offers_from_scan
from providers.aws.sigv4 import Credentials
from providers.aws.spot import fetch_spot_prices
from providers.cloud.http import CloudHttp, RetryPolicy
from providers.cloud.offers import Progress, Snapshot
from providers.config import base_url
from providers.core.env import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_EC2_URL,
    ENV_AWS_PRICING_URL,
    ENV_AWS_PROFILE,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_AWS_SESSION_TOKEN,
)
from providers.core.errors import ConfigError, CredentialsError, ShoalError
from providers.core.settings import Settings
from providers.core.urls import display
from providers.models import RegionSpec

PROVIDER = "aws"
DEFAULT_PRICING_URL = "https://pricing.us-east-1.amazonaws.com"
DEFAULT_EC2_URL = "https://ec2.{region}.amazonaws.com"
REGION_INDEX_PATH = "/offers/v1.0/aws/AmazonEC2/current/region_index.json"
SPOT_NEEDS_CREDENTIALS = (
    f"spot prices need AWS credentials (set {ENV_AWS_ACCESS_KEY_ID} and "
    f"{ENV_AWS_SECRET_ACCESS_KEY}, or {ENV_AWS_PROFILE})"
)
AUTH_HINT = (
    f"EC2 refused the AWS credentials; check {ENV_AWS_ACCESS_KEY_ID} and "
    f"{ENV_AWS_SECRET_ACCESS_KEY} (and {ENV_AWS_SESSION_TOKEN} for temporary credentials), "
    f"or the profile {ENV_AWS_PROFILE} names"
)


class AwsFetcher:
    """EC2 instance types and hourly prices (USD) per region.

    `Offer.on_demand` is the Linux, shared-tenancy, no-pre-installed-software, capacity-used
    on-demand price per hour. `Offer.spot` is the lowest current Linux/UNIX spot price
    across the region's availability zones (None without credentials, noted in
    `Snapshot.notes`)."""

    provider = PROVIDER

    def __init__(
        self,
        *,
        pricing_url: str = DEFAULT_PRICING_URL,
        ec2_url: str = DEFAULT_EC2_URL,
        credentials: Credentials | None = None,
        credentials_note: str = SPOT_NEEDS_CREDENTIALS,
        policy: RetryPolicy | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.pricing_url = pricing_url.rstrip("/")
        self.ec2_url = ec2_url.rstrip("/")
        self.credentials = credentials
        self.credentials_note = credentials_note
        self.now = now
        self.http = CloudHttp(
            PROVIDER,
            auth_hint=f"the price list host refused the request; check {ENV_AWS_PRICING_URL}",
            policy=policy,
        )
        self.ec2_http = aws_http(
            PROVIDER, auth_hint=AUTH_HINT, credentials=credentials, policy=policy
        )
        self._regions: dict[str, dict[str, Any]] | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, *, policy: RetryPolicy | None = None, home: Path | None = None
    ) -> AwsFetcher:
        """Credentials as the AWS CLI finds them (environment, then the AWS_PROFILE profile
        of ~/.aws; `home` stands for the home directory); none, or unusable ones, are a
        note: prices need no credentials."""
        pricing = base_url(
            settings, PROVIDER, "pricing_url", ENV_AWS_PRICING_URL, DEFAULT_PRICING_URL
        )
        ec2 = base_url(settings, PROVIDER, "ec2_url", ENV_AWS_EC2_URL, DEFAULT_EC2_URL)
        credentials = None
        note = SPOT_NEEDS_CREDENTIALS
        try:
            found = find_credentials(settings.env, home=home)
        except (ConfigError, CredentialsError) as exc:
            note = f"spot prices need AWS credentials ({exc})"
        else:
            credentials = found.credentials if found is not None else None
        return cls(
            pricing_url=pricing,
            ec2_url=ec2,
            credentials=credentials,
            credentials_note=note,
            policy=policy,
        )

    # -- regions --------------------------------------------------------------------------

    def _region_index(self) -> dict[str, dict[str, Any]]:
        if self._regions is None:
            url = self.pricing_url + REGION_INDEX_PATH
            body = self.http.get_json(url)
            regions = body.get("regions") if isinstance(body, dict) else None
            if not isinstance(regions, dict):
                raise ShoalError(
                    f"aws: {display(url)}: no 'regions' object; is {ENV_AWS_PRICING_URL} a "
                    "Price List host?"
                )
            index: dict[str, dict[str, Any]] = {}
            for name, entry in regions.items():
                if not isinstance(entry, dict) or not entry.get("currentVersionUrl"):
                    continue
                code = str(entry.get("regionCode") or name)
                index[code] = entry
            self._regions = index
        return self._regions

    def list_regions(self) -> list[RegionSpec]:
        return [
            RegionSpec(name=code, location=str(entry.get("location") or ""))
            for code, entry in sorted(self._region_index().items())
        ]

    def offer_url(self, region: str) -> str:
        """The offer file of a region the catalog decided (CloudCatalog.regions_for checked
        it against this index's list); one the index no longer has is a failed fetch."""
        entry = self._region_index().get(region)
        if entry is None:
            raise ShoalError(
                f"aws: the Price List's region index has no {region} (any more); "
                "`shoal regions -p aws --refresh` lists the regions it has"
            )
        relative = str(entry["currentVersionUrl"])
        # Absolute or not, keep only the path: the configured host serves it (mirrors).
        try:
            parts = urlsplit(relative)
        except ValueError:
            raise ShoalError(f"aws: the region index's URL for {region} is not a URL") from None
        path = parts.path if parts.path.startswith("/") else "/" + parts.path
        return self.pricing_url + path

    # -- one region ----------------------------------------------------------------------

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        url = self.offer_url(region)
        where = f"aws: {display(url)}"
        fetched_at = self.now()
        chunks = self.http.stream(url, progress=progress, what=f"aws {region} offer file")
        try:
            scan = scan_offer_file(chunks, keep_product, NEEDLES)
        except OfferFileError as exc:
            raise ShoalError(f"{where}: {exc}; nothing was cached from it") from None
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()  # stops the download when the scan ended early
        offer_code = scan.metadata.get("offerCode", "AmazonEC2")
        if offer_code != "AmazonEC2":
            raise ShoalError(f"{where}: offer file for {offer_code!r}, expected AmazonEC2")
        if not scan.saw_products:
            raise ShoalError(f"{where}: no 'products' in the offer file; nothing was cached")
        try:
            offers = offers_from_scan(scan)
        except ShoalError as exc:
            raise ShoalError(f"{where}: {exc}") from None
        notes: list[str] = []
        if self.credentials is None:
            notes.append(self.credentials_note)
        else:
            endpoint = self.ec2_url.replace("{region}", region)
            try:
                spot = fetch_spot_prices(
                    self.ec2_http, endpoint, region, self.credentials, now=self.now
                )
            except CredentialsError:
                raise
            except ShoalError as exc:
                notes.append(f"spot prices unavailable: {exc}")
            else:
                for instance_type, price in spot.items():
                    offer = offers.get(instance_type)
                    if offer is not None:
                        offer.spot = price
        return Snapshot(
            provider=PROVIDER,
            region=region,
            fetched_at=fetched_at,
            source=display(url),
            currency="USD",
            offers=offers,
            notes=notes,
        )
