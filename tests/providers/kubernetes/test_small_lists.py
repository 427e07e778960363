"""A small cluster's lists are read the standard way (json.loads), without importing the
typed readers (msgspec): the same view as when read by type, with the same warnings, now
and over a window; past `TYPED_AFTER` bytes, and whenever the typed readers are loaded
already, pages are read by type."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.core.settings import Paths, Settings
from providers.core.wire import to_wire
from providers.kubernetes import catalog, lists
from providers.kubernetes.capacity import PoolRules
from providers.kubernetes.catalog import KubernetesCatalog
from providers.models import RegionSpec, ResourceListOptions
from tests.providers.kubernetes import conftest
from tests.providers.kubernetes import objects as k8s
from tests.providers.kubernetes.apiserver import ApiServer

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 3, 4, tzinfo=UTC)


def kubeconfig(path: Path, server: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [{"name": "c", "cluster": {"server": server}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    return path


def serve(api: ApiServer, nodes: int, pods: int) -> None:
    node_objs, pod_objs = k8s.synthetic_cluster(nodes, pods, small=True)
    node_objs[1]["spec"]["unschedulable"] = True  # a warning, said the same either way
    api.add_many("nodes", node_objs)
    api.add_many("pods", pod_objs)


def views(tmp_path: Path, api: ApiServer) -> tuple[Any, Any, list[str]]:
    """The view now and over a window, as JSON, and the warnings."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    warns: list[str] = []
    settings = Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(home)}),
        env={"KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig", api.base))},
        warn=warns.append,
    )
    cat = KubernetesCatalog(settings, None, PoolRules(), clock=lambda: NOW)
    now = cat.list_resources(ResourceListOptions(region=RegionSpec()))
    window = cat.list_resource_predictions(
        ResourceListOptions(region=RegionSpec(), start_time=NOW, end_time=NOW + timedelta(days=3))
    )
    return to_wire(now), to_wire(window), warns


@pytest.fixture
def typed_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The pages the typed readers were given, by kind, in order."""
    seen: list[str] = []
    node_page, pod_page = lists.node_page, lists.pod_page

    def nodes(body: bytes) -> Any:
        seen.append("nodes")
        return node_page(body)

    def pods(body: bytes) -> Any:
        seen.append("pods")
        return pod_page(body)

    monkeypatch.setattr(lists, "node_page", nodes)
    monkeypatch.setattr(lists, "pod_page", pods)
    return seen


def as_if_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The catalog sees a process that has not imported the typed readers (this one has)."""
    modules = {k: v for k, v in sys.modules.items() if k != "providers.kubernetes.lists"}
    monkeypatch.setattr(catalog, "sys", types.SimpleNamespace(modules=modules))


@pytest.mark.parametrize(("nodes", "pods"), [(10, 100), (3, 0), (0, 0)])
def test_a_small_cluster_is_read_the_standard_way_with_the_same_view(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    typed_reads: list[str],
    nodes: int,
    pods: int,
) -> None:
    with ApiServer() as api:
        if nodes:
            serve(api, nodes, pods)
        typed = views(tmp_path, api)
        assert typed_reads  # the tests' default (conftest): by type
        typed_reads.clear()
        monkeypatch.setattr(catalog, "TYPED_AFTER", conftest.TYPED_AFTER)
        as_if_not_loaded(monkeypatch)
        assert views(tmp_path, api) == typed
    assert typed_reads == []


def test_past_the_threshold_the_pages_are_read_by_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typed_reads: list[str]
) -> None:
    """The first pages that fit under TYPED_AFTER together are read the standard way, each
    later one by type; once loaded, the typed readers read every page."""
    with ApiServer() as api:
        serve(api, 30, 1200)  # ~0.25 MB of nodes, pages of 500 pods of ~3.5 KB
        typed = views(tmp_path, api)
        typed_reads.clear()
        monkeypatch.setattr(catalog, "TYPED_AFTER", conftest.TYPED_AFTER)
        as_if_not_loaded(monkeypatch)
        assert views(tmp_path, api) == typed
        # each view: the nodes' page (~0.25 MB) and the first pods' page (~1.7 MB) are more
        # than 0.75 MB together, so the pods are read by type from their first page on
        assert typed_reads == ["pods"] * 6
        typed_reads.clear()
        monkeypatch.setattr(catalog, "sys", sys)  # loaded: every page by type
        assert views(tmp_path, api) == typed
        assert typed_reads == ["nodes", "pods", "pods", "pods"] * 2


def test_a_small_clusters_view_does_not_import_msgspec(tmp_path: Path) -> None:
    """In a process of its own, the command a user runs: `resources -p kubernetes --json`
    on 10 nodes imports no msgspec; on a cluster past the threshold, it does."""
    probe = (
        "import sys\n"
        "from cli.main import main\n"
        "sys.argv = ['shoal', 'resources', '-p', 'kubernetes', '--json']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    sys.stderr.write(f'msgspec imported: {\"msgspec\" in sys.modules}\\n')\n"
    )
    found = []
    for nodes, pods in ((10, 100), (10, 400)):
        with ApiServer() as api:
            serve(api, nodes, pods)
            home = tmp_path / f"home{pods}"
            home.mkdir()
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("SHOAL_")},
                "SHOAL_HOME": str(home),
                "KUBECONFIG": str(kubeconfig(tmp_path / f"kc{pods}", api.base)),
                "PYTHONPATH": str(ROOT),
                "COLUMNS": "100",
            }
            done = subprocess.run(
                [sys.executable, "-c", probe],
                env=env,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            [resource] = json.loads(done.stdout)
            assert sum(len(p["nextLevel"]) for p in resource["overview"]) == nodes - 1
            found.append(done.stderr.splitlines()[-1])
    assert found == ["msgspec imported: False", "msgspec imported: True"]
