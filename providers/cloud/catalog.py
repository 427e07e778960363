"""The Catalog of a public cloud, answered from the cache and refreshed through a fetcher.

Freshness rules (the provider's TTL is `[provider] ttl_hours`, default 24):
- fresh data is served from the cache without touching the network;
- data past its TTL is refreshed; if that refresh fails, the old data is served with a
  warning that says how old it is (and `stale` in the JSON);
- `--refresh` fetches now and fails (old data intact) when the fetch fails;
- `--offline` never fetches; `--max-age` refuses cached data older than it.
Without `--region`, the regions already cached are answered, or the provider's default
region when nothing is cached yet; `--region all` asks every region (which may download a
lot the first time). Which regions a command works on is decided in one place,
`CloudCatalog.regions_for`; the query service, the Catalog methods and the fetchers take
the names it returns.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from providers import config
from providers.cloud.cache import CatalogCache, SnapshotInfo
from providers.cloud.offers import Fetcher, Offer, Progress, Snapshot
from providers.core.errors import ShoalError, UsageError
from providers.core.timeutil import human_duration, utcnow
from providers.models import (
    InstanceTypeSpec,
    RegionSpec,
    Resource,
    ResourceListOptions,
    ResourcePricing,
    ResourcePricingItem,
    Selector,
    selector_record,
)
from providers.regions import check_region, region_name

if TYPE_CHECKING:
    from providers.accounts.capacity import AccountCapacity
    from providers.accounts.model import AccountFetcher, AccountSnapshot, QuotaMap
    from providers.core.settings import Settings
    from providers.selectors import UnjudgedCount

CACHE_FILE = "catalog.sqlite"
T = TypeVar("T")
# Price downloads at once per provider: each streams and parses a region's price list
# (an AWS offer file: ~75 MB read, parsed as it comes), so more would only add memory.
PREFETCH_WORKERS = 8


def open_cache(settings: Settings) -> CatalogCache:
    directory = settings.paths.ensure_dir(settings.paths.cache_dir)
    return CatalogCache(directory / CACHE_FILE)


class CloudCatalog:
    def __init__(
        self,
        provider: str,
        settings: Settings,
        fetcher: Callable[[], Fetcher],
        default_region: str,
        accounts: Callable[[], AccountFetcher] | None = None,
        quota_map: str = "",
        region_env: tuple[str, ...] = (),
        upstream_region: Callable[[RegionSpec], RegionSpec] | None = None,
    ) -> None:
        self._provider = provider
        # Fills a region's upstream Go member (aws: `aws.region`) on every region this
        # catalog answers with, whichever path (cache, fetch, account) made it.
        self._upstream_region = upstream_region or (lambda spec: spec)
        self.settings = settings
        self.freshness = settings.freshness
        self.ttl = config.ttl(settings, provider)
        # Without --region: the cloud's own variables first (AWS_REGION, as its CLI), then
        # the config table, then the provider's own default.
        chosen = next((settings.env[v] for v in region_env if settings.env.get(v)), "")
        self.default_region = chosen.strip() or str(
            config.setting(settings, provider, "default_region", "", default_region)
        )
        self._chosen: set[str] = set()  # decided by regions_for this run: not checked again
        self._accounts = accounts
        self._quota_map = quota_map
        self._capacity: AccountCapacity | None = None
        self.cache = open_cache(settings)
        self._make_fetcher = fetcher
        self._fetcher: Fetcher | None = None
        self._warned: set[str] = set()
        self._failed: set[str] = set()

    def provider(self) -> str:
        return self._provider

    def fetcher(self) -> Fetcher:
        if self._fetcher is None:
            self._fetcher = self._make_fetcher()
        return self._fetcher

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            self.settings.warn(message)

    # -- regions -------------------------------------------------------------------------

    def list_regions(self) -> list[RegionSpec]:
        return [self._upstream_region(r) for r in self._list_regions()]

    def _list_regions(self) -> list[RegionSpec]:
        cached, fetched_at = self.cache.regions(self._provider)
        now = utcnow()
        if self.freshness.offline:
            have = self.cache.snapshots(self._provider)
            if not have:
                raise ShoalError(_NOTHING_OFFLINE.format(provider=self._provider))
            known = {r.name: r for r in cached}
            return [known.get(name, RegionSpec(name=name)) for name in have]
        fresh = fetched_at is not None and now - fetched_at <= self.ttl
        if cached and fresh and not self.freshness.refresh:
            return cached
        try:
            regions = _guarded(self._provider, "region list", self.fetcher().list_regions)
        except ShoalError as exc:
            if not cached or self.freshness.refresh:
                raise
            age = human_duration(now - fetched_at) if fetched_at else "?"
            self._warn_once(
                "regions",
                f"{self._provider}: could not refresh the region list ({exc}); using the one "
                f"from {age} ago",
            )
            return cached
        regions.sort(key=lambda r: r.name)
        self.cache.save_regions(self._provider, regions, now)
        return regions

    def _known_region_names(self) -> list[str]:
        if self.freshness.offline:
            cached, _ = self.cache.regions(self._provider)
            names = sorted({r.name for r in cached} | set(self.cache.snapshots(self._provider)))
            if not names:
                raise ShoalError(_NOTHING_OFFLINE.format(provider=self._provider))
            return names
        return [r.name for r in self.list_regions()]

    def regions_for(self, asked: Sequence[str], *, account: bool = False) -> list[str]:
        """The regions a command works on, decided here and only here from what `--region`
        asked (`asked`); everything after (the query service, the Catalog methods, the
        fetchers) takes these names as they are.

        - "all": every region the provider lists (`account`: every region the account
          can use);
        - names: each checked against the provider's list, close names suggested, before
          anything is fetched (`account`: checked for shape, as they go into URLs; the
          account's own fetch knows which it has);
        - none: the regions already cached (prices and types; not `account`), else the
          default region: the cloud's variable (AWS_REGION), `[provider] default_region`,
          else the provider's own.
        """
        names = list(dict.fromkeys(asked))
        if account:
            chosen = self.capacity().regions() if "all" in names else names or [self.default_region]
            for name in chosen:  # asked, configured, or listed by the cloud: all go into URLs
                region_name(name, "--region" if name in names else "region")
            return chosen
        if "all" in names:
            chosen = [r.name for r in self.list_regions()]
        elif names:
            # A name decided before (by the query service, for this catalog) is not checked
            # again: that would ask for the region list once per region.
            known = self._known_region_names() if set(names) - self._chosen else []
            chosen = [
                name if name in self._chosen else check_region(self._provider, name, known)
                for name in names
            ]
        else:
            chosen = list(self.cache.snapshots(self._provider)) or [
                check_region(self._provider, self.default_region, self._known_region_names())
            ]
        self._chosen.update(chosen)
        return chosen

    # -- snapshots -----------------------------------------------------------------------

    def snapshot(self, region: str) -> tuple[SnapshotInfo, list[Offer], bool]:
        """The region's cached data, refreshed as the freshness rules say; and its staleness."""
        info = self.cache.snapshots(self._provider).get(region)
        now = utcnow()
        max_age = self.freshness.max_age
        due = (
            info is None
            or self.freshness.refresh
            or now - info.fetched_at > self.ttl
            or now < info.fetched_at  # from a clock ahead of ours: not to be trusted
            or (max_age is not None and now - info.fetched_at > max_age)
        )
        if due and not self.freshness.offline and region not in self._failed:
            try:
                snap = _guarded(
                    self._provider,
                    f"{region} prices",
                    lambda: self.fetcher().fetch_region(region, self.settings.progress),
                )
            except ShoalError as exc:
                if info is None or self.freshness.refresh:
                    raise
                if max_age is not None and now - info.fetched_at > max_age:
                    # Said before any "serving old prices": they are not served.
                    exc.args = (
                        f"{self._provider} {region}: refresh failed ({exc}) and the cached "
                        f"prices are {human_duration(now - info.fetched_at)} old, older than "
                        f"--max-age {human_duration(max_age)}",
                    )
                    raise
                self._failed.add(region)  # once per run: the old data is what we have
                self._warn_once(
                    f"refresh {region}",
                    f"{self._provider} {region}: refresh failed ({exc}); serving prices "
                    f"fetched {human_duration(now - info.fetched_at)} ago",
                )
            else:
                if snap.currency != "USD":
                    raise ShoalError(
                        f"{self._provider} {region}: prices are in {snap.currency}, shoal "
                        "compares USD only; point the base URL at a USD price list"
                    )
                self.cache.save(snap)
                info = self.cache.snapshots(self._provider)[region]
        if info is None:
            raise ShoalError(
                f"{self._provider} {region}: nothing cached and --offline forbids fetching; "
                "run without --offline, or load a shared catalog with `shoal catalog import`"
            )
        age = now - info.fetched_at
        if self.freshness.max_age is not None and age > self.freshness.max_age:
            raise ShoalError(
                f"{self._provider} {region}: cached prices are {human_duration(age)} old, older "
                f"than --max-age {human_duration(self.freshness.max_age)}; refresh them (without "
                "--offline)"
            )
        stale = age > self.ttl
        if stale and region not in self._failed:  # a failed refresh already said how old
            self._warn_once(
                f"stale {region}",
                f"{self._provider} {region}: prices are {human_duration(age)} old (TTL "
                f"{human_duration(self.ttl)}); --refresh fetches new ones",
            )
        return info, self.cache.offers(self._provider, region), stale

    # -- the Catalog interface -----------------------------------------------------------

    def list_instance_types(self, region: RegionSpec | None) -> list[InstanceTypeSpec]:
        out: list[InstanceTypeSpec] = []
        for name in self.regions_for(_asked(region)):
            info, offers, _ = self.snapshot(name)
            out.extend(_spec(o, name, info.source) for o in offers)
        return out

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]:
        from providers.selectors import UnjudgedCount

        selectors = opts.filter.resource_selectors if opts.filter else []
        out: list[ResourcePricing] = []
        for name in self.regions_for(_asked(opts.region)):
            info, offers, stale = self.snapshot(name)
            items = {}
            unjudged = UnjudgedCount()
            for offer in offers:
                if selectors and not _matches(selectors, offer, name, self._provider, unjudged):
                    continue
                items[offer.instance_type] = ResourcePricingItem(
                    on_demand_price=offer.on_demand,
                    spot_price=offer.spot,
                    scheduled_price=offer.scheduled,
                )
            pricing = self._pricing(info, items, stale)
            pricing.shapes = {
                o.instance_type: _spec(o, name) for o in offers if o.instance_type in items
            }
            pricing.notes.extend(unjudged.notes())
            out.append(pricing)
        return out

    def list_pricing_predictions(self, opts: ResourceListOptions) -> dict[str, ResourcePricing]:
        """Observed prices in [start, end] from the history, and a forecast for the part of
        the window after the latest observation (see providers/cloud/forecast.py)."""
        from providers.cloud import forecast
        from providers.core.wire import format_time

        start = opts.start_time
        if start is None:
            raise UsageError("a price window needs --start")
        end = opts.end_time or start
        if end < start:
            raise UsageError("--end is before --start; give a window that moves forward")
        names = self.regions_for(_asked(opts.region))
        if len(names) != 1:
            raise UsageError(
                f"{self._provider}: a price window is for one region; add --region NAME"
            )
        name = names[0]
        info, offers, stale = self.snapshot(name)  # refreshes first, as a new observation
        wanted = {o.instance_type: o for o in offers}
        selectors = opts.filter.resource_selectors if opts.filter else []
        if selectors:
            wanted = {
                k: o for k, o in wanted.items() if _matches(selectors, o, name, self._provider)
            }
        out: dict[str, ResourcePricing] = {}
        history = [h for h in self.cache.history(self._provider, name) if h.instance_type in wanted]
        for obs in history:
            if not start <= obs.observed_at <= end:
                continue
            point = out.setdefault(
                format_time(obs.observed_at), self._pricing(info, {}, stale, kind="observed")
            )
            point.as_of = obs.observed_at
            point.items[obs.instance_type] = ResourcePricingItem(
                on_demand_price=obs.on_demand, spot_price=obs.spot, scheduled_price=obs.scheduled
            )
        latest = info.fetched_at
        for at in sorted({start, end}):
            if at <= latest:
                continue
            prices, method = forecast.forecast(history, at)
            point = self._pricing(info, {}, stale, kind="forecast")
            point.method = method
            point.items = {
                k: ResourcePricingItem(on_demand_price=od, spot_price=sp, scheduled_price=sc)
                for k, (od, sp, sc) in prices.items()
            }
            out[format_time(at)] = point
        return dict(sorted(out.items()))

    def _pricing(
        self,
        info: SnapshotInfo,
        items: dict[str, ResourcePricingItem],
        stale: bool,
        kind: str = "",
    ) -> ResourcePricing:
        return ResourcePricing(
            region=self._upstream_region(RegionSpec(name=info.region)),
            items=items,
            provider=info.provider,
            currency=info.currency,
            as_of=info.fetched_at,
            source=info.source,
            stale=stale,
            notes=list(info.notes),
            kind=kind,
        )

    # -- the account's capacity (quotas, usage, reservations) -----------------------------

    def capacity(self) -> AccountCapacity:
        if self._accounts is None:
            raise UsageError(_NO_RESOURCES.format(provider=self._provider))
        if self._capacity is None:
            from providers.accounts.capacity import AccountCapacity

            self._capacity = AccountCapacity(
                self._provider,
                self.settings,
                self.cache,
                self._accounts,
                config.quota_ttl(self.settings, self._provider),
                self.settings.warn,
            )
        return self._capacity

    def list_resources(self, opts: ResourceListOptions) -> list[Resource]:
        return self.list_resources_in(_asked(opts.region), opts)

    def list_resources_in(
        self, regions: Sequence[str], opts: ResourceListOptions
    ) -> list[Resource]:
        """The account's capacity in these regions (none: the default region; "all": every
        region the account can use), fetched together."""
        from providers.accounts import resource

        capacity = self.capacity()
        selectors = opts.filter.resource_selectors if opts.filter else []
        resource.check_selectors(self._provider, selectors)
        names = self.regions_for(regions, account=True)
        now = utcnow()
        out: list[Resource] = []
        dropped: list[str] = []
        for snapshot, stale in capacity.snapshots(names):
            if stale:
                self._warn_once(
                    f"stale account {snapshot.region}",
                    f"{self._provider} {snapshot.region}: account capacity is "
                    f"{human_duration(now - snapshot.fetched_at)} old; --refresh fetches it again",
                )
            built = resource.select(
                resource.to_resource(snapshot, now=now, stale=stale), snapshot, selectors
            )
            if built is None:
                dropped.append(snapshot.region)
            else:
                if built.region is not None:
                    self._upstream_region(built.region)
                out.append(built)
        if dropped:
            self.settings.warn(
                f"{self._provider}: nothing allocatable for the selection in "
                f"{len(dropped)} region(s): {', '.join(dropped)}"
            )
        return out

    def keep_launchable(self, pricings: Sequence[ResourcePricing]) -> None:
        """`pricing --available`: drop the types the account has no quota to launch now."""
        from providers.accounts.launchable import keep_launchable
        from providers.core.plugins import import_string

        capacity = self.capacity()
        quota_map = import_string(self._quota_map)  # a QuotaMap class, built per region
        regions = [p.region.name for p in pricings]
        snapshots = {s.region: s for s, _ in capacity.snapshots(list(dict.fromkeys(regions)))}
        for pricing in pricings:
            snapshot = snapshots[pricing.region.name]
            keep_launchable(pricing, snapshot, quota_map(snapshot.quotas))

    # -- offers: many regions' prices at once, and what a quota fit needs ------------------

    def prefetch(self, regions: Sequence[str]) -> Prefetch:
        """Start downloading, in the background, the prices of those of `regions` the
        freshness rules say are due: at once, each worker thread on a fetcher of its own (a
        fetcher is used by one thread at a time), or in turn on one worker when the
        fetcher's one download serves every region (`shared_download`: gcp's SKU list).
        The caller meanwhile does other work (the account's quotas); `Prefetch.wait()` then
        hands what came to `snapshot()`, which saves and serves it under the usual rules: a
        failed download is a failed refresh there (the cached data served with a warning, or
        the error). Only the calling thread touches the cache."""
        if self.freshness.offline:
            return Prefetch(self, [], 0)
        infos = self.cache.snapshots(self._provider)
        now = utcnow()
        due = [
            r
            for r in dict.fromkeys(regions)
            if r not in self._failed and self._due(infos.get(r), now)
        ]
        if not due:
            return Prefetch(self, [], 0)
        # The first worker takes the catalog's own fetcher, which may hold a download
        # already (the region list came from it): this thread leaves it alone until wait().
        own = self.fetcher()
        shared = getattr(own, "shared_download", False)
        return Prefetch(self, due, 1 if shared else PREFETCH_WORKERS, own)

    def _due(self, info: SnapshotInfo | None, now: datetime) -> bool:
        """snapshot()'s rule for fetching a region before answering from it."""
        max_age = self.freshness.max_age
        return (
            info is None
            or self.freshness.refresh
            or now - info.fetched_at > self.ttl
            or now < info.fetched_at
            or (max_age is not None and now - info.fetched_at > max_age)
        )

    def quota_inputs(self, regions: Sequence[str]) -> list[tuple[AccountSnapshot, bool, QuotaMap]]:
        """What a quota fit needs in those of `regions` the account can use: each region's
        account snapshot (fetched together, under the account capacity's freshness rules),
        whether it is stale, and the cloud's QuotaMap built with its quotas. Raises what the
        account's capacity raises (no credentials: CredentialsError)."""
        from providers.core.plugins import import_string

        capacity = self.capacity()
        usable = set(capacity.regions())
        asked = [r for r in dict.fromkeys(regions) if r in usable]
        quota_map = import_string(self._quota_map)  # a QuotaMap class, built per region
        return [(s, stale, quota_map(s.quotas)) for s, stale in capacity.snapshots(asked)]

    def list_resource_predictions(self, opts: ResourceListOptions) -> dict[str, Resource]:
        raise UsageError(
            f"{self._provider} account capacity is now; reservations ahead are its `scheduled` "
            "figures (drop --start/--end)"
            if self._accounts is not None
            else _NO_RESOURCES.format(provider=self._provider)
        )


_NOTHING_OFFLINE = (
    "{provider}: nothing cached and --offline forbids fetching; run once without --offline, "
    "or load a shared catalog with `shoal catalog import`"
)
_NO_RESOURCES = (
    "{provider} publishes prices and instance types, not free capacity; use `shoal pricing` "
    "or `shoal types` (capacity views come from the local and kubernetes providers)"
)


def _asked(region: RegionSpec | None) -> list[str]:
    """What a Catalog method's region asks of regions_for: its name, or none (the default)."""
    return [region.name] if region is not None and region.name else []


def _guarded(provider: str, what: str, fetch: Callable[[], T]) -> T:
    """A payload shaped unlike the provider's documentation can trip a parser anywhere
    (a list where an object was, a string where a number was): that is a malformed payload,
    reported as such, with the cached data kept and served as for any failed refresh."""
    try:
        return fetch()
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise ShoalError(
            f"{provider}: malformed {what} payload ({type(exc).__name__}: {str(exc)[:80]}); "
            "nothing was cached from it"
        ) from None


def _spec(offer: Offer, region: str, source: str = "") -> InstanceTypeSpec:
    return InstanceTypeSpec(
        name=offer.instance_type,
        vcpus=offer.vcpus,
        memory_gib=offer.memory_gib,
        arch=offer.arch,
        gpu=offer.gpu,
        gpu_count=offer.gpu_count,
        gpu_memory_gib=offer.gpu_memory_gib,
        region=region,
        source=offer.shape_source or source,
    )


def _matches(
    selectors: list[Selector],
    offer: Offer,
    region: str,
    provider: str,
    unjudged: UnjudgedCount | None = None,
) -> bool:
    from providers import selectors as sel

    record = selector_record(
        _spec(offer, region), provider=provider, price=offer.on_demand, spot_price=offer.spot
    )
    if sel.matches(selectors, record):
        return True
    if unjudged is not None:
        unjudged.add(selectors, record)
    return False


def factory(
    provider: str,
    fetcher: str,
    default_region: str,
    *,
    accounts: str = "",
    quota_map: str = "",
    region_env: tuple[str, ...] = (),
    upstream_region: Callable[[RegionSpec], RegionSpec] | None = None,
) -> Callable[[Settings], CloudCatalog]:
    """The registry factory of a cloud whose fetcher class `fetcher` names ("module:Class",
    with a `from_settings`), and whose account capacity fetcher `accounts` names (the
    same), with the QuotaMap `quota_map` ("module:object"). Fetchers (and any credential
    check) are imported and built only when data must be fetched, so cached and --offline
    answers need no credentials; and this wing never imports the clouds that use it."""

    def make(settings: Settings) -> CloudCatalog:
        from providers.core.plugins import import_string

        def build() -> Fetcher:
            made: Fetcher = import_string(fetcher).from_settings(settings)
            return made

        def build_accounts() -> AccountFetcher:
            made: AccountFetcher = import_string(accounts).from_settings(settings)
            return made

        return CloudCatalog(
            provider,
            settings,
            build,
            default_region,
            accounts=build_accounts if accounts else None,
            quota_map=quota_map,
            region_env=region_env,
            upstream_region=upstream_region,
        )

    return make


class Prefetch:
    """Price downloads under way (CloudCatalog.prefetch): worker threads, each with a
    fetcher of its own, take the regions in turn; `wait()` joins them and hands the
    snapshots (or errors) to the catalog's `snapshot()` through its fetcher."""

    def __init__(
        self,
        catalog: CloudCatalog,
        regions: list[str],
        workers: int,
        fetcher: Fetcher | None = None,
    ) -> None:
        self._catalog = catalog
        self._given = fetcher  # the first worker's, not closed: the catalog's own
        self._queue = list(reversed(regions))
        self._done: dict[str, Snapshot | ShoalError] = {}
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=self._work, args=(n == 0,), daemon=True, name="shoal-prices")
            for n in range(min(workers, len(regions)))
        ]
        for thread in self._threads:
            thread.start()

    def _progress(self, done: int, total: int | None, what: str) -> None:
        with self._lock:
            self._catalog.settings.progress(done, total, what)

    def _work(self, first: bool) -> None:
        catalog = self._catalog
        fetcher: Fetcher | None = self._given if first else None
        try:
            while True:
                with self._lock:
                    if not self._queue:
                        return
                    region = self._queue.pop()
                got: Snapshot | ShoalError
                try:
                    if fetcher is None:
                        fetcher = catalog._make_fetcher()
                    fetch = functools.partial(fetcher.fetch_region, region, self._progress)
                    got = _guarded(catalog.provider(), f"{region} prices", fetch)
                except ShoalError as exc:
                    got = exc
                with self._lock:
                    self._done[region] = got
        finally:
            close = getattr(fetcher, "close", None)
            if close is not None and fetcher is not self._given:
                close()

    def wait(self) -> None:
        for thread in self._threads:
            thread.join()
        if self._done:
            catalog = self._catalog
            catalog._fetcher = _Prefetched(catalog.fetcher(), self._done)


class _Prefetched:
    """A catalog's fetcher that answers the regions prefetched with what came (a snapshot,
    or the error raised again), once each, and asks its own fetcher for anything else."""

    def __init__(self, inner: Fetcher, done: dict[str, Snapshot | ShoalError]) -> None:
        self.inner = inner
        self.provider = inner.provider
        self.done = done

    def list_regions(self) -> list[RegionSpec]:
        return self.inner.list_regions()

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        got = self.done.pop(region, None)
        if got is None:
            return self.inner.fetch_region(region, progress)
        if isinstance(got, ShoalError):
            raise got
        return got
