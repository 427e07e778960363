#!/usr/bin/env python3
"""Ledger scaling and the team ledger: SQLite and PostgreSQL under whole `shoal` processes.

Parts (`--parts`, all by default), each in interleaved rounds, medians with their spread:

- sqlite: `status --json` and `alloc --dry-run` with --rows (10,000) allocations vs none on
  the SQLite ledger: history (all but 10 freed: a ledger after months of use) and all live
  (every row listed and summed). Target: each within 1.2x of an empty ledger.
- single: one user's `alloc --json` then `free ID` on PostgreSQL and on SQLite. Target: the
  team ledger's alloc within 1.2x of SQLite's ("a team ledger must not make a single user's
  alloc noticeably slower").
- clients: 1, 4 and 8 concurrent clients, each a loop of `alloc --json` + `free ID`
  processes, on a capacity that refuses nothing (SQLite: users of one machine; PostgreSQL: a
  machine each, SHOAL_HOST_ID and SHOAL_HOME of its own): cycles/s, per-cycle median, p99.
- inproc: the same cycle through the Python API (Ledger.reserve, set_status ALLOCATED,
  set_status FREED) in 1, 4 and 8 worker processes: the ledger's own cost, no start-up.
- big: `status --json` and `alloc --dry-run` with --pg-rows (100,000) live allocations vs an
  empty ledger, on both backends (the rows copied from one real row by one INSERT ... SELECT).
  Targets: dry run within 1.1x, `status --json` 1.5x. SQLite's running totals of the holding
  rows are checked against the rows after the fill; then the floor of `status --json` (an
  empty ledger's, plus SQLite building the rows' JSON and Python writing it) is printed.
  `--before SHOAL` runs another build (a `pip install` of an earlier commit into a venv of
  its own) on the same ledgers in the same rounds, with its ratios and the per-round ratio
  of each command between the two builds; `--big-backends` and `--big-commands` narrow it.
- wake: a team-scoped capacity of one (`[drivers."test/team"] scope = "team"`) held by
  machine A; machine B's `alloc --wait` queued; A frees. Latency from A's FREED row to B's
  row (both stamped in the ledger) and to B's exit; beside it the same on one machine's
  SQLite ledger.

PostgreSQL is a throw-away cluster on 127.0.0.1 (tests/pg.py: fsync and synchronous_commit
off, as SQLite's WAL at synchronous=NORMAL does not sync a commit either), deleted at the end
with every process and directory this script makes, on Ctrl-C and SIGTERM too. Run from a
regular `pip install .` (not editable) with `shoal[postgres]`; every part but `sqlite` needs
PostgreSQL's server programs (initdb, pg_ctl). `--quick` is a short smoke run.

    python benchmarks/ledger.py [--quick] [--parts sqlite,single,clients,inproc,big,wake]
        [--runs N] [--rows N] [--pg-rows N] [--big-runs N] [--clients 1,4,8] [--rounds N]
        [--cycles N] [--inproc-cycles N] [--wake-rounds N] [--before SHOAL]
        [--big-backends SQLite,PostgreSQL] [--big-commands status,dry-run]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, ModuleType
from typing import IO, Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import Machine, check_installed, shoal_command

HERE = Path(__file__).resolve().parent

TARGET_RATIO = 1.2
DRY_RUN = ["alloc", "--driver", "test", "--cpu", "1", "--ram", "1", "--dry-run"]
ALLOC = ["alloc", "--driver", "test", "--cpu", "1", "--ram", "1", "--json"]
# A capacity no loop of these benchmarks comes near: nothing is refused, and the arithmetic
# of a configured machine still runs.
WIDE = '[drivers."test/default"]\ncpu_limit = 1000000\nram_limit = 1000000\n'
TEAM = "test/team"
TEAM_CONFIG = f'[drivers."{TEAM}"]\nscope = "team"\ncpu_limit = 1\nram_limit = 1\n'
TEAM_ALLOC = ["alloc", "--driver", TEAM, "--cpu", "1", "--ram", "1", "--json"]
WAIT = [*TEAM_ALLOC, "--wait", "--timeout", "2m"]
PARTS = ("sqlite", "single", "clients", "inproc", "big", "wake")
PG_PARTS = frozenset(PARTS) - {"sqlite"}
ENV_URL, ENV_HOST = "SHOAL_LEDGER_URL", "SHOAL_HOST_ID"
SETTLE_SECONDS = 0.5  # a queued waiter reaches its sleep before the free (wait.py does too)
TIMEOUT = 300.0  # seconds any one process may take before the run is called broken
SQLITE, PG = "SQLite", "PostgreSQL"


class Interrupted(Exception):
    """The run is ending (Ctrl-C, SIGTERM, a failure): no new process starts."""


@dataclass
class Done:
    code: int
    out: str
    err: str
    ms: float  # wall time from before the fork to the exit seen
    ended: float  # time.time() when the exit was seen

    def check(self, what: str) -> Done:
        if self.code != 0:
            raise SystemExit(f"{what} failed ({self.code}): {self.err.strip()[-2000:]}")
        return self


class Procs:
    """Every process the run starts, each the leader of a session of its own (Ctrl-C in the
    terminal reaches this script only, which then ends them); `end_all` kills those still
    running and refuses new ones, so a client thread cannot start one during the clean-up."""

    def __init__(self) -> None:
        self._live: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self.stopping = False

    def start(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        *,
        stdin: int | IO[Any] | None = subprocess.DEVNULL,
        stderr: int | IO[Any] | None = subprocess.PIPE,
    ) -> subprocess.Popen[str]:
        with self._lock:
            if self.stopping:
                raise Interrupted
            proc = subprocess.Popen(
                list(argv),
                env=env,
                stdin=stdin,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,
            )
            self._live.add(proc)
        return proc

    def finish(self, proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> tuple[str, str]:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(proc)
            raise SystemExit(f"{proc.args!r} took over {timeout:.0f} s") from None
        finally:
            with self._lock:
                self._live.discard(proc)
        if self.stopping:
            raise Interrupted
        return out or "", err or ""

    def run(self, argv: Sequence[str], env: dict[str, str]) -> Done:
        began = time.perf_counter()
        proc = self.start(argv, env)
        out, err = self.finish(proc)
        return Done(proc.returncode, out, err, (time.perf_counter() - began) * 1000, time.time())

    def end_all(self) -> None:
        with self._lock:
            self.stopping = True
            live = list(self._live)
        for proc in live:
            self._kill(proc)

    @staticmethod
    def _kill(proc: subprocess.Popen[str]) -> None:
        # Only while unreaped: its pid (and session id) cannot belong to anyone else yet.
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)


# -- figures ------------------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest rank: with fewer than 100 samples the p99 is the largest."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def spread(values: Sequence[float], digits: int = 1) -> str:
    """`median (min-max)`."""
    mid, low, high = statistics.median(values), min(values), max(values)
    return f"{mid:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def stamp(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


def machine_line() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"machine: nproc {len(os.sched_getaffinity(0))} ({os.cpu_count()} CPUs), {model}; "
        f"Python {sys.version.split()[0]}"
    )


def loads() -> str:
    return "load average " + " ".join(f"{v:.2f}" for v in os.getloadavg())


def interleaved(
    cases: dict[str, tuple[list[str], dict[str, str]]], runs: int, procs: Procs, warmup: int = 3
) -> dict[str, list[float]]:
    """Wall ms of every run of each case, the cases sampled round-robin so that machine noise
    and drift fall on each alike (_timing.interleaved_medians, keeping the samples)."""
    for argv, env in cases.values():
        for _ in range(warmup):
            procs.run(argv, env).check(" ".join(argv))
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, (argv, env) in cases.items():
            samples[name].append(procs.run(argv, env).check(" ".join(argv)).ms)
    return samples


# -- ledgers ------------------------------------------------------------------------------


def sqlite_env(home: Path) -> dict[str, str]:
    """A machine of its own on the SQLite ledger (no team URL inherited from the caller)."""
    env = {k: v for k, v in os.environ.items() if k not in (ENV_URL, ENV_HOST)}
    return {**env, "SHOAL_HOME": str(home), "NO_COLOR": "1"}


@dataclass
class Team:
    """The throw-away cluster and what its clients need."""

    cluster: Any  # tests/pg.py Cluster
    root: Path

    def env(self, db: str, home: Path, host: str) -> dict[str, str]:
        return {
            **sqlite_env(home),
            **self.cluster.env,
            ENV_URL: self.cluster.url(db),
            ENV_HOST: host,
        }

    def ledger(self, db: str, host: str) -> Any:
        from drivers.ledger.book import Ledger
        from drivers.ledger.pg import PgLedgerDb
        from drivers.ledger.url import LedgerUrl

        return Ledger(db=PgLedgerDb(LedgerUrl(self.cluster.url(db), ENV_URL)), host=host)


def home_at(root: Path, name: str, config: str = "") -> Path:
    home = root / name
    home.mkdir(parents=True)
    if config:
        (home / "config.toml").write_text(config)
    return home


def sqlite_ledger(home: Path) -> Any:
    from drivers.ledger.book import Ledger
    from drivers.paths import ledger_file
    from providers.core.settings import Paths

    paths = Paths.from_env({"SHOAL_HOME": str(home)})
    paths.ensure_dir(paths.state_dir)
    return Ledger(ledger_file(paths))


def fill(home: Path, rows: int, live: int) -> None:
    """`rows` allocations, the first `live` of them ALLOCATED and the rest FREED, each made by
    the ledger's own reserve() and set_status(), as shoal makes them."""
    from drivers.ledger import book as L
    from drivers.spec.types import LabelDefinition, Resources
    from providers.core.wire import to_wire

    ledger = sqlite_ledger(home)
    definition = LabelDefinition(driver="test/default", resources=Resources(cpu=1, ram=1))
    for i in range(rows):
        alloc_id = ledger.reserve(
            driver="test/default",
            definition=to_wire(definition),
            resources=definition.resources,
            metadata={"n": str(i)},
            is_remote=False,
            expires=None,
            fits=lambda usage: 1,
        )
        status = L.ALLOCATED if i < live else L.FREED
        ledger.set_status(alloc_id, status, state={"identifier": alloc_id})
    ledger.close()


def template_row(ledger: Any, rows: int) -> str:
    """One live row made by the ledger itself, whose copies are the fill: its id is not one
    of the copies' (test-00000001 ... the count in hex)."""
    from drivers.ledger import book as L
    from drivers.spec.types import LabelDefinition, Resources
    from providers.core.wire import to_wire

    definition = LabelDefinition(driver="test/default", resources=Resources(cpu=1, ram=1))
    while True:
        alloc_id: str = ledger.reserve(
            driver="test/default",
            definition=to_wire(definition),
            resources=definition.resources,
            metadata={"n": "0"},
            is_remote=False,
            expires=None,
            fits=lambda usage: 1,
        )
        ledger.set_status(alloc_id, L.ALLOCATED, state={"identifier": alloc_id})
        if int(alloc_id.removeprefix("test-"), 16) > rows:
            return alloc_id
        ledger.set_status(alloc_id, L.FREED)  # one row of history, in a ledger this big


def copy_select(overrides: dict[str, str]) -> tuple[str, str]:
    """The column list of an allocation row and the SELECT list copying the template's row,
    with `overrides` for the columns each copy makes its own."""
    from drivers.ledger.rows import COLUMNS

    columns = [c.strip() for c in COLUMNS.split(",")]
    return ", ".join(columns), ", ".join(overrides.get(c, c) for c in columns)


def fill_sqlite_copies(home: Path, rows: int) -> None:
    """`rows` live allocations in one INSERT ... SELECT: copies of a row the ledger wrote,
    each with its id, identifier, metadata and a created time 1 ms apart, a day ago."""
    ledger = sqlite_ledger(home)
    template = template_row(ledger, rows)
    path = ledger.path
    ledger.close()
    new_id = "printf('test-%08x', i)"
    made = (
        "strftime('%Y-%m-%dT%H:%M:%S', :base + i / 1000, 'unixepoch') "
        "|| printf('.%06dZ', (i % 1000) * 1000)"
    )
    columns, select = copy_select(
        {
            "id": new_id,
            "state": f"replace(state, :template, {new_id})",
            "metadata": "'{\"n\": \"' || i || '\"}'",
            "created": made,
            "updated": made,
        }
    )
    conn = sqlite3.connect(path, timeout=30)
    try:
        with conn:
            conn.execute(
                "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < :rows) "
                f"INSERT INTO allocations ({columns}) SELECT {select} FROM n, allocations "
                "WHERE allocations.id = :template",
                {"rows": rows, "template": template, "base": int(time.time()) - 86400},
            )
            conn.execute("DELETE FROM allocations WHERE id = ?", (template,))
    finally:
        conn.close()


def fill_pg_copies(team: Team, db: str, host: str, rows: int) -> None:
    """The same rows on PostgreSQL, by generate_series; then VACUUM (ANALYZE), which
    autovacuum would do within its next minute after this many inserts (its insert threshold):
    done here, it does not run in the middle of the timed rounds."""
    ledger = team.ledger(db, host)
    template = template_row(ledger, rows)
    ledger.close()
    new_id = "'test-' || lpad(to_hex(i), 8, '0')"
    made = (
        "to_char(to_timestamp(%(base)s + i / 1000) AT TIME ZONE 'UTC', "
        "'YYYY-MM-DD\"T\"HH24:MI:SS') || '.' || lpad((mod(i, 1000) * 1000)::text, 6, '0') "
        "|| 'Z'"
    )
    columns, select = copy_select(
        {
            "id": new_id,
            "state": f"replace(state, %(template)s, {new_id})",
            "metadata": "'{\"n\": \"' || i || '\"}'",
            "created": made,
            "updated": made,
        }
    )
    with team.cluster.connect(db, options="-c search_path=shoal") as conn:
        conn.execute(
            f"INSERT INTO allocations ({columns}) SELECT {select} "
            "FROM allocations, generate_series(1, %(rows)s) AS i WHERE id = %(template)s",
            {"rows": rows, "template": template, "base": int(time.time()) - 86400},
        )
        conn.execute("DELETE FROM allocations WHERE id = %s", (template,))
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM (ANALYZE) allocations")


def live_count(run: Callable[[str], Any], expected: int, where: str) -> None:
    found = run("SELECT count(*) FROM allocations WHERE status = 'ALLOCATED'")
    if found != expected:
        raise SystemExit(f"{where}: {found} live rows after the fill, not {expected}")


# -- parts --------------------------------------------------------------------------------


@dataclass
class Run:
    args: argparse.Namespace
    procs: Procs
    root: Path
    shoal: list[str]
    team: Team | None

    def need_team(self) -> Team:
        assert self.team is not None
        return self.team

    def new_db(self) -> str:
        return str(self.need_team().cluster.new_database())


def part_sqlite(run: Run) -> None:
    args = run.args
    cases: dict[str, tuple[list[str], dict[str, str]]] = {}
    for label, live in (("empty", None), ("history", 10), ("all live", args.rows)):
        home = home_at(run.root, "sqlite-" + label.replace(" ", "-"))
        if live is not None:
            fill(home, args.rows, live)
        env = sqlite_env(home)
        cases[f"{label}|status --json"] = ([*run.shoal, "status", "--json"], env)
        cases[f"{label}|alloc --dry-run"] = ([*run.shoal, *DRY_RUN], env)
    machine = Machine()
    samples = interleaved(cases, args.runs, run.procs)
    results: dict[str, dict[str, list[float]]] = {}
    for key, values in samples.items():
        label, command = key.split("|")
        results.setdefault(label, {})[command] = values
    print(
        f"\nSQLite ledger: {args.runs} interleaved runs, median wall ms; {args.rows} rows per "
        f"full ledger ({machine.since()})"
    )
    header = ("command", "empty", "history", "ratio", "all live", "ratio")
    print("{:18s} {:>8s} {:>9s} {:>6s} {:>9s} {:>6s}".format(*header))
    worst = 0.0
    med = statistics.median
    for command in ("status --json", "alloc --dry-run"):
        empty = med(results["empty"][command])
        hist = med(results["history"][command])
        live = med(results["all live"][command])
        worst = max(worst, hist / empty, live / empty)
        print(
            f"{command:18s} {empty:8.1f} {hist:9.1f} {hist / empty:5.2f}x {live:9.1f} "
            f"{live / empty:5.2f}x"
        )
    for command in ("status --json", "alloc --dry-run"):
        each = ", ".join(
            f"{label} {min(results[label][command]):.0f}-{max(results[label][command]):.0f}"
            for label in ("empty", "history", "all live")
        )
        print(f"  spread (min-max ms) of {command}: {each}")
    verdict = "meets" if worst <= TARGET_RATIO else "MISSES"
    print(f"worst ratio to the empty ledger: {worst:.2f}x ({verdict} the {TARGET_RATIO}x target)")


def cycle(run: Run, env: dict[str, str]) -> tuple[float, float]:
    """One `alloc --json` and one `free ID` of what it made: each one's wall ms."""
    alloc = run.procs.run([*run.shoal, *ALLOC], env).check("shoal alloc")
    alloc_id = json.loads(alloc.out)["id"]
    free = run.procs.run([*run.shoal, "free", alloc_id], env).check(f"shoal free {alloc_id}")
    return alloc.ms, free.ms


def part_single(run: Run) -> None:
    args = run.args
    team = run.need_team()
    envs = {
        SQLITE: sqlite_env(home_at(run.root, "single-sqlite", WIDE)),
        PG: team.env(run.new_db(), home_at(run.root, "single-pg", WIDE), "machine-a"),
    }
    for env in envs.values():
        for _ in range(2):  # the ledger made (schema, file), the page cache warm
            cycle(run, env)
    times: dict[tuple[str, str], list[float]] = {
        (b, c): [] for b in envs for c in ("alloc", "free")
    }
    machine = Machine()
    for r in range(args.runs):
        # Interleaved, and each backend first in every other round.
        for backend in list(envs) if r % 2 == 0 else list(envs)[::-1]:
            alloc_ms, free_ms = cycle(run, envs[backend])
            times[backend, "alloc"].append(alloc_ms)
            times[backend, "free"].append(free_ms)
    print(
        f"\nOne user, {args.runs} interleaved rounds of `alloc --json` then `free ID`, wall ms "
        f"median (min-max) ({machine.since()})"
    )
    print(f"  {'command':16s} {SQLITE:>22s} {PG:>22s}  ratio")
    for command, label in (("alloc", "alloc --json"), ("free", "free ID")):
        sq, pg = times[SQLITE, command], times[PG, command]
        ratio = statistics.median(pg) / statistics.median(sq)
        print(f"  {label:16s} {spread(sq):>22s} {spread(pg):>22s}  {ratio:.2f}x")
    sq_ms, pg_ms = statistics.median(times[SQLITE, "alloc"]), statistics.median(times[PG, "alloc"])
    ratio = pg_ms / sq_ms
    verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
    print(
        f"single-user alloc latency, PostgreSQL / SQLite: {ratio:.2f}x ({pg_ms - sq_ms:+.1f} ms; "
        f"target <= {TARGET_RATIO}x: {verdict})"
    )


def clients_round(run: Run, envs: Sequence[dict[str, str]], cycles: int) -> tuple[float, list[Any]]:
    """`len(envs)` clients at once, each `cycles` alloc + free cycles: the wall seconds from
    their common start to the last one's end, and every cycle's (alloc ms, free ms)."""
    start = threading.Barrier(len(envs) + 1)
    made: list[tuple[float, float]] = []
    failed: list[BaseException] = []

    def client(env: dict[str, str]) -> None:
        try:
            start.wait()
            for _ in range(cycles):
                made.append(cycle(run, env))
        except Interrupted:
            pass
        except BaseException as exc:  # SystemExit of a failed command: the main thread says it
            failed.append(exc)

    threads = [threading.Thread(target=client, args=(env,), daemon=True) for env in envs]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if failed:
        raise SystemExit(f"a client failed: {failed[0]}")
    return wall, made


def part_clients(run: Run) -> None:
    args = run.args
    team = run.need_team()
    most = max(args.clients)
    sqlite_home = home_at(run.root, "clients-sqlite", WIDE)
    db = run.new_db()
    envs = {
        SQLITE: [sqlite_env(sqlite_home)] * most,
        PG: [
            team.env(db, home_at(run.root, f"clients-pg-{i}", WIDE), f"machine-{i}")
            for i in range(1, most + 1)
        ],
    }
    for backend in envs:
        for env in envs[backend][: 1 if backend == SQLITE else most]:
            cycle(run, env)  # each machine's state dir made, the ledger made
    rates: dict[tuple[str, int], list[float]] = {}
    cycles: dict[tuple[str, int], list[tuple[float, float]]] = {}
    machine = Machine()
    for r in range(args.rounds):
        for n in args.clients:
            for backend in list(envs) if r % 2 == 0 else list(envs)[::-1]:
                wall, made = clients_round(run, envs[backend][:n], args.cycles)
                rates.setdefault((backend, n), []).append(len(made) / wall)
                cycles.setdefault((backend, n), []).extend(made)
    print(
        f"\nConcurrent clients, each a loop of `shoal alloc --json` + `shoal free ID` processes "
        f"(PostgreSQL: a SHOAL_HOST_ID and SHOAL_HOME per client); {args.rounds} interleaved "
        f"rounds x {args.cycles} cycles per client; capacity 1,000,000 (nothing refused) "
        f"({machine.since()})"
    )
    print(
        f"  {'backend':10s} {'clients':>7s}  {'cycles/s (min-max)':>20s}  {'cycle ms median':>15s}"
        f"  {'p99':>7s}  {'alloc ms median':>15s}  {'p99':>7s}  {'cycles':>6s}"
    )
    for n in args.clients:
        for backend in envs:
            made = cycles[backend, n]
            total = [a + f for a, f in made]
            allocs = [a for a, _ in made]
            print(
                f"  {backend:10s} {n:7d}  {spread(rates[backend, n], 2):>20s}  "
                f"{statistics.median(total):15.1f}  {percentile(total, 0.99):7.1f}  "
                f"{statistics.median(allocs):15.1f}  {percentile(allocs, 0.99):7.1f}  "
                f"{len(made):6d}"
            )
    each = ", ".join(
        f"{n} client{'s' if n > 1 else ''} "
        f"{statistics.median(rates[PG, n]) / statistics.median(rates[SQLITE, n]):.2f}x"
        for n in args.clients
    )
    print(f"  cycles/s, PostgreSQL / SQLite: {each}")
    if 1 in args.clients:
        sq = statistics.median(a for a, _ in cycles[SQLITE, 1])
        pg = statistics.median(a for a, _ in cycles[PG, 1])
        print(
            f"  alloc latency at 1 client, PostgreSQL / SQLite: {pg / sq:.2f}x ({pg - sq:+.1f} ms)"
        )


# The in-process clients: `ledger.py --worker SPEC` opens the ledger, makes one cycle (the
# connection, the schema), says "ready", then for each line N on stdin makes N cycles and
# answers their start, end (time.time()) and ms.


def worker(spec: dict[str, Any]) -> None:
    from drivers.ledger import book as L
    from drivers.spec.types import LabelDefinition, Resources
    from providers.core.wire import to_wire

    if spec["backend"] == SQLITE:
        ledger = L.Ledger(Path(spec["path"]))
    else:
        from drivers.ledger.pg import PgLedgerDb
        from drivers.ledger.url import LedgerUrl

        url = LedgerUrl(spec["url"], ENV_URL)
        ledger = L.Ledger(db=PgLedgerDb(url), host=spec["host"])
    definition = LabelDefinition(driver="test/default", resources=Resources(cpu=1, ram=1))
    wire = to_wire(definition)

    def one() -> None:
        alloc_id = ledger.reserve(
            driver="test/default",
            definition=wire,
            resources=definition.resources,
            metadata={},
            is_remote=False,
            expires=None,
            fits=lambda usage: 1,
        )
        ledger.set_status(alloc_id, L.ALLOCATED, state={"identifier": alloc_id})
        ledger.set_status(alloc_id, L.FREED)

    one()
    print("ready", flush=True)
    for line in sys.stdin:
        times = []
        began = time.time()
        for _ in range(int(line)):
            start = time.perf_counter()
            one()
            times.append((time.perf_counter() - start) * 1000)
        print(json.dumps({"start": began, "end": time.time(), "ms": times}), flush=True)
    ledger.close()


def start_workers(run: Run, specs: list[dict[str, Any]], env: dict[str, str]) -> list[Any]:
    """One `--worker` process per spec, all started before any is waited for (their imports
    overlap); each one's stderr in a log file under the run's directory."""
    workers = []
    logs = [run.root / f"worker-{spec['backend']}-{i}.log" for i, spec in enumerate(specs)]
    for spec, path in zip(specs, logs, strict=True):
        argv = [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)]
        with open(path, "w") as log:
            workers.append(run.procs.start(argv, env, stdin=subprocess.PIPE, stderr=log))
    for proc, path in zip(workers, logs, strict=True):
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            said = path.read_text().strip()[-2000:]
            raise SystemExit(f"an in-process worker failed: {said}")
    return workers


def part_inproc(run: Run) -> None:
    args = run.args
    team = run.need_team()
    most = max(args.clients)
    sqlite_path = home_at(run.root, "inproc-sqlite") / "ledger.sqlite"
    db = run.new_db()
    url = team.cluster.url(db)
    env = {**sqlite_env(run.root / "inproc-sqlite"), **team.cluster.env}
    pools = {
        SQLITE: start_workers(run, [{"backend": SQLITE, "path": str(sqlite_path)}] * most, env),
        PG: start_workers(
            run,
            [{"backend": PG, "url": url, "host": f"machine-{i}"} for i in range(1, most + 1)],
            env,
        ),
    }
    rates: dict[tuple[str, int], list[float]] = {}
    times: dict[tuple[str, int], list[float]] = {}
    machine = Machine()
    for r in range(args.rounds):
        for n in args.clients:
            for backend in list(pools) if r % 2 == 0 else list(pools)[::-1]:
                chosen = pools[backend][:n]
                for proc in chosen:
                    proc.stdin.write(f"{args.inproc_cycles}\n")
                    proc.stdin.flush()
                answers = [json.loads(proc.stdout.readline() or "null") for proc in chosen]
                if None in answers:
                    raise SystemExit(f"an in-process {backend} worker died; logs in {run.root}")
                wall = max(a["end"] for a in answers) - min(a["start"] for a in answers)
                rates.setdefault((backend, n), []).append(n * args.inproc_cycles / wall)
                times.setdefault((backend, n), []).extend(m for a in answers for m in a["ms"])
    for pool in pools.values():
        for proc in pool:
            run.procs.finish(proc)  # its stdin closed: the worker ends
    print(
        f"\nIn-process: Ledger.reserve + set_status ALLOCATED + set_status FREED through the "
        f"Python API, one worker process per client (PostgreSQL: a host id each); "
        f"{args.rounds} interleaved rounds x {args.inproc_cycles} cycles per client "
        f"({machine.since()})"
    )
    print(
        f"  {'backend':10s} {'clients':>7s}  {'cycles/s (min-max)':>24s}  "
        f"{'cycle ms median':>15s}  {'p99':>7s}"
    )
    for n in args.clients:
        for backend in pools:
            ms = times[backend, n]
            print(
                f"  {backend:10s} {n:7d}  {spread(rates[backend, n]):>24s}  "
                f"{statistics.median(ms):15.2f}  {percentile(ms, 0.99):7.2f}"
            )
    each = ", ".join(
        f"{n} client{'s' if n > 1 else ''} "
        f"{statistics.median(rates[PG, n]) / statistics.median(rates[SQLITE, n]):.2f}x"
        for n in args.clients
    )
    print(f"  cycles/s, PostgreSQL / SQLite: {each}")


def part_big(run: Run) -> None:
    args = run.args
    team = run.need_team()
    rows = args.pg_rows
    host = "machine-a"
    empty_sq, full_sq = home_at(run.root, "big-sqlite-empty"), home_at(run.root, "big-sqlite")
    sq_fill = pg_fill = 0.0
    if SQLITE in args.big_backends:
        began = time.perf_counter()
        fill_sqlite_copies(full_sq, rows)
        sq_fill = time.perf_counter() - began
        conn = sqlite3.connect(full_sq / "state" / "ledger.sqlite")
        try:
            live_count(lambda sql: conn.execute(sql).fetchone()[0], rows, SQLITE)
        finally:
            conn.close()
        check_totals(full_sq)
    empty_db, full_db = run.new_db(), run.new_db()
    if PG in args.big_backends:
        began = time.perf_counter()
        fill_pg_copies(team, full_db, host, rows)
        pg_fill = time.perf_counter() - began
        with team.cluster.connect(full_db, options="-c search_path=shoal") as pg:
            live_count(lambda sql: pg.execute(sql).fetchone()[0], rows, PG)
    ledgers = {
        (SQLITE, "empty"): sqlite_env(empty_sq),
        (SQLITE, "full"): sqlite_env(full_sq),
        (PG, "empty"): team.env(empty_db, home_at(run.root, "big-pg-empty"), host),
        (PG, "full"): team.env(full_db, home_at(run.root, "big-pg"), host),
    }
    backends = [b for b in (SQLITE, PG) if b in args.big_backends]
    commands = {
        name: argv
        for short, (name, argv) in {
            "status": ("status --json", ["status", "--json"]),
            "dry-run": ("alloc --dry-run", DRY_RUN),
        }.items()
        if short in args.big_commands
    }
    # The build before runs on the same ledgers: the schema is the same (a schema-1 shoal
    # on the team ledger this one reads), so it also shows that the older one still works.
    builds = {"": run.shoal, **({" before": [args.before]} if args.before else {})}
    cases = {
        f"{b}|{which}|{name}{build}": ([*shoal, *argv], env)
        for (b, which), env in ledgers.items()
        if b in backends
        for name, argv in commands.items()
        for build, shoal in builds.items()
    }
    machine = Machine()
    samples = interleaved(cases, args.big_runs, run.procs, warmup=1)
    print(
        f"\n{rows:,} live allocations vs an empty ledger, {args.big_runs} interleaved runs, wall "
        f"ms median (min-max); filled in {sq_fill:.1f} s (SQLite) and {pg_fill:.1f} s "
        f"(PostgreSQL) by one INSERT ... SELECT ({machine.since()})"
    )
    print(
        f"  {'command':23s} {'backend':10s} {'empty':>20s} {f'{rows:,} live':>24s}  ratio  "
        "(per-round ratios)"
    )
    full: dict[tuple[str, str], float] = {}
    for name in commands:
        for backend in backends:
            for build in builds:
                empty = samples[f"{backend}|empty|{name}{build}"]
                filled = samples[f"{backend}|full|{name}{build}"]
                full[backend, name + build] = statistics.median(filled)
                ratio = statistics.median(filled) / statistics.median(empty)
                rounds = [f / e for f, e in zip(filled, empty, strict=True)]
                print(
                    f"  {name + build:23s} {backend:10s} {spread(empty):>20s} "
                    f"{spread(filled):>24s}  {ratio:5.2f}x ({spread(rounds, 2)})"
                )
            if args.before:
                now = samples[f"{backend}|full|{name}"]
                then = samples[f"{backend}|full|{name} before"]
                gain = [a / b for a, b in zip(now, then, strict=True)]
                print(
                    f"  {name:23s} {backend:10s} at {rows:,} live, this build / before, per "
                    f"round: {spread(gain, 2)}"
                )
    if len(backends) == 2:
        each = ", ".join(f"{name} {full[PG, name] / full[SQLITE, name]:.2f}x" for name in commands)
        print(f"  at {rows:,} live rows, PostgreSQL / SQLite: {each}")
    if SQLITE in backends and "status --json" in commands:
        status_floor(full_sq, statistics.median(samples[f"{SQLITE}|empty|status --json"]))
    if PG in backends and "status --json" in commands:
        pg_status_floor(
            team, full_db, statistics.median(samples[f"{PG}|empty|status --json"]), rows
        )


def check_totals(home: Path) -> None:
    """The running totals the capacity checks read (drivers.ledger.store's TOTALS) are what
    the rows sum to after the fill (its INSERT ... SELECT went through their triggers)."""
    ledger = sqlite_ledger(home)
    try:
        drift = ledger.totals_drift()
    finally:
        ledger.close()
    if drift:
        raise SystemExit(f"{SQLITE}: the running totals differ from the rows: {drift[:3]}")


def status_floor(home: Path, empty_ms: float, tries: int = 5) -> None:
    """What `status --json` cannot go under with every row's JSON built from its columns:
    an empty ledger's command plus SQLite building the same objects (the listing's own
    query, in this process: the rows' text fetched, nothing written), and writing that many
    bytes from Python (into /dev/null)."""
    from drivers.ledger import store as S

    path = home / "state" / "ledger.sqlite"
    sql = (
        f"SELECT {S.LISTED_JSON} FROM allocations INDEXED BY {S.LIVE_INDEX} "
        f"WHERE status IN {S.NOT_ENDED_SQL} ORDER BY created"
    )
    conn = sqlite3.connect(path)
    built: list[float] = []
    written: list[float] = []
    size = 0
    try:
        with open(os.devnull, "w") as sink:
            for _ in range(tries):
                began = time.perf_counter()
                texts = [row[0] for row in conn.execute(sql)]
                built.append((time.perf_counter() - began) * 1000)
                began = time.perf_counter()
                sink.write(",\n".join(texts))
                sink.flush()
                written.append((time.perf_counter() - began) * 1000)
                size = sum(len(text) for text in texts)
    finally:
        conn.close()
    floor = empty_ms + statistics.median(built) + statistics.median(written)
    print(
        f"  status --json floor on {SQLITE}: empty {empty_ms:.0f} ms + SQLite building the "
        f"rows' JSON ({size / 1e6:.0f} MB) {spread(built)} + writing it {spread(written)} = "
        f"{floor:.0f} ms, {floor / empty_ms:.2f}x of empty"
    )


def pg_status_floor(team: Team, db: str, empty_ms: float, rows: int, tries: int = 3) -> None:
    """What `status --json` on PostgreSQL cannot go under while the text stays the Python
    path's (drivers.ledger.store._listed_json: PostgreSQL's own JSON writes other spacing,
    key order and escapes): an empty ledger's command, plus the listing's query fetched by
    psycopg, plus each row's JSON columns decoded (msgspec, json.loads where it refuses) and
    its object encoded by Python's json (its C encoder), plus writing that many bytes (into
    /dev/null)."""
    from drivers.ledger import store as S

    sql = (
        f"SELECT {S.LISTED_COLUMNS} FROM allocations WHERE status IN {S.NOT_ENDED_SQL} "
        "ORDER BY created"
    )
    fetched: list[float] = []
    built: list[float] = []
    written: list[float] = []
    size = 0
    with (
        team.cluster.connect(db, options="-c search_path=shoal") as conn,
        open(os.devnull, "w") as sink,
    ):
        for _ in range(tries):
            began = time.perf_counter()
            found = conn.execute(sql).fetchall()
            fetched.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            texts = S._listed_texts(found)  # what the listing runs
            built.append((time.perf_counter() - began) * 1000)
            began = time.perf_counter()
            sink.write(",\n".join(texts))
            sink.flush()
            written.append((time.perf_counter() - began) * 1000)
            size = sum(len(text) for text in texts)
    if len(found) != rows:
        raise SystemExit(f"{PG}: {len(found)} rows listed, not {rows}")
    floor = empty_ms + statistics.median(fetched) + statistics.median(built)
    floor += statistics.median(written)
    print(
        f"  status --json floor on {PG}: empty {empty_ms:.0f} ms + fetching the rows "
        f"{spread(fetched)} + decoding and encoding them in Python ({size / 1e6:.0f} MB) "
        f"{spread(built)} + writing it {spread(written)} = {floor:.0f} ms, "
        f"{floor / empty_ms:.2f}x of empty"
    )


def wake_round(
    run: Run,
    env_a: dict[str, str],
    env_b: dict[str, str],
    queued: Callable[[], int],
    stamps: Callable[[str, str], tuple[str, str]],
) -> tuple[float, float]:
    """A holds the capacity, B queues for it, A frees: ms from A's FREED stamp to B's row's
    created stamp, and to B's exit (this machine's clock, as both stamps are)."""
    held = run.procs.run([*run.shoal, *TEAM_ALLOC], env_a).check("A's alloc")
    a_id = json.loads(held.out)["id"]
    with tempfile.TemporaryFile("w+") as b_err:
        waiter = run.procs.start([*run.shoal, *WAIT], env_b, stderr=b_err)
        deadline = time.monotonic() + 60
        while queued() < 1:
            if waiter.poll() is not None or time.monotonic() > deadline:
                b_err.seek(0)
                raise SystemExit(f"B never queued ({waiter.poll()}): {b_err.read()[-2000:]}")
            time.sleep(0.01)
        time.sleep(SETTLE_SECONDS)
        free = run.procs.start([*run.shoal, "free", a_id], env_a)
        b_out, _ = run.procs.finish(waiter, timeout=120)
        b_exit = time.time()
        _, free_err = run.procs.finish(free)
        if free.returncode != 0:
            raise SystemExit(f"A's free failed ({free.returncode}): {free_err}")
        if waiter.returncode != 0:
            b_err.seek(0)
            raise SystemExit(f"B's alloc --wait failed ({waiter.returncode}): {b_err.read()}")
    b_id = json.loads(b_out)["id"]
    freed, taken = stamps(a_id, b_id)
    run.procs.run([*run.shoal, "free", b_id], env_b).check("B's free")
    freed_at = stamp(freed)
    return (
        (stamp(taken) - freed_at).total_seconds() * 1000,
        (b_exit - freed_at.timestamp()) * 1000,
    )


def part_wake(run: Run) -> None:
    args = run.args
    team = run.need_team()
    db = run.new_db()
    env_a = team.env(db, home_at(run.root, "wake-a", TEAM_CONFIG), "machine-a")
    env_b = team.env(db, home_at(run.root, "wake-b", TEAM_CONFIG), "machine-b")
    local_home = home_at(run.root, "wake-sqlite", TEAM_CONFIG)
    local = sqlite_env(local_home)
    pg = team.cluster.connect(db, autocommit=True, options="-c search_path=shoal")
    lite_path = local_home / "state" / "ledger.sqlite"

    def pg_queued() -> int:
        return int(
            pg.execute("SELECT count(*) FROM waiters WHERE host = 'machine-b'").fetchone()[0]
        )

    def lite_queued() -> int:
        with contextlib.closing(sqlite3.connect(lite_path, timeout=5)) as conn:
            try:
                return int(conn.execute("SELECT count(*) FROM waiters").fetchone()[0])
            except sqlite3.OperationalError:
                return 0

    def pg_stamps(a_id: str, b_id: str) -> tuple[str, str]:
        sql = "SELECT updated FROM allocations WHERE id = %s AND status = 'FREED'"
        freed = pg.execute(sql, (a_id,)).fetchone()[0]
        taken = pg.execute("SELECT created FROM allocations WHERE id = %s", (b_id,)).fetchone()[0]
        return freed, taken

    def lite_stamps(a_id: str, b_id: str) -> tuple[str, str]:
        with contextlib.closing(sqlite3.connect(lite_path, timeout=5)) as conn:
            sql = "SELECT updated FROM allocations WHERE id = ? AND status = 'FREED'"
            freed = conn.execute(sql, (a_id,)).fetchone()[0]
            taken = conn.execute("SELECT created FROM allocations WHERE id = ?", (b_id,))
            return freed, taken.fetchone()[0]

    cases = {
        PG: (env_a, env_b, pg_queued, pg_stamps),
        SQLITE: (local, local, lite_queued, lite_stamps),
    }
    rows: dict[str, list[float]] = {PG: [], SQLITE: []}
    exits: dict[str, list[float]] = {PG: [], SQLITE: []}
    try:
        for backend in cases:  # the ledgers made, each machine's state dir and pages warm
            wake_round(run, *cases[backend])
        machine = Machine()
        for r in range(args.wake_rounds):
            for backend in list(cases) if r % 2 == 0 else list(cases)[::-1]:
                to_row, to_exit = wake_round(run, *cases[backend])
                rows[backend].append(to_row)
                exits[backend].append(to_exit)
    finally:
        pg.close()
    print(
        f"\nWake-up: a capacity of 1 on `{TEAM}` (scope team) held by machine A; machine B "
        f"`alloc --wait`s, queued; A's `shoal free`; {args.wake_rounds} interleaved rounds "
        f"({machine.since()})"
    )
    for backend, label in (
        (PG, "PostgreSQL, A and B two machines (LISTEN/NOTIFY)"),
        (SQLITE, "SQLite, A and B on one machine (baseline)"),
    ):
        print(f"  {label}")
        for what, values in (("B's row", rows[backend]), ("B's exit", exits[backend])):
            print(
                f"    A's FREED row -> {what:9s} median {statistics.median(values):7.1f} ms  "
                f"p99 {percentile(values, 0.99):7.1f} ms  max {max(values):7.1f} ms"
            )
    ratio = statistics.median(rows[PG]) / statistics.median(rows[SQLITE])
    print(f"  free -> B's row, PostgreSQL across machines / SQLite on one: {ratio:.2f}x")


# -- the run ------------------------------------------------------------------------------


def load_cluster_module() -> ModuleType:
    """tests/pg.py by its path: the repository is not put on sys.path, so `shoal` and its
    packages stay the installed ones."""
    path = HERE.parent / "tests" / "pg.py"
    spec = importlib.util.spec_from_file_location("shoal_bench_pg", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"of {','.join(PARTS)}")
    parser.add_argument("--runs", type=int, help="runs per command (20; --quick 3)")
    parser.add_argument("--rows", type=int, help="SQLite part's rows (10,000; --quick 1,000)")
    parser.add_argument("--pg-rows", type=int, help="live rows, both backends (100,000)")
    parser.add_argument("--big-runs", type=int, help="runs at --pg-rows (10; --quick 2)")
    parser.add_argument("--clients", default="1,4,8", help="concurrent clients")
    parser.add_argument("--rounds", type=int, help="rounds of clients (5; --quick 1)")
    parser.add_argument("--cycles", type=int, help="cycles per client per round (3; --quick 1)")
    parser.add_argument("--inproc-cycles", type=int, help="per worker per round (100; --quick 10)")
    parser.add_argument("--wake-rounds", type=int, help="wake-up rounds (20; --quick 5)")
    parser.add_argument("--before", metavar="SHOAL", help="big: another build's shoal, timed alike")
    parser.add_argument("--big-backends", default=f"{SQLITE},{PG}", help=f"big: of {SQLITE},{PG}")
    parser.add_argument("--big-commands", default="status,dry-run", help="big: of status,dry-run")
    args = parser.parse_args()
    defaults = {
        "runs": (20, 3),
        "rows": (10_000, 1_000),
        "pg_rows": (100_000, 10_000),
        "big_runs": (10, 2),
        "rounds": (5, 1),
        "cycles": (3, 1),
        "inproc_cycles": (100, 10),
        "wake_rounds": (20, 5),
    }
    for name, (full, quick) in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown parts {', '.join(sorted(unknown))}; known: {', '.join(PARTS)}")
    args.big_backends = [b.strip() for b in args.big_backends.split(",") if b.strip()]
    args.big_commands = [c.strip() for c in args.big_commands.split(",") if c.strip()]
    if set(args.big_backends) - {SQLITE, PG} or set(args.big_commands) - {"status", "dry-run"}:
        parser.error("--big-backends: of SQLite,PostgreSQL; --big-commands: of status,dry-run")
    args.clients = sorted({int(n) for n in args.clients.split(",")})
    if min(args.clients) < 1:
        parser.error("--clients: at least 1")
    return args


def interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # SIGTERM and SIGHUP clean up as Ctrl-C does


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        worker(json.loads(sys.argv[2]))
        return
    args = options()
    check_installed()
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
    procs = Procs()
    cluster: Any = None
    shoal = shoal_command()
    print(machine_line())
    print(f"shoal: {' '.join(shoal)}; {loads()} at the start")
    try:
        with tempfile.TemporaryDirectory(prefix="shoal-bench-ledger.") as tmp:
            try:
                team = None
                if PG_PARTS & set(args.parts):
                    cluster = load_cluster_module().Cluster.start()
                    os.environ.update(cluster.env)  # this process's own psycopg logs in too
                    team = Team(cluster, Path(tmp))
                    print(
                        f"PostgreSQL {cluster.version}: a throw-away cluster on 127.0.0.1:"
                        f"{cluster.port} (fsync, synchronous_commit and full_page_writes off)"
                    )
                run = Run(args, procs, Path(tmp), shoal, team)
                steps: dict[str, Callable[[Run], None]] = {
                    "sqlite": part_sqlite,
                    "single": part_single,
                    "clients": part_clients,
                    "inproc": part_inproc,
                    "big": part_big,
                    "wake": part_wake,
                }
                for part in PARTS:
                    if part in args.parts:
                        steps[part](run)
                        print(f"  [{loads()}]", flush=True)
            finally:
                signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: clean up all
                procs.end_all()
                if cluster is not None:
                    cluster.stop()
    except (KeyboardInterrupt, Interrupted):
        print("interrupted: every process and the cluster are gone", file=sys.stderr)
        raise SystemExit(130) from None
    print(f"\n{loads()} at the end")


if __name__ == "__main__":
    main()
