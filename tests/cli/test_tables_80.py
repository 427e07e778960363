"""Tables and progress lines on a real terminal of 80 (and 120) columns: no line wider than
the terminal, and every figure, id, status and name the JSON of the same command holds shown
whole (a time may be relative). `-o wide` only adds: on any terminal it cuts nothing.

Each command runs as `python -m cli` with stdout and stderr on pseudo-terminals of the
given size (COLUMNS and LINES set as a shell sets them), against a fresh SHOAL_HOME; the
cloud prices come from the loopback fixtures of tests/providers/<provider>/.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from providers.core.timeutil import human_duration, utcnow
from tests.conftest import shoal_argv, shoal_env
from tests.drivers.image.server import ImageServer
from tests.providers.apiserver import ApiServer, Reply

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
RULE = "─"
TEST_ALLOC = ("alloc", "--driver", "test", "--cpu", "1", "--ram", "1")
SLEEP = ("-o", "entry=sleep 3600")
CLOUDS = "aws,azure,gcp"


def on_terminal(
    home: Path, *args: str, columns: int = 80, env: dict[str, str] | None = None
) -> tuple[str, str]:
    """Run `shoal ARGS` with stdout and stderr each on a terminal `columns` wide and 40
    lines high; what each showed, escapes removed, carriage returns kept."""
    extra = {"TERM": "xterm-256color", "COLUMNS": str(columns), "LINES": "40", **(env or {})}
    full_env = shoal_env(home, extra)
    full_env.pop("NO_COLOR", None)  # styled, as a terminal shows it: escapes do not count
    size = struct.pack("HHHH", 40, columns, 0, 0)
    ends = [pty.openpty(), pty.openpty()]
    for _, follower in ends:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, size)
    shown = [bytearray(), bytearray()]

    def drain(leader: int, into: bytearray) -> None:
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every writer of the pty is gone
                return
            if not chunk:
                return
            into.extend(chunk)

    readers = [
        threading.Thread(target=drain, args=(leader, into), daemon=True)
        for (leader, _), into in zip(ends, shown, strict=True)
    ]
    for reader in readers:
        reader.start()
    try:
        proc = subprocess.Popen(
            shoal_argv(*args),
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=ends[0][1],
            stderr=ends[1][1],
        )
        for _, follower in ends:
            os.close(follower)
        proc.wait(timeout=120)
        for reader in readers:
            reader.join(timeout=10)
    finally:
        for leader, _ in ends:
            os.close(leader)
    assert proc.returncode == 0, bytes(shown[1]).decode(errors="replace")
    out, err = (ANSI.sub("", bytes(b).decode(errors="replace")) for b in shown)
    return out.replace("\r\n", "\n"), err.replace("\r\n", "\n")


def piped(home: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    run = subprocess.run(
        shoal_argv(*args), env=shoal_env(home, env), capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    return run


def as_json(home: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return json.loads(piped(home, *args, "--json", env=env).stdout)


def fits(text: str, columns: int) -> list[str]:
    """The lines of `text`, each checked to fit `columns` (a line as wide as the terminal
    would be fine, but none is wider)."""
    lines = text.splitlines()
    wider = [line for line in lines if len(line) > columns]
    assert not wider, f"{len(wider)} line(s) wider than {columns}:\n" + "\n".join(wider)
    return lines


def uncut(text: str) -> None:
    assert "…" not in text, text


def body(lines: list[str]) -> list[str]:
    """A table's lines after its header rule, up to the first blank line."""
    start = next(i for i, line in enumerate(lines) if line and set(line) == {RULE})
    rows = []
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        rows.append(line)
    return rows


def header(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line and set(line) == {RULE})
    return lines[start - 1].split()


# -- resources -------------------------------------------------------------------------------

CLASSES = {"onDemand": "od", "spot": "spot"}


def expected_resources(data: list[dict[str, Any]]) -> tuple[set[tuple[str, ...]], list[str]]:
    """(level, class, resource, supply, allocated, allocatable) of every figure the JSON has,
    and the scheduled points' times."""
    rows: set[tuple[str, ...]] = set()
    points: list[str] = []

    def stat_rows(level: str, cls: str, stat: dict[str, Any]) -> None:
        names = {
            (kind, name)
            for part in ("supply", "allocated", "allocatable")
            for kind, values in stat.get(part, {}).items()
            for name in values
        }
        for kind, name in names:
            figures = (stat.get(p, {}).get(kind, {}).get(name, "—") for p in
                       ("supply", "allocated", "allocatable"))  # fmt: skip
            rows.add((level, cls, f"{kind}/{name}", *figures))

    def walk(item: dict[str, Any]) -> None:
        level = f"{item['key']}={item['value']}"
        stat = item["stat"]
        for key, cls in CLASSES.items():
            if key in stat:
                stat_rows(level, cls, stat[key])
        scheduled = stat.get("scheduled") or {}
        for at in sorted({at for part in scheduled.values() for at in part}):
            points.append(at)
            point = {part: scheduled.get(part, {}).get(at, {}) for part in scheduled}
            stat_rows(level, "sched", point)
        for child in item.get("nextLevel") or []:
            walk(child)

    for res in data:
        for item in res["overview"]:
            walk(item)
        for items in (res.get("breakdown") or {}).values():
            for item in items:
                walk(item)
    return rows, points


@pytest.fixture
def held(home: Path, reap_workloads: None) -> Iterator[list[str]]:
    """A process allocation holding capacity now and a booking of it two hours ahead."""
    made = piped(home, "alloc", "--driver", "process", "--cpu", "1", "--ram", "1",
                 "--lifetime", "3h", *SLEEP).stdout.strip()  # fmt: skip
    booked = piped(home, "alloc", "--driver", "process", "--cpu", "1", "--ram", "1",
                   "--at", "+2h", "--lifetime", "2h", *SLEEP).stdout.strip()  # fmt: skip
    yield [made, booked]
    subprocess.run(shoal_argv("free", made, booked), env=shoal_env(home), capture_output=True)


@pytest.mark.parametrize("columns", [80, 120])
def test_resources_show_every_figure_whole(home: Path, held: list[str], columns: int) -> None:
    data = as_json(home, "resources")
    wanted, points = expected_resources(data)
    assert points and any(r[1] == "sched" for r in wanted)  # the booking is on the schedule
    out, err = on_terminal(home, "resources", columns=columns)
    lines = fits(out, columns)
    uncut(out)
    names = header(lines)
    assert names[-3:] == ["Supply", "Allocated", "Allocatable"]
    shown: set[tuple[str, ...]] = set()
    level = region = ""
    for line in body(lines):
        cells = line.split()
        if "Level" in names:  # wide enough for the flat table
            region, level, rest = cells[0], cells[1], cells[2:]
        elif not line.startswith("   "):  # a sub-header: the region and level of the rows
            region, level = cells[0], cells[-1]
            continue
        else:
            rest = cells
        cls, figures = rest[0], rest[-4:]
        if "When" in names:
            when = " ".join(rest[1:-4])
            assert when == "now" or re.fullmatch(r"in \d+[smhd]", when), line
        assert region == "local"
        shown.add((level, cls, *figures))
    assert shown == wanted
    assert err == ""


def test_resources_wide_adds_the_times_of_the_schedule(home: Path, held: list[str]) -> None:
    data = as_json(home, "resources")
    _, points = expected_resources(data)
    out, _ = on_terminal(home, "resources", "-o", "wide", columns=120)
    uncut(out)
    assert "When (UTC)" in " ".join(header(out.splitlines()))
    for at in points:
        assert at in out
    assert "Level" in header(out.splitlines())  # -o wide keeps the level in its column


# -- pricing ---------------------------------------------------------------------------------


@pytest.fixture
def clouds(home: Path) -> Iterator[dict[str, str]]:
    """aws, azure and gcp price lists on loopback servers, fetched once into the cache."""
    from providers.aws.fetch import REGION_INDEX_PATH
    from tests.providers.aws import payloads as aws
    from tests.providers.azure import payloads as azure
    from tests.providers.gcp import payloads as gcp

    with ApiServer() as aws_api, ApiServer() as azure_api, ApiServer() as gcp_api:
        aws_api.route(REGION_INDEX_PATH, lambda q, h: Reply.json(aws.region_index()))
        products, on_demand, reserved = aws.catalog_products("us-east-1", "USD")
        offer = aws.offer_file(products, on_demand, reserved)
        aws_api.route(aws.OFFER_PATH.format(region="us-east-1"), offer)
        azure_api.route(azure.PRICES_PATH, azure.PricesApi(azure.catalog(), base=azure_api.base))
        gcp.serve(gcp_api)
        env = {
            "SHOAL_AWS_PRICING_URL": aws_api.base,
            "SHOAL_AWS_EC2_URL": aws_api.base + "/ec2/{region}",
            "SHOAL_AZURE_PRICES_URL": azure_api.base,
            "SHOAL_GCP_BILLING_URL": gcp_api.base,
            "SHOAL_GCP_COMPUTE_URL": gcp_api.base,
            "SHOAL_GCP_API_KEY": gcp.API_KEY,
        }
        yield env


def price(value: float | None) -> str:
    """A price as its JSON writes it (a whole number without its `.0`)."""
    if value is None:
        return "—"
    return str(int(value)) if float(value).is_integer() else json.dumps(value)


def expected_prices(data: list[dict[str, Any]]) -> dict[tuple[str, str, str], tuple[str, ...]]:
    return {
        (entry["provider"], entry["region"]["name"], name): (
            price(item.get("onDemandPrice")),
            price(item.get("spotPrice")),
            price(item.get("scheduledPrice")),
        )
        for entry in data
        for name, item in entry["items"].items()
    }


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("order", [(), ("--sort", "price")])
def test_pricing_shows_every_price_type_and_region_whole(
    home: Path, clouds: dict[str, str], columns: int, order: tuple[str, ...]
) -> None:
    data = as_json(home, "pricing", "-p", CLOUDS, *order, env=clouds)
    wanted = expected_prices(data)
    assert {p for p, _, _ in wanted} == {"aws", "azure", "gcp"} and len(wanted) > 100
    out, err = on_terminal(home, "pricing", "-p", CLOUDS, *order, columns=columns, env=clouds)
    lines = fits(out, columns)
    uncut(out)
    names = header(lines)
    after = len(names) - 1 - max(i for i, name in enumerate(names) if name == "/h")
    assert names[-after - 6 :][:6] == ["od", "/h", "spot", "/h", "sched", "/h"]
    shown: dict[tuple[str, str, str], tuple[str, ...]] = {}
    provider = region = ""
    for line in body(lines):
        cells = line.split()
        if "Provider" in names:
            provider, region, rest = cells[0], cells[1], cells[2:]
        elif not line.startswith("   "):  # aws  us-east-1  USD  as of 1m ago
            provider, region, currency = cells[:3]
            assert currency == "USD" and "as of" in line
            continue
        else:
            rest = cells
        shown[(provider, region, rest[0])] = tuple(rest[len(rest) - after - 3 :][:3])
    assert shown == wanted
    everything = out + err
    assert "USD" in everything  # the currency: in the sub-headers, or said on stderr


def test_pricing_wide_at_120_columns_cuts_nothing(home: Path, clouds: dict[str, str]) -> None:
    data = as_json(home, "pricing", "-p", CLOUDS, env=clouds)
    out, _ = on_terminal(home, "pricing", "-p", CLOUDS, "-o", "wide", columns=120, env=clouds)
    uncut(out)
    names = header(out.splitlines())
    for column in ("Provider", "Region", "vCPUs", "GiB", "GPU", "Currency", "(UTC)"):
        assert column in names
    for (provider, region, name), prices in expected_prices(data).items():
        row = next(r for r in body(out.splitlines()) if f" {name} " in r)
        assert row.split()[:3] == [provider, region, name]
        assert " ".join(prices) in " ".join(row.split())
    for entry in data:
        assert entry["asOf"] in out


# -- status ----------------------------------------------------------------------------------

LONG_NOTE_META = ("-m", "purpose=" + "a-rather-long-metadata-value-" * 3)


@pytest.fixture
def allocations(home: Path) -> list[dict[str, Any]]:
    """One allocation with metadata, a booking two hours ahead, two failed rows with long
    notes; their JSON."""
    piped(home, *TEST_ALLOC, "--lifetime", "3h", "-m", "team=infra", *LONG_NOTE_META)
    piped(home, *TEST_ALLOC, "--at", "+2h", "--lifetime", "2h")
    for which in ("1", "2"):
        failed = subprocess.run(
            shoal_argv(*TEST_ALLOC, "-o", "fail_allocate=255", "-m", f"X={which}"),
            env=shoal_env(home),
            capture_output=True,
        )
        assert failed.returncode != 0
    rows = as_json(home, "status", "--all")
    assert {r["status"] for r in rows} == {"ALLOCATED", "RESERVED", "FAILED"}
    return list(rows)


def stamp(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def relative(text: str, since: datetime, until: datetime) -> set[str]:
    """What a table may show for a time ahead, read between `since` and `until`."""
    return {human_duration(stamp(text) - since), human_duration(stamp(text) - until)}


@pytest.mark.parametrize("columns", [80, 120])
def test_status_all_shows_ids_statuses_figures_and_the_booking_whole(
    home: Path, allocations: list[dict[str, Any]], columns: int
) -> None:
    since = utcnow()
    out, _ = on_terminal(home, "status", "--all", columns=columns)
    until = utcnow()
    lines = fits(out, columns)
    names = header(lines)
    assert names[:5] == ["ID", "Driver", "Status", "CPU", "GiB"]
    assert "Starts" in names and "Expires" in names
    rows = body(lines)
    for alloc in allocations:
        (line,) = [r for r in rows if r.split()[0] == alloc["id"]]
        cells = line.split()
        assert cells[:5] == [alloc["id"], alloc["driver"], alloc["status"], "1", "1"], line
        # Age, then Starts (`in 2h` or `—`), then Expires.
        starts = cells[6:8] if cells[6] == "in" else cells[6:7]
        expires = cells[6 + len(starts)]
        if alloc["status"] == "RESERVED":
            # Starts: until its window opens; Expires: its window's end, from its start.
            assert starts[0] == "in" and starts[1] in relative(alloc["starts"], since, until)
            assert expires in relative(alloc["expires"], since, until), line
            window = stamp(alloc["expires"]) - stamp(alloc["starts"])
            assert abs(window.total_seconds() - 2 * 3600) < 1  # --lifetime 2h, from its start
        else:
            assert starts[0] == "—", line
        note = alloc["note"]
        if note:  # free text: whole, or its start shortened with … (on its row or under it)
            shown = next(r for r in rows[rows.index(line) :] if note[:20] in r)
            text = shown[shown.index(note[:20]) :]
            assert text == note or (text.endswith("…") and note.startswith(text[:-1]))


def test_status_wide_at_120_columns_cuts_nothing(
    home: Path, allocations: list[dict[str, Any]]
) -> None:
    out, _ = on_terminal(home, "status", "--all", "-o", "wide", columns=120)
    uncut(out)
    names = " ".join(header(out.splitlines()))
    for column in ("Age", "Starts", "Expires", "Note", "Created (UTC)", "Starts (UTC)"):
        assert column in names
    rows = body(out.splitlines())
    assert len(rows) == len(allocations)  # one line each: nothing moved under its row
    for alloc in allocations:
        (line,) = [r for r in rows if r.split()[0] == alloc["id"]]
        assert (alloc["note"] or "—") in line
        for at in (alloc["created"], alloc["starts"], alloc["expires"]):
            if at:
                assert f"{at[:19]}Z" in line


def test_piped_status_keeps_every_row_on_one_line(
    home: Path, allocations: list[dict[str, Any]]
) -> None:
    out = piped(home, "status", "--all", env={"COLUMNS": "80"}).stdout
    rows = body(out.splitlines())
    assert len(rows) == len(allocations)
    for alloc in allocations:
        assert any(alloc["id"] in r and (alloc["note"] or "—") in r for r in rows)


# -- image list ------------------------------------------------------------------------------


@pytest.fixture
def image_home(home: Path) -> Iterator[Path]:
    from tests.cli.test_image_commands import FAST, image_tar

    (home / "config.toml").write_text(FAST)
    server = ImageServer().start()
    try:
        url = server.add("/ubuntu-base-with-a-longer-name-22.04.tar.gz", image_tar(b"u"))
        piped(home, "image", "pull", url, "--tag", "stable-2026")
        piped(home, "image", "pull", server.add("/b-1.tar.gz", image_tar(b"b")))
    finally:
        server.stop()
    yield home


@pytest.mark.parametrize("columns", [80, 120])
def test_image_list_shows_names_sizes_and_checksums_whole(image_home: Path, columns: int) -> None:
    images = as_json(image_home, "image", "list")
    assert len(images) == 2
    out, _ = on_terminal(image_home, "image", "list", columns=columns)
    lines = fits(out, columns)
    uncut(out)
    rows = body(lines)
    for image in images:
        (line,) = [r for r in rows if r.split()[:2] == [image["name"], image["version"]]]
        from cli.progress import human_bytes

        assert human_bytes(image["bytes_unpacked"]) in line  # human, as the issue asks
        assert not image["tag"] or image["tag"] in line.split()
        assert image["checksum"] in out.split()  # on its row, or under it
    # The title, broken between path components where it must be.
    title = "".join(out.splitlines()[:2]).replace("images in ", "", 1)
    assert title.startswith(str(image_home))


# -- progress lines --------------------------------------------------------------------------


def redraws(text: str) -> list[str]:
    """Every state a line redrawn in place went through."""
    return [part for part in re.split(r"[\r\n]", text) if part.strip()]


def test_a_pull_bar_with_a_long_label_stays_one_line_at_80_columns(home: Path) -> None:
    from tests.cli.test_image_commands import MIB, PATIENT, image_tar

    (home / "config.toml").write_text(PATIENT)  # the stall below is no timeout
    label = "ubuntu-base-with-a-name-long-enough-to-fill-a-line-by-itself-22.04.tar.gz"
    server = ImageServer().start()
    try:
        url = server.add(f"/{label}", image_tar(blob=4 * MIB))
        server.fault(f"/{label}", "stall", at=1 * MIB, seconds=1.5)  # a bar to watch
        _, err = on_terminal(home, "image", "pull", url, columns=80)
    finally:
        server.stop()
    bars = [s for s in redraws(err) if "MiB of" in s and not s.startswith("pulled ")]
    assert bars, err
    fits("\n".join(bars), 80)
    for state in bars:  # the amount always whole; the label shortened, never the figures
        assert re.search(r"\d+\.\d MiB of \d+\.\d MiB", state), state
    assert any("…" in s for s in bars) and any(label[:12] in s for s in bars)


def test_a_waiter_line_fits_80_columns(
    home: Path, procs: list[subprocess.Popen[str]], write_config: Callable[[str], Path]
) -> None:
    import time

    from tests.conftest import wait_for

    write_config('[drivers."test/default"]\ncpu_limit = 1\nram_limit = 10\n')
    piped(home, *TEST_ALLOC, "--lifetime", "1h")
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 80, 0, 0))
    try:
        env = shoal_env(home, {"TERM": "xterm-256color", "COLUMNS": "80", "LINES": "40"})
        proc = subprocess.Popen(
            shoal_argv(*TEST_ALLOC, "--wait", "--timeout", "1m"),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            text=True,
        )
        procs.append(proc)
        seen = bytearray()
        os.set_blocking(leader, False)

        def redrawn_twice() -> bool:
            with contextlib.suppress(BlockingIOError):
                seen.extend(os.read(leader, 65536))
            return seen.count(b"so far") >= 2 or seen.count(b"left") >= 2

        wait_for(redrawn_twice, "the waiting line to be redrawn", timeout=30)
        time.sleep(0.2)
        proc.kill()
        proc.wait(timeout=30)
    finally:
        os.close(leader)
        os.close(follower)
    states = redraws(ANSI.sub("", seen.decode(errors="replace")))
    fits("\n".join(states), 80)
    for state in states:
        assert re.search(r"waiting for .*: \d", state), state
        assert "gives up in" in state or "left" in state  # the figures stay
