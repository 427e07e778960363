"""`shoal resources -p aws` and `shoal pricing --available` as users run them: the real AWS
fetchers behind the CLI, against a loopback AWS (EC2 XML, Service Quotas JSON, the Price
List files; SigV4 checked on every request)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.providers.apiserver import Reply
from tests.providers.aws import payloads
from tests.providers.aws.quotaserver import AwsServer
from tests.providers.aws.test_accounts import CREDS, EU, KEY_ID, SECRET, TOKEN, US, stock


@pytest.fixture
def aws() -> Iterator[AwsServer]:
    with AwsServer(CREDS, (US, EU)) as server:
        stock(server)
        stock(server, EU)
        # The capacity block ahead of now, whenever the test runs.
        start = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
        block = server.region(US).capacity[1]
        block.start = start.isoformat().replace("+00:00", ".000Z")
        block.end = (start + timedelta(days=14)).isoformat().replace("+00:00", ".000Z")
        products, on_demand, reserved = payloads.catalog_products(US, "USD")
        offer = payloads.offer_file(products, on_demand, reserved)
        server.route(payloads.REGION_INDEX_PATH, lambda q, h: Reply.json(payloads.region_index()))
        server.route(payloads.OFFER_PATH.format(region=US), offer)
        yield server


def env(server: AwsServer, **more: str) -> dict[str, str]:
    return {
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
        "SHOAL_AWS_EC2_URL": server.base + "/ec2/{region}",
        "SHOAL_AWS_QUOTAS_URL": server.base + "/sq/{region}",
        "SHOAL_AWS_PRICING_URL": server.base,
        **more,
    }


Cli = Callable[..., Any]


def ok(run: Any) -> Any:
    assert run.exit_code == 0, run.stderr
    return run


def family(resource: dict[str, Any], value: str) -> dict[str, Any]:
    (found,) = [i for i in resource["overview"] if i["key"] == "family" and i["value"] == value]
    return found


def test_resources_shows_the_account_quotas_usage_and_reservations(
    cli: Cli, aws: AwsServer
) -> None:
    run = ok(cli("resources", "-p", "aws", "-r", US, "--json", env=env(aws)))
    (res,) = json.loads(run.stdout)
    assert res["provider"] == "aws" and res["region"]["name"] == US
    standard = family(res, "Standard")["stat"]["onDemand"]
    assert standard["supply"]["cpu"] == {"vcpu": "640"}
    assert standard["allocated"]["cpu"] == {"vcpu": "4"}
    assert standard["allocatable"]["cpu"] == {"vcpu": "636"}
    p = family(res, "P")["stat"]["onDemand"]
    assert p["allocatable"]["cpu"] == {"vcpu": "0"}  # 384 used of 192: noted, never negative
    assert any("L-417A185B" in n and "above its limit" in n for n in res["notes"])
    (held,) = [i for i in res["overview"] if i["key"] == "reservations"]
    assert {c["value"] for c in held["nextLevel"]} == {"cr-0001", "cr-0002"}
    assert res["asOf"] and "ListServiceQuotas" in res["source"]
    assert KEY_ID not in run.stdout + run.stderr and SECRET not in run.stdout + run.stderr


def test_the_table_has_a_row_per_quota_and_the_notes_go_to_stderr(cli: Cli, aws: AwsServer) -> None:
    run = ok(cli("resources", "-p", "aws", "-r", US, env=env(aws)))
    assert "family=Standard" in run.stdout and "cpu/vcpu" in run.stdout
    assert "quota/L-0263D0A3" in run.stdout  # a quota shoal cannot place is shown as it is
    assert "above its limit" in run.stderr and "above its limit" not in run.stdout


def test_a_second_call_is_answered_from_the_cache_and_offline_works(
    cli: Cli, aws: AwsServer
) -> None:
    ok(cli("resources", "-p", "aws", "-r", US, "--json", env=env(aws)))
    asked = len(aws.calls)
    ok(cli("resources", "-p", "aws", "-r", US, "--json", env=env(aws)))
    assert len(aws.calls) == asked
    no_credentials = {"SHOAL_AWS_EC2_URL": aws.base + "/nowhere/{region}"}
    run = ok(cli("resources", "-p", "aws", "-r", US, "--offline", "--json", env=no_credentials))
    assert json.loads(run.stdout)[0]["region"]["name"] == US
    ok(cli("resources", "-p", "aws", "-r", US, "--refresh", "--json", env=env(aws)))
    assert len(aws.calls) > asked


def test_all_regions_and_a_gpu_selection(cli: Cli, aws: AwsServer) -> None:
    run = ok(cli("resources", "-p", "aws", "--region", "all", "--json", env=env(aws)))
    assert sorted(r["region"]["name"] for r in json.loads(run.stdout)) == [EU, US]
    # H200s (p5en): the P family has no vCPUs left, but a capacity block holds four ahead:
    # the region answers with the items that speak for H200s.
    wanted = ("resources", "-p", "aws", "-r", US, "--select", "gpu=H200", "--json")
    (res,) = json.loads(ok(cli(*wanted, env=env(aws))).stdout)
    assert [(i["key"], i["value"]) for i in res["overview"]] == [
        ("family", "P"),
        ("reservations", "all"),
    ]
    # Nothing of the selection allocatable anywhere: no region, and stderr says why.
    run = ok(cli("resources", "-p", "aws", "-r", EU, "--select", "gpu=B200", env=env(aws)))
    assert "nothing allocatable for the selection" in run.stderr


def test_no_credentials_is_77_naming_the_variables(cli: Cli) -> None:
    run = cli("resources", "-p", "aws", "-r", US)
    assert run.exit_code == 77
    assert "AWS_ACCESS_KEY_ID" in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_one_refused_api_is_a_note_and_all_refused_is_77(cli: Cli, aws: AwsServer) -> None:
    aws.refuse[(US, "DescribeInstances")] = "UnauthorizedOperation"
    run = ok(cli("resources", "-p", "aws", "-r", US, "--json", env=env(aws)))
    (res,) = json.loads(run.stdout)
    assert any("ec2:DescribeInstances" in n for n in res["notes"])
    for action in (
        "DescribeInstances",
        "DescribeCapacityReservations",
        "ListServiceQuotas",
        "ListAWSDefaultServiceQuotas",
    ):
        aws.refuse[(US, action)] = "AccessDeniedException"
    run = cli("resources", "-p", "aws", "-r", US, "--refresh", env=env(aws))
    assert run.exit_code == 77 and SECRET not in run.stderr


def test_a_window_is_refused_before_any_request(cli: Cli, aws: AwsServer) -> None:
    run = cli("resources", "-p", "aws", "-r", US, "--start", "+1h", env=env(aws))
    assert run.exit_code == 2 and "scheduled" in run.stderr
    assert aws.calls == []


def test_pricing_available_keeps_what_the_quota_can_launch(cli: Cli, aws: AwsServer) -> None:
    wanted = ("pricing", "-p", "aws", "-r", US, "--select", "gpu_count>=1", "--json")
    every = json.loads(ok(cli(*wanted, env=env(aws))).stdout)
    run = ok(cli(*wanted, "--available", env=env(aws)))
    (kept,) = json.loads(run.stdout)
    # P is full (384 of 192 vCPUs used): no p5/p4d/p3 on demand; G and VT has room on demand.
    assert not {"p5.48xlarge", "p4d.24xlarge", "p4de.24xlarge", "p3.2xlarge"} & set(kept["items"])
    assert {"g5.xlarge", "g6.xlarge"} <= set(kept["items"])
    assert set(kept["items"]) < set(every[0]["items"])
    assert any("--available" in n and "p5.48xlarge" in n for n in kept["notes"])
    run = cli("pricing", "-p", "local", "--available")
    assert run.exit_code == 2 and "--available" in run.stderr


# -- azure and gcp, through the same CLI -------------------------------------------------


def test_azure_resources_and_available(cli: Cli) -> None:
    from tests.providers.apiserver import ApiServer
    from tests.providers.azure import account_payloads as a
    from tests.providers.azure import payloads as prices
    from tests.providers.azure.payloads import SUBSCRIPTION
    from tests.providers.azure.payloads import TOKEN as AZURE_TOKEN

    with ApiServer() as api:
        a.standard(api.base).serve(api)
        api.route(prices.PRICES_PATH, prices.PricesApi(prices.catalog(), base=api.base))
        api.route(prices.SKUS_PATH, lambda q, h: Reply.json({"value": []}))
        azure = {
            "SHOAL_AZURE_TOKEN": AZURE_TOKEN,
            "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
            "SHOAL_AZURE_MANAGEMENT_URL": api.base,
            "SHOAL_AZURE_PRICES_URL": api.base,
        }
        run = ok(cli("resources", "-p", "azure", "-r", "eastus", "--json", env=azure))
        (res,) = json.loads(run.stdout)
        assert res["provider"] == "azure" and res["region"]["name"] == "eastus"
        regional = family(res, "regional")["stat"]
        assert regional["onDemand"]["supply"]["cpu"]["vcpu"]
        assert "spot" in regional  # lowPriorityCores
        assert any(i["key"] == "reservations" for i in res["overview"])
        assert AZURE_TOKEN not in run.stdout + run.stderr
        every = json.loads(
            ok(cli("pricing", "-p", "azure", "-r", "eastus", "--json", env=azure)).stdout
        )
        run = ok(cli("pricing", "-p", "azure", "-r", "eastus", "--available", "--json", env=azure))
        (kept,) = json.loads(run.stdout)
        assert kept["items"] and set(kept["items"]) <= set(every[0]["items"])
        run = cli("resources", "-p", "azure", "-r", "eastus", env={})
        assert run.exit_code == 77 and "SHOAL_AZURE_TOKEN" in run.stderr


def test_gcp_resources_across_regions_with_a_gpu_selection(cli: Cli) -> None:
    from tests.providers.apiserver import ApiServer
    from tests.providers.gcp import account_payloads as g
    from tests.providers.gcp.payloads import PROJECT
    from tests.providers.gcp.payloads import TOKEN as GCP_TOKEN

    with ApiServer() as api:
        g.ProjectApi().serve(api)
        gcp = {
            "SHOAL_GCP_TOKEN": GCP_TOKEN,
            "SHOAL_GCP_PROJECT": PROJECT,
            "SHOAL_GCP_COMPUTE_URL": api.base,
        }
        run = ok(cli("resources", "-p", "gcp", "--region", "all", "--json", env=gcp))
        everywhere = json.loads(run.stdout)
        assert len(everywhere) == 3 and all(r["provider"] == "gcp" for r in everywhere)
        assert all(any(i["key"] == "account" for i in r["overview"]) for r in everywhere)
        run = ok(
            cli("resources", "-p", "gcp", "--region", "all", "-s", "gpu=H100", "--json", env=gcp)
        )
        with_h100 = json.loads(run.stdout)
        assert 0 < len(with_h100) <= 3
        for res in with_h100:
            (gpu,) = [i for i in res["overview"] if i["key"] == "family" and i["value"] == "gpu"]
            assert any(name.startswith("H100") for name in gpu["stat"]["onDemand"]["supply"]["gpu"])
        assert GCP_TOKEN not in run.stdout + run.stderr


# -- hostile input ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "variable",
    ["AWS_SESSION_TOKEN", "AWS_SECRET_ACCESS_KEY", "SHOAL_AZURE_TOKEN", "SHOAL_GCP_TOKEN"],
)
@pytest.mark.parametrize("broken", ["FIRSTHALF\nSECONDHALF", "tök€n-value"])
def test_a_credential_no_header_can_carry_is_77_without_its_value(
    cli: Cli, aws: AwsServer, variable: str, broken: str
) -> None:
    provider = {"SHOAL_AZURE_TOKEN": "azure", "SHOAL_GCP_TOKEN": "gcp"}.get(variable, "aws")
    more = {"AZURE_SUBSCRIPTION_ID": "sub", "SHOAL_GCP_PROJECT": "p", variable: broken}
    run = cli("resources", "-p", provider, "-r", "us-east-1", env=env(aws, **more))
    assert run.exit_code == 77 and variable in run.stderr
    assert "FIRSTHALF" not in run.stderr and "tök" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_a_wrapped_token_in_the_credentials_file_is_77_naming_the_file(
    cli: Cli, aws: AwsServer, tmp_path: Any
) -> None:
    credentials = tmp_path / "credentials"
    credentials.write_text(
        f"[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n"
        "aws_session_token = FIRSTHALF\n  SECONDHALF\n"
    )
    plain = {k: v for k, v in env(aws).items() if not k.startswith("AWS_")}
    run = cli(
        "resources", "-p", "aws", "-r", US,
        env={**plain, "AWS_SHARED_CREDENTIALS_FILE": str(credentials)},
    )  # fmt: skip
    assert run.exit_code == 77 and "aws_session_token" in run.stderr
    assert "FIRSTHALF" not in run.stderr and SECRET not in run.stderr


@pytest.mark.parametrize("region", ["x@127.0.0.1:1/steal#", "../x", "é", "US-EAST-1"])
def test_a_region_that_is_no_region_name_is_refused_before_any_request(
    cli: Cli, aws: AwsServer, region: str
) -> None:
    run = cli("resources", "-p", "aws", "-r", region, env=env(aws))
    assert run.exit_code == 2 and "not a region name" in run.stderr
    run = cli("resources", "-p", "aws", env=env(aws, AWS_REGION=region))
    assert run.exit_code == 2 and "not a region name" in run.stderr
    assert aws.calls == []


def test_an_edited_cache_row_says_to_refresh(cli: Cli, aws: AwsServer, home: Any) -> None:
    import sqlite3

    ok(cli("resources", "-p", "aws", "-r", US, env=env(aws)))
    (cache,) = list(home.rglob("catalog.sqlite"))
    with sqlite3.connect(cache) as db:
        row = db.execute("SELECT payload FROM account_snapshot").fetchone()[0]
        edited = row.replace('"limit": 640.0', '"limit": "640"')
        db.execute("UPDATE account_snapshot SET payload = ?", (edited,))
    run = cli("resources", "-p", "aws", "-r", US, "--offline", env=env(aws))
    assert run.exit_code == 1 and "--refresh" in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_terminal_control_characters_a_server_sent_are_shown_escaped(
    cli: Cli, aws: AwsServer
) -> None:
    from tests.providers.aws.quotaserver import quota

    aws.region(US).applied.append(quota("L-X\x1b[31mRED", 5.0, "Std\x1b]0;PWNED\x07"))
    run = ok(cli("resources", "-p", "aws", "-r", US, env=env(aws)))
    assert "\x1b" not in run.stdout + run.stderr and "\x07" not in run.stdout + run.stderr
    assert "quota/L-X\\x1b[31mRED" in run.stdout
