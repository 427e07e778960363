"""The token side of Azure credentials (credentials.py finds them, grants.py says how each
kind buys a token): `AzureCredentials`, which hands out a current access token for Azure
Resource Manager; the token's keeping, in memory for the process and in
`STATE/azure-tokens.json`; and `exchange`, one request to a token endpoint whose refusal is
named without a secret.

(GCP's providers/gcp/tokens.py keeps its tokens the same way; each cloud has its own file,
margin and wording, and neither imports the other.)
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from providers.core import urls
from providers.core.env import ENV_AZURE_SUBSCRIPTION_ID, ENV_AZURE_TOKEN
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    ProviderUnreachableError,
    ShoalError,
    one_line,
)

if TYPE_CHECKING:
    from providers.cloud.http import RetryPolicy
    from providers.core.http.client import HttpClient

PROVIDER = "azure"
# Azure Resource Manager: the resource a managed identity and the CLI are asked for, and
# its `.default` scope for the client credentials grant (Microsoft identity platform v2.0).
RESOURCE = "https://management.azure.com/"
SCOPE = RESOURCE + ".default"
CACHE_FILE = "azure-tokens.json"
EXPIRY_MARGIN = 300.0  # azure-core's bearer policy renews 5 minutes before expiry
MAX_FILE_BYTES = 1 << 20  # a certificate or federated token is a few KB
MAX_ANSWER_BYTES = 1 << 20  # a token answer is ~2-4 KB
_CACHED_AT_MOST = 64  # entries in the token file: one per identity used lately


@dataclass(frozen=True)
class Token:
    value: str
    expires: float  # seconds since the epoch

    def fresh(self, now: float) -> bool:
        return self.expires - EXPIRY_MARGIN > now


# One per process: every AzureCredentials of the same identity shares its token (the account
# reads and the price fetcher of one `offers` run), and one lock makes concurrent readers
# (the account reads run on threads) wait for one exchange instead of each making one.
_MEMORY: dict[str, Token] = {}
_FAILED: dict[str, tuple[float, ShoalError]] = {}  # the last failed exchange: when it ended
_LOCK = threading.Lock()
_SWITCH = threading.Lock()  # a fallback taking its credentials' place


@dataclass(eq=False, repr=False)  # no repr: it would show the token
class AzureCredentials:
    """Credentials found by `find_credentials`: `where` they came from (for messages: a
    variable, a path, a client or tenant id, never a secret) and their `kind` (token,
    client_secret, client_certificate, workload_identity, managed_identity, azure_cli).
    `token()` gives a current access token for Azure Resource Manager, `renew(stale)` a new
    one after a 401. `fallback`: the credentials to use instead when these turn out to be
    unavailable at the first token (an Azure VM without a managed identity, then the Azure
    CLI's login, as DefaultAzureCredential moves on)."""

    where: str
    kind: str
    static: str = ""  # SHOAL_AZURE_TOKEN: used as it is, never renewed
    mint: Callable[[], Token] | None = None
    cache_key: str = ""
    cache: TokenFile | None = None
    fallback: AzureCredentials | None = None

    def token(self) -> str:
        if self.mint is None:
            return self.static
        tried = self.mint
        try:
            return self._current()
        except (CredentialsError, ProviderUnreachableError):
            self._take_fallback()
            if self.mint is tried:  # no fallback (or it is the one that failed)
                raise
            return self._current()

    def _current(self) -> str:
        asked = time.monotonic()
        with _LOCK:
            now = time.time()
            held = _MEMORY.get(self.cache_key)
            if held is None or not held.fresh(now):
                held = self.cache.get(self.cache_key, now) if self.cache is not None else None
                if held is None:
                    held = self._minted(asked)
                _MEMORY[self.cache_key] = held
            return held.value

    def _take_fallback(self) -> None:
        """The fallback stands in for these credentials from now on (once: another thread
        may have made it so already)."""
        with _SWITCH:
            fallback, self.fallback = self.fallback, None
            if fallback is not None:
                self.where, self.kind, self.static = fallback.where, fallback.kind, fallback.static
                self.cache_key, self.cache = fallback.cache_key, fallback.cache
                self.mint = fallback.mint

    def renew(self, stale: str) -> bool:
        """A new token in place of `stale`, which was refused (401): true when there is one
        (another thread may have renewed it already), false for a token that cannot be."""
        if self.mint is None:
            return False
        asked = time.monotonic()
        with _LOCK:
            held = _MEMORY.get(self.cache_key)
            if held is not None and held.value != stale and held.fresh(time.time()):
                return True
            # The stale token stays until a new one is had: a failed exchange leaves it for
            # the scrubbing of the error, rather than a second exchange to fill the gap.
            _MEMORY[self.cache_key] = self._minted(asked)
            return True

    def _minted(self, asked: float) -> Token:
        """A new token, or the error of the exchange that ended while this caller (asking
        since `asked`) waited for the lock: the account reads ask on several threads at once,
        and each would otherwise wait out the same retries again."""
        assert self.mint is not None
        failed = _FAILED.get(self.cache_key)
        if failed is not None and failed[0] >= asked:
            raise type(failed[1])(str(failed[1]))
        try:
            made = self.mint()
        except ShoalError as exc:
            _FAILED[self.cache_key] = (time.monotonic(), exc)
            raise
        _FAILED.pop(self.cache_key, None)
        if self.cache is not None:
            self.cache.put(self.cache_key, made)
        return made

    def headers(self, token: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    def wire(self, http: HttpClient) -> None:
        """`http` sends these credentials on every request and renews the token on a 401,
        once: the headers it is given are asked again at each attempt."""
        used = [""]

        def credentials() -> dict[str, str]:
            used[0] = self.token()
            return self.headers(used[0])

        http.credentials = credentials
        http.refresh = lambda: self.renew(used[0])

    def hint(self, subscription: str, subscription_from: str, needs: str) -> str:
        """How to fix a refused Azure Resource Manager call (its 401/403); `needs` says the
        role (and permissions) the call takes, e.g. "the Reader role (...)"."""
        if self.kind == "token":
            return (
                f"set {ENV_AZURE_TOKEN} to a valid bearer token for Azure Resource Manager "
                f"(`az account get-access-token --query accessToken -o tsv`) of an identity "
                f"with {needs} in subscription {subscription!r} (from {subscription_from}), or "
                f"set {ENV_AZURE_SUBSCRIPTION_ID} to another one"
            )
        return (
            f"the credentials from {self.where} were refused or may not do this in "
            f"subscription {subscription!r} (from {subscription_from}); grant them {needs} "
            f"(az role assignment create), fix them, or set {ENV_AZURE_SUBSCRIPTION_ID} to "
            "another subscription"
        )


def forget() -> None:
    """Forget every token and failed exchange this process holds (the token file stays)."""
    with _LOCK:
        _MEMORY.clear()
        _FAILED.clear()


# -- the exchanges -----------------------------------------------------------------------


def exchange(
    method: str,
    url: str,
    *,
    what: str,
    place: str,
    fix: str,
    secrets: Sequence[str],
    policy: RetryPolicy | None,
    form: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One request to a token endpoint: its JSON object. A refusal (400/401/403) is a
    CredentialsError naming `what` was refused and the `fix`; another 4xx a ConfigError
    naming the `place` the URL came from; no answer a ProviderUnreachableError (69) saying
    the same. Every text the server sent is scrubbed of `secrets` (and of the headers'
    credentials) first. Redirects are not followed: a token request's body goes where it
    was configured to go, nowhere else."""
    from providers.cloud.http import CloudHttp

    hidden = [s for s in secrets if s]
    http = CloudHttp(PROVIDER, secrets=hidden, policy=policy)
    http.follow_redirects = False
    http.max_bytes = MAX_ANSWER_BYTES
    sent = dict(headers or {})
    content = None
    if form is not None:
        content = urlencode(form).encode()
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    shown = urls.display(url)
    try:
        response = http.request(method, url, content=content, params=params, headers=sent, ok=_READ)
    except ProviderUnreachableError as exc:
        raise ProviderUnreachableError(f"{exc} (the URL is {place})") from None
    except ConfigError as exc:
        raise ConfigError(f"{exc} (the URL is {place})") from None
    finally:
        http.close()
    code = response.status_code
    scrub = [*hidden, *http.secrets]
    if code in (400, 401, 403):
        told = one_line(error_said(response.content), scrub, 200)
        told = f": {told}" if told else ""
        raise CredentialsError(f"azure: {what} was refused by {shown} (HTTP {code}{told}); {fix}")
    if code != 200:
        raise ConfigError(
            f"azure: {shown} ({place}) answered HTTP {code}, not a token; fix the URL"
        )
    try:
        doc = json.loads(response.content)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        raise ShoalError(f"azure: {shown} ({place}) answered something other than a JSON object")
    return doc


# The answers read here; 429 is not among them, so that the client retries it (then 75).
_READ = frozenset({200, *range(400, 429), *range(430, 500)})


def error_said(raw: bytes) -> str:
    """What an error answer says: OAuth's `error` and `error_description` (RFC 6749 5.2; the
    Microsoft identity platform's description starts with its AADSTS code), or an Azure
    API's `error.code` and `error.message`; else its text."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return raw[:2000].decode("utf-8", "replace")
    if not isinstance(doc, dict):
        return ""
    error = doc.get("error")
    if isinstance(error, dict):
        parts = [error.get("code"), error.get("message")]
    else:
        parts = [error, doc.get("error_description")]
    return ": ".join(p for p in parts if isinstance(p, str) and p)


def access_token(got: Mapping[str, Any], source: str) -> Token:
    """A token answer: `access_token` with `expires_in` (seconds; a string from a managed
    identity endpoint) or `expires_on` (seconds since the epoch, App Service's), else an
    hour. `source` names who answered, for the error."""
    value = got.get("access_token")
    expires = expiry(got.get("expires_in"), got.get("expires_on"))
    if not usable(value) or expires is None:
        raise ShoalError(
            f"azure: {source} answered without a usable access_token and expiry; nothing was "
            "used from it"
        )
    assert isinstance(value, str)
    return Token(value, expires)


def expiry(expires_in: object, expires_on: object) -> float | None:
    """When a token expires, from a lifetime in seconds or a time: seconds since the epoch
    (a number or its digits) or ISO 8601; an hour from now when neither is given; None for
    a value that is none of those. Kept within a day from now."""
    now = time.time()
    when: float | None
    if expires_in is not None:
        seconds = _number(expires_in)
        when = None if seconds is None else now + seconds
    elif expires_on is not None:
        when = _number(expires_on)
        if when is None and isinstance(expires_on, str):
            try:
                when = datetime.fromisoformat(expires_on.strip().replace("Z", "+00:00")).timestamp()
            except ValueError:
                when = None
    else:
        when = now + 3600
    return None if when is None else min(max(when, now), now + 86400.0)


def _number(value: object) -> float | None:
    if isinstance(value, str) and value.strip().isdigit():
        return float(value.strip())
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def usable(value: object) -> bool:
    """A token that can travel in a header: printable ASCII, no space."""
    return (
        isinstance(value, str) and 0 < len(value) <= 16384 and all("!" <= c <= "~" for c in value)
    )


# -- the token file ----------------------------------------------------------------------


@dataclass
class TokenFile:
    """Access tokens and their expiry by identity, in one small JSON file of mode 0600 under
    shoal's state directory. A cache: a file that cannot be read or written is as if empty,
    never an error; writes are whole (a temporary file renamed over it)."""

    path: Path

    def get(self, key: str, now: float) -> Token | None:
        entry = self._load().get(key)
        if not isinstance(entry, dict):
            return None
        value, expires = entry.get("token"), entry.get("expires")
        if not usable(value) or isinstance(expires, bool) or not isinstance(expires, int | float):
            return None
        assert isinstance(value, str)
        held = Token(value, float(expires))
        return held if held.fresh(now) else None

    def put(self, key: str, token: Token | None) -> None:
        now = time.time()
        kept = {
            k: v
            for k, v in self._load().items()
            if k != key
            and isinstance(v, dict)
            and isinstance(v.get("expires"), int | float)
            and v["expires"] > now
        }
        if token is not None:
            kept[key] = {"token": token.value, "expires": round(token.expires, 3)}
        newest = sorted(kept.items(), key=lambda kv: -float(kv[1]["expires"]))[:_CACHED_AT_MOST]
        self._write(dict(newest))

    def _load(self) -> dict[str, Any]:
        try:
            with self.path.open("rb") as handle:
                raw = handle.read(MAX_FILE_BYTES + 1)
            doc = json.loads(raw) if len(raw) <= MAX_FILE_BYTES else None
        except (OSError, ValueError, RecursionError):
            return {}
        return doc if isinstance(doc, dict) else {}

    def _write(self, doc: Mapping[str, Any]) -> None:
        unique = f"{os.getpid()}.{threading.get_ident()}"
        temporary = self.path.with_name(f".{self.path.name}.{unique}")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
            descriptor = os.open(temporary, flags, 0o600)
            with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                os.fchmod(handle.fileno(), 0o600)  # whatever the umask or a leftover file
                json.dump(doc, handle, separators=(",", ":"))
            os.replace(temporary, self.path)
        except OSError:
            with contextlib.suppress(OSError):
                temporary.unlink(missing_ok=True)
