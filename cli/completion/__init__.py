"""Bash, zsh and fish completion scripts generated from the app's command tree.

`python -m cli.completion` rewrites completions/; a test fails when the committed scripts
differ from what the app generates, so they never go stale.

What the app knows (commands, options, fixed choices) is written into the scripts. What only
the machine knows (allocation ids, configured driver instances, image names) is asked for at
TAB time from `cli.complete_values`, run with the interpreter shoal is installed with (read
from the `shoal` script's #! line) and `-P`, so a `cli/` directory in the user's working
directory is never imported; it imports none of the CLI, so completing never costs what
`shoal` itself costs to start, and `shoal --help` never loads any of it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from cli.completion import bash, fish, zsh

__all__ = ["GENERATORS", "SHELLS", "write_all"]

SHELLS = {"bash": "shoal.bash", "zsh": "_shoal", "fish": "shoal.fish"}  # the file each writes
GENERATORS: dict[str, Callable[[], str]] = {
    "bash": bash.script,
    "zsh": zsh.script,
    "fish": fish.script,
}


def write_all(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for shell, filename in SHELLS.items():
        (directory / filename).write_text(GENERATORS[shell]())
