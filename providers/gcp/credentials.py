"""GCP credentials and project the way Google's own tools find them (Application Default
Credentials: https://google.aip.dev/auth/4110, and google-auth's `google.auth.default`), for
every Compute Engine read shoal makes (`resources -p gcp`, machine shapes for prices, the
gcp driver).

Credentials, the first found wins; finding them asks no network (but the metadata server's
project, below), a token is asked for at its first use:

1. `SHOAL_GCP_TOKEN`: an access token as it is (`gcloud auth print-access-token`). First,
   before Google's order: it is what shoal read before ADC and what its users and scripts
   set on purpose, for shoal alone, so it must keep winning over a gcloud login that happens
   to be on the machine (gcloud's own explicit token, `--access-token-file`, beats ADC the
   same way). It cannot be renewed: a refused one is refused.
2. `GOOGLE_APPLICATION_CREDENTIALS`: a JSON file, by its `type`:
   - `service_account` (a key: https://google.aip.dev/auth/4112): a JWT {iss: client_email,
     scope, aud: https://oauth2.googleapis.com/token, iat, exp: iat + 1 h} signed RS256 with
     `private_key` (kid `private_key_id`), exchanged at `token_uri` (the same URL by
     default) with grant_type urn:ietf:params:oauth:grant-type:jwt-bearer (RFC 7523);
   - `authorized_user` (a user's login): the refresh_token grant (RFC 6749 6) with
     client_id and client_secret at Google's token endpoint, or at the file's `token_uri`
     when it has one (google-auth ignores it; gcloud's files never have one);
   - `external_account` (workload identity federation: https://google.aip.dev/auth/4117): a
     subject token from `credential_source` (`file`, or `url` with its `headers`; `format`
     text, or json with `subject_token_field_name`) exchanged at the STS `token_url` (RFC
     8693's token-exchange grant: audience, subject_token_type, the cloud-platform scope;
     client_id/client_secret as HTTP Basic when given, else `workforce_pool_user_project`
     as options.userProject), then, when `service_account_impersonation_url` is given, that
     token buys the service account's through IAM Credentials generateAccessToken
     (`service_account_impersonation.token_lifetime_seconds`, default 3600). AWS, executable
     and certificate sources are refused naming the kind;
   - `impersonated_service_account` (`gcloud auth application-default login
     --impersonate-service-account`): its `source_credentials` (a user or a key) buy the
     service account's token at `service_account_impersonation_url`, through `delegates`.
   A missing file is a CredentialsError (77), a malformed one a ConfigError (78).
3. gcloud's ADC file, `$CLOUDSDK_CONFIG/application_default_credentials.json` (default
   `~/.config/gcloud`), read as 2. when it exists.
4. The metadata server (a GCE VM's service account): GET
   http://HOST/computeMetadata/v1/instance/service-accounts/default/token with
   `Metadata-Flavor: Google` (https://cloud.google.com/compute/docs/access/authenticate-workloads).
   Asked only when `GCE_METADATA_HOST` names HOST, or, HOST metadata.google.internal, when
   the machine says it is a GCE VM (Linux: the DMI product name starts with "Google", as
   google-auth checks it; `NO_GCE_CHECK=true` says not to look): everyone else never waits
   for a server that is not there.

The project, the first found wins: `SHOAL_GCP_PROJECT`, `[gcp] project` (shoal's own, set
for shoal on purpose, as before ADC), `GOOGLE_CLOUD_PROJECT` (google-auth's explicit one,
which beats the credentials' there too), `CLOUDSDK_CORE_PROJECT` (gcloud's), the key's
`project_id`, gcloud's active configuration (`CLOUDSDK_ACTIVE_CONFIG_NAME`, else the file
`active_config`, else "default": `configurations/config_NAME`, `[core] project`), the
credentials' `quota_project_id` (the project they bill quota to), then the metadata
server's project-id when it gives the credentials.

Tokens: kept in memory for the process until 225 s before they expire (google-auth's
refresh threshold), and in `STATE/gcp-tokens.json` (mode 0600; access tokens and their
expiry only, keyed by a SHA-256 of the credentials file's bytes: never a key, refresh token
or client secret), so that one shoal command after another neither signs nor asks again; a
401 renews the token once (`wire`). A `quota_project_id` goes in `x-goog-user-project`, as
google-auth sends it. Messages name the file and field and say the fix; no key, token,
assertion, refresh token, client secret or subject token is ever in one: what an endpoint
says back is scrubbed of every one of them.

The order and the project are here; how each kind buys its token is grants.py's, and the
tokens' keeping and the exchanges' errors are tokens.py's.
"""

from __future__ import annotations

import configparser
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from providers.core.env import (
    ENV_GCP_APPLICATION_CREDENTIALS,
    ENV_GCP_CLOUD_PROJECT,
    ENV_GCP_CLOUDSDK_ACTIVE_CONFIG,
    ENV_GCP_CLOUDSDK_CONFIG,
    ENV_GCP_CLOUDSDK_PROJECT,
    ENV_GCP_METADATA_HOST,
    ENV_GCP_NO_GCE_CHECK,
    ENV_GCP_PROJECT,
    ENV_GCP_TOKEN,
    ENV_USER_HOME,
)
from providers.core.errors import ConfigError, CredentialsError, usable_credential
from providers.gcp.grants import (
    DEFAULT_METADATA_HOST,
    NO_PROJECT_FIX,
    from_document,
    metadata_credentials,
    metadata_project,
)
from providers.gcp.tokens import (
    CACHE_FILE,
    MAX_FILE_BYTES,
    PROVIDER,
    SCOPE,
    GcpCredentials,
    TokenFile,
)

if TYPE_CHECKING:
    from providers.cloud.http import RetryPolicy
    from providers.core.settings import Settings

__all__ = ["GcpCredentials", "find_credentials", "find_project", "missing"]

ADC_FILE = "application_default_credentials.json"
DMI_PRODUCT = Path("/sys/class/dmi/id/product_name")
NO_CREDENTIALS_FIX = (
    f"set {ENV_GCP_APPLICATION_CREDENTIALS} to a service-account key or credential "
    "configuration file, run `gcloud auth application-default login`, or set "
    f"{ENV_GCP_TOKEN} to an access token (gcloud auth print-access-token)"
)


def missing(what: str, credentials: GcpCredentials | None, project: str) -> str:
    """The message for `what` (e.g. "a project's quotas") without credentials or project."""
    if credentials is None and not project:
        return (
            f"gcp: {what} need credentials and a project, and none were found; "
            f"{NO_CREDENTIALS_FIX}; and {NO_PROJECT_FIX}"
        )
    if credentials is None:
        return f"gcp: {what} need credentials, and none were found; {NO_CREDENTIALS_FIX}"
    return (
        f"gcp: {what} need a project, and none was found for the credentials from "
        f"{credentials.where}; {NO_PROJECT_FIX}"
    )


# -- the chain ---------------------------------------------------------------------------


def find_credentials(
    settings: Settings, *, policy: RetryPolicy | None = None
) -> GcpCredentials | None:
    """The credentials Google's tools would use (the module's docstring), or None."""
    env = settings.env
    cache = TokenFile(settings.paths.state_dir / CACHE_FILE)
    token = usable_credential(env.get(ENV_GCP_TOKEN, "").strip(), ENV_GCP_TOKEN)
    if token:
        return GcpCredentials(where=ENV_GCP_TOKEN, kind="token", static=token)
    named = env.get(ENV_GCP_APPLICATION_CREDENTIALS, "").strip()
    if named:
        path = _expand(named, env)
        where = f"{ENV_GCP_APPLICATION_CREDENTIALS} ({path})"
        return _from_file(path, where, policy, cache)
    gcloud = gcloud_dir(env)
    adc = gcloud / ADC_FILE if gcloud is not None else None
    if adc is not None and adc.is_file():
        return _from_file(adc, f"gcloud's application default credentials ({adc})", policy, cache)
    host = metadata_host(env)
    if host:
        return metadata_credentials(host, policy, cache)
    return None


def find_project(settings: Settings, credentials: GcpCredentials | None) -> tuple[str, str]:
    """(the project, where it came from), ("", "") when nothing names one."""
    from providers.config import setting

    env = settings.env
    if env.get(ENV_GCP_PROJECT, "").strip():
        return env[ENV_GCP_PROJECT].strip(), ENV_GCP_PROJECT
    configured = setting(settings, PROVIDER, "project", ENV_GCP_PROJECT).strip()
    if configured:
        return configured, "[gcp] project"
    for name in (ENV_GCP_CLOUD_PROJECT, ENV_GCP_CLOUDSDK_PROJECT):
        if env.get(name, "").strip():
            return env[name].strip(), name
    if credentials is not None and credentials.project:
        return credentials.project, f"project_id in {credentials.where}"
    gcloud = gcloud_dir(env)
    if gcloud is not None:
        project, where = gcloud_project(gcloud, env)
        if project:
            return project, where
    if credentials is not None and credentials.quota_project:
        return credentials.quota_project, f"quota_project_id in {credentials.where}"
    if credentials is not None and credentials.metadata_url:
        return metadata_project(credentials), credentials.where
    return "", ""


def gcloud_dir(env: Mapping[str, str]) -> Path | None:
    """gcloud's configuration directory: CLOUDSDK_CONFIG, else ~/.config/gcloud (None when
    the environment names no home, as a test's may not)."""
    named = env.get(ENV_GCP_CLOUDSDK_CONFIG, "").strip()
    if named:
        return _expand(named, env)
    home = env.get(ENV_USER_HOME, "").strip()
    return Path(home) / ".config" / "gcloud" if home else None


def gcloud_project(gcloud: Path, env: Mapping[str, str]) -> tuple[str, str]:
    """`[core] project` of gcloud's active configuration, and where it was read."""
    name = env.get(ENV_GCP_CLOUDSDK_ACTIVE_CONFIG, "").strip()
    if not name:
        try:
            name = (gcloud / "active_config").read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            name = ""
    name = name or "default"
    if "/" in name or name.startswith("."):
        raise ConfigError(
            f"gcloud configuration name {name!r} ({ENV_GCP_CLOUDSDK_ACTIVE_CONFIG} or "
            f"{gcloud / 'active_config'}) is not a configuration name; `gcloud config "
            "configurations activate NAME` sets one"
        )
    path = gcloud / "configurations" / f"config_{name}"
    parser = configparser.RawConfigParser(strict=False)
    try:
        parser.read_string(path.read_text(encoding="utf-8"), source=str(path))
    except (FileNotFoundError, NotADirectoryError):
        return "", ""
    except (OSError, UnicodeDecodeError, configparser.Error):
        raise ConfigError(
            f"{path}: not a readable gcloud configuration (INI); fix it with `gcloud config "
            f"set project ID`, or set {ENV_GCP_PROJECT}"
        ) from None
    project = parser.get("core", "project", fallback="").strip()
    return project, f"gcloud configuration {name!r} ({path})"


def metadata_host(env: Mapping[str, str]) -> str:
    """The metadata server's host[:port] to ask, or "" when this is no GCE VM."""
    host = env.get(ENV_GCP_METADATA_HOST, "").strip()
    if host:
        if any(c in host for c in "/@?#\\") or not host.isprintable() or " " in host:
            raise ConfigError(
                f"{ENV_GCP_METADATA_HOST}={host[:60]!r} is not a host[:port]; set it to one "
                "such as 127.0.0.1:8080, or unset it"
            )
        return host
    if env.get(ENV_GCP_NO_GCE_CHECK, "").strip().lower() in ("1", "true", "yes"):
        return ""
    return DEFAULT_METADATA_HOST if on_gce() else ""


def on_gce() -> bool:
    """Whether this machine says it is a GCE VM: read from a local file, no network."""
    try:
        return DMI_PRODUCT.read_text(encoding="utf-8", errors="replace").startswith("Google")
    except OSError:
        return False


def _expand(path: str, env: Mapping[str, str]) -> Path:
    home = env.get(ENV_USER_HOME, "")
    if home and (path == "~" or path.startswith("~/")):
        return Path(home) / path[2:]
    return Path(path)


# -- credential files --------------------------------------------------------------------


def _from_file(
    path: Path, where: str, policy: RetryPolicy | None, cache: TokenFile
) -> GcpCredentials:
    raw = _read_file(path, where)
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        raise ConfigError(
            f"{where}: not JSON; point it at a credentials file (a service-account key, "
            "gcloud's application default credentials, or a credential configuration)"
        ) from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{where}: not a JSON object; not a credentials file")
    made = from_document(doc, where, policy)
    made.cache = cache
    made.cache_key = hashlib.sha256(b"gcp-adc\0" + SCOPE.encode() + b"\0" + raw).hexdigest()
    return made


def _read_file(path: Path, where: str) -> bytes:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise CredentialsError(
            f"{where}: no such file; point it at a credentials file, or unset "
            f"{ENV_GCP_APPLICATION_CREDENTIALS} to use gcloud's application default credentials"
        ) from None
    except OSError as exc:
        raise CredentialsError(
            f"{where}: cannot read it ({exc.strerror or type(exc).__name__}); fix its "
            "permissions or point at another file"
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{where}: larger than {MAX_FILE_BYTES:,} bytes; not a credentials file")
    return raw
