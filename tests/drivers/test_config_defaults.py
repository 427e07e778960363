"""The local drivers read their settings' defaults without a table from a class of plain
values (no pydantic), and the pydantic model that checks a table takes its defaults from
there: they must agree, or a table that leaves a key out would mean something else than no
table."""

from __future__ import annotations

from dataclasses import asdict, is_dataclass
from typing import Any

import pytest


def _values(config: Any) -> dict[str, Any]:
    if is_dataclass(config):
        return asdict(config)
    return {name: getattr(config, name) for name in type(config).__slots__}


@pytest.mark.parametrize(
    ("defaults", "model"),
    [
        ("drivers.process.defaults:DEFAULTS", "drivers.process.model:ProcessConfig"),
        ("drivers.test.defaults:DEFAULTS", "drivers.test.model:TestConfig"),
        ("drivers.container.defaults:DEFAULTS", "drivers.container.model:ContainerConfig"),
    ],
)
def test_the_defaults_a_driver_reads_are_its_models(defaults: str, model: str) -> None:
    from providers.core.plugins import import_string

    assert _values(import_string(defaults)) == import_string(model)().model_dump()
