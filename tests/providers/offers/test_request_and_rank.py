"""The request's arithmetic (instances per type, shapes that cannot serve, its checks) and
the order of the offers (fit first, reservations first among equals, --sort, --group-by)."""

from __future__ import annotations

import pytest

from providers.core.errors import UsageError
from providers.models import InstanceTypeSpec, RegionSpec
from providers.offers.model import Offer, ReservationRef
from providers.offers.rank import ranked
from providers.offers.request import OfferRequest, Sizing, checked, shape_misfit, sizing


def test_gpus_in_total_are_shared_out_among_instances() -> None:
    eight = checked(OfferRequest(gpus=8))
    assert sizing(eight, 1) == Sizing(8, 1)
    assert sizing(eight, 8) == Sizing(1, 8)
    assert sizing(eight, 4) == Sizing(2, 4)
    assert sizing(eight, 16) == Sizing(1, 16)  # more than asked: one instance, ranked by total
    assert sizing(checked(OfferRequest(gpus=12)), 8) == Sizing(2, 8)
    assert sizing(eight, 0) == "no GPUs (8 asked)"
    # A pod or process may take part of a machine: 8 of a 16-GPU node.
    assert sizing(eight, 16, share=True) == Sizing(1, 8)
    counted = checked(OfferRequest(gpus=8, count=2))
    assert sizing(counted, 4) == Sizing(2, 4)
    assert sizing(counted, 2) == "2 x 2 GPUs < 8 asked (4 per instance needed)"
    assert sizing(checked(OfferRequest(count=3)), 0) == Sizing(3, 0)
    assert sizing(checked(OfferRequest()), 0) == Sizing(1, 0)


def test_shapes_that_cannot_serve_one_instance() -> None:
    spec = InstanceTypeSpec(name="t", vcpus=4, memory_gib=None, arch="arm64")
    assert shape_misfit(checked(OfferRequest(arch="amd64")), spec) == (
        "arch",
        "arch arm64, x86_64 asked",
    )
    assert shape_misfit(checked(OfferRequest(cpu=8)), spec) == ("too-small", "4 vCPUs < 8 asked")
    assert shape_misfit(checked(OfferRequest(ram=8)), spec) == (
        "too-small",
        "memory not known, 8 GiB asked",
    )
    assert shape_misfit(checked(OfferRequest(cpu=4, arch="aarch64")), spec) is None


@pytest.mark.parametrize(
    ("request_", "said"),
    [
        (OfferRequest(gpu=" "), "--gpu ' '"),
        (OfferRequest(market="cheap"), "--market 'cheap'"),
        (OfferRequest(arch="sparc"), "--arch 'sparc'"),
        (OfferRequest(cpu=0), "--cpu 0"),
        (OfferRequest(max_price=float("nan")), "--max-price nan"),
        (OfferRequest(sort="price"), "--sort 'price'"),
        (OfferRequest(regions=("",)), "--region: empty value"),
    ],
)
def test_a_malformed_request_is_a_usage_error(request_: OfferRequest, said: str) -> None:
    with pytest.raises(UsageError, match=f"^{said}"):
        checked(request_)


def test_gpu_names_are_canonical_and_carry_memory() -> None:
    request = checked(OfferRequest(gpus=1, gpu="nvidia-a100-80gb"))
    assert (request.gpu_model, request.gpu_memory) == ("A100", 80.0)


def offer(
    name: str,
    price: float | None,
    *,
    fits: int | None = 1,
    instances: int = 1,
    gpus: int = 8,
    gpu: str = "H100",
    held: int = 0,
) -> Offer:
    spec = InstanceTypeSpec(name=name, gpu=gpu, gpu_count=gpus)
    return Offer(
        provider="p",
        driver="p",
        region=RegionSpec(name="r"),
        instance_type=name,
        shape=spec,
        market="onDemand",
        instances=instances,
        price_per_hour=price,
        fits_now=fits,
        gpus_each=gpus,
        reservation=ReservationRef("cr-1", "capacity-reservation", held) if held else None,
    )


def names(offers: list[Offer]) -> list[str]:
    return [o.instance_type for o in offers]


def test_offers_that_fit_come_first_then_by_total_and_a_reservation_first_among_equals() -> None:
    offers = [
        offer("unknown-fit", 1.0, fits=None),
        offer("dear", 50.0),
        offer("cheap", 10.0),
        offer("reserved", 50.0, held=1),
        offer("no-price", None),
    ]
    assert names(ranked(offers, checked(OfferRequest()))) == [
        "reserved",  # its marginal price is 0 while the reservation lasts
        "cheap",
        "dear",
        "no-price",
        "unknown-fit",
    ]
    equal = [offer("b", 50.0), offer("a-reserved", 50.0, held=1)]
    assert names(ranked(equal, checked(OfferRequest()))) == ["a-reserved", "b"]


def test_sort_by_gpu_hour_and_by_fit_group_by_gpu_and_limit() -> None:
    offers = [
        offer("h100x8", 80.0, fits=3),  # 10/GPU-h
        offer("h100x1", 9.0, gpus=1, instances=8, fits=20),  # 9/GPU-h, 72 in total
        offer("a100x8", 32.0, gpu="A100", fits=1),  # 4/GPU-h
    ]
    assert names(ranked(offers, checked(OfferRequest(sort="gpu-hour")))) == [
        "a100x8",
        "h100x1",
        "h100x8",
    ]
    assert names(ranked(offers, checked(OfferRequest(sort="fit")))) == [
        "h100x1",
        "h100x8",
        "a100x8",
    ]
    grouped = ranked(offers, checked(OfferRequest(group_by="gpu")))
    assert names(grouped) == ["a100x8", "h100x1"]  # the cheapest per GPU-hour of each model
    assert names(ranked(offers, checked(OfferRequest(limit=1)))) == ["a100x8"]
