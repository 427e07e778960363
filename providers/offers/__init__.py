"""`shoal offers`: where a request (N GPUs of a model, vCPUs, memory, instances) fits
cheapest right now, across providers and regions, with quotas, reservations, Kubernetes
pools and the local host; and why each other candidate was left out.

One job per module: `request` (the request and how many instances a type needs),
`model` (offers, rejections and their JSON), `regions` (which provider takes which
`--region` names), `judge` (a candidate to an offer or a rejection), `clouds` (a cloud
catalog's prices, quotas and reservations), `pools` (a cluster's node pools), `host` (the
local host), `rank` (order, `--group-by gpu`, `--limit`), `configured` (the providers
asked by default) and `engine` (`find_offers`: every provider at once).
"""

from providers.offers.engine import OpenCatalog, find_offers
from providers.offers.model import OffersAnswer
from providers.offers.request import OfferRequest

__all__ = ["OfferRequest", "OffersAnswer", "OpenCatalog", "find_offers"]
