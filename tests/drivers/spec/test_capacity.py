"""fit_count: the spec's capacity rule shared by the local drivers."""

from __future__ import annotations

import pytest

from drivers.spec.base import UNLIMITED
from drivers.spec.capacity import fit_count
from drivers.spec.types import Resources

SHARING = {"multitenancy": True, "cpu_overbook": True, "ram_overbook": True}


def req(cpu: int = 1, ram: int = 1, **flags: bool) -> Resources:
    return Resources(cpu=cpu, ram=ram, **flags)


def used(cpu: int, ram: int, **flags: bool) -> Resources:
    return Resources(cpu=cpu, ram=ram, **flags)


def test_both_limits_zero_is_unlimited() -> None:
    assert fit_count(0, 0, 0, 0, Resources(), req(64, 512)) == UNLIMITED
    assert fit_count(0, 0, 8, 8, used(1000, 1000), req(64, 512)) == UNLIMITED


def test_empty_node_counts_the_scarcer_resource() -> None:
    assert fit_count(8, 16, 0, 0, Resources(), req(2, 2)) == 4  # cpu-bound
    assert fit_count(8, 16, 0, 0, Resources(), req(1, 4)) == 4  # ram-bound
    assert fit_count(8, 16, 0, 0, Resources(), req(3, 5)) == 2  # floors, not rounds


def test_usage_reduces_the_count() -> None:
    assert fit_count(8, 16, 0, 0, used(6, 4), req(1, 1)) == 2
    assert fit_count(8, 16, 0, 0, used(1, 15), req(1, 1)) == 1
    assert fit_count(8, 16, 0, 0, used(8, 4), req(1, 1)) == 0


@pytest.mark.parametrize(
    ("total_cpu", "total_ram", "wanted"),
    [
        (4, 16, req(5, 1)),  # cpu above the total
        (4, 16, req(1, 17)),  # ram above the total
        (4, 16, req(5, 17)),
    ],
)
def test_request_above_total_never_fits(total_cpu: int, total_ram: int, wanted: Resources) -> None:
    assert fit_count(total_cpu, total_ram, 0, 0, Resources(), wanted) == 0


def test_request_above_total_does_not_fit_even_with_overbook_allowed() -> None:
    # Overbooking stretches sharing among tenants; it never makes one tenant bigger than the node.
    assert fit_count(4, 16, 100, 100, Resources(), req(5, 1, **SHARING)) == 0
    assert fit_count(4, 16, 100, 100, Resources(), req(1, 17, **SHARING)) == 0


def test_one_limit_zero_counts_only_the_other() -> None:
    # cpu unlimited: only ram counts, whatever the cpu request or usage
    assert fit_count(0, 8, 0, 0, used(500, 2), req(100, 2)) == 3
    # ram unlimited: only cpu counts
    assert fit_count(4, 0, 0, 0, used(1, 900), req(1, 1000)) == 3


def test_overbook_when_node_and_request_both_allow_it() -> None:
    usage = used(4, 8, **SHARING)
    # cpu budget 4 + 4 overbook, ram budget 8 + 8 overbook
    assert fit_count(4, 8, 4, 8, usage, req(1, 1, **SHARING)) == 4
    assert fit_count(4, 8, 4, 8, usage, req(2, 1, **SHARING)) == 2
    assert fit_count(4, 8, 4, 8, usage, req(1, 4, **SHARING)) == 2


@pytest.mark.parametrize(
    "missing",
    ["multitenancy", "cpu_overbook"],
)
def test_no_cpu_overbook_unless_node_allows(missing: str) -> None:
    flags = {**SHARING, missing: False}
    usage = used(4, 1, **flags)
    assert fit_count(4, 64, 4, 0, usage, req(1, 1, **SHARING)) == 0


@pytest.mark.parametrize(
    "missing",
    ["multitenancy", "cpu_overbook"],
)
def test_no_cpu_overbook_unless_request_allows(missing: str) -> None:
    usage = used(4, 1, **SHARING)
    flags = {**SHARING, missing: False}
    assert fit_count(4, 64, 4, 0, usage, req(1, 1, **flags)) == 0


@pytest.mark.parametrize("who", ["node", "request"])
@pytest.mark.parametrize("missing", ["multitenancy", "ram_overbook"])
def test_no_ram_overbook_unless_both_allow(who: str, missing: str) -> None:
    partial = {**SHARING, missing: False}
    usage = used(1, 8, **(partial if who == "node" else SHARING))
    request = req(1, 1, **(partial if who == "request" else SHARING))
    assert fit_count(64, 8, 0, 8, usage, request) == 0


def test_cpu_and_ram_overbook_are_independent() -> None:
    # cpu overbook allowed, ram overbook not: the ram budget stays at the total
    flags = {"multitenancy": True, "cpu_overbook": True, "ram_overbook": False}
    usage = used(4, 6, **flags)
    assert fit_count(4, 8, 4, 100, usage, req(1, 1, **flags)) == 2  # ram: (8 - 6) // 1
    # ram overbook allowed, cpu not
    flags = {"multitenancy": True, "cpu_overbook": False, "ram_overbook": True}
    usage = used(3, 8, **flags)
    assert fit_count(4, 8, 100, 8, usage, req(1, 1, **flags)) == 1  # cpu: (4 - 3) // 1


def test_first_tenant_sets_the_flags() -> None:
    # An empty node has no tenants; its (default False) flags must not veto the first one.
    assert fit_count(2, 64, 2, 0, Resources(), req(1, 1, **SHARING)) == 4
    assert fit_count(2, 64, 2, 0, Resources(), req(1, 1)) == 2


def test_stale_flags_on_an_empty_node_do_not_count() -> None:
    # Flags left over on an empty usage record (everyone left) must not grant overbook
    # to a first tenant that does not ask for it, nor deny it to one that does.
    stale = Resources(multitenancy=True, cpu_overbook=True, ram_overbook=True)
    assert fit_count(2, 64, 2, 0, stale, req(1, 1)) == 2
    assert fit_count(2, 64, 2, 0, Resources(), req(1, 1, **SHARING)) == 4


@pytest.mark.parametrize(
    ("usage", "overbook"),
    [
        (used(10, 1), 0),  # cpu usage above the total
        (used(1, 100), 0),  # ram usage above the total
        (used(10, 100), 0),
        (used(100, 1, **SHARING), 4),  # above total + overbook
    ],
)
def test_usage_above_total_gives_zero(usage: Resources, overbook: int) -> None:
    count = fit_count(4, 16, overbook, overbook, usage, req(1, 1, **SHARING))
    assert count == 0


def test_usage_above_total_with_big_request_is_zero_not_negative() -> None:
    for request in (req(1, 1), req(3, 7), req(4, 16)):
        count = fit_count(4, 16, 0, 0, used(50, 500), request)
        assert count == 0
        assert 0 <= count < UNLIMITED


def test_negative_overbook_does_not_shrink_the_budget() -> None:
    assert fit_count(4, 8, -10, -10, used(2, 2, **SHARING), req(1, 1, **SHARING)) == 2
