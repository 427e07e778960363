"""Placement: `alloc --offers` and `alloc --best`, acting on what `shoal offers` found, above
the allocation use cases (drivers.service), one job per module:

- document: the offers document read and checked (pydantic), and "no offer fits now";
- targets: an offer in one zone, and the definition its driver is handed;
- failover: the offers tried in order, failing over on no room, each attempt named;
- scheduled: a pod still unscheduled past a timeout is a launch that found no room;
- unavailable: where a launch just found no room, remembered for a few minutes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from drivers.placement.unavailable import Unavailable
    from providers.core.settings import Settings


def memory(settings: Settings) -> Unavailable:
    """The unavailable offerings under the cache dir, shared by every shoal of this user."""
    from drivers.placement.unavailable import FILE, Unavailable

    return Unavailable(settings.paths.cache_dir / FILE)
