"""A registry image the engine lacks, pulled by the engine itself (POST /images/create), as
`docker run` and `podman run` do.

The credential is the one `shoal image pull` would use (drivers.image.registry.credentials:
SHOAL_IMAGE_USER/PASSWORD, REGISTRY_AUTH_FILE, podman's and docker's auth files and
helpers), handed to the engine as Docker's `X-Registry-Auth` header: base64url of the JSON
AuthConfig, sent only when there is a credential. Without one the engine pulls anonymously
(or with its own logins). The header's value is a secret like the password in it: engines
echo it in some error bodies, so every text the engine sends is scrubbed of it, of its
password and of its token before it is shown.

The engine answers 200 and streams JSON lines (`status`, `id`, `progressDetail`); a failure
after that is an `error`/`errorDetail` line, one before it an HTTP error (Docker). Shown on
stderr as one line per layer and state (`Downloading`, `Download complete`...), not one per
progress event; a failure is one shoal error typed by what the registry said: refused 77,
no such image 1, registry unreachable 69, rate-limited 75, the engine's TLS settings 78.
https://docs.docker.com/reference/api/engine/version/v1.41/#tag/Image/operation/ImageCreate
"""

from __future__ import annotations

import contextlib
import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
    UsageError,
    one_line,
)

if TYPE_CHECKING:
    from drivers.container.engine import Engine
    from drivers.container.engine_http import Response
    from drivers.image.registry.credentials import Credential
    from drivers.image.registry.reference import Reference
    from providers.core.settings import Settings

PATH = "/images/create"
AUTH_HEADER = "X-Registry-Auth"
# Docker's key for Docker Hub in an AuthConfig (as the docker CLI sends it).
DOCKER_HUB_SERVER = "https://index.docker.io/v1/"
# The engine may say nothing for a long while (a large layer being unpacked); a read
# waits this long before the pull is given up as hung.
QUIET_SECONDS = 600.0
LINE_MAX = 1 << 20  # a JSON line longer than this is a broken engine
SAID_MAX = 300  # of the engine's error text, in a message
PEEK_BYTES = 64 << 10  # of an error's body

# What the registry said, as Docker and Podman word it (containers/image, distribution),
# in the order they are told apart: a failure to reach the registry names a host that was
# "not found" too, and Docker Hub's "pull access denied ... does not exist" is a missing
# repository rather than a refused credential.
_PLAIN_HTTP = ("server gave http response to https client",)
_TLS_TRUST = ("x509:", "certificate signed by unknown authority", "tls: failed to verify")
_UNREACHABLE = (
    "dial tcp",
    "connection refused",
    "no such host",
    "i/o timeout",
    "network is unreachable",
    "no route to host",
    "tls handshake timeout",
    "connection reset by peer",
    "context deadline exceeded",
)
_RATE_LIMITED = ("toomanyrequests", "too many requests", "rate limit")
_NOT_FOUND = (
    "manifest unknown",
    "name unknown",
    "not found",
    "does not exist",
    "not known to registry",
    "no such image",
)
_REFUSED = (
    "unauthorized",
    "authentication required",
    "denied",
    "incorrect username or password",
    "invalid username/password",
    "no basic auth credentials",
    "forbidden",
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def pullable(image: str) -> Reference | None:
    """`image` as a registry reference, None for what no registry serves (an image ID, a
    name no registry allows): the engine's own then, or missing."""
    from drivers.image.registry.reference import parse_reference

    if image.startswith("sha256:"):
        return None
    try:
        return parse_reference(image)
    except UsageError:
        return None


def server_address(ref: Reference) -> str:
    return DOCKER_HUB_SERVER if ref.registry == "docker.io" else ref.registry


def auth_header(credential: Credential, ref: Reference) -> str:
    """The X-Registry-Auth value: base64url (padded, as Docker and Podman decode it) of the
    AuthConfig JSON; an identity token goes alone, as the refresh token it is."""
    import base64

    config: dict[str, str]
    if credential.identity_token is not None:
        config = {"identitytoken": credential.identity_token}
    else:
        config = {"username": credential.username, "password": credential.password}
    config["serveraddress"] = server_address(ref)
    raw = json.dumps(config, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode("ascii")


def find(settings: Settings, ref: Reference) -> Credential | None:
    """The credential `shoal image pull` would use for `ref`, from the command's env."""
    from drivers.image.registry.credentials import find_credential

    env = settings.env
    home = Path(env["HOME"]) if env.get("HOME") else Path.home()
    return find_credential(ref.registry, ref.repository, env=env, home=home)


def pull_missing(
    engine: Engine,
    settings: Settings,
    image: str,
    wanted: str,
    *,
    say: Callable[[str], None] | None = None,
) -> bool:
    """Have the engine pull `image` (the user's `wanted`), with progress on stderr. False
    when `image` is no registry reference (nothing to pull: the caller says it is missing);
    a failed pull is the typed error."""
    ref = pullable(image)
    if ref is None:
        return False
    credential = find(settings, ref)
    pull(engine, ref, wanted, credential, say=say or _stderr)
    return True


def pull(
    engine: Engine,
    ref: Reference,
    wanted: str,
    credential: Credential | None,
    *,
    say: Callable[[str], None],
) -> None:
    """POST /images/create?fromImage=REGISTRY/REPOSITORY&tag=TAG-OR-DIGEST, its stream shown
    through `say` a line per change."""
    headers: dict[str, str] = {}
    secrets: list[str] = []
    if credential is not None:
        headers[AUTH_HEADER] = auth_header(credential, ref)
        secrets = [headers[AUTH_HEADER], credential.password, credential.identity_token or ""]
    # The tag always goes: without one the API pulls every tag of the repository. A digest
    # wins over a tag given beside it (docker pulls by the digest then too).
    params = {"fromImage": ref.name, "tag": ref.digest or ref.tag or "latest"}
    failure = Failure(ref, wanted, credential, secrets)
    say(f"{ref.familiar}: not in the container engine; pulling it")
    began = time.monotonic()
    response = engine.open("POST", PATH, params=params, headers=headers, timeout=QUIET_SECONDS)
    with contextlib.closing(response):
        if response.status != 200:
            raise failure.refused(response.status, _body(response), response.reason)
        shown = Shown(ref.familiar, secrets)
        for event in events(engine._pieces(response, "POST", PATH), ref.familiar):
            problem = event.get("errorDetail") or event.get("error")
            if problem:
                if isinstance(problem, dict):
                    problem = problem.get("message") or event.get("error") or problem
                raise failure.said(str(problem))
            line = shown.line(event)
            if line is not None:
                say(line)
    say(f"{ref.familiar}: pulled in {time.monotonic() - began:.1f} s")


def _body(response: Response) -> bytes:
    """The start of an error's body, for the engine's message (which may be cut off)."""
    from drivers.container.engine_http import ProtocolError

    with contextlib.suppress(OSError, ProtocolError):
        return response.read_all(PEEK_BYTES)[:PEEK_BYTES]
    return b""


def events(pieces: Iterable[bytes], name: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of the stream, a line each (a line that is no JSON object is
    skipped: an engine's stray text is no failure of the pull)."""
    pending = b""
    for piece in pieces:
        pending += piece
        *lines, pending = pending.split(b"\n")
        if len(pending) > LINE_MAX:
            raise ShoalError(
                f"container engine: pulling {name}: a progress line longer "
                f"than {LINE_MAX} bytes; the engine's answer is broken"
            )
        for line in lines:
            event = _decode(line)
            if event is not None:
                yield event
    event = _decode(pending)
    if event is not None:
        yield event


def _decode(line: bytes) -> dict[str, Any] | None:
    if not line.strip():
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


class Shown:
    """The progress lines worth a line: a layer's (`id`) state when it changes, any other
    status once. Sizes come from `progressDetail.total` where the engine gives one."""

    def __init__(self, name: str, secrets: list[str]) -> None:
        self.name = name
        self.secrets = secrets
        self.states: dict[str, str] = {}
        self.said: set[str] = set()

    def line(self, event: dict[str, Any]) -> str | None:
        status = event.get("status")
        if not isinstance(status, str) or not status.strip():
            return None
        layer = event.get("id")
        layer = layer if isinstance(layer, str) and layer else None
        if layer is not None:
            if self.states.get(layer) == status:
                return None
            self.states[layer] = status
            text = f"{layer}: {status}{_size(event.get('progressDetail'))}"
        else:
            if status in self.said:
                return None
            self.said.add(status)
            text = status
        return f"{self.name}: {_printable(one_line(text, self.secrets, limit=SAID_MAX))}"


def _size(detail: Any) -> str:
    """ " (12.3 MiB)" for a layer whose size the engine gives."""
    total = detail.get("total") if isinstance(detail, dict) else None
    if not isinstance(total, int) or isinstance(total, bool) or total <= 0:
        return ""
    if total < 1024:
        return f" ({total} B)"
    value = float(total)
    for unit in ("KiB", "MiB", "GiB"):
        value /= 1024
        if round(value, 1) < 1024:
            return f" ({value:.1f} {unit})"
    return f" ({value / 1024:.1f} TiB)"


class Failure:
    """A failed pull as the shoal error that says what to do; the engine's words scrubbed
    of the credential and cut to one line."""

    def __init__(
        self, ref: Reference, wanted: str, credential: Credential | None, secrets: list[str]
    ) -> None:
        self.ref = ref
        self.wanted = wanted
        self.credential = credential
        self.secrets = secrets

    def clean(self, text: str) -> str:
        return _printable(one_line(text, self.secrets, limit=SAID_MAX))

    def refused(self, status: int, body: bytes, reason: str) -> ShoalError:
        """An HTTP error before any stream (Docker's, for what fails at once)."""
        from drivers.container.engine import engine_message

        said = engine_message(body, reason)[1] or reason or f"HTTP {status}"
        typed = self.typed(said)
        if typed is not None:
            return typed
        if status == 404:
            return self._missing(self.clean(said))
        if status in (401, 403):
            return self._denied(self.clean(said))
        return ShoalError(
            f"container engine: pulling {self.ref.familiar} failed: HTTP {status}: "
            f"{self.clean(said)}"
        )

    def said(self, text: str) -> ShoalError:
        """The error for an error line in the stream."""
        typed = self.typed(text)
        if typed is not None:
            return typed
        said = self.clean(text)
        return ShoalError(f"container engine: pulling {self.ref.familiar} failed: {said}")

    def typed(self, text: str) -> ShoalError | None:
        """The error for what the engine (the registry behind it) said, when it is one of
        the failures told apart."""
        said = self.clean(text)
        lowered = said.lower()
        ref = self.ref
        if _has(lowered, _PLAIN_HTTP):
            return ConfigError(
                f"{ref.familiar}: the registry {ref.registry} speaks plain HTTP and the "
                f"container engine wants HTTPS ({said}); mark it insecure in the engine's own "
                f'configuration (Podman: [[registry]] location = "{ref.registry}" with '
                'insecure = true in registries.conf; Docker: "insecure-registries" in '
                "/etc/docker/daemon.json), then restart the engine"
            )
        if _has(lowered, _TLS_TRUST):
            return ConfigError(
                f"{ref.familiar}: the container engine does not trust the certificate of "
                f"{ref.registry} ({said}); put its CA in /etc/containers/certs.d/"
                f"{ref.registry}/ca.crt (Podman) or /etc/docker/certs.d/{ref.registry}/ca.crt "
                "(Docker)"
            )
        if _has(lowered, _UNREACHABLE):
            return ProviderUnreachableError(
                f"{ref.familiar}: the container engine could not reach the registry "
                f"{ref.registry} ({said}); check the name and that the registry is up and "
                "reachable from the engine's host"
            )
        if _has(lowered, _RATE_LIMITED):
            return RetryableError(
                f"{ref.familiar}: the registry {ref.registry} limits pulls right now ({said}); "
                "try again later, or log in for a higher limit"
            )
        if _has(lowered, _NOT_FOUND):
            return self._missing(said)
        if _has(lowered, _REFUSED):
            return self._denied(said)
        return None

    def _missing(self, said: str) -> NotFoundError:
        # Docker Hub answers "denied" for a private repository as for one that does not exist.
        private = ", or log in if it is private" if "denied" in said.lower() else ""
        return NotFoundError(
            f"options.image: {self.wanted!r} is not in the container engine and the registry "
            f"has no {self.ref.familiar} ({said}); check the name and tag{private}, or give an "
            "image dir `shoal image pull` made"
        )

    def _denied(self, said: str) -> CredentialsError:
        ref = self.ref
        if self.credential is not None:
            sent = f"the credential sent was {self.credential.describe()}; check it or log in again"
        else:
            sent = (
                f"no credential for {ref.registry} was found: log in with `podman login` or "
                "`docker login`, set REGISTRY_AUTH_FILE, or SHOAL_IMAGE_USER and "
                "SHOAL_IMAGE_PASSWORD"
            )
        return CredentialsError(f"{ref.familiar}: the registry refused the pull ({said}); {sent}")


def _has(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _printable(text: str) -> str:
    """Terminal control characters shown as escapes: the engine's text must not move the
    cursor or retitle the terminal."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def _stderr(line: str) -> None:
    sys.stderr.write(f"{line}\n")
    sys.stderr.flush()
