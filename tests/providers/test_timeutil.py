"""RFC 3339 times and Go-style durations, with errors that name the field at fault."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from providers.core.errors import UsageError
from providers.core.timeutil import parse_duration, parse_time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-03-07T03:29:00Z", datetime(2026, 3, 7, 3, 29, tzinfo=UTC)),
        ("2026-03-07t03:29:00z", datetime(2026, 3, 7, 3, 29, tzinfo=UTC)),
        ("2026-03-07T05:29:00+02:00", datetime(2026, 3, 7, 3, 29, tzinfo=UTC)),
        ("2026-03-06T22:29:00-05:00", datetime(2026, 3, 7, 3, 29, tzinfo=UTC)),
        ("2026-03-07T03:29:00.250Z", datetime(2026, 3, 7, 3, 29, 0, 250000, tzinfo=UTC)),
        ("  2026-03-07T03:29:00Z  ", datetime(2026, 3, 7, 3, 29, tzinfo=UTC)),
    ],
)
def test_parse_time_accepts_z_and_offsets_and_returns_utc(text: str, expected: datetime) -> None:
    value = parse_time(text, "--start")
    assert value == expected
    assert value.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    [
        "2026-03-07T03:29:00",  # naive: which zone?
        "2026-03-07",
        "yesterday",
        "",
        "1772854140",
        "2026-02-30T00:00:00Z",  # no such day
        "2026-03-07T25:00:00Z",
        "2026-03-07T03:29:00+0200",
    ],
)
def test_parse_time_rejects_naive_and_garbage_naming_the_field(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_time(text, "--end")
    message = str(info.value)
    assert message.startswith("--end: ")
    assert repr(text) in message
    assert "2026-03-07T03:29:00Z" in message  # shows an example to copy


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90s", 90),
        ("1h30m", 5400),
        ("2d", 172800),
        ("30m", 1800),
        ("1d2h3m4s", 93784),
        ("1.5h", 5400),
        ("250ms", 0.25),
        (" 45m ", 2700),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text, "lifetime") == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "5", "1x", "h", "-1h", "1h 30m", "1h30", "30 m", "P1D"])
def test_parse_duration_rejects_malformed_naming_the_field(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_duration(text, "resources.lifetime")
    message = str(info.value)
    assert message.startswith("resources.lifetime: ")
    assert repr(text) in message


@pytest.mark.parametrize("text", ["0s", "0h0m", "0d"])
def test_parse_duration_rejects_zero(text: str) -> None:
    with pytest.raises(UsageError, match="greater than zero") as info:
        parse_duration(text, "lifetime")
    assert str(info.value).startswith("lifetime: ")


def test_parse_when_takes_the_forms_people_type() -> None:
    from datetime import UTC, datetime, timedelta

    from providers.core.timeutil import parse_when

    now = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert parse_when("now", "--at", now) == now
    assert parse_when("+2h", "--at", now) == now + timedelta(hours=2)
    assert parse_when("+1d12h", "--at", now) == now + timedelta(days=1, hours=12)
    assert parse_when("-30m", "--start", now) == now - timedelta(minutes=30)
    assert parse_when("2026-12-24", "--at", now) == datetime(2026, 12, 24, tzinfo=UTC)
    assert parse_when("2026-12-24T18:00:00+01:00", "--at", now) == datetime(
        2026, 12, 24, 17, 0, tzinfo=UTC
    )


@pytest.mark.parametrize("text", ["tomorrow", "+", "+2x", "2026-13-40", "9999-01-01", "+99999999d"])
def test_parse_when_names_the_accepted_forms(text: str) -> None:
    from providers.core.timeutil import parse_when

    with pytest.raises(UsageError) as caught:
        parse_when(text, "--at")
    message = str(caught.value)
    assert message.startswith("--at: ")
    assert ("RFC 3339" in message and "+2h" in message) or "outside the years" in message
