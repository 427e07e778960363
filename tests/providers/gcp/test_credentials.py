"""GCP Application Default Credentials (providers/gcp/credentials.py) against loopback
stand-ins of Google's token side (oauthserver.py: the RS256 signature checked with the
key's public half) and of the Compute Engine API (account_payloads.ProjectApi)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from providers.cloud.http import RetryPolicy
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    ProviderUnreachableError,
)
from providers.core.settings import Paths, Settings
from providers.gcp import credentials as adc
from providers.gcp import tokens
from providers.gcp.accounts import GcpAccounts
from providers.gcp.grants import pem_lines
from tests.providers.apiserver import ApiServer
from tests.providers.gcp import account_payloads as g
from tests.providers.gcp.oauthserver import (
    IMPERSONATE_PATH,
    JWT_BEARER,
    METADATA_PROJECT_PATH,
    METADATA_TOKEN_PATH,
    SA_EMAIL,
    SCOPE,
    STS_PATH,
    SUBJECT_PATH,
    TOKEN_EXCHANGE,
    TOKEN_PATH,
    OAuthServer,
    new_key,
)
from tests.providers.gcp.payloads import PROJECT, REGIONS_PATH, TOKEN

FAST = RetryPolicy(attempts=2, backoff_seconds=0.0, read_timeout_seconds=5.0)
KEY = new_key()  # one 2048-bit key for the module: generating one takes ~50 ms
OTHER_KEY = new_key()


@pytest.fixture(autouse=True)
def fresh_memory() -> Iterator[None]:
    """Each test starts with no token in the process's memory (the module keeps them)."""
    tokens.forget()
    yield
    tokens.forget()


@pytest.fixture
def oauth() -> Iterator[OAuthServer]:
    with OAuthServer() as server:
        yield server


@pytest.fixture(scope="module")
def compute_server() -> Iterator[ApiServer]:
    with ApiServer() as running:
        yield running


@pytest.fixture
def compute(compute_server: ApiServer) -> ApiServer:
    compute_server.reset()
    g.ProjectApi().serve(compute_server)
    return compute_server


def settings(tmp_path: Path, env: dict[str, str], config: dict[str, Any] | None = None) -> Settings:
    """Settings whose environment is `env` alone: no HOME, so no gcloud directory unless
    the test names one, and no GCE check unless it asks for one."""
    home = tmp_path / "shoal"
    home.mkdir(exist_ok=True)
    return Settings(
        paths=Paths.from_env({"SHOAL_HOME": str(home)}),
        config=config or {},
        env={"NO_GCE_CHECK": "true", **env},
    )


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc) if not isinstance(doc, str) else doc)
    return path


def found(tmp_path: Path, env: dict[str, str]) -> adc.GcpCredentials:
    made = adc.find_credentials(settings(tmp_path, env), policy=FAST)
    assert made is not None
    return made


def accounts(tmp_path: Path, compute: ApiServer, env: dict[str, str]) -> GcpAccounts:
    full = {"SHOAL_GCP_COMPUTE_URL": compute.base, **env}
    return GcpAccounts.from_settings(settings(tmp_path, full), policy=FAST)


def gac(path: Path) -> dict[str, str]:
    return {"GOOGLE_APPLICATION_CREDENTIALS": str(path)}


def never_shown(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text
    for line in pem_lines(_pem()):
        assert line not in text
    assert "\n" not in text.strip()


def _pem() -> str:
    from tests.providers.gcp.oauthserver import pem

    return pem(KEY)


# -- service-account keys ----------------------------------------------------------------


def test_a_key_is_signed_rs256_and_exchanged_for_the_token_the_api_takes(
    tmp_path: Path, oauth: OAuthServer, compute: ApiServer
) -> None:
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY, project_id=PROJECT))
    fetcher = accounts(tmp_path, compute, gac(key_file))
    assert fetcher.account == PROJECT  # the key's project_id
    assert oauth.to(TOKEN_PATH) == []  # found without a request: a cached answer needs none
    assert fetcher.regions() == ["europe-west4", "us-central1", "us-east1"]
    (sent,) = oauth.to(TOKEN_PATH)
    assert sent.form["grant_type"] == JWT_BEARER
    assert sent.headers["content-type"] == "application/x-www-form-urlencoded"
    (claims,) = oauth.claims  # the server verified the signature with the public half
    assert claims["iss"] == SA_EMAIL and claims["scope"] == SCOPE
    assert claims["aud"] == "https://oauth2.googleapis.com/token"  # Google's, always
    assert claims["exp"] - claims["iat"] == 3600
    assert compute.requests_to(REGIONS_PATH)[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_a_key_google_does_not_know_is_77_and_an_echo_shows_none_of_it(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    oauth.echo = True
    doc = oauth.service_account(OTHER_KEY)  # the server knows OTHER_KEY's public half
    doc["private_key"] = _pem()  # ... the file is signed with KEY
    key_file = write(tmp_path / "key.json", doc)
    with pytest.raises(CredentialsError) as caught:
        found(tmp_path, gac(key_file)).token()
    message = str(caught.value)
    (sent,) = oauth.to(TOKEN_PATH)
    assertion = sent.form["assertion"]
    assert "Invalid JWT Signature" in message and str(key_file) in message
    assert "GOOGLE_APPLICATION_CREDENTIALS" in message and "new key" in message
    never_shown(message, assertion, assertion.split(".")[2])


def test_an_unreachable_token_endpoint_is_69_naming_the_field(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    closed = OAuthServer()  # bound, never started, then closed: nobody listens there
    url = closed.url(TOKEN_PATH)
    closed._server.server_close()
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY, token_uri=url))
    with pytest.raises(ProviderUnreachableError) as caught:
        found(tmp_path, gac(key_file)).token()
    assert "token_uri" in str(caught.value) and str(key_file) in str(caught.value)


@pytest.mark.parametrize(
    ("content", "named"),
    [
        ("{not json", "not JSON"),
        ([1, 2], "not a JSON object"),
        ({"project_id": "p"}, "`type` is missing"),
        ({"type": "kerberos"}, "'kerberos' is not a credentials type"),
        ({"type": "service_account", "private_key": "x"}, "`client_email` is missing"),
        ({"type": "service_account", "client_email": 7, "private_key": "x"}, "not a string"),
        ({"type": "authorized_user", "client_id": "i", "client_secret": "s"}, "refresh_token"),
        ({"type": "external_account", "audience": "a", "subject_token_type": "t",
          "token_url": "https://sts.googleapis.com/v1/token"}, "`credential_source` is missing"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_78_naming_the_file_and_field(
    tmp_path: Path, content: Any, named: str
) -> None:
    path = write(tmp_path / "creds.json", content)
    with pytest.raises(ConfigError) as caught:
        adc.find_credentials(settings(tmp_path, gac(path)))
    assert named in str(caught.value) and str(path) in str(caught.value)


def test_a_key_that_is_no_key_is_78_without_quoting_it(tmp_path: Path, oauth: OAuthServer) -> None:
    broken = _pem().replace("A", "B")[:400] + "\n-----END PRIVATE KEY-----\n"
    path = write(tmp_path / "key.json", oauth.service_account(KEY, private_key=broken))
    with pytest.raises(ConfigError) as caught:
        found(tmp_path, gac(path)).token()
    assert "`private_key` is not" in str(caught.value) and str(path) in str(caught.value)
    for line in pem_lines(broken):
        assert line not in str(caught.value)
    assert oauth.seen == []


def test_a_token_uri_that_would_send_the_key_in_clear_text_is_78(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    doc = oauth.service_account(KEY, token_uri="http://tokens.example.com/token")
    with pytest.raises(ConfigError, match="`token_uri` is not an https URL"):
        adc.find_credentials(settings(tmp_path, gac(write(tmp_path / "k.json", doc))))


def test_a_missing_file_is_77_naming_it(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="no such file") as caught:
        adc.find_credentials(settings(tmp_path, gac(tmp_path / "gone.json")))
    assert str(tmp_path / "gone.json") in str(caught.value)


def test_the_stand_in_takes_what_googles_own_library_sends(oauth: OAuthServer) -> None:
    """The token endpoint stand-in holds google-auth (Google's library) to the same checks:
    what it accepts from shoal it accepts from Google's own client, and the reverse."""
    service_account = pytest.importorskip("google.oauth2.service_account")
    user = pytest.importorskip("google.oauth2.credentials")
    transport = pytest.importorskip("google.auth.transport.requests")
    key = service_account.Credentials.from_service_account_info(
        oauth.service_account(KEY), scopes=[SCOPE]
    )
    key.refresh(transport.Request())
    info = oauth.authorized_user()
    # Built by hand: from_authorized_user_info puts Google's own endpoint in place of the
    # file's token_uri (shoal honours a file's, which gcloud's files never have).
    login = user.Credentials(
        None,
        refresh_token=info["refresh_token"],
        client_id=info["client_id"],
        client_secret=info["client_secret"],
        token_uri=info["token_uri"],
    )
    login.refresh(transport.Request())
    assert key.token == login.token == TOKEN and len(oauth.claims) == 1


def test_the_stand_in_takes_what_the_google_cloud_cli_sends(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    """gcloud (on these machines) activates the same key against the stand-in: Google's own
    CLI signs what the stand-in checks, and gets the token shoal gets."""
    if shutil.which("gcloud") is None:
        pytest.skip("the Google Cloud CLI (gcloud) is not installed")
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY))
    env = {
        **os.environ,
        "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"),
        "CLOUDSDK_CORE_DISABLE_PROMPTS": "1",
    }

    def gcloud(*args: str) -> str:
        done = subprocess.run(
            ["gcloud", *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-500:]
        return done.stdout.strip()

    gcloud("auth", "activate-service-account", "--key-file", str(key_file))
    assert gcloud("auth", "print-access-token") == TOKEN
    assert found(tmp_path, gac(key_file)).token() == TOKEN
    mine = oauth.claims[-1]  # shoal's assertion, beside gcloud's
    assert all(c["aud"] == mine["aud"] and c["iss"] == mine["iss"] for c in oauth.claims)


# -- a user's login: authorized_user -------------------------------------------------------


def test_a_users_refresh_token_buys_the_token_and_names_the_quota_project(
    tmp_path: Path, oauth: OAuthServer, compute: ApiServer
) -> None:
    path = write(tmp_path / "adc.json", oauth.authorized_user(quota_project_id=PROJECT))
    fetcher = accounts(tmp_path, compute, gac(path))
    assert fetcher.account == PROJECT  # quota_project_id, when nothing else names one
    fetcher.regions()
    (sent,) = oauth.to(TOKEN_PATH)
    assert sent.form["grant_type"] == "refresh_token"
    assert sent.form["refresh_token"] == "1//0g-refresh-token-of-a-user-XYZ"
    asked = compute.requests_to(REGIONS_PATH)[0].headers
    assert asked["authorization"] == f"Bearer {TOKEN}"
    assert asked["x-goog-user-project"] == PROJECT  # as google-auth sends it


def test_a_revoked_refresh_token_is_77_saying_to_log_in_again(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    oauth.echo = True
    doc = oauth.authorized_user()
    oauth.users.clear()  # revoked
    with pytest.raises(CredentialsError) as caught:
        found(tmp_path, gac(write(tmp_path / "adc.json", doc))).token()
    message = str(caught.value)
    assert "gcloud auth application-default login" in message and "refresh_token" in message
    never_shown(message, doc["refresh_token"], doc["client_secret"])


# -- workload identity federation: external_account ----------------------------------------


def test_a_file_sourced_subject_token_is_exchanged_at_the_sts(
    tmp_path: Path, oauth: OAuthServer, compute: ApiServer
) -> None:
    subject = write(tmp_path / "oidc-token", "eyJraWQiOi.subject-token.sig\n")
    oauth.subjects.add("eyJraWQiOi.subject-token.sig")
    doc = oauth.external_account({"file": str(subject)}, quota_project_id=PROJECT)
    fetcher = accounts(tmp_path, compute, gac(write(tmp_path / "wif.json", doc)))
    fetcher.regions()
    (sent,) = oauth.to(STS_PATH)
    assert sent.form["grant_type"] == TOKEN_EXCHANGE
    assert sent.form["subject_token"] == "eyJraWQiOi.subject-token.sig"
    assert sent.form["scope"] == SCOPE
    assert compute.requests_to(REGIONS_PATH)[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_a_url_sourced_json_subject_token_then_service_account_impersonation(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    oauth.subject, oauth.grants = "azure-ad-token", ["ya29.federated", TOKEN]
    oauth.subjects.add("azure-ad-token")
    source = {
        "url": oauth.url(SUBJECT_PATH),
        "headers": {"Metadata": "True"},
        "format": {"type": "json", "subject_token_field_name": "id_token"},
    }
    doc = oauth.external_account(
        source,
        service_account_impersonation_url=oauth.url(IMPERSONATE_PATH),
        service_account_impersonation={"token_lifetime_seconds": 1800},
    )
    made = found(tmp_path, gac(write(tmp_path / "wif.json", doc)))
    assert made.token() == TOKEN
    assert oauth.to(SUBJECT_PATH)[0].headers["metadata"] == "True"
    (asked,) = oauth.to(IMPERSONATE_PATH)
    assert asked.headers["authorization"] == "Bearer ya29.federated"
    assert asked.body == {"delegates": [], "scope": [SCOPE], "lifetime": "1800s"}


def test_a_refused_subject_token_is_77_and_never_quoted(tmp_path: Path, oauth: OAuthServer) -> None:
    oauth.echo = True
    subject = write(tmp_path / "oidc-token", "a-stale-subject-token-123")
    doc = oauth.external_account({"file": str(subject)})
    with pytest.raises(CredentialsError) as caught:
        found(tmp_path, gac(write(tmp_path / "wif.json", doc))).token()
    assert "could not be verified" in str(caught.value)
    never_shown(str(caught.value), "a-stale-subject-token-123")


@pytest.mark.parametrize(
    ("source", "kind"),
    [
        ({"environment_id": "aws1", "region_url": "http://169.254.169.254/x"}, "environment_id"),
        ({"executable": {"command": "/bin/mint", "timeout_millis": 5000}}, "executable"),
        ({"certificate": {"use_default_certificate_config": True}}, "certificate"),
    ],
)
def test_sources_shoal_does_not_read_are_refused_naming_the_kind(
    tmp_path: Path, oauth: OAuthServer, source: dict[str, Any], kind: str
) -> None:
    path = write(tmp_path / "wif.json", oauth.external_account(source))
    with pytest.raises(CredentialsError) as caught:
        adc.find_credentials(settings(tmp_path, gac(path)))
    message = str(caught.value)
    assert f"credential_source {kind}" in message and "not supported" in message
    assert "\n" not in message and oauth.seen == []


def test_gclouds_impersonated_service_account_file(tmp_path: Path, oauth: OAuthServer) -> None:
    oauth.grants = ["ya29.user", TOKEN]
    doc = {
        "type": "impersonated_service_account",
        "service_account_impersonation_url": oauth.url(IMPERSONATE_PATH),
        "source_credentials": oauth.authorized_user(),
        "delegates": [],
    }
    assert found(tmp_path, gac(write(tmp_path / "imp.json", doc))).token() == TOKEN
    assert oauth.to(IMPERSONATE_PATH)[0].headers["authorization"] == "Bearer ya29.user"


# -- gcloud's files and the metadata server ------------------------------------------------


def gcloud(tmp_path: Path, oauth: OAuthServer, project: str = "gcloud-project") -> Path:
    """A gcloud directory after `gcloud auth application-default login` and `gcloud config
    configurations create work` + `gcloud config set project`."""
    root = tmp_path / "gcloud"
    write(root / adc.ADC_FILE, oauth.authorized_user())
    write(root / "active_config", "work")
    work = f"[core]\naccount = me@example.com\nproject = {project}\n"
    write(root / "configurations" / "config_work", work)
    write(root / "configurations" / "config_default", "[core]\nproject = default-project\n")
    return root


def test_gclouds_adc_file_and_its_active_configurations_project(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    root = gcloud(tmp_path, oauth)
    env = {"CLOUDSDK_CONFIG": str(root)}
    made = found(tmp_path, env)
    assert made.kind == "authorized_user" and str(root / adc.ADC_FILE) in made.where
    assert made.token() == TOKEN
    # The configuration's project beats the file's quota_project_id.
    assert adc.find_project(settings(tmp_path, env), made)[0] == "gcloud-project"
    named = {**env, "CLOUDSDK_ACTIVE_CONFIG_NAME": "default"}
    assert adc.find_project(settings(tmp_path, named), made)[0] == "default-project"
    # Without CLOUDSDK_CONFIG, gcloud's directory is ~/.config/gcloud.
    home = tmp_path / "user"
    (home / ".config").mkdir(parents=True)
    root.rename(home / ".config" / "gcloud")
    assert found(tmp_path, {"HOME": str(home)}).kind == "authorized_user"


def test_the_metadata_server_on_loopback(tmp_path: Path, oauth: OAuthServer) -> None:
    env = {"GCE_METADATA_HOST": oauth.host}
    made = found(tmp_path, env)
    assert made.kind == "metadata" and made.token() == TOKEN
    assert oauth.to(METADATA_TOKEN_PATH)[0].headers["metadata-flavor"] == "Google"
    assert adc.find_project(settings(tmp_path, env), made) == ("vm-project", made.where)
    assert len(oauth.to(METADATA_PROJECT_PATH)) == 1


def test_the_metadata_server_is_asked_only_on_gce(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    product = write(tmp_path / "product_name", "Standard PC (Q35 + ICH9, 2009)\n")
    monkeypatch.setattr(adc, "DMI_PRODUCT", product)
    assert adc.metadata_host({}) == ""
    assert adc.find_credentials(settings(tmp_path, {"NO_GCE_CHECK": ""})) is None
    write(product, "Google Compute Engine\n")
    assert adc.metadata_host({}) == adc.DEFAULT_METADATA_HOST
    assert adc.metadata_host({"NO_GCE_CHECK": "True"}) == ""
    monkeypatch.setattr(adc, "DMI_PRODUCT", tmp_path / "absent")
    assert adc.metadata_host({}) == ""
    with pytest.raises(ConfigError, match="GCE_METADATA_HOST"):
        adc.metadata_host({"GCE_METADATA_HOST": "http://x/"})


# -- the order -----------------------------------------------------------------------------


def test_the_chain_takes_the_first_source_in_order(tmp_path: Path, oauth: OAuthServer) -> None:
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY))
    env = {
        "SHOAL_GCP_TOKEN": "ya29.explicit",
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
        "CLOUDSDK_CONFIG": str(gcloud(tmp_path, oauth)),
        "GCE_METADATA_HOST": oauth.host,
    }
    kinds = []
    for name in [*env, ""]:
        made = adc.find_credentials(settings(tmp_path, env))
        kinds.append(made.kind if made is not None else None)
        env.pop(name, None)
    assert kinds == ["token", "service_account", "authorized_user", "metadata", None]
    assert oauth.seen == []  # finding asks nothing


def test_the_project_order(tmp_path: Path, oauth: OAuthServer) -> None:
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY))
    env = {
        "SHOAL_GCP_PROJECT": "shoal-env",
        "GOOGLE_CLOUD_PROJECT": "google-env",
        "CLOUDSDK_CORE_PROJECT": "gcloud-env",
        "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
        "CLOUDSDK_CONFIG": str(gcloud(tmp_path, oauth)),
    }
    config = {"gcp": {"project": "shoal-config"}}
    made = found(tmp_path, env)
    seen = [adc.find_project(settings(tmp_path, env, config), made)[0]]
    env.pop("SHOAL_GCP_PROJECT")
    seen.append(adc.find_project(settings(tmp_path, env, config), made)[0])
    for name in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", ""):
        seen.append(adc.find_project(settings(tmp_path, env), made)[0])
        env.pop(name, None)
    made.project = ""  # a key without project_id: gcloud's configuration, then quota project
    seen.append(adc.find_project(settings(tmp_path, env), made)[0])
    env.pop("CLOUDSDK_CONFIG")
    made.quota_project = "billed"
    seen.append(adc.find_project(settings(tmp_path, env), made)[0])
    made.quota_project = ""
    seen.append(adc.find_project(settings(tmp_path, env), made)[0])
    assert seen == [
        "shoal-env", "shoal-config", "google-env", "gcloud-env", "key-project",
        "gcloud-project", "billed", "",
    ]  # fmt: skip


# -- tokens: expiry, the token file, a 401 -------------------------------------------------


def test_a_token_is_kept_until_near_its_expiry(tmp_path: Path, oauth: OAuthServer) -> None:
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY))
    made = found(tmp_path, gac(key_file))
    assert made.token() == made.token() == TOKEN
    assert len(oauth.to(TOKEN_PATH)) == 1
    tokens.forget()
    (tmp_path / "shoal" / "state" / tokens.CACHE_FILE).unlink()
    oauth.expires_in = 60  # inside the margin: stale at once, asked again each time
    made.token()
    made.token()
    assert len(oauth.to(TOKEN_PATH)) == 3


def test_the_token_file_serves_the_next_process_and_holds_no_secret(
    tmp_path: Path, oauth: OAuthServer
) -> None:
    doc = oauth.authorized_user()
    path = write(tmp_path / "adc.json", doc)
    assert found(tmp_path, gac(path)).token() == TOKEN
    tokens.forget()  # as a new process
    assert found(tmp_path, gac(path)).token() == TOKEN
    assert len(oauth.to(TOKEN_PATH)) == 1
    cached = tmp_path / "shoal" / "state" / tokens.CACHE_FILE
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600
    text = cached.read_text()
    assert TOKEN in text
    for secret in (doc["refresh_token"], doc["client_secret"], doc["client_id"]):
        assert secret not in text
    # Another file (another user's login) is another entry, never this one's token.
    oauth.grants = ["ya29.other-user"]
    other = write(tmp_path / "other.json", {**doc, "refresh_token": "1//other"})
    oauth.users["1//other"] = (doc["client_id"], doc["client_secret"])
    assert found(tmp_path, gac(other)).token() == "ya29.other-user"


def test_a_refused_token_is_renewed_once(
    tmp_path: Path, oauth: OAuthServer, compute: ApiServer
) -> None:
    oauth.grants = ["ya29.revoked-since", TOKEN]
    path = write(tmp_path / "adc.json", oauth.authorized_user(quota_project_id=PROJECT))
    assert accounts(tmp_path, compute, gac(path)).regions()
    sent = [s.headers["authorization"] for s in compute.requests_to(REGIONS_PATH)]
    assert sent[0] == "Bearer ya29.revoked-since"
    assert sent[1:] == [f"Bearer {TOKEN}"] * (len(sent) - 1)  # the retry, then the next page
    assert len(oauth.to(TOKEN_PATH)) == 2
    # One that stays refused is refused after one renewal, naming where it came from.
    tokens.forget()
    (tmp_path / "shoal" / "state" / tokens.CACHE_FILE).unlink()
    compute.reset()
    oauth.grants = ["ya29.never-good"]
    g.ProjectApi().serve(compute)
    with pytest.raises(CredentialsError, match="HTTP 401") as caught:
        accounts(tmp_path, compute, gac(path)).regions()
    assert len(oauth.to(TOKEN_PATH)) == 4 and str(path) in str(caught.value)
    assert "ya29.never-good" not in str(caught.value)


def test_shoal_gcp_token_is_used_as_it_is(tmp_path: Path, compute: ApiServer) -> None:
    made = found(tmp_path, {"SHOAL_GCP_TOKEN": TOKEN})
    assert made.kind == "token" and made.token() == TOKEN and made.renew(TOKEN) is False
    assert accounts(tmp_path, compute, {"SHOAL_GCP_TOKEN": TOKEN, "SHOAL_GCP_PROJECT": PROJECT})


# -- through the CLI ------------------------------------------------------------------------


Cli = Callable[..., Any]


def test_resources_with_only_google_application_credentials(
    cli: Cli, tmp_path: Path, oauth: OAuthServer, compute: ApiServer
) -> None:
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY, project_id=PROJECT))
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file), "SHOAL_GCP_COMPUTE_URL": compute.base}
    run = cli("resources", "-p", "gcp", "--region", "all", "--json", env=env)
    assert run.exit_code == 0, run.stderr
    assert len(json.loads(run.stdout)) == 3
    assert len(oauth.claims) == 1
    never_shown(run.stdout + run.stderr, TOKEN)


def test_the_next_shoal_process_neither_signs_nor_asks_again(
    shoal_proc: Callable[..., subprocess.CompletedProcess[str]],
    home: Path,
    tmp_path: Path,
    oauth: OAuthServer,
    compute: ApiServer,
) -> None:
    key_file = write(tmp_path / "key.json", oauth.service_account(KEY, project_id=PROJECT))
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(key_file), "SHOAL_GCP_COMPUTE_URL": compute.base}
    for _ in range(2):
        done = shoal_proc("resources", "-p", "gcp", "-r", "us-central1", "--refresh", env=env)
        assert done.returncode == 0, done.stderr
    assert len(oauth.to(TOKEN_PATH)) == 1
    assert len(compute.requests_to(REGIONS_PATH)) >= 2  # each process read the regions
    cached = home / "state" / tokens.CACHE_FILE
    assert stat.S_IMODE(cached.stat().st_mode) == 0o600


@pytest.mark.parametrize("case", ["absent", "malformed", "refused", "unreachable"])
def test_cli_exit_codes_for_credentials_files(
    cli: Cli, tmp_path: Path, oauth: OAuthServer, compute: ApiServer, case: str
) -> None:
    oauth.echo = True
    doc = oauth.service_account(OTHER_KEY, project_id=PROJECT)
    doc["private_key"] = _pem()
    if case == "unreachable":
        closed = OAuthServer()
        doc["token_uri"] = closed.url(TOKEN_PATH)
        closed._server.server_close()
    path = tmp_path / "key.json"
    if case != "absent":
        write(path, "{broken" if case == "malformed" else doc)
    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(path), "SHOAL_GCP_COMPUTE_URL": compute.base}
    run = cli("resources", "-p", "gcp", "-r", "us-central1", env={**env, "SHOAL_DEBUG": ""})
    expected = {"absent": 77, "malformed": 78, "refused": 77, "unreachable": 69}[case]
    assert run.exit_code == expected, run.stderr
    assert str(path) in run.stderr and len(run.stderr.strip().splitlines()) == 1
    sent = [s.form.get("assertion", "") for s in oauth.to(TOKEN_PATH)]
    never_shown(run.stdout + run.stderr, *[a for a in sent if a])
    # The reads run on five threads: they share one refused exchange, not five.
    assert len(sent) == (1 if case == "refused" else 0)


def test_pricing_takes_machine_shapes_with_the_same_credentials(
    cli: Cli, tmp_path: Path, oauth: OAuthServer
) -> None:
    from tests.providers.gcp import payloads as prices

    with ApiServer() as api:
        prices.serve(api)
        key_file = write(tmp_path / "key.json", oauth.service_account(KEY, project_id=PROJECT))
        env = {
            "GOOGLE_APPLICATION_CREDENTIALS": str(key_file),
            "SHOAL_GCP_API_KEY": prices.API_KEY,
            "SHOAL_GCP_BILLING_URL": api.base,
            "SHOAL_GCP_COMPUTE_URL": api.base,
        }
        run = cli("pricing", "-p", "gcp", "-r", "us-central1", "--json", env=env)
        assert run.exit_code == 0, run.stderr
        (answer,) = json.loads(run.stdout)
        assert not any("built-in table" in n for n in answer.get("notes", []))
        assert api.requests_to(prices.MACHINE_TYPES_PATH)
        assert len(oauth.claims) == 1
        never_shown(run.stdout + run.stderr, TOKEN)
        # --available reads the project's quotas with the same credentials and token.
        g.ProjectApi().serve(api)
        ask = ["pricing", "-p", "gcp", "-r", "us-central1", "--available", "--json"]
        run = cli(*ask, env=env)
        assert run.exit_code == 0, run.stderr
        (kept,) = json.loads(run.stdout)
        assert kept["items"] and set(kept["items"]) <= set(answer["items"])
        assert api.requests_to(g.PROJECT_PATH) and len(oauth.claims) == 1
