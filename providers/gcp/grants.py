"""How each kind of GCP credentials buys an access token (the kinds and their order are
credentials.py's to say): a service-account key's signed assertion, a user's refresh token,
a federated workload's subject token at the STS (then, maybe, a service account's token
through IAM Credentials), gcloud's impersonated service account, and the GCE metadata
server. Each reads its file's fields here, refusing a malformed one (78) by the field's
name, never its value, and returns GcpCredentials whose `mint` asks for a token.
"""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from providers.core import urls
from providers.core.env import (
    ENV_GCP_APPLICATION_CREDENTIALS,
    ENV_GCP_CLOUD_PROJECT,
    ENV_GCP_METADATA_HOST,
    ENV_GCP_PROJECT,
    ENV_GCP_TOKEN,
)
from providers.core.errors import ConfigError, CredentialsError, ShoalError
from providers.gcp.tokens import (
    MAX_FILE_BYTES,
    SCOPE,
    GcpCredentials,
    Token,
    TokenFile,
    access_token,
    exchange,
    usable,
)

if TYPE_CHECKING:
    from providers.cloud.http import RetryPolicy

GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
DEFAULT_METADATA_HOST = "metadata.google.internal"
METADATA_TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
METADATA_PROJECT_PATH = "/computeMetadata/v1/project/project-id"
ASSERTION_SECONDS = 3600  # the longest a jwt-bearer assertion may live
NO_PROJECT_FIX = (
    f"set {ENV_GCP_PROJECT} (or [gcp] project, {ENV_GCP_CLOUD_PROJECT}, or `gcloud config set "
    "project`) to the project id"
)
_NEW_KEY = (
    "create a new key (gcloud iam service-accounts keys create) or point "
    f"{ENV_GCP_APPLICATION_CREDENTIALS} at a valid one"
)
_LOGIN_AGAIN = "run `gcloud auth application-default login` again"
_IMPERSONATE = (
    "the identity may not impersonate the service account: grant it "
    "roles/iam.serviceAccountTokenCreator (roles/iam.workloadIdentityUser for a federated one) "
    "on that service account"
)
_UNSUPPORTED_SOURCE = (
    "shoal reads `file` and `url` credential sources only; use a file- or URL-sourced "
    "configuration (gcloud iam workload-identity-pools create-cred-config "
    f"--credential-source-file), or set {ENV_GCP_TOKEN} to a token (gcloud auth "
    "print-access-token)"
)


_KINDS = ("service_account", "authorized_user", "external_account", "impersonated_service_account")
# Types Google's libraries know that shoal does not read.
_OTHER_KINDS = ("external_account_authorized_user", "gdch_service_account")
_SOURCE_KINDS = ("service_account", "authorized_user")  # what may buy an impersonated token


def from_document(
    doc: Mapping[str, Any], where: str, policy: RetryPolicy | None, nested: bool = False
) -> GcpCredentials:
    """The credentials a JSON document of `where` describes, by its `type` (`nested`: the
    source_credentials of an impersonated service account, a key or a user's login)."""
    kind = _text(doc, "type", where, fix="not a credentials file")
    if kind in _OTHER_KINDS or (kind in _KINDS and nested and kind not in _SOURCE_KINDS):
        raise CredentialsError(
            f"{where}: credentials of type {kind!r} are not supported by shoal; use a "
            f"service-account key, `gcloud auth application-default login`, or set "
            f"{ENV_GCP_TOKEN} (gcloud auth print-access-token)"
        )
    quota = _text(doc, "quota_project_id", where, required=False)
    if kind == "service_account":
        return _service_account(doc, where, policy, quota)
    if kind == "authorized_user":
        return _authorized_user(doc, where, policy, quota)
    if kind == "external_account":
        return _external_account(doc, where, policy, quota)
    if kind == "impersonated_service_account":
        return _impersonated(doc, where, policy, quota)
    raise ConfigError(
        f"{where}: `type` {kind[:40]!r} is not a credentials type Google's tools write "
        f"(known: {', '.join(_KINDS)}); point at another file"
    )


def _service_account(
    doc: Mapping[str, Any], where: str, policy: RetryPolicy | None, quota: str
) -> GcpCredentials:
    fix = "download a new JSON key for the service account"
    email = _text(doc, "client_email", where, fix=fix)
    pem = _text(doc, "private_key", where, fix=fix)
    key_id = _text(doc, "private_key_id", where, required=False)
    token_uri = _endpoint(doc, "token_uri", where, GOOGLE_TOKEN_URI)

    def mint() -> Token:
        from providers.gcp.jwt import sign_rs256

        now = int(time.time())
        claims = {
            "iss": email,
            "scope": SCOPE,
            # Always Google's endpoint, wherever the key's token_uri sends the request:
            # https://developers.google.com/identity/protocols/oauth2/service-account
            # ("this value is always https://oauth2.googleapis.com/token"), as google-auth.
            "aud": GOOGLE_TOKEN_URI,
            "iat": now,
            "exp": now + ASSERTION_SECONDS,
        }
        assertion = sign_rs256(claims, pem, key_id, where)
        got = exchange(
            "POST",
            token_uri,
            what=f"the service-account key in {where}",
            place=f"token_uri in {where}",
            fix=f"the key may be deleted or disabled, or this machine's clock is off: {_NEW_KEY}",
            secrets=[pem, *pem_lines(pem), assertion, *assertion.split(".")],
            policy=policy,
            form={"grant_type": JWT_BEARER, "assertion": assertion},
        )
        return access_token(got, token_uri)

    return GcpCredentials(
        where=where,
        kind="service_account",
        project=_text(doc, "project_id", where, required=False),
        quota_project=quota,
        mint=mint,
    )


def _authorized_user(
    doc: Mapping[str, Any], where: str, policy: RetryPolicy | None, quota: str
) -> GcpCredentials:
    fix = "run `gcloud auth application-default login` to write a new one"
    client_id = _text(doc, "client_id", where, fix=fix)
    client_secret = _text(doc, "client_secret", where, fix=fix)
    refresh_token = _text(doc, "refresh_token", where, fix=fix)
    token_uri = _endpoint(doc, "token_uri", where, GOOGLE_TOKEN_URI)

    def mint() -> Token:
        got = exchange(
            "POST",
            token_uri,
            what=f"the refresh_token in {where}",
            place=f"token_uri in {where}",
            fix=f"it was revoked or has expired: {_LOGIN_AGAIN}",
            secrets=[client_secret, refresh_token],
            policy=policy,
            form={
                "grant_type": "refresh_token",
                "client_id": client_id,
                "client_secret": client_secret,
                "refresh_token": refresh_token,
            },
        )
        return access_token(got, token_uri)

    return GcpCredentials(where=where, kind="authorized_user", quota_project=quota, mint=mint)


def _external_account(
    doc: Mapping[str, Any], where: str, policy: RetryPolicy | None, quota: str
) -> GcpCredentials:
    fix = "write it again (gcloud iam workload-identity-pools create-cred-config)"
    audience = _text(doc, "audience", where, fix=fix)
    token_type = _text(doc, "subject_token_type", where, fix=fix)
    token_url = _endpoint(doc, "token_url", where, "")
    subject = _subject_source(doc.get("credential_source"), where, policy)
    client_id = _text(doc, "client_id", where, required=False)
    client_secret = _text(doc, "client_secret", where, required=False)
    user_project = _text(doc, "workforce_pool_user_project", where, required=False)
    impersonate = (
        _endpoint(doc, "service_account_impersonation_url", where, "")
        if doc.get("service_account_impersonation_url") is not None
        else ""
    )
    lifetime = _lifetime(doc.get("service_account_impersonation"), where)

    def mint() -> Token:
        subject_token = subject()
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "audience": audience,
            "scope": SCOPE,
            "requested_token_type": ACCESS_TOKEN_TYPE,
            "subject_token": subject_token,
            "subject_token_type": token_type,
        }
        headers: dict[str, str] = {}
        if client_id:
            pair = f"{client_id}:{client_secret}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
        elif user_project:
            form["options"] = quote(json.dumps({"userProject": user_project}))
        got = exchange(
            "POST",
            token_url,
            what=f"the subject token of {where}",
            place=f"token_url in {where}",
            fix=(
                "check the workload identity pool provider (audience, subject_token_type, "
                "attribute conditions) and that the subject token is current"
            ),
            secrets=[subject_token, client_secret],
            policy=policy,
            form=form,
            headers=headers,
        )
        federated = access_token(got, token_url)
        if not impersonate:
            return federated
        return _impersonated_token(
            impersonate, federated.value, [], lifetime, where, policy, [subject_token]
        )

    return GcpCredentials(where=where, kind="external_account", quota_project=quota, mint=mint)


def _impersonated(
    doc: Mapping[str, Any], where: str, policy: RetryPolicy | None, quota: str
) -> GcpCredentials:
    url = _endpoint(doc, "service_account_impersonation_url", where, "")
    source_doc = doc.get("source_credentials")
    if not isinstance(source_doc, dict):
        raise ConfigError(
            f"{where}: `source_credentials` is missing or not an object; {_LOGIN_AGAIN} "
            "with --impersonate-service-account"
        )
    source = from_document(source_doc, f"source_credentials of {where}", policy, nested=True)
    delegates = doc.get("delegates") or []
    if not isinstance(delegates, list) or not all(isinstance(d, str) for d in delegates):
        raise ConfigError(f"{where}: `delegates` is not a list of service account names")

    def mint() -> Token:
        assert source.mint is not None
        return _impersonated_token(
            url, source.mint().value, delegates, ASSERTION_SECONDS, where, policy, []
        )

    return GcpCredentials(
        where=where, kind="impersonated_service_account", quota_project=quota, mint=mint
    )


def _impersonated_token(
    url: str,
    bearer: str,
    delegates: Sequence[str],
    lifetime: int,
    where: str,
    policy: RetryPolicy | None,
    secrets: Sequence[str],
) -> Token:
    """IAM Credentials generateAccessToken: {accessToken, expireTime} for `bearer`'s
    identity, acting as the service account of `url`."""
    got = exchange(
        "POST",
        url,
        what=f"the service account impersonation of {where}",
        place=f"service_account_impersonation_url in {where}",
        fix=_IMPERSONATE,
        secrets=[bearer, *secrets],
        policy=policy,
        body={"delegates": list(delegates), "scope": [SCOPE], "lifetime": f"{lifetime}s"},
        headers={"Authorization": f"Bearer {bearer}"},
    )
    value, expires = got.get("accessToken"), got.get("expireTime")
    if not usable(value) or not isinstance(expires, str):
        raise ShoalError(
            f"gcp: {urls.display(url)} answered without a usable accessToken and expireTime; "
            "nothing was used from it"
        )
    from datetime import datetime

    try:
        when = datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ShoalError(
            f"gcp: {urls.display(url)} answered an expireTime that is no RFC 3339 time"
        ) from None
    assert isinstance(value, str)
    return Token(value, when)


def _subject_source(source: object, where: str, policy: RetryPolicy | None) -> Callable[[], str]:
    """A function reading the subject token from `credential_source` (anew each time: a
    workload's token is rotated by whoever writes it)."""
    if not isinstance(source, dict):
        raise ConfigError(
            f"{where}: `credential_source` is missing or not an object; write the file again "
            "(gcloud iam workload-identity-pools create-cred-config)"
        )
    here = f"credential_source in {where}"
    read = _subject_format(source.get("format"), here)
    if "file" in source:
        path = _text(source, "file", here)

        def from_file() -> str:
            try:
                with open(path, "rb") as handle:
                    raw = handle.read(MAX_FILE_BYTES + 1)
            except OSError as exc:
                raise CredentialsError(
                    f"gcp: the subject token file {path} (credential_source.file in {where}) "
                    f"cannot be read ({exc.strerror or type(exc).__name__}); the workload's "
                    "identity token is not there: check what writes it"
                ) from None
            return read(raw, f"the subject token file {path}")

        return from_file
    if "url" in source:
        url = _text(source, "url", here)
        try:
            urls.parse(url)
        except urls.UrlError as exc:
            raise ConfigError(
                f"{where}: credential_source.url is not a usable URL: {exc}"
            ) from None
        headers = source.get("headers") or {}
        if not isinstance(headers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
        ):
            raise ConfigError(f"{where}: credential_source.headers is not an object of strings")

        def from_url() -> str:
            got = exchange(
                "GET",
                url,
                what=f"the subject token request of {where}",
                place=f"credential_source.url in {where}",
                fix="check the identity provider the URL asks",
                secrets=list(headers.values()),
                policy=policy,
                headers=headers,
                raw=True,
            )
            return read(got["raw"], f"the subject token from {urls.display(url)}")

        return from_url
    if source.get("environment_id"):
        kind = f"environment_id {str(source['environment_id'])[:20]!r} (AWS)"
    else:
        kind = next((k for k in ("executable", "certificate") if k in source), "")
        kind = kind or ", ".join(sorted(str(k)[:20] for k in source)) or "none"
    raise CredentialsError(
        f"{where}: credential_source {kind} is not supported; {_UNSUPPORTED_SOURCE}"
    )


def _subject_format(spec: object, where: str) -> Callable[[bytes, str], str]:
    spec = spec if spec is not None else {}
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: `format` is not an object")
    kind = spec.get("type", "text")
    if kind == "text":

        def text(raw: bytes, what: str) -> str:
            return _subject(raw.decode("utf-8", "replace").strip(), what)

        return text
    if kind != "json":
        raise ConfigError(f"{where}: format.type {str(kind)[:20]!r} is neither text nor json")
    name = _text(spec, "subject_token_field_name", f"format of {where}")

    def from_json(raw: bytes, what: str) -> str:
        try:
            doc = json.loads(raw)
        except (ValueError, RecursionError):
            doc = None
        value = doc.get(name) if isinstance(doc, dict) else None
        if not isinstance(value, str):
            raise CredentialsError(
                f"gcp: {what} is not JSON with a string field {name!r} "
                f"(format.subject_token_field_name in {where}); check what writes it"
            )
        return _subject(value.strip(), what)

    return from_json


def _subject(value: str, what: str) -> str:
    if not value:
        raise CredentialsError(f"gcp: {what} is empty; the workload has no identity token yet")
    return value


def _lifetime(spec: object, where: str) -> int:
    if spec is None:
        return ASSERTION_SECONDS
    seconds = spec.get("token_lifetime_seconds", ASSERTION_SECONDS) if isinstance(spec, dict) else 0
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 600 <= seconds <= 43200:
        raise ConfigError(
            f"{where}: service_account_impersonation.token_lifetime_seconds must be a whole "
            "number of seconds from 600 to 43200"
        )
    return seconds


# -- the metadata server -----------------------------------------------------------------


def metadata_credentials(host: str, policy: RetryPolicy | None, cache: TokenFile) -> GcpCredentials:
    base = f"http://{host}"
    where = f"the metadata server ({host})"
    if host == DEFAULT_METADATA_HOST:
        where = f"the metadata server of this GCE VM ({host})"
    quick = policy or _metadata_policy()

    def mint() -> Token:
        got = exchange(
            "GET",
            base + METADATA_TOKEN_PATH,
            what=f"the VM's service account token from {where}",
            place=ENV_GCP_METADATA_HOST,
            fix=(
                "this VM may have no service account, or scopes without cloud-platform: attach "
                f"one (gcloud compute instances set-service-account), or set "
                f"{ENV_GCP_APPLICATION_CREDENTIALS}"
            ),
            secrets=[],
            policy=quick,
            headers={"Metadata-Flavor": "Google"},
            not_found_refused=True,
        )
        return access_token(got, base + METADATA_TOKEN_PATH)

    key = hashlib.sha256(b"gcp-metadata\0" + host.encode()).hexdigest()
    return GcpCredentials(
        where=where, kind="metadata", mint=mint, cache_key=key, cache=cache, metadata_url=base
    )


def metadata_project(credentials: GcpCredentials) -> str:
    got = exchange(
        "GET",
        credentials.metadata_url + METADATA_PROJECT_PATH,
        what=f"the project id from {credentials.where}",
        place=ENV_GCP_METADATA_HOST,
        fix=NO_PROJECT_FIX,
        secrets=[],
        policy=_metadata_policy(),
        headers={"Metadata-Flavor": "Google"},
        raw=True,
        not_found_refused=True,
    )
    raw = got["raw"]
    assert isinstance(raw, bytes)
    project = raw.decode("utf-8", "replace").strip()
    return project if project.isprintable() and " " not in project else ""


def _metadata_policy() -> RetryPolicy:
    """A server on the VM's own link answers in milliseconds: a few quick tries."""
    from providers.cloud.http import RetryPolicy

    return RetryPolicy(
        attempts=3, backoff_seconds=0.2, connect_timeout_seconds=3.0, read_timeout_seconds=10.0
    )


# -- reading the files' fields -----------------------------------------------------------


def _text(
    doc: Mapping[str, Any], name: str, where: str, *, required: bool = True, fix: str = ""
) -> str:
    """`doc[name]` as a string. Missing (when `required`) or of another type is a ConfigError
    naming the field, never its value (it may be a secret)."""
    value = doc.get(name)
    if value is None or value == "":
        if not required:
            return ""
        raise ConfigError(f"{where}: `{name}` is missing; {fix or 'fix or replace the file'}")
    if not isinstance(value, str):
        raise ConfigError(f"{where}: `{name}` is not a string; {fix or 'fix or replace the file'}")
    return value


def _endpoint(doc: Mapping[str, Any], name: str, where: str, default: str) -> str:
    """A URL a secret is sent to: https, or http to this machine only (a test's server)."""
    url = _text(doc, name, where, required=not default) or default
    try:
        parsed = urls.parse(url)
    except urls.UrlError as exc:
        raise ConfigError(f"{where}: `{name}` is not a usable URL: {exc}; fix the file") from None
    if parsed.scheme != "https" and not _loopback(parsed.host):
        raise ConfigError(
            f"{where}: `{name}` is not an https URL, and a credential would cross the network "
            "in clear text; fix the file"
        )
    return url


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def pem_lines(pem: str) -> list[str]:
    """The base64 lines of a PEM key: an echo may quote one of them alone."""
    return [line.strip() for line in pem.splitlines() if len(line.strip()) >= 16]
