"""Azure credentials (providers/azure/credentials.py) against loopback stand-ins of Azure's
token side (entraserver.py: a certificate's assertion checked with the certificate's public
key, found by its thumbprint; a federated token with its issuer's), of the Azure CLI
(fakeaz.py: a script on PATH) and of Resource Manager (account_payloads.SubscriptionApi)."""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.azure import credentials as chain
from providers.azure import tokens
from providers.azure.accounts import AzureAccounts
from providers.cloud.http import RetryPolicy
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    ProviderUnreachableError,
)
from providers.core.settings import Paths, Settings
from tests.providers.apiserver import ApiServer
from tests.providers.azure import account_payloads as a
from tests.providers.azure import fakeaz
from tests.providers.azure.entraserver import (
    APP_SERVICE_PATH,
    ASSERTION_TYPE,
    CLIENT_ID,
    CLIENT_SECRET,
    IDENTITY_HEADER,
    IMDS_PATH,
    RESOURCE,
    SCOPE,
    TENANT,
    TOKEN,
    EntraServer,
    b64url,
    certificate,
    federated_token,
    new_key,
    pem_file,
    pfx_file,
    token_path,
)
from tests.providers.azure.payloads import LOCATIONS_PATH, SUBSCRIPTION

FAST = RetryPolicy(attempts=2, backoff_seconds=0.0, read_timeout_seconds=5.0)
KEY = new_key()  # generating a 2048-bit key takes ~50 ms: a few for the module
CERT = certificate(KEY)
OTHER_KEY = new_key()
ISSUER_KEY = new_key()


@pytest.fixture(autouse=True)
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No token in the process's memory, and no machine that says it is an Azure VM (a CI
    machine may be one: its metadata service is never asked)."""
    tokens.forget()
    monkeypatch.setattr(chain, "ASSET_TAG_FILE", tmp_path / "no-asset-tag")
    yield
    tokens.forget()


@pytest.fixture
def entra() -> Iterator[EntraServer]:
    with EntraServer(issuer_key=ISSUER_KEY.public_key()) as server:
        server.register(CERT)
        yield server


@pytest.fixture(scope="module")
def arm_server() -> Iterator[ApiServer]:
    with ApiServer() as running:
        yield running


@pytest.fixture
def arm(arm_server: ApiServer) -> ApiServer:
    arm_server.reset()
    a.standard(arm_server.base).serve(arm_server)
    return arm_server


def settings(tmp_path: Path, env: dict[str, str], config: dict[str, Any] | None = None) -> Settings:
    """Settings whose environment is `env` alone: no HOME and no PATH, so no Azure CLI
    unless the test names one, and no metadata service unless it asks for one."""
    home = tmp_path / "shoal"
    home.mkdir(exist_ok=True)
    return Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(home)}),
        config=config or {},
        env={"SHOAL_AZURE_NO_IMDS_CHECK": "true", **env},
    )


def found(tmp_path: Path, env: dict[str, str]) -> tokens.AzureCredentials:
    made = chain.find_credentials(settings(tmp_path, env), policy=FAST)
    assert made is not None
    return made


def accounts(tmp_path: Path, arm: ApiServer, env: dict[str, str]) -> AzureAccounts:
    full = {"SHOAL_AZURE_MANAGEMENT_URL": arm.base, "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION, **env}
    return AzureAccounts.from_settings(settings(tmp_path, full), policy=FAST)


def principal(entra: EntraServer, **more: str) -> dict[str, str]:
    """A service principal's variables, its authority the stand-in."""
    return {
        "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_AUTHORITY_HOST": entra.base,
        **more,
    }


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def never_shown(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text
    assert "\n" not in text.strip()


# -- a service principal: client secret ---------------------------------------------------


def test_a_client_secret_buys_the_token_the_api_takes(
    tmp_path: Path, entra: EntraServer, arm: ApiServer
) -> None:
    fetcher = accounts(tmp_path, arm, principal(entra, AZURE_CLIENT_SECRET=CLIENT_SECRET))
    assert entra.seen == []  # found without a request: a cached answer needs none
    assert fetcher.regions() == ["eastus", "westus"]
    (sent,) = entra.to(token_path())
    assert sent.form == {
        "grant_type": "client_credentials",
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "scope": SCOPE,
    }
    assert sent.headers["content-type"] == "application/x-www-form-urlencoded"
    assert arm.requests_to(LOCATIONS_PATH)[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_a_wrong_secret_is_77_naming_client_and_tenant_and_never_the_secret(
    tmp_path: Path, entra: EntraServer
) -> None:
    entra.echo = True
    wrong = "Zz9~a-wrong-secret-that-the-app-never-had"
    with pytest.raises(CredentialsError) as caught:
        found(tmp_path, principal(entra, AZURE_CLIENT_SECRET=wrong)).token()
    message = str(caught.value)
    assert "AADSTS7000215" in message and "HTTP 401" in message
    assert "AZURE_CLIENT_SECRET" in message and CLIENT_ID in message and TENANT in message
    assert "az ad app credential reset" in message
    never_shown(message, wrong)


def test_an_unknown_tenant_or_app_is_77_saying_what_the_endpoint_said(
    tmp_path: Path, entra: EntraServer
) -> None:
    env = principal(entra, AZURE_CLIENT_SECRET=CLIENT_SECRET, AZURE_TENANT_ID="contoso.example")
    with pytest.raises(CredentialsError, match="AADSTS90002"):
        found(tmp_path, env).token()


def test_an_unreachable_authority_is_69_naming_the_variables(tmp_path: Path) -> None:
    closed = EntraServer()  # bound, never started, then closed: nobody listens there
    base = closed.base
    closed._server.server_close()
    env = {
        "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
        "AZURE_AUTHORITY_HOST": base,
    }
    with pytest.raises(ProviderUnreachableError) as caught:
        found(tmp_path, env).token()
    assert "AZURE_AUTHORITY_HOST and AZURE_TENANT_ID" in str(caught.value)


@pytest.mark.parametrize(
    ("env", "error", "named"),
    [
        (
            {"AZURE_CLIENT_SECRET": "s"},
            CredentialsError,
            "AZURE_CLIENT_SECRET is set but AZURE_TENANT_ID and AZURE_CLIENT_ID are not",
        ),
        (
            {"AZURE_CLIENT_SECRET": "s", "AZURE_CLIENT_ID": CLIENT_ID},
            CredentialsError,
            "but AZURE_TENANT_ID is not",
        ),
        (
            {"AZURE_FEDERATED_TOKEN_FILE": "/x", "AZURE_TENANT_ID": TENANT},
            CredentialsError,
            "AZURE_FEDERATED_TOKEN_FILE is set but AZURE_CLIENT_ID is not",
        ),
        (
            {"AZURE_CLIENT_SECRET": "s", "AZURE_CLIENT_ID": CLIENT_ID, "AZURE_TENANT_ID": "a/b?c"},
            ConfigError,
            "AZURE_TENANT_ID is not a tenant id",
        ),
        (
            {
                "AZURE_CLIENT_SECRET": "s",
                "AZURE_CLIENT_ID": CLIENT_ID,
                "AZURE_TENANT_ID": TENANT,
                "AZURE_AUTHORITY_HOST": "http://login.example.com",
            },
            ConfigError,
            "not an https URL",
        ),
        ({"AZURE_TOKEN_CREDENTIALS": "everything"}, ConfigError, "AZURE_TOKEN_CREDENTIALS="),
        (
            {"IDENTITY_ENDPOINT": "http://127.0.0.1:1/msi/token"},
            CredentialsError,
            "IDENTITY_ENDPOINT is set without IDENTITY_HEADER",
        ),
    ],
)
def test_incomplete_or_wrong_settings_are_named_before_anything_is_asked(
    tmp_path: Path, env: dict[str, str], error: type[Exception], named: str
) -> None:
    with pytest.raises(error) as caught:
        chain.find_credentials(settings(tmp_path, env))
    assert named in str(caught.value) and "\n" not in str(caught.value)
    assert type(caught.value) is error


def test_a_bare_authority_host_is_https(tmp_path: Path) -> None:
    env = {
        "AZURE_TENANT_ID": TENANT,
        "AZURE_CLIENT_ID": CLIENT_ID,
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
        "AZURE_AUTHORITY_HOST": "login.microsoftonline.us",
    }
    assert chain._token_url(settings(tmp_path, env).env, TENANT)[0] == (
        f"https://login.microsoftonline.us/{TENANT}/oauth2/v2.0/token"
    )


# -- a service principal: certificate ------------------------------------------------------


def test_a_certificate_signs_an_assertion_entra_verifies(
    tmp_path: Path, entra: EntraServer, arm: ApiServer
) -> None:
    path = write(tmp_path / "sp.pem", pem_file(KEY, CERT))
    fetcher = accounts(tmp_path, arm, principal(entra, AZURE_CLIENT_CERTIFICATE_PATH=str(path)))
    fetcher.regions()
    (sent,) = entra.to(token_path())
    assert sent.form["client_assertion_type"] == ASSERTION_TYPE
    assert "client_secret" not in sent.form and sent.form["scope"] == SCOPE
    # The stand-in verified the PS256 signature with the certificate's public key, found by
    # its SHA-256 thumbprint.
    (header,), (claims,) = entra.headers, entra.claims
    assert header["alg"] == "PS256" and header["typ"] == "JWT"
    from cryptography.hazmat.primitives import hashes, serialization

    digest = hashes.Hash(hashes.SHA256())
    digest.update(CERT.public_bytes(serialization.Encoding.DER))
    assert header["x5t#S256"] == b64url(digest.finalize())
    assert claims["aud"] == entra.url(token_path())
    assert claims["iss"] == claims["sub"] == CLIENT_ID
    assert claims["exp"] - claims["nbf"] == 600 and len(claims["jti"]) == 36
    assert arm.requests_to(LOCATIONS_PATH)[0].headers["authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize("form", ["encrypted pem", "pfx"])
def test_a_certificate_file_with_a_password(tmp_path: Path, entra: EntraServer, form: str) -> None:
    raw = (
        pem_file(KEY, CERT, "hunter2")
        if form == "encrypted pem"
        else pfx_file(KEY, CERT, "hunter2")
    )
    path = write(tmp_path / "sp.cert", raw)
    env = principal(entra, AZURE_CLIENT_CERTIFICATE_PATH=str(path))
    made = found(tmp_path, {**env, "AZURE_CLIENT_CERTIFICATE_PASSWORD": "hunter2"})
    assert made.kind == "client_certificate" and made.token() == TOKEN
    tokens.forget()
    (tmp_path / "shoal" / "state" / tokens.CACHE_FILE).unlink()
    wrong = {**env, "AZURE_CLIENT_CERTIFICATE_PASSWORD": "wrong-password-x"}
    error = CredentialsError if form == "encrypted pem" else ConfigError
    with pytest.raises(error) as caught:
        found(tmp_path, wrong).token()
    assert "AZURE_CLIENT_CERTIFICATE_PASSWORD" in str(caught.value)
    never_shown(str(caught.value), "wrong-password-x", "hunter2")
    assert len(entra.to(token_path())) == 1


def test_a_certificate_entra_does_not_know_is_77_and_an_echo_shows_none_of_it(
    tmp_path: Path, entra: EntraServer
) -> None:
    entra.echo = True
    other = certificate(OTHER_KEY)  # never registered on the app
    path = write(tmp_path / "sp.pem", pem_file(OTHER_KEY, other))
    with pytest.raises(CredentialsError) as caught:
        found(tmp_path, principal(entra, AZURE_CLIENT_CERTIFICATE_PATH=str(path))).token()
    message = str(caught.value)
    (sent,) = entra.to(token_path())
    assertion = sent.form["client_assertion"]
    assert "AADSTS700027" in message and str(path) in message and "--cert" in message
    never_shown(message, assertion, *assertion.split("."))


@pytest.mark.parametrize(
    ("content", "error", "named"),
    [
        (None, CredentialsError, "no such file"),
        (b"not a certificate at all", ConfigError, "neither PEM nor a PKCS#12 file"),
        ("cert only", ConfigError, "no private key in the PEM file"),
        ("key only", ConfigError, "no certificate in the PEM file"),
        ("someone else's cert", ConfigError, "no certificate in it is the private key's"),
        ("encrypted, no password", CredentialsError, "set AZURE_CLIENT_CERTIFICATE_PASSWORD"),
    ],
)
def test_a_certificate_file_that_will_not_do_is_named_without_quoting_it(
    tmp_path: Path, entra: EntraServer, content: Any, error: type[Exception], named: str
) -> None:
    from cryptography.hazmat.primitives import serialization

    cert_pem = CERT.public_bytes(serialization.Encoding.PEM)
    key_pem = pem_file(KEY, CERT).split(b"-----BEGIN CERTIFICATE")[0]
    raw = {
        "cert only": cert_pem,
        "key only": key_pem,
        "someone else's cert": key_pem
        + certificate(OTHER_KEY).public_bytes(serialization.Encoding.PEM),
        "encrypted, no password": pem_file(KEY, CERT, "hunter2"),
    }.get(content, content)
    path = tmp_path / "sp.pem"
    if raw is not None:
        write(path, raw)
    with pytest.raises(error) as caught:
        found(tmp_path, principal(entra, AZURE_CLIENT_CERTIFICATE_PATH=str(path))).token()
    message = str(caught.value)
    assert named in message and str(path) in message and type(caught.value) is error
    for line in key_pem.decode().splitlines()[1:-1]:
        assert line not in message
    assert entra.seen == []


# -- workload identity ---------------------------------------------------------------------


def test_a_federated_token_file_is_read_anew_for_each_token(
    tmp_path: Path, entra: EntraServer, arm: ApiServer
) -> None:
    path = write(tmp_path / "azure-identity-token", federated_token(ISSUER_KEY) + "\n")
    env = principal(entra, AZURE_FEDERATED_TOKEN_FILE=str(path))
    entra.expires_in = 60  # inside the 5-minute margin: asked again at each token
    made = found(tmp_path, env)
    assert made.kind == "workload_identity" and made.token() == TOKEN
    rotated = federated_token(ISSUER_KEY)
    write(path, rotated)  # the kubelet rotates the projected token
    assert made.token() == TOKEN
    first, second = entra.to(token_path())
    assert first.form["client_assertion"] != second.form["client_assertion"] == rotated
    assert second.form["client_assertion_type"] == ASSERTION_TYPE
    assert second.form["client_id"] == CLIENT_ID and "client_secret" not in second.form
    entra.expires_in = 3599
    assert accounts(tmp_path, arm, env).regions()


def test_a_refused_federated_token_is_77_and_never_quoted(
    tmp_path: Path, entra: EntraServer
) -> None:
    entra.echo = True
    stranger = federated_token(ISSUER_KEY, subject="system:serviceaccount:other:sa")
    path = write(tmp_path / "token", stranger)
    with pytest.raises(CredentialsError) as caught:
        found(tmp_path, principal(entra, AZURE_FEDERATED_TOKEN_FILE=str(path))).token()
    assert "AADSTS700211" in str(caught.value) and "federated credential" in str(caught.value)
    never_shown(str(caught.value), stranger, *stranger.split("."))


def test_a_missing_federated_token_file_is_77_at_the_first_token(
    tmp_path: Path, entra: EntraServer
) -> None:
    path = tmp_path / "not-mounted"
    made = found(tmp_path, principal(entra, AZURE_FEDERATED_TOKEN_FILE=str(path)))
    with pytest.raises(CredentialsError, match="cannot be read") as caught:
        made.token()
    assert str(path) in str(caught.value) and entra.seen == []


# -- managed identities ----------------------------------------------------------------------


def test_the_metadata_service_on_loopback(tmp_path: Path, entra: EntraServer) -> None:
    env = {"AZURE_POD_IDENTITY_AUTHORITY_HOST": entra.base}
    made = found(tmp_path, env)
    assert made.kind == "managed_identity" and made.token() == TOKEN
    (sent,) = entra.to(IMDS_PATH)
    assert sent.headers["metadata"] == "true"
    assert sent.query == {"api-version": "2018-02-01", "resource": RESOURCE}
    # A user-assigned identity is picked by AZURE_CLIENT_ID.
    tokens.forget()
    entra.identity = "7e9f0a1b-user-assigned"
    made = found(tmp_path, {**env, "AZURE_CLIENT_ID": "7e9f0a1b-user-assigned"})
    assert made.token() == TOKEN and "client 7e9f0a1b-user-assigned" in made.where
    assert entra.to(IMDS_PATH)[-1].query["client_id"] == "7e9f0a1b-user-assigned"


def test_a_vm_without_an_identity_is_77_saying_how_to_assign_one(
    tmp_path: Path, entra: EntraServer
) -> None:
    entra.identity = None
    made = found(tmp_path, {"AZURE_POD_IDENTITY_AUTHORITY_HOST": entra.base})
    with pytest.raises(CredentialsError) as caught:
        made.token()
    assert "Identity not found" in str(caught.value) and "az vm identity assign" in str(
        caught.value
    )


def test_the_metadata_service_is_asked_only_on_an_azure_vm(
    tmp_path: Path, entra: EntraServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = write(tmp_path / "chassis_asset_tag", "None\n")  # a Hyper-V guest elsewhere
    monkeypatch.setattr(chain, "ASSET_TAG_FILE", tag)
    monkeypatch.setattr(chain, "DEFAULT_IMDS", entra.base)  # never 169.254.169.254 here
    assert chain.find_credentials(settings(tmp_path, {"SHOAL_AZURE_NO_IMDS_CHECK": ""})) is None
    write(tag, chain.AZURE_ASSET_TAG + "\n")
    assert chain.on_azure_vm()
    made = found(tmp_path, {"SHOAL_AZURE_NO_IMDS_CHECK": ""})
    assert "this Azure VM" in made.where and made.token() == TOKEN
    assert chain.find_credentials(settings(tmp_path, {})) is None  # the switch says not to
    assert entra.to(IMDS_PATH)[0].headers["metadata"] == "true"


def test_a_vm_without_an_identity_moves_on_to_the_cli_login(
    tmp_path: Path, entra: EntraServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chain, "ASSET_TAG_FILE", write(tmp_path / "tag", chain.AZURE_ASSET_TAG))
    monkeypatch.setattr(chain, "DEFAULT_IMDS", entra.base)
    entra.identity = None
    env = {"SHOAL_AZURE_NO_IMDS_CHECK": "", **logged_in(tmp_path, token="tok-of-the-cli")}
    made = found(tmp_path, env)
    assert made.kind == "managed_identity"  # what the machine says, until it is asked
    assert made.token() == "tok-of-the-cli"
    assert made.kind == "azure_cli" and "Azure CLI" in made.where
    assert len(entra.to(IMDS_PATH)) == 1 and len(fakeaz.calls(tmp_path)) == 1


def test_a_vm_without_an_identity_and_without_a_cli_token_says_the_clis_error(
    tmp_path: Path, entra: EntraServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chain, "ASSET_TAG_FILE", write(tmp_path / "tag", chain.AZURE_ASSET_TAG))
    monkeypatch.setattr(chain, "DEFAULT_IMDS", entra.base)
    entra.identity = None
    env = {"SHOAL_AZURE_NO_IMDS_CHECK": "", **logged_in(tmp_path, fail=fakeaz.NOT_LOGGED_IN)}
    made = found(tmp_path, env)
    with pytest.raises(CredentialsError) as caught:
        made.token()
    assert fakeaz.NOT_LOGGED_IN in str(caught.value)
    assert len(entra.to(IMDS_PATH)) == 1 and len(fakeaz.calls(tmp_path)) == 1  # each once


def test_app_services_managed_identity(tmp_path: Path, entra: EntraServer) -> None:
    env = {"IDENTITY_ENDPOINT": entra.url(APP_SERVICE_PATH), "IDENTITY_HEADER": IDENTITY_HEADER}
    made = found(tmp_path, env)
    assert made.kind == "managed_identity" and made.token() == TOKEN
    (sent,) = entra.to(APP_SERVICE_PATH)
    assert sent.headers["x-identity-header"] == IDENTITY_HEADER
    assert sent.query == {"api-version": "2019-08-01", "resource": RESOURCE}
    entra.echo = True
    tokens.forget()
    (tmp_path / "shoal" / "state" / tokens.CACHE_FILE).unlink()
    wrong = {**env, "IDENTITY_HEADER": "a-stale-identity-header-value"}
    with pytest.raises(CredentialsError) as caught:
        found(tmp_path, wrong).token()
    never_shown(str(caught.value), "a-stale-identity-header-value")


# -- the Azure CLI -------------------------------------------------------------------------


def logged_in(root: Path, *, default: bool = True, **az: Any) -> dict[str, str]:
    """The environment of a machine where `az login` was run: `az` on PATH, its profile."""
    bin_dir = fakeaz.write_az(root, **az)
    directory = root / "dot-azure"
    fakeaz.write_profile(directory, fakeaz.account(default=default))
    return {"PATH": fakeaz.path_with(bin_dir), "AZURE_CONFIG_DIR": str(directory)}


def test_the_cli_login_gives_the_token_and_the_default_subscription(
    tmp_path: Path, arm: ApiServer
) -> None:
    env = logged_in(tmp_path)
    assert fakeaz.calls(tmp_path) == []  # found without running az
    sets = settings(tmp_path, {"SHOAL_AZURE_MANAGEMENT_URL": arm.base, **env})
    fetcher = AzureAccounts.from_settings(sets, policy=FAST)
    assert fetcher.account == SUBSCRIPTION  # the profile's isDefault, read from the file
    assert fakeaz.calls(tmp_path) == []
    assert fetcher.regions() == ["eastus", "westus"]
    (call,) = fakeaz.calls(tmp_path)
    assert call["argv"] == [
        "account",
        "get-access-token",
        "--resource",
        RESOURCE,
        "--output",
        "json",
    ]
    assert call["dir"] == env["AZURE_CONFIG_DIR"] and call["cwd"] == "/"
    assert arm.requests_to(LOCATIONS_PATH)[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_the_cli_is_asked_for_the_subscription_set_for_shoal(tmp_path: Path) -> None:
    env = {**logged_in(tmp_path, epoch=False), "AZURE_SUBSCRIPTION_ID": "sub-of-another-tenant"}
    made = found(tmp_path, env)
    assert made.token() == TOKEN  # expiresOn alone (before az 2.54): local time
    assert fakeaz.calls(tmp_path)[0]["argv"][-2:] == ["--subscription", "sub-of-another-tenant"]
    held = json.loads((tmp_path / "shoal" / "state" / tokens.CACHE_FILE).read_text())
    (entry,) = held.values()
    import time

    assert 3000 < entry["expires"] - time.time() <= 3600


def test_a_cli_that_gives_no_token_is_77_quoting_it(tmp_path: Path) -> None:
    made = found(tmp_path, logged_in(tmp_path, fail=fakeaz.NOT_LOGGED_IN))
    with pytest.raises(CredentialsError) as caught:
        made.token()
    message = str(caught.value)
    assert fakeaz.NOT_LOGGED_IN in message and "ERROR" not in message
    assert "run `az login`" in message and "\n" not in message


def test_no_cli_login_is_no_credentials_and_runs_nothing(tmp_path: Path) -> None:
    env = logged_in(tmp_path)
    fakeaz.write_profile(Path(env["AZURE_CONFIG_DIR"]))  # after `az logout`: no accounts
    assert chain.find_credentials(settings(tmp_path, env)) is None
    without_az = {**logged_in(tmp_path), "PATH": str(tmp_path / "empty-bin")}
    assert chain.find_credentials(settings(tmp_path, without_az)) is None
    assert fakeaz.calls(tmp_path) == []
    # ~/.azure when AZURE_CONFIG_DIR says nothing.
    home = tmp_path / "user"
    fakeaz.write_profile(home / ".azure", fakeaz.account(default=True))
    assert found(tmp_path, {"PATH": env["PATH"], "HOME": str(home)}).kind == "azure_cli"


def test_a_broken_cli_profile_is_78_naming_it(tmp_path: Path) -> None:
    env = logged_in(tmp_path)
    profile = Path(env["AZURE_CONFIG_DIR"]) / "azureProfile.json"
    write(profile, "{not json")
    with pytest.raises(ConfigError) as caught:
        chain.find_credentials(settings(tmp_path, env))
    assert str(profile) in str(caught.value) and "az login" in str(caught.value)


def test_a_new_cli_login_is_never_served_the_last_ones_token(tmp_path: Path) -> None:
    env = logged_in(tmp_path)
    assert found(tmp_path, env).token() == TOKEN
    tokens.forget()  # as a new process: the token file serves it, az is not run again
    assert found(tmp_path, env).token() == TOKEN
    assert len(fakeaz.calls(tmp_path)) == 1
    tokens.forget()
    fakeaz.write_az(tmp_path, token="tok-of-the-next-login")
    fakeaz.write_profile(
        Path(env["AZURE_CONFIG_DIR"]), fakeaz.account(default=True, user="someone-else@example.com")
    )
    assert found(tmp_path, env).token() == "tok-of-the-next-login"


# -- the order -------------------------------------------------------------------------------


def test_the_chain_takes_the_first_source_in_order(tmp_path: Path, entra: EntraServer) -> None:
    cert = write(tmp_path / "sp.pem", pem_file(KEY, CERT))
    token_file = write(tmp_path / "token", federated_token(ISSUER_KEY))
    env = {
        "SHOAL_AZURE_TOKEN": "tok-explicit",
        "AZURE_CLIENT_SECRET": CLIENT_SECRET,
        "AZURE_CLIENT_CERTIFICATE_PATH": str(cert),
        "AZURE_FEDERATED_TOKEN_FILE": str(token_file),
        "AZURE_POD_IDENTITY_AUTHORITY_HOST": entra.base,
        **logged_in(tmp_path),
    }
    fixed = {"AZURE_TENANT_ID": TENANT, "AZURE_CLIENT_ID": CLIENT_ID}
    kinds = []
    for name in [*env, ""]:
        made = chain.find_credentials(settings(tmp_path, {**env, **fixed}))
        kinds.append(made.kind if made is not None else None)
        env.pop(name, None)
    # PATH gone: no `az`; then AZURE_CONFIG_DIR gone too.
    assert kinds == [
        "token",
        "client_secret",
        "client_certificate",
        "workload_identity",
        "managed_identity",
        "azure_cli",
        None,
        None,
    ]
    assert entra.seen == [] and fakeaz.calls(tmp_path) == []  # finding asks nothing


@pytest.mark.parametrize(
    ("narrowing", "kind"),
    [
        ("dev", "azure_cli"),
        ("prod", "managed_identity"),
        ("AzureCliCredential", "azure_cli"),
        ("ManagedIdentityCredential", "managed_identity"),
        ("EnvironmentCredential", None),
        ("VisualStudioCodeCredential", None),
    ],
)
def test_azure_token_credentials_narrows_the_chain(
    tmp_path: Path, entra: EntraServer, narrowing: str, kind: str | None
) -> None:
    env = {
        "AZURE_POD_IDENTITY_AUTHORITY_HOST": entra.base,
        **logged_in(tmp_path),
        "AZURE_TOKEN_CREDENTIALS": narrowing,
    }
    made = chain.find_credentials(settings(tmp_path, env))
    assert (made.kind if made is not None else None) == kind
    # SHOAL_AZURE_TOKEN is shoal's own: no narrowing of Azure's chain leaves it out.
    assert found(tmp_path, {**env, "SHOAL_AZURE_TOKEN": "tok-x"}).kind == "token"


def test_the_subscription_order(tmp_path: Path) -> None:
    env = {**logged_in(tmp_path), "AZURE_SUBSCRIPTION_ID": "sub-env"}
    both = {"azure": {"subscription": "sub-config", "subscription_id": "sub-config"}}
    seen = [chain.find_subscription(settings(tmp_path, env, both))]
    env.pop("AZURE_SUBSCRIPTION_ID")
    seen.append(chain.find_subscription(settings(tmp_path, env, both)))
    seen.append(
        chain.find_subscription(settings(tmp_path, env, {"azure": {"subscription_id": "old"}}))
    )
    seen.append(chain.find_subscription(settings(tmp_path, env)))
    directory = Path(env["AZURE_CONFIG_DIR"])
    fakeaz.write_profile(
        directory,
        fakeaz.account("sub-a"),
        fakeaz.account(TENANT, default=True, name="N/A(tenant level account)"),
    )
    seen.append(chain.find_subscription(settings(tmp_path, env)))
    assert seen == [
        ("sub-env", "AZURE_SUBSCRIPTION_ID"),
        ("sub-config", "[azure] subscription"),
        ("old", "[azure] subscription_id"),
        (SUBSCRIPTION, f"the Azure CLI's default subscription ({directory / 'azureProfile.json'})"),
        ("", ""),  # a tenant-level login names no subscription
    ]
    differ = {"azure": {"subscription": "a", "subscription_id": "b"}}
    with pytest.raises(ConfigError, match="name different subscriptions"):
        chain.find_subscription(settings(tmp_path, {}, differ))


# -- tokens: expiry, the token file, a 401 ----------------------------------------------------


def test_a_token_is_kept_until_near_its_expiry(tmp_path: Path, entra: EntraServer) -> None:
    made = found(tmp_path, principal(entra, AZURE_CLIENT_SECRET=CLIENT_SECRET))
    assert made.token() == made.token() == TOKEN
    assert len(entra.to(token_path())) == 1
    tokens.forget()
    (tmp_path / "shoal" / "state" / tokens.CACHE_FILE).unlink()
    entra.expires_in = 240  # inside azure-core's 5-minute margin: stale at once
    made.token()
    made.token()
    assert len(entra.to(token_path())) == 3


def test_the_token_file_serves_the_next_process_and_holds_no_secret(
    tmp_path: Path, entra: EntraServer
) -> None:
    path = write(tmp_path / "sp.pem", pem_file(KEY, CERT))
    env = principal(entra, AZURE_CLIENT_CERTIFICATE_PATH=str(path))
    assert found(tmp_path, env).token() == TOKEN
    tokens.forget()  # as a new process
    assert found(tmp_path, env).token() == TOKEN
    assert len(entra.to(token_path())) == 1  # signed once
    cached = tmp_path / "shoal" / "state" / tokens.CACHE_FILE
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600
    text = cached.read_text()
    assert TOKEN in text and CLIENT_ID not in text and TENANT not in text
    for line in path.read_text().splitlines()[1:4]:
        assert line not in text
    # Another secret (another app) is another entry, never this one's token.
    entra.secrets.add("another-secret-of-the-app")
    entra.grants = ["tok-other"]
    other = principal(entra, AZURE_CLIENT_SECRET="another-secret-of-the-app")
    assert found(tmp_path, other).token() == "tok-other"
    assert "another-secret-of-the-app" not in cached.read_text()


def test_a_refused_token_is_renewed_once(
    tmp_path: Path, entra: EntraServer, arm: ApiServer
) -> None:
    entra.grants = ["tok-revoked-since", TOKEN]
    env = principal(entra, AZURE_CLIENT_SECRET=CLIENT_SECRET)
    assert accounts(tmp_path, arm, env).regions()
    sent = [s.headers["authorization"] for s in arm.requests_to(LOCATIONS_PATH)]
    assert sent[0] == "Bearer tok-revoked-since"
    assert sent[1:] == [f"Bearer {TOKEN}"] * (len(sent) - 1)  # the retry, then the next page
    assert len(entra.to(token_path())) == 2
    # One that stays refused is refused after one renewal, naming where it came from.
    tokens.forget()
    (tmp_path / "shoal" / "state" / tokens.CACHE_FILE).unlink()
    entra.grants = ["tok-never-good"]
    with pytest.raises(CredentialsError, match="HTTP 401") as caught:
        accounts(tmp_path, arm, env).regions()
    message = str(caught.value)
    assert len(entra.to(token_path())) == 4
    assert "AZURE_CLIENT_SECRET (client" in message and "Reader role" in message
    never_shown(message, "tok-never-good", CLIENT_SECRET)


def test_shoal_azure_token_is_used_as_it_is(tmp_path: Path, arm: ApiServer) -> None:
    made = found(tmp_path, {"SHOAL_AZURE_TOKEN": TOKEN})
    assert made.kind == "token" and made.token() == TOKEN and made.renew(TOKEN) is False
    assert accounts(tmp_path, arm, {"SHOAL_AZURE_TOKEN": TOKEN}).regions()


# -- through the CLI --------------------------------------------------------------------------


Cli = Callable[..., Any]


def test_resources_with_only_a_service_principal(
    cli: Cli, entra: EntraServer, arm: ApiServer
) -> None:
    env = {
        **principal(entra, AZURE_CLIENT_SECRET=CLIENT_SECRET),
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": arm.base,
    }
    run = cli("resources", "-p", "azure", "-r", "eastus", "--json", env=env)
    assert run.exit_code == 0, run.stderr
    assert json.loads(run.stdout)[0]["region"]["name"] == "eastus"
    assert len(entra.to(token_path())) == 1
    never_shown(run.stdout + run.stderr, TOKEN, CLIENT_SECRET)


def test_the_next_shoal_process_neither_signs_nor_asks_again(
    shoal_proc: Callable[..., subprocess.CompletedProcess[str]],
    home: Path,
    tmp_path: Path,
    entra: EntraServer,
    arm: ApiServer,
) -> None:
    path = write(tmp_path / "sp.pem", pem_file(KEY, CERT))
    env = {
        **principal(entra, AZURE_CLIENT_CERTIFICATE_PATH=str(path)),
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": arm.base,
    }
    for _ in range(2):
        done = shoal_proc("resources", "-p", "azure", "-r", "eastus", "--refresh", env=env)
        assert done.returncode == 0, done.stderr
    assert len(entra.to(token_path())) == 1 and len(entra.claims) == 1
    assert len(arm.requests_to(a.usages_path("eastus"))) >= 2  # each process read them
    cached = home / "state" / tokens.CACHE_FILE
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600


@pytest.mark.parametrize("case", ["absent", "malformed", "refused", "unreachable"])
def test_cli_exit_codes_for_a_certificate(
    cli: Cli, tmp_path: Path, entra: EntraServer, arm: ApiServer, case: str
) -> None:
    entra.echo = True
    env = {
        **principal(entra),
        "AZURE_SUBSCRIPTION_ID": SUBSCRIPTION,
        "SHOAL_AZURE_MANAGEMENT_URL": arm.base,
        "SHOAL_DEBUG": "",
    }
    if case == "unreachable":
        closed = EntraServer()
        env["AZURE_AUTHORITY_HOST"] = closed.base
        closed._server.server_close()
    path = tmp_path / "sp.pem"
    if case == "malformed":
        write(path, b"-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n")
    elif case != "absent":
        other = certificate(OTHER_KEY)  # unknown to the app
        write(path, pem_file(OTHER_KEY, other))
    env["AZURE_CLIENT_CERTIFICATE_PATH"] = str(path)
    run = cli("resources", "-p", "azure", "-r", "eastus", "-r", "westus", env=env)
    expected = {"absent": 77, "malformed": 78, "refused": 77, "unreachable": 69}[case]
    assert run.exit_code == expected, run.stderr
    assert str(path) in run.stderr or case == "unreachable"
    assert len(run.stderr.strip().splitlines()) == 1
    sent = [s.form.get("client_assertion", "") for s in entra.to(token_path())]
    never_shown(run.stdout + run.stderr, *[x for a in sent if a for x in (a, *a.split("."))])
    # The reads run on threads: they share one refused exchange, not one each.
    assert len(sent) == (1 if case == "refused" else 0)


def test_pricing_takes_sku_shapes_with_the_cli_login(cli: Cli, tmp_path: Path) -> None:
    from providers.azure.fetch import NO_TOKEN_NOTE
    from tests.providers.azure import payloads as p

    with ApiServer() as api:
        api.route(p.PRICES_PATH, p.PricesApi(p.catalog(), base=api.base))
        management = p.ManagementApi(api.base)
        api.route(p.SKUS_PATH, management.skus)
        api.route(p.LOCATIONS_PATH, management.locations)
        env = {
            **logged_in(tmp_path),
            "SHOAL_AZURE_PRICES_URL": api.base,
            "SHOAL_AZURE_MANAGEMENT_URL": api.base,
        }
        run = cli("pricing", "-p", "azure", "-r", "eastus", "--json", env=env)
        assert run.exit_code == 0, run.stderr
        (answer,) = json.loads(run.stdout)
        assert NO_TOKEN_NOTE not in answer.get("notes", [])
        assert api.requests_to(p.SKUS_PATH)
        assert api.requests_to(p.SKUS_PATH)[0].headers["authorization"] == f"Bearer {TOKEN}"
        assert len(fakeaz.calls(tmp_path)) == 1
        never_shown(run.stdout + run.stderr, TOKEN)


def test_azure_credentials_import_cryptography_only_to_sign(
    home: Path, tmp_path: Path, entra: EntraServer, arm: ApiServer
) -> None:
    """The chain is read only by the commands that ask Azure; `cryptography` only when a
    certificate signs, not for a secret, nor when the last command's token is still good."""
    from tests.cli.test_imports import JSON_COMMANDS, _modules, _probe, _top

    for args in (["--help"], *JSON_COMMANDS):
        loaded = _modules(home, *args)
        assert "providers.azure.credentials" not in loaded and "cryptography" not in _top(loaded)
    base = {"AZURE_SUBSCRIPTION_ID": SUBSCRIPTION, "SHOAL_AZURE_MANAGEMENT_URL": arm.base}
    ask = ["resources", "-p", "azure", "-r", "eastus", "--json", "--refresh"]
    secret = {**base, **principal(entra, AZURE_CLIENT_SECRET=CLIENT_SECRET)}
    loaded, said = _probe(home, *ask, env=secret)
    assert json.loads(said) and "providers.azure.credentials" in loaded
    assert "cryptography" not in _top(loaded)
    path = write(tmp_path / "sp.pem", pem_file(KEY, CERT))
    certified = {**base, **principal(entra, AZURE_CLIENT_CERTIFICATE_PATH=str(path))}
    signed, said = _probe(home, *ask, env=certified)
    assert json.loads(said) and "cryptography" in _top(signed)
    again, said = _probe(home, *ask, env=certified)  # the token the last one got
    assert json.loads(said) and "cryptography" not in _top(again)
    assert len(entra.claims) == 1
