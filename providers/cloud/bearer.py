"""What the Azure and GCP account fetchers share: one bearer token for one API, a client of
its own for each concurrent call (HttpClient is not thread-safe), errors scrubbed of the
token before they leave (a server may quote it back in a payload the reader then names),
and the bounds on what one answer may cost.

Bounds: a JSON object is what costs memory once a page is parsed (a dict, then a record,
then the cache's copy), so pages are counted in objects before they are parsed (their `{`:
an upper bound, a brace inside a string counts too). A page of more than MAX_PAGE_OBJECTS,
a list whose pages hold more than MAX_LIST_OBJECTS together, or an answer of more than
MAX_ANSWER_BYTES is refused with a one-line error naming the document and the limit.
Real answers are far below: an Azure region's usages are ~300 objects, GCP's regions.list
(every region's quotas, one page) ~10,000, a reservation list a few per reservation. (A
64 MiB usages page of 1.34 M entries once took 2 GB and 37 s to read, and its cache 810 MB.)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Protocol

from providers.cloud.http import CloudHttp, RetryPolicy
from providers.core.errors import ShoalError, one_line

if TYPE_CHECKING:
    import httpx

    from providers.core.http.client import Body, HttpClient

MAX_PAGE_OBJECTS = 50_000
MAX_LIST_OBJECTS = 100_000
MAX_ANSWER_BYTES = 16 << 20


class TokenSource(Protocol):
    """Tokens that expire and are renewed (GCP's Application Default Credentials,
    providers/gcp/credentials.py): `token()` a current one, `wire(http)` makes a client send
    it and renew it after a 401."""

    def token(self) -> str: ...

    def wire(self, http: HttpClient) -> None: ...


class BearerApi:
    """`provider` names the cloud in errors; `auth_hint` says how to fix a refused token.
    `account` is what the cache keys answers by (a subscription, a project: never a secret).
    With `tokens` set, the token is theirs: asked for at its first use (not when the fetcher
    is made, which a cached answer needs too) and renewed on a 401."""

    provider: str
    auth_hint: str
    tokens: TokenSource | None = None

    def __init__(
        self,
        *,
        token: str,
        account: str,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        max_pages: int,
    ) -> None:
        self._token = token
        self.account = account
        self.policy = policy
        self.transport = transport
        self.max_pages = max_pages

    @property
    def token(self) -> str:
        return self.tokens.token() if self.tokens is not None else self._token

    def _http(self) -> CloudHttp:
        http = CloudHttp(
            self.provider,
            auth_hint=self.auth_hint,
            secrets=[self.token],
            policy=self.policy,
            transport=self.transport,
        )
        http.max_bytes = MAX_ANSWER_BYTES
        if self.tokens is not None:
            self.tokens.wire(http)
        return http

    @staticmethod
    def _bounded(body: Body, where: str, what: str, so_far: int = 0) -> int:
        """`so_far` plus the JSON objects of this page of `what`: refused, before it is
        parsed, past a page's or a list's bound."""
        count = body.raw.count(b"{")
        if count > MAX_PAGE_OBJECTS:
            raise ShoalError(
                f"{where}: the {what} page holds more than {MAX_PAGE_OBJECTS:,} JSON objects, "
                "the most shoal reads in one page (a real one holds a few thousand at most); "
                "nothing was cached from it"
            )
        if so_far + count > MAX_LIST_OBJECTS:
            raise ShoalError(
                f"{where}: the {what} list holds more than {MAX_LIST_OBJECTS:,} JSON objects "
                "over its pages, the most shoal reads in one list; stopped, nothing was cached "
                "from it"
            )
        return so_far + count

    @contextmanager
    def _scrubbed(self) -> Iterator[None]:
        try:
            yield
        except ShoalError as exc:
            exc.args = (one_line(str(exc), [self.token]),)
            raise
