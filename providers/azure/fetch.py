"""Azure's network side: VM prices per region from the keyless Retail Prices API, shapes from
the Resource SKUs API with Azure credentials and a subscription (as credentials.py finds
them: SHOAL_AZURE_TOKEN, a service principal, a managed identity, the Azure CLI's login),
otherwise from shoal's built-in size table (sizes.py) and, for sizes it lacks, from the
size names.

Docs: https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices,
https://learn.microsoft.com/rest/api/compute/resource-skus/list,
https://learn.microsoft.com/rest/api/resources/subscriptions/list-locations
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

from providers import gpus
from providers.azure import parse, sizes
from providers.azure.regions import PUBLIC_REGIONS
from providers.cloud.http import CloudHttp, RetryPolicy
from providers.cloud.offers import Offer, Progress, Snapshot, no_progress
from providers.config import base_url
from providers.core.env import (
    ENV_AZURE_MANAGEMENT_URL,
    ENV_AZURE_PRICES_URL,
    ENV_AZURE_SUBSCRIPTION_ID,
    ENV_AZURE_TOKEN,
)
from providers.core.errors import CredentialsError, ShoalError, usable_credential
from providers.core.settings import Settings
from providers.core.timeutil import utcnow
from providers.core.urls import display, origin
from providers.models import RegionSpec

if TYPE_CHECKING:
    from providers.azure.tokens import AzureCredentials

Access = Callable[[], "tuple[AzureCredentials | None, str, str]"]

PROVIDER = "azure"
DEFAULT_PRICES_URL = "https://prices.azure.com"
DEFAULT_MANAGEMENT_URL = "https://management.azure.com"
PRICES_PATH = "/api/retail/prices"
PRICES_API_VERSION = "2023-01-01-preview"
SKUS_API_VERSION = "2021-07-01"
LOCATIONS_API_VERSION = "2022-12-01"
# A region's VM prices are tens of pages; a server handing out links forever is a bug.
MAX_PAGES = 2000
NO_TOKEN_NOTE = (
    "sizes' shapes come from the Resource SKUs API only with Azure credentials and a "
    "subscription (`az login`, a service principal, or SHOAL_AZURE_TOKEN and "
    "AZURE_SUBSCRIPTION_ID); without them, from shoal's built-in Azure size table, else from "
    "the size name"
)
SKUS_PERMISSIONS = (
    "the Reader role (Microsoft.Compute/skus/read, "
    "Microsoft.Resources/subscriptions/locations/read)"
)
NAME_SOURCE = "the Azure size name (vCPUs, GPUs; memory unknown)"
_AUTH_HINT = (
    f"set {ENV_AZURE_TOKEN} to a valid bearer token for Azure Resource Manager "
    f"(e.g. `az account get-access-token --query accessToken -o tsv`) with read access to "
    f"the subscription in {ENV_AZURE_SUBSCRIPTION_ID}"
)


def next_url(link: str, base: str) -> str:
    """Where a page's next link points, kept on the configured base host.

    Azure's links are absolute (`https://prices.azure.com:443/...`). Followed as given when
    they name the configured host; otherwise (a mirror serving Azure's own links) the scheme
    and host are the configured base's, and its path prefix is added when missing, so an
    air-gapped mirror is never bypassed.
    """
    try:
        target, home = urlsplit(link), urlsplit(base)
        if not target.scheme:  # a relative link: resolve against the base
            target = urlsplit(base.rstrip("/") + "/" + link.lstrip("/"))
        target.port  # noqa: B018  # raises for a port that is not one
    except ValueError:
        # The link is the server's: said without quoting it (it may carry anything).
        raise ShoalError("azure: a price page's NextPageLink is not a URL") from None
    if origin(urlunsplit(target)) == origin(base):
        return urlunsplit(target)
    path = target.path
    prefix = home.path.rstrip("/")
    if prefix and not path.startswith(prefix + "/"):
        path = prefix + path
    return urlunsplit((home.scheme, home.netloc, path, target.query, ""))


class AzureFetcher:
    """Prices from the Retail Prices API; shapes from Resource SKUs with credentials."""

    provider = PROVIDER

    def __init__(
        self,
        *,
        prices_url: str = DEFAULT_PRICES_URL,
        management_url: str = DEFAULT_MANAGEMENT_URL,
        token: str = "",
        subscription: str = "",
        policy: RetryPolicy | None = None,
        max_pages: int = MAX_PAGES,
        access: Access | None = None,
    ) -> None:
        """`access` finds the credentials and subscription at the first Resource Manager
        read (so that a fetcher serving the cache finds nothing); without it, `token` and
        `subscription` are used as they are."""
        from providers.azure.tokens import AzureCredentials

        self.prices_url = prices_url.rstrip("/")
        self.management_url = management_url.rstrip("/")
        self.subscription = subscription
        self.max_pages = max_pages
        self.prices = CloudHttp(PROVIDER, policy=policy)
        self.management = CloudHttp(PROVIDER, auth_hint=_AUTH_HINT, secrets=[token], policy=policy)
        static = AzureCredentials(where=ENV_AZURE_TOKEN, kind="token", static=token)
        given = static if token else None
        self._access = access or (lambda: (given, subscription, ENV_AZURE_SUBSCRIPTION_ID))
        self._credentials: AzureCredentials | None = None
        self._found = False
        self._policy = policy

    @classmethod
    def from_settings(
        cls, settings: Settings, *, policy: RetryPolicy | None = None, max_pages: int = MAX_PAGES
    ) -> AzureFetcher:
        from providers.azure import credentials as chain

        token = usable_credential(settings.env.get(ENV_AZURE_TOKEN, "").strip(), ENV_AZURE_TOKEN)
        if token and not chain.find_subscription(settings)[0]:
            # The token is optional, but once given it is only usable with a subscription.
            raise CredentialsError(
                f"azure: {ENV_AZURE_TOKEN} is set but {ENV_AZURE_SUBSCRIPTION_ID} is not; set "
                f"{ENV_AZURE_SUBSCRIPTION_ID} to the subscription id the token can read "
                f"(or unset {ENV_AZURE_TOKEN} for prices with name-derived specs)"
            )

        def access() -> tuple[AzureCredentials | None, str, str]:
            # Found at the first Resource Manager read: a fetcher serving the cache looks
            # for none (and fails on none that are broken).
            credentials = chain.find_credentials(settings, policy=policy)
            return credentials, *chain.find_subscription(settings, credentials)

        return cls(
            prices_url=base_url(
                settings, PROVIDER, "prices_url", ENV_AZURE_PRICES_URL, DEFAULT_PRICES_URL
            ),
            management_url=base_url(
                settings,
                PROVIDER,
                "management_url",
                ENV_AZURE_MANAGEMENT_URL,
                DEFAULT_MANAGEMENT_URL,
            ),
            policy=policy,
            max_pages=max_pages,
            access=access,
        )

    def close(self) -> None:
        self.prices.close()
        self.management.close()

    # -- paging --------------------------------------------------------------------------

    def _walk(
        self,
        http: CloudHttp,
        url: str,
        params: Mapping[str, str],
        headers: Mapping[str, str] | None,
        parse_page: Callable[[Any, str], str | None],
    ) -> None:
        """GET `url` and every next page; `parse_page(body, where)` reads one (a Body: its
        JSON still bytes) and returns the next link."""
        base = self.prices_url if http is self.prices else self.management_url
        seen = {url}
        query: Mapping[str, str] | None = params
        for _ in range(self.max_pages):
            where = f"{PROVIDER}: {display(url)}"
            link = parse_page(http.get_body(url, params=query, headers=headers), where)
            if not link:
                return
            url, query = next_url(link, base), None
            if url in seen:
                raise ShoalError(f"{where}: the next-page link repeats ({display(url)}); stopped")
            seen.add(url)
        raise ShoalError(
            f"{PROVIDER}: {display(url)}: more than {self.max_pages} pages; stopped (the "
            "server keeps sending next-page links)"
        )

    # -- the Fetcher protocol ------------------------------------------------------------

    @property
    def _has_token(self) -> bool:
        """Whether shapes and regions come from Resource Manager: credentials and a
        subscription found (asked once; the client then sends them and renews them on a
        401)."""
        if not self._found:
            credentials, self.subscription, subscription_from = self._access()
            self._credentials, self._found = credentials, True
            if credentials is not None and self.subscription:
                if credentials.kind != "token":  # a refusal's fix names where they came from
                    hint = credentials.hint(self.subscription, subscription_from, SKUS_PERMISSIONS)
                    self.management.close()
                    self.management = CloudHttp(PROVIDER, auth_hint=hint, policy=self._policy)
                credentials.wire(self.management)
        return self._credentials is not None and bool(self.subscription)

    def _subscription_url(self, tail: str) -> str:
        return f"{self.management_url}/subscriptions/{quote(self.subscription, safe='')}{tail}"

    def list_regions(self) -> list[RegionSpec]:
        """Physical regions from the Subscriptions API with credentials, else PUBLIC_REGIONS."""
        if not self._has_token:
            return [RegionSpec(name=n, location=d) for n, d in sorted(PUBLIC_REGIONS.items())]
        regions: list[RegionSpec] = []

        def page(payload: Any, where: str) -> str | None:
            found, link = parse.locations_page(payload, where)
            regions.extend(found)
            return link

        self._walk(
            self.management,
            self._subscription_url("/locations"),
            {"api-version": LOCATIONS_API_VERSION},
            None,  # the client sends the credentials (`_has_token` wired them)
            page,
        )
        return sorted(regions, key=lambda r: r.name)

    def fetch_region(self, region: str, progress: Progress = no_progress) -> Snapshot:
        fetched_at = utcnow()
        endpoint = self.prices_url + PRICES_PATH
        snapshot = Snapshot(PROVIDER, region, fetched_at, display(endpoint))
        ask = parse.Ask(region=region)
        book = parse.PriceBook(ask)
        label = f"{PROVIDER} {region} price rows"
        params = {
            "api-version": PRICES_API_VERSION,
            "currencyCode": f"'{_odata(ask.currency)}'",
            "$filter": _price_filter(ask),
        }

        def page(payload: Any, where: str) -> str | None:
            items, link = parse.price_page(payload, where)
            for item in items:
                book.add(item, where)
            progress(book.rows, None, label)
            return link

        self._walk(self.prices, endpoint, params, None, page)
        snapshot.offers = book.offers()
        if not snapshot.offers and book.other_currency is not None:
            # Every price came in a currency not asked for: say so, not "no prices".
            parse.check_currency(book.other_currency, f"{PROVIDER}: {display(endpoint)}")
        ignored = _ignored_filter_note(book.dropped)
        if not snapshot.offers:
            snapshot.notes.append(
                f"the Retail Prices API returned no Linux pay-as-you-go or Spot VM prices for "
                f"region {region!r} ({book.rows} rows)"
            )
            snapshot.notes.extend(ignored)
            return snapshot
        if self._has_token:
            self._apply_skus(snapshot, region)
        else:
            snapshot.notes.append(NO_TOKEN_NOTE)
            snapshot.notes.extend(_apply_table(list(snapshot.offers.values())))
        snapshot.notes.extend(ignored)
        return snapshot

    def _apply_skus(self, snapshot: Snapshot, region: str) -> None:
        specs: dict[str, parse.SkuSpec] = {}
        url = self._subscription_url("/providers/Microsoft.Compute/skus")

        def page(payload: Any, where: str) -> str | None:
            found, link = parse.sku_page(payload, region, where)
            specs.update(found)
            return link

        self._walk(
            self.management,
            url,
            {"api-version": SKUS_API_VERSION, "$filter": f"location eq '{_odata(region)}'"},
            None,
            page,
        )
        restricted = sorted(n for n in snapshot.offers if n in specs and specs[n].restricted)
        for name in restricted:
            del snapshot.offers[name]
        if restricted:
            snapshot.notes.append(
                f"{len(restricted)} sizes restricted for this subscription in {region} were "
                f"left out: {', '.join(restricted[:5])}{' ...' if len(restricted) > 5 else ''}"
            )
        unlisted: list[Offer] = []
        # Not the URL itself: its path names the subscription, which a shared catalog
        # export should not carry.
        source = f"the Azure Resource SKUs API ({display(self.management_url)})"
        for name, offer in snapshot.offers.items():
            spec = specs.get(name)
            if spec is None:
                unlisted.append(offer)
                continue
            _apply_name(offer)
            # The SKU list has no GPU model or GPU memory: those come from the table or name.
            row = sizes.table().get(name) if spec.gpu_count else None
            if row is not None and row.gpu:
                offer.gpu, offer.gpu_memory_gib = row.gpu, row.gpu_memory_gib
            # A capability the SKU list leaves out reads as 0: unknown, not zero.
            offer.vcpus = spec.vcpus or offer.vcpus
            offer.memory_gib = spec.memory_gib or None
            offer.arch = spec.arch or offer.arch
            offer.gpu_count = spec.gpu_count
            offer.shape_source = source
        if unlisted:
            snapshot.notes.append(
                f"{len(unlisted)} priced sizes are not in the Resource SKUs list for {region}; "
                "their shapes come from shoal's built-in Azure size table, else their names"
            )
            snapshot.notes.extend(_apply_table(unlisted))


def _odata(value: str) -> str:
    """A string literal's body in an OData filter: a quote is written twice."""
    return value.replace("'", "''")


def _price_filter(ask: parse.Ask) -> str:
    """The `$filter` for `ask`; parse.unasked checks every clause of it again client-side.
    Values are case-sensitive; priceType trims Reservation and DevTest rows at the source."""
    return (
        f"serviceName eq '{_odata(ask.service)}' and armRegionName eq '{_odata(ask.region)}' "
        f"and priceType eq '{_odata(ask.price_type)}'"
    )


def _ignored_filter_note(dropped: Mapping[str, int]) -> list[str]:
    total = sum(dropped.values())
    if not total:
        return []
    parts = ", ".join(f"{count:,} for {reason}" for reason, count in sorted(dropped.items()))
    item, were = ("item", "was") if total == 1 else ("items", "were")
    return [
        f"the price source ignored the filter: {total:,} {item} for other regions/services "
        f"{were} dropped ({parts})"
    ]


def _count(names: list[str], one: str, many: str) -> str:
    return f"{len(names):,} {one if len(names) == 1 else many}"


def _names(names: list[str]) -> str:
    return f": {', '.join(sorted(names))}" if len(names) <= 10 else ""


def _apply_table(offers: list[Offer]) -> list[str]:
    """Shapes from the built-in size table, else from the size name (memory then unknown);
    the notes say how many took which."""
    table = sizes.table()
    tabled: list[str] = []
    unknown: list[str] = []
    for offer in offers:
        _apply_name(offer)
        row = table.get(offer.instance_type)
        if row is None:
            offer.shape_source = NAME_SOURCE
            unknown.append(offer.instance_type)
            continue
        # The page is the authority for a size it lists, GPUs included (or their absence).
        offer.vcpus, offer.memory_gib = row.vcpus, row.memory_gib
        offer.gpu, offer.gpu_count, offer.gpu_memory_gib = (
            row.gpu,
            row.gpu_count,
            row.gpu_memory_gib,
        )
        offer.shape_source = table.source
        tabled.append(offer.instance_type)
    notes = []
    if tabled:
        takes = _count(tabled, "size takes its", "sizes take their")
        notes.append(f"{takes} shape from {table.source}{_names(tabled)}")
    if unknown:
        notes.append(
            f"{_count(unknown, 'size has', 'sizes have')} no known memory (not in the built-in "
            f"table; vCPUs and GPUs read from the size name){_names(unknown)}"
        )
    return notes


def _apply_name(offer: Offer) -> None:
    shape = parse.shape_from_name(offer.instance_type)
    offer.vcpus = shape.vcpus or None  # a name shoal cannot read says nothing, not 0
    offer.memory_gib = None
    offer.arch = shape.arch
    offer.gpu = gpus.model(shape.gpu) if shape.gpu else ""
    offer.gpu_count = shape.gpu_count
    offer.gpu_memory_gib = shape.gpu_memory_gib
