"""Where the drivers keep their state, under the kernel's state dir (the kernel's settings
know the directories, not what the drivers put in them)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from providers.core.settings import Paths

LEDGER_FILE = "ledger.sqlite"
WORKSPACES = "workspaces"


def ledger_file(paths: Paths) -> Path:
    return paths.state_dir / LEDGER_FILE


def workspaces_dir(paths: Paths) -> Path:
    return paths.state_dir / WORKSPACES
