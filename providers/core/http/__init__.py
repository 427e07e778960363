"""HTTP for every client here: the one client (client.py), what it is told as data
(policy.py), and httpx, imported without its command-line module.

`import httpx` also imports `httpx._main` (its CLI) whenever click and rich are installed,
which they always are beside shoal: about 50 ms of every process that makes a request, for
code that never runs. Marking the module absent makes httpx take its own fallback; trio
(httpcore's async backend, imported when installed) likewise. Import
httpx through here (`from providers.core.http import httpx`) inside the functions that need it:
importing this package does not import httpx, asking it for `httpx` does.
"""

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx as httpx
else:

    def __getattr__(name: str) -> object:
        if name != "httpx":
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        sys.modules.setdefault("httpx._main", None)
        # httpcore imports trio whenever it is installed (another package may bring it), for
        # an async backend shoal never uses: ~100 ms of every process that makes a request.
        sys.modules.setdefault("trio", None)
        import httpx

        return httpx
