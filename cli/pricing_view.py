"""`pricing` across providers: ask each, keep going past failures, render one table or JSON."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cli import output

if TYPE_CHECKING:
    from providers.catalog import Catalog
    from providers.models import ResourcePricing


def gather_pricing(
    names: Sequence[str],
    make_catalog: Callable[[str], Catalog],
    ask: Callable[[Catalog], tuple[bool, Any]],
) -> tuple[bool, Any, list[ResourcePricing]]:
    """(windowed, results, failed providers). With one provider its error propagates; with
    several, a failing one becomes an `error` entry unless every one failed."""
    from providers.errors import ShoalError
    from providers.models import ResourcePricing

    results: list[ResourcePricing] = []
    failed: list[ResourcePricing] = []
    errors: list[ShoalError] = []
    for name in names:
        try:
            windowed, got = ask(make_catalog(name))
        except ShoalError as exc:
            if len(names) == 1:
                raise
            failed.append(ResourcePricing(provider=name, error=_named(name, str(exc))))
            errors.append(exc)
            continue
        if windowed:
            return True, got, []
        for pricing in got:
            pricing.provider = pricing.provider or name
        results.extend(got)
    if errors and not results:
        # Every provider failed: each failure once, the last as the error that sets the code.
        for entry in failed[:-1]:
            output.error(entry.error)
        last = errors[-1]
        last.args = (failed[-1].error,)  # same kind (exit code), provider named once
        raise last
    for entry in failed:
        output.warn(entry.error)
    return False, results, failed


def _named(provider: str, message: str) -> str:
    """The message with the provider named once: most already start with it."""
    if message.startswith((f"{provider}:", f"{provider} ")):
        return message
    return f"{provider}: {message}"


def render_pricing(
    windowed: bool,
    results: Any,
    failed: list[ResourcePricing],
    sort: str | None,
    limit: int | None,
    as_json: bool,
) -> None:
    from providers.compare import flatten, regroup, sort_rows
    from providers.wire import format_time, to_wire

    if windowed:
        if as_json:
            output.emit_json(to_wire(results))
            return
        kinds = any(p.kind for p in results.values())  # observed/forecast: cloud history
        rows = [
            [at, p.region.name, *([p.kind] if kinds else []), name, *_prices(item)]
            for at, p in results.items()
            for name, item in sorted(p.items.items())
        ]
        columns = ["At", "Region", *(["Kind"] if kinds else []), "Type"]
        output.table("pricing", [*columns, "On-demand /h", "Spot /h", "Scheduled /h"], rows)
        methods = sorted({p.method for p in results.values() if p.method})
        if methods:
            output.message(f"forecast method: {', '.join(methods)} (see README 'Forecasts')")
        return
    flat = flatten(results)
    if sort:
        flat = sort_rows(flat, sort)
    if limit is not None:
        flat = flat[:limit]
    if as_json:
        data = regroup(flat, failed) if (sort or limit) else [*results, *failed]
        output.emit_json(to_wire(data))
        return
    table_rows = [
        [
            row.pricing.provider,
            row.pricing.region.name,
            row.instance_type,
            *_shape(row.pricing.shapes.get(row.instance_type)),
            *_prices(row.item),
            row.pricing.currency or "USD",
            output.short_time(format_time(row.pricing.as_of)) if row.pricing.as_of else None,
        ]
        for row in flat
    ]
    columns = [
        "Provider",
        "Region",
        "Type",
        "vCPUs",
        "GiB",
        "GPU",
        "On-demand /h",
        "Spot /h",
        "Scheduled /h",
        "Currency",
        "As of (UTC)",
    ]
    output.table("pricing", columns, table_rows, keep=(2,))
    _pool_table(results)
    _notes(results)
    if any(r.pricing.provider == "local" and all(v is None for v in _prices(r.item)) for r in flat):
        output.message(
            "— = no price known; for the local provider, set [local.pricing] in the config file"
        )


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
        columns = ["Region", "Pool", "Nodes", "Spot", "$/h", "Used $/h", "Idle $/h", "Unpriced"]
        output.table("pool costs", columns, rows)


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
