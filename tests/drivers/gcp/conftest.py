"""The `gcp` driver's test rig: a loopback Compute Engine v1 (standin.py) held to the API's
discovery document, and the Google Cloud CLI pointed at it (gcloud.py).

Fixtures:
- `gce`: a started ComputeStandin on 127.0.0.1 (ephemeral port) for project `shoal-test`,
  accepting only the bearer token `TOKEN`; at teardown the test fails if any request or
  response broke the discovery document (`gce.violations`) or reached a method the
  stand-in does not serve (`gce.unserved`). A test that sends a bad request on purpose
  takes its violations with `gce.take_violations()`.
- `api`: a plain HTTP client of it (standin.Client), with the token.
- `gcloud`: gcloud configured against `gce` in a config directory of its own; skipped with
  the reason when gcloud is not installed.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.drivers.gcp.gcloud import Gcloud, gcloud_path
from tests.drivers.gcp.standin import TOKEN, Client, ComputeStandin


@pytest.fixture
def gce() -> Iterator[ComputeStandin]:
    with ComputeStandin() as standin:
        standin.tokens = {TOKEN}
        yield standin
        with standin.lock:
            violations, unserved = list(standin.violations), list(standin.unserved)
    assert violations == [], "the discovery document was broken:\n" + "\n".join(violations)
    assert unserved == [], "methods the stand-in does not serve were called: " + ", ".join(unserved)


@pytest.fixture
def api(gce: ComputeStandin) -> Iterator[Client]:
    client = Client(gce)
    yield client
    client.close()


@pytest.fixture
def gcloud(gce: ComputeStandin, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gcloud]:
    if gcloud_path() is None:
        pytest.skip("the Google Cloud CLI (gcloud) is not installed")
    cli = Gcloud(gce.endpoint, TOKEN, gce.project, root=tmp_path_factory.mktemp("gcloud"))
    yield cli
    cli.close()
