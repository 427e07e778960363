"""A credential a server wraps with an escaped line break that is then quoted again: shoal
quotes a malformed payload value by its repr, which doubles the backslash of a `\\n` the value
holds (a JSON string inside a JSON string, or a server that escaped its own wrap). The text
then reads `eyAz...\\\\nSecret`: the break pattern took only the last backslash and its `n`,
left the first in the middle of the token, and the token was shown whole. The break pattern
now takes any number of backslashes before an escaped break."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from providers.core.errors import one_line
from tests.conftest import Run
from tests.faults.test_wrapped_secrets import (
    assert_clean,
    azure,  # noqa: F401  (a fixture)
    azure_resources,
    one_error,
)
from tests.providers.apiserver import ApiServer, Reply
from tests.providers.azure import account_payloads as a
from tests.providers.azure.payloads import TOKEN as AZURE_TOKEN

Cli = Callable[..., Run]


def test_azure_payload_value_wrapping_the_token_with_an_escaped_break(
    cli: Cli,
    azure: ApiServer,  # noqa: F811
) -> None:
    usage = {
        "name": {"value": "cores", "localizedValue": "Total Regional vCPUs"},
        "currentValue": 1,
        "limit": AZURE_TOKEN[:7] + "\\n" + AZURE_TOKEN[7:],  # a backslash and an n
        "unit": "Count",
    }
    azure.route(a.usages_path("eastus"), lambda q, h: Reply.json({"value": [usage]}))
    stderr = one_error(azure_resources(cli, azure), 1, AZURE_TOKEN)
    assert "limit" in stderr and "***" in stderr
    assert AZURE_TOKEN[7:27] not in stderr


@pytest.mark.parametrize("escaped", ["\\\\n", "\\\\r\\\\n", "\\\\\\\\n", "\\\\u000a"])
def test_one_line_finds_a_secret_whose_break_was_escaped_twice(escaped: str) -> None:
    secret = "eyAzureTokenSecretValue12345abcdefXYZ"
    text = f"bad value '{secret[:12]}{escaped}{secret[12:]}' for limit"
    shown = one_line(text, [secret])
    assert shown == "bad value '***' for limit"
    assert_clean(shown, secret)
