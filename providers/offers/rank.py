"""The order of the offers: those that fit now first, then those whose fit is not known;
within each, by `--sort`:

- `total` (the default): what starting them adds per hour (an open reservation's free
  instances add nothing, so it comes first among offers of equal price), then the total;
- `gpu-hour`: the price per GPU-hour;
- `fit`: the most instances that fit now first.

Unknown prices go last. `--group-by gpu` keeps the cheapest offer per GPU model (by
GPU-hour), a $/GPU-hour view; `--limit` keeps the first N.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from providers.offers.model import Offer
from providers.offers.request import OfferRequest


def _money(value: float | None) -> float:
    return math.inf if value is None else value


def _key(offer: Offer, order: str) -> tuple[object, ...]:
    unknown_fit = offer.fits is None
    by_total = (_money(offer.marginal_per_hour), _money(offer.total_per_hour))
    tie = (offer.provider, offer.region.name, offer.instance_type, offer.market)
    if order == "gpu-hour":
        return (unknown_fit, _money(offer.price_per_gpu_hour), *by_total, *tie)
    if order == "fit":
        fits = -1 if offer.fits_now is None else offer.fits_now
        return (unknown_fit, -fits, *by_total, *tie)
    return (unknown_fit, *by_total, offer.reservation is None, *tie)


def ranked(offers: Sequence[Offer], request: OfferRequest) -> list[Offer]:
    order = request.order
    out = sorted(offers, key=lambda o: _key(o, order))
    if request.group_by == "gpu":
        cheapest: dict[str, Offer] = {}
        for offer in sorted(offers, key=lambda o: _key(o, "gpu-hour")):
            cheapest.setdefault((offer.shape.gpu or "").lower(), offer)
        out = sorted(cheapest.values(), key=lambda o: _key(o, order))
    return out[: request.limit] if request.limit is not None else out
