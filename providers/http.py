"""httpx, imported without its command-line module.

`import httpx` also imports `httpx._main` (its CLI) whenever click and rich are installed,
which they always are beside shoal: about 50 ms of every process that makes a request, for
code that never runs. Marking the module absent makes httpx take its own fallback. Import
httpx through here (`from providers.http import httpx`) inside the functions that need it.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

import httpx  # noqa: E402

__all__ = ["httpx"]
