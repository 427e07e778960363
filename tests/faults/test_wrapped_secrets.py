"""Credentials a server echoes wrapped across lines (issue 21, break 8).

A server wraps long lines: the credential it echoes comes back as `tok-ver` on one line and
`y-secret-123` on the next, or with `\\n` inside a JSON string, or inside base64 wrapped at
76 columns. Messages are collapsed onto one line, which would join the pieces by a space
that no exact match sees. No piece-wise or joined form may reach a message: the checks
below remove every whitespace and escaped line break from what is shown before looking.

Through the CLI over loopback servers (Azure's Resource Manager with its bearer token, the
AWS EC2 API with its secret key and session token), and the "unexpected ..." line of an
unforeseen exception quoting a credential from the environment.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from providers import registry as catalog
from providers.core.errors import one_line, scrub
from providers.core.settings import Settings
from tests.conftest import Run
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.aws import quotaserver
from tests.providers.aws.quotaserver import AwsServer
from tests.providers.aws.test_accounts import CREDS, KEY_ID, SECRET, TOKEN
from tests.providers.azure import account_payloads as a
from tests.providers.azure.payloads import SUBSCRIPTION
from tests.providers.azure.payloads import TOKEN as AZURE_TOKEN

Cli = Callable[..., Run]
NO_DEBUG = {"SHOAL_DEBUG": ""}
PASSWORD = "Pw-q7Zx+NEVER~PRINT=9k2"
_BREAKS = re.compile(r"\s+|\\[nrt]|\\u00(?:0[9ad]|20)", re.IGNORECASE)


def joined(text: str) -> str:
    """`text` with every whitespace and escaped line break gone: a secret split by them
    shows here whole."""
    return _BREAKS.sub("", text)


def assert_clean(text: str, *secrets: str) -> None:
    for secret in secrets:
        flat = joined(text)
        assert secret not in flat and secret.lower() not in flat.lower(), text
        wrapped = base64.b64encode(secret.encode()).decode().rstrip("=")
        assert wrapped not in flat, text


def wrap(secret: str, at: int, gap: str = "\n") -> str:
    return secret[:at] + gap + secret[at:]


def b64_wrapped(text: str, width: int = 8) -> str:
    encoded = base64.b64encode(text.encode()).decode()
    return "\r\n".join(encoded[i : i + width] for i in range(0, len(encoded), width))


# -- the shared scrub ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "echoed",
    [
        wrap(PASSWORD, 9),
        wrap(PASSWORD, 1, "\r\n    "),
        wrap(wrap(PASSWORD, 4, " "), 15, "\t"),
        wrap(PASSWORD.upper(), 12),
        "\n".join(PASSWORD),  # one character a line
        json.dumps(wrap(PASSWORD, 9))[1:-1],  # inside a JSON string: a literal \n
        repr(wrap(PASSWORD, 9)),  # a value's repr in a payload error
        wrap(PASSWORD, 9, "\\u000a"),
        b64_wrapped(f"ci:{PASSWORD}"),  # basic auth echoed as wrapped base64
    ],
    ids=lambda s: repr(s)[:20],
)
def test_scrub_finds_a_secret_wrapped_across_lines(echoed: str) -> None:
    text = one_line(f"HTTP 400\n{echoed}\n(server said)", [PASSWORD])
    assert text.startswith("HTTP 400 ") and text.endswith(" (server said)") and "***" in text
    assert "\n" not in text
    assert_clean(text, PASSWORD)


def test_a_secret_with_a_space_is_found_however_the_space_was_wrapped() -> None:
    secret = "correct horse battery"
    for echoed in (
        "correct\nhorse  battery",
        "correct+horse\r\n battery",
        "cor rect horse\tbattery",
    ):
        assert one_line(f"said: {echoed}.", [secret]) == "said: ***."


def test_wrapped_scrub_leaves_ordinary_text_alone() -> None:
    text = "HTTP 403 (the caller lacks Microsoft.Compute/locations/usages/read\non eastus)"
    assert scrub(text, [PASSWORD, AZURE_TOKEN]) == text
    assert one_line(text, [PASSWORD]) == " ".join(text.split())
    assert one_line("a\n  b  c", [], 3) == "a b"


def test_a_secret_with_its_own_backslashes_is_still_found() -> None:
    secret = r"dom\nick\tpw"  # a literal backslash and a letter, not a line break
    assert one_line(f"x {secret} y {json.dumps(secret)[1:-1]} z", [secret]) == "x *** y *** z"
    assert one_line(f"x {wrap(secret, 4)} y", [secret]) == "x *** y"


HOSTILE = [
    ("Pw-q7Zx+NEVER~PRINT=9k2", "P" + " " * 65536),
    ("correct horse battery staple", "correct" + " " * 65536 + "horse" + " " * 65536),
    ("a \\nb\\nc", "a " + "\\n" * 32768),
    ("x\\ny\\nz", "x" + "\\n" * 32768),
]


def test_scrubbing_a_hostile_answer_of_whitespace_ends() -> None:
    # A wrapped secret is looked for across runs of whitespace: a regex that could split a
    # run more than one way takes exponential (or quadratic) time on these. Bounded wait.
    import subprocess
    import sys

    code = (
        "import json, sys; from providers.core.errors import scrub\n"
        "for secret, text in json.load(sys.stdin): scrub(text, [secret])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(HOSTILE), text=True, timeout=60,
        cwd=Path(__file__).resolve().parents[2], capture_output=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


# -- azure: the bearer token in an error body, and in a payload error --------------------


@pytest.fixture
def azure() -> Iterator[ApiServer]:
    with ApiServer() as api:
        a.standard(api.base).serve(api)
        yield api


def azure_resources(cli: Cli, api: ApiServer) -> Run:
    env = {
        **NO_DEBUG,
        "SHOAL_AZURE_TOKEN": AZURE_TOKEN,
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": api.base,
    }
    return cli("resources", "-p", "azure", "-r", "eastus", "--refresh", env=env)


def one_error(run: Run, code: int, *secrets: str) -> str:
    assert run.exit_code == code, run.stderr
    assert "unexpected" not in run.stderr, run.stderr
    assert run.stderr.startswith("shoal: error: ") and run.stderr.count("\n") == 1, run.stderr
    assert_clean(run.stdout + run.stderr, *secrets)
    return run.stderr


@pytest.mark.parametrize("gap", ["\n", "\r\n  ", " ", "\t"])
def test_azure_error_body_wrapping_the_bearer_token(cli: Cli, azure: ApiServer, gap: str) -> None:
    said = f"The access token Bearer {wrap(AZURE_TOKEN, 7, gap)} is not authorized"
    body = {"error": {"code": "AuthorizationFailed", "message": said}}
    azure.route(a.usages_path("eastus"), lambda q, h: Reply.json(body, 403))
    stderr = one_error(azure_resources(cli, azure), 77, AZURE_TOKEN)
    assert "HTTP 403" in stderr and "Bearer ***" in stderr


def test_azure_payload_value_wrapping_the_bearer_token(cli: Cli, azure: ApiServer) -> None:
    # A malformed value is quoted (its repr: the line break as \n) in the error that names it.
    usage = {
        "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"},
        "currentValue": 1,
        "limit": wrap(AZURE_TOKEN, 7),
        "unit": "Count",
    }
    azure.route(a.usages_path("eastus"), lambda q, h: Reply.json({"value": [usage]}))
    stderr = one_error(azure_resources(cli, azure), 1, AZURE_TOKEN)
    assert "limit" in stderr and "***" in stderr


# -- aws: the secret key and the session token in an EC2 error ----------------------------


class EchoingAws(AwsServer):
    """AWS that refuses every call quoting the credentials it was sent, wrapped."""

    said = f"SessToken {wrap(TOKEN, 9)} SecretKey {wrap(SECRET, 20, chr(13) + chr(10) + '   ')}"

    def _fault(self, *args: Any, json_api: bool, **kwargs: Any) -> Reply | None:
        return quotaserver._error(json_api, 400, "InvalidParameterValue", self.said)


def test_aws_error_wrapping_the_secret_key_and_session_token(cli: Cli) -> None:
    with EchoingAws(CREDS, ("us-east-1",)) as api:
        env = {
            **NO_DEBUG,
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_SESSION_TOKEN": TOKEN,
            "SHOAL_AWS_EC2_URL": api.base + "/ec2/{region}",
            "SHOAL_AWS_QUOTAS_URL": api.base + "/sq/{region}",
        }
        run = cli("resources", "-p", "aws", "-r", "us-east-1", "--refresh", env=env)
    stderr = one_error(run, 1, SECRET, TOKEN)
    assert "SessToken ***" in stderr


# -- the "unexpected ..." line ---------------------------------------------------------------


@pytest.fixture
def buggy() -> Iterator[str]:
    """A provider whose catalog fails with an exception nobody foresaw, quoting a credential
    from the environment wrapped across lines."""

    def factory(settings: Settings) -> Any:
        raise RuntimeError(f"upstream said: Bearer {wrap(PASSWORD, 6)}\nand closed")

    catalog.register("buggy-wrapped", factory)
    yield "buggy-wrapped"
    catalog._REGISTRY._registered.pop("buggy-wrapped", None)


def test_unexpected_error_line_scrubs_a_wrapped_environment_secret(cli: Cli, buggy: str) -> None:
    run = cli("regions", "--provider", buggy, env={**NO_DEBUG, "SHOAL_THING_TOKEN": PASSWORD})
    assert run.exit_code == 1
    assert "unexpected RuntimeError: upstream said: Bearer *** and closed" in run.stderr
    assert_clean(run.stderr, PASSWORD)
