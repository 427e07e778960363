"""Fixtures for image-pull tests: a real loopback HTTP server."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.drivers.image.server import ImageServer


@pytest.fixture
def http_server() -> Iterator[ImageServer]:
    """A started `ImageServer` on 127.0.0.1 (also reachable as localhost); stopped after the test.

    Teardown ends stalled handlers and fails the test if any server thread outlives it.
    """
    server = ImageServer().start()
    try:
        yield server
    finally:
        server.stop()
