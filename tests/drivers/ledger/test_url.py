"""The ledger's PostgreSQL URL (drivers/ledger/url.py): where it is set, what libpq reads in
it, and that no message or shown form ever holds its password. No server needed."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from drivers.ledger.url import NOT_SHOWN, LedgerUrl, ledger_url, parse, redact
from providers.core.errors import ConfigError
from providers.core.settings import Paths, Settings, load_config
from tests.conftest import Run

PASSWORD = "hunter2-Secret"

needs_psycopg = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("psycopg") is None,
    reason="psycopg is not installed: pip install '.[test]'",
)


def settings_with(home: Path, env: dict[str, str], config: str | None = None) -> Settings:
    if config is not None:
        (home / "config.toml").write_text(config)
    paths = Paths.from_env({"SHOAL_HOME": str(home)})
    return Settings(paths=paths, config=load_config(paths.config_file), env=env)


def refused(call: Callable[[], object], *expected: str) -> str:
    with pytest.raises(ConfigError) as info:
        call()
    said = str(info.value)
    for text in expected:
        assert text in said, (text, said)
    assert PASSWORD not in said and "hunter2" not in said
    assert "\n" not in said
    return said


# -- schemes ------------------------------------------------------------------------------------


@needs_psycopg
@pytest.mark.parametrize("scheme", ["postgresql", "postgres"])
def test_both_libpq_schemes_are_read_by_libpq(scheme: str) -> None:
    url = f"{scheme}://alice:{PASSWORD}@db.example:6432/shoal?sslmode=require"
    assert parse(url) == {
        "user": "alice",
        "password": PASSWORD,  # the backend needs it; it is never shown
        "host": "db.example",
        "port": "6432",
        "dbname": "shoal",
        "sslmode": "require",
    }


@needs_psycopg
@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("postgresql:///shoal?host=/run/postgresql", "/run/postgresql"),
        ("postgresql://%2Frun%2Fpostgresql/shoal", "/run/postgresql"),
        ("postgresql://[::1]:5432,db2:5433/shoal", "::1,db2"),
    ],
)
def test_sockets_and_several_hosts_are_libpq_s(url: str, host: str) -> None:
    assert parse(url)["host"] == host


@pytest.mark.parametrize(
    ("url", "got"),
    [
        (f"mysql://root:{PASSWORD}@db/shoal", ", got mysql://..."),
        ("sqlite:///state/ledger.sqlite", ", got sqlite://..."),
        (f"host=db user=alice password={PASSWORD}", ""),  # libpq's key=value form: not a URL
        (f"POSTGRESQL://alice:{PASSWORD}@db/shoal", ", got POSTGRESQL://..."),  # libpq: case too
        (f"alice:{PASSWORD}@db/shoal", ""),
        ("", ""),
    ],
)
def test_anything_but_a_postgresql_url_is_a_config_error(url: str, got: str) -> None:
    said = refused(lambda: parse(url), "[ledger] url: expected a URL like postgresql://", got)
    assert "not shown" in said


# -- unreadable URLs: 78, never the value ------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        (f"postgresql://alice:{PASSWORD} x@db/shoal", "a space or a line break"),
        (f"postgresql://alice:{PASSWORD}\n@db/shoal", "a space or a line break"),
        (f"postgresql://alice:{PASSWORD}%zz@db/shoal", "'%' not followed by two hex digits"),
        # A password's own '@' or '/' unencoded: libpq would read a piece of it as the host,
        # the port or the database, and its connect error would quote that piece.
        (f"postgresql://alice:{PASSWORD}@x@db/shoal", "an '@' after the user part"),
        (f"postgresql://alice:{PASSWORD}/x@db/shoal", "an '@' after the user part"),
        (f"postgresql://alice:{PASSWORD}/shoal", "the port is not a number"),
        (f"postgresql://db:5432,alice:{PASSWORD}/shoal", "host 2's port is not a number"),
        (f"postgresql://db/shoal?sslmode=require&{PASSWORD}", "query parameter 2 is not key=value"),
    ],
)
def test_an_unreadable_url_says_why_without_the_value(url: str, reason: str) -> None:
    said = refused(lambda: parse(url, "SHOAL_LEDGER_URL"), "SHOAL_LEDGER_URL: ", reason)
    assert "percent-encode" in said and "not shown" in said
    assert redact(url) == NOT_SHOWN


@needs_psycopg
def test_an_unknown_query_parameter_is_named_by_position_and_its_close_match() -> None:
    url = f"postgresql://alice@db/shoal?sslmode=require&passwrd={PASSWORD}"
    said = refused(
        lambda: parse(url),
        "[ledger] url: query parameter 2 is not one of libpq's connection parameters",
        "did you mean 'password'?",
    )
    assert "passwrd" not in said  # the key may be part of a mistyped password: not quoted


@needs_psycopg
def test_what_only_libpq_refuses_is_refused_without_its_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # libpq's message would be `unexpected spaces found in "..."`, quoting the password;
    # here it is reached past shoal's own checks, as a libpq newer than them would refuse.
    monkeypatch.setattr("drivers.ledger.url._check_params", lambda query, where: None)
    url = f"postgresql://alice@db/shoal?password={PASSWORD}%00"
    said = refused(lambda: parse(url), "[ledger] url: libpq cannot read this URL", "not shown")
    assert "%00" not in said


def test_without_psycopg_a_postgresql_url_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` raises ImportError
    monkeypatch.setitem(sys.modules, "psycopg.conninfo", None)
    refused(
        lambda: parse(f"postgresql://alice:{PASSWORD}@db/shoal", "SHOAL_LEDGER_URL"),
        "SHOAL_LEDGER_URL: a ledger on PostgreSQL needs psycopg",
        "pip install 'shoal[postgres]'",
    )


# -- redaction ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            f"postgresql://alice:{PASSWORD}@db:5432/shoal?sslmode=require",
            "postgresql://alice@db:5432/shoal?sslmode=require",
        ),
        (
            f"postgres://alice@db/shoal?password={PASSWORD}&sslmode=verify-full",
            "postgres://alice@db/shoal?sslmode=verify-full",
        ),
        (
            f"postgresql://db/shoal?sslpassword={PASSWORD}&sslkey=/k.pem&application_name=ci",
            "postgresql://db/shoal?sslkey=/k.pem&application_name=ci",
        ),
        # libpq decodes keys: this is `password`.
        (f"postgresql://db/shoal?pass%77ord={PASSWORD}", "postgresql://db/shoal"),
        # A misspelt key carries the password all the same: only known safe keys are shown.
        (f"postgresql://db/shoal?passwrd={PASSWORD}&port=5433", "postgresql://db/shoal?port=5433"),
        (f"postgresql://:{PASSWORD}@db/shoal", "postgresql://db/shoal"),
        (f"postgresql://alice:{PASSWORD}@/shoal?host=/run/postgresql",
         "postgresql://alice@/shoal?host=/run/postgresql"),
        ("postgresql:///shoal", "postgresql:///shoal"),
        ("postgresql://[::1]:5432/shoal", "postgresql://[::1]:5432/shoal"),
        (f"postgresql://alice:{PASSWORD}@db", "postgresql://alice@db"),
        (f"mysql://alice:{PASSWORD}@db/shoal", NOT_SHOWN),
        (f"host=db password={PASSWORD}", NOT_SHOWN),
        ("", ""),
    ],
)  # fmt: skip
def test_redact_drops_every_password(url: str, shown: str) -> None:
    assert redact(url) == shown
    assert PASSWORD not in redact(url)


def test_a_ledger_url_shows_and_prints_without_its_password() -> None:
    url = LedgerUrl(f"postgresql://alice:{PASSWORD}@db/shoal", "SHOAL_LEDGER_URL")
    assert url.shown == "postgresql://alice@db/shoal"
    assert PASSWORD not in repr(url) and PASSWORD not in str(url)


# -- where the URL comes from -------------------------------------------------------------------

CONFIG = f'[ledger]\nurl = "postgresql://team@db.example/shoal?password={PASSWORD}"\n'


def test_without_either_the_ledger_is_sqlite(home: Path) -> None:
    assert ledger_url(settings_with(home, {})) is None
    assert ledger_url(settings_with(home, {}, "[ledger]\n")) is None
    assert ledger_url(settings_with(home, {}, '[ledger]\nurl = ""\n')) is None


def test_the_config_s_url_names_the_file_it_came_from(home: Path) -> None:
    url = ledger_url(settings_with(home, {}, CONFIG))
    assert url is not None
    assert url.value == f"postgresql://team@db.example/shoal?password={PASSWORD}"
    assert url.where == f"config file {home / 'config.toml'}: [ledger] url"
    assert url.shown == "postgresql://team@db.example/shoal"


def test_the_variable_wins_over_the_config(home: Path) -> None:
    env = {"SHOAL_LEDGER_URL": "postgres://mine@localhost/ledger"}
    url = ledger_url(settings_with(home, env, CONFIG))
    assert url == LedgerUrl("postgres://mine@localhost/ledger", "SHOAL_LEDGER_URL")


def test_the_variable_set_but_empty_means_sqlite_whatever_the_config_says(home: Path) -> None:
    assert ledger_url(settings_with(home, {"SHOAL_LEDGER_URL": ""}, CONFIG)) is None


def test_a_bad_url_names_where_it_was_set(home: Path) -> None:
    env = {"SHOAL_LEDGER_URL": f"mysql://root:{PASSWORD}@db/shoal"}
    refused(lambda: ledger_url(settings_with(home, env)), "SHOAL_LEDGER_URL: expected a URL")
    config = f'[ledger]\nurl = "mysql://root:{PASSWORD}@db/shoal"\n'
    refused(
        lambda: ledger_url(settings_with(home, {}, config)),
        f"config file {home / 'config.toml'}: [ledger] url: expected a URL like postgresql://",
    )


def test_the_ledger_table_is_checked_like_every_table(home: Path) -> None:
    refused(
        lambda: ledger_url(settings_with(home, {}, f'[ledger]\nulr = "{PASSWORD}"\n')),
        "[ledger] ulr: unknown key; did you mean 'url'?",
    )
    said = refused(
        lambda: ledger_url(settings_with(home, {}, "[ledger]\nurl = 5432\n")), "[ledger] url"
    )
    assert "5432" not in said  # a value in this table is never quoted


# -- through the CLI ----------------------------------------------------------------------------


def test_config_show_never_shows_the_url_s_password(cli: Callable[..., Run]) -> None:
    url = f"postgresql://alice:{PASSWORD}@db.example/shoal?sslpassword={PASSWORD}&sslmode=require"
    run = cli("config", "show", "--json", env={"SHOAL_LEDGER_URL": url})
    assert run.exit_code == 0, run.stderr
    assert PASSWORD not in run.stdout + run.stderr
    items = {item["name"]: item for item in run.json()}
    assert items["$SHOAL_LEDGER_URL"]["value"] == (
        "postgresql://alice@db.example/shoal?sslmode=require"
    )


def test_the_ledger_table_is_a_known_section(
    cli: Callable[..., Run], write_config: Callable[[str], Path]
) -> None:
    write_config('[ledger]\nurl = ""\n')
    run = cli("config", "check")
    assert run.exit_code == 0, run.stderr
    write_config('[ledger]\nurl = ""\nnope = 1\n')
    typo = cli("config", "check")
    assert typo.exit_code == 78 and "nope" in typo.stderr, typo.stderr


def test_config_show_with_a_postgresql_url_does_not_import_psycopg(home: Path) -> None:
    """Only `parse` needs libpq: showing and checking the URL's form cost nothing."""
    import subprocess

    from tests.conftest import shoal_argv, shoal_env

    env = shoal_env(home, {"SHOAL_LEDGER_URL": f"postgresql://alice:{PASSWORD}@db/shoal"})
    argv = shoal_argv("config", "show", "--json")
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True,
        timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "postgresql://alice@db/shoal" in done.stdout
    imported = {line.rpartition("|")[2].strip() for line in done.stderr.splitlines()}
    assert "drivers.ledger.url" in imported  # the probe sees the module that showed it
    assert not [name for name in imported if name.startswith("psycopg")]


def test_config_check_reads_the_ledger_table(
    cli: Callable[..., Run], write_config: Callable[[str], Path]
) -> None:
    write_config('[ledger]\nurl = "mysql://x"\n')
    bad = cli("config", "check")
    assert bad.exit_code == 78 and "[ledger] url" in bad.stderr, bad.stderr
    write_config('[ledger]\nurl = "postgresql://shoal:pw@db/shoal?sslmod=require"\n')
    later = cli("config", "check")
    assert later.exit_code == 78 and "did you mean 'sslmode'" in later.stderr, later.stderr
    assert "pw@" not in later.stderr
    write_config('[ledger]\nurl = "postgresql://shoal:pw@db/shoal"\n')
    assert cli("config", "check").exit_code == 0  # checked, not connected to
    write_config('[ledger]\nurl = ""\n')
    assert cli("config", "check").exit_code == 0
