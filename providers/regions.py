"""Region name checks shared by providers."""

from __future__ import annotations

import re

from providers.core.errors import UsageError

# What every cloud's region names look like (us-east-1, eastus, us-central1): a region is
# put into API hosts and paths, so anything else (`x@host/`, `../x`, non-ASCII) is refused
# before a request could carry credentials somewhere else.
_REGION_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def region_name(name: str, where: str = "--region") -> str:
    """`name` if it has the shape of a cloud region's name; a usage error otherwise."""
    if len(name) <= 64 and _REGION_NAME.match(name):
        return name
    from providers.core.errors import shown

    raise UsageError(
        f"{where} {shown(name)}: not a region name (lowercase letters, digits and dashes, "
        "e.g. us-east-1, eastus, us-central1)"
    )


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
