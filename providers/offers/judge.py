"""The rules every candidate goes through, whichever provider it comes from: the GPU asked,
the shape (arch, vCPUs, GiB), how many instances, the market's price, `--max-price`, and
last whether enough instances fit now. Each candidate ends as an offer or as a rejection
with its reason and code.

A request without GPUs matches most types of a cloud region, so the candidates a cloud
leaves out for their shape or market (`arch`, `too-small`, `not-offered`) are counted in a
note rather than listed; a GPU request lists every one (why was the H100 type not offered?).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from providers.accounts.model import Market
from providers.models import InstanceTypeSpec, RegionSpec
from providers.offers.model import Failure, Offer, Rejected
from providers.offers.request import OfferRequest, Sizing, gpu_matches, shape_misfit, sizing

COUNTED_UNLESS_GPUS = ("arch", "too-small", "not-offered")
MARKET_WORDS = {"onDemand": "on demand", "spot": "spot"}


@dataclass
class Verdicts:
    """What one provider's candidates came to."""

    request: OfferRequest
    many: bool = False  # a cloud's hundreds of types a region: shape misfits only counted
    offers: list[Offer] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)
    counted: Counter[str] = field(default_factory=Counter)
    failures: list[Failure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def reject(
        self,
        provider: str,
        region: RegionSpec,
        instance_type: str,
        market: Market | None,
        code: str,
        reason: str,
    ) -> None:
        if self.many and code in COUNTED_UNLESS_GPUS and not self.request.wants_gpus:
            self.counted[code] += 1
            return
        self.rejected.append(Rejected(provider, region, instance_type, market, code, reason))

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def candidate(
    verdicts: Verdicts,
    provider: str,
    region: RegionSpec,
    spec: InstanceTypeSpec,
    *,
    share: bool = False,
) -> Sizing | None:
    """How many instances of `spec` the request needs, or None when it is no offer: not the
    GPU asked (not a candidate at all), or a shape that cannot serve (rejected)."""
    request = verdicts.request
    if not gpu_matches(request, spec):
        return None
    misfit = shape_misfit(request, spec)
    if misfit is not None:
        code, reason = misfit
        verdicts.reject(provider, region, spec.name, None, code, reason)
        return None
    sized = sizing(request, spec.gpu_count, share=share)
    if isinstance(sized, str):
        verdicts.reject(provider, region, spec.name, None, "too-small", sized)
        return None
    return sized


def priced(
    verdicts: Verdicts,
    offer: Offer,
    *,
    known_price_needed: bool = True,
    not_offered: str = "",
) -> bool:
    """Whether `offer` has a price the request can take: `not_offered` (a reason) when the
    market does not sell the type, an unknown price (refused where prices make the offer,
    kept where capacity is already there: a pool's node, the host), `--max-price`."""
    request = verdicts.request
    where = (offer.provider, offer.region, offer.instance_type, offer.market)
    if not_offered:
        verdicts.reject(*where, "not-offered", not_offered)
        return False
    if offer.price_per_hour is None:
        if known_price_needed or request.max_price is not None:
            word = MARKET_WORDS[offer.market]
            verdicts.reject(*where, "price-unknown", f"no {word} price known")
            return False
        return True
    total = offer.total_per_hour
    if request.max_price is not None and total is not None and total > request.max_price:
        verdicts.reject(
            *where,
            "over-max-price",
            f"{offer.instances} x ${_money(offer.price_per_hour)}/h = ${_money(total)}/h > "
            f"--max-price {_money(request.max_price)}",
        )
        return False
    return True


def settle(verdicts: Verdicts, offer: Offer, *, limit: str) -> None:
    """An offer when every instance it needs fits now (or that is not known); else the
    rejection naming the limit that binds (`limit`: "quota" for clouds, "capacity" for a
    pool or the host)."""
    fits = offer.fits_now
    if fits is None or fits >= offer.instances:
        verdicts.offers.append(offer)
        return
    said = f" ({offer.binding.describe('each')})" if offer.binding else ""
    if limit == "quota":
        code = "no-quota" if fits == 0 else "quota-binds"
        reason = (
            f"no quota{said}" if fits == 0 else f"quota binds at {fits} of {offer.instances}{said}"
        )
    else:
        code = "no-capacity"
        reason = f"fits {fits} of {offer.instances} now{said}"
    where = (offer.provider, offer.region, offer.instance_type, offer.market)
    verdicts.reject(*where, code, reason)


def _money(value: float) -> str:
    return f"{value:.4f}".rstrip("0").rstrip(".")
