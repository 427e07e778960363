"""Azure credentials and subscription the way Azure's own tools find them (azure-identity's
DefaultAzureCredential: EnvironmentCredential, WorkloadIdentityCredential,
ManagedIdentityCredential, AzureCliCredential, in that order), for every Azure Resource
Manager read shoal makes (`resources -p azure`, the Resource SKUs behind prices, the azure
driver).

Credentials, the first found wins; finding them asks nothing (no request, no process), a
token is asked for at its first use:

1. `SHOAL_AZURE_TOKEN`: an ARM access token as it is (`az account get-access-token --query
   accessToken -o tsv`). First, before Azure's order: it is what shoal read before the
   chain and what its users and scripts set on purpose, for shoal alone, so it must keep
   winning over a service principal in the environment that is there for other tools, or a
   CLI login that happens to be on the machine. It cannot be renewed: a refused one is
   refused.
2. A service principal (EnvironmentCredential): `AZURE_TENANT_ID` + `AZURE_CLIENT_ID` with
   `AZURE_CLIENT_SECRET` (the client credentials grant), else with
   `AZURE_CLIENT_CERTIFICATE_PATH` (PEM or PKCS#12, `AZURE_CLIENT_CERTIFICATE_PASSWORD`
   when it has one: a signed client assertion, certificate.py), at
   `{AZURE_AUTHORITY_HOST}/{tenant}/oauth2/v2.0/token` (default authority
   https://login.microsoftonline.com).
3. Workload identity (AKS): `AZURE_FEDERATED_TOKEN_FILE` with `AZURE_CLIENT_ID` and
   `AZURE_TENANT_ID`: the file's token, read anew each time, as the client assertion.
   A secret, certificate or token file without the client and tenant ids is a
   CredentialsError (77) naming what is missing, never a silent move down the chain.
4. A managed identity (`AZURE_CLIENT_ID` picks a user-assigned one): App Service's endpoint
   when `IDENTITY_ENDPOINT` and `IDENTITY_HEADER` say so; else the instance metadata
   service at `AZURE_POD_IDENTITY_AUTHORITY_HOST` when it names one (azure-identity's own
   override; how tests point it at loopback), else at http://169.254.169.254 only when the
   machine says it is an Azure VM (its DMI chassis asset tag, read from a file; no probe,
   so nobody else waits for a service that is not there; `SHOAL_AZURE_NO_IMDS_CHECK=true`
   skips it). Found that way, a VM without an identity (the service refuses, or does not
   answer) moves on to 5., as DefaultAzureCredential does.
5. The Azure CLI's login: `az` on PATH and a login in its profile
   (`$AZURE_CONFIG_DIR/azureProfile.json`, default ~/.azure), then `az account
   get-access-token` at the first token (with `--subscription` when one is set for shoal).

`AZURE_TOKEN_CREDENTIALS` narrows 2.-5. as it narrows DefaultAzureCredential: `dev` (the
CLI), `prod` (2.-4.) or one credential's name (EnvironmentCredential,
WorkloadIdentityCredential, ManagedIdentityCredential, AzureCliCredential; the names of
credentials shoal does not read leave nothing but `SHOAL_AZURE_TOKEN`).

The subscription, the first found wins: `AZURE_SUBSCRIPTION_ID`, `[azure] subscription`
(or `subscription_id`, its older name), then the Azure CLI's default subscription (its
profile's `isDefault`, read from the file: no process).

Tokens: kept in memory for the process until 5 minutes before they expire (azure-core's
margin), and in `STATE/azure-tokens.json` (mode 0600; access tokens and their expiry only,
keyed by a SHA-256 of the identity: never a secret, key or assertion), so that one shoal
command after another neither signs, nor asks, nor runs `az` again; a 401 renews the token
once (`wire`). Messages name the variable, file, client and tenant and say the fix; no
secret, key, password, assertion, federated token or access token is ever in one: what an
endpoint says back is scrubbed of every one of them.

The order and the subscription are here; how each kind buys its token is grants.py's, the
tokens' keeping and the exchanges' errors tokens.py's.
"""

from __future__ import annotations

import ipaddress
import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from providers.azure import grants
from providers.azure.tokens import (
    CACHE_FILE,
    MAX_FILE_BYTES,
    PROVIDER,
    AzureCredentials,
    TokenFile,
)
from providers.core import urls
from providers.core.env import (
    ENV_AZURE_AUTHORITY_HOST,
    ENV_AZURE_CLIENT_CERTIFICATE_PASSWORD,
    ENV_AZURE_CLIENT_CERTIFICATE_PATH,
    ENV_AZURE_CLIENT_ID,
    ENV_AZURE_CLIENT_SECRET,
    ENV_AZURE_CONFIG_DIR,
    ENV_AZURE_FEDERATED_TOKEN_FILE,
    ENV_AZURE_IDENTITY_ENDPOINT,
    ENV_AZURE_IDENTITY_HEADER,
    ENV_AZURE_IMDS_AUTHORITY,
    ENV_AZURE_NO_IMDS_CHECK,
    ENV_AZURE_SUBSCRIPTION_ID,
    ENV_AZURE_TENANT_ID,
    ENV_AZURE_TOKEN,
    ENV_AZURE_TOKEN_CREDENTIALS,
    ENV_USER_HOME,
)
from providers.core.errors import ConfigError, CredentialsError, usable_credential

if TYPE_CHECKING:
    from providers.cloud.http import RetryPolicy
    from providers.core.settings import Settings

__all__ = ["AzureCredentials", "find_credentials", "find_subscription", "missing"]

DEFAULT_AUTHORITY = "https://login.microsoftonline.com"
DEFAULT_IMDS = "http://169.254.169.254"
# The chassis asset tag of every Azure VM ("MSFT AZURE VM" in ASCII codes), as cloud-init
# and Azure's own agents tell an Azure VM from a Hyper-V guest elsewhere.
ASSET_TAG_FILE = Path("/sys/class/dmi/id/chassis_asset_tag")
AZURE_ASSET_TAG = "7783-7084-3265-9085-8269-3286-77"
PROFILE_FILE = "azureProfile.json"
TENANT_LEVEL = "N/A(tenant level account)"  # `az login --allow-no-subscriptions`
PATH = "PATH"  # where `az` is looked for, as a shell would
NO_CREDENTIALS_FIX = (
    f"run `az login`, set {ENV_AZURE_TENANT_ID}, {ENV_AZURE_CLIENT_ID} and "
    f"{ENV_AZURE_CLIENT_SECRET} (or {ENV_AZURE_CLIENT_CERTIFICATE_PATH}) for a service "
    f"principal, or set {ENV_AZURE_TOKEN} to a bearer token for Azure Resource Manager "
    "(az account get-access-token --query accessToken -o tsv)"
)
NO_SUBSCRIPTION_FIX = (
    f"set {ENV_AZURE_SUBSCRIPTION_ID} (or [azure] subscription, or `az account set "
    "--subscription ID`) to the subscription id"
)

# AZURE_TOKEN_CREDENTIALS (lowercased) -> the parts of the chain it keeps.
_ENVIRONMENT, _WORKLOAD, _MANAGED, _CLI = "environment", "workload", "managed", "cli"
_EVERY = frozenset({_ENVIRONMENT, _WORKLOAD, _MANAGED, _CLI})
_NARROWED: dict[str, frozenset[str]] = {
    "dev": frozenset({_CLI}),
    "prod": frozenset({_ENVIRONMENT, _WORKLOAD, _MANAGED}),
    "environmentcredential": frozenset({_ENVIRONMENT}),
    "workloadidentitycredential": frozenset({_WORKLOAD}),
    "managedidentitycredential": frozenset({_MANAGED}),
    "azureclicredential": frozenset({_CLI}),
    # DefaultAzureCredential's others: nothing shoal reads.
    "visualstudiocodecredential": frozenset(),
    "azuredeveloperclicredential": frozenset(),
    "azurepowershellcredential": frozenset(),
    "interactivebrowsercredential": frozenset(),
    "brokercredential": frozenset(),
}
_TENANT_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.")


def missing(what: str, credentials: AzureCredentials | None, subscription: str) -> str:
    """The message for `what` (e.g. "a subscription's quotas") without credentials or a
    subscription."""
    if credentials is None and not subscription:
        return (
            f"azure: {what} need credentials and a subscription, and none were found; "
            f"{NO_CREDENTIALS_FIX}; and {NO_SUBSCRIPTION_FIX}"
        )
    if credentials is None:
        return f"azure: {what} need credentials, and none were found; {NO_CREDENTIALS_FIX}"
    return (
        f"azure: {what} need a subscription, and none was found for the credentials from "
        f"{credentials.where}; {NO_SUBSCRIPTION_FIX}"
    )


# -- the chain ---------------------------------------------------------------------------


def find_credentials(
    settings: Settings, *, policy: RetryPolicy | None = None
) -> AzureCredentials | None:
    """The credentials Azure's tools would use (the module's docstring), or None."""
    env = settings.env
    token = usable_credential(env.get(ENV_AZURE_TOKEN, "").strip(), ENV_AZURE_TOKEN)
    if token:
        return AzureCredentials(where=ENV_AZURE_TOKEN, kind="token", static=token)
    kept = narrowed(env)
    made: AzureCredentials | None = None
    guessed = False  # a managed identity of this VM that may not be there
    if _ENVIRONMENT in kept:
        made = _service_principal(env, policy)
    if made is None and _WORKLOAD in kept:
        made = _workload(env, policy)
    if made is None and _MANAGED in kept:
        made, guessed = _managed(env)
    if (made is None or guessed) and _CLI in kept:
        cli = _cli(settings)
        if made is None:
            made = cli
        else:
            made.fallback = cli
    if made is not None:
        cache = TokenFile(settings.paths.state_dir / CACHE_FILE)
        made.cache = cache
        if made.fallback is not None:
            made.fallback.cache = cache
    return made


def find_subscription(
    settings: Settings, credentials: AzureCredentials | None = None
) -> tuple[str, str]:
    """(the subscription, where it came from), ("", "") when nothing names one. The same
    whatever the credentials (the argument keeps the GCP chain's shape, where a key may name
    its project): a service principal reads the subscription named for shoal, else the
    CLI's default, as the CLI and azure-identity's users do."""
    subscription, where = _named_subscription(settings)
    if subscription:
        return subscription, where
    directory = cli_dir(settings.env)
    if directory is None:
        return "", ""
    path = directory / PROFILE_FILE
    for account in cli_profile(path)[1]:
        if account.get("isDefault") is True and _subscription_account(account):
            return str(account["id"]), f"the Azure CLI's default subscription ({path})"
    return "", ""


def narrowed(env: Mapping[str, str]) -> frozenset[str]:
    """The parts of the chain AZURE_TOKEN_CREDENTIALS keeps (all when it is not set)."""
    value = env.get(ENV_AZURE_TOKEN_CREDENTIALS, "").strip().lower()
    if not value:
        return _EVERY
    kept = _NARROWED.get(value)
    if kept is None:
        raise ConfigError(
            f"{ENV_AZURE_TOKEN_CREDENTIALS}={value[:40]!r} is not one of dev, prod or a "
            "credential's name (EnvironmentCredential, WorkloadIdentityCredential, "
            "ManagedIdentityCredential, AzureCliCredential); fix it, or unset it"
        )
    return kept


def _named_subscription(settings: Settings) -> tuple[str, str]:
    """The subscription set for shoal: AZURE_SUBSCRIPTION_ID, else the config file's."""
    value = settings.env.get(ENV_AZURE_SUBSCRIPTION_ID, "").strip()
    if value:
        return value, ENV_AZURE_SUBSCRIPTION_ID
    if PROVIDER not in settings.config:  # nothing to check: pydantic stays unimported
        return "", ""
    from providers.config import section

    table = section(settings, PROVIDER)
    new = (getattr(table, "subscription", None) or "").strip()
    old = (getattr(table, "subscription_id", None) or "").strip()
    if new and old and new != old:
        raise ConfigError(
            "[azure] subscription and [azure] subscription_id name different subscriptions; "
            "keep one (subscription)"
        )
    if new:
        return new, "[azure] subscription"
    return (old, "[azure] subscription_id") if old else ("", "")


# -- a service principal, a workload -----------------------------------------------------


def _service_principal(
    env: Mapping[str, str], policy: RetryPolicy | None
) -> AzureCredentials | None:
    secret = env.get(ENV_AZURE_CLIENT_SECRET, "")
    named = env.get(ENV_AZURE_CLIENT_CERTIFICATE_PATH, "").strip()
    if not secret.strip() and not named:
        return None
    given = ENV_AZURE_CLIENT_SECRET if secret.strip() else ENV_AZURE_CLIENT_CERTIFICATE_PATH
    tenant, client_id = _ids(env, given)
    url, place = _token_url(env, tenant)
    if secret.strip():
        secret = usable_credential(secret.strip(), ENV_AZURE_CLIENT_SECRET)
        return grants.client_secret(url, place, tenant, client_id, secret, policy)
    path = _expand(named, env)
    where = f"{ENV_AZURE_CLIENT_CERTIFICATE_PATH} ({path})"
    raw = _read_file(path, where, ENV_AZURE_CLIENT_CERTIFICATE_PATH)
    password = env.get(ENV_AZURE_CLIENT_CERTIFICATE_PASSWORD, "")
    return grants.client_certificate(url, place, tenant, client_id, path, raw, password, policy)


def _workload(env: Mapping[str, str], policy: RetryPolicy | None) -> AzureCredentials | None:
    named = env.get(ENV_AZURE_FEDERATED_TOKEN_FILE, "").strip()
    if not named:
        return None
    tenant, client_id = _ids(env, ENV_AZURE_FEDERATED_TOKEN_FILE)
    url, place = _token_url(env, tenant)
    return grants.workload_identity(url, place, tenant, client_id, _expand(named, env), policy)


def _ids(env: Mapping[str, str], given: str) -> tuple[str, str]:
    """AZURE_TENANT_ID and AZURE_CLIENT_ID, which `given` needs."""
    tenant = env.get(ENV_AZURE_TENANT_ID, "").strip()
    client_id = env.get(ENV_AZURE_CLIENT_ID, "").strip()
    named = ((ENV_AZURE_TENANT_ID, tenant), (ENV_AZURE_CLIENT_ID, client_id))
    lacking = " and ".join(name for name, value in named if not value)
    if lacking:
        raise CredentialsError(
            f"azure: {given} is set but {lacking} {'are' if ' and ' in lacking else 'is'} not; "
            f"set {lacking} (the app's directory (tenant) id and application (client) id), "
            f"or unset {given}"
        )
    if len(tenant) > 100 or any(c not in _TENANT_CHARACTERS for c in tenant):
        raise ConfigError(
            f"{ENV_AZURE_TENANT_ID} is not a tenant id (a GUID, or a domain such as "
            "contoso.onmicrosoft.com); set it to the directory (tenant) id"
        )
    if len(client_id) > 100 or not all("!" <= c <= "~" for c in client_id):
        raise ConfigError(
            f"{ENV_AZURE_CLIENT_ID} is not a client id (a GUID); set it to the application "
            "(client) id"
        )
    return tenant, client_id


def _token_url(env: Mapping[str, str], tenant: str) -> tuple[str, str]:
    """(the v2.0 token endpoint, the settings it comes from). The authority is https, as
    azure-identity requires it (https:// is added to a bare host), or http to this machine
    only (a test's stand-in): a secret never crosses the network in clear text."""
    given = env.get(ENV_AZURE_AUTHORITY_HOST, "").strip()
    if not given:
        return grants.token_url(DEFAULT_AUTHORITY, tenant), ENV_AZURE_TENANT_ID
    authority = given if "://" in given else f"https://{given}"
    authority = authority.rstrip("/")
    try:
        parsed = urls.parse(authority)
    except urls.UrlError as exc:
        raise ConfigError(
            f"{ENV_AZURE_AUTHORITY_HOST} is not a usable URL: {exc}; set it to an authority "
            f"such as {DEFAULT_AUTHORITY}, or unset it"
        ) from None
    if parsed.scheme != "https" and not _loopback(parsed.host):
        raise ConfigError(
            f"{ENV_AZURE_AUTHORITY_HOST} is not an https URL, and a credential would cross "
            f"the network in clear text; set it to an https authority such as "
            f"{DEFAULT_AUTHORITY}"
        )
    place = f"{ENV_AZURE_AUTHORITY_HOST} and {ENV_AZURE_TENANT_ID}"
    return grants.token_url(authority, tenant), place


# -- managed identities ------------------------------------------------------------------


def _managed(env: Mapping[str, str]) -> tuple[AzureCredentials | None, bool]:
    """(a managed identity, whether it is only guessed: this machine is an Azure VM, and
    nothing said it has an identity)."""
    client_id = env.get(ENV_AZURE_CLIENT_ID, "").strip()
    endpoint = env.get(ENV_AZURE_IDENTITY_ENDPOINT, "").strip()
    if endpoint:
        header = env.get(ENV_AZURE_IDENTITY_HEADER, "").strip()
        if not header:
            raise CredentialsError(
                f"azure: {ENV_AZURE_IDENTITY_ENDPOINT} is set without {ENV_AZURE_IDENTITY_HEADER} "
                "(as Azure Arc sets it: its managed identity, which shoal does not read); "
                f"run `az login`, use a service principal ({ENV_AZURE_CLIENT_ID}, ...), or "
                f"unset {ENV_AZURE_IDENTITY_ENDPOINT}"
            )
        _check_url(endpoint, ENV_AZURE_IDENTITY_ENDPOINT)
        return grants.app_service(endpoint, usable_credential(header, ENV_AZURE_IDENTITY_HEADER),
                                  client_id), False  # fmt: skip
    named = env.get(ENV_AZURE_IMDS_AUTHORITY, "").strip()
    if named:
        authority = (named if "://" in named else f"http://{named}").rstrip("/")
        _check_url(authority, ENV_AZURE_IMDS_AUTHORITY)
        where = _of(f"the managed identity at {ENV_AZURE_IMDS_AUTHORITY} "
                    f"({urls.display(authority)})", client_id)  # fmt: skip
        return grants.imds(authority, ENV_AZURE_IMDS_AUTHORITY, where, client_id), False
    if env.get(ENV_AZURE_NO_IMDS_CHECK, "").strip().lower() in ("1", "true", "yes"):
        return None, False
    if not on_azure_vm():
        return None, False
    where = _of(f"the managed identity of this Azure VM ({DEFAULT_IMDS})", client_id)
    place = "the instance metadata service of this Azure VM"
    return grants.imds(DEFAULT_IMDS, place, where, client_id), True


def on_azure_vm() -> bool:
    """Whether this machine says it is an Azure VM: read from a local file, no network."""
    try:
        tag = ASSET_TAG_FILE.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return False
    return tag == AZURE_ASSET_TAG


def _of(where: str, client_id: str) -> str:
    return f"{where[:-1]}; client {client_id})" if client_id else where


def _check_url(url: str, name: str) -> None:
    try:
        parsed = urls.parse(url)
    except urls.UrlError as exc:
        raise ConfigError(f"{name} is not a usable URL: {exc}; fix it, or unset it") from None
    if parsed.scheme not in ("http", "https"):
        raise ConfigError(f"{name} is not an http(s) URL; fix it, or unset it")


# -- the Azure CLI -----------------------------------------------------------------------


def _cli(settings: Settings) -> AzureCredentials | None:
    """The Azure CLI's login: `az` on PATH and an account in its profile (`az logout`
    leaves none), else None without running anything."""
    env = settings.env
    az = shutil.which("az", path=env.get(PATH, ""))
    directory = cli_dir(env)
    if az is None or directory is None:
        return None
    raw, accounts = cli_profile(directory / PROFILE_FILE)
    if not accounts:
        return None
    return grants.azure_cli(az, env, directory, raw, _named_subscription(settings)[0])


def cli_dir(env: Mapping[str, str]) -> Path | None:
    """The Azure CLI's directory: AZURE_CONFIG_DIR, else ~/.azure (None when the
    environment names no home, as a test's may not)."""
    named = env.get(ENV_AZURE_CONFIG_DIR, "").strip()
    if named:
        return _expand(named, env)
    home = env.get(ENV_USER_HOME, "").strip()
    return Path(home) / ".azure" if home else None


def cli_profile(path: Path) -> tuple[bytes, list[dict[str, Any]]]:
    """(the bytes of the CLI's azureProfile.json, its accounts): nothing when there is no
    such file. The CLI writes it with a byte order mark."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError:
        return b"", []
    try:
        doc = json.loads(raw.decode("utf-8-sig")) if len(raw) <= MAX_FILE_BYTES else None
    except (ValueError, RecursionError):
        doc = None
    accounts = doc.get("subscriptions") if isinstance(doc, dict) else None
    if not isinstance(accounts, list):
        raise ConfigError(
            f"{path}: not the Azure CLI's profile (JSON with a `subscriptions` list); run "
            f"`az login` again, or set {ENV_AZURE_SUBSCRIPTION_ID}"
        )
    return raw, [a for a in accounts if isinstance(a, dict)]


def _subscription_account(account: Mapping[str, Any]) -> bool:
    """An account of the profile that is a subscription (not a tenant-level login)."""
    name, value = account.get("name"), account.get("id")
    return isinstance(value, str) and bool(value.strip()) and name != TENANT_LEVEL


# -- files -------------------------------------------------------------------------------


def _expand(path: str, env: Mapping[str, str]) -> Path:
    home = env.get(ENV_USER_HOME, "")
    if home and (path == "~" or path.startswith("~/")):
        return Path(home) / path[2:]
    return Path(path)


def _read_file(path: Path, where: str, variable: str) -> bytes:
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise CredentialsError(
            f"azure: {where}: no such file; point {variable} at the certificate (with its "
            "private key), or unset it"
        ) from None
    except OSError as exc:
        raise CredentialsError(
            f"azure: {where}: cannot read it ({exc.strerror or type(exc).__name__}); fix its "
            "permissions or point at another file"
        ) from None
    if len(raw) > MAX_FILE_BYTES:
        raise ConfigError(f"{where}: larger than {MAX_FILE_BYTES:,} bytes; not a certificate")
    return raw


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
