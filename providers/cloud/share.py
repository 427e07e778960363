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
import os
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from providers.cloud.cache import CatalogCache, HistoryRow
from providers.cloud.offers import Offer, Snapshot
from providers.core.errors import ShoalError, UsageError
from providers.core.timeutil import utcnow
from providers.core.wire import format_time
from providers.models import RegionSpec

FORMAT = "shoal-catalog"
CLOUD_PROVIDERS = ("aws", "azure", "gcp")  # the built-in catalogs that keep this cache
VERSION = 1
_OFFER_FIELDS = (  # (wire, attribute)
    ("instanceType", "instance_type"),
    ("vcpus", "vcpus"),
    ("memoryGib", "memory_gib"),
    ("arch", "arch"),
    ("gpu", "gpu"),
    ("gpuCount", "gpu_count"),
    ("gpuMemoryGib", "gpu_memory_gib"),
    ("onDemand", "on_demand"),
    ("spot", "spot"),
    ("scheduled", "scheduled"),
    ("shapeSource", "shape_source"),
)


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
                    {wire: getattr(offer, attr) for wire, attr in _OFFER_FIELDS}
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


def parse(
    document: dict[str, Any], path: Path
) -> tuple[str, list[RegionSpec], list[Snapshot], list[HistoryRow]]:
    """The whole file checked (providers/cloud/export_file.py) before anything is written."""
    from providers.cloud.export_file import ExportFile
    from providers.core import schema

    place = schema.Place(ShoalError, str(path), fix="nothing was imported")
    checked = schema.validate(ExportFile, document, place)
    regions = [RegionSpec(name=r.name, location=r.location, zones=r.zones) for r in checked.regions]
    snapshots = []
    for item in checked.snapshots:
        snap = Snapshot(
            provider=checked.provider,
            region=item.region,
            fetched_at=item.fetchedAt,
            source=item.source,
            currency=item.currency,
            notes=item.notes,
        )
        for raw in item.offers:
            offer = Offer(**{attr: getattr(raw, wire) for wire, attr in _OFFER_FIELDS})
            # Exports from before unknown shapes were null wrote them as 0.
            offer.vcpus = offer.vcpus or None
            offer.memory_gib = offer.memory_gib or None
            snap.offers[offer.instance_type] = offer
        snapshots.append(snap)
    history = [(r, name, at.timestamp(), od, sp, sc) for r, name, at, od, sp, sc in checked.history]
    return checked.provider, regions, snapshots, history


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
