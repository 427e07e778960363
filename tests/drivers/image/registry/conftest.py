"""Fixtures: real loopback registries (Debian's docker-registry) and OCI images to push.

Session-scoped, one per mode, started on first use and killed (directory removed) at the end:
`registry_plain`, `registry_basic`, `registry_tls`, `registry_token` (`server.Registry`).
`make_registry(mode, **token_options)` starts a fresh one that dies with the test (a token
server with short-lived tokens, a registry a test may break). `samples` builds the sample
images once per session and pushes them on demand (`samples.push(registry, ...)`). A test
using them skips with the reason when docker-registry, skopeo or htpasswd is missing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.drivers.image.registry.layouts import (
    Image,
    ImageIndex,
    Layout,
    push,
    sample_image,
    sample_index,
)
from tests.drivers.image.registry.server import Registry, Unavailable, find_tool


def _start(mode: str, **token_options: Any) -> Registry:
    try:
        return Registry.start(mode, **token_options)
    except Unavailable as exc:
        pytest.skip(f"no {mode} registry: {exc}")


@pytest.fixture(scope="session")
def registry_plain() -> Iterator[Registry]:
    """No auth, plain HTTP."""
    registry = _start("plain")
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def registry_basic() -> Iterator[Registry]:
    """htpasswd basic auth: `username`/`password` (`creds`)."""
    registry = _start("basic")
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def registry_tls() -> Iterator[Registry]:
    """HTTPS from a throw-away CA: `ca_file`, `cert_dir`, `env` (SSL_CERT_FILE)."""
    registry = _start("tls")
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def registry_token() -> Iterator[Registry]:
    """Token auth in front of `registry.token` (a `TokenServer`): `username` may push,
    `reader` (users["reader"]) may pull, anonymous gets nothing."""
    registry = _start("token")
    yield registry
    registry.stop()


@pytest.fixture
def make_registry() -> Iterator[Callable[..., Registry]]:
    """`make_registry(mode="plain", **token_options)`: a registry of this test's own, stopped
    after it (token_options: expires_in, lifetime, anonymous_pull)."""
    started: list[Registry] = []

    def make(mode: str = "plain", **token_options: Any) -> Registry:
        registry = _start(mode, **token_options)
        started.append(registry)
        return registry

    yield make
    for registry in started:
        registry.stop()


class Samples:
    """The sample images in one layout, pushed to a registry on demand (once per registry,
    name and tag: session registries keep what they were given)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.image: Image = sample_image(layout, "1.0")  # three layers, zstd in the middle
        self.index: ImageIndex = sample_index(layout, "multi")  # linux/amd64 + linux/arm64/v8
        self.image_gzip: Image = sample_image(layout, "1.0-gzip", zstd=False)
        self.index_gzip: ImageIndex = sample_index(layout, "multi-gzip", zstd=False)
        self._pushed: dict[tuple[int, str, str | None], str] = {}

    def push(
        self,
        registry: Registry,
        ref: str = "app/sample:1.0",
        tag: str = "1.0",
        format: str | None = None,
    ) -> str:
        """Push the layout's `tag` ("1.0", "multi", "1.0-gzip", "multi-gzip") as `ref`
        ("NAME:TAG"); returns "127.0.0.1:PORT/NAME:TAG"."""
        key = (id(registry), f"{ref}<-{tag}", format)
        if key not in self._pushed:
            self._pushed[key] = push(self.layout, ref, registry, tag=tag, format=format)
        return self._pushed[key]


@pytest.fixture(scope="session")
def samples(tmp_path_factory: pytest.TempPathFactory) -> Samples:
    """The sample images (`samples.image`, `.index`, gzip-only `.image_gzip`,
    `.index_gzip`) in an OCI layout, and `samples.push(registry, ref, tag)`."""
    try:
        find_tool("skopeo")
    except Unavailable as exc:
        pytest.skip(f"cannot push images: {exc}")
    return Samples(Layout(Path(tmp_path_factory.mktemp("oci-layout"))))
