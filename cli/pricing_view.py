"""`pricing`'s rendering: one table (or JSON) over every provider's answer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cli import output, tables
from cli.tables import Col

if TYPE_CHECKING:
    from providers.models import ResourcePricing
    from providers.query import PricingAnswer


# Hourly prices by class, in kubectl's short words (the JSON has the spec's names).
PRICE_COLUMNS = (Col("od /h", right=True), Col("spot /h", right=True), Col("sched /h", right=True))


def render_pricing(answer: PricingAnswer, as_json: bool) -> None:
    from providers.core.wire import format_time, to_wire
    from providers.models import ResourcePricing

    failed = [ResourcePricing(provider=f.provider, error=f.message) for f in answer.failures]
    if answer.error is not None:  # every provider failed: the error says each, once
        if as_json:
            output.emit_json(to_wire(failed))
        raise answer.error
    for failure in answer.failures:
        output.warn(failure.message)
    if answer.window is not None:
        _render_window(answer.window, as_json)
        return
    if as_json:
        output.emit_json(to_wire([*answer.now, *failed]))
        return
    rows = answer.rows
    table_rows = [
        [
            row.pricing.provider,
            row.pricing.region.name,
            row.instance_type,
            *_shape(row.pricing.shapes.get(row.instance_type)),
            *_prices(row.item),
            row.pricing.currency or "USD",
            format_time(row.pricing.as_of) if row.pricing.as_of else None,
        ]
        for row in rows
    ]
    _price_table(table_rows)
    _pool_table(answer.now)
    _notes(answer.now)
    if any(r.pricing.provider == "local" and all(v is None for v in _prices(r.item)) for r in rows):
        output.message(
            "— = no price known; for the local provider, set [local.pricing] in the config file"
        )


def _price_table(rows: list[list[Any]]) -> None:
    """Rows of [provider, region, type, vCPUs, GiB, GPU, 3 prices, currency, as of]. On a
    narrow terminal the provider, region, currency and age head their rows (rows grouped
    by them), then the shapes are left out (GiB, vCPUs, GPU): never a price, type or
    region. `-o wide` adds the fetch time."""
    from cli.render import age
    from providers.core.timeutil import utcnow

    now = utcnow()
    one_currency = len({r[9] for r in rows}) <= 1
    columns = [
        Col("Provider", group="{}"),
        Col("Region", group="{}"),
        Col("Type"),
        Col("vCPUs", drop=3),
        Col("GiB", drop=2),
        Col("GPU", drop=4),
        *PRICE_COLUMNS,
        Col("Currency", group="{}", drop=1 if one_currency else None),
        Col("Age", group="as of {} ago", drop=0),
    ]
    wide = output.wide()
    if wide:
        columns.append(Col("As of (UTC)"))
    shown = [[*r[:10], age(r[10], now), *([r[10]] if wide else [])] for r in rows]
    tables.table("pricing", columns, shown)


def _render_window(points: dict[str, ResourcePricing], as_json: bool) -> None:
    from providers.core.wire import to_wire

    if as_json:
        output.emit_json(to_wire(points))
        return
    kinds = any(p.kind for p in points.values())  # observed/forecast: cloud history
    rows = [
        [at, p.region.name, *([p.kind] if kinds else []), name, *_prices(item)]
        for at, p in points.items()
        for name, item in sorted(p.items.items())
    ]
    columns = [
        Col("At", group="{}"),
        Col("Region", group="{}"),
        *([Col("Kind", group="{}")] if kinds else []),
        Col("Type"),
    ]
    tables.table("pricing", [*columns, *PRICE_COLUMNS], rows)
    methods = sorted({p.method for p in points.values() if p.method})
    if methods:
        output.message(f"forecast method: {', '.join(methods)} (see README 'Forecasts')")


def _pool_table(results: Sequence[ResourcePricing]) -> None:
    def money(value: float | None) -> float | None:
        # None is an unknown price (no node of the pool priced): shown as "—", never 0.
        return None if value is None else round(value, 4)

    rows = [
        [
            p.region.name,
            f"{pool.key}={pool.value}" if pool.value else f"{pool.key} (none)",
            pool.nodes,
            pool.spot_nodes,
            money(pool.hourly),
            money(pool.used_hourly),
            money(pool.idle_hourly),
            pool.unpriced_nodes or None,
        ]
        for p in results
        for pool in p.pools
    ]
    if rows:
        columns = [
            Col("Region", group="{}"),
            Col("Pool"),
            Col("Nodes"),
            Col("Spot"),
            Col("$/h"),
            Col("Used $/h"),
            Col("Idle $/h"),
            Col("Unpriced", drop=1),
        ]
        tables.table("pool costs", columns, rows)


def _shape(spec: Any) -> list[Any]:
    """vCPUs, memory GiB and `MODEL xCOUNT`; unknown where the catalog has no shape."""
    if spec is None:
        return [None, None, None]
    gpu = f"{spec.gpu or '?'} x{spec.gpu_count}" if spec.gpu_count else None
    return [spec.vcpus, spec.memory_gib, gpu]


def _prices(item: Any) -> list[float | None]:
    return [item.on_demand_price, item.spot_price, item.scheduled_price]


def _notes(results: Sequence[ResourcePricing]) -> None:
    """Each provider's notes once (what is missing and why), and the stale regions."""
    seen: set[tuple[str, str]] = set()
    for pricing in results:
        for note in pricing.notes:
            if (pricing.provider, note) not in seen:
                seen.add((pricing.provider, note))
                output.message(f"{pricing.provider}: {note}")
