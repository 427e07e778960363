"""GCP quota truth (issue 24, item 5) against a loopback Compute Engine API serving a project
written afresh (quota_truth_payloads.py): a GPU line's allocatable is what every quota
that applies leaves, the binding one named; a region whose quotas the API could not fetch
(`quotaStatusWarning`) is unknown, never zero or full."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from providers.accounts.fit import type_fit
from providers.accounts.model import AccountSnapshot
from providers.accounts.resource import select, to_resource
from providers.gcp.quota_map import GcpQuotaMap
from providers.models import RegionResourceItem, Resource, Selector
from tests.providers.apiserver import ApiServer
from tests.providers.gcp import quota_truth_payloads as t
from tests.providers.gcp.payloads import TOKEN
from tests.providers.gcp.test_accounts import accounts

NOW = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer() as server:
        t.api().serve(server)
        yield server


def fetched(tmp_path: Path, api: ApiServer) -> dict[str, AccountSnapshot]:
    found = accounts(tmp_path, api).fetch(["us-central1", "us-east5", "europe-west4"])
    return {s.region: s for s in found}


def item(resource: Resource, key: str, value: str) -> RegionResourceItem:
    (found,) = [i for i in resource.overview if (i.key, i.value) == (key, value)]
    return found


def test_a_gpu_line_allocatable_is_the_least_any_quota_leaves(
    tmp_path: Path, api: ApiServer
) -> None:
    central = fetched(tmp_path, api)["us-central1"]
    res = to_resource(central, now=NOW)
    on_demand = item(res, "family", "gpu").stat.on_demand
    assert on_demand is not None
    assert on_demand.supply["gpu"]["H100"] == "8"
    assert on_demand.allocated["gpu"]["H100"] == "0"
    assert on_demand.allocatable["gpu"]["H100"] == "2"  # not 8: GPUS_ALL_REGIONS leaves 2
    spot = item(res, "family", "gpu").stat.spot
    assert spot is not None and spot.allocatable["gpu"]["H100"] == "2"  # not 15
    assert on_demand.allocatable["gpu"]["L4"] == "0"  # its own quota is the tighter
    assert (
        "GPUS_ALL_REGIONS (account-wide: 8, 6 used) binds before NVIDIA_H100_GPUS in "
        "us-central1 (8, 0 used): gpu/H100 on demand allocatable 2, not 8"
    ) in res.notes
    assert not any("NVIDIA_L4_GPUS in" in n for n in res.notes)
    account = item(res, "account", "global").stat.on_demand
    assert account is not None and account.allocatable["quota"]["GPUS_ALL_REGIONS"] == "2"
    assert TOKEN not in " ".join(res.notes)


def test_a_type_fits_as_many_as_the_binding_quota_allows(tmp_path: Path, api: ApiServer) -> None:
    central = fetched(tmp_path, api)["us-central1"]
    rules = GcpQuotaMap(central.quotas)
    one = type_fit(central, rules, "a3-highgpu-1g", 26, "H100", 1, "onDemand")
    assert one.instances == 2 and one.binding is not None
    assert (one.binding.code, one.binding.scope, one.binding.free) == (
        "GPUS_ALL_REGIONS",
        "global",
        2.0,
    )
    eight = type_fit(central, rules, "a3-highgpu-8g", 208, "H100", 8, "onDemand")
    assert eight.instances == 0 and eight.binding is not None
    assert eight.binding.describe() == "GPUS_ALL_REGIONS: 2 free of 8, 8 per instance"
    small = type_fit(central, rules, "n1-standard-8", 8, "", 0, "onDemand")
    assert small.instances == 8 and small.binding and small.binding.code == "CPUS"


def test_a_region_whose_quotas_did_not_fetch_is_unknown(tmp_path: Path, api: ApiServer) -> None:
    east = fetched(tmp_path, api)["us-east5"]
    assert "UNREACHABLE" in east.quotas_unknown and "temporarily unavailable" in east.quotas_unknown
    assert {q.scope for q in east.quotas} == {"global"}  # the project's still count
    res = to_resource(east, now=NOW)
    assert (res.overview[0].key, res.overview[0].value) == ("quotas", "unknown")
    assert not [i for i in res.overview if i.key == "family"]  # no line of zeros
    assert any(n.startswith("quotas unknown in us-east5: regions.list") for n in res.notes)
    rules = GcpQuotaMap(east.quotas)
    one = type_fit(east, rules, "a3-highgpu-1g", 26, "H100", 1, "onDemand")
    assert one.instances is None and one.at_most == 2  # unknown, at most what the project has
    assert "NVIDIA_H100_GPUS" in one.unknown and one.reason == east.quotas_unknown
    eight = type_fit(east, rules, "a3-highgpu-8g", 208, "H100", 8, "onDemand")
    assert eight.instances == 0  # the project's own quota already says no
    # A selection keeps the region: unknown is not "nothing allocatable".
    wanted = [Selector(key="gpu", operator="In", values=["H100"])]
    kept = select(to_resource(east, now=NOW), east, wanted)
    assert kept is not None and kept.overview[0].value == "unknown"
