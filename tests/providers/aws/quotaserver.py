"""A loopback AWS for the account capacity tests: EC2's Query API (XML) at `/ec2/{region}`
and Service Quotas (JSON 1.1, POST) at `/sq/{region}`, on tests/providers/apiserver.py.

It checks every request's SigV4 signature the way AWS does (the same canonical request
signed with the known secret gives the same Authorization; a mismatch answers 403
SignatureDoesNotMatch and is counted), pages every list `page` items at a time, and plays
what a test sets per (region, action): refusals (EC2 403 UnauthorizedOperation, Service
Quotas 400 AccessDeniedException), throttling (EC2 503 RequestLimitExceeded, Service Quotas
400 ThrottlingException), an error that echoes the request's credentials, a next token that
repeats, and a malformed body. Actions it does not serve go to `upstream` (moto), when set.

Formats: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstances.html,
API_DescribeInstanceTypes.html, API_DescribeCapacityReservations.html, API_DescribeRegions.html,
API_DescribeInstanceTypeOfferings.html (`offered`: type -> zones, by availability zone; not served
when None, the default),
https://docs.aws.amazon.com/servicequotas/2019-06-24/apireference/API_ListServiceQuotas.html
"""

from __future__ import annotations

import fnmatch
import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape

from providers.aws.sigv4 import Credentials, canonical_query, sign
from tests.providers.apiserver import ApiServer, Reply, Seen

NS = "http://ec2.amazonaws.com/doc/2016-11-15/"
SERVED = (
    "DescribeInstances",
    "DescribeInstanceTypes",
    "DescribeCapacityReservations",
    "DescribeRegions",
)
QUOTA_ACTIONS = ("ListServiceQuotas", "ListAWSDefaultServiceQuotas")


@dataclass
class Instance:
    instance_type: str
    zone: str = "us-east-1a"
    lifecycle: str = ""  # "spot", "capacity-block" or "" (on-demand)
    cores: int | None = None  # cpuOptions, when the instance reports them
    threads: int | None = None
    state: str = "running"


@dataclass
class Capacity:
    id: str
    instance_type: str
    total: int
    available: int
    state: str = "active"
    kind: str = "default"  # reservationType: default | capacity-block
    start: str = "2025-01-01T00:00:00.000Z"
    end: str = ""
    zone: str = "us-east-1a"


@dataclass
class Region:
    applied: list[dict[str, Any]] = field(default_factory=list)
    defaults: list[dict[str, Any]] = field(default_factory=list)
    instances: list[Instance] = field(default_factory=list)
    capacity: list[Capacity] = field(default_factory=list)
    # DescribeInstanceTypeOfferings: type -> the zones offering it (None: not served)
    offered: dict[str, list[str]] | None = None


def quota(code: str, value: float, name: str = "", *, glob: bool = False) -> dict[str, Any]:
    """A Quotas item as ListServiceQuotas writes it."""
    return {
        "ServiceCode": "ec2",
        "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
        "QuotaArn": f"arn:aws:servicequotas:us-east-1:123456789012:ec2/{code}",
        "QuotaCode": code,
        "QuotaName": name or code,
        "Value": value,
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": glob,
    }


_MOTO_OFFERINGS: dict[tuple[str, str], str] = {}  # (moto's URL, region) -> its answer


class AwsServer(ApiServer):
    def __init__(self, credentials: Credentials, regions: tuple[str, ...] = ("us-east-1",)):
        super().__init__()
        self.credentials = credentials
        self.region_names = regions
        self.data = {name: Region() for name in regions}
        # Instance type -> (default vCPUs, GPU name, GPU count), as DescribeInstanceTypes says.
        self.types: dict[str, tuple[int, str, int]] = {}
        self.page = 2
        self.upstream = ""
        self.refuse: dict[tuple[str, str], str] = {}  # (region, action) -> error code
        self.throttle: dict[tuple[str, str], int] = {}  # (region, action) -> times left
        self.echo: set[tuple[str, str]] = set()
        self.garbage: set[tuple[str, str]] = set()
        self.loop: set[tuple[str, str]] = set()  # next token always "1"
        self.calls: list[tuple[str, str, str]] = []  # (region, action, token asked)
        self.bad_signatures = 0
        self.bodies: list[bytes] = []
        for name in regions:
            self.route(f"/ec2/{name}", self._ec2)
        self._server.RequestHandlerClass = _with_post(self._server.RequestHandlerClass, self)

    def __enter__(self) -> AwsServer:
        super().__enter__()
        return self

    def region(self, name: str = "us-east-1") -> Region:
        return self.data[name]

    def calls_to(self, action: str, region: str = "us-east-1") -> list[str]:
        """The tokens each call of `action` in `region` sent ("" for the first page)."""
        with self._lock:
            return [token for r, a, token in self.calls if (r, a) == (region, action)]

    # -- EC2 -----------------------------------------------------------------------------

    def _ec2(self, query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        params = {k: v[0] for k, v in query.items()}
        region = headers.get("x-shoal-path", "").rsplit("/", 1)[-1]
        action = params.get("Action", "")
        fault = self._fault(region, action, params, headers, "GET", b"", json_api=False)
        if fault is not None:
            return fault
        if action == "DescribeInstanceTypeOfferings" and (
            params.get("LocationType") == "availability-zone"
        ):
            return self._offerings(region, params, headers)
        if action not in SERVED or (self.upstream and action != "DescribeCapacityReservations"):
            return self._forward(params, headers)
        if action == "DescribeRegions":
            names = "".join(
                f"<item><regionName>{n}</regionName><regionEndpoint>ec2.{n}.amazonaws.com"
                "</regionEndpoint><optInStatus>opt-in-not-required</optInStatus></item>"
                for n in self.region_names
            )
            return _xml(action, f"<regionInfo>{names}</regionInfo>")
        if action == "DescribeInstanceTypes":
            asked = [v for k, v in sorted(params.items()) if k.startswith("InstanceType.")]
            return _xml(
                action,
                f"<instanceTypeSet>{''.join(self._type(t) for t in asked)}</instanceTypeSet>",
            )
        return self._listed(region, action, params)

    def _listed(self, region: str, action: str, params: dict[str, str]) -> Reply:
        """A list of the region's, paged `page` rows at a time."""
        data = self.region(region)
        if action == "DescribeInstances":
            rows = [_instance(n, i) for n, i in enumerate(data.instances)]
            wrap = "reservationSet"
        elif action == "DescribeInstanceTypeOfferings":
            rows = [_offering(t, z) for t, zones in (data.offered or {}).items() for z in zones]
            rows = [r for r in rows if _kept(r, params)]
            wrap = "instanceTypeOfferingSet"
        else:
            rows = [_capacity(c) for c in data.capacity]
            wrap = "capacityReservationSet"
        start, token = self._page(region, action, params.get("NextToken", ""), len(rows))
        body = f"<{wrap}>{''.join(rows[start : start + self.page])}</{wrap}>"
        return _xml(action, body + (f"<nextToken>{token}</nextToken>" if token else ""))

    def _offerings(self, region: str, params: dict[str, str], headers: dict[str, str]) -> Reply:
        """DescribeInstanceTypeOfferings: `offered`, paged; or moto's (one page), with the
        `instance-type` filter's wildcards applied here, as EC2 does (moto matches a filter
        value only as a whole name). Other location types go to moto as they are."""
        if self.upstream:
            # moto's offerings are its static data files: asked once a session per region
            # (moto takes a fifth of a second to write them all, every time).
            key = (self.upstream, region)
            body = _MOTO_OFFERINGS.get(key, "")
            if not body:
                plain = {k: v for k, v in params.items() if not k.startswith("Filter.")}
                reply = self._forward(plain, headers)
                if reply.status != 200:
                    return reply
                body = _MOTO_OFFERINGS[key] = reply.body.decode()
            rows = re.findall(r"<item>.*?</item>", body, flags=re.S)
            kept = "".join(r for r in rows if _kept(r, params))
            inner = re.sub(r"<instanceTypeOfferingSet>.*</instanceTypeOfferingSet>",
                           lambda _: f"<instanceTypeOfferingSet>{kept}</instanceTypeOfferingSet>",
                           body, flags=re.S)  # fmt: skip
            return Reply(200, inner.encode(), {"Content-Type": "text/xml"})
        if self.region(region).offered is None:
            return _ec2_error(400, "InvalidAction", "not served here")
        return self._listed(region, "DescribeInstanceTypeOfferings", params)

    def _type(self, name: str) -> str:
        if name not in self.types:
            return ""
        vcpus, gpu, count = self.types[name]
        gpus = (
            f"<gpuInfo><gpus><item><name>{gpu}</name><manufacturer>NVIDIA</manufacturer>"
            f"<count>{count}</count></item></gpus></gpuInfo>"
            if gpu
            else ""
        )
        return (
            f"<item><instanceType>{name}</instanceType><vCpuInfo><defaultVCpus>{vcpus}"
            f"</defaultVCpus></vCpuInfo>{gpus}</item>"
        )

    def _forward(self, params: dict[str, str], headers: dict[str, str]) -> Reply:
        if not self.upstream:
            return _ec2_error(400, "InvalidAction", "not served here")
        sent = {k: v for k, v in headers.items() if k in ("authorization", "x-amz-date")}
        request = urllib.request.Request(
            f"{self.upstream}/?{canonical_query(params)}", headers=sent
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:
                return Reply(answer.status, answer.read(), {"Content-Type": "text/xml"})
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, exc.read(), {"Content-Type": "text/xml"})

    # -- Service Quotas ------------------------------------------------------------------

    def _post(self, path: str, headers: dict[str, str], body: bytes) -> Reply:
        region = path.rsplit("/", 1)[-1]
        action = headers.get("x-amz-target", "").rpartition(".")[2]
        if region not in self.data or action not in QUOTA_ACTIONS:
            return Reply.json({"__type": "UnknownOperationException"}, 400)
        try:
            asked = json.loads(body)
        except ValueError:
            return Reply.json({"__type": "SerializationException"}, 400)
        fault = self._fault(region, action, asked, headers, "POST", body, json_api=True)
        if fault is not None:
            return fault
        assert asked["ServiceCode"] == "ec2" and 1 <= asked["MaxResults"] <= 100
        data = self.region(region)
        rows = data.applied if action == "ListServiceQuotas" else data.defaults
        start, token = self._page(region, action, asked.get("NextToken", ""), len(rows))
        answer: dict[str, Any] = {"Quotas": rows[start : start + self.page]}
        if token:
            answer["NextToken"] = token
        return Reply(
            200, json.dumps(answer).encode(), {"Content-Type": "application/x-amz-json-1.1"}
        )

    # -- shared --------------------------------------------------------------------------

    def _page(self, region: str, action: str, token: str, total: int) -> tuple[int, str]:
        """(first row of the page `token` asks for, the next page's token)."""
        with self._lock:
            self.calls.append((region, action, token))
        start = int(token) if token else 0
        if (region, action) in self.loop:
            return start, "1"
        following = start + self.page
        return start, str(following) if following < total else ""

    def _fault(
        self,
        region: str,
        action: str,
        params: dict[str, Any],
        headers: dict[str, str],
        method: str,
        body: bytes,
        *,
        json_api: bool,
    ) -> Reply | None:
        if not self._signed(region, method, params if not json_api else {}, headers, body):
            with self._lock:
                self.bad_signatures += 1
            code = "InvalidSignatureException" if json_api else "SignatureDoesNotMatch"
            return _error(json_api, 403, code, "the signature does not match")
        key = (region, action)
        with self._lock:
            left = self.throttle.get(key, 0)
            if left:
                self.throttle[key] = left - 1
                self.calls.append((region, action, "throttled"))
        if left:
            if json_api:
                return _error(True, 400, "ThrottlingException", "Rate exceeded")
            return _error(False, 503, "RequestLimitExceeded", "Request limit exceeded.")
        if key in self.refuse:
            code = self.refuse[key]
            status = (
                400 if code == "AccessDeniedException" else 403 if code != "AuthFailure" else 401
            )
            return _error(json_api, status, code, f"You are not authorized to perform: {action}")
        if key in self.echo:
            told = " ".join(f"{k}={v}" for k, v in headers.items())
            said = f"bad request {told} secret={self.credentials.secret_access_key}"
            return _error(json_api, 400, "InvalidParameterValue", said)
        if key in self.garbage:
            return Reply(200, b"<DescribeInstancesResponse><reservationSet><item>", {})
        return None

    def _signed(
        self, region: str, method: str, params: dict[str, str], headers: dict[str, str], body: bytes
    ) -> bool:
        try:
            when = datetime.strptime(headers["x-amz-date"], "%Y%m%dT%H%M%SZ")
        except (KeyError, ValueError):
            return False
        from datetime import UTC

        extra = {}
        if method == "POST":
            extra = {
                "Content-Type": headers.get("content-type", ""),
                "X-Amz-Target": headers.get("x-amz-target", ""),
            }
        service = "servicequotas" if method == "POST" else "ec2"
        expected = sign(
            self.credentials,
            method=method,
            host=headers.get("host", ""),
            path=headers.get("x-shoal-path", ""),
            params=params,
            region=region,
            service=service,
            now=when.replace(tzinfo=UTC),
            headers=extra,
            body=body,
        )
        return headers.get("authorization") == expected["Authorization"]


def _with_post(base: Any, server: AwsServer) -> Any:
    """The ApiServer's handler with POST for the JSON API, and the request's path told to
    the GET handlers (header `x-shoal-path`, for the signature check)."""

    class Handler(base):  # type: ignore[misc]
        def do_GET(self) -> None:
            self.headers["X-Shoal-Path"] = urlsplit(self.path).path
            super().do_GET()

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k.lower(): v for k, v in self.headers.items()}
            headers["x-shoal-path"] = path
            with server._lock:
                server.seen.append(Seen(path, {}, headers))
                server.bodies.append(body)
            self._send(server._post(path, headers, body))

    return Handler


# -- XML ------------------------------------------------------------------------------------


def _xml(action: str, inner: str) -> Reply:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{NS}">'
        f"<requestId>59dbff89-35bd-4eac-99ed-be587EXAMPLE</requestId>{inner}</{action}Response>"
    )
    return Reply(200, body.encode(), {"Content-Type": "text/xml;charset=UTF-8"})


def _error(json_api: bool, status: int, code: str, message: str) -> Reply:
    if json_api:
        kind = f"com.amazonaws.servicequotas.model#{code}"
        return Reply.json({"__type": kind, "message": message}, status)
    return _ec2_error(status, code, message)


def _ec2_error(status: int, code: str, message: str) -> Reply:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
        f"<Message>{escape(message)}</Message></Error></Errors>"
        "<RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>"
    )
    return Reply(status, body.encode(), {"Content-Type": "text/xml;charset=UTF-8"})


def _instance(number: int, spec: Instance) -> str:
    cpu = (
        f"<cpuOptions><coreCount>{spec.cores}</coreCount><threadsPerCore>{spec.threads}"
        "</threadsPerCore></cpuOptions>"
        if spec.cores is not None
        else ""
    )
    lifecycle = f"<instanceLifecycle>{spec.lifecycle}</instanceLifecycle>" if spec.lifecycle else ""
    return (
        f"<item><reservationId>r-{number:017x}</reservationId><ownerId>123456789012</ownerId>"
        f"<groupSet/><instancesSet><item><instanceId>i-{number:017x}</instanceId>"
        f"<instanceState><code>16</code><name>{spec.state}</name></instanceState>"
        f"<instanceType>{spec.instance_type}</instanceType>"
        f"<placement><availabilityZone>{spec.zone}</availabilityZone><tenancy>default</tenancy>"
        f"</placement>{lifecycle}{cpu}<launchTime>2025-01-01T00:00:00.000Z</launchTime>"
        "</item></instancesSet></item>"
    )


def _offering(instance_type: str, zone: str) -> str:
    return (
        f"<item><instanceType>{instance_type}</instanceType>"
        f"<locationType>availability-zone</locationType><location>{zone}</location></item>"
    )


def _kept(row: str, params: dict[str, str]) -> bool:
    """Whether an offering's row passes the request's `instance-type` filter (EC2's
    wildcards: `*` any characters, `?` one)."""
    if params.get("Filter.1.Name") != "instance-type":
        return True
    wanted = [v for k, v in params.items() if k.startswith("Filter.1.Value.")]
    found = re.search(r"<instanceType>([^<]*)</instanceType>", row)
    return found is not None and any(fnmatch.fnmatchcase(found.group(1), w) for w in wanted)


def _capacity(spec: Capacity) -> str:
    end = (
        f"<endDate>{spec.end}</endDate><endDateType>limited</endDateType>"
        if spec.end
        else ("<endDateType>unlimited</endDateType>")
    )
    return (
        f"<item><capacityReservationId>{spec.id}</capacityReservationId>"
        f"<ownerId>123456789012</ownerId><instanceType>{spec.instance_type}</instanceType>"
        f"<instancePlatform>Linux/UNIX</instancePlatform>"
        f"<availabilityZone>{spec.zone}</availabilityZone><tenancy>default</tenancy>"
        f"<totalInstanceCount>{spec.total}</totalInstanceCount>"
        f"<availableInstanceCount>{spec.available}</availableInstanceCount>"
        f"<state>{spec.state}</state><startDate>{spec.start}</startDate>{end}"
        f"<instanceMatchCriteria>open</instanceMatchCriteria>"
        f"<reservationType>{spec.kind}</reservationType><tagSet/></item>"
    )
