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
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.drivers.azure.standin import ArmStandin, Client


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
