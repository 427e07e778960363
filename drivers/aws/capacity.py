"""The `aws` driver's quota count (drivers/vm/capacity.py with AWS's vCPU quota map,
providers/aws/families.py) and the open capacity reservation a launch goes to first."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from drivers.vm import capacity as counting
from providers.core.errors import ShoalError

if TYPE_CHECKING:
    from drivers.aws.plan import Plan
    from providers.accounts.model import Reservation
    from providers.cloud.catalog import CloudCatalog
    from providers.core.settings import Settings
    from providers.core.ttlcache import TtlCache


def quota_count(
    plan: Plan,
    *,
    driver: str,
    account: str,
    catalog: CloudCatalog,
    memo: TtlCache,
    settings: Settings,
    warn: Callable[[str], None],
) -> int:
    """The count, the quotas behind it noted in `plan.capacity` (`alloc --dry-run`)."""
    from providers.aws.families import AwsQuotaMap

    who = counting.Account(
        "aws", "AWS", driver, account, catalog, memo, settings, AwsQuotaMap, warn
    )
    count, plan.capacity = counting.quota_count(who, plan.region, plan.choice.first, spot=plan.spot)
    return count


def forget(region: str, account: Callable[[], str], catalog: Callable[[], CloudCatalog]) -> None:
    counting.forget("aws", region, account, catalog)


def open_reservation(plan: Plan, catalog: CloudCatalog) -> Reservation | None:
    """An active capacity reservation of the chosen type with room in the plan's region, from
    the account's snapshot in the catalog cache: the zone an on-demand launch tries first,
    so that EC2's default (CapacityReservationPreference `open`) runs it there rather than
    beside it. A Capacity Block is not one (it takes its own market and an explicit
    target); a snapshot that cannot be read is none."""
    from providers.core.timeutil import utcnow

    try:
        ((snapshot, _stale),) = catalog.capacity().snapshots([plan.region])
    except ShoalError:
        return None
    now = utcnow()
    name = plan.choice.first.name
    room = [
        r
        for r in snapshot.reservations
        if r.kind == "capacity-reservation"
        and r.instance_type == name
        and r.state == "active"
        and r.available >= 1
        and r.zone
        and (r.start is None or r.start <= now)
        and (r.end is None or r.end > now)
    ]
    return max(room, key=lambda r: (r.available, r.id)) if room else None
