"""Stream an AWS Price List offer file (JSON) and keep only what is asked for.

An EC2 region's offer file is hundreds of MB: one object with metadata, `products`
(sku -> {sku, productFamily, attributes}) and `terms` (`OnDemand` / `Reserved`: sku ->
{offerTermCode key -> {priceDimensions: {rateCode: {unit, pricePerUnit: {currency: str}}}}}).
See https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/reading-service-price-list-file-for-services.html

Nothing here loads the whole file. The scanner walks the top-level structure itself and
cuts products and term entries out of the byte stream in batches of about 1 MB, finding each
entry's end with C-speed primitives: most entries share one brace skeleton (every product
`{{}}`), so an entry ends at its k-th `}`; otherwise braces are counted. A batch is kept only
if it is proven: no escapes, no brace inside a string, and (for the k-th-brace cut) the batch's
brace skeleton is exactly the first entry's skeleton n times. Anything else goes through an
exact tokenizer. A product is decoded only if every byte needle (e.g. `"Linux"`) is in its
slice, and a term only if its sku was kept, so most of the file is never decoded.
Keys may come in any order and any whitespace: when `terms` precedes `products`, the hourly
price of every sku is kept (a few bytes each) and matched afterwards. Once both `products`
and `terms.OnDemand` are complete the scan stops, so a trailing `Reserved` section is never
downloaded. The input is an iterator of byte chunks of any size, so this module does no I/O.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from providers.core.errors import ShoalError

_WS = re.compile(rb"[ \t\n\r]*")
_KEY = re.compile(rb'[ \t\n\r]*"([^"\\]*)"[ \t\n\r]*:')
_TOKEN = re.compile(rb'[{}\[\]"]')
# From just after an opening quote to just after its closing quote.
_STRING_REST = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_SCALAR = re.compile(rb"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
# Every byte but `"`, `{` and `}`: deleting them leaves a slice's skeleton of strings and
# braces, in which a string holding a brace shows up as a quote that does not pair off.
_NOT_SKELETON = bytes(b for b in range(256) if b not in b'"{}')
_META_KEYS = ("formatVersion", "offerCode", "version", "publicationDate")


_B = rb"[ \t\n\r]*+"
# A member whose value is an object, up to and including the value's opening brace.
_HEAD_FIRST = re.compile(_B + rb'"([^"\\]*+)"' + _B + b":" + _B + rb"\{")
_HEAD_NEXT = re.compile(_B + b"," + _HEAD_FIRST.pattern)
_BATCH_LOOKAHEAD = 1 << 20
_LOOKAHEAD = 1 << 16
# A single product or term larger than this is not an offer file we understand.
_MAX_ENTRY = 64 << 20
# A value to skip that is still open after this many buffered bytes is skipped by walking
# its members instead, so skipping never buffers a whole section.
_SKIP_WINDOW = 1 << 20
_OPEN_BRACE = 0x7B
_OPEN_BRACKET = 0x5B
_QUOTE = 0x22

Product = dict[str, Any]


class OfferFileError(ShoalError):
    """The offer file is malformed or cut short; the message says where (byte offset)."""


@dataclass
class OfferScan:
    """What a scan kept: the products `keep` accepted, and their hourly on-demand price."""

    metadata: dict[str, str] = field(default_factory=dict)
    products: dict[str, Product] = field(default_factory=dict)  # sku -> product
    # sku -> (currency, price per hour) for kept products with an hourly OnDemand price
    hourly: dict[str, tuple[str, float]] = field(default_factory=dict)
    currencies: set[str] = field(default_factory=set)  # of every hourly price looked at
    saw_products: bool = False
    saw_on_demand: bool = False
    stopped_early: bool = False  # True when the rest of the file was not needed
    bytes_scanned: int = 0


def scan_offer_file(
    chunks: Iterable[bytes],
    keep: Callable[[Product], bool],
    needles: tuple[bytes, ...] = (),
) -> OfferScan:
    """Scan an offer file given as byte chunks. `needles` are byte strings that every
    product `keep` can accept contains verbatim (e.g. `b'"Linux"'`); they only let the scan
    skip products without decoding them, `keep` decides."""
    reader = _Reader(iter(chunks))
    scan = OfferScan()
    pending: dict[str, tuple[str, float]] = {}  # terms seen before products: every sku
    reader.begin_object()
    first = True
    while (key := reader.next_key(first)) is not None:
        first = False
        if key == "products" and not scan.saw_products:
            _products(reader, keep, needles, scan)
            scan.saw_products = True
        elif key == "terms" and not scan.saw_on_demand:
            wanted = scan.products if scan.saw_products else None
            into = scan.hourly if wanted is not None else pending
            scan.saw_on_demand = _terms(reader, wanted, into, scan)
        elif key in _META_KEYS:
            value = reader.decode_value()
            if isinstance(value, str):
                scan.metadata[key] = value
        else:
            reader.skip_value()
        if scan.saw_products and scan.saw_on_demand:
            scan.stopped_early = True
            break
    else:
        reader.end_of_document()
    for sku, price in pending.items():
        if sku in scan.products:
            scan.hourly[sku] = price
    scan.bytes_scanned = reader.offset + reader.pos
    return scan


def _products(
    reader: _Reader, keep: Callable[[Product], bool], needles: tuple[bytes, ...], scan: OfferScan
) -> None:
    reader.begin_object()
    first = True
    while (batch := reader.member_batch(first)) is not None:
        first = False
        buf, members, clean = batch
        for sku, start, end in members:
            # An unclean slice (escapes) might spell a needle differently: decode it.
            if clean and not _has_all(buf, needles, start, end):
                continue
            product = _decode(buf[start:end], reader.offset + start)
            if isinstance(product, dict) and keep(product):
                scan.products[sku.decode("utf-8", "replace")] = product


def _has_all(buf: bytes, needles: tuple[bytes, ...], start: int, end: int) -> bool:
    # A plain loop: all() over a generator costs more than the finds on this hot path.
    for needle in needles:  # noqa: SIM110
        if buf.find(needle, start, end) < 0:
            return False
    return True


def _terms(
    reader: _Reader,
    wanted: dict[str, Product] | None,
    into: dict[str, tuple[str, float]],
    scan: OfferScan,
) -> bool:
    """Read `terms`; True if it had `OnDemand`. With `wanted` known (products came first)
    this returns right after `OnDemand`, leaving the rest of the stream unread."""
    reader.begin_object()
    first = True
    seen = False
    while (term_type := reader.next_key(first)) is not None:
        first = False
        if term_type != "OnDemand" or seen:
            reader.skip_value()
            continue
        seen = True
        keys = None if wanted is None else {sku.encode() for sku in wanted}
        reader.begin_object()
        inner_first = True
        while (batch := reader.member_batch(inner_first)) is not None:
            inner_first = False
            buf, members, clean = batch
            for sku, start, end in members:
                if keys is not None and sku not in keys:
                    continue
                if wanted is None and clean and buf.find(b'"Hrs"', start, end) < 0:
                    continue
                terms = _decode(buf[start:end], reader.offset + start)
                price = hourly_price(terms, scan.currencies)
                if price is not None:
                    into[sku.decode("utf-8", "replace")] = price
        if wanted is not None:
            return True
    return seen


def hourly_price(terms: Any, currencies: set[str] | None = None) -> tuple[str, float] | None:
    """(currency, price) of the first hourly price dimension of one sku's terms, USD
    preferred; records every currency seen in `currencies`."""
    if not isinstance(terms, dict):
        return None
    found: tuple[str, float] | None = None
    for term in terms.values():
        dimensions = term.get("priceDimensions") if isinstance(term, dict) else None
        if not isinstance(dimensions, dict):
            continue
        for dimension in dimensions.values():
            if not isinstance(dimension, dict) or dimension.get("unit") not in ("Hrs", "Hours"):
                continue
            per_unit = dimension.get("pricePerUnit")
            if not isinstance(per_unit, dict) or not per_unit:
                continue
            if currencies is not None:
                currencies.update(str(c) for c in per_unit)
            currency = "USD" if "USD" in per_unit else str(next(iter(per_unit)))
            try:
                price = float(per_unit[currency])
            except (TypeError, ValueError):
                continue
            if found is None or (currency == "USD" and found[0] != "USD"):
                found = (currency, price)
    return found


def _decode(raw: bytes, at: int) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OfferFileError(f"malformed JSON in the entry at byte {at} ({exc})") from None


# -- the byte-level reader ---------------------------------------------------------------


class _Reader:
    """A window on the stream: `buf[pos:]` is unread; `offset` is the stream offset of
    `buf[0]`. Consumed bytes are dropped whenever a chunk is appended."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self.buf = b""
        self.pos = 0
        self.offset = 0
        self.eof = False

    def more(self, wanted: int = 1) -> bool:
        """Append at least `wanted` more bytes (fewer at the end); False if none came."""
        if self.eof:
            return False
        parts: list[bytes] = []
        got = 0
        for chunk in self._chunks:
            parts.append(chunk)
            got += len(chunk)
            if got >= wanted:
                break
        else:
            self.eof = True
        if not got:
            return False
        # One join per call: tiny chunks must not turn into one copy per chunk.
        self.offset += self.pos
        self.buf = b"".join([self.buf[self.pos :], *parts])
        self.pos = 0
        return True

    def top_up(self, wanted: int) -> None:
        missing = wanted - (len(self.buf) - self.pos)
        if missing > 0:
            self.more(missing)

    def fail(self, what: str) -> OfferFileError:
        where = self.offset + self.pos
        if self.eof and self.pos >= len(self.buf):
            return OfferFileError(f"the file ends early at byte {where} (truncated?)")
        return OfferFileError(f"malformed JSON at byte {where}: {what}")

    def peek(self) -> int:
        """The next non-blank byte (not consumed), -1 at the end of the stream."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return -1

    def begin_object(self) -> None:
        if self.peek() != _OPEN_BRACE:
            raise self.fail("expected an object")
        self.pos += 1

    def next_key(self, first: bool) -> str | None:
        """The next member's key (the reader then sits on its value), None at `}`."""
        self.top_up(_LOOKAHEAD)
        c = self.peek()
        if c == 0x7D:
            self.pos += 1
            return None
        if not first:
            if c != 0x2C:
                raise self.fail("expected ',' or '}'")
            self.pos += 1
        match = _KEY.match(self.buf, self.pos)
        if match is not None:
            self.pos = match.end()
            return match.group(1).decode("utf-8", "replace")
        # A key with escapes, or a key longer than the lookahead.
        if self.peek() != _QUOTE:
            raise self.fail("expected a key")
        key = self.decode_value()
        if not isinstance(key, str):  # pragma: no cover - a quote always starts a string
            raise self.fail("expected a key")
        if self.peek() != 0x3A:
            raise self.fail("expected ':'")
        self.pos += 1
        return key

    def member_batch(
        self, first: bool, skipping: bool = False
    ) -> tuple[bytes, list[tuple[bytes, int, int]], bool] | None:
        """The next object members as (raw key, start, end) spans in the returned buffer,
        None once the object is closed. The third item says the spans were cut from a
        clean run (no escape, no brace inside a string), where every brace is structural
        so counting braces finds the ends; otherwise one member is read exactly (its key
        is then the decoded key, re-encoded)."""
        self.top_up(_BATCH_LOOKAHEAD)
        buf = self.buf
        for cut in (_cut_same_shape, _cut_counting):
            members, end, shape = cut(buf, self.pos, first)
            if not members:
                break
            run = buf[self.pos : end]
            if b"\\" in run:
                break
            skeleton = run.translate(None, _NOT_SKELETON).replace(b'""', b"")
            # Same-shape cuts are proven by the skeleton being the shape n times; counted
            # cuts by the run having no brace inside a string (no unpaired quote).
            clean = skeleton == shape * len(members) if shape else b'"' not in skeleton
            if clean:
                self.pos = end
                return buf, members, True
        key = self.next_key(first)
        if key is None:
            return None
        if skipping:
            self.skip_value()
            return self.buf, [], False
        end = self.value_end()  # may read more, which moves the window: `pos` follows
        start = self.pos
        self.pos = end
        return self.buf, [(key.encode(), start, end)], False

    def value_end(self) -> int:
        """Where the value at `pos` ends (exclusive), reading more as needed; bounded."""
        if self.peek() < 0:
            raise self.fail("expected a value")
        while True:
            end = _value_end(self.buf, self.pos, self.eof)
            if end >= 0:
                return end
            if len(self.buf) - self.pos > _MAX_ENTRY:
                raise OfferFileError(
                    f"an entry at byte {self.offset + self.pos} is larger than "
                    f"{_MAX_ENTRY >> 20} MB; this is not an offer file shoal understands"
                )
            # Doubling the window keeps the rescans linear in the entry's size.
            if not self.more(max(4096, len(self.buf) - self.pos)):
                if self.buf[self.pos] in (_OPEN_BRACE, _OPEN_BRACKET, _QUOTE):
                    self.pos = len(self.buf)
                raise self.fail("incomplete value")

    def value_bytes(self) -> bytes:
        end = self.value_end()
        raw = self.buf[self.pos : end]
        self.pos = end
        return raw

    def decode_value(self) -> Any:
        at = self.offset + self.pos
        return _decode(self.value_bytes(), at)

    def skip_value(self) -> None:
        """Skip any value without holding more than about `_SKIP_WINDOW` of it."""
        c = self.peek()
        if c not in (_OPEN_BRACE, _OPEN_BRACKET):
            self.pos = self.value_end()
            return
        while True:
            end = _value_end(self.buf, self.pos, self.eof)
            if end >= 0:
                self.pos = end
                return
            held = len(self.buf) - self.pos
            if held > _SKIP_WINDOW or not self.more(max(4096, held)):
                break
        if self.eof and len(self.buf) - self.pos <= _SKIP_WINDOW:
            self.pos = len(self.buf)
            raise self.fail("incomplete value")
        self.pos += 1
        if c == _OPEN_BRACE:
            first = True
            while self.member_batch(first, skipping=True) is not None:
                first = False
            return
        first = True
        while True:
            n = self.peek()
            if n == 0x5D:
                self.pos += 1
                return
            if not first:
                if n != 0x2C:
                    raise self.fail("expected ',' or ']'")
                self.pos += 1
            first = False
            self.skip_value()

    def end_of_document(self) -> None:
        if self.peek() != -1:
            raise self.fail("unexpected data after the end of the document")


Cut = tuple[list[tuple[bytes, int, int]], int, bytes]


def _cut_counting(buf: bytes, pos: int, first: bool, limit: int = 1 << 62) -> Cut:
    """Members whose values are objects, each end found by counting braces; exact when
    the run turns out clean. (members, end of the last one, b"")"""
    head = _HEAD_FIRST.match if first else _HEAD_NEXT.match
    find = buf.find
    count = buf.count
    members: list[tuple[bytes, int, int]] = []
    while (m := head(buf, pos)) is not None:
        scanned = m.end()
        depth = 1
        while depth:
            close = find(b"}", scanned)
            if close < 0:
                return members, pos, b""  # runs past the buffer: the next batch reads more
            depth += count(b"{", scanned, close) - 1
            scanned = close + 1
        members.append((m.group(1), m.end() - 1, scanned))
        if len(members) >= limit:
            break
        pos = scanned
        head = _HEAD_NEXT.match
    return members, pos, b""


def _cut_same_shape(buf: bytes, pos: int, first: bool) -> Cut:
    """Like _cut_counting, betting that every member has the first one's brace skeleton
    (all products `{{}}`, all on-demand terms alike): each end is then simply the k-th
    `}`. The bet is checked by the caller: the run's skeleton must be the shape n times,
    which (with a clean run) proves every cut."""
    firsts, end, _ = _cut_counting(buf, pos, first, limit=1)
    if not firsts:
        return firsts, end, b""
    key, start, stop = firsts[0]
    shape = buf[start:stop].translate(None, _NOT_SKELETON)
    if b'"' in shape.replace(b'""', b""):
        return [], pos, b""
    shape = shape.replace(b'"', b"")
    k = shape.count(b"}")
    members = [(key, start, stop)]
    pos = stop
    if k > 3:
        # Deep members: one regex per member (a `[^}]` run is a fast loop in sre) beats
        # k calls to find; finditer keeps the per-member Python work to one step.
        for deep in _k_closes(k).finditer(buf, pos):
            if deep.start() != pos:
                break
            members.append((deep.group(1), deep.start(2), deep.end()))
            pos = deep.end()
        return members, pos, shape
    closes = range(k)
    head = _HEAD_NEXT.match
    find = buf.find
    while (m := head(buf, pos)) is not None:
        close = m.end() - 1
        for _ in closes:
            close = find(b"}", close + 1)
            if close < 0:
                return members, pos, shape
        members.append((m.group(1), m.end() - 1, close + 1))
        pos = close + 1
    return members, pos, shape


@functools.cache
def _k_closes(k: int) -> re.Pattern[bytes]:
    """The next member (after a comma) whose object value ends at its k-th `}`."""
    key = _B + b"," + _B + rb'"([^"\\]*+)"' + _B + b":" + _B
    return re.compile(key + rb"(\{(?:[^}]*+\}){%d})" % k)


def _value_end(buf: bytes, p: int, eof: bool) -> int:
    """The end (exclusive) of the JSON value starting at `buf[p]`, -1 if it runs past the
    buffer. Raises OfferFileError for a byte that cannot start a value."""
    c = buf[p]
    if c == _OPEN_BRACE:
        end = _object_end_fast(buf, p)
        if end >= 0:
            return end
        return _container_end_exact(buf, p)
    if c == _OPEN_BRACKET:
        return _container_end_exact(buf, p)
    if c == _QUOTE:
        match = _STRING_REST.match(buf, p + 1)
        return match.end() if match is not None else -1
    scalar = _SCALAR.match(buf, p)
    if scalar is None:
        if not eof and len(buf) - p < 5:
            return -1  # maybe a literal cut by the chunk boundary
        raise OfferFileError(f"malformed JSON: unexpected byte {bytes([c])!r}")
    if scalar.end() == len(buf) and not eof:
        return -1  # a number may go on in the next chunk
    return scalar.end()


def _object_end_fast(buf: bytes, p: int) -> int:
    """The object's end by brace counting, or -1 when the count cannot be trusted (an
    escape or a brace inside a string) or the object runs past the buffer."""
    opens = 1
    closes = 0
    scanned = p + 1
    while True:
        q = buf.find(b"}", scanned)
        if q < 0:
            return -1
        opens += buf.count(b"{", scanned, q)
        closes += 1
        scanned = q + 1
        if opens == closes:
            break
    raw = buf[p:scanned]
    if b"\\" in raw:
        return -1
    # Every string of a clean slice collapses to `""` in the skeleton; one that holds a
    # brace leaves an unpaired quote behind.
    if b'"' in raw.translate(None, _NOT_SKELETON).replace(b'""', b""):
        return -1
    return scanned


def _container_end_exact(buf: bytes, p: int) -> int:
    depth = 0
    i = p
    search = _TOKEN.search
    while True:
        match = search(buf, i)
        if match is None:
            return -1
        at = match.start()
        c = buf[at]
        if c == _QUOTE:
            rest = _STRING_REST.match(buf, at + 1)
            if rest is None:
                return -1
            i = rest.end()
            continue
        if c in (_OPEN_BRACE, _OPEN_BRACKET):
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return at + 1
        i = at + 1
