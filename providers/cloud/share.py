"""Export a provider's cached catalog to a file and import it elsewhere.

A team refreshes once where credentials are (spot prices, full specs) and hands the file
to machines that have none. The file is JSON (gzip when its name ends in `.gz`):

    {"format": "shoal-catalog", "version": 1, "provider": "aws", "exportedAt": "...",
     "regions": [{"name": ..., "location": ..., "zones": [...]}],
     "snapshots": [{"region", "fetchedAt", "source", "currency", "notes",
                    "offers": [{"instanceType", "vcpus", "memoryGib", "arch", "gpu",
                                "gpuCount", "gpuMemoryGib", "onDemand", "spot", "scheduled",
                                "shapeSource"}]}],
     "history": [[region, instanceType, observedAt (RFC 3339), onDemand, spot, scheduled]]}

Import checks the whole file before writing anything, keeps local snapshots that are newer
than the file's, and merges the history.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

from providers.cloud.cache import CatalogCache, HistoryRow
from providers.cloud.offers import Offer, Snapshot
from providers.errors import ShoalError, UsageError
from providers.models import RegionSpec
from providers.timeutil import utcnow
from providers.wire import format_time

FORMAT = "shoal-catalog"
CLOUD_PROVIDERS = ("aws", "azure", "gcp")  # the built-in catalogs that keep this cache
VERSION = 1
_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")
_ITEM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_OFFER_FIELDS = (
    ("instanceType", "instance_type", str),
    ("vcpus", "vcpus", float | None),
    ("memoryGib", "memory_gib", float | None),
    ("arch", "arch", str),
    ("gpu", "gpu", str),
    ("gpuCount", "gpu_count", int),
    ("gpuMemoryGib", "gpu_memory_gib", float),
    ("onDemand", "on_demand", float | None),
    ("spot", "spot", float | None),
    ("scheduled", "scheduled", float | None),
    ("shapeSource", "shape_source", str),
)
_OPTIONAL = frozenset({"shapeSource"})  # older exports lack it


@dataclass
class ImportReport:
    provider: str
    imported: list[str]  # regions whose snapshot came from the file
    kept: list[str]  # regions where the local snapshot was newer
    history_added: int  # observations new to this cache (snapshots' own included)


def export(cache: CatalogCache, provider: str) -> dict[str, Any]:
    snapshots = cache.snapshots(provider)
    if not snapshots and provider not in CLOUD_PROVIDERS:
        # Only cloud catalogs are cached; advice to fetch would not help the others.
        raise UsageError(
            f"{provider} keeps no cached catalog to export (only {', '.join(CLOUD_PROVIDERS)} "
            "do: their prices are fetched and cached)"
        )
    if not snapshots:
        raise ShoalError(
            f"nothing cached for {provider}; run `shoal pricing --provider {provider}` first"
        )
    regions, _ = cache.regions(provider)
    return {
        "format": FORMAT,
        "version": VERSION,
        "provider": provider,
        "exportedAt": format_time(utcnow()),
        "regions": [{"name": r.name, "location": r.location, "zones": r.zones} for r in regions],
        "snapshots": [
            {
                "region": info.region,
                "fetchedAt": format_time(info.fetched_at),
                "source": info.source,
                "currency": info.currency,
                "notes": list(info.notes),
                "offers": [
                    {wire: getattr(offer, attr) for wire, attr, _ in _OFFER_FIELDS}
                    for offer in cache.offers(provider, info.region)
                ],
            }
            for info in snapshots.values()
        ],
        "history": [
            [region, name, format_time(datetime.fromtimestamp(at, UTC)), od, sp, sc]
            for region, name, at, od, sp, sc in cache.history_rows(provider)
        ],
    }


def write(document: dict[str, Any], path: Path | None, stdout: IO[str]) -> None:
    """Write atomically to `path` (gzip for .gz), or to stdout when path is None."""
    text = json.dumps(document, separators=(",", ":"))
    if path is None:
        stdout.write(text + "\n")
        return
    directory = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=directory)
    except OSError as exc:
        raise ShoalError(f"--output {path}: {exc.strerror}; give a writable directory") from None
    try:
        # A file meant for sharing: readable as the umask allows, not mkstemp's 0600.
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "wb") as raw:
            data = text.encode()
            raw.write(gzip.compress(data, 6) if path.name.endswith(".gz") else data)
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ShoalError(f"--output {path}: {exc.strerror}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


MAX_IMPORT_BYTES = 1 << 30  # far above any real catalog; a bomb stops here


def _gunzip_capped(raw: bytes, path: Path) -> bytes:
    import zlib

    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = bytearray()
    data = raw
    while data:
        out += inflate.decompress(data, 1 << 20)
        if len(out) > MAX_IMPORT_BYTES:
            raise ShoalError(f"{path}: unpacks past {MAX_IMPORT_BYTES} bytes; not a catalog export")
        data = inflate.unconsumed_tail
    return bytes(out)


def read(path: Path, raw: bytes | None = None) -> dict[str, Any]:
    """The export document in `path`, or in `raw` bytes already read (stdin), named `path`."""
    if raw is None:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ShoalError(
                f"{path}: {exc.strerror}; give a file written by `catalog export`"
            ) from None
    if len(raw) > MAX_IMPORT_BYTES:
        raise ShoalError(f"{path}: larger than {MAX_IMPORT_BYTES} bytes; not a catalog export")
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = _gunzip_capped(raw, path)
        document = json.loads(raw)
    except (OSError, EOFError, ValueError, RecursionError) as exc:
        raise ShoalError(f"{path}: not a catalog export ({str(exc)[:120]})") from None
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise ShoalError(f'{path}: not a catalog export (no "format": "{FORMAT}")')
    if document.get("version") != VERSION:
        raise ShoalError(
            f"{path}: catalog export version {document.get('version')!r}; this shoal reads "
            f"version {VERSION}"
        )
    return document


class _Checker:
    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, message: str) -> ShoalError:
        return ShoalError(f"{self.path}: {where}: {message}; nothing was imported")

    def value(self, where: str, value: Any, kind: Any) -> Any:
        if kind == float | None:
            if value is None:
                return None
            kind = float
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise self.fail(where, f"expected {getattr(kind, '__name__', kind)}, got {value!r}")
        if kind is float and not (math.isfinite(value) and 0 <= value <= 1e9):
            raise self.fail(where, f"must be a finite number >= 0, got {value!r}")
        if kind is int and not 0 <= value <= 1_000_000:
            raise self.fail(where, f"must be an integer from 0 to 1000000, got {value!r}")
        if kind is str:
            value = _CONTROL.sub("", value)[:1000]
        return value

    def name(self, where: str, value: Any) -> str:
        text: str = self.value(where, value, str)
        if not _ITEM_NAME.match(text):
            raise self.fail(where, f"{text!r} is not a region or instance type name")
        return text

    def time(self, where: str, value: Any) -> datetime:
        from providers.timeutil import parse_time

        text = self.value(where, value, str)
        try:
            at = parse_time(text, where)
        except ShoalError:
            raise self.fail(where, f"{text!r} is not an RFC 3339 time") from None
        if at > utcnow() + timedelta(minutes=10):
            raise self.fail(where, f"{text} is in the future; the exporting clock is wrong")
        return at


def parse(
    document: dict[str, Any], path: Path
) -> tuple[str, list[RegionSpec], list[Snapshot], list[HistoryRow]]:
    check = _Checker(path)
    provider = check.value("provider", document.get("provider"), str)
    if not _NAME.match(provider):
        raise check.fail("provider", f"{provider!r} is not a provider name")
    regions = []
    for i, item in enumerate(check.value("regions", document.get("regions", []), list)):
        where = f"regions[{i}]"
        item = check.value(where, item, dict)
        zones = check.value(f"{where}.zones", item.get("zones", []), list)
        regions.append(
            RegionSpec(
                name=check.name(f"{where}.name", item.get("name")),
                location=check.value(f"{where}.location", item.get("location", ""), str),
                zones=[check.value(f"{where}.zones", z, str) for z in zones],
            )
        )
    snapshots: list[Snapshot] = []
    for i, item in enumerate(check.value("snapshots", document.get("snapshots"), list)):
        where = f"snapshots[{i}]"
        item = check.value(where, item, dict)
        snap = Snapshot(
            provider=provider,
            region=check.name(f"{where}.region", item.get("region")),
            fetched_at=check.time(f"{where}.fetchedAt", item.get("fetchedAt")),
            source=check.value(f"{where}.source", item.get("source", ""), str),
            currency=check.value(f"{where}.currency", item.get("currency", "USD"), str),
            notes=[
                check.value(f"{where}.notes", n, str)
                for n in check.value(f"{where}.notes", item.get("notes", []), list)
            ],
        )
        if snap.currency != "USD":
            raise check.fail(f"{where}.currency", f"{snap.currency!r}; only USD is compared")
        for j, raw in enumerate(check.value(f"{where}.offers", item.get("offers"), list)):
            at = f"{where}.offers[{j}]"
            raw = check.value(at, raw, dict)
            fields = {
                attr: check.value(f"{at}.{wire}", raw.get(wire), kind)
                for wire, attr, kind in _OFFER_FIELDS
                if wire in raw or (kind != float | None and wire not in _OPTIONAL)
            }
            offer = Offer(**fields)
            # Exports from before unknown shapes were null wrote them as 0.
            offer.vcpus = offer.vcpus or None
            offer.memory_gib = offer.memory_gib or None
            check.name(f"{at}.instanceType", offer.instance_type)
            snap.offers[offer.instance_type] = offer
        if any(s.region == snap.region for s in snapshots):
            raise check.fail(where, f"region {snap.region!r} appears twice")
        snapshots.append(snap)
    history: list[HistoryRow] = []
    for i, row in enumerate(check.value("history", document.get("history", []), list)):
        where = f"history[{i}]"
        row = check.value(where, row, list)
        if len(row) != 6:
            raise check.fail(
                where, "expected [region, type, observedAt, onDemand, spot, scheduled]"
            )
        history.append(
            (
                check.name(where, row[0]),
                check.name(where, row[1]),
                check.time(where, row[2]).timestamp(),
                check.value(where, row[3], float | None),
                check.value(where, row[4], float | None),
                check.value(where, row[5], float | None),
            )
        )
    return provider, regions, snapshots, history


def load(cache: CatalogCache, path: Path, raw: bytes | None = None) -> ImportReport:
    provider, regions, snapshots, history = parse(read(path, raw), path)
    report = ImportReport(provider, [], [], 0)
    with cache.transaction():  # the whole file or nothing
        local = cache.snapshots(provider)
        before = cache.history_count(provider)
        if regions and not cache.regions(provider)[0]:
            cache.save_regions(provider, regions, utcnow())
        for snap in snapshots:
            mine = local.get(snap.region)
            if mine is not None and mine.fetched_at >= snap.fetched_at:
                report.kept.append(snap.region)
                continue
            cache.save(snap)
            report.imported.append(snap.region)
        cache.add_history(provider, history)
        report.history_added = cache.history_count(provider) - before
    return report
