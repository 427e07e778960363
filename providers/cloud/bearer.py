"""What the Azure and GCP account fetchers share: one bearer token for one API, a client of
its own for each concurrent call (HttpClient is not thread-safe), and errors scrubbed of the
token before they leave (a server may quote it back in a payload the reader then names)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from providers.cloud.http import CloudHttp, RetryPolicy
from providers.core.errors import ShoalError, scrub

if TYPE_CHECKING:
    import httpx


class BearerApi:
    """`provider` names the cloud in errors; `auth_hint` says how to fix a refused token.
    `account` is what the cache keys answers by (a subscription, a project: never a secret)."""

    provider: str
    auth_hint: str

    def __init__(
        self,
        *,
        token: str,
        account: str,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        max_pages: int,
    ) -> None:
        self.token = token
        self.account = account
        self.policy = policy
        self.transport = transport
        self.max_pages = max_pages

    def _http(self) -> CloudHttp:
        return CloudHttp(
            self.provider,
            auth_hint=self.auth_hint,
            secrets=[self.token],
            policy=self.policy,
            transport=self.transport,
        )

    @contextmanager
    def _scrubbed(self) -> Iterator[None]:
        try:
            yield
        except ShoalError as exc:
            exc.args = (scrub(str(exc), [self.token]),)
            raise
