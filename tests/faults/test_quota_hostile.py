"""Account quotas from servers that repeat, go negative or flood (issue 21, break 10).

- The same quota reported more than once is one quota: never the sum of its copies (three
  copies of a 50-vCPU Azure family are not 150; GCP's CPUS twice is not 48). The copy that
  leaves the least free is kept, with a note.
- A negative usage is not a count: usage unknown (50 limit, -1 used must not make 51
  allocatable). A negative limit leaves the quota out, with a note.
- A page or a list past the bounds of providers/cloud/bearer.py is a one-line error naming
  the document and the limit, refused before it is parsed (a 64 MiB page of 1.34 M usages
  took 2 GB and 37 s to read, and its cache 810 MB).

Through `shoal resources --json` over loopback Azure and GCP APIs, the AWS quota server, and
the cache's reader.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, Literal

import pytest

from providers.accounts import capacity
from providers.accounts.model import AccountSnapshot, Quota
from providers.accounts.resource import allocatable
from providers.cloud.bearer import MAX_ANSWER_BYTES, MAX_LIST_OBJECTS, MAX_PAGE_OBJECTS
from tests.conftest import Run
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.aws.quotaserver import AwsServer, quota
from tests.providers.aws.test_accounts import CREDS, KEY_ID, SECRET, TOKEN, stock
from tests.providers.azure import account_payloads as a
from tests.providers.azure.payloads import SUBSCRIPTION
from tests.providers.azure.payloads import TOKEN as AZURE_TOKEN
from tests.providers.gcp import account_payloads as g
from tests.providers.gcp.payloads import PROJECT, REGIONS_PATH
from tests.providers.gcp.payloads import TOKEN as GCP_TOKEN

Cli = Callable[..., Run]
NO_DEBUG = {"SHOAL_DEBUG": ""}
FAMILY = "standardDSv5Family"


def ok(run: Run) -> Any:
    assert run.exit_code == 0, run.stderr
    return json.loads(run.stdout)


def stat(resource: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    (item,) = [i for i in resource["overview"] if i["key"] == key and i["value"] == value]
    found: dict[str, Any] = item["stat"]
    return found


def vcpus(market: dict[str, Any], kind: str) -> float | None:
    found = market[kind].get("cpu", {}).get("vcpu")
    return None if found is None else float(found)


# -- azure ---------------------------------------------------------------------------------


@pytest.fixture
def azure() -> Iterator[ApiServer]:
    with ApiServer() as api:
        yield api


def azure_resources(cli: Cli, api: ApiServer, usages: list[dict[str, Any]]) -> Run:
    sub = a.standard(api.base)
    sub.usages["eastus"] = usages
    sub.serve(api)
    env = {
        **NO_DEBUG,
        "SHOAL_AZURE_TOKEN": AZURE_TOKEN,
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": api.base,
    }
    return cli("resources", "-p", "azure", "-r", "eastus", "--json", "--refresh", env=env)


def test_azure_family_reported_three_times_is_one_quota(cli: Cli, azure: ApiServer) -> None:
    family = a.usage(FAMILY, "Standard DSv5 Family vCPUs", 10, 50)
    usages = [a.usage("cores", "Total Regional vCPUs", 10, 350), family, family, family]
    (resource,) = ok(azure_resources(cli, azure, usages))
    on_demand = stat(resource, "family", FAMILY)["onDemand"]
    assert (vcpus(on_demand, "supply"), vcpus(on_demand, "allocated")) == (50, 10)
    assert vcpus(on_demand, "allocatable") == 40
    assert any(FAMILY in n and "more than once" in n for n in resource["notes"]), resource


def test_azure_copies_that_disagree_keep_the_one_with_least_left(
    cli: Cli, azure: ApiServer
) -> None:
    usages = [
        a.usage(FAMILY, "Standard DSv5 Family vCPUs", 10, 50),
        a.usage(FAMILY, "Standard DSv5 Family vCPUs", 45, 50),  # 5 left: kept
        a.usage(FAMILY, "Standard DSv5 Family vCPUs", 0, 100),
    ]
    (resource,) = ok(azure_resources(cli, azure, usages))
    on_demand = stat(resource, "family", FAMILY)["onDemand"]
    assert (vcpus(on_demand, "supply"), vcpus(on_demand, "allocatable")) == (50, 5)


def test_azure_negative_usage_is_unknown_not_more_room(cli: Cli, azure: ApiServer) -> None:
    usages = [a.usage(FAMILY, "Standard DSv5 Family vCPUs", -1, 50)]
    (resource,) = ok(azure_resources(cli, azure, usages))
    on_demand = stat(resource, "family", FAMILY)["onDemand"]
    assert vcpus(on_demand, "supply") == 50
    assert vcpus(on_demand, "allocatable") is None  # not 51
    assert vcpus(on_demand, "allocated") is None
    assert any("usage unknown" in n and FAMILY in n for n in resource["notes"]), resource


def test_azure_negative_limit_leaves_the_quota_out(cli: Cli, azure: ApiServer) -> None:
    usages = [
        a.usage("cores", "Total Regional vCPUs", 10, 350),
        a.usage(FAMILY, "Standard DSv5 Family vCPUs", 3, -1),
    ]
    (resource,) = ok(azure_resources(cli, azure, usages))
    assert not [i for i in resource["overview"] if i["value"] == FAMILY]
    assert any("limit is negative" in n and FAMILY in n for n in resource["notes"]), resource


def test_azure_answer_is_cached_and_read_back_the_same(cli: Cli, azure: ApiServer) -> None:
    # A snapshot with a negative usage used to be cached as is, and the cache then refused it.
    usages = [a.usage(FAMILY, "Standard DSv5 Family vCPUs", -1, 50)] * 2
    first = ok(azure_resources(cli, azure, usages))
    env = {"SHOAL_AZURE_TOKEN": AZURE_TOKEN, "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION}
    again = ok(cli("resources", "-p", "azure", "-r", "eastus", "--json", "--offline", env=env))
    assert stat(again[0], "family", FAMILY) == stat(first[0], "family", FAMILY)


def one_error(run: Run) -> str:
    assert run.exit_code == 1, run.stderr
    assert "unexpected" not in run.stderr
    assert run.stderr.startswith("shoal: error: ") and run.stderr.count("\n") == 1, run.stderr
    return run.stderr


def test_azure_usages_page_past_the_object_bound_is_refused_before_parsing(
    cli: Cli, azure: ApiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from providers.azure import payloads

    def never(*args: Any) -> Any:
        raise AssertionError("the page was parsed")

    monkeypatch.setattr(payloads.USAGES, "read", never)
    family = a.usage(FAMILY, "Standard DSv5 Family vCPUs", 10, 50)
    page = json.dumps({"value": [family] * (MAX_PAGE_OBJECTS // 2 + 1)}).encode()
    a.standard(azure.base).serve(azure)
    azure.route(a.usages_path("eastus"), lambda q, h: Reply(200, page, {}))
    stderr = one_error(azure_resources_only(cli, azure))
    assert "usages page holds more than 50,000 JSON objects" in stderr, stderr
    assert a.usages_path("eastus") in stderr


def test_azure_usages_list_past_the_object_bound_over_pages_is_refused(
    cli: Cli, azure: ApiServer
) -> None:
    family = a.usage(FAMILY, "Standard DSv5 Family vCPUs", 10, 50)
    per_page = MAX_PAGE_OBJECTS // 2 - 1  # each usage is 2 objects: just under a page's bound
    path = a.usages_path("eastus")

    def pages(query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        at = int(query.get("$skiptoken", ["0"])[0])
        link = f"{azure.base}{path}?api-version=2023-07-01&$skiptoken={at + 1}"
        return Reply.json({"value": [family] * per_page, "nextLink": link})

    a.standard(azure.base).serve(azure)
    azure.route(path, pages)
    stderr = one_error(azure_resources_only(cli, azure))
    assert f"usages list holds more than {MAX_LIST_OBJECTS:,} JSON objects" in stderr, stderr
    assert len(azure.requests_to(path)) == MAX_LIST_OBJECTS // (2 * per_page) + 1


def test_azure_answer_past_the_byte_bound_is_refused(cli: Cli, azure: ApiServer) -> None:
    label = "x" * (MAX_ANSWER_BYTES + 1)
    page = json.dumps({"value": [a.usage(FAMILY, label, 10, 50)]}).encode()
    a.standard(azure.base).serve(azure)
    azure.route(a.usages_path("eastus"), lambda q, h: Reply(200, page, {}))
    stderr = one_error(azure_resources_only(cli, azure))
    assert f"larger than {MAX_ANSWER_BYTES} bytes" in stderr, stderr


def azure_resources_only(cli: Cli, api: ApiServer) -> Run:
    env = {
        **NO_DEBUG,
        "SHOAL_AZURE_TOKEN": AZURE_TOKEN,
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": api.base,
    }
    return cli("resources", "-p", "azure", "-r", "eastus", "--json", "--refresh", env=env)


# -- gcp -----------------------------------------------------------------------------------


def gcp_resources(cli: Cli, regions: list[dict[str, Any]], **changes: Any) -> Run:
    with ApiServer() as api:
        project = g.ProjectApi()
        project.regions = regions
        for key, value in changes.items():
            setattr(project, key, value)
        project.serve(api)
        env = {
            **NO_DEBUG,
            "SHOAL_GCP_TOKEN": GCP_TOKEN,
            "SHOAL_GCP_PROJECT": PROJECT,
            "SHOAL_GCP_COMPUTE_URL": api.base,
        }
        return cli("resources", "-p", "gcp", "-r", "us-central1", "--json", env=env)


def test_gcp_cpus_reported_twice_is_one_quota(cli: Cli) -> None:
    cpus = g.quota("CPUS", 24.0, 8.0)
    (resource,) = ok(gcp_resources(cli, [g.region("us-central1", ["a"], [cpus, cpus])]))
    on_demand = stat(resource, "family", "regional")["onDemand"]
    assert (vcpus(on_demand, "supply"), vcpus(on_demand, "allocatable")) == (24, 16)
    assert any("CPUS" in n and "more than once" in n for n in resource["notes"]), resource


def test_gcp_negative_usage_is_unknown(cli: Cli) -> None:
    quotas = [g.quota("CPUS", 50.0, -1.0)]
    (resource,) = ok(gcp_resources(cli, [g.region("us-central1", ["a"], quotas)]))
    on_demand = stat(resource, "family", "regional")["onDemand"]
    assert vcpus(on_demand, "supply") == 50 and vcpus(on_demand, "allocatable") is None


def test_gcp_regions_page_past_the_object_bound_is_refused(cli: Cli) -> None:
    quotas = [g.quota("CPUS", 24.0, 8.0)] * (MAX_PAGE_OBJECTS + 1)
    stderr = one_error(gcp_resources(cli, [g.region("us-central1", ["a"], quotas)]))
    assert "regions page holds more than 50,000 JSON objects" in stderr, stderr
    assert REGIONS_PATH in stderr


# -- aws -----------------------------------------------------------------------------------


def test_aws_applied_quota_listed_twice_is_one_quota(cli: Cli) -> None:
    standard = "L-1216C47A"
    with AwsServer(CREDS, ("us-east-1",)) as server:
        stock(server)
        data = server.region("us-east-1")
        data.applied = [q for q in data.applied if q["QuotaCode"] != standard]
        name = "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances"
        data.applied += [quota(standard, 64.0, name), quota(standard, 640.0, name)]  # last: 640
        env = {
            **NO_DEBUG,
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_SESSION_TOKEN": TOKEN,
            "SHOAL_AWS_EC2_URL": server.base + "/ec2/{region}",
            "SHOAL_AWS_QUOTAS_URL": server.base + "/sq/{region}",
        }
        run = cli("resources", "-p", "aws", "-r", "us-east-1", "--json", env=env)
    (resource,) = ok(run)
    assert vcpus(stat(resource, "family", "Standard")["onDemand"], "supply") == 64
    assert any(standard in n and "more than once" in n for n in resource["notes"]), resource


# -- shared: the cache and the quota checks --------------------------------------------------


def snapshot(*quotas: Quota) -> AccountSnapshot:
    return AccountSnapshot("azure", "eastus", datetime(2025, 6, 1, tzinfo=UTC), list(quotas))


def family(
    limit: float, used: float | None, scope: Literal["region", "global"] = "region"
) -> Quota:
    return Quota(FAMILY, FAMILY, FAMILY, "onDemand", ("cpu", "vcpu"), limit, used, scope)


def test_a_cached_answer_with_copies_of_a_quota_reads_as_one() -> None:
    cached = capacity.loads(capacity.dumps(snapshot(family(50, 10), family(50, 10))))
    assert cached.quotas == [family(50, 10)]
    assert any("more than once" in n for n in cached.notes)
    assert allocatable(cached, FAMILY) == 40


def test_a_code_in_both_scopes_leaves_the_least_of_them_not_their_sum() -> None:
    both = snapshot(family(50, 10), family(8, 0, "global"))
    assert allocatable(both, FAMILY) == 8
