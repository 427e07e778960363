"""How each kind of Azure credentials buys an access token for Azure Resource Manager (the
kinds and their order are credentials.py's to say):

- a service principal's client secret, or its certificate's signed assertion
  (certificate.py), or a workload's federated token (the file AKS workload identity mounts,
  read anew each time: it is rotated), each in the client credentials grant at the
  Microsoft identity platform's v2.0 token endpoint, `{authority}/{tenant}/oauth2/v2.0/token`
  (https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow);
- a managed identity: the instance metadata service of an Azure VM (GET
  /metadata/identity/oauth2/token, api-version 2018-02-01, `Metadata: true`:
  https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token),
  or App Service's endpoint (IDENTITY_ENDPOINT, api-version 2019-08-01, the
  `X-IDENTITY-HEADER`: https://learn.microsoft.com/azure/app-service/overview-managed-identity);
- the Azure CLI's login: `az account get-access-token --resource ... --output json`, as
  azure-identity's AzureCliCredential runs it.

Each returns AzureCredentials whose `mint` asks for a token; none asks anything before.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from providers.azure.tokens import (
    MAX_FILE_BYTES,
    RESOURCE,
    SCOPE,
    AzureCredentials,
    Token,
    access_token,
    exchange,
    expiry,
    usable,
)
from providers.core.env import (
    ENV_AZURE_CLIENT_CERTIFICATE_PATH,
    ENV_AZURE_CLIENT_ID,
    ENV_AZURE_CLIENT_SECRET,
    ENV_AZURE_FEDERATED_TOKEN_FILE,
    ENV_AZURE_IDENTITY_ENDPOINT,
    ENV_AZURE_SUBSCRIPTION_ID,
)
from providers.core.errors import CredentialsError, RetryableError, ShoalError, one_line

if TYPE_CHECKING:
    from providers.cloud.http import RetryPolicy

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
IMDS_TOKEN_PATH = "/metadata/identity/oauth2/token"
IMDS_API_VERSION = "2018-02-01"
APP_SERVICE_API_VERSION = "2019-08-01"
CLI_SECONDS = 30.0  # az starts Python and may refresh its login over the network
_NEW_SECRET = "create a new one (az ad app credential reset --id CLIENT_ID --append)"


# -- the client credentials grant ---------------------------------------------------------


def token_url(authority: str, tenant: str) -> str:
    return f"{authority}/{quote(tenant, safe='')}/oauth2/v2.0/token"


def client_secret(
    url: str, place: str, tenant: str, client_id: str, secret: str, policy: RetryPolicy | None
) -> AzureCredentials:
    where = f"{ENV_AZURE_CLIENT_SECRET} (client {client_id}, tenant {tenant})"

    def mint() -> Token:
        got = exchange(
            "POST",
            url,
            what=f"the client secret in {where}",
            place=place,
            fix=(
                f"the secret may be wrong or expired, or {ENV_AZURE_CLIENT_ID} may name no "
                f"app of that tenant: {_NEW_SECRET} and set {ENV_AZURE_CLIENT_SECRET}"
            ),
            secrets=[secret],
            policy=policy,
            form={
                "grant_type": "client_credentials",
                "client_id": client_id,
                "client_secret": secret,
                "scope": SCOPE,
            },
        )
        return access_token(got, url)

    key = _key(b"azure-secret", url, client_id, secret)
    return AzureCredentials(where=where, kind="client_secret", mint=mint, cache_key=key)


def client_certificate(
    url: str,
    place: str,
    tenant: str,
    client_id: str,
    path: Path,
    raw: bytes,
    password: str,
    policy: RetryPolicy | None,
) -> AzureCredentials:
    where = f"{ENV_AZURE_CLIENT_CERTIFICATE_PATH} ({path}; client {client_id}, tenant {tenant})"

    def mint() -> Token:
        from providers.azure.certificate import client_assertion

        assertion = client_assertion(raw, password, client_id, url, where)
        got = exchange(
            "POST",
            url,
            what=f"the certificate in {where}",
            place=place,
            fix=(
                "the certificate may not be one of the app's credentials (az ad app credential "
                "reset --id CLIENT_ID --cert @FILE --append), may have expired, or this "
                "machine's clock is off"
            ),
            secrets=[assertion, *assertion.split("."), password],
            policy=policy,
            form=_assertion_form(client_id, assertion),
        )
        return access_token(got, url)

    key = _key(b"azure-certificate", url, client_id, password, raw.decode("latin-1"))
    return AzureCredentials(where=where, kind="client_certificate", mint=mint, cache_key=key)


def workload_identity(
    url: str, place: str, tenant: str, client_id: str, path: Path, policy: RetryPolicy | None
) -> AzureCredentials:
    where = f"{ENV_AZURE_FEDERATED_TOKEN_FILE} ({path}; client {client_id}, tenant {tenant})"

    def mint() -> Token:
        assertion = federated_token(path, where)
        got = exchange(
            "POST",
            url,
            what=f"the federated token of {where}",
            place=place,
            fix=(
                "check the app's (or managed identity's) federated credential: its issuer, "
                "subject and audience (api://AzureADTokenExchange) must be the token's; and "
                "that the token in the file is current"
            ),
            secrets=[assertion, *assertion.split(".")],
            policy=policy,
            form=_assertion_form(client_id, assertion),
        )
        return access_token(got, url)

    key = _key(b"azure-federated", url, client_id, str(path))
    return AzureCredentials(where=where, kind="workload_identity", mint=mint, cache_key=key)


def federated_token(path: Path, where: str) -> str:
    """The workload's token, read anew (whoever mounts it rotates it)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise CredentialsError(
            f"azure: {where} cannot be read ({exc.strerror or type(exc).__name__}); the "
            f"workload's token is not there: check what mounts it, or unset "
            f"{ENV_AZURE_FEDERATED_TOKEN_FILE}"
        ) from None
    value = raw[:MAX_FILE_BYTES].decode("utf-8", "replace").strip()
    if not value or len(raw) > MAX_FILE_BYTES or not usable(value):
        raise CredentialsError(
            f"azure: {where} holds no token (empty, or not one line of printable ASCII); "
            "check what writes it"
        )
    return value


def _assertion_form(client_id: str, assertion: str) -> dict[str, str]:
    return {
        "grant_type": "client_credentials",
        "client_id": client_id,
        "scope": SCOPE,
        "client_assertion_type": CLIENT_ASSERTION_TYPE,
        "client_assertion": assertion,
    }


# -- managed identities --------------------------------------------------------------------


def imds(authority: str, place: str, where: str, client_id: str) -> AzureCredentials:
    """An Azure VM's (or an AKS pod identity's) managed identity, at the instance metadata
    service `authority` (http://host[:port]); `client_id` picks a user-assigned one."""
    url = authority + IMDS_TOKEN_PATH
    params = {"api-version": IMDS_API_VERSION, "resource": RESOURCE}
    if client_id:
        params["client_id"] = client_id

    def mint() -> Token:
        got = exchange(
            "GET",
            url,
            what=f"the token of {where}",
            place=place,
            fix=(
                "this VM may have no managed identity, or none with the client id in "
                f"{ENV_AZURE_CLIENT_ID}: assign one (az vm identity assign), fix "
                f"{ENV_AZURE_CLIENT_ID}, or log in with `az login`"
            ),
            secrets=[],
            policy=_nearby(),
            params=params,
            headers={"Metadata": "true"},
        )
        return access_token(got, where)

    key = _key(b"azure-imds", url, client_id)
    return AzureCredentials(where=where, kind="managed_identity", mint=mint, cache_key=key)


def app_service(endpoint: str, header: str, client_id: str) -> AzureCredentials:
    """App Service's (Functions', Container Apps') managed identity: its local endpoint,
    which wants its header's secret."""
    from providers.core.urls import display

    where = f"the managed identity at {ENV_AZURE_IDENTITY_ENDPOINT} ({display(endpoint)})"
    params = {"api-version": APP_SERVICE_API_VERSION, "resource": RESOURCE}
    if client_id:
        params["client_id"] = client_id

    def mint() -> Token:
        got = exchange(
            "GET",
            endpoint,
            what=f"the token of {where}",
            place=ENV_AZURE_IDENTITY_ENDPOINT,
            fix=(
                "the app may have no managed identity (az webapp identity assign), or none "
                f"with the client id in {ENV_AZURE_CLIENT_ID}"
            ),
            secrets=[header],
            policy=_nearby(),
            params=params,
            headers={"X-IDENTITY-HEADER": header},
        )
        return access_token(got, where)

    key = _key(b"azure-app-service", endpoint, client_id, header)
    return AzureCredentials(where=where, kind="managed_identity", mint=mint, cache_key=key)


def _nearby() -> RetryPolicy:
    """An endpoint on the machine's own link answers in milliseconds: a few quick tries."""
    from providers.cloud.http import RetryPolicy

    return RetryPolicy(
        attempts=3, backoff_seconds=0.2, connect_timeout_seconds=2.0, read_timeout_seconds=10.0
    )


# -- the Azure CLI -----------------------------------------------------------------------


def azure_cli(
    az: str,
    env: Mapping[str, str],
    directory: Path,
    profile: bytes,
    subscription: str,
) -> AzureCredentials:
    """The Azure CLI's login (`az` at `az`, its files in `directory`, `profile` the bytes of
    its azureProfile.json): a token for `subscription`'s tenant when one is named, else for
    the CLI's default subscription."""
    where = f"the Azure CLI's login ({directory})"
    command = [az, "account", "get-access-token", "--resource", RESOURCE, "--output", "json"]
    if subscription:
        command += ["--subscription", subscription]

    def mint() -> Token:
        said = run_cli(command, env, where)
        try:
            doc = json.loads(said)
        except (ValueError, RecursionError):
            doc = None
        value = doc.get("accessToken") if isinstance(doc, dict) else None
        when = _cli_expiry(doc) if isinstance(doc, dict) else None
        if not usable(value) or when is None:
            raise ShoalError(
                f"azure: `az account get-access-token` ({where}) answered without a usable "
                "accessToken and expiry; update the Azure CLI (az upgrade)"
            )
        assert isinstance(value, str)
        return Token(value, when)

    # The profile changes with every `az login` and `az account set`: a token cached for
    # one login is never served for the next.
    key = _key(b"azure-cli", str(directory), subscription, profile.decode("latin-1"))
    return AzureCredentials(where=where, kind="azure_cli", mint=mint, cache_key=key)


def run_cli(command: Sequence[str], env: Mapping[str, str], where: str) -> str:
    """`az`'s standard output; its failure a CredentialsError quoting what it said (one
    line), a hang past CLI_SECONDS a RetryableError."""
    import subprocess  # only a CLI login runs a process

    try:
        done = subprocess.run(
            list(command),
            env={**env, "AZURE_CORE_NO_COLOR": "true", "AZURE_CORE_ONLY_SHOW_ERRORS": "true"},
            cwd=os.path.sep,  # never an `az` of the current directory
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=CLI_SECONDS,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RetryableError(
            f"azure: `az account get-access-token` ({where}) did not answer within "
            f"{CLI_SECONDS:.0f} s; try again, or run it yourself to see why"
        ) from None
    except OSError as exc:
        raise CredentialsError(
            f"azure: cannot run {command[0]} ({where}): {exc.strerror or type(exc).__name__}; "
            "reinstall the Azure CLI or log in another way"
        ) from None
    if done.returncode != 0:
        said = done.stderr.decode("utf-8", "replace").strip().removeprefix("ERROR:").strip()
        said = one_line(said, [], 300) or f"exit status {done.returncode}"
        raise CredentialsError(
            f"azure: the Azure CLI gave no token ({where}: {said}); run `az login`, or "
            f"`az account set --subscription ID` (or set {ENV_AZURE_SUBSCRIPTION_ID} to a "
            "subscription of its login)"
        )
    return done.stdout.decode("utf-8", "replace")


def _cli_expiry(doc: Mapping[str, object]) -> float | None:
    """`expires_on` (seconds since the epoch, az 2.54 and later), else `expiresOn`: a local
    time without a zone, as the CLI writes it."""
    if doc.get("expires_on") is not None:
        return expiry(None, doc["expires_on"])
    text = doc.get("expiresOn")
    if not isinstance(text, str):
        return None
    try:
        local = datetime.strptime(text.strip(), "%Y-%m-%d %H:%M:%S.%f")
    except ValueError:
        return None
    return expiry(None, local.timestamp())


def _key(kind: bytes, *parts: str) -> str:
    """A token file key: a digest, so the file names no identity and holds no secret."""
    import hashlib

    digest = hashlib.sha256(kind)
    for part in parts:
        digest.update(b"\0" + part.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
