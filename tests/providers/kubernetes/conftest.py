"""The catalog's clusters here are small: read by type all the same (`TYPED_AFTER` 0), so
that these tests cover the typed readers through the catalog as a large cluster's lists
take them; test_small_lists.py covers the standard reading of a small cluster's."""

from __future__ import annotations

import pytest

from providers.kubernetes import catalog

TYPED_AFTER = catalog.TYPED_AFTER  # the catalog's own, before the fixture below


@pytest.fixture(autouse=True)
def _typed_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "TYPED_AFTER", 0)
