"""AWS credentials found as the AWS CLI finds them: the environment first, then the profile
of the shared credentials and config files (in a home directory the test makes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from providers.aws.accounts import AwsAccounts
from providers.aws.credentials import PartialCredentialsError, find_credentials
from providers.aws.fetch import AwsFetcher
from providers.core.env import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_CONFIG_FILE,
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_PROFILE,
    ENV_AWS_REGION,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_AWS_SESSION_TOKEN,
    ENV_AWS_SHARED_CREDENTIALS_FILE,
)
from providers.core.errors import ConfigError, CredentialsError
from providers.core.settings import Paths, Settings

SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
OTHER_SECRET = "se%cret/with+percent"

CREDENTIALS = f"""
# a comment
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = {SECRET}

[work]
aws_access_key_id = AKIDWORK
aws_secret_access_key = {OTHER_SECRET}
aws_session_token = token-of-work
"""
CONFIG = """
[default]
region = eu-central-1
output = json

[profile work]
region = ap-southeast-2
s3 =
    max_concurrent_requests = 20

[profile config-only]
aws_access_key_id = AKIDCONFIG
aws_secret_access_key = config-secret
region = us-west-2

[profile sso]
sso_session = corp
sso_account_id = 123456789012

[profile half]
aws_access_key_id = AKIDHALF
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text(CREDENTIALS)
    (aws / "config").write_text(CONFIG)
    return tmp_path


def test_the_environment_comes_first(home: Path) -> None:
    env = {
        ENV_AWS_ACCESS_KEY_ID: "AKIDENV",
        ENV_AWS_SECRET_ACCESS_KEY: "env-secret",
        ENV_AWS_SESSION_TOKEN: "env-token",
        ENV_AWS_PROFILE: "work",
    }
    found = find_credentials(env, home=home)
    assert found is not None
    assert (found.credentials.access_key_id, found.credentials.secret_access_key) == (
        "AKIDENV",
        "env-secret",
    )
    assert (found.credentials.session_token, found.source, found.profile) == (
        "env-token",
        "environment",
        "",
    )


def test_the_default_profile_with_its_region(home: Path) -> None:
    found = find_credentials({}, home=home)
    assert found is not None
    assert found.credentials.access_key_id == "AKIDDEFAULT"
    assert found.credentials.secret_access_key == SECRET
    assert (found.profile, found.region) == ("default", "eu-central-1")
    assert found.source.startswith(str(home / ".aws" / "credentials"))


def test_a_named_profile_carries_its_session_token(home: Path) -> None:
    found = find_credentials({ENV_AWS_PROFILE: "work"}, home=home)
    assert found is not None
    creds = found.credentials
    assert (creds.access_key_id, creds.secret_access_key, creds.session_token) == (
        "AKIDWORK",
        OTHER_SECRET,
        "token-of-work",  # `%` is no interpolation
    )
    assert found.region == "ap-southeast-2"
    assert OTHER_SECRET not in repr(found) and "token-of-work" not in repr(found)


def test_a_profile_of_the_config_file_alone(home: Path) -> None:
    found = find_credentials({ENV_AWS_PROFILE: "config-only"}, home=home)
    assert found is not None
    assert (found.credentials.access_key_id, found.region) == ("AKIDCONFIG", "us-west-2")


def test_the_files_can_be_elsewhere(tmp_path: Path) -> None:
    (tmp_path / "creds.ini").write_text(
        "[default]\naws_access_key_id=A1\naws_secret_access_key=s1\n"
    )
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "conf").write_text("[default]\nregion = sa-east-1\n")
    env = {
        ENV_AWS_SHARED_CREDENTIALS_FILE: str(tmp_path / "creds.ini"),
        ENV_AWS_CONFIG_FILE: "~/elsewhere/conf",  # ~ is the home given
    }
    found = find_credentials(env, home=tmp_path)
    assert found is not None and (found.credentials.access_key_id, found.region) == (
        "A1",
        "sa-east-1",
    )


def test_a_missing_named_profile_is_a_config_error(home: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        find_credentials({ENV_AWS_PROFILE: "nope"}, home=home)
    message = str(caught.value)
    assert "'nope'" in message and ENV_AWS_PROFILE in message
    assert (
        str(home / ".aws" / "credentials") in message and str(home / ".aws" / "config") in message
    )


def test_nothing_anywhere_is_none(tmp_path: Path) -> None:
    assert find_credentials({}, home=tmp_path) is None


@pytest.mark.parametrize(
    "text, said",
    [
        (f"aws_secret_access_key = {SECRET}\n[default]\n", "line 1 comes before any [section]"),
        (f"[default]\n{SECRET}\n", "line(s) 2 are not `key = value`"),
    ],
)
def test_a_malformed_file_is_one_line_naming_it_never_its_values(
    tmp_path: Path, text: str, said: str
) -> None:
    path = tmp_path / "credentials"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        find_credentials({ENV_AWS_SHARED_CREDENTIALS_FILE: str(path)}, home=tmp_path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and said in message
    assert SECRET not in message and "\n" not in message


def test_half_a_key_pair_names_what_is_missing(home: Path) -> None:
    with pytest.raises(PartialCredentialsError) as caught:
        find_credentials({ENV_AWS_ACCESS_KEY_ID: "AKID"}, home=home)
    assert caught.value.missing == ENV_AWS_SECRET_ACCESS_KEY
    with pytest.raises(PartialCredentialsError, match=r"'half' .* has no aws_secret_access_key"):
        find_credentials({ENV_AWS_PROFILE: "half"}, home=home)


def test_a_profile_whose_keys_come_from_sso_says_how_to_export_them(home: Path) -> None:
    with pytest.raises(CredentialsError, match=r"sso_session.*export-credentials --profile sso"):
        find_credentials({ENV_AWS_PROFILE: "sso"}, home=home)


# -- the fetchers that use them ------------------------------------------------------------------


def settings(home: Path, env: dict[str, str], config: dict[str, Any] | None = None) -> Settings:
    paths = Paths.from_env({"SHOAL_HOME": str(home)})
    return Settings(paths=paths, config=config or {}, env=env)


def test_spot_prices_sign_with_the_profile(home: Path) -> None:
    made = AwsFetcher.from_settings(settings(home, {ENV_AWS_PROFILE: "work"}), home=home)
    assert made.credentials is not None and made.credentials.access_key_id == "AKIDWORK"
    broken = AwsFetcher.from_settings(settings(home, {ENV_AWS_PROFILE: "nope"}), home=home)
    assert broken.credentials is None and "'nope'" in broken.credentials_note


def test_accounts_name_the_key_and_take_the_region_to_ask(home: Path) -> None:
    made = AwsAccounts.from_settings(settings(home, {ENV_AWS_PROFILE: "work"}), home=home)
    assert (made.account, made.default_region) == ("AKIDWORK", "ap-southeast-2")
    env = {ENV_AWS_PROFILE: "work", ENV_AWS_DEFAULT_REGION: "eu-west-3"}
    assert AwsAccounts.from_settings(settings(home, env), home=home).default_region == "eu-west-3"
    env[ENV_AWS_REGION] = "eu-north-1"
    assert AwsAccounts.from_settings(settings(home, env), home=home).default_region == "eu-north-1"
    config = {"aws": {"default_region": "ca-central-1"}}
    made = AwsAccounts.from_settings(settings(home, env, config), home=home)
    assert made.default_region == "ca-central-1"
    with pytest.raises(ConfigError, match="'nope'"):
        AwsAccounts.from_settings(settings(home, {ENV_AWS_PROFILE: "nope"}), home=home)
