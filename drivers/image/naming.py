"""Image names and versions from URLs, as the spec says, and the checks on them."""

from __future__ import annotations

import re
from urllib.parse import unquote

from providers.core.errors import UsageError
from providers.core.urls import UrlError, display, has_userinfo, parse

# Longest first, so `.tar.gz` wins over `.gz`.
ARCHIVE_EXTENSIONS = (
    ".tar.gz",
    ".tar.xz",
    ".tar.bz2",
    ".tar.zst",
    ".tar.zstd",
    ".tgz",
    ".txz",
    ".tbz2",
    ".tbz",
    ".tzst",
    ".tar",
    ".gz",
    ".xz",
    ".bz2",
    ".zst",
)
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+~-]*$")


def file_name(url: str) -> str:
    try:
        path = parse(url, userinfo=True, spaces=True).path
    except UrlError:
        return ""  # check_url names what is wrong with it
    return unquote(path.rsplit("/", 1)[-1])


def strip_extension(name: str) -> str:
    lower = name.lower()
    for ext in ARCHIVE_EXTENSIONS:
        if lower.endswith(ext) and len(name) > len(ext):
            return name[: -len(ext)]
    return name


def split_name_version(url: str) -> tuple[str, str]:
    """`https://h/x/ubuntu-base-22.04.tar.xz` -> (`ubuntu-base`, `22.04`)."""
    return split_file_name(file_name(url))


def split_file_name(file: str) -> tuple[str, str]:
    """`ubuntu-base-22.04.tar.xz` -> (`ubuntu-base`, `22.04`)."""
    stem = strip_extension(file)
    name, sep, version = stem.rpartition("-")
    if not sep or not name or not version:
        raise UsageError(
            f"cannot derive name and version from {file!r} (expected NAME-VERSION.EXT); "
            "pass --name and --version"
        )
    return name, version


def check_component(value: str, field: str) -> str:
    if not _SAFE.fullmatch(value) or ".." in value:  # match() would let "x\n" through
        raise UsageError(
            f"{field} {value!r} must be letters, digits and . _ + ~ - (no slashes, no leading dot)"
        )
    return value


def check_url(url: str) -> str:
    """The URL argument of `image pull`, checked before anything reads it."""
    if has_userinfo(url):  # first: the message below would echo them
        raise UsageError("URL must not carry credentials; use --user and --password-stdin")
    try:
        parse(url)
    except UrlError as exc:
        raise UsageError(
            f"URL argument {display(url)!r} must be an http:// or https:// address: {exc}"
        ) from None
    return url
