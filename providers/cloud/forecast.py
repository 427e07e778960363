"""Price forecasts from observed history.

Method `linear-trend-30d`: for each instance type and price kind (on-demand, spot,
scheduled), a least-squares line through the observations of the 30 days up to the latest
one, evaluated at the forecast time and never below zero. With observations at fewer than
two distinct times there is no trend to fit and the method is `last-value`: the latest
observed price carried forward. Cloud list prices move in steps, so the line mostly tracks
spot prices; it is a hint, not a quote, and each point says which method produced it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from providers.cloud.cache import Observation

TREND = "linear-trend-30d"
LAST_VALUE = "last-value"
WINDOW = timedelta(days=30)


def _fit(points: list[tuple[float, float]], at: float) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_p = sum(p for _, p in points) / n
    spread = sum((t - mean_t) ** 2 for t, _ in points)
    if spread == 0:
        return points[-1][1]
    slope = sum((t - mean_t) * (p - mean_p) for t, p in points) / spread
    return max(0.0, mean_p + slope * (at - mean_t))


def forecast(
    observations: Iterable[Observation], at: datetime
) -> tuple[dict[str, tuple[float | None, float | None, float | None]], str]:
    """Prices per instance type at `at` (on-demand, spot, scheduled) and the method used."""
    by_type: dict[str, list[Observation]] = defaultdict(list)
    for obs in observations:
        by_type[obs.instance_type].append(obs)
    if not by_type:
        return {}, LAST_VALUE
    latest = max(o.observed_at for seq in by_type.values() for o in seq)
    since = latest - WINDOW
    times = {o.observed_at for seq in by_type.values() for o in seq if o.observed_at >= since}
    method = TREND if len(times) >= 2 else LAST_VALUE
    target = at.timestamp()
    out: dict[str, tuple[float | None, float | None, float | None]] = {}
    for name, seq in by_type.items():
        seq.sort(key=lambda o: o.observed_at)
        recent = [o for o in seq if o.observed_at >= since]
        prices: list[float | None] = []
        for kind in range(3):
            points = [
                (o.observed_at.timestamp(), (o.on_demand, o.spot, o.scheduled)[kind])
                for o in recent
            ]
            known = [(t, p) for t, p in points if p is not None]
            if not known:
                prices.append(None)
            elif method == LAST_VALUE:
                prices.append(known[-1][1])
            else:
                prices.append(round(_fit(known, target), 6))
        out[name] = (prices[0], prices[1], prices[2])
    return out, method
