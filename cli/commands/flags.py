"""Checks flag values share before any work: an empty one is refused, not read as absent."""

from providers.core.errors import UsageError


def not_empty(value: str | None, flag: str, instead: str) -> str | None:
    """`value` as given; an empty (or blank) one is a usage error naming `flag`. A script's
    unset variable (`--timeout "$T"`) must not turn into the flag left out: no lifetime, a
    wait without a limit, every driver, the local ledger. `instead` says what to give."""
    if value is not None and not value.strip():
        raise UsageError(f"{flag}: empty value; {instead}")
    return value
