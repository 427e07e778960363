"""A loopback EC2 in front of moto for the `aws` driver's tests: what moto does not do, or
cannot be made to fail at, in EC2's own XML; everything else passed through to moto.

On top of tests/providers/aws/quotaserver.py (SigV4 checked on every request, Service
Quotas at /sq/{region}, throttling, refusals, an error echoing the credentials, scripted
per (region, action)), it adds:

- RunInstances' ClientToken idempotency, as EC2 has it and moto does not: a token seen
  before gets the first answer again, nothing new is launched
  (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html);
- InsufficientInstanceCapacity (HTTP 500, as EC2 sends it) for chosen (type, place)
  pairs, a place being the subnet, the zone, or "" when the request names neither (in
  `no_spot_capacity`: for spot requests only);
- error answers for the next RunInstances requests, one each (`launch_errors`: HTTP status,
  code, message: VcpuLimitExceeded, ReservationCapacityExceeded, ...);
- answers that never come: the request is carried out (the instance launched) and the
  connection closed without a response, `drop[action]` times (a retry too: its token is
  known, its answer dropped the same);
- a delay before answering an action (`delay[action]` seconds, each retry too), announced
  by `arrived`;
- EC2's eventual consistency (`lag`): while set, the instances launched through this
  server are not known yet to other calls: left out of DescribeInstances, and
  InvalidInstanceID.NotFound when a DescribeInstances or TerminateInstances names them, as
  EC2 may answer just after RunInstances
  (https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html);
- spot prices of its own (`spot[type][zone]`), where moto has one made-up price for all;
- the requests as sent (`requests(action)`: their parameters).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any
from xml.etree import ElementTree

from tests.providers.apiserver import Reply
from tests.providers.aws.quotaserver import AwsServer, _ec2_error, _xml


class _Drop(Exception):
    """Close the connection without an answer."""


class Ec2Server(AwsServer):
    def __init__(self, credentials: Any, regions: tuple[str, ...], upstream: str) -> None:
        super().__init__(credentials, regions)
        self.upstream = upstream
        self.no_capacity: set[tuple[str, str]] = set()
        self.no_spot_capacity: set[tuple[str, str]] = set()
        self.launch_errors: list[tuple[int, str, str]] = []
        self.drop: dict[str, int] = {}
        self.delay: dict[str, float] = {}
        self.arrived = threading.Event()
        self.spot: dict[str, dict[str, float]] = {}
        self.lag = False
        self.launched: set[str] = set()  # instance ids RunInstances answered with
        self.sent: list[tuple[str, dict[str, str]]] = []  # (action, parameters)
        self._tokens: dict[str, Reply] = {}
        self._server.RequestHandlerClass = _with_drop(self._server.RequestHandlerClass)

    def requests(self, action: str) -> list[dict[str, str]]:
        with self._lock:
            return [params for name, params in self.sent if name == action]

    def _ec2(self, query: dict[str, list[str]], headers: dict[str, str]) -> Reply:
        params = {k: v[0] for k, v in query.items()}
        action = params.get("Action", "")
        if action not in ("RunInstances", "DescribeSpotPriceHistory"):
            with self._lock:
                self.sent.append((action, params))
                unknown = set(self.launched) if self.lag else set()
            named = [v for k, v in sorted(params.items()) if k.startswith("InstanceId.")]
            if action in ("DescribeInstances", "TerminateInstances") and unknown & set(named):
                missing = ", ".join(i for i in named if i in unknown)
                return _ec2_error(
                    400, "InvalidInstanceID.NotFound", f"The instance IDs '{missing}' do not exist"
                )
            reply = super()._ec2(query, headers)
            if action == "DescribeInstances" and unknown and reply.status == 200:
                return _without(reply, unknown)
            return reply
        region = headers.get("x-shoal-path", "").rsplit("/", 1)[-1]
        fault = self._fault(region, action, params, headers, "GET", b"", json_api=False)
        if fault is not None:
            return fault
        with self._lock:
            self.sent.append((action, params))
        if action == "DescribeSpotPriceHistory":
            return self._spot_prices(params) if self.spot else self._forward(params, headers)
        token = params.get("ClientToken", "")
        with self._lock:
            known = self._tokens.get(token) if token else None
        if known is not None:
            reply = known  # EC2's idempotency: the same answer, nothing launched
        else:
            place = params.get("SubnetId") or params.get("Placement.AvailabilityZone") or ""
            spot = params.get("InstanceMarketOptions.MarketType") == "spot"
            pair = (params.get("InstanceType", ""), place)
            with self._lock:
                scripted = self.launch_errors.pop(0) if self.launch_errors else None
            if scripted is not None:
                return _ec2_error(*scripted)
            if pair in self.no_capacity or (spot and pair in self.no_spot_capacity):
                return _ec2_error(
                    500,
                    "InsufficientInstanceCapacity",
                    f"We currently do not have sufficient {params.get('InstanceType')} capacity "
                    "in the Availability Zone you requested. Our system will be working on "
                    "provisioning additional capacity.",
                )
            reply = self._forward(params, headers)
            if reply.status == 200:
                with self._lock:
                    if token:
                        self._tokens[token] = reply
                    ids = re.findall(r"<instanceId>([^<]+)</instanceId>", reply.body.decode())
                    self.launched.update(ids)
        self.arrived.set()
        pause = self.delay.get(action, 0.0)
        if pause:
            time.sleep(pause)
        with self._lock:
            dropping = self.drop.get(action, 0)
            if dropping:
                self.drop[action] = dropping - 1
        if dropping:
            raise _Drop
        return reply

    def _spot_prices(self, params: dict[str, str]) -> Reply:
        wanted = {v for k, v in params.items() if k.startswith("InstanceType.")}
        rows = "".join(
            f"<item><instanceType>{name}</instanceType><productDescription>Linux/UNIX"
            f"</productDescription><spotPrice>{price:.6f}</spotPrice><timestamp>"
            f"2026-01-01T00:00:00.000Z</timestamp><availabilityZone>{zone}</availabilityZone>"
            "</item>"
            for name, zones in sorted(self.spot.items())
            if not wanted or name in wanted
            for zone, price in sorted(zones.items())
        )
        return _xml(
            "DescribeSpotPriceHistory", f"<spotPriceHistorySet>{rows}</spotPriceHistorySet>"
        )


def _without(reply: Reply, unknown: set[str]) -> Reply:
    """A DescribeInstances answer without the instances in `unknown` (and the reservations
    left empty)."""
    root = ElementTree.fromstring(reply.body)
    for reservations in root.iter("{*}reservationSet"):
        for reservation in list(reservations):
            for instances in reservation.iter("{*}instancesSet"):
                for item in list(instances):
                    if item.findtext("{*}instanceId") in unknown:
                        instances.remove(item)
                if not len(instances):
                    reservations.remove(reservation)
    return Reply(reply.status, ElementTree.tostring(root), reply.headers)


def _with_drop(base: Any) -> Any:
    class Handler(base):  # type: ignore[misc]
        def do_GET(self) -> None:
            try:
                super().do_GET()
            except _Drop:
                self.close_connection = True  # no answer at all: the client sees a hang-up

    return Handler
