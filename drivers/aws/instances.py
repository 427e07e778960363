"""The `aws` driver's instances over one run: launching with SIGINT held, waiting for one
to run, seeing one as EC2 does now, and ending an allocation's, including those a bare
handle (the cleanup of an interrupted or killed alloc) knows only by the allocation's tag.

What the run did is kept here: the instances it launched for each allocation (a Ctrl-C
right after RunInstances ends them without asking EC2), the allocations whose
RunInstances got no answer (in doubt: it may have launched one), the instances it
terminated (never twice), and for a moment what an instance looked like (`status ID`
asks status() then describe(): one DescribeInstances).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence

from drivers.aws.ec2 import HOLDING, LIVE, ApiError, Ec2, Instance
from drivers.aws.state import ALLOCATION_TAG, MANAGED_BY_TAG
from providers.core.errors import RetryableError, ShoalError

SEEN_FOR_SECONDS = 2.0


class Instances:
    def __init__(self) -> None:
        self._launched: dict[str, list[str]] = {}  # allocation id -> instances launched
        self._in_doubt: set[str] = set()  # RunInstances sent, no answer
        self._ended: set[str] = set()
        self._seen: dict[str, tuple[float, Instance | None]] = {}

    def run(self, ec2: Ec2, params: dict[str, str], allocation_id: str) -> list[Instance]:
        """RunInstances with SIGINT held until its answer is read and its instance noted
        (a Ctrl-C then undoes a launch it knows); an answer never read leaves the launch in
        doubt, which the cleanup settles by asking for the allocation's tag."""
        try:
            held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        except (AttributeError, ValueError, OSError):  # no signal masks here
            held = None
        self._in_doubt.add(allocation_id)
        try:
            found = ec2.run_instances(params)
            self._launched.setdefault(allocation_id, []).extend(i.id for i in found)
            self._in_doubt.discard(allocation_id)
            return found
        except ApiError:
            self._in_doubt.discard(allocation_id)  # refused: nothing was launched
            raise
        finally:
            if held is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)

    def current(self, ec2: Ec2, instance_id: str, allocation_id: str) -> Instance | None:
        """The allocation's instance as EC2 sees it now (None: EC2 no longer knows it), by
        its id, or for a bare handle (no `instance_id`) by the allocation's tag."""
        seen = self._seen.get(allocation_id)
        if seen is not None and time.monotonic() - seen[0] < SEEN_FOR_SECONDS:
            return seen[1]
        found = ec2.describe_instances([instance_id]) if instance_id else tagged(ec2, allocation_id)
        found.sort(key=lambda i: i.state not in HOLDING)
        current = found[0] if found else None
        self._seen[allocation_id] = (time.monotonic(), current)
        return current

    def unseen(self, allocation_id: str) -> None:
        """The next `current` asks EC2 again."""
        self._seen.pop(allocation_id, None)

    def end(
        self, ec2: Ec2, instance_id: str, allocation_id: str, *, tries: int, wait: float
    ) -> tuple[list[str], dict[str, tuple[str, str]]]:
        """Terminate the allocation's instance(s): (their ids, id -> (previous state,
        current state) of those terminated now). A bare handle's are those this run launched
        for it, ended first whatever happens next, and those carrying its tag (asked again,
        up to `tries` times `wait` seconds apart, when RunInstances may have got through
        unanswered: DescribeInstances is eventually consistent)."""
        ids = [instance_id] if instance_id else list(self._launched.get(allocation_id, []))
        ended = self.terminate(ec2, ids)
        if not instance_id:
            asks = tries if allocation_id in self._in_doubt and not ids else 1
            for attempt in range(asks):
                try:
                    found = [i.id for i in tagged(ec2, allocation_id)]
                except ShoalError:
                    if ids:
                        break  # what this run launched is ended: that is what it could leak
                    raise
                more = [i for i in found if i not in ids]
                ids += more
                ended.update(self.terminate(ec2, more))
                if ids:
                    break
                if attempt + 1 < asks:
                    time.sleep(wait)
        self.unseen(allocation_id)
        return ids, ended

    def terminate(self, ec2: Ec2, ids: Sequence[str]) -> dict[str, tuple[str, str]]:
        left = [i for i in ids if i not in self._ended]
        if not left:
            return {}
        ended = ec2.terminate(left)
        self._ended.update(left)
        return ended


def tagged(ec2: Ec2, allocation_id: str) -> list[Instance]:
    tags = {ALLOCATION_TAG: allocation_id, MANAGED_BY_TAG: "shoal"}
    return ec2.describe_instances(tags=tags, states=LIVE)


def wait_running(
    ec2: Ec2, instance: Instance, *, driver: str, limit: float, poll: float
) -> Instance:
    """The instance once it left `pending` (up to `limit` seconds); one that is not then
    running is a RetryableError."""
    deadline = time.monotonic() + limit
    while instance.state == "pending" and time.monotonic() < deadline:
        time.sleep(poll)
        found = ec2.describe_instances([instance.id])
        instance = found[0] if found else instance
    if instance.state != "running":
        why = instance.reason_message or "no reason given"
        raise RetryableError(
            f"{driver}: {instance.id} is {instance.state or 'unknown'} after "
            f"{limit:.0f}s, not running ({why})"
        )
    return instance
