"""The shared HTTP client (providers.core.http), against a loopback server and mock transports:
retries with backoff, jitter and Retry-After, what is never retried, redirects and the
origin credentials stay with, the scrub of what servers send, error maps, paging, the body
cap and resumable streams. Every client (cloud, Kubernetes, image, engine) rests on these;
their own tests keep what is theirs: each API's error map. No test measures time: sleeps and
the jitter's random draws are injected and recorded."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import pytest

from providers.core.errors import (
    CredentialsError,
    NotFoundError,
    ProviderUnreachableError,
    RetryableError,
    ShoalError,
)
from providers.core.http import httpx
from providers.core.http.client import HttpClient, Request
from providers.core.http.policy import ErrorMap, Failure, Kind, RetryPolicy, Rule
from tests.providers.apiserver import ApiServer, Reply

FAST = RetryPolicy(attempts=3, backoff_seconds=0.5, jitter=0.0, read_timeout_seconds=5.0)
Handler = Callable[[httpx.Request], httpx.Response]

PROBE = """
import sys
import providers.core.http
imported = "httpx" in sys.modules
from providers.core.http import httpx
loaded = sys.modules.get("httpx._main") is not None
print(imported, loaded, "click" in sys.modules, hasattr(httpx, "Client"))
"""


def test_httpx_comes_late_and_without_its_command_line_module() -> None:
    # Run in a fresh interpreter: this test session has imported httpx already.
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "False", "True"]


@pytest.fixture
def api() -> Iterator[ApiServer]:
    with ApiServer() as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


def client(sleeps: list[float] | None = None, **kwargs: Any) -> HttpClient:
    kwargs.setdefault("policy", FAST)
    return HttpClient(sleep=(sleeps if sleeps is not None else []).append, **kwargs)


def mock(handler: Handler, calls: list[httpx.Request] | None = None) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        if calls is not None:
            calls.append(request)
        return handler(request)

    return httpx.MockTransport(answer)


# -- retries -----------------------------------------------------------------------------------


def test_throttling_and_server_errors_are_retried_honouring_retry_after(
    api: ApiServer, sleeps: list[float]
) -> None:
    api.route("/p", lambda q, h: Reply.json({"ok": q.get("x")}))
    api.fault("/p", "status", status=429, headers={"Retry-After": "3"})
    api.fault("/p", "status", status=503)
    assert client(sleeps).get_json(api.url("/p"), params={"x": "1"}) == {"ok": ["1"]}
    assert len(api.requests_to("/p")) == 3
    assert sleeps == [3.0, 1.0]  # Retry-After beats the 0.5 s backoff; then 0.5 * 2


def test_retry_after_is_capped(sleeps: list[float]) -> None:
    answers = iter([httpx.Response(503, headers={"Retry-After": "3600"}), httpx.Response(200)])
    http = client(sleeps, transport=mock(lambda r: next(answers)))
    assert http.request("GET", "https://api.example/p").status_code == 200
    assert sleeps == [FAST.max_delay_seconds]


def test_backoff_doubles_up_to_the_cap_less_its_jitter() -> None:
    policy = RetryPolicy(backoff_seconds=1.0, max_delay_seconds=8.0, jitter=0.5)
    assert [policy.delay(n) for n in range(5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert policy.delay(2, draw=0.5) == 3.0  # 4 s less a quarter: half the jitter drawn
    assert policy.delay(0, "5", draw=0.99) == 5.0  # jitter never cuts below Retry-After
    assert policy.delay(0, "120") == 8.0
    assert policy.delay(0, "soon") == 1.0  # unreadable: ignored


def test_retry_after_as_an_http_date() -> None:
    from email.utils import parsedate_to_datetime

    now = parsedate_to_datetime("Wed, 21 Oct 2015 07:28:00 GMT").timestamp()
    policy = RetryPolicy(backoff_seconds=0.5, max_delay_seconds=8.0, jitter=0.0)
    assert policy.delay(0, "Wed, 21 Oct 2015 07:28:05 GMT", now=now) == 5.0
    assert policy.delay(0, "Wed, 21 Oct 2015 07:27:00 GMT", now=now) == 0.5  # passed


def test_the_client_draws_its_jitter_from_what_it_is_given(sleeps: list[float]) -> None:
    answers = iter([httpx.Response(503), httpx.Response(503), httpx.Response(200)])
    policy = RetryPolicy(attempts=3, backoff_seconds=1.0, jitter=0.5)
    http = client(sleeps, policy=policy, draw=lambda: 0.5, transport=mock(lambda r: next(answers)))
    http.request("GET", "https://api.example/p")
    assert sleeps == [0.75, 1.5]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_client_errors_are_not_retried(status: int, sleeps: list[float]) -> None:
    calls: list[httpx.Request] = []
    http = client(sleeps, transport=mock(lambda r: httpx.Response(status), calls))
    with pytest.raises(ShoalError, match=f"HTTP {status}"):
        http.request("GET", "https://api.example/p")
    assert len(calls) == 1 and sleeps == []


def test_connection_failures_are_retried_then_unreachable(sleeps: list[float]) -> None:
    with ApiServer() as server:
        url = server.url("/p")
    with pytest.raises(ProviderUnreachableError, match=r"ConnectError.* after 3 attempts"):
        client(sleeps).get_json(url)
    assert sleeps == [0.5, 1.0]


def test_what_is_not_idempotent_is_retried_only_when_it_cannot_have_been_processed() -> None:
    def failing(*faults: httpx.Response | type[Exception]) -> tuple[HttpClient, list[Any]]:
        calls: list[httpx.Request] = []
        queue = iter(faults)

        def answer(request: httpx.Request) -> httpx.Response:
            fault = next(queue, httpx.Response(201))
            if isinstance(fault, type):
                raise fault("boom", request=request)
            return fault

        return client(transport=mock(answer, calls)), calls

    url = "https://api.example/things"
    for retried in (httpx.ConnectError, httpx.Response(429)):
        http, calls = failing(retried)
        assert http.request("POST", url, body={}, idempotent=False).status_code == 201
        assert len(calls) == 2
    http, calls = failing(httpx.ReadError)
    with pytest.raises(ProviderUnreachableError, match="ReadError"):
        http.request("POST", url, body={}, idempotent=False)
    http, calls = failing(httpx.Response(503))
    with pytest.raises(ShoalError, match="HTTP 503"):
        http.request("POST", url, body={}, idempotent=False)
    assert len(calls) == 1


def test_an_answer_the_map_reads_as_throttled_is_retried_whatever_its_status(
    sleeps: list[float],
) -> None:
    """AWS Service Quotas says "slow down" with HTTP 400 and a JSON `__type`: the map names
    such reasons and the client retries them as it does a 429 (a POST too: a throttled
    request was not processed); any other 400 is still an error at once, with its message."""

    def explain(body: bytes, reason: str) -> tuple[str, str]:
        value = json.loads(body or b"{}")
        return str(value.get("__type", "")), str(value.get("message", ""))

    errors = ErrorMap(explain=explain, throttled=frozenset({"ThrottlingException"}))
    slow = httpx.Response(400, json={"__type": "ThrottlingException", "message": "slow"})
    calls: list[httpx.Request] = []
    answers = iter([slow, slow, httpx.Response(200, json={"ok": 1})])
    http = client(sleeps, errors=errors, transport=mock(lambda r: next(answers), calls))
    assert http.decode(http.request("POST", "https://api.example/", body={}, idempotent=False))
    assert len(calls) == 3 and sleeps == [0.5, 1.0]
    wrong = httpx.Response(400, json={"__type": "IllegalArgumentException", "message": "bad"})
    calls.clear()
    http = client(sleeps, errors=errors, transport=mock(lambda r: wrong, calls))
    with pytest.raises(ShoalError, match="HTTP 400 IllegalArgumentException: bad"):
        http.request("POST", "https://api.example/", body={})
    assert len(calls) == 1
    calls.clear()
    http = client(sleeps, errors=errors, transport=mock(lambda r: slow, calls))
    with pytest.raises(ShoalError, match="HTTP 400 ThrottlingException: slow"):
        http.request("POST", "https://api.example/", body={})
    assert len(calls) == FAST.attempts  # then the map's error, the body still read
    assert ErrorMap(throttled=frozenset({"x"})).extended().throttled == {"x"}


def test_a_401_gets_new_credentials_once() -> None:
    token = ["old"]
    refreshes: list[str] = []

    def refresh() -> bool:
        refreshes.append(token[0])
        token[0] = "new" if token[0] == "old" else "newer"
        return True

    def answer(request: httpx.Request) -> httpx.Response:
        good = request.headers["authorization"] == "Bearer new"
        return httpx.Response(200 if good else 401)

    http = client(
        transport=mock(answer),
        credentials=lambda: {"Authorization": f"Bearer {token[0]}"},
        refresh=refresh,
    )
    assert http.request("GET", "https://api.example/p").status_code == 200
    token[0] = "revoked"
    with pytest.raises(ShoalError, match="HTTP 401"):
        http.request("GET", "https://api.example/p")
    assert refreshes == ["old", "revoked"]  # once per request, never in a loop


# -- redirects and credentials -----------------------------------------------------------------


def test_redirects_are_followed_with_the_query_they_carry(api: ApiServer) -> None:
    api.route("/old", lambda q, h: Reply(302, b"", {"Location": "/new?page=2"}))
    api.route("/new", lambda q, h: Reply.json({"page": q.get("page")}))
    assert client().get_json(api.url("/old"), params={"page": "1"}) == {"page": ["2"]}


def test_a_redirect_loop_ends_with_a_clear_error(api: ApiServer) -> None:
    api.route("/loop", lambda q, h: Reply(301, b"", {"Location": "/loop"}))
    with pytest.raises(ShoalError, match="more than 10 redirects"):
        client().get_json(api.url("/loop"))


def test_credentials_go_only_to_their_origin(api: ApiServer) -> None:
    sent = {"Authorization": "Bearer s3cret-token", "X-Api-Key": "k3y-value", "X-Trace": "t"}
    with ApiServer() as other:
        other.route("/elsewhere", lambda q, h: Reply.json(h))
        api.route("/start", lambda q, h: Reply(302, b"", {"Location": other.url("/elsewhere")}))
        got = client(credentials={"Cookie": "c00kie"}).get_json(api.url("/start"), headers=sent)
    first = api.requests_to("/start")[0].headers
    assert (first["authorization"], first["x-api-key"], first["cookie"]) == (
        "Bearer s3cret-token",
        "k3y-value",
        "c00kie",
    )
    assert got["x-trace"] == "t"  # an ordinary header still goes
    assert not {"authorization", "x-api-key", "cookie"} & set(got)


def test_another_origins_refusal_says_it_was_never_sent_credentials(api: ApiServer) -> None:
    errors = ErrorMap(
        rules=(Rule(401, CredentialsError, "{url}: not sent there", when=lambda f: f.elsewhere),)
    )
    with ApiServer() as other:
        other.route("/elsewhere", lambda q, h: Reply.json({}, 401))
        api.route("/start", lambda q, h: Reply(302, b"", {"Location": other.url("/elsewhere")}))
        with pytest.raises(CredentialsError, match="/elsewhere: not sent there"):
            client(errors=errors, credentials={"Authorization": "Bearer t0ken"}).get_json(
                api.url("/start")
            )


def test_a_redirect_from_https_to_http_is_refused() -> None:
    calls: list[httpx.Request] = []
    moved = httpx.Response(302, headers={"Location": "http://api.example/plain"})
    http = client(transport=mock(lambda r: moved, calls))
    with pytest.raises(
        ShoalError, match=r"redirect from https to http://api\.example/plain refused"
    ):
        http.request("GET", "https://api.example/p", headers={"Authorization": "Bearer t0ken"})
    assert [str(r.url) for r in calls] == ["https://api.example/p"]


def test_redirects_are_reported_not_followed_when_the_client_says_so() -> None:
    calls: list[httpx.Request] = []
    moved = httpx.Response(307, headers={"Location": "/elsewhere"})
    errors = ErrorMap(rules=(Rule(307, ShoalError, "{status}: redirects {location}"),))
    http = client(transport=mock(lambda r: moved, calls), errors=errors, follow_redirects=False)
    with pytest.raises(ShoalError, match=r"redirects to https://api\.example/elsewhere$"):
        http.request("GET", "https://api.example/p")
    assert len(calls) == 1


TOKEN = "ya29.tok+en/NEVER=SHOWN"


def assert_clean(text: str, *secrets: str) -> None:
    for secret in secrets:
        for form in (secret, quote(secret, safe=""), base64.b64encode(secret.encode()).decode()):
            assert form not in text, f"{form!r} leaked: {text!r}"


def test_a_location_with_user_info_is_refused_unfollowed(api: ApiServer) -> None:
    location = f"http://u:{TOKEN}@127.0.0.1:{api.base.rsplit(':', 1)[1]}/next"
    api.route("/p", lambda q, h: Reply(302, b"", {"Location": location}, reason=TOKEN))
    api.route("/next", lambda q, h: Reply.json({"followed": True}))
    with pytest.raises(ShoalError, match="HTTP 302 redirect refused") as caught:
        client(secrets=[TOKEN]).get_json(api.url("/p"))
    assert_clean(str(caught.value), TOKEN)
    assert api.requests_to("/next") == []


@pytest.mark.parametrize(
    "location", ["http://127.0.0.1:99999/next", "http://[::1/next", "http://h:port/", "ftp://h/"]
)
def test_a_malformed_location_is_a_clear_error_not_a_retried_network_failure(
    api: ApiServer, location: str
) -> None:
    api.route("/p", lambda q, h: Reply(302, b"", {"Location": location}))
    with pytest.raises(ShoalError, match="HTTP 302 redirect refused, its Location is unusable"):
        client().get_json(api.url("/p"))
    assert len(api.requests_to("/p")) == 1


# -- the scrub: nothing a request carried comes back in a message ------------------------------

KEY_ID = "AKIAEXAMPLEKEYID0001"
SIGNATURE = "9f" * 32


def echo(*secrets: str) -> str:
    """Each secret as sent, percent-encoded and in base64: how a server could echo it."""
    return " ".join(
        f"{s} {quote(s, safe='')} {base64.b64encode(s.encode()).decode()}" for s in secrets
    )


def said_in_body(body: bytes, reason: str) -> tuple[str, str]:
    return "", json.loads(body).get("said", "")


ECHO = ErrorMap(explain=said_in_body)


def test_sigv4_key_id_and_signature_are_scrubbed_from_an_echoing_error(api: ApiServer) -> None:
    auth = (
        f"AWS4-HMAC-SHA256 Credential={KEY_ID}/20260101/us-east-1/ec2/aws4_request, "
        f"SignedHeaders=host;x-amz-date, Signature={SIGNATURE}"
    )
    said = f"AuthFailure: {echo(KEY_ID, SIGNATURE, TOKEN)}"
    api.route("/p", lambda q, h: Reply.json({"said": said}, 403))
    with pytest.raises(ShoalError) as caught:
        client(errors=ECHO).get_json(
            api.url("/p"), headers={"Authorization": auth, "X-Amz-Security-Token": TOKEN}
        )
    assert "AuthFailure" in str(caught.value)
    assert_clean(str(caught.value), KEY_ID, SIGNATURE, TOKEN)


def test_a_bearer_token_and_a_query_key_are_scrubbed_without_being_declared(
    api: ApiServer,
) -> None:
    key = "AIza+key/NEVER=SHOWN"
    api.route("/p", lambda q, h: Reply.json({"said": f"refused {echo(TOKEN, key)}"}, 401))
    with pytest.raises(ShoalError) as caught:
        client(errors=ECHO).get_json(
            api.url(f"/p?key={quote(key, safe='')}"), headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert "refused" in str(caught.value)
    assert_clean(str(caught.value), TOKEN, key)


def test_reason_phrase_body_and_location_echoing_basic_auth_are_scrubbed(api: ApiServer) -> None:
    pair = f"ci:{TOKEN}"
    basic = "Basic " + base64.b64encode(pair.encode()).decode()
    reply = Reply(
        307,
        json.dumps({"said": f"who is {basic}?"}).encode(),
        {"Location": f"/{quote(TOKEN, safe='')}/next"},
        reason=f"Moved {TOKEN.upper()}",
    )
    api.route("/p", lambda q, h: reply)
    errors = ErrorMap(
        explain=said_in_body,
        rules=(Rule(307, ShoalError, "{status}{said}, redirects {location}"),),
    )
    http = client(errors=errors, credentials={"Authorization": basic}, follow_redirects=False)
    with pytest.raises(ShoalError) as caught:
        http.get_json(api.url("/p"))
    message = str(caught.value)
    assert message.startswith("HTTP 307 Moved ***: who is Basic ***?, redirects to http://")
    assert message.endswith("/***/next")
    assert_clean(message, TOKEN, pair)
    assert TOKEN.lower() not in message.lower()


# -- error maps --------------------------------------------------------------------------------


def test_an_error_map_takes_its_first_matching_rule_then_the_defaults() -> None:
    errors = ErrorMap(
        where="api: {method} {target}",
        said=" ({})",
        fields={"hint": "set API_TOKEN"},
        rules=(
            Rule(
                400,
                CredentialsError,
                "{where}: {status}{said}; {hint}",
                when=lambda f: "key" in f.message,
            ),
            Rule((401, 403), CredentialsError, "{where}: {status}{said}; {hint}"),
            Rule(range(400, 500), NotFoundError, "{where}: {code} is a 4xx"),
            Rule(429, RetryableError, "never reached: the range above takes 429"),
            Rule(Kind.UNREACHABLE, ProviderUnreachableError, "{where}: down ({error_name})"),
        ),
    )

    def error(**fields: Any) -> ShoalError:
        return errors.error(Failure(method="GET", target="/x", **fields))

    refused = error(kind=403, code=403, reason="Forbidden", message="no")
    assert type(refused) is CredentialsError
    assert str(refused) == "api: GET /x: HTTP 403 Forbidden (no); set API_TOKEN"
    assert type(error(kind=400, code=400, message="bad key")) is CredentialsError
    assert str(error(kind=400, code=400, message="bad page")) == "api: GET /x: 400 is a 4xx"
    assert type(error(kind=429, code=429)) is NotFoundError
    # A timeout is unreachable unless the map says otherwise; what it leaves out, defaults.
    assert (
        str(error(kind=Kind.TIMEOUT, error_name="ReadTimeout")) == "api: GET /x: down (ReadTimeout)"
    )
    assert str(error(kind=503, code=503)) == "api: GET /x: HTTP 503"
    assert str(error(kind=Kind.JSON, error="Expecting value")).endswith(
        "malformed JSON (Expecting value)"
    )


# -- bodies ------------------------------------------------------------------------------------


def test_a_json_body_cut_short_is_fetched_again(api: ApiServer) -> None:
    api.route("/p", lambda q, h: Reply.json({"items": list(range(1000))}))
    api.fault("/p", "truncate", after=100)
    assert client().get_json(api.url("/p"))["items"][-1] == 999


def test_a_body_that_keeps_dropping_says_so(api: ApiServer) -> None:
    api.route("/p", lambda q, h: Reply.json({"items": list(range(1000))}))
    api.fault("/p", "drop", after=50, times=3)
    with pytest.raises(ProviderUnreachableError, match="dropped mid-body 3 times"):
        client().get_json(api.url("/p"))


def test_deeply_nested_json_is_a_clear_error(api: ApiServer) -> None:
    api.route("/deep", lambda q, h: Reply(200, b"[" * 100_000 + b"]" * 100_000))
    with pytest.raises(ShoalError, match="malformed JSON"):
        client().get_json(api.url("/deep"))


def test_a_body_past_the_cap_is_refused_counted_after_decompression() -> None:
    packed = gzip.compress(json.dumps(["x" * 100] * 1000).encode())
    assert len(packed) < 4096
    answer = httpx.Response(200, content=packed, headers={"Content-Encoding": "gzip"})
    http = client(transport=mock(lambda r: answer), max_bytes=4096)
    with pytest.raises(ShoalError, match="larger than 4096 bytes"):
        http.get_json("https://api.example/p")


# -- paging ------------------------------------------------------------------------------------

ITEMS = ["a", "b", "c", "d", "e"]


def paged(style: str) -> Handler:
    """Two items a page, with the next page named the way `style` names it."""

    def answer(request: httpx.Request) -> httpx.Response:
        at = int(request.url.params.get("at", "0"))
        page: dict[str, Any] = {"items": ITEMS[at : at + 2]}
        if at + 2 < len(ITEMS):
            following = str(at + 2)
            if style == "link":
                page["nextLink"] = f"https://api.example/list?at={following}"
            elif style == "token":
                page["nextPageToken"] = following
            else:
                page["metadata"] = {"continue": following}
        return httpx.Response(200, json=page)

    return answer


NEXT: dict[str, Callable[[Any, Request], Request | None]] = {
    "link": lambda page, request: Request(page["nextLink"]) if "nextLink" in page else None,
    "token": lambda page, request: (
        request.with_params(at=page["nextPageToken"]) if "nextPageToken" in page else None
    ),
    "continue": lambda page, request: (
        request.with_params(at=page["metadata"]["continue"]) if "metadata" in page else None
    ),
}


@pytest.mark.parametrize("style", list(NEXT))
def test_pages_follow_links_page_tokens_and_continue_tokens(style: str) -> None:
    calls: list[httpx.Request] = []
    http = client(transport=mock(paged(style), calls))
    pages = list(http.pages(Request("https://api.example/list", {"limit": "2"}), NEXT[style]))
    assert [item for page in pages for item in page["items"]] == ITEMS
    assert len(calls) == 3


def test_pages_that_repeat_or_do_not_end_are_stopped() -> None:
    http = client(transport=mock(paged("token")))
    first = Request("https://api.example/list")
    with pytest.raises(ShoalError, match="the next page repeats one already read; stopped"):
        list(http.pages(first, lambda page, request: first))
    with pytest.raises(ShoalError, match="more than 2 pages; stopped"):
        list(http.pages(first, NEXT["token"], limit=2))


# -- streams -----------------------------------------------------------------------------------


def test_stream_resumes_after_a_drop_with_range(api: ApiServer) -> None:
    data = bytes(range(256)) * 4096
    api.route("/big", data)
    api.fault("/big", "drop", after=300_000)
    seen: list[int] = []
    got = b"".join(
        client().stream(api.url("/big"), progress=lambda d, t, w: seen.append(d), chunk_bytes=65536)
    )
    assert got == data
    # Resumed from the last byte handed out (a partial chunk in flight is asked again).
    second = api.requests_to("/big")[1]
    resumed_at = int(second.headers["range"].removeprefix("bytes=").rstrip("-"))
    assert 0 < resumed_at <= 300_000
    assert second.headers["if-range"].startswith('"')
    assert seen[-1] == len(data)


def test_stream_dropped_before_any_byte_starts_over(api: ApiServer) -> None:
    data = b"y" * 200_000
    api.route("/big", lambda q, h: Reply(200, data))
    api.fault("/big", "drop", after=1000)
    assert b"".join(client().stream(api.url("/big"))) == data
    assert "range" not in api.requests_to("/big")[1].headers


def test_stream_that_cannot_resume_fails_clearly(api: ApiServer) -> None:
    data = b"x" * 200_000
    api.route("/big", lambda q, h: Reply(200, data))  # no ETag, no ranges
    api.fault("/big", "drop", after=1000)
    with pytest.raises(ProviderUnreachableError, match="cannot resume"):
        b"".join(client().stream(api.url("/big"), chunk_bytes=256))
    assert len(api.requests_to("/big")) == 1  # nothing to resume by: not asked again
