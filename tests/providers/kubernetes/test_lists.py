"""The typed list readers (providers/kubernetes/lists.py) against the API's JSON read by
`json.loads`: the same views, the same errors, now and in windows, on every rule the
arithmetic has; the pages they leave to the standard reading; the requests cache."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from providers.core.errors import ShoalError
from providers.core.wire import to_wire
from providers.kubernetes.capacity import PoolRules, compute, predictions
from providers.kubernetes.lists import Pod, node_page, pod_page
from providers.kubernetes.nodes import count_nodes
from providers.kubernetes.pods import marks_busy
from tests.providers.kubernetes.objects import (
    container,
    daemon_pod,
    node,
    pod,
    simple_pod,
    synthetic_cluster,
)
from tests.providers.kubernetes.test_capacity import MALFORMED_PODS, NOW, T0, small_cluster

WINDOW_END = datetime(2026, 3, 8, tzinfo=UTC)


def page(items: list[dict[str, Any]], **meta: Any) -> bytes:
    body = {"kind": "PodList", "apiVersion": "v1", "metadata": meta, "items": items}
    return json.dumps(body).encode()


def typed(pods: list[dict[str, Any]]) -> list[Pod]:
    read = pod_page(page(pods))
    assert read is not None
    return list(read[2])


def typed_nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    read = node_page(page(nodes))
    assert read is not None
    return list(read[2])


def views(nodes: list[dict[str, Any]], pods: list[Any]) -> tuple[Any, Any]:
    """The view now and the window's views, as JSON, with what each reports."""
    now = compute(nodes, pods, region_name="r", now=T0)
    window = predictions(nodes, pods, region_name="r", start=T0, end=WINDOW_END, now=NOW)
    return (
        (to_wire(now.resource), now.excluded, now.overcommitted),
        ({k: to_wire(v) for k, v in window.points.items()}, window.overcommitted),
    )


def assert_same(nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
    expected = views(nodes, pods)
    assert views(nodes, typed(pods)) == expected
    assert views(typed_nodes(nodes), typed(pods)) == expected


def test_the_small_cluster_reads_the_same() -> None:
    nodes, pods = small_cluster()
    assert_same(nodes, pods)


def test_realistic_objects_read_the_same() -> None:
    """Managed fields, env, volumes, sidecars, deadlines, mirror pods: the benchmark's."""
    nodes, pods = synthetic_cluster(30, 600)
    assert_same(nodes, list(pods))


def _random_pod(rng: random.Random, i: int, nodes: list[str]) -> dict[str, Any]:
    quantities: list[Any] = ["100m", "250m", "1", "2", 1, 0.5, "1.5", "1e3", "64Mi", "1Gi", "0"]
    names = ["cpu", "memory", "nvidia.com/gpu", "ephemeral-storage", "example.com/x"]

    def resources() -> dict[str, Any] | None:
        if rng.random() < 0.2:
            return None
        return {rng.choice(names): rng.choice(quantities) for _ in range(rng.randint(0, 3))}

    def one(name: str, sidecar: bool = False) -> dict[str, Any]:
        policy = "Always" if sidecar else rng.choice([None, "Never", "OnFailure"])
        return container(name, requests=resources(), limits=resources(), restart_policy=policy)

    obj = pod(
        f"p{i}",
        rng.choice([*nodes, "elsewhere", None]),
        namespace=rng.choice(["default", "ml", ""]),
        containers=[one(f"c{k}") for k in range(rng.randint(0, 3))],
        init=[one(f"i{k}", rng.random() < 0.4) for k in range(rng.randint(0, 3))],
        overhead=rng.choice([None, {"cpu": "250m"}, {"memory": "120Mi", "cpu": "10m"}]),
        pod_requests=rng.choice([None, {"cpu": "2"}, {"memory": "1Gi", "x": "1"}]),
        phase=rng.choice(["Running", "Running", "Pending", "Succeeded", "Failed", "Unknown"]),
        deadline=rng.choice([None, None, 60, 3600, 86400, True, "60"]),  # type: ignore[arg-type]
        start=rng.choice(["2026-03-06T23:30:00Z", "2026-03-07T00:00:00.5Z", None]),
        owner=rng.choice(["ReplicaSet", "DaemonSet", "Node", None]),
        annotations=rng.choice([None, {}, {"kubernetes.io/config.mirror": "x"}, {"a": "b"}]),
    )
    if rng.random() < 0.05:
        obj["spec"].pop("containers")
    if rng.random() < 0.05:
        obj["spec"] = rng.choice([{}, None])
    if rng.random() < 0.05:
        del obj["status"]
    return obj


@pytest.mark.parametrize("seed", range(5))
def test_random_pods_read_the_same(seed: int) -> None:
    rng = random.Random(seed)
    nodes = [
        node("a", labels={"pool": "x"}, cpu="8", memory="32Gi"),
        node("b", labels={}, cpu="4", allocatable={"nvidia.com/gpu": "2"}),
        node("c", labels={}, ready="False"),
    ]
    pods = [_random_pod(rng, i, ["a", "b", "c"]) for i in range(300)]
    assert_same(nodes, pods)


def test_nodes_read_as_the_fields_the_arithmetic_reads() -> None:
    nodes, _ = small_cluster()
    nodes += [{"metadata": {"name": "bare"}}, {}, {"status": {"conditions": []}, "spec": None}]
    rules = PoolRules()
    assert count_nodes(typed_nodes(nodes), rules) == count_nodes(nodes, rules)


@pytest.mark.parametrize(("p", "field"), MALFORMED_PODS)
def test_the_same_error_for_a_malformed_quantity(p: dict[str, Any], field: str) -> None:
    n = node("n", labels={})
    with pytest.raises(ShoalError) as plain:
        compute([n], [p], region_name="r")
    with pytest.raises(ShoalError) as read:
        compute([n], typed([p]), region_name="r")
    assert str(read.value) == str(plain.value)
    assert field in str(read.value)


def test_the_same_error_for_a_malformed_start_time() -> None:
    p = simple_pod("a", "n", deadline=60, start="yesterday", namespace="ml")
    n = [node("n", labels={})]
    with pytest.raises(ShoalError) as plain:
        predictions(n, [p], region_name="r", start=T0, end=T0, now=NOW)
    with pytest.raises(ShoalError) as read:
        predictions(n, typed([p]), region_name="r", start=T0, end=T0, now=NOW)
    assert str(read.value) == str(plain.value)


def test_one_computation_per_distinct_combination_of_resources() -> None:
    pods = typed([simple_pod(f"w{i}", "n", cpu="123m", memory="45Mi") for i in range(3)])
    first, *rest = (p.requests() for p in pods)
    assert first == {"cpu": 123, "memory": 45 * 2**20 * 1000}
    assert all(r is first for r in rest)
    # pod-level requests and overhead are the pod's own: computed each time
    own = typed([pod("o", "n", overhead={"cpu": "1"}) for _ in range(2)])
    assert own[0].requests() == own[1].requests() and own[0].requests() is not own[1].requests()


def test_list_metadata_as_the_standard_reading_takes_it() -> None:
    read = pod_page(page([], resourceVersion="12", **{"continue": "tok"}))
    assert read is not None and read[:2] == ("tok", "12")
    read = pod_page(page([], resourceVersion=5, **{"continue": ""}))
    assert read is not None and read[:2] == ("", "5")
    assert pod_page(b'{"items": null}') == ("", "", [])


@pytest.mark.parametrize(
    "body",
    [
        b"[]",  # not an object
        b'{"items": {}}',  # items not a list
        b'{"items": [null]}',
        b'{"metadata": []}',
        b'{"items": [{"spec": []}]}',
        b'{"items": [], "x": NaN}',  # json.loads reads NaN; msgspec does not
        b'{"items": [{"metadata": {"name": "\\ud800"}}]}',  # a lone surrogate
        b'\xef\xbb\xbf{"items": []}',  # a BOM
        b'{"items": [] ',  # malformed
    ],
)
def test_pages_of_other_shapes_are_left_to_the_standard_reading(body: bytes) -> None:
    assert pod_page(body) is None
    assert node_page(body) is None


def test_objects_of_other_shapes_where_they_are_read_leave_the_page() -> None:
    for pods in (b'{"metadata": {"ownerReferences": [1]}}', b'{"spec": {"containers": {}}}'):
        assert pod_page(b'{"items": [%s]}' % pods) is None
    assert node_page(b'{"items": [{"status": {"conditions": [1]}}]}') is None
    # where neither reads, any shape goes: the fields are skipped
    assert node_page(b'{"items": [{"metadata": {"ownerReferences": [1]}}]}') is not None


def test_a_pod_of_unexpected_shape_where_the_arithmetic_reads_through_get() -> None:
    """Values the dict code takes as they come (truthiness, `in`) are taken as they come."""
    weird = [
        pod("a", "n", annotations={"kubernetes.io/config.mirror": ""}),
        daemon_pod("b", "n"),
    ]
    weird[0]["metadata"]["annotations"] = "kubernetes.io/config.mirror"  # a string: `in`
    assert_same([node("n", labels={}, cpu="64")], weird)


@pytest.mark.parametrize(
    "annotations",
    [
        '{"kubernetes.io/config.mirror": "x"}',
        '{"kubernetes.io\\/config.mirror": "x"}',  # an escaped slash
        '{"kubernetes.io/config\\u002emirror": "x"}',  # a \u escape inside the name
        '{"\\u006bubernetes.io/config.mirror": "x"}',
        '{"a": "kubernetes.io/config.mirror"}',  # in a value only: not the key
        '{"a": "b", "c": "{\\"d\\": 1}"}',  # escaped quotes (Istio's status), no mirror
        '["kubernetes.io/config.mirror"]',  # a list: `in` finds the element
        '"static kubernetes.io/config.mirror"',  # a string: `in` finds the substring
        "{}",
        "null",
        '""',
        '{"kubernetes.io/config.mirror": null}',  # there, with no value: still a mirror pod
        '{"a": 1, "kubernetes.io/config.mirror": null, "b": [2]}',
        '{"x": {"kubernetes.io/config.mirror": "x"}}',  # a nested key: not the pod's
        '{"kubernetes.io/config.mirror\\u0000": "x"}',  # a longer key
        '{"kubernetes.io/config.mirror": "x", "kubernetes.io/config.mirror": null}',  # twice
        '[{"kubernetes.io/config.mirror": "x"}]',  # a list of objects: no element equals it
        "[]",
        "false",
        "0",
    ],
)
def test_a_mirror_pod_is_told_from_its_annotations_as_they_are_written(annotations: str) -> None:
    """Only the mirror key of the annotations is read; every way of writing it (escapes
    included, with any value, null too) gives the answer the decoded object gives, and
    annotations of any other shape are asked as the dict code asks them."""
    obj = pod("m", "n", annotations={"PLACEHOLDER": ""})
    text = page([obj]).decode().replace('{"PLACEHOLDER": ""}', annotations)
    # the standard reading, as a dict, against the typed one
    [expected] = json.loads(text)["items"]
    read = pod_page(text.encode())
    assert read is not None
    [typed_pod] = read[2]
    assert typed_pod.marks_busy() == marks_busy(expected)
