"""The offers document `alloc --offers` reads: what `shoal offers --json` prints (its fields
are a contract: cli/schemas/offers.schema.json), checked with pydantic as any input of the
user's is, and read into the few records placement acts on. Fields placement does not read
are ignored, as a newer `shoal offers` may add some; a field it reads that is missing or of
the wrong kind is one line naming it (`--offers <stdin>: offers[0].market: must be
'onDemand' or 'spot', got string 'ondemand'`).

A document without offers is the answer "nothing fits now": a NoCapacityError (75) that
says briefly why each candidate was rejected and which providers failed.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from providers.core.errors import NoCapacityError, UsageError, shown
from providers.core.numbers import reject_constant
from providers.core.schema import Place, validate

FIX = "give what `shoal offers --json` prints"


def _stamp(value: str | None) -> str | None:
    if value is not None:
        try:
            datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{shown(value)} is not an RFC 3339 time") from None
    return value


Name = Annotated[str, Field(min_length=1)]
Stamp = Annotated[str | None, AfterValidator(_stamp)]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="ignore", strict=True, allow_inf_nan=False, defer_build=True
    )


class RegionDoc(_Model):
    name: Name


class ShapeDoc(_Model):
    vcpus: float | None = None
    memoryGiB: float | None = None
    gpu: str | None = None
    gpuCount: int | None = None
    arch: str | None = None


class ReservationDoc(_Model):
    id: Name
    kind: str = ""
    zone: str | None = None
    start: Stamp = None
    end: Stamp = None


class BindingDoc(_Model):
    code: str = ""
    name: str = ""
    free: float | None = None
    perInstance: float | None = None


class PoolDoc(_Model):
    key: Name
    value: str


class OfferDoc(_Model):
    provider: Name
    driver: Name
    region: RegionDoc
    zones: list[str] = []
    instanceType: str = ""
    shape: ShapeDoc | None = None
    market: Literal["onDemand", "spot"]
    instances: int = Field(1, ge=1, le=10_000)
    gpusPerInstance: int | None = Field(None, ge=0)
    totalPerHour: float | None = None
    fitsNow: int | None = None
    binding: BindingDoc | None = None
    reservation: ReservationDoc | None = None
    pool: PoolDoc | None = None


class RejectedDoc(_Model):
    provider: str = ""
    region: RegionDoc | None = None
    instanceType: str = ""
    market: str | None = None
    reason: str = ""
    code: str = ""


class FailureDoc(_Model):
    provider: str = ""
    error: str = ""


class RequestDoc(_Model):
    gpus: int | None = None
    cpu: float | None = None
    ram: float | None = None


class OffersDoc(_Model):
    request: RequestDoc | None = None
    offers: list[OfferDoc]
    rejected: list[RejectedDoc] = []
    failures: list[FailureDoc] = []


# -- what placement reads ---------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    vcpus: float | None = None
    memory_gib: float | None = None
    gpu: str = ""
    gpu_count: int = 0


@dataclass(frozen=True)
class Reservation:
    id: str
    kind: str  # capacity-reservation, capacity-block, ...
    zone: str = ""
    start: datetime | None = None
    end: datetime | None = None


@dataclass(frozen=True)
class Pool:
    key: str  # the node label that names the pool
    value: str


@dataclass(frozen=True)
class Offer:
    provider: str
    driver: str  # the shoal driver that launches it: aws, kubernetes, process, gcp, ...
    region: str
    zones: tuple[str, ...]
    instance_type: str
    market: str  # onDemand | spot (the spec's words)
    instances: int = 1
    shape: Shape = Shape()
    gpus_each: int | None = None  # GPUs each instance takes (a pod may take part of a node)
    total_per_hour: float | None = None
    fits_now: int | None = None  # instances that can launch now (None: not known)
    binding: str = ""  # the limit that stops the next instance, in words
    reservation: Reservation | None = None
    pool: Pool | None = None

    @property
    def spot(self) -> bool:
        return self.market == "spot"


@dataclass(frozen=True)
class Request:
    """What the offers were asked for (the parts a definition takes from it)."""

    gpus: int | None = None
    cpu: float | None = None
    ram: float | None = None


@dataclass(frozen=True)
class Document:
    offers: list[Offer]
    request: Request = Request()
    rejected: Sequence[RejectedDoc] = ()
    failures: Sequence[FailureDoc] = ()


def read(path: str) -> Document:
    """The document in the file `path`, or on stdin for `-`."""
    source = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as fh:
                raw = fh.read()
    except FileNotFoundError:
        raise UsageError(f"--offers {path!r}: no such file; {FIX}, or - for stdin") from None
    except OSError as exc:
        raise UsageError(f"--offers {path!r}: cannot read: {exc.strerror or exc}") from None
    return parse(raw, f"--offers {source}")


def parse(raw: bytes | str, source: str) -> Document:
    if not raw.strip():
        raise UsageError(f"{source}: empty; {FIX}")
    try:
        data = json.loads(raw, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{source}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}; {FIX}") from None
    except (ValueError, RecursionError) as exc:  # NaN, not UTF-8, nested too deeply
        raise UsageError(f"{source}: not JSON ({' '.join(str(exc).split())[:80]}); {FIX}") from None
    return of(data, source)


def of(data: Any, source: str) -> Document:
    """The document from decoded JSON (`alloc --best` has it as the offers engine made it)."""
    checked = validate(OffersDoc, data, Place(UsageError, label=source, fix=FIX))
    request = checked.request or RequestDoc()
    return Document(
        offers=[_offer(o) for o in checked.offers],
        request=Request(gpus=request.gpus, cpu=request.cpu, ram=request.ram),
        rejected=checked.rejected,
        failures=checked.failures,
    )


def _offer(doc: OfferDoc) -> Offer:
    shape = doc.shape or ShapeDoc()
    reserved = doc.reservation
    return Offer(
        provider=doc.provider,
        driver=doc.driver,
        region=doc.region.name,
        zones=tuple(z for z in doc.zones if z),
        instance_type=doc.instanceType,
        market=doc.market,
        instances=doc.instances,
        shape=Shape(
            vcpus=shape.vcpus,
            memory_gib=shape.memoryGiB,
            gpu=shape.gpu or "",
            gpu_count=shape.gpuCount or 0,
        ),
        gpus_each=doc.gpusPerInstance,
        total_per_hour=doc.totalPerHour,
        fits_now=doc.fitsNow,
        binding=_binding(doc.binding),
        reservation=None
        if reserved is None
        else Reservation(
            id=reserved.id,
            kind=reserved.kind,
            zone=reserved.zone or "",
            start=_time(reserved.start),
            end=_time(reserved.end),
        ),
        pool=None if doc.pool is None else Pool(doc.pool.key, doc.pool.value),
    )


def _binding(doc: BindingDoc | None) -> str:
    if doc is None or not doc.code:
        return ""
    named = doc.code if doc.name in ("", doc.code) else f"{doc.code} {doc.name}"
    if doc.free is None:
        return named
    each = f", {doc.perInstance:g} each" if doc.perInstance is not None else ""
    return f"{named}: {doc.free:g} free{each}"


def _time(value: str | None) -> datetime | None:
    if value is None:
        return None
    from datetime import UTC

    stamp = datetime.fromisoformat(value)
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


def market_word(market: str | None) -> str:
    """The spec's market as the command line says it: on-demand, spot."""
    return {"onDemand": "on-demand"}.get(market or "", market or "")




def none_fits(document: Document) -> NoCapacityError:
    """"No offer fits now" (75), with why: the rejected candidates counted by reason (the
    first of each quoted), and the providers that failed."""
    parts = []
    by_code = Counter(r.code or "other" for r in document.rejected)
    for code, count in by_code.most_common():
        first = next(r for r in document.rejected if (r.code or "other") == code)
        where = " ".join(
            w
            for w in (
                first.provider,
                first.region.name if first.region else "",
                first.instanceType,
                market_word(first.market),
            )
            if w
        )
        said = f"{where}: {first.reason}" if first.reason else where
        parts.append(f"{count} {code} (e.g. {said})")
    text = "no offer fits now"
    if parts:
        text += f": {len(document.rejected)} rejected: " + "; ".join(parts)
    for failure in document.failures:
        text += f"; {failure.provider} failed: {failure.error}"
    if not parts and not document.failures:
        text += ": the offers document lists none (and no rejected candidate)"
    return NoCapacityError(text)
