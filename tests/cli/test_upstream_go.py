"""shoal's catalog and image JSON, decoded by Go's encoding/json into the upstream Go types.

The spec's `catalog` types come from a Go codebase whose `types` package defines what
catalog.txt leaves open: `RegionSpec` has one member per provider (`aws`, `kubernetes`,
`lambdaCloud`), `InstanceTypeSpec` is `{instanceType}`, a `Selector` is `{key, operator,
values}`; drivers.txt's `Image` is `{url, sum, name, version, tag}`. tests/go/ is a Go
module (standard library only) with those types written from the documented shapes; its
program decodes one document and prints what a Go client read, which each test compares
with what shoal printed: a region a Go client cannot see, an instance type without a name,
or a document that does not decode fails here.

Go is Debian's golang-go (`.ci/run` installs it); without `go` these tests skip. The binary
is built once per session, offline (GOPROXY=off, GOFLAGS=-mod=mod: the module has no
dependencies), with its caches in a temporary directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from providers.core.wire import format_time, to_wire
from providers.models import ListResourceFilter
from providers.selectors import parse
from tests.conftest import REPO, Run
from tests.drivers.image import archives as A
from tests.drivers.image.server import ImageServer
from tests.providers.apiserver import ApiServer as HttpServer
from tests.providers.apiserver import Reply
from tests.providers.aws import payloads as aws_payloads
from tests.providers.aws.quotaserver import AwsServer
from tests.providers.aws.test_accounts import CREDS, EU, KEY_ID, SECRET, TOKEN, US, stock
from tests.providers.gcp import payloads as gcp_payloads
from tests.providers.kubernetes import objects as k8s
from tests.providers.kubernetes.apiserver import ApiServer as KubeApiServer
from tests.providers.kubernetes.test_catalog import TOKEN as KUBE_TOKEN
from tests.providers.kubernetes.test_catalog import (
    fill_cache,
    mixed_nodes,
    mixed_pods,
    priced_nodes,
)

GO = shutil.which("go")
pytestmark = pytest.mark.skipif(
    GO is None,
    reason="`go` is not installed (Debian: apt-get install golang-go; .ci/run installs it): "
    "the decode by the upstream Go types needs it",
)

Cli = Callable[..., Run]
Decode = Callable[[str, str], Any]


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Decode:
    """`decode(kind, document)`: what tests/go's program read of `document` (built once)."""
    assert GO is not None
    work = tmp_path_factory.mktemp("upstream-go")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(work),
        "GOCACHE": str(work / "cache"),
        "GOPATH": str(work / "path"),
        "GOFLAGS": "-mod=mod",
        "GOTOOLCHAIN": "local",
        "GOPROXY": "off",
        "GOSUMDB": "off",
        "GOENV": "off",
        "GOTELEMETRY": "off",
        "CGO_ENABLED": "0",
    }
    binary = work / "upstream"
    built = subprocess.run(
        [GO, "build", "-o", str(binary), "."],
        cwd=REPO / "tests" / "go",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert built.returncode == 0, built.stderr

    def decode(kind: str, document: str) -> Any:
        read = subprocess.run(
            [str(binary), kind],
            input=document,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert read.returncode == 0, f"Go could not decode shoal's {kind}: {read.stderr}"
        return json.loads(read.stdout)

    return decode


def ok(run: Run) -> str:
    assert run.exit_code == 0, run.stderr
    return run.stdout


def stats(items: list[dict[str, Any]]) -> int:
    """The onDemand, spot and scheduled stats at every level of shoal's items."""
    return sum(
        sum(1 for market in ("onDemand", "spot", "scheduled") if market in item["stat"])
        + stats(item.get("nextLevel", []))
        for item in items
    )


def resource_read(resource: dict[str, Any], region: dict[str, str]) -> dict[str, Any]:
    """What the Go program should have read of one of shoal's Resources."""
    breakdown = resource.get("breakdown", {})
    return {
        "provider": resource["provider"],
        "region": region,
        "overview": [f"{i['key']}={i['value']}" for i in resource["overview"]],
        "breakdown": sorted(breakdown),
        "stats": stats(resource["overview"]) + sum(stats(v) for v in breakdown.values()),
    }


def pricing_read(pricing: dict[str, Any], region: dict[str, str]) -> dict[str, Any]:
    prices = sum(len(item) for item in pricing["items"].values())
    return {"region": region, "items": sorted(pricing["items"]), "prices": prices}


def aws_region(name: str) -> dict[str, str]:
    return {"provider": "aws", "region": name}


NO_MEMBER = {"provider": ""}  # azure, gcp and local: upstream has no member for them


# -- aws: the loopback price list and account APIs --------------------------------------------


@pytest.fixture
def aws() -> Iterator[dict[str, str]]:
    """The environment of an aws account on loopback (as tests/cli/test_account_commands.py)."""
    with AwsServer(CREDS, (US, EU)) as server:
        stock(server)
        stock(server, EU)
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
        block = server.region(US).capacity[1]  # a capacity block ahead: `scheduled` stats
        block.start = start.isoformat().replace("+00:00", ".000Z")
        block.end = (start + timedelta(days=14)).isoformat().replace("+00:00", ".000Z")
        products, on_demand, reserved = aws_payloads.catalog_products(US, "USD")
        offer = aws_payloads.offer_file(products, on_demand, reserved)
        index = aws_payloads.region_index()
        server.route(aws_payloads.REGION_INDEX_PATH, lambda q, h: Reply.json(index))
        server.route(aws_payloads.OFFER_PATH.format(region=US), offer)
        yield {
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_SESSION_TOKEN": TOKEN,
            "SHOAL_AWS_EC2_URL": server.base + "/ec2/{region}",
            "SHOAL_AWS_QUOTAS_URL": server.base + "/sq/{region}",
            "SHOAL_AWS_PRICING_URL": server.base,
        }


def test_aws_regions_carry_the_aws_member(cli: Cli, upstream: Decode, aws: dict[str, str]) -> None:
    printed = ok(cli("regions", "-p", "aws", "--json", env=aws))
    regions = json.loads(printed)
    assert len(regions) > 1
    # Today's fields stay; a Go client reads the region from `aws`.
    assert all(r["aws"] == {"region": r["name"]} for r in regions)
    assert upstream("regions", printed) == [aws_region(r["name"]) for r in regions]


def test_aws_types_carry_instance_type(cli: Cli, upstream: Decode, aws: dict[str, str]) -> None:
    printed = ok(cli("types", "-p", "aws", "-r", US, "--json", env=aws))
    names = [t["name"] for t in json.loads(printed)]
    assert names and all(names)
    assert upstream("types", printed) == names


def test_aws_resources(cli: Cli, upstream: Decode, aws: dict[str, str]) -> None:
    printed = ok(cli("resources", "-p", "aws", "--region", "all", "--json", env=aws))
    resources = json.loads(printed)
    assert sorted(r["region"]["name"] for r in resources) == [EU, US]
    expected = [resource_read(r, aws_region(r["region"]["name"])) for r in resources]
    assert any(read["stats"] for read in expected)
    assert upstream("resources", printed) == expected


def test_aws_pricing_now_and_over_a_window(cli: Cli, upstream: Decode, aws: dict[str, str]) -> None:
    printed = ok(cli("pricing", "-p", "aws", "-r", US, "--json", env=aws))
    (pricing,) = json.loads(printed)
    assert pricing["items"]
    assert upstream("pricing", printed) == [pricing_read(pricing, aws_region(US))]
    window = ok(
        cli("pricing", "-p", "aws", "-r", US, "--start", "now", "--end", "+2d", "--json", env=aws)
    )
    points = json.loads(window)
    assert points
    assert upstream("pricing-window", window) == {
        at: pricing_read(p, aws_region(US)) for at, p in points.items()
    }


def test_json_selectors_select_as_the_text_ones_do(
    cli: Cli, upstream: Decode, aws: dict[str, str]
) -> None:
    text = ok(cli("pricing", "-p", "aws", "-r", US, "--select", "gpu_count>=1", "--json", env=aws))
    as_upstream = '[{"key": "gpu_count", "operator": "Gte", "values": ["1"]}]'
    go = ok(cli("pricing", "-p", "aws", "-r", US, "--select", as_upstream, "--json", env=aws))
    assert json.loads(go) == json.loads(text) and json.loads(text)[0]["items"]


# -- gcp: the loopback Cloud Billing Catalog ---------------------------------------------------


def test_gcp_pricing_has_no_upstream_member_and_still_decodes(cli: Cli, upstream: Decode) -> None:
    with HttpServer() as api:
        gcp_payloads.serve(api)
        env = {
            "SHOAL_GCP_BILLING_URL": api.base,
            "SHOAL_GCP_COMPUTE_URL": api.base,
            "SHOAL_GCP_API_KEY": gcp_payloads.API_KEY,
        }
        printed = ok(cli("pricing", "-p", "gcp", "-r", "us-central1", "--json", env=env))
    (pricing,) = json.loads(printed)
    assert pricing["region"] == {"name": "us-central1"} and pricing["items"]
    assert upstream("pricing", printed) == [pricing_read(pricing, NO_MEMBER)]


# -- kubernetes: the fake API server ------------------------------------------------------------


def kube_region(context: str, namespace: str) -> dict[str, str]:
    return {"provider": "kubernetes", "context": context, "cluster": "loop", "namespace": namespace}


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[tuple[KubeApiServer, dict[str, str]]]:
    """A cluster and a kubeconfig with two contexts: `ml` (current, namespace ml-jobs) and
    `ops` (no namespace: kubectl's `default`)."""
    with KubeApiServer(tokens=[KUBE_TOKEN]) as api:
        api.add_many("nodes", mixed_nodes())
        api.add_many("pods", mixed_pods())
        path = tmp_path / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "ml",
                    "clusters": [{"name": "loop", "cluster": {"server": api.base}}],
                    "users": [{"name": "tester", "user": {"token": KUBE_TOKEN}}],
                    "contexts": [
                        {
                            "name": "ml",
                            "context": {
                                "cluster": "loop",
                                "user": "tester",
                                "namespace": "ml-jobs",
                            },
                        },
                        {"name": "ops", "context": {"cluster": "loop", "user": "tester"}},
                    ],
                }
            )
        )
        yield api, {"KUBECONFIG": str(path)}


K8S = ("-p", "kubernetes")


def test_kubernetes_regions_name_context_cluster_and_namespace(
    cli: Cli, upstream: Decode, kube: tuple[KubeApiServer, dict[str, str]]
) -> None:
    _, env = kube
    printed = ok(cli("regions", *K8S, "--json", env=env))
    assert [r["name"] for r in json.loads(printed)] == ["ml", "ops"]
    assert upstream("regions", printed) == [
        kube_region("ml", "ml-jobs"),
        kube_region("ops", "default"),
    ]


def test_kubernetes_types(
    cli: Cli, upstream: Decode, kube: tuple[KubeApiServer, dict[str, str]]
) -> None:
    _, env = kube
    printed = ok(cli("types", *K8S, "--json", env=env))
    names = [t["name"] for t in json.loads(printed)]
    assert names and all(names)
    assert upstream("types", printed) == names


def test_kubernetes_resources_now_and_over_a_window(
    cli: Cli, upstream: Decode, kube: tuple[KubeApiServer, dict[str, str]]
) -> None:
    api, env = kube
    printed = ok(cli("resources", *K8S, "--context", "ops", "--json", env=env))
    (resource,) = json.loads(printed)
    assert resource["region"]["name"] == "ops"
    expected = [resource_read(resource, kube_region("ops", "default"))]
    assert upstream("resources", printed) == expected
    # A window with a point where a pod's deadline gives its cpu back.
    began = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=30)
    api.add(
        "pods",
        k8s.simple_pod("batch-1", "eks-od-1", cpu="2", deadline=3600, start=format_time(began)),
    )
    start, end = format_time(began + timedelta(minutes=30)), format_time(began + timedelta(hours=2))
    window = ok(cli("resources", *K8S, "--start", start, "--end", end, "--json", env=env))
    points = json.loads(window)
    assert len(points) == 3
    assert upstream("resources-window", window) == {
        at: resource_read(r, kube_region("ml", "ml-jobs")) for at, r in points.items()
    }


def test_kubernetes_pricing(cli: Cli, upstream: Decode, home: Path, tmp_path: Path) -> None:
    fill_cache(home)
    with KubeApiServer(tokens=[KUBE_TOKEN]) as api:
        api.add_many("nodes", priced_nodes())
        api.add_many("pods", mixed_pods())
        config = {
            "apiVersion": "v1",
            "current-context": "prod",
            "clusters": [{"name": "loop", "cluster": {"server": api.base}}],
            "users": [{"name": "tester", "user": {"token": KUBE_TOKEN}}],
            "contexts": [{"name": "prod", "context": {"cluster": "loop", "user": "tester"}}],
        }
        (tmp_path / "kc").write_text(json.dumps(config))
        printed = ok(cli("pricing", *K8S, "--json", env={"KUBECONFIG": str(tmp_path / "kc")}))
    (pricing,) = json.loads(printed)
    assert upstream("pricing", printed) == [pricing_read(pricing, kube_region("prod", "default"))]


# -- local ---------------------------------------------------------------------------------------


def test_local_regions_and_resources_decode_without_a_member(cli: Cli, upstream: Decode) -> None:
    printed = ok(cli("regions", "--json"))
    assert upstream("regions", printed) == [NO_MEMBER for _ in json.loads(printed)]
    printed = ok(cli("resources", "--json"))
    (resource,) = json.loads(printed)
    assert resource["provider"] == "local"
    assert upstream("resources", printed) == [resource_read(resource, NO_MEMBER)]
    window = ok(cli("resources", "--start", "now", "--end", "+1h", "--json"))
    assert upstream("resources-window", window) == {
        at: resource_read(r, NO_MEMBER) for at, r in json.loads(window).items()
    }


# -- selectors ------------------------------------------------------------------------------------


def test_selectors_print_and_read_back_in_the_upstream_shape(upstream: Decode) -> None:
    text = ["gpu in (H100,A100)", "!arch", "region", "gpu!=T4", "vcpus>=16"]
    printed = json.dumps(to_wire(ListResourceFilter(resource_selectors=parse(text))))
    read = upstream("filter", printed)
    assert read == [
        {"key": "gpu", "operator": "In", "values": ["H100", "A100"]},
        {"key": "arch", "operator": "DoesNotExist", "values": []},
        {"key": "region", "operator": "Exists", "values": []},
        {"key": "gpu", "operator": "NotIn", "values": ["T4"]},
        {"key": "vcpus", "operator": "Gte", "values": ["16"]},
    ]
    # What a Go client marshals (nil values as null) is a --select shoal takes.
    go_written = json.dumps([{**s, "values": s["values"] or None} for s in read])
    assert parse([go_written]) == parse(text)


# -- image pull ------------------------------------------------------------------------------------


def test_image_pull_json_is_an_upstream_image(
    cli: Cli, upstream: Decode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc from outside
    monkeypatch.delenv("SHOAL_IMAGE_USER", raising=False)
    monkeypatch.delenv("SHOAL_IMAGE_PASSWORD", raising=False)
    data = A.make_tar([A.Dir("etc"), A.File("etc/release", b"release v1\n")], "gz")
    server = ImageServer().start()
    try:
        url = server.add("/images/base-2.1.tar.gz", data)
        run = cli("image", "pull", url, "--out", str(tmp_path / "images"), "--tag", "ci", "--json")
    finally:
        server.stop()
    printed = ok(run)
    pulled = json.loads(printed)
    assert pulled["sum"].startswith("sha256:") and pulled["sum"] == pulled["checksum"]
    assert upstream("image", printed) == {
        "url": url,
        "sum": pulled["checksum"],
        "name": "base",
        "version": "2.1",
        "tag": "ci",
    }
