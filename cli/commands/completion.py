"""`completion SHELL`: print the shell's completion script (pip installs no shell files)."""

from enum import StrEnum
from typing import Annotated

import typer


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(
    shell: Annotated[
        Shell, typer.Argument(help="bash, zsh or fish.", show_default=False, metavar="SHELL")
    ],
) -> None:
    """Print a shell's completion script (bash, zsh, fish).

    The same script as the repository's completions/ directory: commands, options and their
    fixed values are in it; allocation ids, driver instances and image names are asked for
    at TAB time.

    \b
    Examples:
      shoal completion bash > ~/.local/share/bash-completion/completions/shoal
      shoal completion zsh > "${fpath[1]}/_shoal"
      shoal completion fish > ~/.config/fish/completions/shoal.fish
    """
    import sys

    from cli.completion import GENERATORS

    sys.stdout.write(GENERATORS[shell.value]())
