"""Service Quotas pages read through their model (providers/aws/payloads.py): a page that is
not what the API reference says is one line naming the API, the field and what it held;
values no real quota has are left out and counted, never a failure; NaN and Infinity are
refused wherever they are; and only a fetch imports pydantic, never an answer from the
cache. Against the loopback AWS (quotaserver.py), in-process and through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.aws.account_parse import DEFAULTS, QUOTAS, quota_page
from providers.aws.sigv4 import Credentials
from providers.core.env import ENV_AWS_SESSION_TOKEN
from providers.core.errors import ShoalError
from tests.cli.test_imports import PROBE
from tests.conftest import Run, shoal_env
from tests.providers.aws.quotaserver import AwsServer, quota
from tests.providers.aws.test_accounts import CREDS, KEY_ID, SECRET, TOKEN, US, accounts, stock

Cli = Callable[..., Run]
STANDARD = "L-1216C47A"


@pytest.fixture
def aws() -> Iterator[AwsServer]:
    with AwsServer(CREDS, (US,)) as server:
        stock(server)
        yield server


def env(server: AwsServer) -> dict[str, str]:
    return {
        "SHOAL_DEBUG": "",
        "AWS_ACCESS_KEY_ID": KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": TOKEN,
        "SHOAL_AWS_EC2_URL": server.base + "/ec2/{region}",
        "SHOAL_AWS_QUOTAS_URL": server.base + "/sq/{region}",
    }


def changed(code: str, **fields: Any) -> dict[str, Any]:
    """A quota as ListServiceQuotas writes it, with `fields` changed (None: left out)."""
    entry = quota(code, 64.0) | fields
    return {k: v for k, v in entry.items() if v is not None or k not in fields}


def without(code: str, field: str) -> dict[str, Any]:
    return {k: v for k, v in quota(code, 64.0).items() if k != field}


# The stock list is 5 quotas, served 2 a page: a sixth is the second of the third page.
MALFORMED = [
    ({"Value": "64"}, "Quotas[1].Value: expected a number, got string '64'"),
    ({"Value": True}, "Quotas[1].Value: expected a number, got boolean true"),
    ({"Value": [64]}, "Quotas[1].Value: expected a number, got a list"),
    ({"QuotaCode": None}, "Quotas[1].QuotaCode: required"),
    ({"QuotaCode": 1216}, "Quotas[1].QuotaCode: expected a string, got integer 1216"),
    ({"QuotaName": 7}, "Quotas[1].QuotaName: expected a string, got integer 7"),
    ({"GlobalQuota": "yes"}, "Quotas[1].GlobalQuota: expected true or false, got string 'yes'"),
]


@pytest.mark.parametrize("fields, said", MALFORMED)
def test_a_malformed_quota_fails_the_region_naming_the_api_and_field(
    tmp_path: Path, aws: AwsServer, fields: dict[str, Any], said: str
) -> None:
    # Before the model, each of these was dropped or counted as "left out" without a word.
    aws.region(US).applied.append(changed("L-BROKEN01", **fields))
    with pytest.raises(ShoalError) as caught:
        accounts(tmp_path, aws).fetch([US])
    message = str(caught.value)
    assert message == (
        f"aws: us-east-1 ListServiceQuotas: malformed Service Quotas payload: {said}; "
        "nothing was cached from it"
    )


# A session token as STS writes them: hundreds of characters, '/' and '+' among them.
LONG_TOKEN = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD+" * 8


@pytest.mark.parametrize("echoed", [LONG_TOKEN, f"token={LONG_TOKEN}", LONG_TOKEN.lower()])
def test_a_session_token_echoed_in_a_field_is_never_shown(tmp_path: Path, echoed: str) -> None:
    # The message quotes a value cut at 60 characters: scrubbing the message afterwards
    # cannot find a token cut short, so the page is scrubbed before it is quoted.
    with AwsServer(Credentials(KEY_ID, SECRET, LONG_TOKEN), (US,)) as server:
        stock(server)
        server.region(US).applied.append(changed("L-ECHOED01", Value=echoed))
        made = accounts(tmp_path, server, **{ENV_AWS_SESSION_TOKEN: LONG_TOKEN})
        with pytest.raises(ShoalError) as caught:
            made.fetch([US])
    message = str(caught.value)
    assert "Quotas[1].Value: expected a number, got string '" in message, message
    assert "***" in message and LONG_TOKEN[:12].lower() not in message.lower(), message


def test_a_malformed_defaults_page_names_its_own_api(tmp_path: Path, aws: AwsServer) -> None:
    aws.region(US).defaults.insert(0, without("L-NOCODE02", "QuotaCode"))
    with pytest.raises(ShoalError, match=r"^aws: us-east-1 ListAWSDefaultServiceQuotas: "):
        accounts(tmp_path, aws).fetch([US])


def test_the_cli_says_a_malformed_quota_page_in_one_line(cli: Cli, aws: AwsServer) -> None:
    aws.region(US).applied.append(quota("L-STRING01", 64.0) | {"Value": "64"})
    run = cli("resources", "-p", "aws", "-r", US, "--json", env=env(aws))
    assert run.exit_code == 1 and run.stdout == "", run.stderr
    assert run.stderr == (
        "shoal: error: aws: us-east-1 ListServiceQuotas: malformed Service Quotas payload: "
        "Quotas[1].Value: expected a number, got string '64'; nothing was cached from it\n"
    )
    assert SECRET not in run.stderr and TOKEN not in run.stderr
    # Nothing was cached: the next call asks again.
    asked = len(aws.calls_to("ListServiceQuotas"))
    assert cli("resources", "-p", "aws", "-r", US, "--json", env=env(aws)).exit_code == 1
    assert len(aws.calls_to("ListServiceQuotas")) > asked


def test_a_quota_without_a_value_or_with_none_a_quota_has_is_left_out_and_counted(
    tmp_path: Path, aws: AwsServer
) -> None:
    aws.region(US).applied += [
        without("L-NOVALUE1", "Value"),
        quota("L-NULLVAL1", 1.0) | {"Value": None},
        quota("L-HUGE0003", 1.0) | {"Value": 10**400},
    ]
    [snap] = accounts(tmp_path, aws).fetch([US])
    codes = {q.code for q in snap.quotas}
    assert STANDARD in codes and not {"L-NOVALUE1", "L-NULLVAL1", "L-HUGE0003"} & codes
    assert any(n.startswith("3 ec2 quota(s) left out") for n in snap.notes), snap.notes


# -- one page, from its bytes ------------------------------------------------------------------


def page(*quotas: dict[str, Any], **more: Any) -> bytes:
    return json.dumps({"Quotas": list(quotas), **more}).encode()


def test_a_page_reads_as_its_quotas_and_next_token() -> None:
    read, token = quota_page(page(quota(STANDARD, 640.0), NextToken="abc"), QUOTAS, "aws")
    assert token == "abc" and read[0]["QuotaCode"] == STANDARD and read[0]["Value"] == 640.0
    assert quota_page(b"{}", QUOTAS, "aws") == ([], "")
    assert quota_page(page(NextToken=None), QUOTAS, "aws") == ([], "")


def one(value: bytes, more: bytes = b"") -> bytes:
    """A page of one quota whose Value is written `value`, and `more` fields after it."""
    return b'{"Quotas": [{"QuotaCode": "L-1", "Value": ' + value + more + b"}]}"


HUGE = b"1" + b"0" * 400  # an integer no float holds


@pytest.mark.parametrize(
    "raw, value",
    [
        (one(b"12"), 12.0),
        (one(b"1e400"), float("inf")),
        (one(b"-1e400"), float("-inf")),
        (one(HUGE), float("inf")),
        (one(b"-" + HUGE), float("-inf")),
        # The constants' names inside a string are text: the page is read all the same (the
        # way json.loads reads it, where an integer no float holds is an int).
        (one(b"2", b', "QuotaName": "NaN or Infinity"'), 2.0),
        (one(HUGE, b', "Unit": "NaN"'), float("inf")),
    ],
)
def test_numbers_past_any_quota_read_as_numbers_for_the_reader_to_leave_out(
    raw: bytes, value: float
) -> None:
    [read], _ = quota_page(raw, QUOTAS, "aws")
    assert read.get("Value") == value


@pytest.mark.parametrize(
    "raw, said",
    [
        (one(b"Infinity"), "Infinity is not a number"),
        (one(b"-Infinity"), "-Infinity is not a number"),
        (one(b"NaN"), "NaN is not a number"),
        # Not a field shoal reads, still not JSON: the page is refused, as before the model.
        (one(b"1", b', "Period": {"PeriodValue": NaN}'), "NaN is not a number"),
        (b'{"Quotas": [', "malformed ListAWSDefaultServiceQuotas response (Expecting value"),
    ],
)
def test_nan_infinity_and_broken_json_are_refused_as_json(raw: bytes, said: str) -> None:
    with pytest.raises(ShoalError, match=r"^malformed ListAWSDefaultServiceQuotas response") as e:
        quota_page(raw, DEFAULTS, "aws")
    assert said in str(e.value)


@pytest.mark.parametrize(
    "raw, said",
    [
        (b"[]", "malformed Service Quotas payload: expected an object, got a list"),
        (b'{"Quotas": null}', "Quotas: expected a list, got nothing (null)"),
        (b'{"Quotas": [5]}', "Quotas[0]: expected an object, got integer 5"),
        (b'{"Quotas": [{"QuotaCode": ""}]}', "Quotas[0].QuotaCode: must not be empty"),
        (b'{"Quotas": [], "NextToken": 5}', "NextToken: expected a string, got integer 5"),
    ],
)
def test_a_page_shaped_otherwise_names_the_field(raw: bytes, said: str) -> None:
    with pytest.raises(ShoalError, match=r"^aws: malformed Service Quotas payload: ") as e:
        quota_page(raw, QUOTAS, "aws")
    assert said in str(e.value)


# -- imports -----------------------------------------------------------------------------------


def modules(home: Path, *args: str, env: dict[str, str]) -> tuple[set[str], str]:
    """The top-level packages `shoal ARGS` imported, and what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        env=shoal_env(home, env),
        check=True,
    )
    line = [ln for ln in done.stderr.splitlines() if ln.startswith("MODULES ")][-1]
    return {m.split(".")[0] for m in json.loads(line[len("MODULES ") :])}, done.stdout


def test_a_fetch_imports_pydantic_an_answer_from_the_cache_does_not(
    home: Path, aws: AwsServer
) -> None:
    def families(said: str) -> list[Any]:  # the quotas (a reservation's window moves on)
        return [i for i in json.loads(said)[0]["overview"] if i["key"] == "family"]

    ask = ["resources", "-p", "aws", "-r", US, "--json"]
    fetched, said = modules(home, *ask, env=env(aws))
    assert "pydantic" in fetched and families(said)
    asked = len(aws.calls)
    for cached in ([*ask, "--offline"], ask):  # --offline, then a fresh cache
        loaded, again = modules(home, *cached, env=env(aws))
        assert "pydantic" not in loaded and families(again) == families(said)
    assert len(aws.calls) == asked
