"""moto's server (the `moto[server]` test extra) as a loopback EC2 for the account tests.

`moto_server -H 127.0.0.1 -p 0` binds a free port and logs it ("Running on
http://127.0.0.1:PORT"); the log goes to a file (a pipe nobody reads would fill with its
request log and stall it). Started once per session, reset between tests with
`POST /moto-api/reset`, stopped (its process only) at the end. moto serves
DescribeInstances, RunInstances, DescribeInstanceTypes and DescribeRegions faithfully (its
answers are written from botocore's models); it has no DescribeCapacityReservations and no
ec2 quotas, which tests/providers/aws/quotaserver.py serves. For the aws driver it also
serves TerminateInstances, DescribeImages, CreateImage, GetConsoleOutput,
DescribeInstanceTypeOfferings, DescribeAvailabilityZones, DescribeSubnets and SSM
GetParameter with the public AMI parameters (/aws/service/ami-amazon-linux-latest/...),
and with MOTO_ENABLE_AMI_VALIDATION and MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION refuses an
unknown AMI or type as EC2 does; it keeps no ClientToken idempotency, no capacity limits and
one made-up spot price, which tests/drivers/aws/ec2server.py adds in front of it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_RUNNING = re.compile(r"Running on http://127\.0\.0\.1:(\d+)")


@contextmanager
def moto_server(timeout: float = 30.0, env: dict[str, str] | None = None) -> Iterator[str]:
    """The base URL of a moto server on 127.0.0.1; skips the test when moto is missing.
    `env` adds to its environment (e.g. MOTO_ENABLE_AMI_VALIDATION=true: RunInstances then
    refuses an AMI or instance type it does not know, as EC2 does)."""
    import os

    import pytest

    pytest.importorskip("moto.server", reason="moto[server] is not installed (test extra)")
    # moto_server, run by this interpreter (the one moto was installed for).
    command = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"]
    with tempfile.TemporaryDirectory(prefix="shoal-moto-") as directory:
        log = Path(directory) / "moto.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **(env or {})},
            )
        try:
            base = _wait(process, log, timeout)
            yield base
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)


def _wait(process: subprocess.Popen[bytes], log: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    base = ""
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto_server exited ({process.returncode}): {log.read_text()}")
        found = _RUNNING.search(log.read_text(errors="replace"))
        if found and not base:
            base = f"http://127.0.0.1:{found.group(1)}"
        if base:
            try:
                with urllib.request.urlopen(base + "/moto-api/data.json", timeout=2):
                    return base
            except OSError:
                pass
        time.sleep(0.05)
    raise RuntimeError(f"moto_server did not answer within {timeout} s: {log.read_text()}")


def reset(base: str) -> None:
    """Forget every resource moto holds."""
    request = urllib.request.Request(base + "/moto-api/reset", data=b"", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass
