import subprocess
import sys

PROBE = """
import sys
from providers.http import httpx
loaded = sys.modules.get("httpx._main") is not None
print(loaded, "click" in sys.modules, hasattr(httpx, "Client"))
"""


def test_httpx_comes_without_its_command_line_module() -> None:
    # Run in a fresh interpreter: this test session may have imported httpx already.
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True"]
