"""The token side of GCP credentials (credentials.py finds them, grants.py says how each
kind buys a token): `GcpCredentials`, which hands out a current access token; the token's
keeping, in memory for the process and in `STATE/gcp-tokens.json`; and `exchange`, one
request to a token endpoint whose refusal is named without a secret.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from providers.core import urls
from providers.core.env import ENV_GCP_PROJECT
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

PROVIDER = "gcp"
SCOPE = "https://www.googleapis.com/auth/cloud-platform"
CACHE_FILE = "gcp-tokens.json"
EXPIRY_MARGIN = 225.0  # google-auth's REFRESH_THRESHOLD (3 min 45 s)
MAX_FILE_BYTES = 1 << 20  # a key file is ~2.3 KB; a larger "credentials file" is not one
MAX_ANSWER_BYTES = 1 << 20  # a token answer is ~1-2 KB
_CACHED_AT_MOST = 64  # entries in the token file: one per credentials file used lately


@dataclass(frozen=True)
class Token:
    value: str
    expires: float  # seconds since the epoch

    def fresh(self, now: float) -> bool:
        return self.expires - EXPIRY_MARGIN > now


# One per process: every GcpCredentials of the same file shares its token (the account
# reads and the price fetcher of one `offers` run), and one lock makes concurrent readers
# (the account reads run on threads) wait for one exchange instead of each making one.
_MEMORY: dict[str, Token] = {}
_FAILED: dict[str, tuple[float, ShoalError]] = {}  # the last failed exchange: when it ended
_LOCK = threading.Lock()


@dataclass(eq=False, repr=False)  # no repr: it would show the token
class GcpCredentials:
    """Credentials found by `find_credentials`: `where` they came from (for messages: a
    variable and a path, never a value), their `kind`, the `project` they name (a key's
    project_id) and the `quota_project` they bill. `token()` gives a current access token,
    `renew(stale)` a new one after a 401."""

    where: str
    kind: str
    project: str = ""
    quota_project: str = ""
    static: str = ""  # SHOAL_GCP_TOKEN: used as it is, never renewed
    mint: Callable[[], Token] | None = None
    cache_key: str = ""
    cache: TokenFile | None = None
    metadata_url: str = ""  # the metadata server's base, when it gives these credentials

    def token(self) -> str:
        if self.mint is None:
            return self.static
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
        since `asked`) waited for the lock: the account reads ask on five threads at once,
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
        sent = {"Authorization": f"Bearer {token}"}
        if self.quota_project:
            sent["x-goog-user-project"] = self.quota_project
        return sent

    def wire(self, http: HttpClient) -> None:
        """`http` sends these credentials on every request and renews the token on a 401,
        once: the headers it is given are asked again at each attempt."""
        used = [""]

        def credentials() -> dict[str, str]:
            used[0] = self.token()
            return self.headers(used[0])

        http.credentials = credentials
        http.refresh = lambda: self.renew(used[0])

    def hint(
        self,
        project: str,
        project_from: str,
        permissions: str,
        *,
        role: str = "roles/compute.viewer",
        doing: str = "read Compute Engine",
    ) -> str:
        """How to fix a refused Compute Engine call (the API's 401/403)."""
        held = role if permissions in ("", role) else f"{role} ({permissions})"
        return (
            f"the credentials from {self.where} were refused or may not {doing} in project "
            f"{project!r} (from {project_from}); grant them {held}, fix them, or set "
            f"{ENV_GCP_PROJECT} to another project"
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
    body: Any = None,
    headers: Mapping[str, str] | None = None,
    raw: bool = False,
    not_found_refused: bool = False,
) -> dict[str, Any]:
    """One request to a token endpoint: its JSON object (or {"raw": bytes} with `raw`).
    A refusal (400/401/403, and 404 with `not_found_refused`) is a CredentialsError naming
    `what` was refused and the `fix`; another 4xx a ConfigError naming the `place` the URL
    came from; no answer a ProviderUnreachableError (69) saying the same. Every text the
    server sent is scrubbed of `secrets` (and of the headers' credentials) first. Redirects
    are not followed: a token request's body goes where the file said, nowhere else."""
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
        response = http.request(method, url, content=content, body=body, headers=sent, ok=_READ)
    except ProviderUnreachableError as exc:
        raise ProviderUnreachableError(f"{exc} (the URL is {place})") from None
    except ConfigError as exc:
        raise ConfigError(f"{exc} (the URL is {place})") from None
    finally:
        http.close()
    code = response.status_code
    scrub = [*hidden, *http.secrets]
    if code in (400, 401, 403) or (code == 404 and not_found_refused):
        told = one_line(error_said(response.content), scrub, 200)
        told = f": {told}" if told else ""
        raise CredentialsError(f"gcp: {what} was refused by {shown} (HTTP {code}{told}); {fix}")
    if code != 200:
        raise ConfigError(f"gcp: {shown} ({place}) answered HTTP {code}, not a token; fix the URL")
    if raw:
        return {"raw": response.content}
    try:
        doc = json.loads(response.content)
    except (ValueError, RecursionError):
        doc = None
    if not isinstance(doc, dict):
        raise ShoalError(f"gcp: {shown} ({place}) answered something other than a JSON object")
    return doc


# The answers read here; 429 is not among them, so that the client retries it (then 75).
_READ = frozenset({200, *range(400, 429), *range(430, 500)})


def error_said(raw: bytes) -> str:
    """What an error answer says: OAuth's `error` and `error_description` (RFC 6749 5.2), or
    a Google API's `error.status` and `error.message`; else its text."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return raw[:2000].decode("utf-8", "replace")
    if not isinstance(doc, dict):
        return ""
    error = doc.get("error")
    if isinstance(error, dict):
        parts = [error.get("status"), error.get("message")]
    else:
        parts = [error, doc.get("error_description")]
    return ": ".join(p for p in parts if isinstance(p, str) and p)


def access_token(got: Mapping[str, Any], url: str) -> Token:
    """RFC 6749 5.1's answer: access_token and expires_in (seconds; a string from some
    servers, as google-auth allows; an hour when absent)."""
    value, lifetime = got.get("access_token"), got.get("expires_in", 3600)
    if isinstance(lifetime, str) and lifetime.isdigit():
        lifetime = int(lifetime)
    if not usable(value) or isinstance(lifetime, bool) or not isinstance(lifetime, int | float):
        raise ShoalError(
            f"gcp: {urls.display(url)} answered without a usable access_token and expires_in; "
            "nothing was used from it"
        )
    assert isinstance(value, str)
    return Token(value, time.time() + min(max(float(lifetime), 0.0), 86400.0))


def usable(value: object) -> bool:
    """A token that can travel in a header: printable ASCII, no space."""
    return isinstance(value, str) and 0 < len(value) <= 8192 and all("!" <= c <= "~" for c in value)


# -- the token file ----------------------------------------------------------------------


@dataclass
class TokenFile:
    """Access tokens and their expiry by credentials, in one small JSON file of mode 0600
    under shoal's state directory. A cache: a file that cannot be read or written is as if
    empty, never an error; writes are whole (a temporary file renamed over it)."""

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
