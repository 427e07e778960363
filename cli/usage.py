"""The framework's usage errors as one line and one hint (imported only on such an error)."""

from __future__ import annotations

import re
from typing import Any

# Typer adds its own suggestions to click's ("(Did you mean one of: 'a', 'b'?)"), and a
# subgroup's error can carry click's twice: keep the first.
_SUGGESTION = re.compile(r"\(?(?:Did you mean|Possible options)[^?]*\?\)?")


def one_line(exc: Any) -> str:
    """The error's message on one line, with "Did you mean" at most once."""
    text = " ".join(str(exc.format_message()).split())
    found = _SUGGESTION.findall(text)
    if found:
        text = _SUGGESTION.sub("", text).strip()
        text = f"{text} {found[0].strip('()')}"
    text = " ".join(text.split())
    return text[:1].lower() + text[1:]


def hint(exc: Any) -> str:
    """Where to read more: the help of the command the error is about."""
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else "shoal"
    return f"see '{path} -h'"
