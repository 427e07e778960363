"""Current spot prices per instance type from EC2 DescribeSpotPriceHistory (Query API, XML).

https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html
A GET signed with SigV4 (service `ec2`), `ProductDescription.1=Linux/UNIX`, StartTime and
EndTime both now (the price in effect now, per zone), paged with `NextToken`
(providers/aws/api.py).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from providers.aws.api import Endpoint, items, text
from providers.aws.sigv4 import Credentials

if TYPE_CHECKING:
    from xml.etree.ElementTree import Element

    from providers.cloud.http import CloudHttp


def add_lowest(lowest: dict[str, float], found: list[tuple[str, str, float]]) -> None:
    """Keep, per instance type, the lowest current spot price across the zones."""
    for instance_type, _zone, price in found:
        if instance_type not in lowest or price < lowest[instance_type]:
            lowest[instance_type] = price


def parse_page(root: Element) -> list[tuple[str, str, float]]:
    """[(instance type, zone, price)] of one DescribeSpotPriceHistoryResponse page."""
    found: list[tuple[str, str, float]] = []
    for item in items(root, "spotPriceHistorySet"):
        try:
            price = float(text(item, "spotPrice"))
        except ValueError:
            continue
        if text(item, "instanceType"):
            found.append((text(item, "instanceType"), text(item, "availabilityZone"), price))
    return found


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
    api = Endpoint(http, endpoint, region, "ec2", credentials, now)
    stamp = now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    params = {
        "ProductDescription.1": "Linux/UNIX",
        "StartTime": stamp,
        "EndTime": stamp,
        "MaxResults": "1000",
    }
    lowest: dict[str, float] = {}
    for root in api.query_pages("DescribeSpotPriceHistory", params):
        add_lowest(lowest, parse_page(root))
    return lowest
