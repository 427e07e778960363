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
