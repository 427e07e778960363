"""`image pull` progress: log lines off a terminal, the Rich bar on one, the summary line.

The reporter is tested on a clock of the test's own (no sleeping through 10 s intervals);
the CLI against the loopback image server (tests/drivers/image/server.py).
"""

from __future__ import annotations

import math
import os
import pty
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cli import output
from cli.progress import PROGRESS_INTERVAL_SECONDS, LogProgress, human_bytes
from providers.core.timeutil import human_duration
from tests.cli.test_image_commands import FAST, MIB, TERMINAL, image_tar, sha256, spawn
from tests.drivers.image.server import ImageServer

GIB = 1024 * MIB
SIZE = r"(\d+ B|\d+\.\d (KiB|MiB|GiB))"
TIME = r"(\d+\.\ds|\d+s|\d+m\d\ds|\d+h\d\dm)"
PROGRESS = re.compile(
    rf"pulling img-1\.0\.tar\.gz: {SIZE} of {SIZE} \((?P<percent>\d+)%\), {SIZE}/s, ETA {TIME}"
)
RESUME = re.compile(
    rf"pulling img-1\.0\.tar\.gz: connection (dropped|closed early) at {SIZE}; "
    r"resuming \(attempt 1 of 3\)"
)
SUMMARY = re.compile(
    rf"pulled img-1\.0: {SIZE} in {TIME} \({SIZE}/s\), (?P<sum>.+), unpacked {SIZE} in 3 entries"
)
BANDS = [(25, 50), (50, 75), (75, 100)]  # where each milestone's line falls

Cli = Callable[..., Any]


@pytest.fixture
def http_server() -> Iterator[ImageServer]:
    server = ImageServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def isolated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, write_config: Callable[[str], Path]
) -> None:
    """No ~/.netrc or image credentials from outside; fast retries (3 attempts)."""
    fake_home = tmp_path / "user-home"
    fake_home.mkdir()
    monkeypatch.setenv("HOME", str(fake_home))
    monkeypatch.delenv("SHOAL_IMAGE_USER", raising=False)
    monkeypatch.delenv("SHOAL_IMAGE_PASSWORD", raising=False)
    write_config(FAST)


@pytest.fixture
def out(tmp_path: Path) -> Path:
    return tmp_path / "images"


@pytest.fixture
def four_mib(http_server: ImageServer) -> tuple[str, bytes]:
    """A 4 MiB image: 64 KiB server chunks are under 2% each, so no chunk jumps a band."""
    data = image_tar(blob=4 * MIB)
    return http_server.add("/img-1.0.tar.gz", data), data


class FakeClock:
    """A clock that moves only when told; `step` is added at every reading."""

    def __init__(self, step: float = 0.0) -> None:
        self.now = 100.0
        self.step = step
        self.readings: list[float] = []

    def __call__(self) -> float:
        self.now += self.step
        self.readings.append(self.now)
        return self.now


def reporter(clock: FakeClock, interval: float = 10.0) -> tuple[LogProgress, list[str]]:
    written: list[str] = []
    return LogProgress("img", written.append, clock, interval), written


def assert_plain(text: str) -> None:
    assert "\r" not in text and "\x1b" not in text and "[/" not in text, text


def progress_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if PROGRESS.fullmatch(line)]


def percent(line: str) -> int:
    match = PROGRESS.fullmatch(line)
    assert match, line
    return int(match["percent"])


# -- the reporter, on a clock of the test's own ----------------------------------------------


@pytest.mark.parametrize(
    ("count", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (1024 * 1024 - 40, "1.0 MiB"),  # 1023.96 KiB rounds up a unit, not to "1024.0 KiB"
        (int(85.3 * MIB), "85.3 MiB"),
        (4 * GIB, "4.0 GiB"),
        (3 * 1024 * GIB, "3.0 TiB"),
    ],
)
def test_human_bytes(count: int, text: str) -> None:
    assert human_bytes(count) == text


@pytest.mark.parametrize(
    ("seconds", "text"), [(0.42, "0.4s"), (33.4, "33s"), (245, "4m05s"), (7800, "2h10m")]
)
def test_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds, style="clock") == text


def test_a_line_at_most_every_interval() -> None:
    clock = FakeClock()
    progress, written = reporter(clock)
    at: list[float] = []
    for second in range(35):  # an unknown total: no milestones, only the interval
        clock.now = 100.0 + second
        before = len(written)
        progress.update(second * MIB, None)
        if len(written) > before:
            at.append(second)
    assert at == [10, 20, 30]  # timed from the first report
    assert written[0] == "pulling img: 10.0 MiB, 1.0 MiB/s"


def test_milestones_each_once_even_when_jumped_over_or_started_over() -> None:
    clock = FakeClock(step=0.1)  # well inside the interval: only milestones print
    progress, written = reporter(clock)
    for done in (100, 249, 250, 260, 499, 800, 810):
        progress.update(done, 1000)
    assert [re.findall(r"\((\d+)%\)", line) for line in written] == [["25"], ["80"]]
    for done in (0, 300, 600, 900):  # the download started over: nothing is announced twice
        progress.update(done, 1000)
    assert len(written) == 2


def test_line_with_a_known_total_has_sizes_rate_and_eta() -> None:
    clock = FakeClock()
    progress, written = reporter(clock)
    clock.now += 5  # connecting, or waiting for another pull's lock: not transfer time
    progress.update(0, 4 * GIB)
    clock.now += 16
    progress.update(GIB, 4 * GIB)
    assert written == ["pulling img: 1.0 GiB of 4.0 GiB (25%), 64.0 MiB/s, ETA 48s"]


def test_a_resume_prints_at_once() -> None:
    progress, written = reporter(FakeClock())
    progress.resumed("connection dropped", int(1.2 * GIB), 2, 5)
    assert written == ["pulling img: connection dropped at 1.2 GiB; resuming (attempt 2 of 5)"]


# -- through the CLI, stderr not a terminal ---------------------------------------------------


def test_piped_pull_prints_the_25_50_75_percent_lines_once_each(
    cli: Cli, out: Path, four_mib: tuple[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cli.progress.PROGRESS_INTERVAL_SECONDS", math.inf)  # milestones only
    url, _ = four_mib
    run = cli("image", "pull", url, "--out", str(out))
    assert run.exit_code == 0, run.stderr
    assert_plain(run.stderr)
    *lines, summary = run.stderr.splitlines()
    assert lines == progress_lines(run.stderr), run.stderr  # every line but the last is one
    assert len(lines) == 3, run.stderr
    for line, (low, high) in zip(lines, BANDS, strict=True):
        assert low <= percent(line) < high, line
    assert SUMMARY.fullmatch(summary), summary


def test_piped_pull_prints_a_line_per_interval_between_milestones(
    cli: Cli, out: Path, four_mib: tuple[str, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow transfer, on a clock where every chunk takes a second: lines come every 10 s,
    besides the milestone lines, never closer together."""
    clock = FakeClock(step=1.0)
    at: list[tuple[float, str]] = []
    monkeypatch.setattr("cli.progress.progress_clock", clock)
    monkeypatch.setattr(output, "message", lambda text: at.append((clock.now, text)))
    url, _ = four_mib
    run = cli("image", "pull", url, "--out", str(out))
    assert run.exit_code == 0, run.stderr
    progress = [(when, line) for when, line in at if PROGRESS.fullmatch(line)]
    assert len(progress) == len(at) - 1, at  # and the summary
    # A milestone's line is the first at or past it (an earlier one would have crossed it).
    milestones = {next(line for _, line in progress if percent(line) >= low) for low, _ in BANDS}
    timed = [when for when, line in progress if line not in milestones]
    assert timed, progress  # the interval printed lines of its own
    previous = clock.readings[0]  # the pull started
    for when, line in progress:
        if line not in milestones:
            assert when - previous >= PROGRESS_INTERVAL_SECONDS, (when, previous)
        previous = when


def test_a_real_pipe_gets_plain_lines(
    home: Path,
    out: Path,
    four_mib: tuple[str, bytes],
    procs: list[subprocess.Popen[str]],
) -> None:
    url, _ = four_mib
    proc = spawn(home, procs, "image", "pull", url, "--out", str(out))
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    assert stdout == f"{out / 'img-1.0'}\n"
    assert_plain(stderr)
    *lines, summary = stderr.splitlines()
    assert lines == progress_lines(stderr), stderr
    for low, high in BANDS:  # a slow machine may add interval lines, never skip a milestone
        assert any(low <= percent(line) < high for line in lines), stderr
    assert SUMMARY.fullmatch(summary), summary


def test_a_dropped_connection_prints_a_resume_line_and_the_pull_succeeds(
    cli: Cli, http_server: ImageServer, out: Path, four_mib: tuple[str, bytes]
) -> None:
    url, data = four_mib
    http_server.fault("/img-1.0.tar.gz", "drop", at=2 * MIB)
    run = cli("image", "pull", url, "--out", str(out), "--sum", f"sha256:{sha256(data)}")
    assert run.exit_code == 0, run.stderr
    assert_plain(run.stderr)
    resumes = [line for line in run.stderr.splitlines() if RESUME.fullmatch(line)]
    assert len(resumes) == 1, run.stderr
    assert len(http_server.requests_for("/img-1.0.tar.gz", "GET")) == 2  # it did resume
    assert (out / "img-1.0/blob").stat().st_size == 4 * MIB


def test_the_summary_line_has_human_sizes_and_json_keeps_exact_bytes(
    cli: Cli, out: Path, four_mib: tuple[str, bytes]
) -> None:
    url, data = four_mib
    checked = cli("image", "pull", url, "--out", str(out), "--sum", f"sha256:{sha256(data)}")
    assert checked.exit_code == 0, checked.stderr
    summary = SUMMARY.fullmatch(checked.stderr.splitlines()[-1])
    assert summary, checked.stderr
    assert summary["sum"] == f"verified sha256:{sha256(data)}"
    assert f"pulled img-1.0: {human_bytes(len(data))} in " in checked.stderr
    assert str(len(data)) not in checked.stderr  # no raw byte count

    unchecked = cli("image", "pull", url, "--out", str(out), "--force")
    summary = SUMMARY.fullmatch(unchecked.stderr.splitlines()[-1])
    assert summary, unchecked.stderr
    assert summary["sum"] == f"sha256:{sha256(data)} (unverified)"

    as_json = cli("image", "pull", url, "--out", str(out), "--force", "--json")
    assert as_json.exit_code == 0
    assert as_json.stderr == ""  # a program reading --json gets no progress lines
    assert as_json.json()["bytes_downloaded"] == len(data)
    assert as_json.json()["bytes_unpacked"] == len(b"release v1\n") + 4 * MIB


# -- on a terminal -----------------------------------------------------------------------------


def on_a_pty(home: Path, procs: list[subprocess.Popen[str]], *args: str) -> tuple[int, str]:
    """Run `shoal ARGS` with stderr on a pseudo-terminal; its exit code and what it drew."""
    leader, follower = pty.openpty()
    captured = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # EIO: every writer of the pty is gone
                return
            if not chunk:
                return
            captured.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = spawn(home, procs, *args, stderr=follower, env=TERMINAL)
        os.close(follower)
        follower = -1
        proc.communicate(timeout=120)
        reader.join(timeout=10)
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)
    return proc.returncode, captured.decode("utf-8", "replace")


def test_on_a_terminal_the_bar_shows_and_resumes_print_above_it(
    home: Path,
    http_server: ImageServer,
    out: Path,
    four_mib: tuple[str, bytes],
    procs: list[subprocess.Popen[str]],
) -> None:
    url, _ = four_mib
    http_server.fault("/img-1.0.tar.gz", "drop", at=2 * MIB)
    code, text = on_a_pty(home, procs, "image", "pull", url, "--out", str(out))
    assert code == 0, text
    assert "\x1b[" in text and "━" in text  # the Rich bar drew
    assert not re.search(r"pulling [^\r\n]*%", text), text  # and no log lines
    assert RESUME.search(text), text  # the resume, above the bar
    summary = text[text.index("pulled img-1.0: ") :].splitlines()[0]
    assert SUMMARY.fullmatch(summary), summary
