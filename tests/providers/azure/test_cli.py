"""`shoal types -p azure` without a token, through the CLI, over the loopback Retail Prices
server: memory from the built-in size table, null where nothing knows it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from providers.azure import sizes
from providers.azure.fetch import NAME_SOURCE
from tests.providers.apiserver import ApiServer
from tests.providers.azure import payloads as p

UNKNOWN = "Standard_D4xs_v9"  # not a size Microsoft lists: its name gives 4 vCPUs, no memory


def test_types_json_gives_table_memory_and_null_for_the_unknown(cli: Callable[..., Any]) -> None:
    assert sizes.table().get(UNKNOWN) is None
    rows = [
        p.price_item("Standard_D4s_v5", 0.192),
        p.price_item("Standard_NC24ads_A100_v4", 3.673),
        p.price_item(UNKNOWN, 0.2),
        p.price_item("Standard_D4s_v5", 0.150, region="westus"),  # not asked for: dropped
    ]
    with ApiServer() as api:
        api.route(p.PRICES_PATH, p.PricesApi(rows, base=api.base, ignore=("armRegionName",)))
        env = {"SHOAL_AZURE_PRICES_URL": api.base, "SHOAL_AZURE_TOKEN": None}
        run = cli("types", "-p", "azure", "-r", "eastus", "--json", env=env)
        assert run.exit_code == 0, run.stderr
        pricing = cli("pricing", "-p", "azure", "-r", "eastus", "--offline", "--json", env=env)
    table = sizes.table().source
    by_name = {t["name"]: t for t in run.json()}
    assert {k: by_name["Standard_D4s_v5"][k] for k in ("vcpus", "memory_gib", "source")} == {
        "vcpus": 4,
        "memory_gib": 16,
        "source": table,
    }
    a100 = by_name["Standard_NC24ads_A100_v4"]
    assert (a100["memory_gib"], a100["gpu"], a100["gpu_count"], a100["gpu_memory_gib"]) == (
        220,
        "A100",
        1,
        80,
    )
    assert by_name[UNKNOWN]["vcpus"] == 4
    assert by_name[UNKNOWN]["memory_gib"] is None  # unknown is null, never 0
    assert by_name[UNKNOWN]["source"] == NAME_SOURCE
    (eastus,) = pricing.json()
    assert eastus["items"]["Standard_D4s_v5"]["onDemandPrice"] == 0.192  # not westus' 0.150
    assert any("ignored the filter: 1 item for" in note for note in eastus["notes"])
