"""What an instance's tags and state say about its allocation: which allocation it is,
whether it ended and why (a spot interruption, the end of its lifetime, a shutdown from
inside, a termination), and the row `status --remote aws` shows for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from drivers.aws.ec2 import Instance
from providers.core.errors import UsageError

# Set at launch (TagSpecifications), so every machine running shoal against the account
# can tell shoal's instances, their allocation and lifetime, without this one's ledger.
ALLOCATION_TAG = "shoal:allocation"
MANAGED_BY_TAG = "shoal:managed-by"
EXPIRES_TAG = "shoal:expires"
OWNER_TAG = "shoal:owner"
DRIVER_TAG = "shoal:driver"


def detail(inst: Instance | None, allocation_id: str) -> dict[str, Any]:
    if inst is None:
        return {
            "state": "gone",
            "reason": "not-found",
            "message": "EC2 no longer lists the instance (terminated over an hour ago)",
        }
    out: dict[str, Any] = {
        "state": inst.state,
        "instance_id": inst.id,
        "instance_type": inst.instance_type,
        "zone": inst.zone,
        "market": "spot" if inst.lifecycle == "spot" else "on-demand",
        "private_ip": inst.private_ip,
        "public_ip": inst.public_ip,
        "launched": inst.launched,
        "expires": inst.tags.get(EXPIRES_TAG, ""),
    }
    if not inst.holds:
        out["reason"], out["message"] = why_ended(inst)
    elif inst.reason_message:  # one EC2 does not list yet says so
        out["message"] = inst.reason_message
    return out


def why_ended(inst: Instance) -> tuple[str, str]:
    from providers.core.timeutil import utcnow

    code, message = inst.reason_code, inst.reason_message or inst.transition
    if code.startswith("Server.Spot"):
        return "spot-interruption", message
    if code == "Client.InstanceInitiatedShutdown":
        expires = inst.tags.get(EXPIRES_TAG, "")
        if expires and past(expires, utcnow()):
            return "expired", f"shut down at the end of its lifetime ({EXPIRES_TAG} {expires})"
        return "shutdown-from-inside", message
    if code == "Client.UserInitiatedShutdown":
        return "terminated", message or inst.transition
    return code or inst.state, message


def past(stamp: str, now: datetime) -> bool:
    from providers.core.timeutil import parse_time

    try:
        return bool(stamp) and parse_time(stamp, EXPIRES_TAG) <= now
    except UsageError:
        return False


def remote_rows(
    found: Iterable[Instance], *, driver: str, region: str, now: datetime
) -> list[dict[str, Any]]:
    """A row for each of shoal's instances among `found` (those with an allocation tag),
    oldest first."""
    rows = []
    for inst in found:
        if not inst.tags.get(ALLOCATION_TAG):
            continue
        said = detail(inst, inst.tags[ALLOCATION_TAG])
        expires = inst.tags.get(EXPIRES_TAG, "")
        overdue = inst.holds and past(expires, now)
        note = " ".join(
            part
            for part in (
                f"{inst.id} {inst.instance_type} in {inst.zone}",
                inst.public_ip or inst.private_ip,
                "(spot)" if inst.lifecycle == "spot" else "",
                f"({said['reason']})" if said.get("reason") else "",
                "past its expiry: `shoal free --expired --remote "
                f"{driver.partition('/')[0]}` ends it"
                if overdue
                else "",
            )
            if part
        )
        rows.append(
            {
                # The fields every driver's listing shares, then this driver's own.
                "id": inst.tags[ALLOCATION_TAG],
                "driver": driver,
                "status": inst.state,
                "created": inst.launched,
                "note": note,
                "expires": expires or None,
                "holds": inst.holds,
                "expired": overdue,
                "instance_id": inst.id,
                "instance_type": inst.instance_type,
                "region": region,
                "zone": inst.zone,
                "market": said["market"],
                "private_ip": inst.private_ip,
                "public_ip": inst.public_ip,
                "reason": said.get("reason", ""),
                "owner": inst.tags.get(OWNER_TAG, ""),
            }
        )
    return sorted(rows, key=lambda r: (str(r["created"]), str(r["id"])))
