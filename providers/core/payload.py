"""Provider payloads read as whole documents: a page checked against its model in one call,
the field types every cloud's models share, and the one-line error.

A model is a TypedDict of the fields shoal reads (any other key is ignored: providers add
fields at will), checked by a pydantic TypeAdapter as strictly as shoal's other input
(providers/core/strict.py): a string is not a number, a bool is neither, NaN and infinities
are refused. TypedDicts, not BaseModels: a page stays plain dicts and lists, and the 7 x
5,000-SKU GCP catalog validates in about half the time BaseModels took (one instance per
nested object). A page is read from decoded JSON or, as the fetchers do, from an answer's
bytes (a Body), which pydantic parses itself: 1.5-3x faster than json.loads and validating
its result (benchmarks/payloads.py).

A failure says where, what document and what in it (providers/core/schema.py words it):
`azure: URL: malformed Retail Prices payload: Items[3].retailPrice: expected a number, got
string '0.2'; nothing was cached from it`. A value is quoted capped; the fetchers scrub
their credentials out of the line.

Only the model modules import this (providers/azure/payloads.py, providers/gcp/payloads.py),
and the readers import those when they have a page: an answer from the cache never imports
pydantic (tests/cli/test_imports.py).
"""

from __future__ import annotations

import functools
import re
from datetime import UTC, datetime
from typing import Annotated, Any, Generic, TypeVar

from pydantic import (
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    PlainValidator,
    TypeAdapter,
    ValidationError,
    with_config,
)
from pydantic_core import PydanticCustomError, core_schema
from typing_extensions import is_typeddict

import providers.core.strict  # noqa: F401  # sets PYDANTIC_DISABLE_PLUGINS before any model
from providers.core import schema
from providers.core.errors import ShoalError
from providers.core.http.client import Body

__all__ = ["MAX_NUMBER", "Amount", "Document", "IsoTime", "Name", "Signed", "Time"]

T = TypeVar("T")
MAX_NUMBER = 1e15  # past any count, quota or price a cloud has: a broken payload
FIX = "nothing was cached from it"
CONFIG = ConfigDict(strict=True, allow_inf_nan=False, extra="ignore")
_DECIMAL = r"^\s*-?\d{1,20}(?:\.\d{1,20})?\s*$"
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})")
_ISO8601 = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[Tt ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:[Zz]|[+-]\d{2}:\d{2})?)?"
)


class Document(Generic[T]):
    """A payload document: what it is (its errors name it) and its model."""

    def __init__(self, what: str, model: Any) -> None:
        self.what = what
        self.model = model

    @functools.cached_property
    def _adapter(self) -> TypeAdapter[T]:
        """Built at the first page. A TypedDict class holds its own config; a generic one
        (`ArmList[Usage]`) is given it."""
        if is_typeddict(self.model):
            return TypeAdapter(with_config(CONFIG)(self.model))
        return TypeAdapter(self.model, config=CONFIG)

    def read(self, page: Any, where: str) -> T:
        """`page` (decoded JSON, or a Body) checked whole; the first thing wrong in it is a
        ShoalError. Bytes pydantic's parser refuses are given to the client's decoder: its
        JSON error, or (a BOM, deeper nesting) what json.loads reads, checked."""
        try:
            if isinstance(page, Body):
                try:
                    return self._adapter.validate_json(page.raw)
                except ValidationError as exc:
                    if exc.errors(include_url=False)[0]["type"] != "json_invalid":
                        raise
                page = page.decode()
            return self._adapter.validate_python(page)
        except ValidationError as exc:
            place = schema.Place(ShoalError, f"{where}: malformed {self.what} payload", fix=FIX)
            raise schema.failure(self.model, exc.errors(include_url=False)[0], place) from None

    def malformed(self, where: str, path: str, text: str) -> ShoalError:
        """A failure the model cannot see (what one field says of another), said alike."""
        return ShoalError(f"{where}: malformed {self.what} payload: {path}: {text}; {FIX}")


class _Number:
    """A finite number from `low` to MAX_NUMBER: a JSON number or a decimal string (Google
    sends int64s as strings), never a bool. All in pydantic-core: a catalog has 100,000s."""

    def __init__(self, low: float) -> None:
        self.low = low

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        text = core_schema.str_schema(pattern=_DECIMAL, strict=True)
        either = core_schema.union_schema(
            [
                core_schema.float_schema(strict=True, allow_inf_nan=True),  # refused next
                core_schema.no_info_after_validator_function(float, text),
            ],
            custom_error_type="float_type",  # "expected a number, got ..."
        )
        bounded = core_schema.float_schema(allow_inf_nan=False, ge=self.low, le=MAX_NUMBER)
        return core_schema.chain_schema([either, bounded])


def _moment(value: Any, form: re.Pattern[str], expected: str) -> datetime | None:
    if value is None or value == "":
        return None
    if isinstance(value, str) and form.fullmatch(value.strip()):
        try:
            moment = datetime.fromisoformat(value.strip().upper())
            return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
        except (ValueError, OverflowError):
            pass  # 2026-02-30, or a year 1 offset past the start of time
    got = schema.given(value)
    raise PydanticCustomError(
        "time_type", "expected {expected}, got {got}", {"expected": expected, "got": got}
    )


# A count, capacity or price: 0 to MAX_NUMBER, a JSON number or a decimal string.
Amount = Annotated[float, _Number(0)]
# A quota's limit or usage: some usage APIs say -1 for "none" or "unlimited"; read as given.
Signed = Annotated[float, _Number(-MAX_NUMBER)]
Name = Annotated[str, Field(min_length=1)]
# An RFC 3339 time (2026-10-01T00:00:00Z, 2026-09-30T17:00:00.000-07:00) in UTC; null or ""
# is None.
Time = Annotated[
    datetime | None,
    PlainValidator(
        functools.partial(
            _moment, form=_RFC3339, expected="an RFC 3339 time (2026-10-01T00:00:00Z)"
        )
    ),
]
# ISO 8601, as Azure writes times: also a date (midnight UTC) or no offset (UTC), and 7
# fractional digits (2021-06-27T01:02:38.3138469+00:00).
IsoTime = Annotated[
    datetime | None,
    PlainValidator(
        functools.partial(
            _moment, form=_ISO8601, expected="an ISO 8601 date or time (2025-06-27T09:00:00Z)"
        )
    ),
]
