"""find_offers over cloud catalogs with scripted price lists and real SQLite caches: every
provider at once, `--region` names shared out among providers, failures named while the
others answer, and the notes of a request without GPUs."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from providers.cloud.catalog import CloudCatalog
from providers.cloud.offers import Offer, Progress, Snapshot
from providers.core.errors import (
    CredentialsError,
    ProviderUnreachableError,
    ShoalError,
    UsageError,
)
from providers.core.settings import Paths, Settings
from providers.models import RegionSpec
from providers.offers import OfferRequest, OpenCatalog, find_offers
from providers.registry import Catalog

TYPES = {
    "gpu.1": Offer("gpu.1", 8, 64, "x86_64", "H100", 1, 80, on_demand=4.0, spot=1.5),
    "gpu.8": Offer("gpu.8", 96, 1024, "x86_64", "H100", 8, 80, on_demand=30.0),
    "arm.1": Offer("arm.1", 4, 16, "arm64", "T4G", 1, 16, on_demand=0.5),
    "cpu.4": Offer("cpu.4", 4, 16, "x86_64", on_demand=0.2),
}


class Fetcher:
    def __init__(
        self,
        provider: str,
        regions: list[str],
        fail: ShoalError | None = None,
        barrier: threading.Barrier | None = None,
        down: tuple[str, ...] = (),
    ) -> None:
        self.provider = provider
        self.regions = regions
        self.fail = fail
        self.barrier = barrier
        self.down = down  # regions whose price list does not answer

    def list_regions(self) -> list[RegionSpec]:
        if self.barrier is not None:
            self.barrier.wait()  # every provider asks at the same time, or this breaks
        if self.fail is not None:
            raise self.fail
        return [RegionSpec(name=n) for n in self.regions]

    def fetch_region(self, region: str, progress: Progress) -> Snapshot:
        if region in self.down:
            raise ProviderUnreachableError(f"{self.provider}: {region} price list unreachable")
        offers = {k: replace(o) for k, o in TYPES.items()}
        return Snapshot(self.provider, region, datetime.now(UTC), "http://127.0.0.1", offers=offers)


def opener(tmp_path: Path, fetchers: dict[str, Fetcher]) -> OpenCatalog:
    def open_catalog(name: str) -> Catalog:
        settings = Settings(paths=Paths.from_env({"SHOAL_HOME": str(tmp_path)}), config={}, env={})
        fetcher = fetchers[name]
        return CloudCatalog(name, settings, lambda: fetcher, fetcher.regions[0])

    return open_catalog


def test_providers_are_asked_at_once_and_regions_go_to_their_own(tmp_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=20)
    fetchers = {
        "east": Fetcher("east", ["e1", "e2"], barrier=barrier),
        "west": Fetcher("west", ["w1"], barrier=barrier),
    }
    request = OfferRequest(gpus=8, gpu="H100", regions=("e2", "w1"), market="on-demand")
    answer = find_offers(request, ["east", "west"], opener(tmp_path, fetchers))
    assert not barrier.broken
    assert {(o.provider, o.region.name, o.instance_type, o.instances) for o in answer.offers} == {
        ("east", "e2", "gpu.8", 1),
        ("east", "e2", "gpu.1", 8),
        ("west", "w1", "gpu.8", 1),
        ("west", "w1", "gpu.1", 8),
    }
    # No account capacity here: quotas unknown, and each offer says so.
    assert all(o.fits_now is None and o.notes for o in answer.offers)
    assert [o.total_per_hour for o in answer.offers] == [30.0, 30.0, 32.0, 32.0]


def test_a_region_no_provider_has_is_refused_naming_close_ones(tmp_path: Path) -> None:
    fetchers = {"east": Fetcher("east", ["e1", "e2"]), "west": Fetcher("west", ["w1"])}
    request = OfferRequest(gpus=1, regions=("e1", "w2"))
    with pytest.raises(
        UsageError, match=r"'w2': no provider asked \(east, west\).*did you mean w1"
    ):
        find_offers(request, ["east", "west"], opener(tmp_path, fetchers))


def test_a_failing_provider_is_named_and_a_name_only_it_may_have_is_noted(tmp_path: Path) -> None:
    fetchers = {
        "east": Fetcher("east", ["e1"]),
        "down": Fetcher("down", ["d1"], fail=CredentialsError("down: set DOWN_KEY")),
    }
    request = OfferRequest(gpus=1, gpu="H100", regions=("e1", "d1"))
    answer = find_offers(request, ["east", "down"], opener(tmp_path, fetchers))
    assert [(f.provider, f.message) for f in answer.failures] == [("down", "down: set DOWN_KEY")]
    assert {o.provider for o in answer.offers} == {"east"} and answer.error is None
    assert any("--region d1: none of the providers that answered" in n for n in answer.notes)
    # All failing: the answer carries the error to raise, the last one's kind.
    alone = find_offers(OfferRequest(gpus=1), ["down"], opener(tmp_path, fetchers))
    assert isinstance(alone.error, CredentialsError) and alone.offers == []


def test_a_request_without_gpus_counts_the_misfits_of_a_cloud(tmp_path: Path) -> None:
    fetchers = {"east": Fetcher("east", ["e1"])}
    request = OfferRequest(cpu=8, arch="x86_64", market="on-demand")
    answer = find_offers(request, ["east"], opener(tmp_path, fetchers))
    assert [o.instance_type for o in answer.offers] == ["gpu.1", "gpu.8"]
    assert answer.rejected == []  # arm.1 (arch) and cpu.4 (too small): counted, not listed
    assert "1 candidate(s) left out as another architecture" in " ".join(answer.notes)
    assert "1 candidate(s) left out as too small" in " ".join(answer.notes)
    spot = find_offers(
        OfferRequest(gpus=1, gpu="H100", market="spot"),
        ["east"],
        opener(tmp_path, fetchers),
    )
    assert [(o.instance_type, o.price_per_hour) for o in spot.offers] == [("gpu.1", 1.5)]
    (no_spot,) = spot.rejected
    assert (no_spot.instance_type, no_spot.code) == ("gpu.8", "not-offered")


def test_a_region_that_fails_is_named_and_the_other_regions_answer(tmp_path: Path) -> None:
    fetchers = {"east": Fetcher("east", ["e1", "e2", "e3"], down=("e2",))}
    request = OfferRequest(gpus=8, gpu="H100", regions=("all",), market="on-demand")
    answer = find_offers(request, ["east"], opener(tmp_path, fetchers))
    assert [(f.provider, f.region, f.message) for f in answer.failures] == [
        ("east", "e2", "east: e2 price list unreachable")
    ]
    assert {o.region.name for o in answer.offers} == {"e1", "e3"} and answer.error is None
    # Every region down: the provider's failure, its kind kept (69), each region said.
    fetchers["east"] = Fetcher("east", ["e1", "e2"], down=("e1", "e2"))
    (tmp_path / "2").mkdir()
    alone = find_offers(request, ["east"], opener(tmp_path / "2", fetchers))
    assert isinstance(alone.error, ProviderUnreachableError)
    assert [f.message for f in alone.failures] == [
        "east: e1 price list unreachable",
        "east: e2 price list unreachable",
    ]
