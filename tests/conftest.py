"""Shared fixtures: an isolated SHOAL_HOME, the `cli` runner, and real `shoal` processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

REPO = Path(__file__).resolve().parent.parent


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def write_config(home: Path) -> Callable[[str], Path]:
    def write(text: str) -> Path:
        path = home / "config.toml"
        path.write_text(text)
        return path

    return write


@pytest.fixture
def cli(home: Path) -> Callable[..., Run]:
    """Run `shoal ARGS` in-process with an isolated SHOAL_HOME and pinned COLUMNS."""
    from cli.app import app

    runner = CliRunner()

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Run:
        full_env = {
            "SHOAL_HOME": str(home),
            "COLUMNS": "200",
            "NO_COLOR": "1",
            "SHOAL_DEBUG": "1",  # an unexpected exception fails the test with its traceback
            "SHOAL_PROVIDER": None,
            "SHOAL_DRIVER": None,
            "SHOAL_CONFIG": None,
            **aws_isolation(home),
            **gcp_isolation(home),
            **azure_isolation(home),
        }
        full_env.update(LEDGER_ENV)
        full_env.update(env or {})
        result = runner.invoke(app, list(args), input=input, env=full_env, catch_exceptions=False)
        return Run(result.exit_code, result.stdout, result.stderr)

    return run


@pytest.fixture
def shoal_proc(home: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `shoal ARGS` as a real process (for concurrency, signals and kill -9)."""

    def run(
        *args: str, env: dict[str, str] | None = None, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            shoal_argv(*args),
            env=shoal_env(home, env),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
            check=False,
        )

    return run


def aws_isolation(home: Path) -> dict[str, str | None]:
    """No AWS credentials, profile or region from the machine running the tests: the CLI
    reads ~/.aws as the AWS CLI does."""
    missing = str(home / "no-aws-file")
    return {
        "AWS_CONFIG_FILE": missing,
        "AWS_SHARED_CREDENTIALS_FILE": missing,
        **dict.fromkeys(
            (
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
                "AWS_SESSION_TOKEN",
                "AWS_PROFILE",
                "AWS_REGION",
                "AWS_DEFAULT_REGION",
            )
        ),
    }


def gcp_isolation(home: Path) -> dict[str, str | None]:
    """No GCP credentials or project from the machine running the tests: the CLI reads
    gcloud's files and the metadata server as Google's tools do (providers/gcp/credentials.py)."""
    return {
        "CLOUDSDK_CONFIG": str(home / "no-gcloud"),
        "NO_GCE_CHECK": "true",
        **dict.fromkeys(
            (
                "GOOGLE_APPLICATION_CREDENTIALS",
                "GOOGLE_CLOUD_PROJECT",
                "CLOUDSDK_CORE_PROJECT",
                "CLOUDSDK_ACTIVE_CONFIG_NAME",
                "GCE_METADATA_HOST",
            )
        ),
    }


def azure_isolation(home: Path) -> dict[str, str | None]:
    """No Azure credentials or subscription from the machine running the tests: the CLI reads
    the Azure CLI's files and an Azure VM's managed identity as Azure's tools do
    (providers/azure/credentials.py); never the instance metadata service of a CI machine
    that is an Azure VM."""
    return {
        "AZURE_CONFIG_DIR": str(home / "no-azure"),
        "SHOAL_AZURE_NO_IMDS_CHECK": "true",
        **dict.fromkeys(
            (
                "AZURE_CLIENT_ID",
                "AZURE_TENANT_ID",
                "AZURE_CLIENT_SECRET",
                "AZURE_CLIENT_CERTIFICATE_PATH",
                "AZURE_CLIENT_CERTIFICATE_PASSWORD",
                "AZURE_FEDERATED_TOKEN_FILE",
                "AZURE_AUTHORITY_HOST",
                "IDENTITY_ENDPOINT",
                "IDENTITY_HEADER",
                "AZURE_POD_IDENTITY_AUTHORITY_HOST",
                "AZURE_TOKEN_CREDENTIALS",
                "AZURE_SUBSCRIPTION_ID",
            )
        ),
    }


def shoal_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "cli", *args]


def shoal_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SHOAL_", "AWS_"))}
    isolation = {**aws_isolation(home), **gcp_isolation(home), **azure_isolation(home)}
    for name in [k for k, v in isolation.items() if v is None]:
        env.pop(name, None)
    env.update({k: v for k, v in isolation.items() if v is not None})
    env.update(
        {
            "SHOAL_HOME": str(home),
            "COLUMNS": "200",
            "NO_COLOR": "1",
            "PYTHONPATH": str(REPO) + os.pathsep + env.get("PYTHONPATH", ""),
        }
    )
    env.update(LEDGER_ENV)
    env.update(extra or {})
    return env


def default_sigint() -> None:
    # A shell that started pytest in the background may have left SIGINT ignored, and Python
    # then never raises KeyboardInterrupt; a user's shoal in a terminal has the default.
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def spawn(
    home: Path,
    procs: list[subprocess.Popen[str]],
    *args: str,
    stderr: Any = subprocess.PIPE,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    """A real `shoal ARGS` process (killed and reaped by the `procs` fixture), with the
    SIGINT a terminal gives it, stdout piped."""
    proc = subprocess.Popen(
        shoal_argv(*args),
        env=shoal_env(home, env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        preexec_fn=default_sigint,
    )
    procs.append(proc)
    return proc


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Real `shoal` processes a test starts; killed and reaped whatever happens."""
    import contextlib

    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        with contextlib.suppress(ValueError, OSError):  # pipes already read and closed
            proc.communicate(timeout=30)


@pytest.fixture
def reap_workloads(home: Path) -> Iterator[None]:
    """Kill any workload a process-driver test left running, even when the test failed."""
    yield
    import signal

    for pid_file in home.glob("state/workspaces/process/*/*/.shoal-pid"):
        try:
            pid = int(pid_file.read_text().split()[0])
            os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass
    # Their supervisors, which would stop them at their expiry (their own sessions).
    for pid_file in home.glob("state/workspaces/process/*/*/.shoal-supervisor"):
        try:
            pid = int(pid_file.read_text().split()[0])
            os.killpg(pid, signal.SIGKILL)
        except (OSError, ValueError):
            pass


def wait_for(
    check: Callable[[], Any], what: str, timeout: float = 60.0, interval: float = 0.05
) -> Any:
    """Poll `check` until it returns something true; fail naming `what` after `timeout`."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def lines(text: str) -> Sequence[str]:
    return [line for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Any]:
    """The session's PostgreSQL server, a `tests.pg.Cluster` (a throw-away cluster on
    127.0.0.1, or SHOAL_TEST_PG_URL's server); a test using it skips with the reason when none
    can be had. Give each test its own `new_database()`."""
    from tests.pg import Unavailable, cluster_for_tests

    try:
        cluster = cluster_for_tests()
    except Unavailable as exc:
        pytest.skip(f"no PostgreSQL for the ledger tests: {exc}")
    try:
        yield cluster
    finally:
        cluster.stop()


# -- the ledger's two backends ------------------------------------------------------------------
# Suites of ledger features run on both (README: Team ledger): a module opts in with
# `pytestmark = pytest.mark.usefixtures("ledger_backend")`; its tests then run as [sqlite] and
# [postgresql]. On PostgreSQL every `cli` run and every real shoal process (`shoal_env`) gets
# SHOAL_LEDGER_URL (a database of the test's own) and SHOAL_HOST_ID; `make_ledger` builds the
# same backend in-process. A test of SQLite's file itself marks itself `sqlite_only`.
LEDGER_BACKENDS = ("sqlite", "postgresql")
HOST_ID = "host-a"
LEDGER_ENV: dict[str, str] = {}
_TEMPLATE: dict[str, str] = {}


def _ledger_template(cluster: Any) -> str:
    """A database with the ledger's schema made once, copied for each test (CREATE DATABASE
    ... TEMPLATE): a test does not pay for the migration."""
    if "name" not in _TEMPLATE:
        from drivers.ledger import pg

        name = cluster.new_database()
        with cluster.connect(name, options=f"-c search_path={pg.SCHEMA}") as conn:
            conn.autocommit = True
            pg.migrate(conn, "template")
        _TEMPLATE["name"] = name
    return _TEMPLATE["name"]


@pytest.fixture(params=LEDGER_BACKENDS)
def ledger_backend(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "sqlite":
        yield "sqlite"
        return
    cluster = request.getfixturevalue("pg_cluster")
    name = cluster.new_database(template=_ledger_template(cluster))
    env = {**cluster.env, "SHOAL_LEDGER_URL": cluster.url(name), "SHOAL_HOST_ID": HOST_ID}
    saved = {key: os.environ.get(key) for key in cluster.env}
    os.environ.update(cluster.env)  # libpq in this process (make_ledger) logs in the same way
    LEDGER_ENV.update(env)
    try:
        yield "postgresql"
    finally:
        LEDGER_ENV.clear()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        cluster.drop_database(name)


@pytest.fixture
def make_ledger(ledger_backend: str) -> Iterator[Callable[..., Any]]:
    """`make_ledger(path, clock=...)`: a Ledger on the test's backend (`path`: the SQLite
    file's, unused on PostgreSQL); closed at the end."""
    from drivers.ledger.book import Ledger

    made: list[Any] = []

    def make(path: Path, clock: Callable[[], Any] | None = None, host: str = HOST_ID) -> Any:
        extra = {} if clock is None else {"clock": clock}
        if ledger_backend == "sqlite":
            ledger = Ledger(path, **extra)
        else:
            from drivers.ledger.pg import PgLedgerDb
            from drivers.ledger.url import LedgerUrl

            url = LedgerUrl(LEDGER_ENV["SHOAL_LEDGER_URL"], "SHOAL_LEDGER_URL")
            ledger = Ledger(db=PgLedgerDb(url), host=host, **extra)
        made.append(ledger)
        return ledger

    yield make
    for ledger in made:
        ledger.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A `sqlite_only` test of a module on both backends runs once, on SQLite; a
    `postgresql_only` one once, on PostgreSQL."""

    def kept(item: pytest.Item) -> bool:
        backend = getattr(getattr(item, "callspec", None), "params", {}).get("ledger_backend")
        if backend == "postgresql":
            return not item.get_closest_marker("sqlite_only")
        if backend == "sqlite":
            return not item.get_closest_marker("postgresql_only")
        return True

    items[:] = [item for item in items if kept(item)]


def read_ledger(home: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Rows of a read (or a write) on the test's ledger behind shoal's back (as another
    process would):
    the SQLite file under `home`, or the team ledger's tables. [] before it is made."""
    if LEDGER_ENV:
        import psycopg

        from drivers.ledger import pg

        with psycopg.connect(
            LEDGER_ENV["SHOAL_LEDGER_URL"], options=f"-c search_path={pg.SCHEMA}"
        ) as conn:
            try:
                cursor = conn.execute(sql.replace("?", "%s"), params)  # type: ignore[arg-type]
            except psycopg.errors.UndefinedTable:
                return []
            return cursor.fetchall() if cursor.description else []
    import sqlite3

    path = home / "state" / "ledger.sqlite"
    if not path.exists():
        return []
    conn = sqlite3.connect(path, timeout=5)
    try:
        rows = conn.execute(sql, params).fetchall()
        conn.commit()  # a write behind shoal's back (a test's) is kept
        return rows
    except sqlite3.OperationalError:
        return []  # not made yet
    finally:
        conn.close()
