"""The ledger's PostgreSQL URL: where it is set, whether libpq can read it, and how it is
shown without its password.

`SHOAL_LEDGER_URL` > `[ledger] url` > SQLite in the state dir. The variable set but empty
means SQLite whatever the config says, so one command can step off a team's ledger. Only
libpq's URI form is taken (postgresql:// or postgres://); the rest is libpq's own: a
password from PGPASSWORD, PGPASSFILE or ~/.pgpass, `?service=`, `sslmode`, a unix socket as
`?host=/run/postgresql`. libpq's own parser (through psycopg) reads it, so shoal accepts
exactly what libpq does; psycopg is imported by `parse` alone, and only for a PostgreSQL URL.
`ledger_url`, `redact` and the checks of the URL's form need nothing but this module:
`config show` and error messages never pay psycopg's ~90 ms.

A URL may carry a password, in its user part or its query (`password=`, `sslpassword=`).
No message made here contains the value or a piece of it: libpq's parse errors quote the
piece they stumbled on (`unexpected spaces found in "..."`) and are never shown. The hints
come from checks made here that name a position or a known key, never what was given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote

from providers.core.env import ENV_LEDGER_URL
from providers.core.errors import ConfigError

if TYPE_CHECKING:
    from providers.core.settings import Settings

SCHEMES = ("postgresql://", "postgres://")  # libpq's, case and all
CONFIG_KEY = "[ledger] url"
NOT_SHOWN = "(a PostgreSQL URL, not shown)"
INSTALL = "pip install 'shoal[postgres]'"
FORM = "postgresql://user@host:port/dbname?param=value"
HIDDEN = "the value is not shown: it may hold a password"
ENCODE = (
    "percent-encode '@', '/', '?', '&', '%' and spaces in a user or password "
    "(%40 %2F %3F %26 %25 %20)"
)
# The query parameters a shown URL keeps: libpq's that name a place or a way to connect,
# never a credential. Any other key is dropped, a misspelt one too (`passwrd=` carries a
# password all the same).
SHOWN_PARAMS = frozenset(
    {
        "host", "hostaddr", "port", "dbname", "user", "service", "application_name",
        "connect_timeout", "sslmode", "sslnegotiation", "sslrootcert", "sslcert", "sslkey",
        "sslcrl", "sslcrldir", "sslsni", "sslcertmode", "ssl_min_protocol_version",
        "ssl_max_protocol_version", "channel_binding", "require_auth", "gssencmode",
        "krbsrvname", "gsslib", "target_session_attrs", "load_balance_hosts", "keepalives",
        "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
        "client_encoding", "options",
    }
)  # fmt: skip
_SCHEME_SHOWN = re.compile(r"[A-Za-z][A-Za-z0-9+.-]{0,19}://")
_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")


@dataclass(frozen=True)
class LedgerUrl:
    """A configured ledger URL and where it was set (for messages)."""

    value: str = field(repr=False)  # as given: may hold a password, never printed
    where: str  # SHOAL_LEDGER_URL, or `config file PATH: [ledger] url`

    @property
    def shown(self) -> str:
        return redact(self.value)

    def params(self) -> dict[str, str]:
        """libpq's connection parameters (the password among them, if the URL has one)."""
        return parse(self.value, self.where)


def ledger_url(settings: Settings) -> LedgerUrl | None:
    """The PostgreSQL URL the ledger lives at, or None for SQLite. Its form is checked here
    (a ConfigError naming where it was set); libpq reads it in `parse`."""
    value = settings.env.get(ENV_LEDGER_URL)
    if value is not None:
        if not value:
            return None  # set and empty: SQLite, whatever the config says
        where = ENV_LEDGER_URL
    else:
        if "ledger" not in settings.config:
            return None
        from drivers.ledger.config import LedgerSection
        from providers.core.settings import config_model

        value = config_model(settings, LedgerSection, "ledger").url
        if not value:
            return None
        where = f"config file {settings.paths.config_file}: {CONFIG_KEY}"
    check(value, where)
    return LedgerUrl(value, where)


def check(value: str, where: str = CONFIG_KEY) -> None:
    """A ConfigError, never quoting the value, when `value` is not a URL libpq could read;
    what only libpq knows (its parameters' names) is `parse`'s."""
    try:
        _split(value)
    except _Malformed as exc:
        raise ConfigError(f"{where}: {exc.reason}") from None


def parse(value: str, where: str = CONFIG_KEY) -> dict[str, str]:
    """libpq's connection parameters of `value` (user, password, host, port, dbname and the
    query's), read by libpq's own parser; a ConfigError (78) naming `where` when it cannot
    be read, or when psycopg is not installed."""
    check(value, where)
    try:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
    except ImportError:
        raise ConfigError(
            f"{where}: a ledger on PostgreSQL needs psycopg, which is not installed: {INSTALL}"
        ) from None
    _check_params(_split(value).query, where)
    try:
        params = conninfo_to_dict(value)
    except psycopg.Error:
        # Its message quotes the piece it could not read, which may be the password.
        raise ConfigError(
            f"{where}: libpq cannot read this URL ({HIDDEN}); expected {FORM}; {ENCODE}"
        ) from None
    return {key: str(val) for key, val in params.items() if val is not None}


def redact(value: str) -> str:
    """`value` without its password: no password in the user part, and of the query only
    the parameters that never carry one. `postgresql://alice@db:5432/shoal?sslmode=require`.
    A value that is not a readable PostgreSQL URL is not shown at all."""
    if not value:
        return value
    try:
        parts = _split(value)
    except _Malformed:
        return NOT_SHOWN
    user = f"{parts.user}@" if parts.user else ""
    dbname = "" if parts.dbname is None else f"/{parts.dbname}"
    kept = [f"{key}={val}" for key, val in parts.query if unquote(key) in SHOWN_PARAMS]
    query = f"?{'&'.join(kept)}" if kept else ""
    return f"{parts.scheme}{user}{parts.hosts}{dbname}{query}"


# -- reading the URI as libpq does (fe-connect.c, conninfo_uri_parse_options) ------------------


class _Malformed(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason  # never holds the value or a piece of it


@dataclass(frozen=True)
class _Parts:
    """A URI's pieces, raw (still percent-encoded); the password is left out."""

    scheme: str
    user: str | None
    hosts: str
    dbname: str | None
    query: list[tuple[str, str]]


def _split(value: str) -> _Parts:
    scheme = next((s for s in SCHEMES if value.startswith(s)), None)
    if scheme is None:
        given = _SCHEME_SHOWN.match(value)
        got = f", got {given.group(0)}..." if given else ""
        raise _Malformed(f"expected a URL like {FORM}{got} ({HIDDEN})")
    if any(ch.isspace() for ch in value):
        raise _Malformed(f"holds a space or a line break ({HIDDEN}); {ENCODE}")
    if _PERCENT.search(value):
        raise _Malformed(f"holds a '%' not followed by two hex digits ({HIDDEN}); {ENCODE}")
    rest = value[len(scheme) :]
    # libpq takes a user part up to the first '@', unless a '/' comes before it.
    user: str | None = None
    at = _first(rest, "@/")
    if at is not None and rest[at] == "@":
        user = rest[:at].partition(":")[0]
        rest = rest[at + 1 :]
    head, question, query = rest.partition("?")
    if "@" in head:
        # A password's own '@' or '/' unencoded: libpq would take a piece of the password
        # for the host, the port or the database.
        raise _Malformed(f"has an '@' after the user part ({HIDDEN}); {ENCODE}")
    hosts, slash, dbname = head.partition("/")
    for n, spec in enumerate(hosts.split(","), 1):
        port = spec.rpartition("]")[2] if spec.startswith("[") else spec
        port = port.partition(":")[2]
        if port and not port.isdigit():
            where = f"host {n}'s port" if "," in hosts else "the port"
            raise _Malformed(f"{where} is not a number ({HIDDEN}); {ENCODE}")
    pairs: list[tuple[str, str]] = []
    for n, item in enumerate(query.split("&") if question else [], 1):
        key, equals, val = item.partition("=")
        if not equals or not key:
            raise _Malformed(f"query parameter {n} is not key=value ({HIDDEN}); {ENCODE}")
        pairs.append((key, val))
    return _Parts(scheme, user, hosts, dbname if slash else None, pairs)


def _first(text: str, chars: str) -> int | None:
    found = [i for i in (text.find(ch) for ch in chars) if i >= 0]
    return min(found) if found else None


def _check_params(query: list[tuple[str, str]], where: str) -> None:
    """An unknown query key, named by its position and the known key it is close to: libpq's
    own message quotes the key, which a mistyped query may have made part of a password."""
    import difflib

    from psycopg import pq

    try:
        known = sorted(o.keyword.decode() for o in pq.Conninfo.get_defaults())
    except Exception:  # libpq's defaults unreadable: its parser still refuses what it must
        return
    for n, (key, _) in enumerate(query, 1):
        name = unquote(key)
        if name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(
            f"{where}: query parameter {n} is not one of libpq's connection parameters{hint} "
            f"({HIDDEN})"
        )
