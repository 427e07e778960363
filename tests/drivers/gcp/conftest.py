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
- `billing`: a loopback Cloud Billing SKU list (the gcp price catalog's source).
- `env`: the environment that points shoal at `gce` and `billing` with the token, the
  project and fast retries (the driver's RETRY_POLICY, in this process).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from providers.cloud.http import RetryPolicy
from tests.drivers.gcp.gcloud import Gcloud, gcloud_path
from tests.drivers.gcp.standin import TOKEN, Client, ComputeStandin
from tests.providers.apiserver import ApiServer
from tests.providers.gcp import payloads as p

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=10.0)


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


@pytest.fixture
def billing() -> Iterator[ApiServer]:
    with ApiServer() as server:
        server.route(p.SKUS_PATH, p.skus_handler(p.pages(p.catalog(), 50)))
        yield server


@pytest.fixture
def env(
    gce: ComputeStandin, billing: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> dict[str, str]:
    from drivers.gcp import driver

    monkeypatch.setattr(driver, "RETRY_POLICY", FAST)
    return {
        "SHOAL_GCP_TOKEN": TOKEN,
        "SHOAL_GCP_PROJECT": gce.project,
        "SHOAL_GCP_COMPUTE_URL": gce.base,
        "SHOAL_GCP_BILLING_URL": billing.base,
        "SHOAL_GCP_API_KEY": p.API_KEY,
    }
