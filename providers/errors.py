"""Typed errors shared by providers, drivers and the CLI.

Each class says what kind of failure it is; the CLI maps kinds to exit codes in one place
(`cli/exit_codes.py`). Messages are one line, name the field or variable at fault and say
how to fix it. They never carry credentials.
"""

from __future__ import annotations

from collections.abc import Iterable


class ShoalError(Exception):
    """Base of every expected failure: an ordinary error (exit 1)."""


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


def shown(value: object, limit: int = 60) -> str:
    """A value for an error message: its repr, cut at `limit` characters, so a huge or
    hostile value never floods a terminal or a CI log."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret in it replaced by ***, before it reaches a message."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text
