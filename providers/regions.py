"""Region name checks shared by providers."""

from __future__ import annotations

from providers.core.errors import UsageError


def check_region(provider: str, name: str, known: list[str]) -> str:
    """Return `name` if the provider has it; otherwise a usage error suggesting close names."""
    if name in known:
        return name
    import difflib

    close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    listed = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
    raise UsageError(
        f"--region {name!r}: provider {provider} has no such region{hint} (known: {listed})"
    )
