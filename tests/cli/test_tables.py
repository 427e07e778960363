"""`cli.tables.table` drawn by Rich, text for text: piped (every column whole, no trailing
padding, a rule as wide as the widest line), on a terminal of a given width (free text
shortened, a note under its row, sub-headers, prose broken between words), --no-headers,
styling only on a terminal that shows it, cell text never read as markup, and a long list
drawn in pieces that read as one table."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from cli import output, tables
from cli.tables import Col, Figure

ANSI = re.compile(r"\x1b\[[0-9;]*m")

STATUS = [
    Col("ID"),
    Col("Status"),
    Col("CPU"),
    Col("Age", drop=1),
    Col("Note", free=True, below=True),
]
NOTE = "driver said: exit code 255 after 12 s; see `shoal logs test-22` for the rest"
ROWS: list[list[Any]] = [
    ["test-1", "ALLOCATED", 2, "3m", None],
    ["test-22", "FAILED", 16, "1h", NOTE],
    ["test-333", "RESERVED", 1.5, "2d", "[bold]not markup[/bold]"],
]
RESOURCES = [
    Col("Region", group="{}"),
    Col("Level", group="level {}"),
    Col("Class"),
    Col("Resource"),
    Col("Supply"),
    Col("Allocatable"),
]
RESOURCE_ROWS: list[list[Any]] = [
    ["local", "node=a", "od", "cpu/cores", Figure("23.54"), Figure("22.54")],
    ["local", "node=a", "od", "memory/ram", Figure("64"), None],
    ["local", "  zone=b", "spot", "cpu/cores", Figure("2"), Figure("1")],
]


class Stream(io.StringIO):
    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


@pytest.fixture(autouse=True)
def plain_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The table format with headers; a terminal that shows styles unless a test says not."""
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("COLUMNS", raising=False)
    output.select(False, None)
    yield
    output.select(False, None)


def draw(
    title: str | None,
    columns: Sequence[str | Col],
    rows: Sequence[Sequence[Any]],
    monkeypatch: pytest.MonkeyPatch,
    width: int | None = None,
    **options: Any,
) -> tuple[str, str]:
    """(stdout, stderr) of the table: piped, or on a terminal `width` columns wide."""
    if width is not None:
        monkeypatch.setenv("COLUMNS", str(width))
    out, err = Stream(width is not None), Stream(width is not None)
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    tables.table(title, columns, rows, **options)
    return out.getvalue(), err.getvalue()


def test_piped_every_column_whole_without_trailing_padding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out, err = draw("allocations", STATUS, ROWS, monkeypatch)
    assert out.splitlines() == [
        "allocations",
        " ID        Status     CPU  Age  Note",
        "─" * (len(NOTE) + 32),
        " test-1    ALLOCATED    2  3m   —",
        f" test-22   FAILED      16  1h   {NOTE}",
        " test-333  RESERVED   1.5  2d   [bold]not markup[/bold]",  # text, not markup
    ]
    assert "\x1b" not in out and err == ""


def test_a_terminal_shortens_free_text_then_moves_it_under_its_row(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out, _ = draw("allocations", STATUS, ROWS, monkeypatch, width=60)
    assert out.splitlines()[2:] == [
        "─" * 59,
        " test-1    ALLOCATED    2  3m   —",
        " test-22   FAILED      16  1h   driver said: exit code 255…",
        " test-333  RESERVED   1.5  2d   [bold]not markup[/bold]",
    ]
    out, err = draw("allocations", STATUS, ROWS, monkeypatch, width=40)
    assert out.splitlines() == [
        "allocations",
        " ID        Status     CPU  Age",
        "─" * 30,
        " test-1    ALLOCATED    2  3m",
        " test-22   FAILED      16  1h",
        "     driver said: exit code 255 after…",
        " test-333  RESERVED   1.5  2d",
        "     [bold]not markup[/bold]",
    ]
    assert err == ""


def test_grouped_columns_become_sub_headers_when_the_row_does_not_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    out, _ = draw("resources", RESOURCES, RESOURCE_ROWS, monkeypatch, width=40)
    assert out.splitlines() == [
        "resources",
        "   Class  Resource    Supply  Allocatable",
        "─" * 41,
        " local  level node=a",
        "   od     cpu/cores    23.54        22.54",
        "   od     memory/ram      64            —",
        " local  level   zone=b",
        "   spot   cpu/cores        2            1",
    ]
    out, _ = draw("resources", RESOURCES, RESOURCE_ROWS, monkeypatch, width=80)
    assert out.splitlines()[1:4] == [
        " Region  Level     Class  Resource    Supply  Allocatable",
        "─" * 57,
        " local   node=a    od     cpu/cores    23.54        22.54",
    ]


def test_prose_is_broken_between_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    rows = [["k", "a few words of prose that wrap"], ["k2", "short"]]
    out, _ = draw(None, ["Key", "Text"], rows, monkeypatch, width=24)
    assert out.splitlines() == [
        " Key  Text",
        "─" * 21,
        " k    a few words of",
        "      prose that wrap",
        " k2   short",
    ]


def test_no_headers_drops_the_title_header_and_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    output.select(False, None, no_headers=True)
    out, _ = draw("allocations", STATUS, ROWS, monkeypatch)
    assert out.splitlines() == [
        " test-1    ALLOCATED    2  3m   —",
        f" test-22   FAILED      16  1h   {NOTE}",
        " test-333  RESERVED   1.5  2d   [bold]not markup[/bold]",
    ]
    monkeypatch.setenv("NO_COLOR", "1")
    out, _ = draw("resources", RESOURCES, RESOURCE_ROWS, monkeypatch, width=40)
    assert out.splitlines() == [  # the sub-headers are data: they stay
        " local  level node=a",
        "   od     cpu/cores    23.54        22.54",
        "   od     memory/ram      64            —",
        " local  level   zone=b",
        "   spot   cpu/cores        2            1",
    ]


@pytest.mark.parametrize(
    ("terminal", "env", "styled"),
    [
        (True, {}, True),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"TERM": "dumb"}, False),
        (False, {}, False),
    ],
)
def test_styles_only_on_a_terminal_that_shows_them(
    monkeypatch: pytest.MonkeyPatch, terminal: bool, env: dict[str, str], styled: bool
) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    out, _ = draw("resources", RESOURCES, RESOURCE_ROWS, monkeypatch, 40 if terminal else None)
    assert ("\x1b[" in out) is styled
    if styled:  # bold header and sub-headers, italic title: the same text
        assert "\x1b[1m" in out and "\x1b[3mresources" in out
        monkeypatch.setenv("NO_COLOR", "1")
        plain, _ = draw("resources", RESOURCES, RESOURCE_ROWS, monkeypatch, 40)
        assert ANSI.sub("", out) == plain


def test_a_long_list_reads_as_one_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Drawn in pieces of PIECE_ROWS rows: one header, the same widths throughout, every
    row and every line under its row in order."""
    count = 2 * tables.PIECE_ROWS + 7
    rows = [[f"id-{i}", i, "note" if i % 250 == 249 else None] for i in range(count)]
    columns = [Col("ID"), Col("N"), Col("Note", free=True, below=True)]
    out, _ = draw(None, columns, rows, monkeypatch)
    wide = len(f"id-{count - 1}")
    expected = [f" {'ID':<{wide}}     N  Note", "─" * (wide + 13)]
    for i in range(count):
        expected.append(f" {f'id-{i}':<{wide}}  {i:>4}  {'note' if i % 250 == 249 else '—'}")
    assert out.splitlines() == expected
    monkeypatch.setenv("NO_COLOR", "1")
    out, _ = draw(None, columns, rows, monkeypatch, width=wide + 10)
    expected = [f" {'ID':<{wide}}     N", "─" * (wide + 7)]
    for i in range(count):
        expected.append(f" {f'id-{i}':<{wide}}  {i:>4}")
        if i % 250 == 249:
            expected.append("     note")
    assert out.splitlines() == expected
