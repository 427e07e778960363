"""The `azure` driver's test rig: a loopback Azure Resource Manager (standin.py, with
compute.py, network.py and authz.py) held to the models of azure-mgmt-compute,
azure-mgmt-network and azure-mgmt-authorization (contract.py).

Fixtures:
- `azure_arm`: a started ArmStandin on 127.0.0.1 (ephemeral port), subscription
  `SUBSCRIPTION`, resource group `shoal-rg` in eastus, accepting the bearer token `TOKEN`
  (the test principal, Owner of the subscription); at teardown the test fails if any
  request or response broke the SDK models (`azure_arm.violations`) or reached an operation
  the stand-in does not serve (`azure_arm.unserved`). A test that sends a bad request on
  purpose takes its violations with `azure_arm.take_violations()`.
- `azure_arm_tls`: the same over HTTPS with a certificate of its own; its CA is
  `azure_arm_tls.ca_bundle` (REQUESTS_CA_BUNDLE for the Azure CLI).
- `arm`: a plain HTTP client of `azure_arm` (standin.Client), with the token.
- `prices`: a loopback Retail Prices API (the azure price catalog's source) with `PRICES`.
- `env`: the environment that points shoal at `azure_arm` and `prices` with the token and
  the subscription, the instance `azure/lab` (resource group and subnet) in the config,
  and fast retries (the driver's RETRY_POLICY, in this process).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from providers.cloud.http import RetryPolicy
from tests.drivers.azure.standin import RESOURCE_GROUP, SUBSCRIPTION, TOKEN, ArmStandin, Client
from tests.providers.apiserver import ApiServer
from tests.providers.azure import payloads as p

FAST = RetryPolicy(attempts=3, backoff_seconds=0.0, read_timeout_seconds=10.0)
# eastus, on-demand and spot (USD an hour): sizes of the stand-in's Resource SKUs, so that
# the cheapest choice meets each of Azure's own checks (generation, architecture, GPUs).
PRICES: dict[str, tuple[float, float]] = {
    "Standard_A1_v2": (0.043, 0.009),  # Hyper-V generation 1 only
    "Standard_D2s_v5": (0.096, 0.0192),
    "Standard_D2s_v6": (0.101, 0.0202),  # generation 2 only
    "Standard_D2ps_v5": (0.077, 0.0154),  # Arm64
    "Standard_D4s_v5": (0.192, 0.0384),
    "Standard_D4ps_v5": (0.154, 0.0308),  # Arm64
    "Standard_E4s_v5": (0.252, 0.0504),
    "Standard_D8s_v5": (0.384, 0.0768),
    "Standard_NC4as_T4_v3": (0.526, 0.1052),  # one T4
}


def _held_to_contract(standin: ArmStandin) -> None:
    with standin.lock:
        violations, unserved = list(standin.violations), list(standin.unserved)
    assert violations == [], "the SDK models were broken:\n" + "\n".join(violations)
    assert unserved == [], "operations the stand-in does not serve were called: " + ", ".join(
        unserved
    )


@pytest.fixture
def azure_arm() -> Iterator[ArmStandin]:
    with ArmStandin() as standin:
        yield standin
        _held_to_contract(standin)


@pytest.fixture
def azure_arm_tls() -> Iterator[ArmStandin]:
    with ArmStandin(tls=True) as standin:
        yield standin
        _held_to_contract(standin)


@pytest.fixture
def arm(azure_arm: ArmStandin) -> Iterator[Client]:
    client = Client(azure_arm)
    yield client
    client.close()


@pytest.fixture
def prices() -> Iterator[ApiServer]:
    rows = [p.price_item(size, price) for size, (price, _) in PRICES.items()]
    rows += [p.price_item(size, spot, variant="Spot") for size, (_, spot) in PRICES.items()]
    with ApiServer() as api:
        api.route(p.PRICES_PATH, p.PricesApi(rows, base=api.base, ignore=("armRegionName",)))
        yield api


@pytest.fixture
def env(
    azure_arm: ArmStandin,
    prices: ApiServer,
    write_config: Callable[[str], object],
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, str]:
    from drivers.azure import driver

    monkeypatch.setattr(driver, "RETRY_POLICY", FAST)
    subnet = azure_arm.network.add_subnet(RESOURCE_GROUP, "shoal-vnet")
    write_config(
        f'[drivers."azure/lab"]\nresource_group = "{RESOURCE_GROUP}"\nsubnet = "{subnet}"\n'
    )
    return {
        "SHOAL_AZURE_TOKEN": TOKEN,
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": azure_arm.base,
        "SHOAL_AZURE_PRICES_URL": prices.base,
    }
