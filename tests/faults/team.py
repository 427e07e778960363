"""Several machines of a team on one PostgreSQL ledger, played by real shoal processes.

Each `Machine` is a SHOAL_HOME of its own (its own config file, state dir and workspaces) and
a SHOAL_HOST_ID of its own, pointed at one database through SHOAL_LEDGER_URL with the test
cluster's password file: what a team's CI runners or laptops are, minus the network. The
team-scoped instance `test/team` keeps its markers in one directory every machine shares (a
cloud's API, as each machine sees it); the machine-scoped `test/default` keeps them in the
machine's own state dir, as a process or a local container would.

`Team.sql` reads and writes the ledger's tables directly: a machine's death is its lease
running out, which a test cannot wait 30 s for; it moves the lease into the past instead.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.conftest import shoal_argv, shoal_env, spawn, wait_for

if TYPE_CHECKING:
    from tests.pg import Cluster

TEAM_DRIVER = "test/team"
MACHINE_DRIVER = "test/default"
SCHEMA = "shoal"  # drivers.ledger.pg.SCHEMA


def request(driver: str, cpu: int = 1, *extra: str) -> tuple[str, ...]:
    """`alloc` arguments for `cpu` vCPUs and 1 GiB on `driver`."""
    return ("alloc", "--driver", driver, "--cpu", str(cpu), "--ram", "1", *extra)


def config(team_cpu: int, machine_cpu: int, shared: Path) -> str:
    return (
        f'[drivers."{TEAM_DRIVER}"]\nscope = "team"\ncpu_limit = {team_cpu}\nram_limit = 64\n'
        f'workspace = "{shared}"\n'
        f'[drivers."{MACHINE_DRIVER}"]\ncpu_limit = {machine_cpu}\nram_limit = 64\n'
    )


def past(seconds: float = 1.0) -> str:
    """A ledger stamp `seconds` ago (drivers.ledger.rows.stamp's form): a lease run out."""
    from drivers.ledger.rows import stamp

    return stamp(datetime.now(UTC) - timedelta(seconds=seconds))


def when(text: str) -> datetime:
    from drivers.ledger.rows import unstamp

    return unstamp(text)


@dataclass
class Machine:
    """One machine of the team: `run` a shoal command to its end, `spawn` one to watch."""

    host: str
    home: Path
    url: str
    cluster_env: dict[str, str]

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return shoal_env(
            self.home,
            {
                **self.cluster_env,
                "SHOAL_LEDGER_URL": self.url,
                "SHOAL_HOST_ID": self.host,
                **(extra or {}),
            },
        )

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            shoal_argv(*args),
            env=self.env(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *args: str) -> str:
        """Run a command that must succeed; its stdout."""
        done = self.run(*args)
        assert done.returncode == 0, (self.host, args, done.returncode, done.stderr)
        return done.stdout

    def spawn(self, procs: list[subprocess.Popen[str]], *args: str) -> subprocess.Popen[str]:
        extra = {"PYTHONUNBUFFERED": "1", **self.cluster_env}
        extra |= {"SHOAL_LEDGER_URL": self.url, "SHOAL_HOST_ID": self.host}
        return spawn(self.home, procs, *args, env=extra)

    def listed(self, *flags: str) -> list[dict[str, Any]]:
        """`status --json` as this machine sees it."""
        shown = json.loads(self.ok("status", "--json", *flags))
        assert isinstance(shown, list)
        return shown


@dataclass
class Team:
    cluster: Cluster
    db: str
    url: str
    shared: Path
    machines: dict[str, Machine]

    @classmethod
    def make(
        cls,
        cluster: Cluster,
        root: Path,
        *,
        team_cpu: int,
        machine_cpu: int,
        hosts: tuple[str, ...] = ("machine-a", "machine-b", "machine-c"),
    ) -> Team:
        db = cluster.new_database()
        url = cluster.url(db)
        shared = root / "team-backend"
        shared.mkdir()
        machines = {}
        for host in hosts:
            home = root / host
            home.mkdir()
            (home / "config.toml").write_text(config(team_cpu, machine_cpu, shared))
            machines[host] = Machine(host, home, url, dict(cluster.env))
        return cls(cluster, db, url, shared, machines)

    def __getitem__(self, letter: str) -> Machine:
        """team["a"]: machine-a."""
        return self.machines[f"machine-{letter}"]

    def drop(self) -> None:
        with contextlib.suppress(Exception):
            self.cluster.drop_database(self.db)

    # -- the ledger's tables, as the server holds them ----------------------------------------

    @contextlib.contextmanager
    def _conn(self) -> Iterator[Any]:
        with self.cluster.connect(self.db, autocommit=True) as conn:
            yield conn

    def sql(self, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._conn() as conn:
            cursor = conn.execute(query, params)
            return list(cursor.fetchall()) if cursor.description else []

    def waiters(self) -> list[tuple[int, str, str]]:
        """The queue: (id, host, created), in arrival order."""
        if not self._has_schema():
            return []
        rows = self.sql(f"SELECT id, host, created FROM {SCHEMA}.waiters ORDER BY id")
        return [(int(i), str(h), str(c)) for i, h, c in rows]

    def allocation(self, alloc_id: str) -> dict[str, Any]:
        names = ("id", "status", "host", "owner_host", "owner_pid", "lease", "note", "created")
        rows = self.sql(
            f"SELECT {', '.join(names)} FROM {SCHEMA}.allocations WHERE id = %s", (alloc_id,)
        )
        assert rows, f"no row {alloc_id}"
        return dict(zip(names, rows[0], strict=True))

    def in_flight(self, host: str) -> list[str]:
        """The ALLOCATING rows a machine owns."""
        if not self._has_schema():
            return []
        rows = self.sql(
            f"SELECT id FROM {SCHEMA}.allocations WHERE status = 'ALLOCATING' AND owner_host = %s",
            (host,),
        )
        return [str(r[0]) for r in rows]

    def _has_schema(self) -> bool:
        rows = self.sql("SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.waiters",))
        return bool(rows and rows[0][0])

    def queued(self, host: str, timeout: float = 30) -> tuple[int, datetime]:
        """Wait until `host` holds a place in the queue; its id and when it queued."""
        found = wait_for(
            lambda: [w for w in self.waiters() if w[1] == host], f"{host} to queue", timeout
        )
        place, _, created = found[0]
        return place, when(created)

    def shoal_sessions(self) -> list[int]:
        """The backend pids of the shoal sessions on this database (its application name)."""
        rows = self.sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND application_name = 'shoal'",
            (self.db,),
        )
        return [int(r[0]) for r in rows]

    def lock_waiters(self) -> int:
        """Sessions of this database waiting for an advisory lock (the ledger's write lock)."""
        rows = self.sql(
            "SELECT count(*) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            "WHERE d.datname = %s AND l.locktype = 'advisory' AND NOT l.granted",
            (self.db,),
        )
        return int(rows[0][0])


def one_line(text: str) -> str:
    """A command's stderr that must be one line, without a traceback; that line."""
    assert "Traceback" not in text, text
    shown = [line for line in text.splitlines() if line.strip()]
    assert len(shown) == 1, text
    return shown[0]


def finished(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    """Wait for a spawned shoal; its exit code, stdout and stderr."""
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err
