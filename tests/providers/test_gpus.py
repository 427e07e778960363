"""One GPU name per model across providers, memory apart; selectors read names that way."""

from __future__ import annotations

import pytest

from providers import selectors
from providers.gpus import MODELS, canonical, model


@pytest.mark.parametrize(
    ("spelling", "expected"),
    [
        # NVIDIA device plugin node labels (kubernetes) and nvidia-smi names (local)
        ("NVIDIA-A100-SXM4-80GB", ("A100", 80.0)),
        ("NVIDIA-A100-SXM4-40GB", ("A100", 40.0)),
        ("NVIDIA-H100-80GB-HBM3", ("H100", 80.0)),
        ("Tesla V100-SXM2-16GB", ("V100", 16.0)),
        ("Tesla-T4", ("T4", None)),
        ("NVIDIA GeForce RTX 4090", ("RTX 4090", None)),
        # GCP accelerator types
        ("nvidia-tesla-a100", ("A100", None)),
        ("nvidia-a100-80gb", ("A100", 80.0)),
        ("nvidia-h100-mega-80gb", ("H100", 80.0)),
        ("nvidia-l4", ("L4", None)),
        # AWS family tables and offer-file attributes, Azure size names
        ("T4g", ("T4G", None)),
        ("T4G", ("T4G", None)),
        ("a10g", ("A10G", None)),
        ("NVIDIA A100 80GB", ("A100", 80.0)),
        ("AMD Instinct MI300X", ("MI300X", None)),
        ("Radeon Pro V520", ("Radeon Pro V520", None)),
        # user shorthand
        ("A100-80GB", ("A100", 80.0)),
        ("h100", ("H100", None)),
        # unknown chips pass through, cleaned
        ("NVIDIA-Z9000-PCIe", ("Z9000", None)),
        ("", ("", None)),
    ],
)
def test_every_spelling_maps_to_one_name(spelling: str, expected: tuple[str, float | None]):
    assert canonical(spelling) == expected


def test_canonical_names_are_fixed_points() -> None:
    assert [model(name) for name in MODELS] == list(MODELS)


def record(gpu: str, memory: float | None) -> dict[str, object]:
    return {"gpu": gpu, "gpu_memory_gib": memory, "gpu_count": 8}


def test_gpu_selectors_compare_models_and_read_memory_suffixes() -> None:
    a100_80, a100_40 = record("A100", 80.0), record("A100", 40.0)
    wanted = selectors.parse(["gpu=A100-80GB"])
    assert selectors.matches(wanted, a100_80) and not selectors.matches(wanted, a100_40)
    assert selectors.matches(selectors.parse(["gpu=a100"]), a100_40)
    assert selectors.matches(selectors.parse(["gpu=NVIDIA-A100-SXM4-40GB"]), a100_40)
    assert selectors.matches(selectors.parse(["gpu in (H100,A100-40GB)"]), a100_40)
    assert not selectors.matches(selectors.parse(["gpu!=A100"]), a100_40)
    assert selectors.matches(selectors.parse(["gpu notin (A100-80GB)"]), a100_40)
    assert selectors.matches(selectors.parse(["gpu=t4g"]), record("T4G", 16.0))
