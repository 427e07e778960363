"""http(s) URLs: the one check every client makes, and the one way they are shown.

`parse` checks a URL before anything uses it: a user's argument, a kubeconfig's server, a
redirect a server sent. It raises only UrlError, whose text is the reason without the URL
(each caller names the field), so a malformed URL is a clear error and never the ValueError
of `urllib.parse`, whose text quotes the bad port (which may be a password).

`display` never raises and never shows user info, query strings (signed URLs, API keys),
fragments or a port that is not a number; the rest of a server's URL may still carry a
secret, so callers scrub it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx

DEFAULT_PORTS = {"http": 80, "https": 443}
REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_DIGITS = re.compile(r"[0-9]+")  # str.isdigit() would take other scripts' digits too
_NOT_IN_HOST = frozenset("/?#[]@\\%<>\"'{}|^`")


class UrlError(ValueError):
    """A URL shoal cannot use; the text is the reason and never quotes the URL."""


class UnusableLocation(Exception):
    """A redirect whose Location cannot be followed; the text is the reason."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Url:
    scheme: str  # lowercased
    host: str  # lowercased; an IPv6 address without its brackets
    port: int | None  # as written; None when absent
    path: str
    query: str
    userinfo: str = field(default="", repr=False)
    text: str = field(default="", repr=False)  # the URL as written

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port or DEFAULT_PORTS[self.scheme]

    def shown(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.scheme}://{host}{port}{_printable(self.path)}"


@dataclass(frozen=True)
class _Parts:
    scheme: str
    authority: str | None  # None: no "//" at all
    path: str
    query: str


def _split(url: str) -> _Parts:
    """RFC 3986's split, as urlsplit does it, but without raising."""
    scheme, colon, rest = url.partition(":")
    if not colon or not _SCHEME.fullmatch(scheme):
        scheme, rest = "", url
    rest = rest.partition("#")[0]
    rest, _, query = rest.partition("?")
    if not rest.startswith("//"):
        return _Parts(scheme.lower(), None, rest, query)
    authority, slash, path = rest[2:].partition("/")
    return _Parts(scheme.lower(), authority, slash + path, query)


def parse(url: str, *, userinfo: bool = False, spaces: bool = False) -> Url:
    """`url` as an http(s) URL with a host and a port of 1-65535, or UrlError. User info
    (`user:password@`) is refused unless `userinfo`; a space in the path or query unless
    `spaces` (a server's link, which httpx percent-encodes; never in what a user typed)."""
    if not all(c.isprintable() for c in url) or (" " in url and not spaces):
        raise UrlError("it contains a space or a control character")
    parts = _split(url)
    if not parts.scheme:
        raise UrlError("it has no scheme; start it with http:// or https://")
    if parts.scheme not in DEFAULT_PORTS:
        raise UrlError(f"its scheme {parts.scheme[:20]!r} is not http or https")
    if parts.authority is None:
        raise UrlError("it has no host; write it as SCHEME://HOST[:PORT]/PATH")
    if " " in parts.authority:
        raise UrlError("its host or port contains a space")
    info, at, hostport = parts.authority.rpartition("@")
    if at and not userinfo:
        raise UrlError("it carries a user name or password (user:password@)")
    host, port = _host_port(hostport)
    return Url(parts.scheme, host, port, parts.path, parts.query, info, url)


def has_userinfo(url: str) -> bool:
    """Whether `url` carries `user:password@`; asked first, so that no message about the
    rest of the URL can quote them."""
    return "@" in (_split(url).authority or "")


def resolve(base: str, location: str) -> Url:
    """Where a redirect's `location` points from `base`, checked as `parse` checks. User
    info in the Location is refused (following it would send credentials the server chose);
    user info the base URL has is kept, as a relative Location keeps the base's host."""
    if not all(c.isprintable() for c in location):
        # Checked before urljoin, which drops tabs and newlines without a word.
        raise UrlError("it contains a control character")
    if has_userinfo(location):
        raise UrlError("it carries a user name or password (user:password@)")
    parts = _split(location)
    if parts.authority == "" or (parts.scheme and parts.authority is None):
        # urljoin would read `http:///x` and `http:x` as paths on the same host.
        raise UrlError("it has no host")
    if parts.authority is not None:  # absolute or scheme-relative: nothing to join
        scheme = f"{_split(base).scheme}:" if not parts.scheme else ""
        return parse(scheme + location, spaces=True)
    from urllib.parse import urljoin

    try:
        joined = urljoin(base, location)
    except ValueError:
        raise UrlError("it is not a URL") from None  # urljoin's own text would quote it
    return parse(joined, userinfo=True, spaces=True)


def check_location(response: httpx.Response) -> None:
    """An httpx response hook: a redirect's Location is checked before httpx parses it,
    since httpx's own error for a malformed one quotes it and reads as a network failure
    (retried, exit 69). Raises UnusableLocation for the client to report as a bad answer."""
    location = response.headers.get("location")
    if response.status_code in REDIRECTS and location is not None:
        try:
            resolve(str(response.request.url), location)
        except UrlError as exc:
            raise UnusableLocation(response.status_code, str(exc)) from None


def _host_port(hostport: str) -> tuple[str, int | None]:
    if hostport.startswith("["):
        close = hostport.find("]")
        if close < 0:
            raise UrlError("its host has a '[' without its ']'")
        host, after = _ipv6(hostport[1:close]), hostport[close + 1 :]
        if after and not after.startswith(":"):
            raise UrlError("its host has text after the ']' of its IPv6 address")
        port_text = after[1:] if after else ""
    else:
        host, _, port_text = hostport.partition(":")
        _check_name(host)
    return host.lower(), _port(port_text)


def _ipv6(text: str) -> str:
    import ipaddress

    try:
        return str(ipaddress.IPv6Address(text))
    except ValueError:
        raise UrlError("its host is not a valid IPv6 address") from None


def _check_name(host: str) -> None:
    if not host:
        raise UrlError("it has no host")
    if any(c in _NOT_IN_HOST for c in host):
        raise UrlError("its host has a character a host name cannot have")
    if not host.isascii():
        try:
            host.encode("idna")
        except UnicodeError:
            raise UrlError("its host is not a valid international domain name") from None


def _port(text: str) -> int | None:
    if not text:
        return None  # "host:" means the scheme's port (RFC 3986 3.2.3)
    if not _DIGITS.fullmatch(text):
        raise UrlError("its port is not a number")  # never quoted: it may be a password
    port = int(text)
    if not 1 <= port <= 65535:
        raise UrlError(f"its port {port if port < 10**6 else 'number'} is out of range 1-65535")
    return port


def display(url: str) -> str:
    """A URL safe to print: no user info, no query string, no fragment, no control
    characters. Never raises: a malformed URL is shown as written, less those parts and
    less a port that is not a number."""
    try:
        return parse(url, userinfo=True, spaces=True).shown()
    except UrlError:
        pass
    parts = _split(url)
    if parts.authority is None:
        return _printable(f"{parts.scheme}:{parts.path}" if parts.scheme else parts.path)
    return _printable(f"{parts.scheme}://{_hidden_port(parts.authority)}{parts.path}")


def _hidden_port(authority: str) -> str:
    """Host and port without user info, a port that is not a number hidden: it is where a
    password lands when `user:password@host` loses its `@host`."""
    hostport = authority.rpartition("@")[2]
    split = hostport.find("]") + 1 if hostport.startswith("[") else hostport.find(":")
    if split <= 0:
        return hostport
    head, port = hostport[:split], hostport[split + 1 :]
    if hostport[split : split + 1] == ":" and port and not _DIGITS.fullmatch(port):
        return f"{head}:***"
    return hostport


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: credentials go only
    where this is the same as for the URL they were given for. Never raises: a malformed
    URL has an origin equal to no well-formed one."""
    try:
        return parse(url, userinfo=True, spaces=True).origin
    except UrlError:
        parts = _split(url)
        return parts.scheme, (parts.authority or "").rpartition("@")[2].lower(), None


def _printable(text: str) -> str:
    """Spaces and control characters percent-encoded: a server's Location must not move a
    terminal's cursor or split a log line."""
    if all(c.isprintable() and c != " " for c in text):
        return text
    from urllib.parse import quote

    return "".join(c if c.isprintable() and c != " " else quote(c) for c in text)
