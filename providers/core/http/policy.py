"""What an HTTP client is told as data: when to retry (RetryPolicy), and what each failure
means for one API (ErrorMap: an HTTP status or a Kind of failure -> error class + template).
Templates see the fields of `Failure` (what a server sent, scrubbed), `where` (the map's own
template), `status` (`HTTP 403 Forbidden`), `said` (the API's message, in the map's `said`
format, or nothing) and the map's `fields`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from providers.core.errors import ProviderUnreachableError, ShoalError

# Answers worth asking for again: the server may well answer otherwise in a moment.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class Kind:
    """Failures that are not an HTTP status."""

    UNREACHABLE = "unreachable"  # no answer after the last attempt (connection, TLS, protocol)
    TIMEOUT = "timeout"  # the same by a timeout: UNREACHABLE unless a map says otherwise
    DENIED = "denied"  # a local socket we may not open: never retried; else UNREACHABLE
    INVALID_URL = "invalid URL"  # one that no request can be made to
    LOCATION = "Location"  # a redirect whose Location cannot be followed
    JSON = "JSON"  # a body that is not JSON, or nested too deep to decode
    DROPPED = "dropped"  # a body whose connection dropped mid-way, on every attempt
    CUT = "cut"  # a stream that broke off and cannot go on
    BROKEN = "broken"  # anything else a server got wrong: a redirect loop, a body too large


_FALLBACK = {Kind.TIMEOUT: Kind.UNREACHABLE, Kind.DENIED: Kind.UNREACHABLE}


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4
    backoff_seconds: float = 0.5
    max_delay_seconds: float = 8.0
    jitter: float = 0.5  # up to this share of each backoff is taken off at random
    connect_timeout_seconds: float = 10.0
    read_timeout_seconds: float = 60.0
    statuses: frozenset[int] = RETRY_STATUSES
    errors: tuple[str, ...] = ("TransportError",)  # httpx's exceptions retried (and OSError)

    def delay(self, attempt: int, after: str = "", draw: float = 0.0, now: float = 0) -> float:
        """Seconds before retry `attempt` (0 first): the base doubled per retry, less up to
        `jitter` of it (`draw` is random in [0, 1)), at least the Retry-After header `after`
        (seconds, or a date measured from `now`), never more than the cap."""
        delay = self.backoff_seconds * 2.0 ** min(attempt, 64) * (1 - self.jitter * draw)
        return float(min(self.max_delay_seconds, max(delay, _seconds(after.strip(), now))))


def _seconds(retry_after: str, now: float) -> float:
    if retry_after.isascii() and retry_after.isdigit():
        return float(retry_after)
    from email.utils import parsedate_to_datetime

    try:
        return parsedate_to_datetime(retry_after).timestamp() - now
    except (TypeError, ValueError):  # absent or unreadable
        return 0.0


@dataclass(frozen=True)
class Failure:
    kind: int | str  # the HTTP status, or a Kind
    method: str = ""
    target: str = ""  # what was asked for, as the caller named it (a URL or a path)
    url: str = ""  # where the failure happened (after redirects)
    code: int = 0  # the HTTP status, when there was one
    reason: str = ""  # the reason phrase (or the API's own), or why a URL is unusable
    message: str = ""  # the API's own error message
    attempts: int = 0
    error: str = ""  # the exception (`Name: text`), or what the server got wrong
    error_name: str = ""
    location: str = ""  # where an unfollowed 3xx answer points: `to URL`
    elsewhere: bool = False  # answered by an origin not asked (so sent no credentials)


@dataclass(frozen=True)
class Rule:
    """`on`: statuses (an int, a range, a collection) or Kinds; `when` narrows it down."""

    on: int | str | Collection[int | str]
    error: type[ShoalError]
    template: str
    when: Callable[[Failure], bool] | None = None

    def matches(self, failure: Failure, kind: int | str) -> bool:
        on = self.on
        hit = kind == on if isinstance(on, (int, str)) else kind in on
        return hit and (self.when is None or self.when(failure))


# What every map means unless it says otherwise.
DEFAULT_RULES = (
    Rule(Kind.UNREACHABLE, ProviderUnreachableError, "{where}: {error} after {attempts} attempts"),
    Rule(Kind.DROPPED, ProviderUnreachableError, "{where}: the connection dropped mid-body "
         "{attempts} times ({error_name}); try again later"),
    Rule(Kind.CUT, ProviderUnreachableError, "{where}: {error}"),
    Rule(Kind.BROKEN, ShoalError, "{where}: {error}"),
    Rule(Kind.INVALID_URL, ShoalError, "{where}: {reason}"),
    Rule(Kind.JSON, ShoalError, "{where}: malformed JSON ({error})"),
    Rule(Kind.LOCATION, ShoalError, "{where}: HTTP {code} redirect refused, its Location is "
         "unusable: {reason}; the server (or mirror) is misconfigured"),
    Rule(range(100, 600), ShoalError, "{where}: {status}{said}"),
)  # fmt: skip


def no_explanation(body: bytes, reason: str) -> tuple[str, str]:
    return "", ""


@dataclass(frozen=True)
class ErrorMap:
    """One API's failures as typed errors: the first of its `rules` that matches, else of
    DEFAULT_RULES. `explain(body, reason phrase)` reads the API's own (reason, message)
    from the first 64 KiB of an error's body. `throttled`: the API's own reasons (as
    `explain` reads them) that mean "slow down" whatever the status, retried as a 429 is
    (AWS Service Quotas answers ThrottlingException with HTTP 400)."""

    rules: tuple[Rule, ...] = ()
    where: str = "{url}"
    said: str = ": {}"
    fields: Mapping[str, object] = field(default_factory=dict)
    explain: Callable[[bytes, str], tuple[str, str]] = no_explanation
    throttled: frozenset[str] = frozenset()

    def extended(self, *rules: Rule, **fields: object) -> ErrorMap:
        """This map with `rules` before its own, and more `fields`."""
        return dataclasses.replace(
            self, rules=(*rules, *self.rules), fields={**self.fields, **fields}
        )

    def error(self, failure: Failure) -> ShoalError:
        values: dict[str, object] = {**self.fields, **dataclasses.asdict(failure)}
        values["status"] = f"HTTP {failure.code} {failure.reason}".rstrip()
        values["said"] = self.said.format(failure.message) if failure.message else ""
        values["where"] = self.where.format(**values)
        for kind in (failure.kind, _FALLBACK.get(str(failure.kind))):
            for rule in (*self.rules, *DEFAULT_RULES):
                if kind is not None and rule.matches(failure, kind):
                    return rule.error(rule.template.format(**values))
        return ShoalError(str(values["where"]))
