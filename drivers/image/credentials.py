"""Basic-auth credentials for a pull: flag, stdin, environment or ~/.netrc; never a flag value."""

from __future__ import annotations

from collections.abc import Mapping

from drivers.image.naming import check_url
from providers.core.env import ENV_IMAGE_PASSWORD, ENV_IMAGE_USER
from providers.core.errors import ConfigError, UsageError
from providers.core.urls import parse


def resolve(
    url: str, user: str | None, stdin_password: str | None, env: Mapping[str, str]
) -> tuple[str, str]:
    """(user, password) or ("", "") for anonymous; the password never comes from argv."""
    check_url(url)  # the first look at the URL: a malformed one is a usage error here
    user = user or env.get(ENV_IMAGE_USER, "")
    password = stdin_password if stdin_password is not None else env.get(ENV_IMAGE_PASSWORD, "")
    if user and password:
        return user, password
    host = parse(url).host
    from_netrc = _netrc(host)
    if from_netrc is not None and (not user or user == from_netrc[0]):
        return from_netrc
    if password and not user:
        raise UsageError(f"a password was given but no user; add --user or {ENV_IMAGE_USER}")
    if user and not password:
        raise UsageError(
            f"--user {user} has no password: pipe it to --password-stdin, set "
            f"{ENV_IMAGE_PASSWORD}, or add {host} to ~/.netrc"
        )
    return "", ""


def _netrc(host: str) -> tuple[str, str] | None:
    import netrc

    try:
        entry = netrc.netrc().authenticators(host)
    except FileNotFoundError:
        return None
    except netrc.NetrcParseError as exc:
        raise ConfigError(f"~/.netrc line {exc.lineno}: {exc.msg}; fix or remove it") from None
    except OSError:
        return None
    if entry is None:
        return None
    login, _, password = entry
    return (login, password or "") if login else None
