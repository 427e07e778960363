"""The throw-away PostgreSQL cluster the team-ledger tests run on (tests/pg.py): it really
listens on loopback behind a password, keeps tests apart, restarts, ends one session, and
leaves nothing behind."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg import Cluster, Unavailable, find_bin_dir, running

psycopg = pytest.importorskip("psycopg", reason="psycopg is not installed: pip install '.[test]'")


@pytest.fixture
def db(pg_cluster: Cluster) -> Iterator[str]:
    name = pg_cluster.new_database()
    yield name
    pg_cluster.drop_database(name)


def throwaway(cluster: Cluster) -> None:
    if cluster.dir is None:
        pytest.skip("SHOAL_TEST_PG_URL names an existing server: not this run's cluster")


def test_a_client_logs_in_over_loopback_through_the_password_file(
    pg_cluster: Cluster, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    throwaway(pg_cluster)
    assert pg_cluster.passfile is not None
    url = pg_cluster.url(db)
    assert url == f"postgresql://shoal@127.0.0.1:{pg_cluster.port}/{db}"  # no password in it
    assert stat.S_IMODE(pg_cluster.passfile.stat().st_mode) == 0o600  # else libpq ignores it
    with psycopg.connect(url, passfile=str(pg_cluster.passfile)) as conn:
        row = conn.execute(
            "SELECT current_user, current_database(), host(inet_server_addr()), "
            "current_setting('listen_addresses'), current_setting('password_encryption')"
        ).fetchone()
    assert row == ("shoal", db, "127.0.0.1", "127.0.0.1", "scram-sha-256")

    # The password is required: without the file (and no PGPASSWORD) the login is refused.
    monkeypatch.delenv("PGPASSWORD", raising=False)
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(url, passfile=str(tmp_path / "none"), connect_timeout=10)
    # ... and it is the one in the URL, for the tests that put one there on purpose.
    with_password = url.replace("shoal@", f"shoal:{pg_cluster.password}@")
    with psycopg.connect(with_password, passfile=str(tmp_path / "none")) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    # The env a shoal process needs: the same file.
    assert pg_cluster.env == {"PGPASSFILE": str(pg_cluster.passfile)}


def test_each_new_database_is_empty_and_apart_from_the_others(pg_cluster: Cluster) -> None:
    first, second = pg_cluster.new_database(), pg_cluster.new_database()
    try:
        assert first != second
        with (
            pg_cluster.connect(first, autocommit=True) as a,
            pg_cluster.connect(second, autocommit=True) as b,
        ):
            a.execute("CREATE TABLE mine (x int)")
            tables = "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
            assert b.execute(tables).fetchone() == (0,)
            # Advisory locks (the ledger's pool locks) are per database: a test holding one
            # never blocks another test.
            assert a.execute("SELECT pg_try_advisory_lock(7, 7)").fetchone() == (True,)
            assert b.execute("SELECT pg_try_advisory_lock(7, 7)").fetchone() == (True,)
    finally:
        pg_cluster.drop_database(first)
        pg_cluster.drop_database(second)
    with pg_cluster.connect() as conn:
        names = {r[0] for r in conn.execute("SELECT datname FROM pg_database").fetchall()}
    assert first not in names and second not in names


def test_a_restart_ends_every_session_and_keeps_the_data(pg_cluster: Cluster, db: str) -> None:
    throwaway(pg_cluster)
    port = pg_cluster.port
    before = pg_cluster.postmaster_pid()
    with pg_cluster.connect(db, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (42)")
        pg_cluster.restart()
        with pytest.raises(psycopg.OperationalError):
            conn.execute("SELECT 1")  # 57P01: terminating connection due to administrator command
    assert pg_cluster.postmaster_pid() not in (None, before)
    assert pg_cluster.port == port
    with pg_cluster.connect(db) as conn:
        assert conn.execute("SELECT x FROM kept").fetchall() == [(42,)]
    assert pg_cluster.new_database()  # the admin connection came back too


def test_terminate_ends_one_session_only(pg_cluster: Cluster, db: str) -> None:
    with pg_cluster.connect(db, autocommit=True) as victim, pg_cluster.connect(db) as other:
        row = victim.execute("SELECT pg_backend_pid()").fetchone()
        assert row is not None
        assert pg_cluster.terminate(row[0]) is True
        with pytest.raises(psycopg.OperationalError):
            victim.execute("SELECT 1")
        assert other.execute("SELECT 1").fetchone() == (1,)
    assert pg_cluster.terminate(row[0]) is False  # gone already


def test_stop_leaves_no_process_and_no_directory() -> None:
    try:
        cluster = Cluster.start()  # its own: the session's serves the other tests
    except Unavailable as exc:
        pytest.skip(f"no PostgreSQL: {exc}")
    try:
        assert cluster.dir is not None
        postmaster = cluster.postmaster_pid()
        assert postmaster is not None and running(postmaster)
        with cluster.connect():  # a backend too
            server = [postmaster, *children(postmaster)]
            assert len(server) > 2  # checkpointer, writer, walwriter, the backend ...
    finally:
        cluster.stop()
    assert not cluster.dir.exists()
    assert [pid for pid in server if running(pid)] == []
    cluster.stop()  # again: nothing to do, no error


def test_no_binaries_is_a_reason_to_skip_not_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(Unavailable, match="apt-get install postgresql"):
        find_bin_dir(tmp_path / "lib")


def test_the_newest_debian_version_is_chosen_when_none_is_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    for version in ("9.6", "15", "13"):
        bin_dir = tmp_path / "lib" / version / "bin"
        bin_dir.mkdir(parents=True)
        (bin_dir / "initdb").touch()
    assert find_bin_dir(tmp_path / "lib") == tmp_path / "lib" / "15" / "bin"  # not "9.6"


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(entry.name))
    return found
