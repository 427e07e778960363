"""The built-in Azure size table: sane as shipped, read as written, and found the way an
installed package finds it."""

from __future__ import annotations

import json
import re
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from providers import gpus
from providers.azure import parse, sizes
from providers.core.errors import ShoalError

SIZE_PAGE = re.compile(r"^https://learn\.microsoft\.com/azure/virtual-machines/[a-z0-9/-]+$")


def shipped() -> dict[str, Any]:
    text = resources.files("providers.azure").joinpath(sizes.DATA_FILE).read_text("utf-8")
    doc: dict[str, Any] = json.loads(text)
    return doc


def rows() -> list[tuple[str, dict[str, Any]]]:
    return [(name, row) for series in shipped()["series"] for name, row in series["sizes"].items()]


def test_the_table_is_dated_and_every_series_cites_its_page() -> None:
    doc = shipped()
    as_of = date.fromisoformat(doc["asOf"])
    assert doc["series"]
    for series in doc["series"]:
        assert series["series"] and SIZE_PAGE.match(series["page"]), series["page"]
        assert date.fromisoformat(series["pageDate"]) <= as_of
        assert series["sizes"]


def test_every_row_is_sane() -> None:
    names = [name for name, _ in rows()]
    assert len(names) == len({n.lower() for n in names})  # one row per size
    for name, row in rows():
        assert name.startswith("Standard_"), name
        assert row["vcpus"] > 0 and row["memoryGiB"] > 0, name
        assert row.get("gpuCount", 0) >= 0, name
        if "gpu" in row:
            assert gpus.model(row["gpu"]) == row["gpu"], name  # canonical across providers
            assert row["gpuMemoryGiB"] > 0, name
            # A size smaller than one GPU says which share it gets.
            assert (row["gpuCount"] == 0) == ("gpuShare" in row), name


def test_the_table_agrees_with_what_the_names_say() -> None:
    """A typo in a transcribed row would most likely break this: vCPUs and GPUs are in the
    size name too (constrained sizes carry their active vCPUs, E16-4ds_v5: 4)."""
    for name, row in rows():
        shape = parse.shape_from_name(name)
        assert shape.vcpus == row["vcpus"], name
        if "gpu" in row:
            assert (shape.gpu, shape.gpu_count, shape.gpu_memory_gib) == (
                row["gpu"],
                row["gpuCount"],
                row["gpuMemoryGiB"],
            ), name


def test_mainstream_series_are_covered() -> None:
    table = sizes.table()
    for name, vcpus, memory in [
        ("Standard_D4s_v5", 4, 16),
        ("Standard_D4s_v3", 4, 16),
        ("Standard_D2as_v6", 2, 8),
        ("Standard_D64ps_v5", 64, 208),
        ("Standard_E64s_v3", 64, 432),
        ("Standard_E16-4ds_v5", 4, 128),  # constrained: the base size's memory
        ("Standard_F8s_v2", 8, 16),
        ("Standard_B2ts_v2", 2, 1),
        ("Standard_B1ls", 1, 0.5),
        ("Standard_L8s_v3", 8, 64),
        ("Standard_M128ms", 128, 3892),
        ("Standard_HB176rs_v4", 176, 768),
    ]:
        row = table.get(name)
        assert row is not None and (row.vcpus, row.memory_gib) == (vcpus, memory), name
    assert table.get("standard_d4s_v5") == table.get("Standard_D4s_v5")  # ARM ignores case
    gpu = table.get("Standard_ND96isr_MI300X_v5")
    assert gpu == sizes.SizeRow(96, 1850, "MI300X", 8, 192)
    assert table.source == (
        f"shoal's built-in Azure size table (Microsoft size pages, as of {shipped()['asOf']})"
    )


def test_the_table_is_read_once_and_only_when_asked() -> None:
    sizes.table.cache_clear()
    assert sizes.table.cache_info().currsize == 0
    first = sizes.table()
    assert sizes.table() is first and sizes.table.cache_info().hits == 1


def test_the_file_ships_as_package_data() -> None:
    """pyproject's package-data must carry it, or a regular `pip install .` has no table."""
    pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
    assert re.search(r'"providers\.azure"\s*=\s*\[[^]]*"\*\.json"', pyproject.read_text())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "malformed"),
        ('{"series": []}', "no asOf"),
        ('{"asOf": "2026-01-01", "series": [{"sizes": {"Standard_X": {"vcpus": "2"}}}]}', "vcpus"),
        ('{"asOf": "2026-01-01", "series": [{"sizes": []}]}', "without sizes"),
    ],
)
def test_a_malformed_table_is_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(ShoalError, match=message) as caught:
        sizes.parse_table(text)
    assert "sizes.json" in str(caught.value) and "\n" not in str(caught.value)
