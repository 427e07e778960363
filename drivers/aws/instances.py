"""The `aws` driver's instances over one run: launching (Ctrl-C answered at once), waiting
for one to run, seeing one as EC2 does now, and ending an allocation's, including those a
bare handle (the cleanup of an interrupted or killed alloc) knows only by the allocation's
tag.

A launch whose answer was not read is in doubt: RunInstances may have launched an instance
that DescribeInstances does not list yet (eventually consistent). The launch notes
(drivers/vm/launches.py) say which launches are young enough for an empty answer to
prove nothing; while one is, nothing is believed ended that EC2 merely does not list:

- an unanswered RunInstances (its retries spent) is followed by lookups by tag, backing
  off, until its instance shows (the allocation then has it) or the window has passed;
- Ctrl-C during RunInstances interrupts at once; the cleanup then waits a few seconds, with
  interrupts held, for the answer or a lookup by tag, ends what they show, and otherwise
  leaves the allocation to the next command's recovery (`LeftForRecovery`);
- a recovery, a `free` or a `status` that finds nothing for a young launch says so
  (`LaunchInDoubt`: the row stays as it is) instead of settling it.

What the run did is kept here: the instances it launched for each allocation, its
RunInstances calls, the allocations whose launch Ctrl-C interrupted, the instances it
terminated (never twice), and for a moment what an instance looked like (`status ID` asks
status() then describe(): one DescribeInstances).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar, cast

from drivers.aws.ec2 import HOLDING, LIVE, ApiError, Ec2, Instance
from drivers.aws.state import ALLOCATION_TAG, MANAGED_BY_TAG
from drivers.vm.launches import Launches, LeftForRecovery
from providers.core.errors import (
    ConfigError,
    CredentialsError,
    NotFoundError,
    RetryableError,
    ShoalError,
    UsageError,
)

SEEN_FOR_SECONDS = 2.0
# What says RunInstances was not carried out: an error answer with its code, a refusal, the
# throttling that outlasted the retries, a URL no request can go to. Anything else (no
# answer, a server failing, an answer that cannot be read) leaves the launch in doubt.
NOT_LAUNCHED = (ApiError, CredentialsError, RetryableError, UsageError, ConfigError, NotFoundError)
T = TypeVar("T")


@dataclass(frozen=True)
class Doubt:
    """The timings of a launch in doubt (the driver's, handed over at each call)."""

    window: float  # how long after a launch an empty answer proves nothing
    poll: float  # the first wait between lookups by tag (doubled each time, up to 30 s)
    grace: float  # how long the cleanup of an interrupted launch may take


class LaunchInDoubt(RetryableError):
    """RunInstances for the allocation was sent lately and EC2 lists nothing for it yet:
    nothing can be said ended. A recovery keeps the row ORPHANED (holding its capacity),
    `free` and `status` leave it as it is; the next command asks again."""


class Call(Generic[T]):
    """A call on a thread of its own: waiting for it can be interrupted (Ctrl-C reaches
    the main thread at once) or given up after a while, the call going on."""

    def __init__(self, call: Callable[[], T]) -> None:
        self._done = threading.Event()
        self._value: T | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(call,), daemon=True).start()

    def _run(self, call: Callable[[], T]) -> None:
        try:
            self._value = call()
        except BaseException as exc:
            self._error = exc
        finally:
            self._done.set()

    def wait(self, seconds: float | None = None) -> bool:
        """Whether it ended within `seconds` (None: until it ends)."""
        if seconds is not None:
            return self._done.wait(max(seconds, 0.0))
        while not self._done.wait(0.5):
            pass
        return True

    def result(self) -> T:
        """What it returned, or its error raised; only once it ended."""
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


class Instances:
    def __init__(self, launches: Launches, warn: Callable[[str], None]) -> None:
        self._notes = launches
        self._warn = warn
        self._launched: dict[str, list[str]] = {}  # allocation id -> instances launched
        self._calls: dict[str, Call[list[Instance]]] = {}  # its RunInstances in this run
        self._interrupted: set[str] = set()  # Ctrl-C ended their allocate
        self._ended: set[str] = set()
        self._seen: dict[str, tuple[float, Instance | None]] = {}

    # -- launching -----------------------------------------------------------------------

    def run(
        self, ec2: Ec2, params: dict[str, str], allocation_id: str, doubt: Doubt
    ) -> list[Instance]:
        """RunInstances, noted first. A refusal launched nothing; an answer never read (its
        retries spent) is settled by looking for the allocation's tag until the window has
        passed; Ctrl-C leaves it to the cleanup."""
        self._notes.sent(allocation_id, ec2.region, window=doubt.window)
        try:
            call: Call[list[Instance]] = Call(lambda: ec2.run_instances(params))
            self._calls[allocation_id] = call
            call.wait()
            try:
                found = call.result()
            except NOT_LAUNCHED:
                self._notes.forget(allocation_id)
                raise
            except ShoalError as exc:
                found = self._unanswered(ec2, allocation_id, exc, doubt)
            self._launched.setdefault(allocation_id, []).extend(i.id for i in found)
        except KeyboardInterrupt:
            self.interrupted(allocation_id)
            raise
        self._notes.answered(allocation_id, [i.id for i in found])
        return found

    def _unanswered(
        self, ec2: Ec2, allocation_id: str, exc: ShoalError, doubt: Doubt
    ) -> list[Instance]:
        """The instance an unanswered RunInstances launched, found by its tag; `exc` once
        the window has passed with none (nothing was launched), or when EC2 cannot be
        asked (the cleanup and `free ID` ask again)."""
        self._warn(
            f"RunInstances for {allocation_id} got no answer ({exc}); looking for its "
            "instance by its tag, as EC2 may take a while to list a new one"
        )
        wait = doubt.poll
        while True:
            try:
                found = tagged(ec2, allocation_id)
            except ShoalError:
                raise exc from None  # EC2 cannot say: the cleanup asks again, then warns
            holding = [i for i in found if i.holds]
            if holding:
                return holding[:1]
            note = self._notes.get(allocation_id)
            left = doubt.window - note.age() if note is not None else 0.0
            if found or left <= 0:
                raise exc from None  # none launched, or one already ending (the cleanup ends it)
            time.sleep(min(wait, left))
            wait = min(wait * 2, 30.0)

    def current(
        self, ec2: Ec2, instance_id: str, allocation_id: str, window: float
    ) -> Instance | None:
        """The allocation's instance as EC2 sees it now (None: EC2 no longer knows it), by
        its id, or for a bare handle (no `instance_id`) by the allocation's tag. One that
        EC2 does not list yet, launched within the window, is still pending."""
        seen = self._seen.get(allocation_id)
        if seen is not None and time.monotonic() - seen[0] < SEEN_FOR_SECONDS:
            return seen[1]
        found = ec2.describe_instances([instance_id]) if instance_id else tagged(ec2, allocation_id)
        found.sort(key=lambda i: i.state not in HOLDING)
        current = found[0] if found else None
        if current is None and instance_id and self._notes.young(allocation_id, window):
            current = Instance(
                id=instance_id,
                state="pending",
                reason_message="launched moments ago; EC2 does not list it yet",
            )
        self._seen[allocation_id] = (time.monotonic(), current)
        return current

    def unseen(self, allocation_id: str) -> None:
        """The next `current` asks EC2 again."""
        self._seen.pop(allocation_id, None)

    # -- ending --------------------------------------------------------------------------

    def launch_region(self, allocation_id: str) -> str:
        """The region its launch note names ("" without one): where a bare handle's
        instance is, whatever the config says now."""
        note = self._notes.get(allocation_id)
        return note.place if note is not None else ""

    def interrupted(self, allocation_id: str) -> None:
        """Ctrl-C ended its allocate: the cleanup to come is bounded."""
        self._interrupted.add(allocation_id)

    def end(
        self, ec2: Ec2, instance_id: str, allocation_id: str, doubt: Doubt
    ) -> tuple[list[str], dict[str, tuple[str, str]]]:
        """Terminate the allocation's instance(s): (their ids, id -> (previous state,
        current state) of those terminated now). A bare handle's are those this run or its
        launch note knows, and those carrying its tag. LaunchInDoubt when EC2 does not
        know them yet; LeftForRecovery from the cleanup of an allocate Ctrl-C interrupted
        that could not learn what it launched in time."""
        if instance_id:
            ids, ended = [instance_id], self.terminate(ec2, [instance_id], allocation_id, doubt)
        elif allocation_id in self._interrupted or allocation_id in self._calls:
            ids, ended = self._end_own(ec2, allocation_id, doubt)
        else:
            ids, ended = self._end_tagged(ec2, allocation_id, [], doubt)
        self._notes.forget(allocation_id)
        self.unseen(allocation_id)
        return ids, ended

    def _end_tagged(
        self, ec2: Ec2, allocation_id: str, known: Sequence[str], doubt: Doubt
    ) -> tuple[list[str], dict[str, tuple[str, str]]]:
        note = self._notes.get(allocation_id)
        ids = list(dict.fromkeys([*known, *self._launched.get(allocation_id, [])]))
        ids += [i for i in (note.instances if note else ()) if i not in ids]
        ended = self.terminate(ec2, ids, allocation_id, doubt)  # ended first, whatever follows
        try:
            found = [i.id for i in tagged(ec2, allocation_id)]
        except ShoalError:
            if ids:
                return ids, ended  # what it launched is ended: that is what it could leak
            raise
        more = [i for i in found if i not in ids]
        ended.update(self.terminate(ec2, more, allocation_id, doubt))
        ids += more
        if not ids and note is not None and note.age() < doubt.window:
            raise LaunchInDoubt(
                f"{allocation_id}: its RunInstances was sent {note.age():.0f}s ago and EC2 "
                "lists no instance for it yet (its API is eventually consistent); nothing is "
                f"taken as ended until it does, or {doubt.window:.0f}s after the launch: the "
                "next shoal command asks again"
            )
        return ids, ended

    def _end_own(
        self, ec2: Ec2, allocation_id: str, doubt: Doubt
    ) -> tuple[list[str], dict[str, tuple[str, str]]]:
        """The cleanup of this run's failed or interrupted allocate, bounded by
        `doubt.grace` (its caller holds interrupts): RunInstances' answer if it comes in
        the first half, then what this run, the launch note and the tag know, ended (asked
        again while EC2 does not know them yet). What is still in doubt then is left, after
        Ctrl-C, to the next command's recovery (LeftForRecovery); after a failure, to
        `free`, which the warning names."""
        deadline = time.monotonic() + doubt.grace
        call = self._calls.get(allocation_id)
        if call is None and self._notes.get(allocation_id) is None:
            return [], {}  # interrupted before RunInstances was sent
        known: list[str] = []
        if call is not None and call.wait(doubt.grace / 2):
            try:
                known = [i.id for i in call.result()]
            except NOT_LAUNCHED:
                return [], {}
            except Exception:  # unanswered: in doubt, settled below
                known = []

        def settle() -> tuple[list[str], dict[str, tuple[str, str]]]:
            pause = 0.25
            while True:
                try:
                    return self._end_tagged(ec2, allocation_id, known, doubt)
                except LaunchInDoubt:
                    if time.monotonic() + pause >= deadline:
                        raise
                time.sleep(pause)
                pause *= 2

        settling = Call(settle)
        if settling.wait(deadline - time.monotonic()):
            try:
                return settling.result()
            except ShoalError as exc:
                why = str(exc)
        else:
            why = f"EC2 did not answer within {doubt.grace:.0f}s"
        if allocation_id in self._interrupted:
            self._warn(
                f"{allocation_id}: interrupted while launching, and what it launched is not "
                f"known yet ({why}); the next shoal command looks for it by its tag and ends it"
            )
            raise LeftForRecovery
        self._warn(
            f"{allocation_id}: whether it launched an instance is not known yet ({why}); "
            f"`shoal free {allocation_id}` ends any that carries its tag (`shoal status "
            "--remote aws` lists them)"
        )
        raise LaunchInDoubt(why)

    def terminate(
        self, ec2: Ec2, ids: Sequence[str], allocation_id: str, doubt: Doubt
    ) -> dict[str, tuple[str, str]]:
        """TerminateInstances; an id EC2 does not know was terminated long ago, unless the
        allocation's launch is younger than the window (then it may not be known yet)."""
        left = [i for i in ids if i not in self._ended]
        if not left:
            return {}
        ended = ec2.terminate(left)
        unknown = [i for i in left if i not in ended]
        self._ended.update(i for i in left if i in ended)
        note = self._notes.young(allocation_id, doubt.window) if unknown else None
        if note is not None:
            raise LaunchInDoubt(
                f"{allocation_id}: EC2 does not know {', '.join(unknown)} yet (launched "
                f"{note.age():.0f}s ago, and its API is eventually consistent); nothing is "
                f"taken as ended until it does, or {doubt.window:.0f}s after the launch: the "
                "next shoal command asks again"
            )
        self._ended.update(unknown)
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
