"""Text on a terminal: the cells it takes, shortened or broken to fit a width, and how wide
the terminal is. Shared by the tables and the progress lines, which must agree with what
Rich draws: a width measured one way and padded another would cut a figure or misalign."""

from __future__ import annotations

import os
import re
from typing import Any


def terminal_width(stream: Any) -> int:
    """The columns of the terminal `stream` is on (COLUMNS first, as a shell sets it)."""
    given = os.environ.get("COLUMNS", "")
    if given.isdigit() and int(given) > 0:
        return int(given)
    try:
        return os.get_terminal_size(stream.fileno()).columns or 80
    except (OSError, ValueError):
        return 80


def text_width(text: str) -> int:
    """Terminal cells `text` takes (wide characters two, combining marks none), as Rich
    counts them when it pads a table cell."""
    if text.isascii():
        return len(text)
    from rich.cells import cell_len

    return cell_len(text)


def _char_width(ch: str) -> int:
    if ch.isascii():
        return 1
    from rich.cells import get_character_cell_size

    return get_character_cell_size(ch)


def shorten(text: str, width: int | None) -> str:
    """`text` in at most `width` cells, its end replaced by `…` when it does not fit: at a
    space when one leaves most of the room used (a time or an id in a note stays whole or
    goes whole)."""
    if width is None or text_width(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = _char_width(ch)
        if used + w > width - 1:
            break
        out += ch
        used += w
    space = out.rfind(" ")
    if text[len(out) : len(out) + 1] != " " and space >= width // 2:
        out = out[:space]
    return out.rstrip() + "…"


def wrap(text: str, width: int | None, breaks: str = " ") -> list[str]:
    """`text` in lines of at most `width` cells, broken only after a character of `breaks`
    (a word longer than the width stays whole: it is never cut)."""
    if width is None or text_width(text) <= width:
        return [text]
    pieces = re.findall(rf"[^{re.escape(breaks)}]*(?:[{re.escape(breaks)}]+|$)", text)
    lines: list[str] = []
    current = ""
    for piece in filter(None, pieces):
        if current and text_width(current + piece.rstrip()) > width:
            lines.append(current.rstrip())
            current = ""
        current += piece
    if current.strip():
        lines.append(current.rstrip())
    return lines
