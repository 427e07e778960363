"""Typed errors shared by providers, drivers and the CLI.

Each class says what kind of failure it is; the CLI maps kinds to exit codes in one place
(`cli/exit_codes.py`). Messages are one line, name the field or variable at fault and say
how to fix it. They never carry credentials.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable, Mapping


class ShoalError(Exception):
    """Base of every expected failure: an ordinary error (exit 1)."""

    # Failures that came before this one in the same command (other providers of a
    # multi-provider query), printed first, each once.
    earlier: tuple[str, ...] = ()


class UsageError(ShoalError):
    """The user's input is malformed: flags, selectors, times, definitions (exit 2)."""


class UnknownNameError(UsageError):
    """A provider, driver or task name that is not known; lists the known ones."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = known
        listed = ", ".join(known) if known else "none"
        super().__init__(f"unknown {kind} {name!r}; known: {listed}")


class ConfigError(ShoalError):
    """Configuration or environment is wrong: config file, SHOAL_HOME, driver config (exit 78)."""


class CredentialsError(ShoalError):
    """Credentials are missing or refused; the message names the variable to set (exit 77)."""


def usable_credential(value: str, where: str) -> str:
    """A credential travels in an HTTP header: printable ASCII only. A line break (a wrapped
    paste), a space or a non-ASCII character would make the HTTP library refuse the request
    with an error that quotes the header, so it is refused here, naming where it came from
    and never the value."""
    if value and not all("!" <= ch <= "~" for ch in value):
        raise CredentialsError(
            f"{where} holds a character no credential has (a line break, a space or a "
            "non-ASCII character); set it again, on one line"
        )
    return value


class ProviderUnreachableError(ShoalError):
    """A provider or engine could not be reached (exit 69)."""


class RetryableError(ShoalError):
    """Try again later: no capacity, a timeout, a lock held too long (exit 75)."""


class NoCapacityError(RetryableError):
    """The driver has no room for the definition right now."""


class NotFoundError(ShoalError):
    """An allocation id or other object does not exist (exit 1)."""


class LedgerWriteError(ShoalError):
    """The ledger could not be written: a full disk, a read-only file (exit 1). What was
    asked may have happened in the driver; the message says which."""


class LedgerCorruptError(ShoalError):
    """The ledger file is not a readable SQLite database; it is reported, never overwritten."""


# Environment variables whose values are credentials, by name: never printed anywhere.
SECRET_NAME_WORDS = ("PASSWORD", "SECRET", "TOKEN", "API_KEY", "ACCESS_KEY", "CREDENTIAL")


def is_secret_name(name: str) -> bool:
    return any(word in name.upper() for word in SECRET_NAME_WORDS)


def environment_secrets(environ: Mapping[str, str]) -> list[str]:
    """The values of the credential-looking variables in `environ` (to scrub from text that
    nobody checked, such as an unforeseen exception's message)."""
    return [v for k, v in environ.items() if is_secret_name(k) and len(v) >= 4]


def shown(value: object, limit: int = 60) -> str:
    """A value for an error message: its repr, cut at `limit` characters, so a huge or
    hostile value never floods a terminal or a CI log."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret in it replaced by ***, before it reaches a message.

    A server echoes what it was sent in whatever form it had on the wire, so each secret is
    also found in any letter case (a URL's host is lowercased), percent-encoded in whole or
    in part (once or twice), JSON-escaped, and inside base64 at any byte offset (a basic-auth
    header echoed back). Callers pass each raw secret once; the forms are found here.

    And wrapped: a server wraps long lines, so a secret may come back split by whitespace
    or a line break (raw, or JSON-escaped in a body or a value's repr), which a message
    collapsed onto one line would then join by a space that no exact match sees. The text
    is searched a second time with its breaks taken out (_unwrapped).
    """
    unique = frozenset(s for s in secrets if s)
    pattern = _pattern(unique)
    if pattern is None:
        return text
    text = pattern.sub("***", text)
    if _BREAKS.search(text) is None:
        return text
    # A secret with a backslash of its own may hold what looks like an escaped break: it
    # is looked for with raw whitespace taken out only, too.
    for escapes in (True, False) if any("\\" in s for s in unique) else (True,):
        text = _unwrapped(text, unique, escapes)
    return text


def one_line(text: str, secrets: Iterable[str], limit: int | None = None) -> str:
    """`text` scrubbed, on one line, cut at `limit` characters: for a message built from
    what nobody checked (a server's answer, an unforeseen exception). Scrubbed again once
    collapsed, so the text that is shown is the text that was scrubbed."""
    secrets = [s for s in secrets if s]
    joined = " ".join(scrub(text, secrets).split())
    return scrub(joined, secrets)[:limit]


@functools.lru_cache(maxsize=32)
def _pattern(secrets: frozenset[str]) -> re.Pattern[str] | None:
    forms: list[str] = []
    # Longer secrets first: a regex alternation takes the first form that matches.
    for secret in sorted(secrets, key=lambda s: (-len(s), s)):
        forms.extend(_base64_forms(secret))
        forms.append(_spellings(secret))
    return re.compile("|".join(forms), re.IGNORECASE) if forms else None


# A line break a server may put inside a secret it wraps: whitespace as it is, or escaped as
# JSON and a repr write it (`\n`, `\u000a`), once or more (the repr of a JSON body: `\\n`).
_RAW_BREAKS = re.compile(r"\s+")
_BREAKS = re.compile(r"(?:\s|\\+[nrt]|\\+u00(?:0[9adAD]|20))+")
_WRAP_MIN = 8  # a shorter secret is not wrapped by a server, and would match words


def _unwrapped(text: str, secrets: frozenset[str], escapes: bool) -> str:
    """`text` with each secret found in it across breaks replaced by ***: the text is
    searched with its breaks taken out, and each match is mapped back to the stretch of
    `text` it came from, breaks and all. One pass of a compiled pattern (the same one as the
    exact search, when no secret has breaks of its own): a pattern that allowed a break
    between any two characters measured 10-15 times slower to compile, 0.7 s for an Azure
    token."""
    breaks = _BREAKS if escapes else _RAW_BREAKS
    pattern = _folded(frozenset(s for s in secrets if len(breaks.sub("", s)) >= _WRAP_MIN), escapes)
    if pattern is None:
        return text
    kept: list[str] = []
    starts: list[int] = []  # where each kept stretch starts in the folded text
    origins: list[int] = []  # ... and in `text`
    at = size = 0
    for found in [*breaks.finditer(text), None]:
        end = found.start() if found is not None else len(text)
        if end > at:
            kept.append(text[at:end])
            starts.append(size)
            origins.append(at)
            size += end - at
        at = found.end() if found is not None else at
    folded = "".join(kept)

    def origin(index: int) -> int:
        k = bisect.bisect_right(starts, index) - 1
        return origins[k] + index - starts[k]

    out: list[str] = []
    at = 0
    for match in pattern.finditer(folded):
        if match.end() > match.start():
            begin, end = origin(match.start()), origin(match.end() - 1) + 1
            out += [text[at:begin], "***"]
            at = end
    return "".join([*out, text[at:]]) if out else text


@functools.lru_cache(maxsize=32)
def _folded(secrets: frozenset[str], escapes: bool) -> re.Pattern[str] | None:
    """The pattern for `secrets` as they read in a text whose breaks were taken out: the
    exact search's own when no secret has a break (the usual: a token), else each secret's
    words with nothing, `+` or %20 between them (how its spaces were sent), and its base64
    forms, whose breaks the text lost too."""
    breaks = _BREAKS if escapes else _RAW_BREAKS
    if not any(breaks.search(s) for s in secrets):
        return _pattern(secrets)
    forms: list[str] = []
    for secret in sorted(secrets, key=lambda s: (-len(s), s)):
        forms.extend(_base64_forms(secret))
        words = [w for w in breaks.split(secret) if w]
        forms.append(r"(?:\+|%(?:25)?20)?".join(_spellings(w) for w in words))
    return re.compile("|".join(forms), re.IGNORECASE) if forms else None


def _spellings(secret: str) -> str:
    """A pattern for `secret` with each character as itself, percent-encoded (%XX or %25XX,
    hex in either case), `+` for a space, or JSON-escaped."""
    pieces = []
    for char in secret:
        ways = [re.escape(char), "".join(f"%(?:25)?{byte:02x}" for byte in char.encode())]
        if char == " ":
            ways.append(r"\+")
        if ord(char) < 0x10000:
            ways.append(re.escape(f"\\u{ord(char):04x}"))
        if char in '"\\/':
            ways.append(re.escape("\\" + char))
        pieces.append("(?:" + "|".join(ways) + ")")
    return "".join(pieces)


_B64_MIN = 4  # shorter fragments would match ordinary words


def _base64_forms(secret: str) -> list[str]:
    """`secret` in standard and URL-safe base64: whole, and at each of the three byte
    offsets it can have inside a longer encoded string (`user:password`), keeping only the
    characters that depend on the secret's bytes alone. Exact case: base64 is case-sensitive."""
    import base64

    data = secret.encode()
    found: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        found.add(encode(data).decode("ascii").rstrip("="))
        for offset in (0, 1, 2):
            padded = b"\0" * offset + data
            whole = len(padded) - len(padded) % 3
            # The first group's characters that mix in the bytes before the secret go.
            found.add(encode(padded[:whole]).decode("ascii")[(0, 2, 3)[offset] :])
    usable = sorted((f for f in found if len(f) >= _B64_MIN), key=lambda f: (-len(f), f))
    return [f"(?-i:{re.escape(f)})" for f in usable]
