"""Current spot prices per instance type from EC2 DescribeSpotPriceHistory (Query API, XML).

https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html
A GET signed with SigV4 (service `ec2`), `ProductDescription.1=Linux/UNIX`, StartTime and
EndTime both now (the price in effect now, per zone), paged with `NextToken`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from providers.aws.sigv4 import Credentials, canonical_query, sign_get
from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from providers.cloud.http import CloudHttp

API_VERSION = "2016-11-15"
MAX_PAGES = 1000
MAX_PAGE_BYTES = 16 << 20


def add_lowest(lowest: dict[str, float], items: list[tuple[str, str, float]]) -> None:
    """Keep, per instance type, the lowest current spot price across the zones."""
    for instance_type, _zone, price in items:
        if instance_type not in lowest or price < lowest[instance_type]:
            lowest[instance_type] = price


def parse_page(body: bytes) -> tuple[list[tuple[str, str, float]], str]:
    """([(instance type, zone, price)], next token) of one response page."""
    from xml.etree import ElementTree

    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError as exc:
        raise ShoalError(f"malformed DescribeSpotPriceHistory response ({exc})") from None
    if _local(root.tag) != "DescribeSpotPriceHistoryResponse":
        raise ShoalError(f"unexpected DescribeSpotPriceHistory response <{_local(root.tag)}>")
    items: list[tuple[str, str, float]] = []
    token = ""
    for child in root:
        name = _local(child.tag)
        if name == "nextToken":
            token = (child.text or "").strip()
        elif name == "spotPriceHistorySet":
            for item in child:
                fields = {_local(f.tag): (f.text or "").strip() for f in item}
                try:
                    price = float(fields.get("spotPrice", ""))
                except ValueError:
                    continue
                if fields.get("instanceType"):
                    items.append(
                        (fields["instanceType"], fields.get("availabilityZone", ""), price)
                    )
    return items, token


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def fetch_spot_prices(
    http: CloudHttp,
    endpoint: str,
    region: str,
    credentials: Credentials,
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, float]:
    """Every page of DescribeSpotPriceHistory for Linux/UNIX in `region`, reduced to the
    lowest price per instance type."""
    parts = urlsplit(endpoint)
    host = parts.netloc.rsplit("@", 1)[-1]
    path = parts.path or "/"
    lowest: dict[str, float] = {}
    token = ""
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        at = now()
        stamp = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        params = {
            "Action": "DescribeSpotPriceHistory",
            "Version": API_VERSION,
            "ProductDescription.1": "Linux/UNIX",
            "StartTime": stamp,
            "EndTime": stamp,
            "MaxResults": "1000",
        }
        if token:
            params["NextToken"] = token
        headers = sign_get(
            credentials,
            host=host,
            path=path,
            params=params,
            region=region,
            service="ec2",
            now=at,
        )
        url = f"{parts.scheme}://{parts.netloc}{path}?{canonical_query(params)}"
        body = bytearray()
        for chunk in http.stream(url, headers=headers, what=f"EC2 spot prices {region}"):
            body += chunk
            if len(body) > MAX_PAGE_BYTES:
                raise ShoalError("a DescribeSpotPriceHistory page is larger than 16 MB")
        items, token = parse_page(bytes(body))
        add_lowest(lowest, items)
        if not token or token in seen:
            break
        seen.add(token)
    return lowest
