"""Rendering: JSON or Rich tables on stdout, messages on stderr.

JSON is plain `json.dumps` (no markup, stable key order from the models). Rich is imported
only when a table is drawn; it honours NO_COLOR and drops styling when stdout is not a TTY.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

FORMATS = ("table", "wide", "json", "yaml", "name")
_chosen: dict[str, Any] = {"format": "table", "headers": True}
# Off a terminal, a progress line at most this often (besides the milestones): enough for a
# CI log to show life, few enough that a long pull stays readable.
PROGRESS_INTERVAL_SECONDS = 10.0
PROGRESS_MILESTONES = (25, 50, 75)  # percent of a known total, each announced once
# Looked up when a pull starts, so a test can run the log lines on a clock of its own.
progress_clock: Callable[[], float] = time.monotonic
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def select(
    as_json: bool,
    output_format: str | None,
    *,
    quiet: bool = False,
    no_headers: bool = False,
) -> bool:
    """Record the output format a command was asked for (`--json`, `-o FORMAT`, `-q` as
    `-o name`, `--no-headers`); True when it is structured (json or yaml), which
    `emit_json` then writes. `names()` tells a command to print ids only."""
    from providers.core.errors import UsageError

    if quiet:
        if as_json or output_format not in (None, "name"):
            raise UsageError("-q prints ids only; drop --json/-o with it (or use -o name)")
        output_format = "name"
    _chosen["headers"] = not no_headers

    if output_format is not None and not output_format.strip():
        # `--output "$FORMAT"` with FORMAT unset: a table where a script reads JSON.
        raise UsageError(f"--output: empty value; use one of {', '.join(FORMATS)}")
    chosen = (output_format or ("json" if as_json else "table")).lower()
    if chosen not in FORMATS:
        raise UsageError(f"--output {output_format!r}: use one of {', '.join(FORMATS)}")
    if as_json and chosen != "json":
        raise UsageError(f"--json and --output {chosen} disagree; give one of them")
    _chosen["format"] = chosen
    return chosen in ("json", "yaml")


def names() -> bool:
    """`-o name` / `-q`: the command prints its ids (or names), one per line."""
    return bool(_chosen["format"] == "name")


def emit_names(ids: Iterable[str]) -> None:
    """One id per line on stdout, nothing else (`xargs shoal free`)."""
    sys.stdout.write("".join(f"{printable(one)}\n" for one in ids))
    sys.stdout.flush()


def wide() -> bool:
    """`--output wide`: tables add the columns a narrow terminal leaves out."""
    return bool(_chosen["format"] == "wide")


def emit_json(data: Any) -> None:
    """Indented for a person at a terminal; compact for a program (json's C encoder only
    runs without indentation: a 5,000-node cluster view takes 0.06 s instead of 0.4 s)."""
    if _chosen["format"] == "yaml":
        _emit_yaml(data)
        return
    try:
        # allow_nan=False: NaN and Infinity are not JSON; no parser downstream reads them.
        if sys.stdout.isatty():
            text = json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False)
        else:
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError as exc:
        from providers.core.errors import ShoalError

        raise ShoalError(
            f"the result holds a number JSON cannot carry ({exc}); nothing printed"
        ) from None
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _emit_yaml(data: Any) -> None:
    import yaml

    try:
        # JSON-ready data (the same the JSON carries), so YAML and JSON agree field by field.
        json.dumps(data, allow_nan=False)
    except ValueError as exc:
        from providers.core.errors import ShoalError

        raise ShoalError(f"the result holds a number YAML output cannot carry ({exc})") from None
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=False)
    sys.stdout.write(text)
    sys.stdout.flush()


_ROWS_PER_WRITE = 500


def emit_json_rows(rows: list[str]) -> None:
    """A JSON array of pre-encoded objects, one per line (long lists stay fast and greppable)."""
    if _chosen["format"] == "yaml":
        _emit_yaml([json.loads(row) for row in rows])
        return
    if not rows:
        sys.stdout.write("[]\n")
    else:
        # In pieces: one joined string of 10,000 rows costs ~3 ms to build and copy.
        write = sys.stdout.write
        write("[\n")
        for start in range(0, len(rows), _ROWS_PER_WRITE):
            write((",\n" if start else "") + ",\n".join(rows[start : start + _ROWS_PER_WRITE]))
        write("\n]\n")
    sys.stdout.flush()


def human_bytes(count: float) -> str:
    """`512 B`, `1.2 KiB`, `85.3 MiB`, `4.0 GiB`: binary units, one decimal (the one byte
    formatter of the CLI, so bars, log lines and summaries agree)."""
    value = float(count)
    if round(value) < 1024:
        return f"{round(value)} B"
    for unit in _BYTE_UNITS[1:-1]:
        value /= 1024
        # Decided on the rounded value: 1023.96 KiB is "1.0 MiB", never "1024.0 KiB".
        if round(value, 1) < 1024:
            return f"{value:.1f} {unit}"
    return f"{value / 1024:.1f} {_BYTE_UNITS[-1]}"


def rate(count: float, seconds: float) -> str:
    """`85.3 MiB/s`; `? B/s` before any time has passed."""
    return f"{human_bytes(count / seconds)}/s" if seconds > 0 else "? B/s"


BAR_WIDTH = (10, 40)  # a progress bar's narrowest and widest; narrower still, no bar
LABEL_MIN = 12  # a progress label is shortened with `…` down to this, then the bar goes


def _progress_bar() -> Any:
    """A transient rich progress display on stderr, one line per task: description, bar,
    amount, rate, ETA. The line fits the terminal as it is at each redraw: the description
    is shortened with `…` and the bar narrows or goes; the figures are never cut (a line
    wider than the terminal would wrap into a new line at every redraw). Amounts are bytes
    unless a task's description says " rows" (paged APIs count items)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        ProgressColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
    from rich.table import Column, Table
    from rich.text import Text

    class Amount(DownloadColumn):
        def render(self, task: Any) -> Any:
            if " rows" in task.description:
                return Text(f"{int(task.completed)}")
            done = human_bytes(task.completed)
            return Text(done if task.total is None else f"{done} of {human_bytes(task.total)}")

    class Rate(TransferSpeedColumn):
        def render(self, task: Any) -> Any:
            speed = task.finished_speed or task.speed
            if " rows" in task.description or speed is None:
                return super().render(task)
            return Text(f"{human_bytes(speed)}/s")

    console = Console(stderr=True)
    figures = (Amount(), Rate(), TimeRemainingColumn())

    class Line(ProgressColumn):
        """The whole line of a task, laid out for the console's width at each redraw."""

        def render(self, task: Any) -> Any:
            # One cell spare: a line that fills the last column wraps on some terminals.
            width = console.width - 1
            shown = [column.render(task) for column in figures]
            # Narrower than its figures, the line leaves out the ETA, then the rate.
            while len(shown) > 1 and Text(" ").join(shown).cell_len > width:
                shown.pop()
            numbers = Text(" ").join(shown)
            room = width - numbers.cell_len - 1  # for the label and the bar
            label = printable(str(task.description))
            bar = BAR_WIDTH[0] if room - 1 - BAR_WIDTH[0] >= min(_width(label), LABEL_MIN) else 0
            label = _shorten(label, room - (bar + 1 if bar else 0))
            if bar:
                bar = min(BAR_WIDTH[1], room - _width(label) - 1)
            parts: list[Any] = [Text(label)] if room >= LABEL_MIN // 2 else []
            if bar:
                parts.append(BarColumn(bar_width=bar).render(task))
            parts.append(numbers)
            line = Table.grid(*(Column(no_wrap=True) for _ in parts), padding=(0, 1))
            line.add_row(*parts)
            return line

    return Progress(Line(), console=console, transient=True)


def status_line(before: str, label: str, endings: Sequence[str]) -> str:
    """`before` `label` and the first of `endings` (the figures, from the fullest wording to
    the tersest) that fits one line of the terminal on stderr: a line redrawn in place must
    never wrap, or each redraw starts a new line. When none fits, the tersest one with the
    label shortened with `…`; the figures are never cut."""
    width = _terminal_width(sys.stderr) - 1  # a line that fills the last cell may wrap
    for ending in endings:
        line = f"{before}{label}{ending}"
        if _width(line) <= width:
            return line
    room = width - _width(before) - _width(endings[-1])
    return f"{before}{_shorten(label, max(1, room))}{endings[-1]}"


class ByteProgress(Protocol):
    """What a download reports: bytes so far, and a resume after a broken connection."""

    def update(self, done: int, total: int | None) -> None: ...

    def resumed(self, cause: str, at: int, attempt: int, attempts: int) -> None: ...


def _resume_text(cause: str, at: int, attempt: int, attempts: int) -> str:
    return f"{cause} at {human_bytes(at)}; resuming (attempt {attempt} of {attempts})"


class _Silent:
    def update(self, done: int, total: int | None) -> None:
        pass

    def resumed(self, cause: str, at: int, attempt: int, attempts: int) -> None:
        pass


class _Bar:
    """The rich bar; events are printed above it, so they stay when the bar goes."""

    def __init__(self, bar: Any, label: str) -> None:
        self._bar = bar
        self._label = label
        self._task = bar.add_task(label, total=None)

    def update(self, done: int, total: int | None) -> None:
        self._bar.update(self._task, completed=done, total=total)

    def resumed(self, cause: str, at: int, attempt: int, attempts: int) -> None:
        text = _resume_text(cause, at, attempt, attempts)
        self._bar.console.print(f"pulling {self._label}: {text}", markup=False, highlight=False)


class LogProgress:
    """Progress for a log that no bar can redraw (CI): whole lines, no carriage return, no
    escape, no markup; one when a milestone is crossed, else at most one per `interval`.

    Driven by the download's own reports: a connection silent for longer than the interval
    prints nothing until bytes flow again, or its resume line when it is given up on.
    """

    def __init__(
        self,
        label: str,
        write: Callable[[str], None],
        clock: Callable[[], float],
        interval: float,
    ) -> None:
        self._label = label
        self._write = write
        self._clock = clock
        self._interval = interval
        self._started: float | None = None
        self._last_line = 0.0
        self._milestones = list(PROGRESS_MILESTONES)

    def update(self, done: int, total: int | None) -> None:
        now = self._clock()
        if self._started is None:
            # Timed from the first bytes: a wait for another pull's lock is no transfer time.
            self._started = self._last_line = now
        if self._crossed(done, total) or now - self._last_line >= self._interval:
            self._last_line = now
            self._write(f"pulling {self._label}: {self._amount(done, total, now - self._started)}")

    def resumed(self, cause: str, at: int, attempt: int, attempts: int) -> None:
        self._write(f"pulling {self._label}: {_resume_text(cause, at, attempt, attempts)}")

    def _crossed(self, done: int, total: int | None) -> bool:
        """Whether this report passes a milestone not yet announced (a jump over two
        announces both in one line; a download started over does not announce them again)."""
        crossed = False
        while total and self._milestones and done * 100 >= self._milestones[0] * total:
            self._milestones.pop(0)
            crossed = True
        return crossed

    def _amount(self, done: int, total: int | None, elapsed: float) -> str:
        speed = rate(done, elapsed)
        if not total:
            return f"{human_bytes(done)}, {speed}"
        amount = f"{human_bytes(done)} of {human_bytes(total)} ({done * 100 // total}%), {speed}"
        if done <= 0 or elapsed <= 0:
            return amount
        from providers.core.timeutil import human_duration

        eta = human_duration((total - done) * elapsed / done, style="clock")
        return f"{amount}, ETA {eta}"


@contextlib.contextmanager
def byte_progress(label: str, *, log_lines: bool = True) -> Iterator[ByteProgress]:
    """Download progress on stderr: a transient bar on a terminal; off one, `LogProgress`
    lines unless `log_lines` is False (a program reading --json wants stderr quiet)."""
    if sys.stderr.isatty():
        with _progress_bar() as bar:
            yield _Bar(bar, label)
        return
    if not log_lines:
        yield _Silent()
        return
    yield LogProgress(label, message, progress_clock, PROGRESS_INTERVAL_SECONDS)


def fetch_progress() -> Callable[[int, int | None, str], None]:
    """Progress of provider downloads: a bar per file on stderr when it is a terminal.

    The bar starts on the first report (cached answers show nothing) and is removed when
    the process ends.
    """
    if not sys.stderr.isatty():
        return lambda done, total, what: None
    bars: dict[str, Any] = {}

    def update(done: int, total: int | None, what: str) -> None:
        if "progress" not in bars:
            import atexit

            bars["progress"] = _progress_bar()
            bars["progress"].start()
            atexit.register(bars["progress"].stop)
        progress = bars["progress"]
        if what not in bars:
            bars[what] = progress.add_task(what, total=total)
        progress.update(bars[what], completed=done, total=total)

    return update


def short_time(stamp: str | None) -> str | None:
    """`2026-11-30T07:34:53.388540Z` -> `2026-11-30 07:34:53` for narrow tables."""
    return stamp[:19].replace("T", " ") if stamp else None


# Terminal control characters (ESC, BEL, C1...) but tab and line feed: text a server sent
# (a quota's name, an error message) must not move the cursor or retitle the terminal.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """`text` with terminal control characters shown as escapes (`\\x1b`)."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def message(text: str) -> None:
    """A progress or info line for people: stderr, never stdout."""
    sys.stderr.write(f"{printable(text)}\n")


def warn(text: str) -> None:
    sys.stderr.write(f"shoal: warning: {printable(text)}\n")


def error(text: str) -> None:
    sys.stderr.write(f"shoal: error: {printable(text)}\n")


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
RULE = "─"  # under the header, as wide as the table
FREE_MIN = 12  # free text narrower than this moves under its row (or is left out)


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
        wrap = max(text, key=lambda i: max((_width(r[i] or "") for r in cells), default=0),
                   default=None)  # fmt: skip
    if wrap is not None:
        cols[wrap] = replace(cols[wrap], wrap=True)
    for i in keep:
        if 0 <= i < len(cols):
            cols[i] = replace(cols[i], drop=None, free=False, wrap=False, below=False)
    natural = [
        max([_width(c.name), *(_width(r[i] or "") for r in cells)]) for i, c in enumerate(cols)
    ]
    terminal = stream.isatty()
    width = _terminal_width(stream) if terminal and not wide() else None
    plan = _fit(cols, cells, natural, width)
    headers = bool(_chosen["headers"])
    shown = title if headers else None
    lines = _draw(shown, cols, cells, natural, right, plan, width, headers, terminal)
    stream.write("".join(f"{line}\n" for line in lines))
    stream.flush()
    if plan.dropped:
        left_out = ", ".join(_left_out(cols[i].name, [r[i] for r in cells]) for i in plan.dropped)
        said = f"not shown at {width} columns: {left_out} (-o wide shows them)"
        for part in _wrap(said, width):
            message(part)


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


def _terminal_width(stream: Any) -> int:
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


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
            floor[i] = min(natural[i], max(FREE_MIN, _width(col.name)))
        elif col.wrap:
            words = [_width(w) for r in cells for w in (r[i] or "").split()]
            floor[i] = min(natural[i], max([_width(col.name), FREE_MIN, *words]))
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


def _draw(
    title: str | None,
    cols: list[Col],
    cells: list[list[str | None]],
    natural: list[int],
    right: list[bool],
    plan: _Plan,
    width: int | None,
    headers: bool,
    terminal: bool,
) -> list[str]:
    style = _styles(terminal)
    widths = [plan.limits.get(i, n) for i, n in enumerate(natural)]
    indent = LEAD + (GROUP_INDENT if plan.grouped else "")

    def line(values: list[str]) -> str:
        parts = [
            _pad(_shorten(v, widths[i]), widths[i], right[i])
            for i, v in zip(plan.shown, values, strict=True)
        ]
        return (indent + SEPARATOR.join(parts)).rstrip()

    def row_lines(values: list[str]) -> list[str]:
        """A row's line, and more where prose is broken between words."""
        parts = [
            _wrap(v, widths[i]) if cols[i].wrap else [v]
            for i, v in zip(plan.shown, values, strict=True)
        ]
        depth = max((len(p) for p in parts), default=1)
        return [line([p[n] if n < len(p) else "" for p in parts]) for n in range(depth)]

    out: list[str] = []
    widest = 0  # of the header and the rows: the rule's width
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
                out.append(style("1", (LEAD + text).rstrip()))
        shown = row_lines(["—" if row[i] is None else str(row[i]) for i in plan.shown])
        widest = max([widest, *(_width(part) for part in shown)])
        out += shown
        for i in plan.below:
            value = row[i]
            if value is None:
                continue
            room = None if width is None else width - len(indent + BELOW_INDENT)
            if cols[i].free:
                out.append(indent + BELOW_INDENT + _shorten(value, room))
            else:
                out += [indent + BELOW_INDENT + part for part in _wrap(value, room)]
    top: list[str] = []
    if title:
        top += [style("3", part) for part in _wrap(title, width, breaks=" /")]
    if headers:
        head = line([cols[i].name for i in plan.shown])
        top += [style("1", head), RULE * max(widest, _width(head))]
    return top + out


def _styles(terminal: bool) -> Callable[[str, str], str]:
    """Bold headers and an italic title on a terminal that shows them."""
    if not terminal or os.environ.get("TERM", "dumb") == "dumb" or "NO_COLOR" in os.environ:
        return lambda code, text: text
    return lambda code, text: f"\x1b[{code}m{text}\x1b[0m" if text else text


def _pad(text: str, width: int, right: bool) -> str:
    gap = " " * max(0, width - _width(text))
    return gap + text if right else text + gap


def _shorten(text: str, width: int | None) -> str:
    """`text` in at most `width` cells, its end replaced by `…` when it does not fit: at a
    space when one leaves most of the room used (a time or an id in a note stays whole or
    goes whole)."""
    if width is None or _width(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = _char_width(ch)
        if used + w > width - 1:
            break
        out += ch
        used += w
    space = out.rfind(" ")
    if text[len(out) : len(out) + 1] != " " and space >= width // 2:
        out = out[:space]
    return out.rstrip() + "…"


def _wrap(text: str, width: int | None, breaks: str = " ") -> list[str]:
    """`text` in lines of at most `width` cells, broken only after a character of `breaks`
    (a word longer than the width stays whole: it is never cut)."""
    if width is None or _width(text) <= width:
        return [text]
    pieces = re.findall(rf"[^{re.escape(breaks)}]*(?:[{re.escape(breaks)}]+|$)", text)
    lines: list[str] = []
    current = ""
    for piece in filter(None, pieces):
        if current and _width(current + piece.rstrip()) > width:
            lines.append(current.rstrip())
            current = ""
        current += piece
    if current.strip():
        lines.append(current.rstrip())
    return lines


def _char_width(ch: str) -> int:
    import unicodedata

    if unicodedata.combining(ch):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def _width(text: str) -> int:
    """Terminal cells `text` takes (wide characters two, combining marks none)."""
    if text.isascii():
        return len(text)
    return sum(_char_width(ch) for ch in text)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return number_text(value)
    # One line per row: a line break or tab in a value (a note) is a space in a table.
    return re.sub(r"[\r\n\t]+", " ", printable(str(value)))


def number_text(value: float) -> str:
    """A number as JSON writes it (every digit it holds, never an exponent): a table cell
    shows the figure the JSON of the same command holds."""
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        text = f"{value:.15f}".rstrip("0").rstrip(".")
    return text
