"""RFC 3339 times and Go-style durations, with errors that name the field."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from providers.core.errors import UsageError

_EXAMPLE = "2026-03-07T03:29:00Z"
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


MIN_YEAR, MAX_YEAR = 1970, 9000


def parse_time(text: str, field: str) -> datetime:
    """Parse an RFC 3339 timestamp (an offset or `Z` is required) into an aware UTC datetime."""
    raw = text.strip()
    if not _RFC3339.fullmatch(raw):
        raise UsageError(f"{field}: {text!r} is not an RFC 3339 time; use for example {_EXAMPLE}")
    try:
        value = datetime.fromisoformat(raw.replace("z", "Z")).astimezone(UTC)
    except (ValueError, OverflowError):
        raise UsageError(
            f"{field}: {text!r} is not a valid date or time; use for example {_EXAMPLE}"
        ) from None
    # Windows add lifetimes and steps to these: near year 1 or 9999 that overflows.
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise UsageError(f"{field}: {text!r} is outside the years {MIN_YEAR}-{MAX_YEAR}")
    return value


WHEN_FORMS = (
    "RFC 3339 (2026-12-24T18:00:00Z), a date (2026-12-24: midnight UTC), now, "
    "or a time from now (+2h, +1d12h, -30m)"
)
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def parse_when(text: str, field: str, now: datetime | None = None) -> datetime:
    """A time as users type it on the command line (WHEN_FORMS); `now` is injectable."""
    raw = text.strip()
    moment = now or utcnow()
    if raw.lower() == "now":
        return moment
    if raw[:1] in "+-" and len(raw) > 1:
        try:
            offset = parse_duration(raw[1:], field)
        except UsageError:
            raise UsageError(f"{field}: {text!r} is not a time; use {WHEN_FORMS}") from None
        try:
            return _bounded(moment + offset if raw[0] == "+" else moment - offset, text, field)
        except OverflowError:
            raise UsageError(
                f"{field}: {text!r} is outside the years {MIN_YEAR}-{MAX_YEAR}"
            ) from None
    if _DATE.fullmatch(raw):
        try:
            return _bounded(datetime.fromisoformat(raw).replace(tzinfo=UTC), text, field)
        except ValueError:
            raise UsageError(f"{field}: {text!r} is not a valid date; use {WHEN_FORMS}") from None
    if _RFC3339.fullmatch(raw):
        return parse_time(raw, field)
    raise UsageError(f"{field}: {text!r} is not a time; use {WHEN_FORMS}")


def _bounded(value: datetime, text: str, field: str) -> datetime:
    if not MIN_YEAR <= value.year <= MAX_YEAR:
        raise UsageError(f"{field}: {text!r} is outside the years {MIN_YEAR}-{MAX_YEAR}")
    return value


def parse_duration(text: str, field: str) -> timedelta:
    """Parse a Go-style duration such as `90s`, `1h30m` or `2d` (days are an extension)."""
    raw = text.strip()
    pos = 0
    total = 0.0
    for match in _DURATION_PART.finditer(raw):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not raw or pos != len(raw):
        raise UsageError(f"{field}: {text!r} is not a duration; use for example 30m, 1h30m or 2d")
    if total <= 0:
        raise UsageError(f"{field}: duration must be greater than zero, got {text!r}")
    try:
        return timedelta(seconds=total)
    except OverflowError:
        raise UsageError(f"{field}: duration {text!r} is too long") from None


def utcnow() -> datetime:
    return datetime.now(UTC)


def human_duration(span: timedelta | float, *, style: str = "age") -> str:
    """A duration for people, the one formatter every layer uses. `span`: a timedelta or
    seconds. Styles, by what a reader needs:

    - "age" (kubectl's AGE: one unit, rounded down): `90s`, `5m`, `2h`, `3d`; a table cell,
      a cache's age, a TTL.
    - "span" (two units, rounded down): `45s`, `29m`, `2h5m`, `3d4h`; a wait or a lifetime in
      a sentence.
    - "clock" (tenths below 10 s, then zero-padded): `0.4s`, `33s`, `4m05s`, `2h10m`; elapsed
      times and ETAs that tick.
    """
    seconds = span.total_seconds() if isinstance(span, timedelta) else float(span)
    if style == "clock":
        if seconds < 9.95:
            return f"{max(seconds, 0.0):.1f}s"
        whole = round(seconds)
        if whole < 60:
            return f"{whole}s"
        if whole < 3600:
            return f"{whole // 60}m{whole % 60:02d}s"
        return f"{whole // 3600}h{whole % 3600 // 60:02d}m"
    whole = max(0, int(seconds))
    if style == "age":
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if whole >= size * 2:
                return f"{whole // size}{unit}"
        return f"{whole}s"
    if style != "span":
        raise ValueError(f"human_duration: unknown style {style!r}")
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"
