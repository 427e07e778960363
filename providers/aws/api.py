"""Signed calls to AWS APIs: EC2's Query API (GET, XML answers) and the JSON 1.1 protocol
(POST, Service Quotas), with every list read to its end.

- Query API: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/Query-Requests.html
  (`Action`, `Version`, parameters in the query string; the answer's root is
  `<{Action}Response>`; errors `<Response><Errors><Error><Code>`; lists paged with
  `NextToken` / `<nextToken>`).
- JSON 1.1: `POST /` with `X-Amz-Target: {prefix}.{Action}` and
  `Content-Type: application/x-amz-json-1.1`; errors `{"__type": "...#Code", "message"}`;
  lists paged with `NextToken` in the body and the answer.

Throttling (EC2: HTTP 503 `RequestLimitExceeded`; JSON APIs: HTTP 400 `ThrottlingException`
or `TooManyRequestsException`) is retried with the client's backoff, read from the error's
body by the ErrorMap (`aws_http`), and is RetryableError (75) when it outlasts the retries.
A list whose next token repeats one already sent ends there (a server that loops).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

from providers.aws.sigv4 import Credentials, canonical_query, sign
from providers.cloud.http import CloudHttp, RetryPolicy
from providers.core.errors import CredentialsError, RetryableError, ShoalError
from providers.core.http.policy import Failure, Rule
from providers.core.numbers import reject_constant

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    import httpx

EC2_VERSION = "2016-11-15"
JSON_TYPE = "application/x-amz-json-1.1"
MAX_PAGES = 1000
# The APIs' own codes for "slow down" (EC2, Service Quotas, and the other AWS protocols').
THROTTLED = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException",
    "RequestThrottled", "RequestThrottledException", "ProvisionedThroughputExceededException",
    "SlowDown", "PriorRequestNotComplete",
})  # fmt: skip
# Codes that refuse the caller (permissions, unknown or expired keys, a region not enabled),
# whatever the status (JSON APIs say AccessDeniedException with HTTP 400).
REFUSED = frozenset({
    "UnauthorizedOperation", "AuthFailure", "AccessDenied", "AccessDeniedException",
    "UnrecognizedClientException", "InvalidClientTokenId", "InvalidSignatureException",
    "SignatureDoesNotMatch", "IncompleteSignature", "MissingAuthenticationToken",
    "ExpiredToken", "ExpiredTokenException", "RequestExpired", "OptInRequired", "Blocked",
})  # fmt: skip
T = TypeVar("T")


def explain(body: bytes, reason: str) -> tuple[str, str]:
    """(the API's error code, "Code: message") from an AWS error body, XML or JSON."""
    code, message = _json_error(body) if body.lstrip()[:1] == b"{" else _xml_error(body)
    if code and message:
        return code, f"{code}: {message}"
    return code, code or message


def _json_error(body: bytes) -> tuple[str, str]:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return "", ""
    if not isinstance(value, dict):
        return "", ""
    kind = value.get("__type") or value.get("code") or value.get("Code") or ""
    message = value.get("message") or value.get("Message") or ""
    code = str(kind).rsplit("#", 1)[-1].split(":", 1)[0]  # "com.amazon...#Code"
    return code, message if isinstance(message, str) else ""


def _xml_error(body: bytes) -> tuple[str, str]:
    try:
        root = _parse(body)
    except ValueError:
        return "", ""
    for element in root.iter():
        if local(element.tag) == "Error":
            return text(element, "Code"), text(element, "Message")
    return "", ""


class Refused(CredentialsError):
    """An AWS API refused the request (401/403, or a code of REFUSED): `code` is the API's
    own error code ("UnauthorizedOperation"), or the HTTP reason when it sent none."""

    def __init__(self, code: str) -> None:
        self.code = code or "refused"
        super().__init__(f"the request was refused ({self.code})")


def _refused(failure: Failure) -> bool:
    return failure.code in (401, 403) or failure.reason in REFUSED


# Throttling that outlasted the retries: 75, with the API's code, before the status rules.
THROTTLED_RULE = Rule(
    range(400, 600),
    RetryableError,
    "{where}: HTTP {code} {reason} (throttled) after {attempts} attempts; try again later",
    when=lambda failure: failure.reason in THROTTLED,
)
# For callers that go on without an API's answer: a refusal is Refused, to be noted.
REFUSED_RULE = Rule(range(400, 500), Refused, "{reason}", when=_refused)


def aws_http(
    provider: str,
    *,
    auth_hint: str,
    credentials: Credentials | None,
    policy: RetryPolicy | None = None,
    transport: httpx.BaseTransport | None = None,
    refusals: bool = False,
) -> CloudHttp:
    """A client for AWS APIs: AWS error bodies explained, throttling retried, the secret
    key and session token scrubbed from anything a server sends back. With `refusals`, a
    refused request raises Refused (for callers that note it and go on)."""
    secrets = [credentials.secret_access_key, credentials.session_token] if credentials else []
    http = CloudHttp(
        provider,
        auth_hint=auth_hint,
        secrets=secrets,
        policy=policy,
        transport=transport,
        refused=lambda status, said: said.partition(":")[0] in REFUSED,  # a 400 AccessDenied
    )
    rules = (THROTTLED_RULE, REFUSED_RULE) if refusals else (THROTTLED_RULE,)
    http.errors = replace(http.errors.extended(*rules), explain=explain, throttled=THROTTLED)
    return http


@dataclass
class Endpoint:
    """One AWS API in one region: `url` its base URL, `service` its SigV4 name (`ec2`,
    `servicequotas`). `http` is used by one thread at a time."""

    http: CloudHttp
    url: str
    region: str
    service: str
    credentials: Credentials
    now: Callable[[], datetime] = lambda: datetime.now(UTC)

    def _signed(
        self, method: str, params: Mapping[str, str], headers: Mapping[str, str], body: bytes
    ) -> tuple[str, dict[str, str]]:
        parts = urlsplit(self.url)
        host = parts.netloc.rsplit("@", 1)[-1]
        path = parts.path or "/"
        signed = sign(
            self.credentials,
            method=method,
            host=host,
            path=path,
            params=params,
            region=self.region,
            service=self.service,
            now=self.now(),
            headers=headers,
            body=body,
        )
        query = canonical_query(params)
        url = f"{parts.scheme}://{parts.netloc}{path}" + (f"?{query}" if query else "")
        return url, {**headers, **signed}

    # -- EC2 Query API -----------------------------------------------------------------

    def query(self, action: str, params: Mapping[str, str] | None = None) -> Element:
        """One signed GET of `action`; the answer's root element, checked to be
        `<{action}Response>`."""
        asked = {"Action": action, "Version": EC2_VERSION, **(params or {})}
        url, headers = self._signed("GET", asked, {}, b"")
        body = self.http.request("GET", url, headers=headers).content
        try:
            root = _parse(body)
        except ValueError as exc:
            raise ShoalError(f"malformed {action} response ({exc})") from None
        if local(root.tag) != f"{action}Response":
            raise ShoalError(f"unexpected {action} response <{local(root.tag)[:60]}>")
        return root

    def query_pages(
        self, action: str, params: Mapping[str, str] | None = None
    ) -> Iterator[Element]:
        """Every page of a Query API list (`NextToken` / `<nextToken>`)."""

        def page(token: str) -> tuple[Element, str]:
            root = self.query(action, {**(params or {}), **({"NextToken": token} if token else {})})
            return root, text(root, "nextToken")

        return paged(page, action)

    # -- JSON 1.1 protocol -------------------------------------------------------------

    def post_json(self, target: str, body: Mapping[str, Any]) -> bytes:
        """One signed POST of `target` (`ServiceQuotasV20190624.ListServiceQuotas`); the
        answer's bytes, for a reader that parses them itself (providers/aws/payloads.py)."""
        content = json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": JSON_TYPE, "X-Amz-Target": target}
        url, signed = self._signed("POST", {}, headers, content)
        return self.http.request("POST", url, headers=signed, content=content).content

    def call_json(self, target: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """`post_json`, the answer's JSON object."""
        action = target.rsplit(".", 1)[-1]
        value = decode_json(self.post_json(target, body), action)
        if not isinstance(value, dict):
            raise ShoalError(f"unexpected {action} response: not a JSON object")
        return value

    def json_pages(
        self, target: str, body: Mapping[str, Any], read: Callable[[bytes], tuple[T, str]]
    ) -> Iterator[T]:
        """Every page of a JSON 1.1 list (`NextToken` in the request and the answer), each
        read from its bytes by `read` into its value and next token ("" on the last)."""

        def page(token: str) -> tuple[T, str]:
            return read(self.post_json(target, {**body, **({"NextToken": token} if token else {})}))

        return paged(page, target.rsplit(".", 1)[-1])


def decode_json(content: bytes, action: str) -> Any:
    """An answer's JSON, NaN and Infinity refused (JSON has neither)."""
    try:
        return json.loads(content, parse_constant=reject_constant)
    except (ValueError, RecursionError) as exc:
        raise ShoalError(f"malformed {action} response ({exc})") from None


def paged(page: Callable[[str], tuple[T, str]], what: str) -> Iterator[T]:
    """Every page `page(token)` gives, from token "" until one gives no next token or a
    token already sent (a server that loops: paging ends there)."""
    token = ""
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        value, token = page(token)
        yield value
        if not token or token in seen:
            return
        seen.add(token)
    raise ShoalError(f"{what}: more than {MAX_PAGES} pages; stopped")


# -- XML ---------------------------------------------------------------------------------


def _parse(body: bytes) -> Element:
    from xml.etree import ElementTree

    try:
        return ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise ValueError(str(exc)) from None


def local(tag: str) -> str:
    """A tag without its namespace."""
    return tag.rsplit("}", 1)[-1]


def child(element: Element, *path: str) -> Element | None:
    """The first descendant down `path` (local names), or None."""
    found: Element | None = element
    for name in path:
        if found is None:
            return None
        found = next((c for c in found if local(c.tag) == name), None)
    return found


def text(element: Element, *path: str) -> str:
    """The stripped text at `path` ("" when absent)."""
    found = child(element, *path)
    return (found.text or "").strip() if found is not None else ""


def items(element: Element, *path: str) -> list[Element]:
    """The `<item>` (or `<member>`) children of the set at `path`."""
    found = child(element, *path)
    if found is None:
        return []
    return [c for c in found if local(c.tag) in ("item", "member")]
