"""URLs as they may be shown: never user info, query strings (signed URLs, API keys) or
fragments."""

from __future__ import annotations

from urllib.parse import urlsplit


def display(url: str) -> str:
    """A URL safe to print: no user info, no query string, no fragment."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return f"{parts.scheme}://{host}{parts.path}"


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: credentials go only
    where this is the same as for the URL they were given for."""
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), port
