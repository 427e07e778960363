"""A throw-away PostgreSQL cluster for the tests and the benchmark (README: team ledger).

One cluster per pytest session (or benchmark run): initdb into a fresh directory under /tmp,
the server on 127.0.0.1 and an ephemeral port only, password (SCRAM) auth for the role
`shoal`, whose password sits in a 0600 PGPASSFILE so URLs carry none. Each test gets a
database of its own (`new_database`, from template0): advisory locks and LISTEN channels are
per database, so tests never see each other. fsync and friends are off: the cluster dies
with the run.

initdb and pg_ctl refuse to run as root, and CI runs as root: then every server command runs
as the `postgres` user through `runuser -u postgres --` (util-linux), in a directory that user
owns (pytest's tmp_path, under /tmp/pytest-of-root mode 0700, is not reachable by it). The
clients (the tests, shoal) stay root and connect over TCP.

`Unavailable` says why no cluster can start (no binaries, no postgres user, psycopg missing);
the fixture skips with that reason. SHOAL_TEST_PG_URL points the tests at an existing server
(a role that may CREATE DATABASE) instead: `Cluster.existing(url)`, which cannot restart it.

Imported by benchmarks/ from an install without pytest: nothing here imports pytest, and
psycopg only inside the methods that talk to the server.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    import psycopg
    from psycopg.sql import Composed

ENV_TEST_PG_URL = "SHOAL_TEST_PG_URL"
ROLE = "shoal"
HOST = "127.0.0.1"
# Durability is worth nothing in a cluster that is deleted at the end of the run, and fsync on
# a busy shared disk is most of a small transaction's time.
SERVER_OPTIONS = ("-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off")
START_TIMEOUT = 30  # seconds pg_ctl waits for the server to accept connections (-t)
PORT_TRIES = 3  # another process may take the probed free port before the server binds it


class Unavailable(Exception):
    """No cluster can be had here; the message says why (a test skips with it)."""


def find_bin_dir(lib: Path = Path("/usr/lib/postgresql")) -> Path:
    """The directory of initdb, pg_ctl and postgres: PATH first (this machine links them from
    /usr/local/bin), else the newest `lib`/N/bin (Debian puts none on PATH)."""
    found = shutil.which("initdb")
    if found is not None:
        real = Path(found).resolve().parent  # pg_ctl finds postgres beside its real self
        if (real / "pg_ctl").exists() and (real / "postgres").exists():
            return real
    versions = []
    for initdb in lib.glob("*/bin/initdb"):
        with contextlib.suppress(ValueError):
            versions.append((float(initdb.parent.parent.name), initdb.parent))
    if versions:
        return max(versions)[1]
    raise Unavailable(
        "PostgreSQL is not installed (no initdb on PATH or in /usr/lib/postgresql/*/bin): "
        "apt-get install postgresql"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


class Cluster:
    """A running server: `url(db)`, `new_database()`, `restart()`, `terminate(pid)`, `stop()`.

    Clients need `env` (PGPASSFILE) to log in: give it to every process and connection.
    """

    def __init__(self, dir_: Path | None, url: str, passfile: Path | None, password: str) -> None:
        self.dir = dir_  # None for an existing server (SHOAL_TEST_PG_URL)
        self._base = url
        self.passfile = passfile
        self.password = password  # for a test that puts it in a URL on purpose
        self.port = urlsplit(url).port or 5432
        self.bin_dir: Path | None = None
        self.as_user: list[str] = []
        self.version = ""
        self._admin: psycopg.Connection[Any] | None = None
        self._stopped = False

    # -- making one ---------------------------------------------------------------------------

    @classmethod
    def start(cls) -> Cluster:
        """initdb and start a cluster in a new /tmp directory; Unavailable says why not."""
        _need_psycopg()
        bin_dir = find_bin_dir()
        as_user, owner = _server_user()
        dir_ = Path(tempfile.mkdtemp(prefix="shoal-pg.", dir="/tmp"))
        try:
            return cls._start_in(dir_, bin_dir, as_user, owner)
        except BaseException:
            _quit_server(dir_)
            _remove(dir_)
            raise

    @classmethod
    def _start_in(
        cls, dir_: Path, bin_dir: Path, as_user: list[str], owner: tuple[int, int] | None
    ) -> Cluster:
        password = secrets.token_urlsafe(18)
        if owner is not None:
            os.chown(dir_, *owner)
        pwfile = dir_ / "pw"
        # initdb reads the password from a file the postgres user can open: a process
        # substitution's fd (--pwfile=<(...)) belongs to root and fails.
        pwfile.write_text(password + "\n")
        pwfile.chmod(0o600)
        if owner is not None:
            os.chown(pwfile, *owner)
        cluster = cls(dir_, "", None, password)
        cluster.bin_dir = bin_dir
        cluster.as_user = as_user
        try:
            cluster._server(
                "initdb", "-D", str(dir_ / "data"), "-A", "scram-sha-256",
                f"--pwfile={pwfile}", "-U", ROLE, "--no-sync", "-E", "UTF8",
                "--locale=C.UTF-8",
            )  # fmt: skip
        finally:
            pwfile.unlink()
        version = (dir_ / "data" / "PG_VERSION").read_text().strip()
        cluster.version = version
        # The clients' password file: libpq ignores one that others may read.
        cluster.passfile = dir_ / "pgpass"
        for attempt in range(PORT_TRIES):
            port = free_port()
            cluster.port = port
            cluster._base = f"postgresql://{ROLE}@{HOST}:{port}/postgres"
            cluster.passfile.write_text(f"{HOST}:{port}:*:{ROLE}:{password}\n")
            cluster.passfile.chmod(0o600)
            try:
                cluster._pg_ctl("start")
                break
            except Unavailable:
                log = cluster.log()
                if "could not bind" not in log or attempt == PORT_TRIES - 1:
                    raise
        atexit.register(cluster.stop)  # a benchmark that forgets, a session that errors
        return cluster

    @classmethod
    def existing(cls, url: str) -> Cluster:
        """An existing server (SHOAL_TEST_PG_URL): its role must be allowed CREATE DATABASE;
        its password comes the way libpq finds it (URL, PGPASSWORD, PGPASSFILE, ~/.pgpass)."""
        _need_psycopg()
        cluster = cls(None, url, None, urlsplit(url).password or "")
        cluster._connect_admin()
        return cluster

    # -- using it -----------------------------------------------------------------------------

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs to log in (the password file)."""
        return {"PGPASSFILE": str(self.passfile)} if self.passfile is not None else {}

    def url(self, db: str = "postgres") -> str:
        """postgresql://shoal@127.0.0.1:PORT/DB: no password (it is in PGPASSFILE)."""
        parts = urlsplit(self._base)
        return urlunsplit(parts._replace(path=f"/{db}"))

    def connect(self, db: str = "postgres", **kwargs: Any) -> psycopg.Connection[Any]:
        """A psycopg connection to `db`, logged in through the password file."""
        import psycopg

        if self.passfile is not None:
            kwargs.setdefault("passfile", str(self.passfile))
        return psycopg.connect(self.url(db), connect_timeout=10, **kwargs)

    def new_database(self, template: str = "template0") -> str:
        """A new empty database's name (t_<hex>): one per test keeps tests apart."""
        from psycopg import sql

        name = f"t_{secrets.token_hex(6)}"
        create = sql.SQL("CREATE DATABASE {} TEMPLATE {}")
        self._admin_execute(create.format(sql.Identifier(name), sql.Identifier(template)))
        return name

    def drop_database(self, name: str) -> None:
        """Drop `name`, ending any session still in it."""
        from psycopg import sql

        drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
        self._admin_execute(drop.format(sql.Identifier(name)))

    def terminate(self, backend_pid: int) -> bool:
        """End one session as a crash or an admin would (its client gets 57P01 on its next
        use); waits until it is gone. False when there was no such session."""
        row = self._admin_execute("SELECT pg_terminate_backend(%s, 5000)", (backend_pid,))
        return bool(row and row[0])

    def restart(self) -> None:
        """Stop (fast: sessions are ended, as a real restart does) and start again on the
        same port, the data kept."""
        if self.dir is None:
            raise Unavailable(f"{ENV_TEST_PG_URL} names a server this run cannot restart")
        self._close_admin()
        self._pg_ctl("restart", "-m", "fast")

    def stop(self) -> None:
        """Stop the server and delete its directory: no process and no file left. Idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self._close_admin()
        if self.dir is None:
            return
        try:
            if (self.dir / "data" / "postmaster.pid").exists():
                self._server(
                    "pg_ctl", "-D", str(self.dir / "data"), "-m", "immediate", "-w",
                    "-t", str(START_TIMEOUT), "stop",
                )  # fmt: skip
        finally:
            _remove(self.dir)
            atexit.unregister(self.stop)

    def postmaster_pid(self) -> int | None:
        """The server's main process, while it runs."""
        if self.dir is None:
            return None
        try:
            return int((self.dir / "data" / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def log(self) -> str:
        if self.dir is None:
            return ""
        try:
            return (self.dir / "log").read_text(errors="replace")
        except OSError:
            return ""

    # -- inside -------------------------------------------------------------------------------

    def _pg_ctl(self, action: str, *extra: str) -> None:
        assert self.dir is not None
        options = " ".join((f"-h {HOST}", f"-p {self.port}", f"-k {self.dir}", *SERVER_OPTIONS))
        try:
            self._server(
                "pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "log"), "-w",
                "-t", str(START_TIMEOUT), "-o", options, *extra, action,
            )  # fmt: skip
        except Unavailable as exc:  # the log says why, and goes with the directory
            log = " ".join(self.log().split())[-600:]
            raise Unavailable(f"{exc}; server log: {log}") from None

    def _server(self, program: str, *args: str) -> None:
        """Run a server program (as the postgres user when we are root). Its output goes to a
        file, not a pipe: a postmaster started by pg_ctl would hold a pipe open for ever."""
        assert self.bin_dir is not None and self.dir is not None
        argv = [*self.as_user, str(self.bin_dir / program), *args]
        with tempfile.TemporaryFile() as out:
            done = subprocess.run(
                argv,
                cwd=self.dir,  # a cwd the postgres user can enter
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=START_TIMEOUT + 30,
                check=False,
            )
            if done.returncode != 0:
                out.seek(0)
                said = " ".join(out.read().decode(errors="replace").split())[-600:]
                raise Unavailable(f"{program} {args[-1]} failed ({done.returncode}): {said}")

    def _connect_admin(self) -> psycopg.Connection[Any]:
        import psycopg

        if self._admin is None or self._admin.closed or self._admin.broken:
            self._close_admin()
            try:
                self._admin = self.connect(autocommit=True)
            except psycopg.Error as exc:
                said = " ".join(str(exc).split())
                raise Unavailable(f"cannot connect to the test server: {said}") from None
        return self._admin

    def _admin_execute(
        self, query: str | Composed, params: tuple[Any, ...] = ()
    ) -> tuple[Any, ...] | None:
        import psycopg

        for attempt in range(2):
            conn = self._connect_admin()
            try:
                cursor = conn.execute(query, params)
                return cursor.fetchone() if cursor.description else None
            except psycopg.OperationalError:
                if not conn.broken or attempt:  # a session from before a restart: once more
                    raise
        return None

    def _close_admin(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None


def _need_psycopg() -> None:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise Unavailable("psycopg is not installed: pip install 'shoal[postgres]'") from None


def _server_user() -> tuple[list[str], tuple[int, int] | None]:
    """The prefix that runs the server programs as a user they accept, and that user's
    (uid, gid) to own the cluster's directory; nothing when we are not root."""
    if os.geteuid() != 0:
        return [], None
    import pwd

    runuser = shutil.which("runuser") or (
        "/usr/sbin/runuser" if Path("/usr/sbin/runuser").exists() else None
    )
    if runuser is None:
        raise Unavailable("running as root and no runuser (util-linux) to run initdb as postgres")
    try:
        entry = pwd.getpwnam("postgres")
    except KeyError:
        raise Unavailable("running as root and no `postgres` user to run initdb as") from None
    return [runuser, "-u", "postgres", "--"], (entry.pw_uid, entry.pw_gid)


def _quit_server(dir_: Path) -> None:
    """Stop a server that started but never answered (pg_ctl -w gave up): SIGQUIT is
    PostgreSQL's immediate shutdown, which takes its children along."""
    import signal

    try:
        pid = int((dir_ / "data" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGQUIT)
    except (OSError, ValueError, IndexError):
        return
    for _ in range(100):
        if not running(pid):
            return
        time.sleep(0.05)


def running(pid: int) -> bool:
    """Alive: a zombie is dead already (its reaper is whoever adopted it, maybe pid 1, which
    may take its time)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text.rpartition(")")[2].split()[0] != "Z"


def _remove(dir_: Path) -> None:
    shutil.rmtree(dir_, ignore_errors=True)


def cluster_for_tests() -> Cluster:
    """The session's cluster: SHOAL_TEST_PG_URL's server, else a throw-away one."""
    url = os.environ.get(ENV_TEST_PG_URL)
    return Cluster.existing(url) if url else Cluster.start()
