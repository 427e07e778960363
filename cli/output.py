"""Rendering: JSON or Rich tables on stdout, messages on stderr.

JSON is plain `json.dumps` (no markup, stable key order from the models). Rich is imported
only when a table is drawn; it honours NO_COLOR and drops styling when stdout is not a TTY.
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
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
    return _chosen["format"] == "name"


def emit_names(ids: Iterable[str]) -> None:
    """One id per line on stdout, nothing else (`xargs shoal free`)."""
    sys.stdout.write("".join(f"{printable(one)}\n" for one in ids))
    sys.stdout.flush()


def wide() -> bool:
    """`--output wide`: tables add the columns a narrow terminal leaves out."""
    return _chosen["format"] == "wide"


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


def _progress_bar() -> Any:
    """A transient rich progress display on stderr: description, bar, amount, rate, ETA.
    Amounts are bytes unless a task's description says " rows" (paged APIs count items)."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )
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

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        Amount(),
        Rate(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )


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


def table(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    keep: Sequence[int] = (0,),
    wrap: int | None = None,
    stderr: bool = False,
) -> None:
    """A table on stdout (on stderr with `stderr`: an explanation beside the data). On a
    terminal it fits the width: the `keep` columns (IDs, statuses) are never cut, the `wrap`
    column (notes) gives way first and wraps, the rest shrink as Rich decides. Piped, every
    row stays on one line (grep, awk, cut)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    stream = sys.stderr if stderr else sys.stdout
    piped = not stream.isatty()
    cells = [["—" if v is None else _cell(v) for v in row] for row in rows]
    # Piped output has no width to fit: wide enough that nothing wraps.
    needed = sum(max([len(c), *(len(r[i]) for r in cells)]) + 3 for i, c in enumerate(columns))
    width = max(needed, len(title or "")) + 4 if piped else None
    console = Console(highlight=False, soft_wrap=False, width=width, file=stream)
    headers = bool(_chosen["headers"])
    out = Table(
        title=title if headers else None,
        box=box.SIMPLE_HEAD if headers else None,
        title_justify="left",
        show_edge=False,
        show_header=headers,
    )
    for i, name in enumerate(columns):
        values = [r[i] for r in rows if r[i] is not None]
        numeric = bool(values) and all(isinstance(c, (int, float)) for c in values)
        longest = max([len(name), *(len(r[i]) for r in cells)])
        out.add_column(
            name,
            justify="right" if numeric else "left",
            no_wrap=piped or i != wrap,
            # With a column to wrap, every other one keeps its width: the wrap gives way.
            min_width=longest if i in keep or (wrap is not None and i != wrap) else None,
            overflow="fold" if i == wrap else "ellipsis",
            ratio=1 if i == wrap else None,
        )
    for row in cells:
        out.add_row(*row)
    console.print(out, markup=False)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}" if value.is_integer() else f"{value:.4g}"
    return printable(str(value))
