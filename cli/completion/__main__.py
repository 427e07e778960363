"""`python -m cli.completion [DIRECTORY]`: rewrite the completion scripts (completions/)."""

import sys
from pathlib import Path

from cli.completion import write_all

target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parents[2] / "completions"
write_all(target)
