"""Tables for people: which columns a terminal shows and where (`Col`, `_fit`), drawn as
Rich tables on stdout (or stderr). Rich is imported only when a table is drawn; styling only
on a terminal that shows it (no NO_COLOR, no dumb TERM), none when piped."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NamedTuple

from cli import output
from cli.terminal import shorten, terminal_width, text_width
from cli.terminal import wrap as wrap_text

if TYPE_CHECKING:
    from rich.segment import Segment


@dataclass(frozen=True)
class Col:
    """A table column, and what a narrow terminal may do with it to fit. Piped output and
    `-o wide` show every column whole, one row per line; on a terminal nothing but free text
    is ever shortened, and nothing is broken inside a word: a column that does not fit
    narrows, moves or is left out, in this order:

    - `free` (free text, a note): shortened with `…` to the room its row leaves it;
      `wrap` (prose): broken between words onto more lines of its row;
    - `group`: its value heads the rows that share it, on a line of its own (a sub-header;
      the text is `group` with the value in `{}`), when the rows come grouped by it;
    - `below`: it moves onto a line of its own under its row (free text still shortened,
      other text broken between words);
    - `drop`: it is left out, the lowest number first (stderr says which).
    """

    name: str
    drop: int | None = None
    free: bool = False
    wrap: bool = False
    below: bool = False
    group: str | None = None
    right: bool | None = None  # None: right-aligned when every value is a number


class Figure(str):
    """A number given as text (a quantity such as `23.54`): shown as it is, right-aligned."""

    __slots__ = ()


SEPARATOR = "  "  # between columns
LEAD = " "  # before every line of a table but its title and rule
GROUP_INDENT = "  "  # rows under a sub-header
BELOW_INDENT = "    "  # a row's value on a line of its own
FREE_MIN = 12  # free text narrower than this moves under its row (or is left out)
PIECE_ROWS = 500  # rows per Rich table drawn: a long list streams out as it is drawn


@dataclass
class _Plan:
    """Which columns a terminal shows where, and the width free text gets."""

    shown: list[int]
    grouped: list[int] = field(default_factory=list)
    below: list[int] = field(default_factory=list)
    dropped: list[int] = field(default_factory=list)
    limits: dict[int, int] = field(default_factory=dict)


def table(
    title: str | None,
    columns: Sequence[str | Col],
    rows: Sequence[Sequence[Any]],
    *,
    keep: Sequence[int] = (0,),
    wrap: int | None = None,
    stderr: bool = False,
) -> None:
    """A table on stdout (on stderr with `stderr`: an explanation beside the data).

    Piped, or with `-o wide`, every column is shown whole and every row stays on one line
    (grep, awk, cut; `-o wide` may be wider than the terminal rather than cut anything).
    On a terminal the table fits its width as `Col` describes; a column without a `Col`
    saying otherwise is never cut, moved or left out (`keep`, for ids and statuses, says
    so too). `wrap` names a column of prose, broken between words to fit: without it (and
    without any `Col`), the widest text column that `keep` does not name.
    """
    stream = sys.stderr if stderr else sys.stdout
    cols = [c if isinstance(c, Col) else Col(c) for c in columns]
    cells = [[None if v is None else _cell(v) for v in row] for row in rows]
    right = [
        _numeric(c.right, [row[i] for row in rows if row[i] is not None])
        for i, c in enumerate(cols)
    ]
    if wrap is None and not any(isinstance(c, Col) for c in columns):
        # A caller that says nothing: its widest text column (but a kept one) is prose.
        text = [i for i in range(len(cols)) if i not in keep and not right[i]]
        wrap = max(text, key=lambda i: max((text_width(r[i] or "") for r in cells), default=0),
                   default=None)  # fmt: skip
    if wrap is not None:
        cols[wrap] = replace(cols[wrap], wrap=True)
    for i in keep:
        if 0 <= i < len(cols):
            cols[i] = replace(cols[i], drop=None, free=False, wrap=False, below=False)
    natural = [
        max([text_width(c.name), *(text_width(r[i] or "") for r in cells)])
        for i, c in enumerate(cols)
    ]
    terminal = stream.isatty()
    width = terminal_width(stream) if terminal and not output.wide() else None
    plan = _fit(cols, cells, natural, width)
    headers = output.headers()
    layout = _layout(title if headers else None, cols, cells, natural, right, plan, width)
    _draw(stream, layout, headers, _styled(terminal))
    stream.flush()
    if plan.dropped:
        left_out = ", ".join(_left_out(cols[i].name, [r[i] for r in cells]) for i in plan.dropped)
        said = f"not shown at {width} columns: {left_out} (-o wide shows them)"
        for part in wrap_text(said, width):
            output.message(part)


def _numeric(forced: bool | None, values: list[Any]) -> bool:
    if forced is not None:
        return forced
    return bool(values) and all(
        isinstance(v, Figure) or (isinstance(v, (int, float)) and not isinstance(v, bool))
        for v in values
    )


def _left_out(name: str, values: list[str | None]) -> str:
    """A left-out column's name, with its value when every row has the same one."""
    distinct = set(values)
    if len(distinct) == 1 and None not in distinct:
        return f"{name} ({distinct.pop()})"
    return name


def _fit(
    cols: list[Col], cells: list[list[str | None]], natural: list[int], width: int | None
) -> _Plan:
    """Where each column goes on a terminal `width` wide (None: piped or wide, all whole)."""
    plan = _Plan(shown=list(range(len(cols))))
    if width is None or _row_width(plan, natural) <= width:
        return plan
    # The narrowest each column can be: free text down to FREE_MIN, prose to its longest
    # word, the rest as wide as their widest value.
    floor = list(natural)
    for i, col in enumerate(cols):
        if col.free:
            floor[i] = min(natural[i], max(FREE_MIN, text_width(col.name)))
        elif col.wrap:
            words = [text_width(w) for r in cells for w in (r[i] or "").split()]
            floor[i] = min(natural[i], max([text_width(col.name), FREE_MIN, *words]))
    groups = [i for i, c in enumerate(cols) if c.group is not None]
    if _row_width(plan, floor) <= width:
        groups = []  # narrowing the text is enough
    if groups and _contiguous([tuple(r[i] for i in groups) for r in cells]):
        plan.grouped = groups
        plan.shown = [i for i in plan.shown if i not in groups]
    steps: list[tuple[str, int]] = [
        ("below", i) for i in reversed(range(len(cols))) if cols[i].below
    ]
    droppable = [i for i, c in enumerate(cols) if c.drop is not None]
    steps += [("drop", i) for i in sorted(droppable, key=lambda i: cols[i].drop or 0)]
    for step, i in steps:
        if _row_width(plan, floor) <= width:
            break
        if i not in plan.shown:
            continue
        plan.shown.remove(i)
        (plan.below if step == "below" else plan.dropped).append(i)
    # What can narrow gets what the other columns leave, shared (at least its floor).
    narrows = [i for i in plan.shown if floor[i] < natural[i]]
    if narrows:
        fixed = _row_width(plan, [0 if i in narrows else n for i, n in enumerate(natural)])
        share = max(0, width - fixed) // len(narrows)
        for i in narrows:
            plan.limits[i] = min(natural[i], max(share, floor[i]))
    return plan


def _contiguous(keys: list[tuple[str | None, ...]]) -> bool:
    """Whether rows with the same key come together (one sub-header per key)."""
    runs = sum(1 for i, key in enumerate(keys) if i == 0 or key != keys[i - 1])
    return runs == len(set(keys))


def _row_width(plan: _Plan, widths: Sequence[int]) -> int:
    shown = [widths[i] for i in plan.shown]
    indent = len(GROUP_INDENT) if plan.grouped else 0
    return len(LEAD) + indent + sum(shown) + len(SEPARATOR) * max(0, len(shown) - 1)


class _Line(NamedTuple):
    """A line of its own between rows: a sub-header (bold), or a value under its row."""

    text: str
    strong: bool = False


@dataclass
class _Layout:
    """The text a plan shows, before Rich draws it: the title's lines; the columns (name,
    width, right-aligned); the body in order, a row's cells (a cell may hold several lines)
    or a line of its own."""

    title: list[str]
    names: list[str]
    widths: list[int]
    right: list[bool]
    body: list[list[str] | _Line]


def _layout(
    title: str | None,
    cols: list[Col],
    cells: list[list[str | None]],
    natural: list[int],
    right: list[bool],
    plan: _Plan,
    width: int | None,
) -> _Layout:
    """What `plan` shows of every row, as text: free text shortened, prose broken between
    words, sub-headers where the grouped values change, `below` values under their row."""
    widths = [plan.limits.get(i, n) for i, n in enumerate(natural)]
    indent = LEAD + (GROUP_INDENT if plan.grouped else "")
    room = None if width is None else width - len(indent + BELOW_INDENT)

    def cell(i: int, value: str) -> str:
        """Free text shortened to its width; prose broken between words onto more lines."""
        parts = wrap_text(value, widths[i]) if cols[i].wrap else [value]
        return "\n".join(shorten(part, widths[i]) for part in parts)

    body: list[list[str] | _Line] = []
    group: tuple[str | None, ...] | None = None
    for row in cells:
        if plan.grouped:
            key = tuple(row[i] for i in plan.grouped)
            if key != group:
                group = key
                text = "  ".join(
                    (cols[i].group or "{}").format("—" if v is None else v)
                    for i, v in zip(plan.grouped, key, strict=True)
                )
                body.append(_Line((LEAD + text).rstrip(), strong=True))
        body.append([cell(i, "—" if row[i] is None else str(row[i])) for i in plan.shown])
        for i in plan.below:
            value = row[i]
            if value is None:
                continue
            if cols[i].free:
                body.append(_Line(indent + BELOW_INDENT + shorten(value, room)))
            else:
                body += [_Line(indent + BELOW_INDENT + part) for part in wrap_text(value, room)]
    names = [cols[i].name for i in plan.shown]
    shown = [widths[i] for i in plan.shown]
    aligned = [right[i] for i in plan.shown]
    if shown and not aligned[-1]:
        # A line ends where its text does (trailing padding is dropped), so the last column
        # is as wide as its widest text: the rule under the header ends with the widest line.
        last = [part for r in body if isinstance(r, list) for part in r[-1].split("\n")]
        shown[-1] = max(text_width(text) for text in [names[-1], *last])
    if plan.grouped:
        # Rows under sub-headers are indented: a first column of nothing, which the space
        # before it and the column divider make GROUP_INDENT wide.
        names, shown, aligned = ["", *names], [0, *shown], [False, *aligned]
        body = [["", *item] if isinstance(item, list) else item for item in body]
    lines = wrap_text(title, width, breaks=" /") if title else []
    return _Layout(lines, names, shown, aligned, body)


def _styled(terminal: bool) -> bool:
    """Bold headers and an italic title on a terminal that shows them: none when piped, on
    a dumb terminal or with NO_COLOR (Rich alone would still draw bold under NO_COLOR)."""
    return terminal and os.environ.get("TERM", "dumb") != "dumb" and "NO_COLOR" not in os.environ


def _draw(stream: Any, layout: _Layout, headers: bool, styled: bool) -> None:
    """`layout` on `stream` as Rich draws it: the rows in a Rich table of fixed column widths
    (SIMPLE_HEAD: a header over a rule), the title, sub-headers and values under their row
    as Rich text. Rich has no cell across columns: those lines go between the lines Rich
    drew for the rows."""
    from rich.console import Console
    from rich.segment import SegmentLines
    from rich.text import Text

    own = [*layout.title, *(item.text for item in layout.body if isinstance(item, _Line))]
    # One cell of padding before every column, SIMPLE_HEAD's divider (a space) between
    # them: LEAD and SEPARATOR.
    span = sum(layout.widths) + 2 * len(layout.widths) - 1
    console = Console(
        file=stream,
        # Wide enough for every line (Rich crops a wider one); a height too, or on a dumb
        # terminal Rich ignores the width given and takes 80 columns.
        width=max([span, *(text_width(line) for line in own)]) + 1,
        height=25,
        legacy_windows=False,
        color_system="standard" if styled else None,
        highlight=False,
        markup=False,
        emoji=False,
    )
    options = console.options.update(no_wrap=True, overflow="ignore")

    def text(line: str, style: str = "") -> list[list[Segment]]:
        return console.render_lines(Text(line, style=style), options, pad=False)

    def write(lines: list[list[Segment]]) -> None:
        console.print(SegmentLines(lines, new_lines=True), crop=False)

    write([line for part in layout.title for line in text(part, "italic")])
    header = headers
    rows: list[list[str]] = []
    depth = 0  # lines the rows so far take
    between: dict[int, list[list[Segment]]] = {}  # lines of their own, by the row lines above

    def piece() -> None:
        """The rows so far and the lines between them, on the stream."""
        drawn = _rows_drawn(console, options, layout, rows, header) if rows or header else []
        top = 2 if header else 0  # the header and its rule
        lines, done = drawn[:top], top
        for at, extra in sorted(between.items()):
            lines += drawn[done : top + at] + extra
            done = top + at
        write(lines + drawn[done:])
        rows.clear()
        between.clear()

    for item in layout.body:
        if isinstance(item, _Line):
            between.setdefault(depth, []).extend(text(item.text, "bold" if item.strong else ""))
            continue
        rows.append(item)
        depth += 1 + max(value.count("\n") for value in item)
        if len(rows) >= PIECE_ROWS:
            piece()
            header, depth = False, 0
    piece()


def _rows_drawn(
    console: Any, options: Any, layout: _Layout, rows: list[list[str]], header: bool
) -> list[list[Segment]]:
    """`rows` as Rich draws them, each line without its trailing padding. One Rich row
    whose cells hold their column's lines: a cell of many lines costs Rich far less than
    as many cells (10,000 rows piped: 1.2 s, against some 3 s for a Rich row each); a row
    of several lines has its other cells filled out with blank lines."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    grid = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        show_header=header,
        header_style="bold",
        padding=(0, 0, 0, 1),
    )
    for name, width, right in zip(layout.names, layout.widths, layout.right, strict=True):
        # The widths fit every text (the plan measured it as Rich does): "crop" cuts
        # nothing, it only lets Rich right-align ("ignore" would not).
        grid.add_column(
            Text(name),
            width=width,
            justify="right" if right else "left",
            no_wrap=True,
            overflow="crop",
        )
    if rows:
        columns: list[list[str]] = [[] for _ in layout.widths]
        for row in rows:
            high = 1 + max(value.count("\n") for value in row)
            for column, value in zip(columns, row, strict=True):
                column.append(value + "\n" * (high - 1 - value.count("\n")))
        grid.add_row(*(Text("\n".join(column)) for column in columns))
    return [_rstrip(line) for line in console.render_lines(grid, options, pad=False)]


def _rstrip(line: list[Segment]) -> list[Segment]:
    """A table line without the padding after its last text (a row ends where its text does,
    as `grep`, `awk` and a diff of two runs expect)."""
    from rich.segment import Segment

    while line and not line[-1].text.rstrip():
        line.pop()
    if line:
        last = line[-1]
        line[-1] = Segment(last.text.rstrip(), last.style, last.control)
    return line


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return number_text(value)
    # One line per row: a line break or tab in a value (a note) is a space in a table.
    return re.sub(r"[\r\n\t]+", " ", output.printable(str(value)))


def number_text(value: float) -> str:
    """A number as JSON writes it (every digit it holds, never an exponent): a table cell
    shows the figure the JSON of the same command holds."""
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        text = f"{value:.15f}".rstrip("0").rstrip(".")
    return text
