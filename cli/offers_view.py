"""`offers`' rendering: the ranked offers as a table (or the JSON object), the candidates
left out with `--explain`, notes and failures on stderr."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cli import output

if TYPE_CHECKING:
    from providers.models import InstanceTypeSpec
    from providers.offers.model import Offer, OffersAnswer

MARKETS = {"onDemand": "od", "spot": "spot"}


def render_offers(answer: OffersAnswer, as_json: bool, *, explain: bool = False) -> None:
    if as_json:
        output.emit_json(answer.wire())
    if answer.error is not None:  # every provider failed: the error says each, once
        raise answer.error
    for failure in answer.failures:
        output.warn(failure.message)
    if as_json:
        return
    if output.names():  # provider/region/type/market, one per line: what a script passes on
        output.emit_names(
            f"{o.provider}/{o.region.name}/{o.instance_type}/{o.market}" for o in answer.offers
        )
        return
    if answer.request.get("groupBy") == "gpu":
        _gpu_table(answer.offers)
    elif answer.offers:
        _offer_table(answer.offers)
    if not answer.offers:
        hint = "" if explain else "; --explain lists the candidates left out, with why"
        output.message(f"no offers{hint}")
    if explain:
        _rejected_table(answer)
    for note in answer.notes:
        output.message(note)


def _money(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def shape_text(spec: InstanceTypeSpec) -> str:
    """`192c 2048G 8xH100`, `4c 16G arm64`: vCPUs, GiB, GPUs, and the arch when not x86."""
    from cli.tables import number_text

    parts = []
    if spec.vcpus is not None:
        parts.append(f"{number_text(float(spec.vcpus))}c")
    if spec.memory_gib is not None:
        parts.append(f"{number_text(float(spec.memory_gib))}G")
    if spec.gpu_count:
        parts.append(f"{spec.gpu_count}x{spec.gpu or '?'}")
    if spec.arch and spec.arch != "x86_64":
        parts.append(spec.arch)
    return " ".join(parts) or "?"


def _limit_text(offer: Offer) -> str | None:
    said = []
    if offer.reservation is not None:
        held = offer.reservation
        said.append(f"reservation {held.id}: {held.available} free")
    if offer.binding is not None:
        said.append(offer.binding.describe("each"))
    if offer.fits_now is None and offer.notes:
        said.append(offer.notes[0])
    return "; ".join(said) or None


def _offer_table(offers: list[Offer]) -> None:
    """Provider and region head their rows on a narrow terminal; the shape, then $/GPU-h
    are left out before any price, type or fit; the binding limit moves under its row."""
    from cli.tables import Col, table

    columns = [
        Col("Provider", group="{}"),
        Col("Region", group="{}"),
        Col("Type"),
        Col("Shape", drop=1),
        Col("Mkt"),
        Col("Inst", right=True),
        Col("$/h", right=True),
        Col("Total/h", right=True),
        Col("$/GPU-h", right=True, drop=0),
        Col("Fits", right=True),
        Col("Binding", free=True, below=True),
    ]
    wide = output.wide()
    if wide:
        columns += [Col("Zones"), Col("As of (UTC)")]
    rows: list[list[Any]] = []
    for o in offers:
        row: list[Any] = [
            o.provider,
            o.region.name,
            o.instance_type,
            shape_text(o.shape),
            MARKETS[o.market],
            o.instances,
            _money(o.price_per_hour),
            _money(o.total_per_hour),
            _money(o.price_per_gpu_hour),
            o.fits_now,
            _limit_text(o),
        ]
        if wide:
            from providers.core.wire import format_time

            row += [",".join(o.zones) or None, format_time(o.as_of) if o.as_of else None]
        rows.append(row)
    table("offers", columns, rows, keep=(2,))


def _gpu_table(offers: list[Offer]) -> None:
    from cli.tables import Col, table

    columns = [
        Col("GPU"),
        Col("GiB", right=True, drop=1),
        Col("$/GPU-h", right=True),
        Col("Provider"),
        Col("Region"),
        Col("Type"),
        Col("Mkt"),
        Col("Inst", right=True, drop=0),
        Col("Total/h", right=True),
        Col("Fits", right=True),
    ]
    rows = [
        [
            o.shape.gpu or "—",
            o.shape.gpu_memory_gib or None,
            _money(o.price_per_gpu_hour),
            o.provider,
            o.region.name,
            o.instance_type,
            MARKETS[o.market],
            o.instances,
            _money(o.total_per_hour),
            o.fits_now,
        ]
        for o in offers
    ]
    if rows:
        table("cheapest offer per GPU model", columns, rows, keep=(0,))


def _rejected_table(answer: OffersAnswer) -> None:
    from cli.tables import Col, table

    rows = [
        [
            r.provider,
            r.region.name,
            r.instance_type or None,
            MARKETS.get(r.market or ""),
            r.code,
            r.reason,
        ]
        for r in answer.rejected
    ]
    if not rows:
        output.message("no candidate was left out")
        return
    columns = [
        Col("Provider", group="{}"),
        Col("Region", group="{}"),
        Col("Type"),
        Col("Mkt"),
        Col("Code"),
        Col("Reason", wrap=True),
    ]
    table("left out", columns, rows, keep=(2,))
