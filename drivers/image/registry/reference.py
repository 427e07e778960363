"""Image references as docker and podman read them (github.com/distribution/reference).

    reference  := name [":" tag] ["@" digest]
    name       := [domain "/"] path          domain := host [":" port]
    host       := domain-name | "[" IPv6 "]" path   := component ("/" component)*
    component  := [a-z0-9]+ (("." | "_" | "__" | "-"+) [a-z0-9]+)*
    tag        := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}

The first slash-separated part is a registry only when it is `localhost`, or has a `.` or a
`:`, or an uppercase letter (a repository never has one); otherwise the name is on Docker Hub
(`docker.io`), and a one-part name there is an official image under `library/`. A reference
with neither tag nor digest means `:latest`. `docker://` (skopeo's transport) may lead.

Messages quote what was typed (cut short), naming the part at fault and the form it needs;
a reference is never a secret, but `user:password@host/...` (a URL habit) is refused
without quoting it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import Path

from drivers.image.naming import ARCHIVE_EXTENSIONS
from providers.core.errors import UsageError, shown

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"  # where docker.io's API answers
_LEGACY_HUB = "index.docker.io"
_OFFICIAL = "library/"
DEFAULT_TAG = "latest"
TRANSPORT = "docker://"
MAX_PATH = 255  # a repository path's length, as distribution/reference limits it
MAX_TAG = 128
# Digests as the OCI image spec registers them (and as the blob cache stores them).
DIGEST_HEX = {"sha256": 64, "sha512": 128}

_FORM = "write NAME[:TAG] or NAME@sha256:DIGEST, e.g. busybox:1.36 or ghcr.io/owner/app:v1"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[a-fA-F0-9:]+\])"


@functools.cache
def _patterns() -> dict[str, re.Pattern[str]]:
    return {
        "path": re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*"),
        "domain": re.compile(rf"{_HOST}(?::[0-9]+)?"),
        "tag": re.compile(r"[\w][\w.-]*", re.ASCII),
        "identifier": re.compile(r"[a-f0-9]{64}"),
    }


@dataclass(frozen=True)
class Reference:
    """One image: `registry` as written ("docker.io", "host:port", "[::1]:5000"),
    `repository` ("library/busybox"), `tag` ("latest" unless a digest alone was given),
    `digest` ("sha256:...") when pinned; a digest wins over a tag when both are given."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def api_host(self) -> str:
        """host[:port] that serves the registry API."""
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    @property
    def host(self) -> str:
        """The registry's host, without port or IPv6 brackets."""
        return split_host_port(self.api_host)[0]

    @property
    def name(self) -> str:
        return f"{self.registry}/{self.repository}"

    @property
    def shown(self) -> str:
        """The canonical text: docker.io/library/busybox:latest, NAME@sha256:..."""
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{self.name}{tag}{digest}"

    @property
    def familiar(self) -> str:
        """As docker prints it: busybox:latest, owner/app:v1, ghcr.io/o/app:v1."""
        name = self.name
        if self.registry == DOCKER_HUB:
            name = self.repository
            rest = name.removeprefix(_OFFICIAL)
            if rest != name and "/" not in rest:
                name = rest
        tag = f":{self.tag}" if self.tag else ""
        digest = f"@{self.digest}" if self.digest else ""
        return f"{name}{tag}{digest}"

    @property
    def target(self) -> str:
        """What a manifest request names: the digest when pinned, else the tag."""
        return self.digest or self.tag or DEFAULT_TAG

    def with_digest(self, digest: str) -> Reference:
        return Reference(self.registry, self.repository, self.tag, digest)

    def name_for_dir(self) -> str:
        """A file name for this reference: letters, digits and `. _ + ~ -`, starting with a
        letter or digit, one name per reference. `/` becomes `+`, a port's `:` becomes `~`,
        `~` leads the tag and the digest (`~~` when there is no tag), an IPv6 host reads
        `ip6_ADDR_` with its colons as `~`. Past 200 characters the tail is a hash."""
        host, port = split_host_port(self.registry)
        registry = f"ip6_{host.replace(':', '~')}_" if ":" in host else host
        registry += f"~{port}" if port is not None else ""
        text = f"{registry}+{self.repository.replace('/', '+')}~{self.tag or ''}"
        if self.digest:
            text += "~" + self.digest.replace(":", "-")
        if len(text) > 200:
            import hashlib

            text = f"{text[:180]}~{hashlib.sha256(text.encode()).hexdigest()[:16]}"
        return text


def split_host_port(registry: str) -> tuple[str, int | None]:
    """("host", port) of "host[:port]" or "[v6]:port"; the host without brackets."""
    if registry.startswith("["):
        host, _, rest = registry[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = registry.partition(":")
    return host, int(port) if port.isascii() and port.isdigit() else None


def looks_like_reference(text: str) -> bool:
    """Whether `image pull TEXT` names a registry image rather than a URL or a file: true
    for `docker://...`; false for another scheme (`http://`, `file://`, `oci:`...), a path
    that exists, one written as a path (`/`, `./`, `../`, `~`) and a name ending in an
    archive suffix (`.tar.gz`...)."""
    if text.startswith(TRANSPORT):
        return True
    if not text or "://" in text or text.startswith(("/", ".", "~")):
        return False
    scheme, colon, _ = text.partition(":")
    if colon and scheme.lower() in ("file", "oci", "oci-archive", "docker-archive", "dir"):
        return False
    lower = text.lower()
    if any(lower.endswith(ext) for ext in ARCHIVE_EXTENSIONS):
        return False
    try:
        return not Path(text).exists()
    except (OSError, ValueError):  # a name too long for the file system is no file
        return True


def parse_reference(text: str) -> Reference:
    """`text` as docker normalises it (ParseDockerRef, keeping a tag beside a digest), or a
    UsageError naming the part that is wrong and the form it needs."""
    typed = text
    if text.startswith(TRANSPORT):
        text = text[len(TRANSPORT) :]
    if not text:
        raise UsageError(f"image reference {shown(typed)} names no image; {_FORM}")
    if not text.isascii() or not text.isprintable() or " " in text:
        raise UsageError(
            f"image reference {shown(typed)} has a space, a control or a non-ASCII "
            f"character; {_FORM}"
        )
    at = text.find("@")
    if at >= 0 and "/" in text[at:]:
        # user:password@host/name, written as in a URL: never quoted back.
        raise UsageError(
            "an image reference carries no user or password (NAME@ must be followed by a "
            "digest); give them with --user and --password-stdin"
        )
    remainder, _, digest = text.partition("@")
    if _patterns()["identifier"].fullmatch(remainder) and not digest:
        raise UsageError(
            f"image reference {shown(typed)} is a 64-digit image ID, not a name; pull "
            "NAME@sha256:ID instead"
        )
    registry, path_and_tag = _split_registry(remainder)
    path, colon, tag = path_and_tag.partition(":")
    if remainder.startswith("[") and registry is None:
        raise UsageError(
            f"image reference {shown(typed)} names a registry but no repository; write "
            "REGISTRY/NAME[:TAG], e.g. [::1]:5000/app:v1"
        )
    if registry is not None:
        _check_registry(registry, typed)
    else:
        registry = DOCKER_HUB
    if registry == _LEGACY_HUB:
        registry = DOCKER_HUB
    _check_path(path, typed)
    if registry == DOCKER_HUB and "/" not in path:
        path = _OFFICIAL + path
    if len(path) > MAX_PATH:
        raise UsageError(
            f"image reference {shown(typed)}: the repository {shown(path, 40)} is "
            f"{len(path)} characters; at most {MAX_PATH}"
        )
    if colon:
        _check_tag(tag, typed)
    if digest or text.endswith("@"):
        _check_digest(digest, typed)
    return Reference(
        registry=registry,
        repository=path,
        tag=tag if colon else (None if digest else DEFAULT_TAG),
        digest=digest or None,
    )


def _split_registry(name: str) -> tuple[str | None, str]:
    """(registry or None for Docker Hub, the rest): distribution's splitDockerDomain."""
    first, slash, rest = name.partition("/")
    if not slash:
        return None, name
    if first == "localhost" or any(c in first for c in ".:") or first.lower() != first:
        return first, rest
    return None, name


def _check_registry(registry: str, typed: str) -> None:
    if not _patterns()["domain"].fullmatch(registry):
        raise UsageError(
            f"image reference {shown(typed)}: the registry {shown(registry)} is not a host "
            "name or [IPv6] address with an optional :PORT; e.g. ghcr.io, "
            "localhost:5000, [::1]:5000"
        )
    port = split_host_port(registry)[1]
    if registry.rpartition(":")[2].isdigit() and (port is None or not 0 < port < 65536):
        raise UsageError(
            f"image reference {shown(typed)}: the registry's port is out of range 1-65535"
        )


def _check_path(path: str, typed: str) -> None:
    if not path or path.endswith("/"):
        raise UsageError(f"image reference {shown(typed)} names no repository; {_FORM}")
    if not _patterns()["path"].fullmatch(path):
        if _patterns()["path"].fullmatch(path.lower()):
            raise UsageError(
                f"image reference {shown(typed)}: the repository {shown(path)} must be "
                f"lowercase; write {shown(path.lower())}"
            )
        raise UsageError(
            f"image reference {shown(typed)}: the repository {shown(path)} must be "
            "lowercase letters and digits in parts split by /, each part joined only by "
            "single `.`, `_` or `__`, or dashes (no leading or trailing separator)"
        )


def _check_tag(tag: str, typed: str) -> None:
    if not tag:
        raise UsageError(
            f"image reference {shown(typed)} ends its name with `:` but gives no tag; "
            "add the tag or drop the colon"
        )
    if len(tag) > MAX_TAG:
        raise UsageError(
            f"image reference {shown(typed)}: the tag is {len(tag)} characters; at most {MAX_TAG}"
        )
    if not _patterns()["tag"].fullmatch(tag):
        raise UsageError(
            f"image reference {shown(typed)}: the tag {shown(tag)} may hold only letters, "
            "digits, `_`, `.` and `-`, and must not start with `.` or `-`"
        )


def check_digest(digest: str) -> str:
    """`digest` if it is ALGORITHM:HEX of a registered algorithm (sha256: 64 lowercase hex
    digits, sha512: 128), else a reason for a message."""
    algorithm, colon, hexpart = digest.partition(":")
    if not colon or algorithm not in DIGEST_HEX:
        return "it must be sha256:<64 hex digits> (or sha512:<128>)"
    if len(hexpart) != DIGEST_HEX[algorithm] or not all(c in "0123456789abcdef" for c in hexpart):
        return f"its {algorithm} part must be {DIGEST_HEX[algorithm]} lowercase hex digits"
    return ""


def is_digest(text: str) -> bool:
    return not check_digest(text)


def _check_digest(digest: str, typed: str) -> None:
    problem = check_digest(digest)
    if problem:
        raise UsageError(
            f"image reference {shown(typed, 100)}: the digest after `@` is not one: "
            f"{problem}, e.g. busybox@sha256:{'0' * 64}"
        )
