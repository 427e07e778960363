"""A cloud's offers: each priced instance type of each region asked, in each market, with
how many instances the account's quotas let launch now and an open reservation that
covers it.

Prices come from the price catalog (its cache and freshness rules; the regions that are
due downloaded at once, `CloudCatalog.prefetch`), quotas from the account's capacity
(`quota_inputs`, fetched meanwhile). Without credentials, or when the account's answer
failed, quotas are unknown: `fitsNow` is null and the offer's notes say why. A region whose
prices failed is a failure of its own; the others still answer.

`zones` are the zones of the region that offer the type, from the account's answer too
(`AccountSnapshot.type_zones`: AWS DescribeInstanceTypeOfferings and GCP machine types per
zone, both for their GPU types); a type the list covers and leaves out is offered in no
zone of the region, and rejected (`not-offered`). Where zones are not known (no
credentials, a refused or failed call, a type the list does not cover) `zones` is [] and
the offer's notes say why; a covering reservation's zone is where its instances are held.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from providers.core.errors import CredentialsError, ShoalError
from providers.models import InstanceTypeSpec, RegionSpec, ResourceListOptions, ResourcePricing
from providers.offers.judge import Verdicts, candidate, priced, settle
from providers.offers.model import DRIVERS, Failure, Offer, ReservationRef

if TYPE_CHECKING:
    from providers.accounts.model import AccountSnapshot, Market, QuotaMap, Reservation
    from providers.cloud.catalog import Prefetch
    from providers.registry import Catalog


@runtime_checkable
class PricesAndQuotas(Protocol):
    """A cloud catalog (providers/cloud/catalog.py) as offers use it."""

    def regions_for(self, asked: Sequence[str], *, account: bool = False) -> list[str]: ...

    def prefetch(self, regions: Sequence[str]) -> Prefetch: ...

    def quota_inputs(
        self, regions: Sequence[str]
    ) -> list[tuple[AccountSnapshot, bool, QuotaMap]]: ...

    def list_pricing(self, opts: ResourceListOptions) -> list[ResourcePricing]: ...


Quotas = dict[str, tuple["AccountSnapshot", bool, "QuotaMap"]]


def cloud_offers(
    catalog: PricesAndQuotas, provider: str, asked: Sequence[str], verdicts: Verdicts
) -> None:
    """Every region of `asked` (none: the catalog's default set; "all": every region)."""
    from providers.core.timeutil import utcnow

    regions = catalog.regions_for(list(asked))
    pending = catalog.prefetch(regions)
    quotas: Quotas = {}
    why = "not among the regions the account can use"
    zones_why = f"zones unknown: {why}"
    try:
        got = catalog.quota_inputs(regions)
    except ShoalError as exc:
        why = str(exc)
        zones_why = (
            "zones unknown without credentials"
            if isinstance(exc, CredentialsError)
            else f"zones unknown: {why}"
        )
        verdicts.note(f"{provider}: quotas unknown, fitsNow is null ({why})")
    else:
        quotas = {snapshot.region: (snapshot, stale, qmap) for snapshot, stale, qmap in got}
        missing = [r for r in regions if r not in quotas]
        if missing:
            verdicts.note(f"{provider}: quotas unknown in {', '.join(missing)} ({why})")
    finally:
        pending.wait()
    now = utcnow()
    failed: list[tuple[str, ShoalError]] = []
    for region in regions:
        try:
            pricings = catalog.list_pricing(ResourceListOptions(region=RegionSpec(name=region)))
        except ShoalError as exc:
            failed.append((region, exc))
            continue
        for pricing in pricings:
            _region(verdicts, provider, pricing, quotas.get(region), (why, zones_why), now)
    if failed and len(failed) == len(regions):
        first, *others = [error for _, error in failed]
        first.earlier = tuple(_said(provider, error) for error in others)
        raise first
    for region, error in failed:
        verdicts.failures.append(Failure(provider, _said(provider, error), region))


def priced_offers(
    catalog: Catalog, provider: str, asked: Sequence[str], verdicts: Verdicts
) -> None:
    """A catalog that only prices (a plugin's): its types and prices, quotas unknown."""
    from providers.core.timeutil import utcnow
    from providers.query import chosen_regions

    why = f"{provider} has no account capacity"
    whys = (why, f"zones unknown: {why}")
    for spec in chosen_regions(catalog, asked):
        opts = ResourceListOptions(region=spec or RegionSpec())
        for pricing in catalog.list_pricing(opts):
            _region(verdicts, provider, pricing, None, whys, utcnow())


def _said(provider: str, exc: ShoalError) -> str:
    text = str(exc)
    return text if text.startswith(provider) else f"{provider}: {text}"


def _region(
    verdicts: Verdicts,
    provider: str,
    pricing: ResourcePricing,
    quota: tuple[AccountSnapshot, bool, QuotaMap] | None,
    whys: tuple[str, str],
    now: datetime,
) -> None:
    """`whys`: why quotas, and zones, are unknown when `quota` is None."""
    request = verdicts.request
    region = pricing.region
    seen = False
    for name, item in sorted(pricing.items.items()):
        spec = pricing.shapes.get(name) or InstanceTypeSpec(name=name)
        sized = candidate(verdicts, provider, region, spec)
        if sized is None:
            seen = seen or _gpu_type(request.gpu_model, spec)
            continue
        seen = True
        for market in request.markets:
            price = item.on_demand_price if market == "onDemand" else item.spot_price
            offer = Offer(
                provider=provider,
                driver=DRIVERS.get(provider, provider),
                region=region,
                instance_type=name,
                shape=spec,
                market=market,
                instances=sized.instances,
                price_per_hour=price,
                fits_now=None,
                as_of=pricing.as_of,
                stale=pricing.stale,
                gpus_each=sized.gpus,
            )
            not_offered = ""
            if price is None and market == "spot":
                not_offered = f"not offered as spot in {region.name} (no spot price)"
            if not priced(verdicts, offer, not_offered=not_offered):
                continue
            if not _zones(offer, quota, whys[1]):
                verdicts.reject(
                    provider, region, name, market, "not-offered",
                    f"no zone of {region.name} offers it (the account's list of zones per type)",
                )  # fmt: skip
                continue
            _fit(offer, quota, whys[0], now)
            settle(verdicts, offer, limit="quota")
    if not seen and request.wants_gpus:
        what = request.gpu or "GPU"
        verdicts.reject(provider, region, "", None, "not-offered", f"no {what} type priced here")


def _gpu_type(model: str, spec: InstanceTypeSpec) -> bool:
    """Whether `spec` has the GPU asked, whatever else left it out (the region offers it)."""
    from providers import gpus as gpu_names

    if not spec.gpu_count:
        return False
    return not model or gpu_names.model(spec.gpu).lower() == model.lower()


def _zones(
    offer: Offer, quota: tuple[AccountSnapshot, bool, QuotaMap] | None, why: str
) -> bool:
    """Set the zones of the region that offer the offer's type; False when the account's
    list of zones per type covers the type and has it in none. Unknown: [] and a note."""
    from fnmatch import fnmatchcase

    if quota is None:
        offer.notes.append(why)
        return True
    snapshot = quota[0]
    listed = snapshot.type_zones
    if listed is not None and offer.instance_type in listed:
        offer.zones = list(listed[offer.instance_type])
        return bool(offer.zones)
    name = offer.instance_type
    if listed is not None and any(fnmatchcase(name, p) for p in snapshot.zones_cover):
        return False
    said = snapshot.zones_unknown or (
        f"{snapshot.provider}'s account answer has no zones per type (--refresh asks again)"
    )
    offer.notes.append(f"zones unknown: {said}")
    return True


def _fit(
    offer: Offer,
    quota: tuple[AccountSnapshot, bool, QuotaMap] | None,
    why: str,
    now: datetime,
) -> None:
    """How many instances launch now: the account's quotas (the least any quota that applies
    allows), or an open reservation's free instances, whichever is more. Without the
    account's capacity (`why`), not known."""
    if quota is None:
        offer.notes.append(f"quotas unknown: {why}")
        return
    from providers.accounts.fit import type_fit

    snapshot, stale, quota_map = quota
    spec = offer.shape
    found = type_fit(
        snapshot,
        quota_map,
        offer.instance_type,
        spec.vcpus,
        spec.gpu,
        spec.gpu_count,
        offer.market,
    )
    offer.binding = found.binding
    offer.fits_now = found.instances
    if found.reason:
        offer.notes.append(f"quotas unknown: {found.reason}")
    elif found.unknown:
        offer.notes.append(f"quota usage unknown: {', '.join(found.unknown)}")
    elif found.binding is None:
        offer.notes.append("no quota known applies to this type")
    if stale:
        offer.stale = True
        offer.notes.append("account capacity older than its TTL (--refresh fetches it again)")
    held = _reservation(snapshot.reservations, offer.instance_type, offer.market, now)
    if held is None:
        return
    offer.reservation = ReservationRef(
        held.id, held.kind, held.available, held.zone, held.start, held.end
    )
    if held.zone:
        offer.zones = [held.zone]  # where the reservation holds its instances
    if offer.fits_now is None:
        offer.fits_now = held.available if held.available >= offer.instances else None
    else:
        offer.fits_now = max(offer.fits_now, held.available)


def _reservation(
    reservations: Sequence[Reservation], instance_type: str, market: Market, now: datetime
) -> Reservation | None:
    """The open reservation of this type with the most free instances now (capacity held
    for the account: on demand only), if any."""
    if market != "onDemand":
        return None
    open_now = [
        r
        for r in reservations
        if r.instance_type == instance_type
        and r.available > 0
        and (r.start is None or r.start <= now)
        and (r.end is None or r.end > now)
    ]
    return max(open_now, key=lambda r: (r.available, r.id), default=None)
