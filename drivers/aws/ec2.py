"""The EC2 and SSM calls of the `aws` driver, over providers/aws/api.py (SigV4, paging,
throttling retried by the API's own codes, every credential scrubbed from what a server
sends back).

An error answer that carries an API code the driver can act on (InvalidAMIID.NotFound,
InsufficientInstanceCapacity, VcpuLimitExceeded, ...) is an `ApiError` with that `code`,
which the driver turns into a message naming the option or setting at fault. Refusals
(UnauthorizedOperation, AuthFailure, ...) stay CredentialsError (77), throttling that
outlasts the retries RetryableError (75), an unreachable endpoint or a server failing
ProviderUnreachableError (69).

RunInstances is never retried on HTTP 500: EC2 answers InsufficientInstanceCapacity with
it, which the driver handles itself (fallback to other zones and types). Retries that do
happen (throttling, a dropped connection) repeat the same ClientToken, which makes EC2
return the instance it launched the first time instead of launching another.

Formats: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html,
API_DescribeInstances.html, API_TerminateInstances.html, API_DescribeInstanceTypes.html,
API_DescribeInstanceTypeOfferings.html, API_DescribeImages.html, API_CreateImage.html,
API_GetConsoleOutput.html, API_DescribeSpotPriceHistory.html, API_DescribeSubnets.html,
https://docs.aws.amazon.com/systems-manager/latest/APIReference/API_GetParameter.html
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from providers.aws.api import (
    REFUSED,
    THROTTLED,
    Endpoint,
    aws_http,
    child,
    items,
    text,
)
from providers.core.errors import ShoalError
from providers.core.http.policy import RETRY_STATUSES, Failure, RetryPolicy, Rule

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    import httpx

    from providers.aws.sigv4 import Credentials

PROVIDER = "aws"
SSM_TARGET = "AmazonSSM."
# Server failures that are the service's, not the request's: left to the HTTP rules (69).
_SERVER_FAILURES = frozenset(
    {"InternalError", "InternalFailure", "ServiceUnavailable", "Unavailable"}
)
HOLDING = ("pending", "running")
# Every state but terminated: what a bare handle's cleanup looks for.
LIVE = ("pending", "running", "shutting-down", "stopping", "stopped")
PAGE_SIZE = "1000"


class ApiError(ShoalError):
    """An EC2 or SSM error answer with its own code: `code` ("InvalidAMIID.NotFound") and
    `detail` (the API's message, scrubbed)."""

    def __init__(self, text: str) -> None:
        code, _, detail = text.partition("\x1f")
        self.code = code
        self.detail = detail.removeprefix(f"{code}: ") if code else detail
        super().__init__(f"{code}: {self.detail}" if code else detail)

    def where(self, region: str, action: str) -> ApiError:
        """The same error, its message saying which call it answered."""
        self.args = (f"{PROVIDER}: {region} {action}: {self.code}: {self.detail}",)
        return self


def _acted_on(failure: Failure) -> bool:
    return (
        bool(failure.message)
        and failure.reason not in REFUSED
        and failure.reason not in THROTTLED
        and failure.reason not in _SERVER_FAILURES
        and failure.code not in (401, 403)
    )


API_RULE = Rule(range(400, 600), ApiError, "{reason}\x1f{message}", when=_acted_on)


@dataclass(frozen=True)
class Instance:
    """One instance as DescribeInstances (or RunInstances) tells it."""

    id: str
    state: str
    instance_type: str = ""
    zone: str = ""
    subnet: str = ""
    image: str = ""
    private_ip: str = ""
    public_ip: str = ""
    mac: str = ""
    lifecycle: str = ""  # "spot", "capacity-block" or "" (on-demand)
    launched: str = ""
    reason_code: str = ""  # stateReason/code: Client.UserInitiatedShutdown, ...
    reason_message: str = ""
    transition: str = ""  # <reason>: "User initiated (2026-12-01 10:12:25 GMT)"
    client_token: str = ""
    reservation: str = ""  # the capacity reservation it runs in (capacityReservationId)
    tags: Mapping[str, str] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        return self.state in HOLDING


@dataclass(frozen=True)
class TypeShape:
    """What DescribeInstanceTypes says of a type (memory in GiB)."""

    name: str
    vcpus: float | None
    memory_gib: float | None
    arch: str = ""
    gpu: str = ""
    gpu_count: int = 0
    gpu_memory_gib: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "vcpus": self.vcpus,
            "memory_gib": self.memory_gib,
            "arch": self.arch,
            "gpu": self.gpu,
            "gpu_count": self.gpu_count,
            "gpu_memory_gib": self.gpu_memory_gib,
        }


@dataclass(frozen=True)
class Image:
    id: str
    state: str
    arch: str
    root_device: str
    name: str = ""


class Ec2:
    """EC2 (and SSM) in one region, signed with `credentials`. Not thread-safe."""

    def __init__(
        self,
        region: str,
        credentials: Credentials,
        *,
        ec2_url: str,
        ssm_url: str,
        auth_hint: str,
        policy: RetryPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.region = region
        self.credentials = credentials
        self.ec2_url = ec2_url.replace("{region}", region).rstrip("/")
        self.ssm_url = ssm_url.replace("{region}", region).rstrip("/")
        self.auth_hint = auth_hint
        self.policy = policy or RetryPolicy()
        self.transport = transport
        self.now = now
        self._endpoints: dict[str, Endpoint] = {}

    def _endpoint(self, kind: str) -> Endpoint:
        if kind not in self._endpoints:
            policy = self.policy
            if kind == "launch":
                policy = replace(policy, statuses=RETRY_STATUSES - {500})
            http = aws_http(
                PROVIDER,
                auth_hint=self.auth_hint,
                credentials=self.credentials,
                policy=policy,
                transport=self.transport,
            )
            http.errors = http.errors.extended(API_RULE)
            url, service = (self.ssm_url, "ssm") if kind == "ssm" else (self.ec2_url, "ec2")
            self._endpoints[kind] = Endpoint(
                http, url, self.region, service, self.credentials, self.now
            )
        return self._endpoints[kind]

    def close(self) -> None:
        for endpoint in self._endpoints.values():
            endpoint.http.close()
        self._endpoints.clear()

    def query(
        self, action: str, params: Mapping[str, str] | None = None, *, kind: str = "ec2"
    ) -> Element:
        try:
            return self._endpoint(kind).query(action, params)
        except ApiError as exc:
            raise exc.where(self.region, action) from None

    def pages(self, action: str, params: Mapping[str, str] | None = None) -> Iterator[Element]:
        try:
            yield from self._endpoint("ec2").query_pages(action, params)
        except ApiError as exc:
            raise exc.where(self.region, action) from None

    # -- instances -----------------------------------------------------------------------

    def run_instances(self, params: Mapping[str, str]) -> list[Instance]:
        root = self.query("RunInstances", params, kind="launch")
        return [_instance(item) for item in items(root, "instancesSet")]

    def describe_instances(
        self,
        ids: Sequence[str] = (),
        *,
        tags: Mapping[str, str] | None = None,
        states: Sequence[str] = (),
    ) -> list[Instance]:
        """The instances with these ids, or carrying these tags, in these states (all when
        none are given). An id EC2 does not know (terminated long ago) is simply absent."""
        params: dict[str, str] = {}
        for n, ident in enumerate(ids, 1):
            params[f"InstanceId.{n}"] = ident
        filters = [(f"tag:{key}", [value]) for key, value in (tags or {}).items()]
        if states:
            filters.append(("instance-state-name", list(states)))
        for n, (name, values) in enumerate(filters, 1):
            params[f"Filter.{n}.Name"] = name
            for m, value in enumerate(values, 1):
                params[f"Filter.{n}.Value.{m}"] = value
        if not ids:
            params["MaxResults"] = PAGE_SIZE  # not allowed beside instance ids
        found: list[Instance] = []
        try:
            for root in self.pages("DescribeInstances", params):
                for reservation in items(root, "reservationSet"):
                    found.extend(_instance(i) for i in items(reservation, "instancesSet"))
        except ApiError as exc:
            if exc.code != "InvalidInstanceID.NotFound" or len(ids) != 1:
                raise
            return []
        wanted = set(states)
        return [i for i in found if not wanted or i.state in wanted]

    def terminate(self, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        """Instance id -> (previous state, current state); ids EC2 no longer knows are left
        out (terminated long ago: nothing to end)."""
        if not ids:
            return {}
        params = {f"InstanceId.{n}": ident for n, ident in enumerate(ids, 1)}
        try:
            root = self.query("TerminateInstances", params)
        except ApiError as exc:
            if exc.code != "InvalidInstanceID.NotFound":
                raise
            if len(ids) == 1:
                return {}
            # One of several is unknown: end the others one by one.
            out: dict[str, tuple[str, str]] = {}
            for ident in ids:
                out.update(self.terminate([ident]))
            return out
        return {
            text(item, "instanceId"): (
                text(item, "previousState", "name"),
                text(item, "currentState", "name"),
            )
            for item in items(root, "instancesSet")
        }

    def create_image(
        self, instance_id: str, name: str, *, no_reboot: bool, tags: Mapping[str, str]
    ) -> str:
        params = {"InstanceId": instance_id, "Name": name, "NoReboot": str(no_reboot).lower()}
        params.update(tag_specification(1, "image", tags))
        return text(self.query("CreateImage", params), "imageId")

    def console_output(self, instance_id: str) -> tuple[str, bytes]:
        """(when EC2 took it, the console output's bytes), the latest EC2 has."""
        import base64
        import binascii

        root = self.query("GetConsoleOutput", {"InstanceId": instance_id, "Latest": "true"})
        raw = text(root, "output")
        try:
            data = base64.b64decode(raw, validate=False) if raw else b""
        except (binascii.Error, ValueError):
            data = raw.encode()
        return text(root, "timestamp"), data

    # -- types, images, prices -----------------------------------------------------------

    def instance_types(self, names: Sequence[str]) -> dict[str, TypeShape]:
        params = {f"InstanceType.{n}": name for n, name in enumerate(names, 1)}
        shapes: dict[str, TypeShape] = {}
        for root in self.pages("DescribeInstanceTypes", params):
            for item in items(root, "instanceTypeSet"):
                shape = _type_shape(item)
                shapes[shape.name] = shape
        return shapes

    def offered(self, names: Sequence[str]) -> set[str]:
        """Which of these types the region offers (DescribeInstanceTypeOfferings)."""
        params = {"LocationType": "region", "Filter.1.Name": "instance-type"}
        params.update({f"Filter.1.Value.{n}": name for n, name in enumerate(names, 1)})
        found: set[str] = set()
        for root in self.pages("DescribeInstanceTypeOfferings", params):
            found.update(text(i, "instanceType") for i in items(root, "instanceTypeOfferingSet"))
        return found

    def image(self, image_id: str) -> Image | None:
        root = self.query("DescribeImages", {"ImageId.1": image_id})
        for item in items(root, "imagesSet"):
            return Image(
                id=text(item, "imageId"),
                state=text(item, "imageState"),
                arch=text(item, "architecture"),
                root_device=text(item, "rootDeviceName"),
                name=text(item, "name"),
            )
        return None

    def zones(self) -> list[str]:
        params = {"Filter.1.Name": "state", "Filter.1.Value.1": "available"}
        root = self.query("DescribeAvailabilityZones", params)
        return sorted(text(i, "zoneName") for i in items(root, "availabilityZoneInfo"))

    def subnet_zones(self, ids: Sequence[str]) -> dict[str, str]:
        """Subnet id -> its availability zone (DescribeSubnets)."""
        params = {f"SubnetId.{n}": ident for n, ident in enumerate(ids, 1)}
        root = self.query("DescribeSubnets", params)
        return {text(i, "subnetId"): text(i, "availabilityZone") for i in items(root, "subnetSet")}

    def spot_prices(self, instance_type: str) -> dict[str, float]:
        """Zone -> the spot price of `instance_type` (Linux/UNIX) in effect now."""
        from providers.aws.spot import parse_page

        stamp = self.now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        params = {
            "InstanceType.1": instance_type,
            "ProductDescription.1": "Linux/UNIX",
            "StartTime": stamp,
            "EndTime": stamp,
            "MaxResults": PAGE_SIZE,
        }
        prices: dict[str, float] = {}
        for root in self.pages("DescribeSpotPriceHistory", params):
            for name, zone, price in parse_page(root):
                if name == instance_type and (zone not in prices or price < prices[zone]):
                    prices[zone] = price
        return prices

    def ssm_parameter(self, name: str) -> str:
        try:
            answer = self._endpoint("ssm").call_json(SSM_TARGET + "GetParameter", {"Name": name})
        except ApiError as exc:
            raise exc.where(self.region, "SSM GetParameter") from None
        parameter = answer.get("Parameter")
        value = parameter.get("Value") if isinstance(parameter, dict) else None
        if not isinstance(value, str):
            raise ShoalError(f"aws: SSM GetParameter {name}: the answer has no Parameter.Value")
        return value


def tag_specification(number: int, kind: str, tags: Mapping[str, str]) -> dict[str, str]:
    """`TagSpecification.N` for one resource type, as RunInstances and CreateImage take it."""
    params = {f"TagSpecification.{number}.ResourceType": kind}
    for n, (key, value) in enumerate(tags.items(), 1):
        params[f"TagSpecification.{number}.Tag.{n}.Key"] = key
        params[f"TagSpecification.{number}.Tag.{n}.Value"] = value
    return params


# -- XML -------------------------------------------------------------------------------------


def _instance(item: Element) -> Instance:
    tags = {text(t, "key"): text(t, "value") for t in items(item, "tagSet")}
    mac = ""
    for interface in items(item, "networkInterfaceSet"):
        if text(interface, "attachment", "deviceIndex") in ("0", ""):
            mac = text(interface, "macAddress")
            break
    return Instance(
        id=text(item, "instanceId"),
        state=text(item, "instanceState", "name"),
        instance_type=text(item, "instanceType"),
        zone=text(item, "placement", "availabilityZone"),
        subnet=text(item, "subnetId"),
        image=text(item, "imageId"),
        private_ip=text(item, "privateIpAddress"),
        public_ip=text(item, "ipAddress"),
        mac=mac,
        lifecycle=text(item, "instanceLifecycle"),
        launched=text(item, "launchTime"),
        reason_code=text(item, "stateReason", "code"),
        reason_message=text(item, "stateReason", "message"),
        transition=text(item, "reason"),
        client_token=text(item, "clientToken"),
        reservation=text(item, "capacityReservationId"),
        tags=tags,
    )


def _number(item: Element, *path: str) -> float | None:
    try:
        value = float(text(item, *path))
    except ValueError:
        return None
    return value if value == value and 0 <= value < float("inf") else None


def _type_shape(item: Element) -> TypeShape:
    from providers import gpus

    devices = items(item, "gpuInfo", "gpus") or items(item, "neuronInfo", "neuronDevices")
    devices = devices or items(item, "inferenceAcceleratorInfo", "accelerators")
    models = [gpus.model(text(d, "name")) for d in devices if text(d, "name")]
    count = sum(int(_number(d, "count") or 0) for d in devices)
    per_gpu = 0.0
    if devices and child(devices[0], "memoryInfo") is not None:
        per_gpu = (_number(devices[0], "memoryInfo", "sizeInMiB") or 0.0) / 1024
    memory = _number(item, "memoryInfo", "sizeInMiB")
    arches = [
        (c.text or "").strip() for c in items(item, "processorInfo", "supportedArchitectures")
    ]
    return TypeShape(
        name=text(item, "instanceType"),
        vcpus=_number(item, "vCpuInfo", "defaultVCpus"),
        memory_gib=memory / 1024 if memory is not None else None,
        arch=arch_of(arches[0]) if arches else "",
        gpu=models[0] if models else "",
        gpu_count=count,
        gpu_memory_gib=round(per_gpu, 2),
    )


def arch_of(name: str) -> str:
    """EC2's architecture names as the price catalog spells them (`x86_64`, `arm64`)."""
    return {"x86_64_mac": "x86_64", "arm64_mac": "arm64", "i386": "x86_64"}.get(name, name)
