"""AWS credentials as the AWS CLI finds them, for the requests shoal signs itself.

Order (https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-envvars.html and
https://docs.aws.amazon.com/cli/latest/userguide/cli-configure-files.html):

1. `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` (+ `AWS_SESSION_TOKEN`) in the environment;
   one of the pair without the other is an error, as it is for the CLI.
2. the profile `AWS_PROFILE` ("default" when unset): its keys from the shared credentials
   file (`AWS_SHARED_CREDENTIALS_FILE`, default ~/.aws/credentials, section `[name]`), else
   from the config file (`AWS_CONFIG_FILE`, default ~/.aws/config, section `[profile name]`,
   or `[default]`), the credentials file winning key by key as in botocore.

The profile's `region` (config file) comes along. A profile named in AWS_PROFILE that
neither file has is a ConfigError (78), and so is a file that is not INI; nothing found at
all is None (the caller says which variables to set). A profile that gets its keys from
SSO, an assumed role or a credential process is refused with the command that exports
them: shoal signs with static keys only. No message quotes a file's values.
"""

from __future__ import annotations

import configparser
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from providers.aws.sigv4 import Credentials
from providers.core.env import (
    ENV_AWS_ACCESS_KEY_ID,
    ENV_AWS_CONFIG_FILE,
    ENV_AWS_PROFILE,
    ENV_AWS_SECRET_ACCESS_KEY,
    ENV_AWS_SESSION_TOKEN,
    ENV_AWS_SHARED_CREDENTIALS_FILE,
)
from providers.core.errors import ConfigError, CredentialsError, usable_credential

DEFAULT_PROFILE = "default"
KEY_ID, SECRET, TOKEN = "aws_access_key_id", "aws_secret_access_key", "aws_session_token"
# Keys of a profile whose credentials something else must produce first.
_INDIRECT = (
    "sso_session", "sso_start_url", "role_arn", "credential_process", "web_identity_token_file",
)  # fmt: skip
_NO_DEFAULT_SECTION = "\x00"  # configparser would merge a [DEFAULT] section into every profile


@dataclass(frozen=True)
class AwsCredentials:
    """Credentials found, where (`source`: "environment" or the file read), the profile
    they belong to ("" from the environment) and the profile's region ("" when none)."""

    credentials: Credentials
    source: str
    profile: str = ""
    region: str = ""


@dataclass(frozen=True)
class Profile:
    """The profile AWS_PROFILE names (or "default") as the two files have it."""

    name: str
    keys: Mapping[str, str]
    region: str
    files: tuple[Path, ...]  # the files read, credentials file first
    found_in: tuple[Path, ...]  # those that have the profile


def find_credentials(env: Mapping[str, str], *, home: Path | None = None) -> AwsCredentials | None:
    """The credentials the AWS CLI would use (see the module docstring), or None."""
    key_id = env.get(ENV_AWS_ACCESS_KEY_ID, "").strip()
    secret = env.get(ENV_AWS_SECRET_ACCESS_KEY, "").strip()
    if key_id or secret:
        if not (key_id and secret):
            missing = ENV_AWS_SECRET_ACCESS_KEY if key_id else ENV_AWS_ACCESS_KEY_ID
            raise PartialCredentialsError(missing, f"{missing} is not set")
        token = env.get(ENV_AWS_SESSION_TOKEN, "").strip()
        for name, value in (
            (ENV_AWS_ACCESS_KEY_ID, key_id),
            (ENV_AWS_SECRET_ACCESS_KEY, secret),
            (ENV_AWS_SESSION_TOKEN, token),
        ):
            usable_credential(value, name)
        return AwsCredentials(Credentials(key_id, secret, token), "environment")
    profile = load_profile(env, home=home)
    if profile is None:
        return None
    return _from_profile(profile)


def load_profile(env: Mapping[str, str], *, home: Path | None = None) -> Profile | None:
    """The profile AWS_PROFILE names (default "default") from the credentials and config
    files; None when the default profile is in neither. A named one missing is an error."""
    named = env.get(ENV_AWS_PROFILE, "").strip()
    name = named or DEFAULT_PROFILE
    base = home if home is not None else Path.home()
    credentials_file = _path(env, ENV_AWS_SHARED_CREDENTIALS_FILE, base, "credentials")
    config_file = _path(env, ENV_AWS_CONFIG_FILE, base, "config")
    keys: dict[str, str] = {}
    found: list[Path] = []
    region = ""
    config = _read(config_file)
    section = _config_section(config, name)
    if section is not None:
        found.append(config_file)
        keys.update(section)
        region = section.get("region", "").strip()
    credentials = _read(credentials_file)
    if credentials is not None and credentials.has_section(name):
        found.insert(0, credentials_file)
        keys.update(credentials[name])  # the credentials file wins, key by key
    files = (credentials_file, config_file)
    if not found:
        if named:
            raise ConfigError(
                f"AWS profile {name!r} ({ENV_AWS_PROFILE}) is in neither {credentials_file} "
                f"nor {config_file}; fix {ENV_AWS_PROFILE} or add the profile "
                f"(aws configure --profile {name})"
            )
        return None
    return Profile(name, {k: v.strip() for k, v in keys.items()}, region, files, tuple(found))


class PartialCredentialsError(CredentialsError):
    """Half of a key pair: `missing` names the variable or key that is not set."""

    def __init__(self, missing: str, message: str) -> None:
        super().__init__(message)
        self.missing = missing


def _from_profile(profile: Profile) -> AwsCredentials | None:
    where = " and ".join(str(p) for p in profile.found_in)
    key_id, secret = profile.keys.get(KEY_ID, ""), profile.keys.get(SECRET, "")
    if key_id and secret:
        for key in (KEY_ID, SECRET, TOKEN):
            named = f"{key} of AWS profile {profile.name!r} in {where}"
            usable_credential(profile.keys.get(key, ""), named)
        credentials = Credentials(key_id, secret, profile.keys.get(TOKEN, ""))
        return AwsCredentials(credentials, where, profile.name, profile.region)
    if key_id or secret:
        missing = SECRET if key_id else KEY_ID
        raise PartialCredentialsError(
            missing, f"AWS profile {profile.name!r} in {where} has no {missing}; add it"
        )
    indirect = [k for k in _INDIRECT if profile.keys.get(k)]
    if indirect:
        raise CredentialsError(
            f"AWS profile {profile.name!r} in {where} gets its credentials from "
            f"{indirect[0]}, which shoal does not run; export them first, e.g. "
            f'eval "$(aws configure export-credentials --profile {profile.name} --format env)"'
        )
    return None


def _path(env: Mapping[str, str], variable: str, home: Path, name: str) -> Path:
    given = env.get(variable, "").strip()
    if not given:
        return home / ".aws" / name
    if given == "~" or given.startswith("~/"):
        return home / given[2:]
    return Path(given)


def _read(path: Path) -> configparser.RawConfigParser | None:
    """The INI file at `path` (None when there is none). Raw: a secret's `%` is no
    interpolation. Errors name the file and a line, never a line's text (a secret)."""
    parser = configparser.RawConfigParser(strict=False, default_section=_NO_DEFAULT_SECTION)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read it ({reason}); fix or remove the file") from None
    try:
        parser.read_string(text, source=str(path))
    except configparser.MissingSectionHeaderError as exc:
        raise ConfigError(
            f"{path}: line {exc.lineno} comes before any [section] header; not an AWS "
            "credentials or config file"
        ) from None
    except configparser.ParsingError as exc:
        lines = ", ".join(str(number) for number, _ in exc.errors[:5])
        raise ConfigError(
            f"{path}: line(s) {lines} are not `key = value`; not a valid AWS credentials "
            "or config file"
        ) from None
    except configparser.Error as exc:
        raise ConfigError(
            f"{path}: not a valid AWS credentials or config file ({type(exc).__name__})"
        ) from None
    return parser


def _config_section(
    config: configparser.RawConfigParser | None, name: str
) -> dict[str, str] | None:
    """`[profile NAME]` of the config file (`[default]` or `[profile default]` for the
    default profile)."""
    if config is None:
        return None
    sections = (f"profile {name}", name) if name == DEFAULT_PROFILE else (f"profile {name}",)
    for section in sections:
        if config.has_section(section):
            return dict(config[section])
    return None
