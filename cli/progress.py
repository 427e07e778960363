"""Progress for people: byte amounts and rates, a transient Rich bar on a terminal, log
lines off one (CI), and a status line redrawn in place that never wraps."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

from cli import output
from cli.terminal import shorten, terminal_width, text_width

# Off a terminal, a progress line at most this often (besides the milestones): enough for a
# CI log to show life, few enough that a long pull stays readable.
PROGRESS_INTERVAL_SECONDS = 10.0
PROGRESS_MILESTONES = (25, 50, 75)  # percent of a known total, each announced once
# Looked up when a pull starts, so a test can run the log lines on a clock of its own.
progress_clock: Callable[[], float] = time.monotonic
_BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


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
            label = output.printable(str(task.description))
            fits = room - 1 - BAR_WIDTH[0] >= min(text_width(label), LABEL_MIN)
            bar = BAR_WIDTH[0] if fits else 0
            label = shorten(label, room - (bar + 1 if bar else 0))
            if bar:
                bar = min(BAR_WIDTH[1], room - text_width(label) - 1)
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
    width = terminal_width(sys.stderr) - 1  # a line that fills the last cell may wrap
    for ending in endings:
        line = f"{before}{label}{ending}"
        if text_width(line) <= width:
            return line
    room = width - text_width(before) - text_width(endings[-1])
    return f"{before}{shorten(label, max(1, room))}{endings[-1]}"


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
    yield LogProgress(label, output.message, progress_clock, PROGRESS_INTERVAL_SECONDS)


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
