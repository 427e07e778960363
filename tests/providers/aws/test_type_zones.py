"""The zones that offer each instance type, fetched with an AWS account's capacity: EC2
DescribeInstanceTypeOfferings (LocationType availability-zone, every page) against the
loopback AWS (quotaserver.py, SigV4 checked) and against moto's EC2, and kept in the cached
snapshot (a snapshot cached before zones were read still loads)."""

# ruff: noqa: F811

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from providers.accounts.capacity import dumps, loads
from providers.accounts.model import AccountSnapshot
from providers.core.errors import CredentialsError, ShoalError
from tests.providers.aws.quotaserver import AwsServer
from tests.providers.aws.test_accounts import (  # noqa: F401 (fixtures)
    CREDS,
    EU,
    NOW,
    US,
    accounts,
    aws,
    by_code,
    moto_base,
    stock,
)

OFFERINGS = "DescribeInstanceTypeOfferings"


def test_each_gpu_type_has_the_zones_that_offer_it_read_to_the_last_page(
    tmp_path: Path, aws: AwsServer
) -> None:
    stock(aws)
    aws.region(US).offered = {
        "p5.48xlarge": ["us-east-1b", "us-east-1a"],
        "g5.xlarge": ["us-east-1a", "us-east-1c", "us-east-1d"],
        "g6.xlarge": ["us-east-1-bos-1a"],  # a Local Zone
        "p4d.24xlarge": ["eu-west-1a"],  # a zone of another region: a server that ignored us
        "m5.large": ["us-east-1a"],  # not asked about
    }
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert snap.type_zones == {
        "g5.xlarge": ["us-east-1a", "us-east-1c", "us-east-1d"],
        "g6.xlarge": ["us-east-1-bos-1a"],
        "p5.48xlarge": ["us-east-1a", "us-east-1b"],
    }
    # The GPU families by their letters: a GPU type they match and that is not listed is
    # offered in no zone; any other type's zones are not known, and why is said.
    assert snap.zones_cover == ["dl*", "g*", "inf*", "p*", "trn*"]
    assert snap.zones_unknown == (
        "aws lists the zones of its GPU types only (dl*, g*, inf*, p*, trn*)"
    )
    # Seven offerings of those families, two a page: four pages, each asked alike, signed.
    assert aws.calls_to(OFFERINGS) == ["", "2", "4", "6"]
    asked = [s.query for s in aws.seen if s.query.get("Action") == [OFFERINGS]]
    assert all(q["LocationType"] == ["availability-zone"] for q in asked)
    assert all(q["MaxResults"] == ["1000"] and q["Filter.1.Name"] == ["instance-type"]
               for q in asked)  # fmt: skip
    assert sorted(v[0] for k, v in asked[0].items() if k.startswith("Filter.1.Value.")) == [
        "dl*", "g*", "inf*", "p*", "trn*"
    ]  # fmt: skip
    assert aws.bad_signatures == 0
    # Zones are not capacity: the sources that `resources` names stay the same.
    assert not any(OFFERINGS in s for s in snap.sources)


def test_a_refused_zone_list_leaves_zones_unknown_and_the_capacity_stands(
    tmp_path: Path, aws: AwsServer
) -> None:
    stock(aws)
    aws.region(US).offered = {"p5.48xlarge": ["us-east-1a"]}
    aws.refuse[US, OFFERINGS] = "UnauthorizedOperation"
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert snap.type_zones is None and snap.zones_cover == []
    assert snap.zones_unknown == (
        f"{OFFERINGS} was refused in {US} (UnauthorizedOperation); grant "
        "ec2:DescribeInstanceTypeOfferings"
    )
    assert by_code(snap) and snap.usage and snap.reservations


def test_a_failed_zone_list_leaves_zones_unknown_and_an_empty_one_offers_none(
    tmp_path: Path, aws: AwsServer
) -> None:
    stock(aws)
    aws.garbage.add((US, OFFERINGS))
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert snap.type_zones is None and snap.zones_cover == []
    assert snap.zones_unknown.startswith(f"{OFFERINGS} failed in {US}: ")
    assert "malformed" in snap.zones_unknown
    aws.garbage.clear()
    aws.region(US).offered = {}  # a region without GPU types
    [snap] = accounts(tmp_path, aws).fetch([US])
    assert snap.type_zones == {} and snap.zones_cover == ["dl*", "g*", "inf*", "p*", "trn*"]


def test_the_zone_list_alone_does_not_make_refused_credentials_good(
    tmp_path: Path, aws: AwsServer
) -> None:
    aws.region(US).offered = {"m5.large": ["us-east-1a"]}
    for action in ("DescribeInstances", "DescribeCapacityReservations"):
        aws.refuse[US, action] = "AuthFailure"
    for action in ("ListServiceQuotas", "ListAWSDefaultServiceQuotas"):
        aws.refuse[US, action] = "UnrecognizedClientException"
    with pytest.raises(CredentialsError, match="every API refused"):
        accounts(tmp_path, aws).fetch([US])


def test_zones_from_moto(tmp_path: Path, moto_base: str) -> None:
    from tests.providers.aws import moto

    moto.reset(moto_base)
    with AwsServer(CREDS, (US, EU)) as server:
        server.upstream = moto_base  # EC2 from moto (one page of every offering)
        us, eu = accounts(tmp_path, server).fetch([US, EU])
    assert server.bad_signatures == 0
    assert us.type_zones is not None and eu.type_zones is not None
    # moto's data: p5.48xlarge in all six zones of us-east-1, g4dn.xlarge in five (not e).
    assert us.type_zones["p5.48xlarge"] == [f"us-east-1{z}" for z in "abcdef"]
    assert us.type_zones["g4dn.xlarge"] == [f"us-east-1{z}" for z in "abcdf"]
    assert "m5.large" not in us.type_zones  # not a GPU type: not asked
    assert all(z.startswith("eu-west-1") for zones in eu.type_zones.values() for z in zones)
    assert eu.type_zones["g5.xlarge"]


def test_the_zones_are_cached_with_the_snapshot_and_an_older_cache_still_loads() -> None:
    snap = AccountSnapshot("aws", US, NOW, type_zones={"m5.large": ["us-east-1a"]})
    again = loads(dumps(snap))
    assert again.type_zones == {"m5.large": ["us-east-1a"]} and again.zones_unknown == ""
    # A snapshot cached before zones were read: no such keys; it reads, zones unknown.
    older = json.loads(dumps(AccountSnapshot("aws", US, NOW - timedelta(minutes=1))))
    del older["type_zones"], older["zones_unknown"]
    read = loads(json.dumps(older))
    assert read.type_zones is None and read.zones_unknown == ""
    # An edited cache whose zones are not names is refused like any other bad field.
    for bad in ({"m5.large": "us-east-1a"}, {"m5.large": [1]}, ["m5.large"]):
        edited = json.loads(dumps(snap))
        edited["type_zones"] = bad
        with pytest.raises(ShoalError, match="--refresh"):
            loads(json.dumps(edited))
