"""The one exit-code table, and the one place errors are mapped to it."""

from __future__ import annotations

from enum import IntEnum

from providers.core import errors


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    UNREACHABLE = 69  # EX_UNAVAILABLE: a provider or engine could not be reached
    RETRYABLE = 75  # EX_TEMPFAIL: no capacity, a timeout, a lock held too long
    CREDENTIALS = 77  # EX_NOPERM: credentials missing or refused
    CONFIG = 78  # EX_CONFIG: config file, SHOAL_HOME, driver config
    INTERRUPTED = 130  # Ctrl-C


# Most specific first: the first class an error is an instance of decides.
_BY_ERROR: tuple[tuple[type[errors.ShoalError], ExitCode], ...] = (
    (errors.UsageError, ExitCode.USAGE),
    (errors.ConfigError, ExitCode.CONFIG),
    (errors.CredentialsError, ExitCode.CREDENTIALS),
    (errors.ProviderUnreachableError, ExitCode.UNREACHABLE),
    (errors.RetryableError, ExitCode.RETRYABLE),
)


def exit_code_for(exc: BaseException) -> ExitCode:
    if isinstance(exc, KeyboardInterrupt):
        return ExitCode.INTERRUPTED
    for kind, code in _BY_ERROR:
        if isinstance(exc, kind):
            return code
    return ExitCode.ERROR
